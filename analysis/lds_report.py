#!/usr/bin/python3
"""FL-LDS table per estimator (issue 40, docs/math.md §1.8): the client-level
linear datamodeling score of the ``results.h5`` files of ``fluence
influence`` runs with ``influence.lds_subsets > 0`` (one file, several, or
directories searched for them, e.g. the root of ``jobs/lds.sbatch``).

Printed on stdout (aligned plain text, or GitHub markdown with
``--markdown``): one row per estimator (``/ihvp/solver``, with the deck's
CG's ``influence.preconditioner`` unless Jacobi, the default), over its runs (seeds): the runs, the
subsets and the clients each leaves out, the Spearman score ``/lds/score``
(mean, and the range over the runs), the Pearson correlation of
``/lds/predicted`` and ``/lds/actual`` (mean), the time of the estimator's
s_test (``/influence/timing/s_test``, its set-up included; absent in older
files), of scoring every client (``/influence/timing/scores``: the
spectrum, s_test and the client gradients) and of the exact subset retrains
(``/lds/timing/retrain``, summed), all as means per run.  ``--runs`` adds a row per file.  Runs of the
same seed share their ground truth (the same subsets and retrains), so the
estimators of a seed are compared on the same subsets.
"""

import argparse
import math
import os
import sys

import report_common  # first: the plotting style and the Agg backend
from report_common import Table, fmt_num

import numpy as np  # noqa: E402

PROG = "lds_report.py"


def parse(h5):
    predicted = np.asarray(h5["/lds/predicted"][...], dtype=float)
    actual = np.asarray(h5["/lds/actual"][...], dtype=float)
    deck = report_common.deck_settings(h5)
    influence = deck.get("influence", {}) if isinstance(deck, dict) else {}
    estimator = report_common.decode(h5["/ihvp/solver"][()])
    preconditioner = influence.get("preconditioner", "auto")
    if estimator == "cg" and preconditioner not in ("auto", "jacobi"):
        estimator += f" + {preconditioner}"
    pearson = math.nan
    if predicted.size > 1 and np.std(predicted) > 0 and np.std(actual) > 0:
        pearson = float(np.corrcoef(predicted, actual)[0, 1])
    ids = h5["/lds/clients"]
    return {"estimator": estimator,
            "seed": int(np.asarray(h5.attrs.get("seed", -1)).reshape(-1)[0]),
            "subsets": int(predicted.size),
            "left_out": int(ids.shape[1]) if len(ids.shape) == 2 else 0,
            "score": report_common.scalar(h5, "/lds/score"),
            "pearson": pearson,
            "s_test_s": report_common.scalar(h5, "/influence/timing/s_test"),
            "scores_s": report_common.scalar(h5, "/influence/timing/scores"),
            "retrain_s": float(np.sum(h5["/lds/timing/retrain"][...]))}


def find_results(paths):
    """The results files: each path a file, or a directory searched
    (recursively, sorted) for results.h5."""
    found = []
    for path in paths:
        if os.path.isfile(path):
            found.append(path)
        elif os.path.isdir(path):
            for directory, subdirectories, files in os.walk(path):
                subdirectories.sort()
                if report_common.RESULTS_FILE in files:
                    found.append(os.path.join(directory,
                                              report_common.RESULTS_FILE))
        else:
            raise FileNotFoundError(path)
    return found


def mean(values):
    values = [v for v in values if report_common.finite(v)]
    return sum(values) / len(values) if values else math.nan


def table(runs, per_run):
    by_estimator = {}
    for run in runs:
        by_estimator.setdefault(run["estimator"], []).append(run)
    rows = []
    for estimator, group in by_estimator.items():
        scores = [r["score"] for r in group]
        shapes = sorted({(r["subsets"], r["left_out"]) for r in group})
        spread = (f"{fmt_num(min(scores))}-{fmt_num(max(scores))}"
                  if len(group) > 1 else "")
        rows.append([estimator, str(len(group)),
                     ", ".join(f"{m} x {k}" for m, k in shapes),
                     fmt_num(mean(scores)), spread,
                     fmt_num(mean([r["pearson"] for r in group])),
                     fmt_num(mean([r["s_test_s"] for r in group])),
                     fmt_num(mean([r["scores_s"] for r in group])),
                     fmt_num(mean([r["retrain_s"] for r in group]))])
        if per_run:
            for r in group:
                rows.append([f"  {r['path']}", f"seed {r['seed']}",
                             f"{r['subsets']} x {r['left_out']}",
                             fmt_num(r["score"]), "", fmt_num(r["pearson"]),
                             fmt_num(r["s_test_s"]), fmt_num(r["scores_s"]),
                             fmt_num(r["retrain_s"])])
    footnote = (
        "LDS: the Spearman correlation over the subset federations of the "
        "predicted test-loss change (the sum of the left-out clients' "
        "scores) and the actual one of the exact retrain; subsets x clients "
        "left out; times in seconds per run (s_test: the estimator's solve, "
        "its set-up included; scoring: the spectrum, s_test and every "
        "client's score; retrains: the subset federations' exact retrains, "
        "summed).")
    return Table(title="FL-LDS per estimator", keys=["estimator"],
                 groups=[("", ["runs", "subsets x left out"]),
                         ("LDS", ["Spearman", "range", "Pearson"]),
                         ("time (s)", ["s_test", "scoring", "retrains"])],
                 rows=rows, footnote=footnote)


def build_parser():
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("results", nargs="+",
                        help="results.h5 files of `fluence influence` with "
                             "influence.lds_subsets > 0, or directories "
                             "holding them (searched recursively)")
    parser.add_argument("--runs", action="store_true",
                        help="a row per results file under its estimator's")
    report_common.add_markdown_option(parser)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        paths = find_results(args.results)
    except FileNotFoundError as err:
        return report_common.error(PROG, f"{err}: no such file or directory")
    runs = []
    labels = report_common.run_labels([os.path.dirname(p) for p in paths]
                                      ) if paths else []
    for path, label in zip(paths, labels):
        run = report_common.load_results(PROG, path, parse)
        if run is not None:
            run["path"] = label
            runs.append(run)
    if not runs:
        return report_common.error(
            PROG, "no results with FL-LDS (/lds/*) among "
                  + " ".join(args.results))
    t = table(runs, args.runs)
    print(report_common.render_markdown(t) if args.markdown
          else report_common.render_plain(t))
    return 0


if __name__ == "__main__":
    sys.exit(main())
