#!/usr/bin/python3
"""How well a `fluence lia` run's vote sums separate the corrupted
participants from the honest ones (LIA, seed 002 §III-B: Eq. 1's votes,
summed per contributor, then the k-means threshold).

One row per run directory (each holds a results.h5), in the order given:

* recall and precision of the run's own threshold (``/lia/recall``,
  ``/lia/precision``);
* the best precision any threshold reaches at recall >= 95%, in hindsight,
  on the sums the center sees (``/lia/vote_sum``, after randomized
  response) and on the true sums before it (``/lia/true_vote_sum``): the
  separation the threshold rule could have had.  A threshold T rejects
  every contributor whose sum is below T (seed 002: "filters out data with
  cumulative score below a threshold"), so the candidates are the sets
  {sum <= s} for each sum s;
* the medians of the true sums of the honest and of the corrupted
  contributors;
* M0's test accuracy, the DP-SGD noise multiplier, and when the run has FL
  rounds the last round's test accuracy of the oracle, of LIA + FedAvg and
  of LIA + centered clipping with their gaps to the oracle, and without
  filtering.

``--mean`` adds a row of the column means (the runs of one set-up over
several seeds).  Plain text, or GitHub markdown with ``--markdown``.

Usage: lia_separation.py [--markdown] [--mean] RUN_DIR [RUN_DIR ...]
"""

import argparse
import math
import sys

import numpy as np

import report_common
from report_common import Table, fmt_num, fmt_pct, render_markdown, render_plain

PROG = "lia_separation.py"
TARGET_RECALL = 0.95
FL_METHODS = ("oracle", "lia", "lia_cc", "none")
MARKDOWN_HEADER = ["run", "recall %", "precision %", "best precision at recall >= 95%, center's sums",
                   "the same, true sums", "honest true sum (median)",
                   "corrupted true sum (median)", "M0 %", "sigma", "oracle %",
                   "LIA + FedAvg % (vs oracle)", "LIA + CC % (vs oracle)", "no filtering %"]


def best_precision(sums, corrupted, recall=TARGET_RECALL):
    """The highest precision of a rejection set {sum <= s} over the sums s
    whose set holds at least `recall` of the corrupted contributors; NaN
    without corrupted contributors."""
    sums = np.asarray(sums, dtype=float)
    corrupted = np.asarray(corrupted, dtype=bool)
    if not corrupted.any():
        return math.nan
    order = np.argsort(sums, kind="stable")
    ordered, bad = sums[order], corrupted[order]
    caught, rejected = np.cumsum(bad), np.arange(1, len(sums) + 1)
    # only the last of equal sums closes a set: a threshold cannot split ties
    last = np.append(ordered[1:] != ordered[:-1], True)
    enough = last & (caught >= recall * corrupted.sum())
    return float(np.max(caught[enough] / rejected[enough]))


def parse_run(h5):
    lia = h5["lia"]
    sums, true_sums = lia["vote_sum"][()], lia["true_vote_sum"][()]
    corrupted = lia["corrupted"][()].astype(bool)
    run = {
        "recall": report_common.scalar(lia, "recall"),
        "precision": report_common.scalar(lia, "precision"),
        "best": best_precision(sums, corrupted),
        "best_true": best_precision(true_sums, corrupted),
        "honest_median": float(np.median(true_sums[~corrupted])),
        "corrupted_median": (float(np.median(true_sums[corrupted])) if corrupted.any()
                             else math.nan),
        "m0": report_common.scalar(lia, "m0_test_accuracy"),
        "sigma": report_common.scalar(lia, "noise_multiplier"),
    }
    for method in FL_METHODS:
        name = f"fl/{method}/test_accuracy"
        run[method] = float(lia[name][-1]) if name in lia else math.nan
    return run


def accuracy(value, oracle=math.nan):
    text = fmt_pct(value, 2)
    if report_common.finite(value) and report_common.finite(oracle):
        text += f" ({100 * (value - oracle):+.2f})"
    return text


def row(label, run):
    return [label, fmt_pct(run["recall"]), fmt_pct(run["precision"]),
            fmt_pct(run["best"]), fmt_pct(run["best_true"]),
            fmt_num(run["honest_median"]), fmt_num(run["corrupted_median"]),
            accuracy(run["m0"]), fmt_num(run["sigma"]), accuracy(run["oracle"]),
            accuracy(run["lia"], run["oracle"]), accuracy(run["lia_cc"], run["oracle"]),
            accuracy(run["none"])]


def separation_table(labels, runs, with_mean):
    rows = [row(label, run) for label, run in zip(labels, runs)]
    if with_mean:
        mean = {key: float(np.mean([run[key] for run in runs])) for key in runs[0]}
        rows.append(row("mean", mean))
    return Table(
        "Vote separation (LIA, seed 002)", ["run"],
        [("threshold", ["recall %", "precision %"]),
         ("best precision at recall >= 95% (hindsight)", ["center's sums %", "true sums %"]),
         ("true sums, median", ["honest", "corrupted"]),
         ("", ["M0 %", "sigma"]),
         ("last FL round, test accuracy % (vs oracle)",
          ["oracle", "LIA + FedAvg", "LIA + CC", "no filtering"])],
        rows)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Separation of the honest and corrupted vote sums of fluence lia runs")
    parser.add_argument("runs", metavar="RUN_DIR", nargs="+",
                        help="a directory holding a fluence lia results.h5")
    parser.add_argument("--mean", action="store_true", help="add a row of the column means")
    report_common.add_markdown_option(parser)
    args = parser.parse_args(argv)
    runs, status = report_common.read_run_directories(PROG, args.runs, parse_run)
    if runs is None:
        return status
    table = separation_table(report_common.run_labels(args.runs), runs, args.mean)
    print(render_markdown(table, MARKDOWN_HEADER) if args.markdown else render_plain(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
