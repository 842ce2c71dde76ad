#!/usr/bin/python3
"""FeO2 against DP-FedAvg over several seeds (seed 004, Aldaghri,
Mahdavifar & Beirami, Table 1: the gain of the best FeO2 run over DP-FedAvg
in Acc_g).

Each ROOT is one seed's tree as ``scripts/run_feo2_experiments.sh`` writes
it (``ROOT/<setup>/<algorithm>/results.h5``), read with
``analysis/feo2_report.py``'s reader.  For every set-up and FeO2 run
directory present in every root, one row: Acc_g per root (the global model
on the server's test set at the final round), its mean, the gain over the
same root's DP-FedAvg run per root and its mean, the same gain on the mean
of the last K rounds' Acc_g (``--last``, default 10: the final round of a
DP run moves by a point or more from round to round), and the mean of
Delta_g = Acc_g,np - Acc_g,p (the opt-out clients' advantage).

DP-FedAvg has no opt-out clients, so it is the same run in every set-up;
a set-up without its own ``dpfedavg`` directory is compared with the
root's ``noniid/dpfedavg`` (said on stderr).

Usage::

    analysis/feo2_seeds.py out/feo2_2nn/seed4 out/feo2_2nn/seed5 out/feo2_2nn/seed6 --markdown

Exit status 2 when a ROOT holds no readable run or no DP-FedAvg run; 0
otherwise.
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

import feo2_report  # noqa: E402
from report_common import Table, render_markdown, render_plain  # noqa: E402

import numpy as np  # noqa: E402

PROG = "feo2_seeds"
noted = set()  # set-ups whose DP-FedAvg came from noniid (said once)


def dp_baseline(setups, setup):
    """The DP-FedAvg run of ``setup``, else of the non-IID set-up (the same
    run: DP-FedAvg has no opt-out clients); None when neither exists."""
    for name in (setup, "noniid"):
        for run in setups.get(name, []):
            if run.mode == "dp-fedavg":
                if name != setup and setup not in noted:
                    noted.add(setup)
                    print(f"{PROG}: {setup}: DP-FedAvg taken from {name}/"
                          f"{run.name}", file=sys.stderr)
                return run
    return None


def tail_mean(run, last):
    """Mean Acc_g of the last ``last`` rounds."""
    return float(np.mean(run.test_accuracy[-last:]))


def summary_rows(trees, last):
    """[(setup, run name, [per-root Acc_g], [per-root gain], [per-root tail
    gain], [per-root Delta_g])] for the FeO2 runs present in every root
    (``trees``: feo2_report.load_root of each root)."""
    rows = []
    for setup in trees[0]:
        names = [run.name for run in trees[0][setup] if run.mode == "feo2"]
        for name in names:
            acc, gain, tail_gain, delta = [], [], [], []
            for setups in trees:
                run = next((r for r in setups.get(setup, []) if r.name == name), None)
                base = dp_baseline(setups, setup)
                if run is None or base is None:
                    break
                acc.append(100 * run.final["acc_g"])
                gain.append(100 * (run.final["acc_g"] - base.final["acc_g"]))
                tail_gain.append(100 * (tail_mean(run, last) - tail_mean(base, last)))
                delta.append(100 * run.final["delta_g"])
            else:
                rows.append((setup, name, acc, gain, tail_gain, delta))
    return rows


def signed(value):
    return "-" if not math.isfinite(value) else f"{value:+.2f}"


def table(trees, last):
    rows = summary_rows(trees, last)
    seeds = len(trees)
    out = Table(
        title=f"FeO2 vs DP-FedAvg over {seeds} seeds (Acc_g, %)",
        keys=["set-up", "run"],
        groups=[("", ["Acc_g per seed", "mean Acc_g", "gain per seed",
                      "mean gain", f"mean gain, last {last} rounds",
                      "mean Δ_g"])], rows=[])
    for setup, name, acc, gain, tail_gain, delta in rows:
        out.rows.append([setup, name, " / ".join(f"{v:.2f}" for v in acc),
                         f"{np.mean(acc):.2f}",
                         " / ".join(signed(v) for v in gain),
                         signed(float(np.mean(gain))),
                         signed(float(np.mean(tail_gain))),
                         signed(float(np.mean(delta)))])
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog=PROG, description="FeO2's Acc_g gain over DP-FedAvg, per seed "
        "and its mean, from one results tree per seed.")
    parser.add_argument("roots", metavar="ROOT", nargs="+",
                        help="one seed's ROOT/<setup>/<algorithm>/results.h5")
    parser.add_argument("--last", type=int, default=10, metavar="K",
                        help="rounds averaged for the smoothed gain (default 10)")
    parser.add_argument("--markdown", action="store_true",
                        help="a GitHub markdown table instead of plain text")
    args = parser.parse_args(argv)
    if args.last < 1:
        parser.error(f"--last {args.last} is not allowed: expected an integer >= 1")
    trees = []
    for root in args.roots:
        setups = feo2_report.load_root(root) if os.path.isdir(root) else {}
        if not setups or dp_baseline(setups, "noniid") is None:
            print(f"{PROG}: {root}: no readable DP-FedAvg run "
                  "(ROOT/noniid/dpfedavg/results.h5)", file=sys.stderr)
            return 2
        trees.append(setups)
    result = table(trees, args.last)
    print((render_markdown if args.markdown else render_plain)(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
