#!/usr/bin/python3
"""Per-round filtering of `fluence lia` runs with ``lia.mode = "per_round"``
(the workshop version of LIA, seed 003 Algorithm 1: the contributors are voted
on and filtered again in every FL round).

Two tables over the run directories given (each holds a results.h5; one run
per seed of a set-up, say):

* **by round:** the mean over the runs of each round's recall and precision
  (``/lia/round/recall``, ``/lia/round/precision``), of the per-round model's
  test accuracy after that round's aggregation (``/lia/round/test_accuracy``)
  and, when the run has it, of the oracle's (``/lia/fl/oracle/test_accuracy``).
  Rounds 1, 2, 5, 10, ... and the last are shown; ``--all-rounds`` shows
  every round;
* **by run:** each run's recall and precision over its rounds (mean, min and
  max; a round that rejects nobody has no precision and is left out of it, as
  a run without it is from the by-round mean), the last round's test accuracy
  of the per-round model, of the oracle, their gap, and that of the
  single-shot ``lia`` method (filtered once, kept for every round:
  ``/lia/fl/lia/test_accuracy``), then a row of the means.

Plain text, or GitHub markdown with ``--markdown``.

Usage: lia_rounds.py [--markdown] [--all-rounds] RUN_DIR [RUN_DIR ...]
"""

import argparse
import math
import sys

import numpy as np

import report_common
from report_common import Table, fmt_pct, render_markdown, render_plain

PROG = "lia_rounds.py"
ROUND_SERIES = ("recall", "precision", "test_accuracy")
BY_RUN_MARKDOWN_HEADER = ["run", "recall %, mean (min-max) over the rounds",
                          "precision %, mean (min-max)", "per-round LIA %", "oracle %",
                          "vs oracle", "single-shot LIA %"]


def parse_run(h5):
    lia = h5["lia"]
    if "round" not in lia:
        raise report_common.ResultsError(
            f"{h5.filename}: no /lia/round (not a lia.mode = \"per_round\" run)")
    run = {name: np.asarray(lia[f"round/{name}"][()], dtype=float) for name in ROUND_SERIES}
    rounds = len(run["recall"])
    for method in ("oracle", "lia"):
        name = f"fl/{method}/test_accuracy"
        if name not in lia:
            run[method] = np.full(rounds, math.nan)
            continue
        # M0 first, then one entry per round (docs/outputs.md): entry t + 1 is round t + 1's.
        series = np.asarray(lia[name][()], dtype=float)
        if len(series) != rounds + 1:
            raise report_common.ResultsError(
                f"{h5.filename}: /lia/{name} has {len(series)} entries, expected {rounds + 1} "
                "(M0, then one per round)")
        run[method] = series[1:]
    return run


def shown_rounds(count, every_round):
    """0-based indices of the rounds shown: all, or 1, 2, 5, 10, ... and the last."""
    if every_round:
        return list(range(count))
    return sorted({0, min(1, count - 1), *range(4, count, 5), count - 1})


def gap(value, oracle):
    if not (report_common.finite(value) and report_common.finite(oracle)):
        return "-"
    return f"{100 * (value - oracle):+.2f}"


def by_round_table(runs, every_round):
    counts = {len(run["recall"]) for run in runs}
    if len(counts) != 1:
        raise ValueError(f"the runs have different numbers of rounds: {sorted(counts)}")
    rounds = shown_rounds(counts.pop(), every_round)
    rows = []
    for label, key, digits in (("recall %", "recall", 1), ("precision %", "precision", 1),
                               ("per-round LIA, test accuracy %", "test_accuracy", 2),
                               ("oracle, test accuracy %", "oracle", 2)):
        values = np.array([run[key] for run in runs])
        rows.append([label] + [fmt_pct(defined_mean(values[:, t]), digits) for t in rounds])
    return Table(f"By round, mean of {len(runs)} run(s)", ["round"],
                 [("", [str(t + 1) for t in rounds])], rows)


def spread(series):
    """Mean (min-max) over the rounds where the value is defined (precision is not in a round
    that rejects nobody)."""
    defined = series[np.isfinite(series)]
    if defined.size == 0:
        return "-"
    return f"{fmt_pct(defined.mean())} ({fmt_pct(defined.min())}-{fmt_pct(defined.max())})"


def defined_mean(values):
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else math.nan


def by_run_table(labels, runs):
    rows = []
    for label, run in zip(labels, runs):
        last, oracle = run["test_accuracy"][-1], run["oracle"][-1]
        rows.append([label, spread(run["recall"]), spread(run["precision"]),
                     fmt_pct(last, 2), fmt_pct(oracle, 2), gap(last, oracle),
                     fmt_pct(run["lia"][-1], 2)])
    last = np.mean([run["test_accuracy"][-1] for run in runs])
    oracle = np.mean([run["oracle"][-1] for run in runs])
    rows.append(["mean", fmt_pct(defined_mean([defined_mean(run["recall"]) for run in runs])),
                 fmt_pct(defined_mean([defined_mean(run["precision"]) for run in runs])),
                 fmt_pct(last, 2), fmt_pct(oracle, 2), gap(last, oracle),
                 fmt_pct(np.mean([run["lia"][-1] for run in runs]), 2)])
    return Table(
        "By run (recall and precision: mean (min-max) over the rounds)", ["run"],
        [("filtering", ["recall %", "precision %"]),
         ("last round, test accuracy %",
          ["per-round LIA", "oracle", "vs oracle", "single-shot LIA"])],
        rows)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Recall, precision and accuracy by round of fluence lia per-round runs")
    parser.add_argument("runs", metavar="RUN_DIR", nargs="+",
                        help="a directory holding a fluence lia results.h5 (lia.mode = "
                             "\"per_round\")")
    parser.add_argument("--all-rounds", action="store_true",
                        help="show every round (default: 1, 2, 5, 10, ... and the last)")
    report_common.add_markdown_option(parser)
    args = parser.parse_args(argv)
    runs, status = report_common.read_run_directories(PROG, args.runs, parse_run)
    if runs is None:
        return status
    try:
        tables = [by_round_table(runs, args.all_rounds),
                  by_run_table(report_common.run_labels(args.runs), runs)]
    except ValueError as err:
        return report_common.error(PROG, str(err))
    if args.markdown:
        text = [render_markdown(tables[0]),
                render_markdown(tables[1], BY_RUN_MARKDOWN_HEADER)]
    else:
        text = [render_plain(table) for table in tables]
    print("\n\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
