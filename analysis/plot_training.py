#!/usr/bin/python3
"""Plot loss and accuracy per round from Fluence results files.

Reads one or more ``<out>/results.h5`` files written by ``fluence train`` and
writes a PNG with two panels side by side:

* left:  train loss (dashed) and test loss (solid) against the round;
* right: test accuracy in percent against the round.

When the final model was improved by a Newton polish (``/model/polish_steps``
> 0), its test loss and accuracy are marked with a star at the last round.
Several files are overlaid in one figure, one colour per run, labelled with
the values of the deck keys that differ between the runs (``z = 0.8``; the
directory's name when the decks agree).  The figure is in the style of
analysis/style.py: double-column width, vector PDF and 300-dpi PNG side by
side, no title unless ``--title`` gives one.

Usage::

    analysis/plot_training.py out/quickstart/results.h5
    analysis/plot_training.py out/a/results.h5 out/b/results.h5 -o cmp.png
    analysis/plot_training.py out/quickstart/results.h5 --title "Quickstart"

The default output is ``training.png`` (and ``training.pdf``) next to the
first results file.  The path of the written PNG is printed on stdout.  Errors (missing file, not an
HDF5 file, missing dataset) go to stderr with exit status 2.

Needs h5py, numpy and matplotlib (Debian: python3-h5py, python3-numpy,
python3-matplotlib).
"""

import argparse
import math
import os
import sys
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import style  # noqa: E402  (first: the plotting style and the Agg backend)

import h5py  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

import collect  # noqa: E402  (the deck of a results file)

POLISH_LABEL = "after Newton polish"


class ResultsError(Exception):
    """A results file that cannot be plotted; the message is for the user."""


@dataclass
class Run:
    """The per-round metrics and final-model summary of one results file."""

    label: str
    rounds: np.ndarray
    train_loss: np.ndarray
    test_loss: np.ndarray
    test_accuracy: np.ndarray
    final_loss: float
    final_accuracy: float
    polish_steps: int
    deck: dict


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------


def read_array(h5, name, path):
    """Read dataset ``name`` as a 1-D array, or raise a clear ResultsError."""
    if name not in h5:
        raise ResultsError(
            f"{path}: dataset '{name}' is missing; the file may come from an "
            "older Fluence version or from another command than "
            "'fluence train'"
        )
    return np.atleast_1d(np.asarray(h5[name][()]))


def read_scalar(h5, name, default=np.nan):
    """Read a scalar dataset, or return ``default`` when it is absent."""
    if name not in h5:
        return default
    return np.asarray(h5[name][()]).item()


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


def read_run(path):
    """Read the datasets and attributes of an (existing) results file."""
    with h5py.File(path, "r") as h5:
        rounds = read_array(h5, "/metrics/round", path).astype(np.int64)
        metrics = {
            key: read_array(h5, f"/metrics/{key}", path).astype(float)
            for key in ("train_loss", "test_loss", "test_accuracy")
        }
        for key, values in metrics.items():
            if values.shape != rounds.shape:
                raise ResultsError(
                    f"{path}: /metrics/{key} has {values.size} entries but "
                    f"/metrics/round has {rounds.size}"
                )
        return Run(
            label=run_label(path),
            rounds=rounds,
            final_loss=float(read_scalar(h5, "/model/test_loss")),
            final_accuracy=float(read_scalar(h5, "/model/test_accuracy")),
            polish_steps=int(read_scalar(h5, "/model/polish_steps", 0)),
            deck=collect.deck_of(h5),
            **metrics,
        )


# --------------------------------------------------------------------------
# Plotting
# --------------------------------------------------------------------------


def plot_series(ax, x, y, **line):
    """Plot y against x, skipping NaN (rounds that were not evaluated).

    Points are joined across the gaps; markers are added when the series is
    sparse, so isolated evaluations stay visible.
    """
    finite = np.isfinite(y)
    if not finite.any():
        return
    if not finite.all():
        line.setdefault("marker", ".")
    ax.plot(x[finite], y[finite], **line)


def final_round(run):
    """The x position of the final model: the last round, or 0 if none."""
    return int(run.rounds[-1]) if run.rounds.size else 0


def show_final_star(run):
    """Whether to mark the final model: after a polish, or with no rounds."""
    return run.polish_steps > 0 or run.rounds.size == 0


