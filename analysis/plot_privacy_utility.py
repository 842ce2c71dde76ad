#!/usr/bin/python3
"""The privacy-utility figure of a sweep of `fluence train` runs: test accuracy against the
privacy loss epsilon that the RDP accountant gives after the last round (issue 27).

Reads every run under ROOT through analysis/collect.py (one row per run) and draws, in the style
of analysis/style.py (one column wide, vector PDF and 300-dpi PNG):

* a line per private algorithm: DP-FedAvg, and FeO2 per ratio r (``privacy.ratio``), its points
  at (``/privacy/epsilon`` after the last round, the final test accuracy), each point labelled
  with the value of the swept deck key that moves epsilon (``privacy.noise_multiplier`` z, or
  whichever key differs between the runs of the line);
* a dashed horizontal line per non-private run (``privacy.mode = "none"``);
* for runs with canary clients (``audit.canaries``), the audit's measured lower bound
  (``/audit/epsilon_lower``, the one-run bound from every round's model) as a bar joined to the
  accountant's epsilon: the run's true epsilon lies on that segment (at the audit's confidence).
  A bound of 0 is drawn at 1/1000 of epsilon on a logarithmic axis.

The x axis is logarithmic when epsilon spans more than a factor of 10; its label gives delta
(``/privacy/delta``) when the runs share it. The accuracy is ``/model/test_accuracy`` (the
final global model on the server's test set), or another column of collect's table with
``--metric`` (e.g. ``feo2/acc_g_p``, FeO2's private clients' local accuracy).

Usage::

    analysis/plot_privacy_utility.py out/cnn_dp -o out/cnn_dp/privacy_utility.png
    analysis/plot_privacy_utility.py out/feo2/noniid -o fig.png --metric feo2/acc_g

Exit status 2 (one line on stderr) when ROOT holds no readable run, no private run with
/privacy/epsilon, the metric is not a column, or the figure cannot be written; the PNG's path
on stdout otherwise.

Needs h5py, numpy, pandas and matplotlib (Debian: python3-h5py, python3-numpy, python3-pandas,
python3-matplotlib).
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import style  # noqa: E402  (first: the plotting style and the Agg backend)

import numpy as np  # noqa: E402

import collect  # noqa: E402

PROG = "plot_privacy_utility"
KEYS = ("privacy.mode", "privacy.ratio")
# deck keys that do not tell the points of a line apart (they follow from the algorithm)
NOT_SWEPT = ("privacy.mode", "privacy.ratio", "privacy.opt_out_fraction", "privacy.opt_out_label",
             "federation.client_sampling", "federation.sampling_rate", "personalization.method")


class PlotError(Exception):
    """A problem the user can fix; the message is for them."""


def algorithm(row):
    """The line a run belongs to: 'DP-FedAvg', 'FeO2, r = 0.1', 'non-private'."""
    mode = str(row.get("privacy.mode", "none"))
    name = style.MODE_NAMES.get(mode, mode)
    if mode == "feo2":
        return f"{name}, {style.deck_value('privacy.ratio', float(row['privacy.ratio']))}"
    return name


def swept_keys(table):
    """The deck columns that differ within the runs of one line."""
    deck_columns = [c for c in table.columns if "." in c and "/" not in c
                    and not c.endswith(".length") and c not in NOT_SWEPT]
    swept = set()
    for _, runs in table.groupby("algorithm"):
        swept |= {c for c in deck_columns if runs[c].astype(str).nunique() > 1}
    known = [key for key in swept if key in style.DECK_KEYS]
    return sorted(known or swept)


def point_label(row, keys):
    return ", ".join(style.deck_value(key, value) for key, value in
                     ((key, row[key]) for key in keys)
                     if not (isinstance(value, float) and math.isnan(value)))


def read_table(root, metric):
    table = collect.collect_runs(root, KEYS)
    if metric not in table.columns:
        raise PlotError(f"--metric {metric}: no such column in the runs' table "
                        "(see analysis/collect.py ROOT)")
    table = table[table["command"] == "train"].copy()
    if table.empty:
        raise PlotError(f"no 'fluence train' run under {root}")
    table["algorithm"] = [algorithm(row) for _, row in table.iterrows()]
    private = table["privacy.mode"].astype(str) != "none"
    if "privacy/epsilon" not in table.columns or not table.loc[private, "privacy/epsilon"].notna().any():
        raise PlotError(f"no private run with /privacy/epsilon under {root}")
    return table, private


def draw(table, private, metric):
    fig, axes = style.figure(columns=1, height=2.7)
    ax = axes[0][0]
    keys = swept_keys(table[private])
    accuracy = 100 * table[metric].astype(float)
    audit_labelled = False
    for index, (name, runs) in enumerate(table[private].groupby("algorithm", sort=False)):
        runs = runs.sort_values("privacy/epsilon")
        x, y = runs["privacy/epsilon"].to_numpy(float), accuracy[runs.index].to_numpy(float)
        ax.plot(x, y, color=style.color(index), marker=style.MARKERS[index % len(style.MARKERS)],
                label=name)
        for (_, row), xi, yi in zip(runs.iterrows(), x, y):
            text = point_label(row, keys)
            if text:  # below the point: the accuracy rises with epsilon, so that is free
                ax.annotate(text, (xi, yi), xytext=(0, -6), textcoords="offset points",
                            ha="center", va="top", fontsize=6, color=style.color(index))
        # The audit's measured lower bound (`audit.canaries`): the true eps of the run lies between
        # it and the accountant's upper bound, drawn as a segment ending in a bar at the bound.
        if "audit/epsilon_lower" in runs.columns:
            lower = runs["audit/epsilon_lower"].to_numpy(float)
            audited = ~np.isnan(lower)
            if audited.any():
                ax.hlines(y[audited], np.maximum(lower[audited], x[audited] * 1e-3), x[audited],
                          color=style.color(index), linewidth=0.8, alpha=0.6)
                ax.plot(np.maximum(lower[audited], x[audited] * 1e-3), y[audited], linestyle="none",
                        marker="|", markersize=7, color=style.color(index),
                        label=None if audit_labelled else "audit lower bound")
                audit_labelled = True
    for offset, (_, row) in enumerate(table[~private].iterrows()):
        ax.axhline(accuracy[row.name], color=style.NEUTRAL, linestyle=style.LINESTYLES[
            1 + offset % 3], linewidth=0.9, label="non-private" if offset == 0 else None)
    epsilon = table.loc[private, "privacy/epsilon"].astype(float)
    if epsilon.max() > 10 * epsilon.min() > 0:
        ax.set_xscale("log")
    ticks = np.unique(epsilon.round(12))
    if ticks.size <= 8:  # the runs' epsilons, in plain numbers
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{t:.2g}" for t in ticks])
        ax.minorticks_off()
    ax.margins(x=0.12, y=0.1)
    deltas = table.loc[private, "privacy/delta"].dropna().unique() \
        if "privacy/delta" in table.columns else []
    delta = f" at {style.DELTA} = {deltas[0]:g}" if len(deltas) == 1 else ""
    ax.set_xlabel(f"privacy loss {style.EPS}{delta} after the last round")
    ax.set_ylabel("test accuracy (%)" if metric == "model/test_accuracy"
                  else f"{metric} (%)")
    ax.legend()
    return fig


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Test accuracy against epsilon (privacy-utility) of the fluence train runs "
                    "under ROOT.")
    parser.add_argument("root", metavar="ROOT")
    parser.add_argument("-o", "--output", required=True, metavar="FIGURE.png",
                        help="the PNG (a PDF is written beside it)")
    parser.add_argument("--metric", default="model/test_accuracy",
                        help="the accuracy column of collect's table (a fraction)")
    args = parser.parse_args(argv)
    try:
        table, private = read_table(args.root, args.metric)
        print(style.save(draw(table, private, args.metric), args.output))
    except (PlotError, collect.CollectError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"{PROG}: error: cannot write {args.output}: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
