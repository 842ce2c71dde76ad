#!/usr/bin/python3
"""Plot loss and accuracy per round from Fluence results files.

Reads one or more ``<out>/results.h5`` files written by ``fluence train`` and
writes a PNG with two panels side by side:

* left:  train loss (dashed) and test loss (solid) against the round;
* right: test accuracy in percent against the round.

When the final model was improved by a Newton polish (``/model/polish_steps``
> 0), its test loss and accuracy are marked with a star at the last round.
Several files are overlaid in one figure, one colour per run, labelled with
the name of the directory holding each file.

Usage::

    analysis/plot_training.py out/quickstart/results.h5
    analysis/plot_training.py out/a/results.h5 out/b/results.h5 -o cmp.png
    analysis/plot_training.py out/quickstart/results.h5 --title "Quickstart"

The default output is ``training.png`` next to the first results file.  The
path of the written PNG is printed on stdout.  Errors (missing file, not an
HDF5 file, missing dataset) go to stderr with exit status 2.

Needs h5py, numpy and matplotlib (Debian: python3-h5py, python3-numpy,
python3-matplotlib).
"""

import argparse
import os
import sys
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # headless: must precede the pyplot import

import h5py  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

TITLE_MAX_CHARS = 80
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
    command: str


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------


def decode_attr(value):
    """Return an HDF5 attribute as ``str`` (h5py may give bytes or numpy)."""
    if isinstance(value, (bytes, np.bytes_)):
        return value.decode("utf-8", errors="replace")
    return str(value)


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
            command=decode_attr(h5.attrs.get("command", "")),
            **metrics,
        )


# --------------------------------------------------------------------------
# Plotting
# --------------------------------------------------------------------------


def shorten_command(command):
    """Shorten a command line for a title: base names, bounded length."""
    words = [os.path.basename(w) if "/" in w else w for w in command.split()]
    text = " ".join(words)
    if len(text) > TITLE_MAX_CHARS:
        text = text[: TITLE_MAX_CHARS - 1] + "\u2026"
    return text


def plot_series(ax, x, y, **style):
    """Plot y against x, skipping NaN (rounds that were not evaluated).

    Points are joined across the gaps; markers are added when the series is
    sparse, so isolated evaluations stay visible.
    """
    finite = np.isfinite(y)
    if not finite.any():
        return
    if not finite.all():
        style.setdefault("marker", ".")
    ax.plot(x[finite], y[finite], **style)


def final_round(run):
    """The x position of the final model: the last round, or 0 if none."""
    return int(run.rounds[-1]) if run.rounds.size else 0


def show_final_star(run):
    """Whether to mark the final model: after a polish, or with no rounds."""
    return run.polish_steps > 0 or run.rounds.size == 0


def plot_star(ax, run, value, color, label):
    """Mark the final-model value of a run with a star at its last round."""
    if not show_final_star(run) or not np.isfinite(value):
        return
    if run.polish_steps <= 0:
        label = label.replace(POLISH_LABEL, "final model")
    ax.plot(final_round(run), value, linestyle="none", marker="*",
            markersize=14, color=color, markeredgecolor="black",
            markeredgewidth=0.6, label=label, zorder=5)


def plot_run(axes, run, color, prefix):
    """Draw one run on the loss and accuracy axes."""
    ax_loss, ax_acc = axes
    plot_series(ax_loss, run.rounds, run.train_loss, color=color,
                linestyle="--", label=f"{prefix}train loss")
    plot_series(ax_loss, run.rounds, run.test_loss, color=color,
                linestyle="-", label=f"{prefix}test loss")
    plot_series(ax_acc, run.rounds, 100.0 * run.test_accuracy, color=color,
                linestyle="-", label=f"{prefix}test accuracy")
    plot_star(ax_loss, run, run.final_loss, color,
              f"{prefix}{POLISH_LABEL}")
    plot_star(ax_acc, run, 100.0 * run.final_accuracy, color,
              f"{prefix}{POLISH_LABEL}")


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
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")


def make_figure(runs, title):
    """Build the two-panel figure for a list of runs."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, run in enumerate(runs):
        prefix = f"{run.label}: " if len(runs) > 1 else ""
        plot_run(axes, run, colors[i % len(colors)], prefix)
    style_axes(axes[0], "loss")
    style_axes(axes[1], "test accuracy (%)")
    axes[0].set_title("Loss")
    axes[1].set_title("Test accuracy")
    fig.suptitle(title)
    fig.tight_layout()
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
                        help="output PNG (default: training.png next to "
                             "the first results file)")
    parser.add_argument("--title", help="figure title (default: the "
                                        "'command' attribute, shortened)")
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
    title = args.title or shorten_command(runs[0].command) or runs[0].label
    output = args.output or default_output(args.results[0])
    fig = make_figure(runs, title)
    try:
        fig.savefig(output, dpi=120)
    except OSError as err:
        print(f"plot_training: error: cannot write {output}: {err}",
              file=sys.stderr)
        return 2
    print(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
