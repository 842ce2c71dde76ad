#!/usr/bin/python3
"""Plot client-removal influence estimates from Fluence results files.

Reads one or more ``<out>/results.h5`` files written by ``fluence influence``
and writes a PNG with one panel:

* when the run retrained (``[influence] retrain = true``, so that
  ``/influence/client_removal_actual`` exists): a scatter of the
  influence-function estimate (y) against the actual change of the global
  test loss after exact retraining without the client (x), one point per
  client, marker area proportional to the client's training rows, with a
  dashed y = x reference line.  The legend gives Spearman's rho and the mean
  absolute error (as stored in the file), the IHVP solver and the Hessian
  scope;
* otherwise: a bar chart of the estimated change of the test loss per client.

A small box in the upper-left corner gives the Hessian condition number and
the largest relative residual of the IHVP solves, when the file has them.
Several files are overlaid in one figure, one colour and marker per run,
labelled with the values of the deck keys that differ between the runs (the
directory's name when the decks agree); they must either all have been
retrained or none.  The figure is in the style of analysis/style.py: one
column wide (the bar chart two), vector PDF and 300-dpi PNG side by side, no
title unless ``--title`` gives one.

Usage::

    analysis/plot_influence.py out/influence/results.h5
    analysis/plot_influence.py out/cg/results.h5 out/lissa/results.h5 -o cmp.png
    analysis/plot_influence.py out/influence/results.h5 --annotate --title "LOO"

The default output is ``influence.png`` (and ``influence.pdf``) next to the
first results file.  The path of the written PNG is printed on stdout.  Errors (missing file, not an
HDF5 file, missing dataset) go to stderr with exit status 2.

Needs h5py, numpy and matplotlib (Debian: python3-h5py, python3-numpy,
python3-matplotlib).
"""

import argparse
import os
import sys
from dataclasses import dataclass
from typing import Optional

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import style  # noqa: E402  (first: the plotting style and the Agg backend)

import h5py  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

import collect  # noqa: E402  (the deck of a results file)
from report_common import decode as decode_attr  # noqa: E402

MARKERS = style.MARKERS
MARKER_AREA_MIN = 5.0    # points^2, for the smallest possible client
MARKER_AREA_MAX = 70.0   # points^2, for the largest client of all runs
MAX_LABELLED_IDS = 40     # bar chart: a tick per client id up to this


class ResultsError(Exception):
    """A results file that cannot be plotted; the message is for the user."""


@dataclass
class Run:
    """The influence results of one results file."""

    label: str
    estimate: np.ndarray
    actual: Optional[np.ndarray]
    sizes: Optional[np.ndarray]
    spearman: float
    mae: float
    solver: str
    scope: str
    iterations: Optional[np.ndarray]
    residual: Optional[np.ndarray]
    eigen_min: float
    eigen_max: float
    condition: float
    deck: dict

    @property
    def retrained(self):
        return self.actual is not None


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------


def read_array(h5, name, path):
    """Read dataset ``name`` as a 1-D array, or raise a clear ResultsError."""
    if name not in h5:
        raise ResultsError(
            f"{path}: dataset '{name}' is missing; the file may come from an "
            "older Fluence version or from another command than "
            "'fluence influence'"
        )
    return np.atleast_1d(np.asarray(h5[name][()]))


def read_optional_array(h5, name):
    """Read dataset ``name`` as a 1-D array, or None when it is absent."""
    if name not in h5:
        return None
    return np.atleast_1d(np.asarray(h5[name][()]))


def read_scalar(h5, name, default=np.nan):
    """Read a scalar dataset, or return ``default`` when it is absent."""
    if name not in h5:
        return default
    return np.asarray(h5[name][()]).reshape(-1)[0].item()


def read_string(h5, name, default=""):
    """Read a scalar string dataset, or return ``default`` when absent."""
    if name not in h5:
        return default
    return decode_attr(h5[name][()]).strip()


def run_label(path):
    """Legend label of a run: the name of the directory holding the file."""
    parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
    return parent or path


def check_file(path):
    """Raise ResultsError unless ``path`` is an existing HDF5 file."""
    if not os.path.exists(path):
        raise ResultsError(f"{path}: no such file")
    if not os.path.isfile(path):
        raise ResultsError(f"{path}: not a regular file")
    if not h5py.is_hdf5(path):
        raise ResultsError(f"{path}: not an HDF5 file")


