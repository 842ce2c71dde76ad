#!/usr/bin/env python3
"""Test accuracy per round of Fluence and PyTorch on McMahan et al.'s set-up, from the CSVs that
bench/compare_pytorch.py writes (docs/results/networks.md), in the style of analysis/style.py:
double-column width, a panel per model, each side's mean over its seeds with a ±1 std band,
vector PDF and 300-dpi PNG.

Usage: /usr/bin/python3 analysis/plot_networks.py DIR [DIR ...] -o figure.png
  Each DIR holds <model>_<side>_<seed>.csv files (model 2nn or cnn, side fluence or pytorch;
  columns round, test loss, test accuracy). Writes figure.png and figure.pdf.
"""
import argparse
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import style  # noqa: E402  (first: the plotting style and the Agg backend)

import numpy as np  # noqa: E402

SIDES = {"fluence": ("Fluence", style.color(0)), "pytorch": ("PyTorch 1.13", style.color(1))}
TITLES = {"2nn": "2NN (199,210 parameters)", "cnn": "CNN (1,663,370 parameters)"}


def read(path):
    with open(path) as f:
        next(f)
        rows = [line.strip().split(",") for line in f if line.strip()]
    return [int(r[0]) for r in rows], [100 * float(r[2]) for r in rows]


def find_runs(directories):
    """{model: [(side, (rounds, accuracy))]} from the CSVs in the directories."""
    runs = {}
    for directory in directories:
        for path in sorted(glob.glob(os.path.join(directory, "*_*_*.csv"))):
            match = re.fullmatch(r"(2nn|cnn)_(fluence|pytorch)_(\d+)\.csv", os.path.basename(path))
            if match:
                runs.setdefault(match.group(1), []).append((match.group(2), read(path)))
    return runs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directories", nargs="+")
    parser.add_argument("-o", "--output", required=True, help="figure.png (and figure.pdf)")
    args = parser.parse_args(argv)
    runs = find_runs(args.directories)
    models = [m for m in ("2nn", "cnn") if m in runs]
    if not models:
        print(f"plot_networks: error: no <model>_<side>_<seed>.csv in {' '.join(args.directories)}",
              file=sys.stderr)
        return 2
    figure, axes = style.figure(columns=2 if len(models) > 1 else 1, cols=len(models),
                                height=2.5, legend_rows=1)
    for axis, model in zip(axes[0], models):
        for side, (name, colour) in SIDES.items():
            curves = [curve for s, curve in runs[model] if s == side]
            if not curves:
                continue
            length = min(len(rounds) for rounds, _ in curves)
            accuracy = np.array([a[:length] for _, a in curves])
            style.mean_band(axis, curves[0][0][:length], accuracy.mean(axis=0),
                            accuracy.std(axis=0) if len(curves) > 1 else np.nan, colour,
                            label=name, marker=None)
        seeds = sorted({len([c for s, c in runs[model] if s == side]) for side in SIDES} - {0})
        axis.set_title(f"{TITLES[model]}, {'/'.join(map(str, seeds))} seed"
                       f"{'s' if seeds != [1] else ''}")
        style.round_axis(axis)
        axis.set_ylabel("test accuracy (%)")
    handles, labels = style.unique_legend_entries(axes.flat)
    style.figure_legend(figure, handles, labels)
    print(style.save(figure, args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
