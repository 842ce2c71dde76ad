#!/usr/bin/env python3
"""Test accuracy per round of Fluence and PyTorch on McMahan et al.'s set-up, from the CSVs that
bench/compare_pytorch.py writes (docs/results/networks.md).

Usage: /usr/bin/python3 analysis/plot_networks.py DIR [DIR ...] -o figure.png
  Each DIR holds <model>_<side>_<seed>.csv files (model 2nn or cnn, side fluence or pytorch).
"""
import argparse
import glob
import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {"fluence": "#0072B2", "pytorch": "#D55E00"}  # Okabe-Ito blue and vermillion
TITLES = {"2nn": "2NN (199,210 parameters)", "cnn": "CNN (1,663,370 parameters)"}


def read(path):
    with open(path) as f:
        next(f)
        rows = [line.strip().split(",") for line in f]
    return [int(r[0]) for r in rows], [100 * float(r[2]) for r in rows]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directories", nargs="+")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    runs = {}
    for directory in args.directories:
        for path in sorted(glob.glob(os.path.join(directory, "*_*_*.csv"))):
            match = re.fullmatch(r"(2nn|cnn)_(fluence|pytorch)_(\d+)\.csv", os.path.basename(path))
            if match:
                runs.setdefault(match.group(1), []).append((match.group(2), read(path)))
    models = [m for m in ("2nn", "cnn") if m in runs]
    figure, axes = plt.subplots(1, len(models), figsize=(3.5 * len(models), 2.8), squeeze=False)
    for axis, model in zip(axes[0], models):
        labelled = set()
        for side, (rounds, accuracy) in runs[model]:
            axis.plot(rounds, accuracy, color=COLOURS[side], linewidth=0.9, alpha=0.8,
                      label=None if side in labelled else {"fluence": "Fluence",
                                                          "pytorch": "PyTorch 1.13"}[side])
            labelled.add(side)
        axis.set_title(TITLES[model], fontsize=9)
        axis.set_xlabel("round")
        axis.set_ylabel("test accuracy (%)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    figure.savefig(args.output, dpi=300)


if __name__ == "__main__":
    main()