def load_run(path):
    """Load one results file into a Run."""
    check_file(path)
    try:
        return read_run(path)
    except OSError as err:  # truncated or unreadable HDF5 file
        raise ResultsError(f"{path}: cannot read HDF5 file ({err})") from err


def check_length(path, name, values, n):
    """Raise ResultsError unless the per-client dataset has n entries."""
    if values is not None and values.size != n:
        raise ResultsError(
            f"{path}: {name} has {values.size} entries but "
            f"/influence/client_removal_estimate has {n}"
        )


def read_run(path):
    """Read the datasets and attributes of an (existing) results file."""
    with h5py.File(path, "r") as h5:
        estimate = read_array(
            h5, "/influence/client_removal_estimate", path).astype(float)
        n = estimate.size
        if n == 0:
            raise ResultsError(
                f"{path}: /influence/client_removal_estimate is empty")
        actual = read_optional_array(h5, "/influence/client_removal_actual")
        if actual is not None:
            actual = actual.astype(float)
        check_length(path, "/influence/client_removal_actual", actual, n)
        sizes = read_optional_array(h5, "/clients/size")
        if sizes is not None:
            sizes = sizes.astype(float)
        check_length(path, "/clients/size", sizes, n)
        iterations = read_optional_array(h5, "/ihvp/iterations")
        residual = read_optional_array(h5, "/ihvp/relative_residual")
        return Run(
            label=run_label(path),
            estimate=estimate,
            actual=actual,
            sizes=sizes,
            spearman=float(read_scalar(h5, "/influence/spearman")),
            mae=float(read_scalar(h5, "/influence/mae")),
            solver=read_string(h5, "/ihvp/solver"),
            scope=read_string(h5, "/influence/hessian_scope"),
            iterations=None if iterations is None
            else iterations.astype(np.int64),
            residual=None if residual is None else residual.astype(float),
            eigen_min=float(read_scalar(h5, "/hessian/eigenvalue_min")),
            eigen_max=float(read_scalar(h5, "/hessian/eigenvalue_max")),
            condition=float(read_scalar(h5, "/hessian/condition_number")),
            deck=collect.deck_of(h5),
        )


def check_consistent(runs, paths):
    """Raise ResultsError when retrained and not-retrained runs are mixed."""
    retrained = [p for r, p in zip(runs, paths) if r.retrained]
    if retrained and len(retrained) != len(runs):
        missing = [p for r, p in zip(runs, paths) if not r.retrained]
        raise ResultsError(
            f"{missing[0]} has no /influence/client_removal_actual but "
            f"{retrained[0]} has; all files must have been retrained "
            "([influence] retrain = true) or none"
        )


# --------------------------------------------------------------------------
# Plotting
# --------------------------------------------------------------------------


def fmt(value, spec=".3g"):
    """Format a number, or 'n/a' when it is NaN (absent from the file)."""
    return format(value, spec) if np.isfinite(value) else "n/a"


def method_text(run):
    """'cg, federated Hessian' (whichever parts the file has)."""
    parts = []
    if run.solver:
        parts.append(run.solver)
    if run.scope:
        parts.append(f"{run.scope} Hessian")
    return ", ".join(parts)


def run_legend(run, prefix):
    """Legend label of a run: metrics, solver and Hessian scope."""
    text = prefix
    if run.retrained:
        text += (f"Spearman \u03c1 = {fmt(run.spearman)}, "
                 f"MAE = {fmt(run.mae)}")
    method = method_text(run)
    if method:
        text += f" ({method})" if run.retrained else method
    return text or "estimate"


def diagnostics_text(run):
    """Lines for the corner box: Hessian conditioning and IHVP accuracy."""
    lines = []
    if np.isfinite(run.condition):
        line = f"cond(H) = {run.condition:.3g}"
        if np.isfinite(run.eigen_min) and np.isfinite(run.eigen_max):
            line += (f"  (\u03bb \u2208 [{run.eigen_min:.3g}, "
                     f"{run.eigen_max:.3g}])")
        lines.append(line)
    if run.residual is not None and run.residual.size:
        finite = run.residual[np.isfinite(run.residual)]
        worst = f"{finite.max():.2g}" if finite.size else "n/a"
        line = f"IHVP max rel. residual = {worst}"
        if run.iterations is not None and run.iterations.size:
            line += (f"  ({run.residual.size} solve"
                     f"{'s' if run.residual.size != 1 else ''}, "
                     f"\u2264 {int(run.iterations.max())} it.)")
        lines.append(line)
    return lines