STAR = dict(linestyle="none", marker="*", markersize=9, markeredgecolor="black",
            markeredgewidth=0.5)


def plot_star(ax, run, value, color):
    """Mark the final-model value of a run with a star at its last round."""
    if show_final_star(run) and np.isfinite(value):
        ax.plot(final_round(run), value, color=color, zorder=5, **STAR)


def plot_run(axes, run, color):
    """Draw one run on the loss and accuracy axes."""
    ax_loss, ax_acc = axes
    plot_series(ax_loss, run.rounds, run.train_loss, color=color,
                linestyle="--")
    plot_series(ax_loss, run.rounds, run.test_loss, color=color,
                linestyle="-")
    plot_series(ax_acc, run.rounds, 100.0 * run.test_accuracy, color=color,
                linestyle="-")
    plot_star(ax_loss, run, run.final_loss, color)
    plot_star(ax_acc, run, 100.0 * run.final_accuracy, color)


def legend_entries(runs, labels):
    """One entry per run (its colour) when there are several, then the
    line styles: train loss dashed, test solid, the star."""
    handles, texts = [], []
    several = len(runs) > 1
    for i, label in enumerate(labels if several else []):
        handles.append(Line2D([], [], color=style.color(i)))
        texts.append(label)
    ink = "0.3" if several else style.color(0)
    handles += [Line2D([], [], color=ink, linestyle="--"),
                Line2D([], [], color=ink, linestyle="-")]
    texts += ["train loss", "test loss, accuracy"]
    starred = [run for run in runs if show_final_star(run)]
    if starred:
        handles.append(Line2D([], [], color=ink, **STAR))
        texts.append(POLISH_LABEL if any(r.polish_steps > 0 for r in starred)
                     else "final model")
    return handles, texts


def style_axes(ax, ylabel):
    """Common decoration of both panels."""
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    lo, hi = ax.get_xlim()
    if hi - lo < 2:  # e.g. only the star at round 0: avoid fractional ticks
        mid = round((lo + hi) / 2)
        ax.set_xlim(mid - 1, mid + 1)
        ax.set_xticks([mid])


def make_figure(runs, title):
    """Build the two-panel figure for a list of runs."""
    labels = style.sweep_labels([run.deck for run in runs],
                                [run.label for run in runs])
    handles, texts = legend_entries(runs, labels)
    columns = 2 if len(runs) > 1 else len(texts)
    fig, axes = style.figure(columns=2, cols=2, height=2.6 + 0.17 * (
        math.ceil(len(texts) / columns) - 1), legend_rows=math.ceil(
            len(texts) / columns))
    axes = axes[0]
    for i, run in enumerate(runs):
        plot_run(axes, run, style.color(i))
    style_axes(axes[0], "loss (nat)")
    style_axes(axes[1], "test accuracy (%)")
    style.figure_legend(fig, handles, texts, columns=columns)
    if title:
        fig.suptitle(title)
    return fig


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def parse_args(argv):
    """Parse the command line."""
    parser = argparse.ArgumentParser(
        description="Plot loss and accuracy per round from Fluence "
                    "results.h5 files (several files are overlaid).")
    parser.add_argument("results", nargs="+", metavar="RESULTS",
                        help="results.h5 file(s) written by 'fluence train'")
    parser.add_argument("-o", "--output", metavar="OUT.png",
                        help="output PNG, with a PDF beside it (default: "
                             "training.png next to the first results file)")
    parser.add_argument("--title", help="figure title (default: none)")
    return parser.parse_args(argv)


def default_output(first_results):
    """training.png in the directory of the first results file."""
    return os.path.join(os.path.dirname(os.path.abspath(first_results)),
                        "training.png")


def main(argv=None):
    """Entry point; returns the process exit status."""
    args = parse_args(argv)
    try:
        runs = [load_run(path) for path in args.results]
    except ResultsError as err:
        print(f"plot_training: error: {err}", file=sys.stderr)
        return 2
    output = args.output or default_output(args.results[0])
    fig = make_figure(runs, args.title)
    try:
        output = style.save(fig, output)
    except OSError as err:
        print(f"plot_training: error: cannot write {output}: {err}",
              file=sys.stderr)
        return 2
    print(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