def draw_diagnostics(ax, runs):
    """Put the Hessian / IHVP diagnostics in a box in the upper-left corner."""
    lines = []
    for run in runs:
        run_lines = diagnostics_text(run)
        if not run_lines:
            continue
        if len(runs) > 1:
            lines.append(f"{run.label}:")
            run_lines = ["  " + line for line in run_lines]
        lines.extend(run_lines)
    if not lines:
        return 0
    ax.text(0.02, 0.98, "\n".join(lines), transform=ax.transAxes,
            va="top", ha="left", fontsize="x-small", family="monospace",
            bbox=dict(boxstyle="round", facecolor="white", alpha=0.85,
                      edgecolor="0.7"), zorder=6)
    return len(lines)


def reserve_bar_headroom(ax, runs, box_lines):
    """Widen the y range so the corner box and the legend clear the bars.

    The fractions of the axes height are rough sizes of the x-small box
    lines (top) and of the small legend entries (bottom).
    """
    values = np.concatenate([run.estimate for run in runs] + [[0.0]])
    values = values[np.isfinite(values)]
    lo, hi = float(values.min()), float(values.max())
    span = hi - lo if hi > lo else 1.0
    top = 0.08 + 0.035 * box_lines if box_lines else 0.05
    bottom = 0.06 + 0.05 * len(runs)
    total = span / (1.0 - top - bottom)
    ax.set_ylim(lo - bottom * total, hi + top * total)


def marker_areas(run, largest):
    """Marker areas (points^2) proportional to the clients' row counts."""
    n = run.estimate.size
    if run.sizes is None or not np.isfinite(largest) or largest <= 0:
        return np.full(n, 0.35 * MARKER_AREA_MAX)
    sizes = np.where(np.isfinite(run.sizes), run.sizes, 0.0).clip(min=0.0)
    return np.maximum(MARKER_AREA_MAX * sizes / largest, MARKER_AREA_MIN)


def largest_client(runs):
    """The largest client size over all runs (NaN when none has sizes)."""
    sizes = [r.sizes[np.isfinite(r.sizes)] for r in runs if r.sizes is not None]
    sizes = [s for s in sizes if s.size]
    return max(float(s.max()) for s in sizes) if sizes else np.nan


def plot_scatter(ax, runs, colors, annotate):
    """Estimated (y) against actual (x) change in test loss, per client."""
    largest = largest_client(runs)
    finite_values = []
    for i, run in enumerate(runs):
        color = colors[i % len(colors)]
        prefix = f"{run.label}: " if len(runs) > 1 else ""
        ax.scatter(run.actual, run.estimate, s=marker_areas(run, largest),
                   color=color, marker=MARKERS[i % len(MARKERS)], alpha=0.7,
                   edgecolors="black", linewidths=0.3, zorder=3,
                   label=run_legend(run, prefix))
        for values in (run.actual, run.estimate):
            finite_values.append(values[np.isfinite(values)])
        if annotate:
            for k, (x, y) in enumerate(zip(run.actual, run.estimate)):
                if np.isfinite(x) and np.isfinite(y):
                    ax.annotate(str(k), (x, y), xytext=(4, 3),
                                textcoords="offset points",
                                fontsize="x-small", color=color, zorder=4)
    values = np.concatenate(finite_values)
    if values.size:
        lo, hi = float(values.min()), float(values.max())
        pad = 0.05 * (hi - lo) if hi > lo else max(abs(lo), 1e-12) * 0.05
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], linestyle="--",
                color="0.4", linewidth=1.0, zorder=2, label="y = x")
    ax.axhline(0.0, color="0.85", linewidth=0.8, zorder=1)
    ax.axvline(0.0, color="0.85", linewidth=0.8, zorder=1)
    for axis in (ax.xaxis, ax.yaxis):  # few ticks, a shared power of ten
        axis.set_major_locator(MaxNLocator(5))
    ax.ticklabel_format(style="sci", scilimits=(-2, 3), useMathText=True)
    ax.set_xlabel("actual change of the test loss (nat)")
    ax.set_ylabel("estimated change of the test loss (nat)")
    size_note = ("marker area \u221d client rows"
                 if np.isfinite(largest) else None)
    ax.legend(fontsize="x-small", loc="lower right", title=size_note,
              title_fontsize="x-small")


def plot_bars(ax, runs, colors, annotate):
    """Bar chart of the estimated change in test loss per client id."""
    width = 0.8 / len(runs)
    for i, run in enumerate(runs):
        color = colors[i % len(colors)]
        prefix = f"{run.label}: " if len(runs) > 1 else ""
        ids = np.arange(run.estimate.size)
        x = ids - 0.4 + (i + 0.5) * width
        ax.bar(x, run.estimate, width=width, color=color, alpha=0.8,
               edgecolor="black", linewidth=0.4, zorder=3,
               label=run_legend(run, prefix))
        if annotate:
            for k, (xk, yk) in enumerate(zip(x, run.estimate)):
                if np.isfinite(yk):
                    ax.annotate(str(k), (xk, yk),
                                xytext=(0, 2 if yk >= 0 else -2),
                                textcoords="offset points", ha="center",
                                va="bottom" if yk >= 0 else "top",
                                fontsize="x-small", color=color, zorder=4)
    ax.axhline(0.0, color="0.4", linewidth=0.8, zorder=2)
    n_max = max(run.estimate.size for run in runs)
    if n_max <= MAX_LABELLED_IDS:
        ax.set_xticks(np.arange(n_max))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("client id")
    ax.set_ylabel("estimated change of the test loss (nat)")
    ax.legend(fontsize="x-small", loc="lower right")


def make_figure(runs, title, annotate):
    """Build the figure for a list of runs (all retrained, or none): one
    column wide for the scatter, two for the bars."""
    retrained = runs[0].retrained
    fig, axes = style.figure(columns=1 if retrained else 2,
                             height=3.4 if retrained else 2.8)
    ax = axes[0][0]
    colors = style.colors()
    for run, label in zip(runs, style.sweep_labels(
            [run.deck for run in runs], [run.label for run in runs])):
        run.label = label
    if retrained:
        plot_scatter(ax, runs, colors, annotate)
    else:
        plot_bars(ax, runs, colors, annotate)
    box_lines = draw_diagnostics(ax, runs)
    if not retrained:
        reserve_bar_headroom(ax, runs, box_lines)
    if title:
        fig.suptitle(title)
    return fig


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def parse_args(argv):
    """Parse the command line."""
    parser = argparse.ArgumentParser(
        description="Plot client-removal influence estimates (against exact "
                    "retraining when available) from Fluence results.h5 "
                    "files (several files are overlaid).")
    parser.add_argument("results", nargs="+", metavar="RESULTS",
                        help="results.h5 file(s) written by "
                             "'fluence influence'")
    parser.add_argument("-o", "--output", metavar="OUT.png",
                        help="output PNG, with a PDF beside it (default: "
                             "influence.png next to the first results file)")
    parser.add_argument("--title", help="figure title (default: none)")
    parser.add_argument("--annotate", action="store_true",
                        help="label each point (or bar) with its client id")
    return parser.parse_args(argv)


def default_output(first_results):
    """influence.png in the directory of the first results file."""
    return os.path.join(os.path.dirname(os.path.abspath(first_results)),
                        "influence.png")


def main(argv=None):
    """Entry point; returns the process exit status."""
    args = parse_args(argv)
    try:
        runs = [load_run(path) for path in args.results]
        check_consistent(runs, args.results)
    except ResultsError as err:
        print(f"plot_influence: error: {err}", file=sys.stderr)
        return 2
    output = args.output or default_output(args.results[0])
    fig = make_figure(runs, args.title, args.annotate)
    try:
        output = style.save(fig, output)
    except OSError as err:
        print(f"plot_influence: error: cannot write {output}: {err}",
              file=sys.stderr)
        return 2
    print(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
