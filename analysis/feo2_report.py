#!/usr/bin/python3
"""Tables and figures of the FeO2 experiments (seed 004, Aldaghri,
Mahdavifar & Beirami, "FeO2: Federated Learning with Opt-Out Differential
Privacy", §5: Tables 1-2).

Reads the results files that ``scripts/run_feo2_experiments.sh`` writes with
``fluence train`` under ROOT::

    ROOT/<setup>/<algorithm>/results.h5

with set-ups ``noniid`` (opt-out clients drawn at random) and ``skewed``
(opt-out clients drawn among the holders of one label) and algorithms
``nonprivate``, ``dpfedavg`` and ``feo2_r<r>`` (other run directories under a
set-up are reported too, after these).  Every run is a ``fluence train`` of
inputs/feo2_fashion_mnist.toml; its algorithm and hyperparameters (privacy
mode, r = ``privacy.ratio``, lambda_p / lambda_np =
``personalization.lambda_private`` / ``lambda_opt_out``, the opt-out label)
come from the resolved deck in the root attribute ``deck``. The runs are read
through ``analysis/collect.py``: the table ``analysis/collect.py ROOT`` writes
(one row per run) and its ``--long round`` table (one row per run and round)
are what this report is made from.

Printed on stdout (aligned plain text, or GitHub markdown with
``--markdown``):

* Runs: a line per run (mode, rounds, opt-out clients, noise multiplier z,
  final (eps, delta), final clipping norm S, wall time);
* per set-up, the seed's Table 1 analog: a row per algorithm with its
  hyperparameters, then Acc_g (the global model on the server's test set),
  Acc_g,p and Acc_g,np (the global model on the private / opt-out clients'
  local test data, mean over clients), Delta_g = Acc_g,np - Acc_g,p, Acc_l,p
  and Acc_l,np (the Ditto personal models on their own local test data) and
  Delta_l = Acc_l,np - Acc_l,p, all in % at the final round (``/feo2/*``,
  always evaluated there).  In parentheses, as in the seed, the variance
  across clients of the per-client accuracy taken as a fraction, times 100
  (= %^2 / 100; the scale the seed's numbers fit: its 93.75 (0.13) is a
  standard deviation of 3.6 points).  The title gives the (eps, delta) of
  the private runs (the final ``/privacy/epsilon``, ``/privacy/delta``);
* per set-up, the line "FeO2 vs DP-FedAvg: best Acc_g gain +x.xx% (r = ...)"
  (percentage points of Acc_g, the best FeO2 run against DP-FedAvg).

'-' marks a value that does not exist (NaN): Acc_g,p of the non-private
run (every client counts as opt-out there), the opt-out columns of
DP-FedAvg, and so on.

Figures (analysis/style.py: vector PDF and 300-dpi PNG, unless
``--no-figures``; into ``--figures DIR``, default ``ROOT/figures``):

* ``feo2_acc_g.png``: Acc_g per round (``/metrics/test_accuracy``, every
  round), a line per algorithm, a panel per set-up;
* ``feo2_clip_norm.png``: the clipping norm S per round
  (``/privacy/clip_norm``; adaptive clipping moves it) of the private runs,
  a panel per set-up.

Usage::

    analysis/feo2_report.py out/feo2
    analysis/feo2_report.py out/feo2 --markdown > docs/results/feo2.md
    analysis/feo2_report.py /tmp/feo2-try --figures /tmp/feo2-figs
    analysis/feo2_report.py out/feo2 --no-figures

Notes about missing, unfinished or unreadable runs and the paths of the
written figures go to stderr.  Exit status 2 when ROOT is not a directory,
holds no readable run, or the figures cannot be written; 0 otherwise.

Needs h5py, numpy, pandas and matplotlib (Debian: python3-h5py,
python3-numpy, python3-pandas, python3-matplotlib) and Python >= 3.11
(tomllib, for the deck).
"""

import argparse
import functools
import math
import os
import re
import sys
from dataclasses import dataclass
from typing import Dict, Optional

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

import report_common  # noqa: E402  (first: selects matplotlib's Agg backend)
from report_common import (  # noqa: E402
    DELTA, EPS, ResultsError, Table, color_cycle, finite, fmt_pct,
    legend_entries, render_markdown, render_plain, save)

import collect  # noqa: E402  (the reader: one table of the runs)
import style  # noqa: E402

import numpy as np  # noqa: E402

SETUPS = ("noniid", "skewed")             # known set-ups, in display order
BASELINES = ("nonprivate", "dpfedavg")    # first rows, in this order
FEO2_DIR = re.compile(r"^feo2_r(?P<r>[0-9.eE+-]+)$")
MODE_TITLES = {"none": "Non-private", "dp-fedavg": "DP-FedAvg",
               "feo2": "FeO2"}
DIR_MODES = {"nonprivate": "none", "dpfedavg": "dp-fedavg"}
METRICS = ("acc_g", "acc_g_p", "acc_g_np", "acc_l_p", "acc_l_np",
           "var_g_p", "var_g_np", "var_l_p", "var_l_np", "delta_g",
           "delta_l")
LAMBDA = "\u03bb"
PROG = "feo2_report"
DECK_KEYS = ("privacy.mode", "privacy.ratio", "personalization.method",
             "personalization.lambda_private", "personalization.lambda_opt_out",
             "privacy.opt_out_fraction", "privacy.opt_out_label")

note = functools.partial(report_common.note, PROG)  # a note on stderr


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------


@dataclass
class Run:
    """One ``fluence train`` run of a set-up."""

    setup: str
    name: str                     # the run directory's name
    path: str
    mode: str                     # privacy.mode: none, dp-fedavg, feo2
    ratio: float                  # privacy.ratio (FeO2's r)
    lambda_p: float
    lambda_np: float
    personalization: str          # personalization.method
    opt_out_fraction: float
    opt_out_label: int            # -1: opt-out clients drawn at random
    rounds: int
    final: Dict[str, float]       # the /feo2 metrics at the last round
    test_accuracy: np.ndarray     # [T], /metrics/test_accuracy
    clip_norm: Optional[np.ndarray]   # [T], private runs only
    epsilon: float                # final /privacy/epsilon (NaN: no DP)
    delta: float
    noise_multiplier: float
    opt_out_clients: int          # len(/privacy/opt_out_clients)
    wall_time: float              # /metrics/wall_time_s[-1]

    @property
    def private(self):
        return self.mode in ("dp-fedavg", "feo2")

    @property
    def algorithm(self):
        return MODE_TITLES.get(self.mode, self.mode or "?")

    @property
    def order(self):
        """Sort key: non-private, DP-FedAvg, FeO2 by r, then the rest."""
        if self.name in BASELINES:
            return (BASELINES.index(self.name), 0.0, self.name)
        if self.mode == "feo2":
            r = self.ratio if math.isfinite(self.ratio) else math.inf
            return (2, r, self.name)
        return (3, 0.0, self.name)


def last(values):
    """The last entry of a series (NaN when absent or empty)."""
    if values is None or not values.size:
        return math.nan
    return float(values[-1])


def number(value, default=math.nan):
    """A table or deck value as a float (``default`` when missing or not a
    number)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return default
    return default if math.isnan(value) else value


def cell(row, column, default=math.nan):
    """A column of a run's row of collect's table (``default`` when the
    table has no such column or the run no value)."""
    value = row.get(column, default)
    return default if isinstance(value, float) and math.isnan(value) else value


def per_round(rounds, column):
    """A per-round series of one run from collect's --long round table, or
    None when the run has none."""
    if column not in rounds or not rounds[column].notna().any():
        return None
    return rounds.sort_values("round")[column].to_numpy(dtype=float)


def make_run(row, rounds, setup, name, path):
    """A Run from its row of collect's run table and its rows of the
    per-round table."""
    if cell(row, "command", "") != "train" or not np.isfinite(
            number(cell(row, "metrics/test_accuracy"))):
        raise ResultsError(f"{path}: no /metrics/test_accuracy (not a "
                           "'fluence train' results file)")
    test_accuracy = per_round(rounds, "metrics/test_accuracy")
    if np.isfinite(number(cell(row, "feo2/acc_g"))):
        final = {key: number(cell(row, f"feo2/{key}")) for key in METRICS}
    else:
        note(f"{path}: no /feo2 metrics (personalization.method = "
             f"\"{cell(row, 'personalization.method', '?')}\"?); only Acc_g "
             "is reported")
        final = {key: math.nan for key in METRICS}
        final["acc_g"] = last(test_accuracy)
    return Run(
        setup=setup, name=name, path=path,
        mode=str(cell(row, "privacy.mode", "")),
        ratio=number(cell(row, "privacy.ratio")),
        lambda_p=number(cell(row, "personalization.lambda_private")),
        lambda_np=number(cell(row, "personalization.lambda_opt_out")),
        personalization=str(cell(row, "personalization.method", "")),
        opt_out_fraction=number(cell(row, "privacy.opt_out_fraction")),
        opt_out_label=int(number(cell(row, "privacy.opt_out_label"), -1)),
        rounds=int(test_accuracy.size), final=final,
        test_accuracy=test_accuracy,
        clip_norm=per_round(rounds, "privacy/clip_norm"),
        epsilon=number(cell(row, "privacy/epsilon")),
        delta=number(cell(row, "privacy/delta")),
        noise_multiplier=number(cell(row, "privacy/noise_multiplier")),
        opt_out_clients=int(number(
            cell(row, "privacy/opt_out_client.length"), 0)),
        wall_time=number(cell(row, "metrics/wall_time_s")))


def check_name(run):
    """Note when the deck does not match what the directory name says."""
    expected_mode = DIR_MODES.get(run.name)
    match = FEO2_DIR.match(run.name)
    if match:
        expected_mode = "feo2"
        r = number(match.group("r"))
        if (math.isfinite(r) and math.isfinite(run.ratio)
                and abs(r - run.ratio) > 1e-9 * max(1.0, abs(r))):
            note(f"{run.setup}/{run.name}: the deck has privacy.ratio = "
                 f"{run.ratio:g}, not {r:g}")
    if expected_mode and run.mode and run.mode != expected_mode:
        note(f"{run.setup}/{run.name}: the deck has privacy.mode = "
             f"\"{run.mode}\", not \"{expected_mode}\"")


def expected_names():
    """The run directories scripts/run_feo2_experiments.sh writes."""
    return list(BASELINES) + ["feo2_r0.01", "feo2_r0.1", "feo2_r0.9"]


def note_unfinished(root):
    """A note per run directory ROOT/<setup>/<name> without a results.h5."""
    for setup in sorted(os.listdir(root)):
        base = os.path.join(root, setup)
        if setup == "figures" or not os.path.isdir(base):
            continue
        for name in sorted(os.listdir(base)):
            report_common.results_file(PROG, os.path.join(base, name))


def read_tables(root):
    """collect's run table and per-round table of the runs under ROOT,
    with the deck keys the report needs; (None, None) without runs."""
    try:
        table = collect.collect_runs(root, DECK_KEYS)
        rounds = collect.collect_long(root, ["round"], DECK_KEYS)
    except collect.CollectError:
        return None, None
    return table, rounds


def load_root(root):
    """{setup: [Run]} for every set-up with at least one readable run, from
    collect's tables (ROOT/<setup>/<algorithm>/results.h5); notes what is
    missing."""
    note_unfinished(root)
    table, rounds = read_tables(root)
    if table is None:
        return {}
    found = {}
    for _, row in table.iterrows():
        parts = row["run"].split("/")
        path = os.path.join(root, row["run"], "results.h5")
        if len(parts) != 2 or parts[0] == "figures":
            note(f"skipped: {path}: not ROOT/<setup>/<algorithm>/results.h5")
            continue
        try:
            run = make_run(row, rounds[rounds["run"] == row["run"]], *parts,
                           path)
        except ResultsError as err:
            note(f"skipped: {err}")
            continue
        check_name(run)
        found.setdefault(run.setup, []).append(run)
    for setup, runs in found.items():
        missing = [n for n in expected_names()
                   if n not in {run.name for run in runs}]
        if missing:
            note(f"{setup}: no run {', '.join(missing)} (not run yet?)")
        runs.sort(key=lambda run: run.order)
    ordered = [s for s in SETUPS if s in found] + sorted(
        s for s in found if s not in SETUPS)
    missing = [s for s in SETUPS if s not in found]
    if found and missing:
        note(f"no runs for the set-up(s) {', '.join(missing)}")
    return {setup: found[setup] for setup in ordered}


# --------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------


def fmt_var(variance):
    """A variance of accuracies (fractions) x 100, 3 significant digits."""
    if not finite(variance):
        return "-"
    value = 100 * max(variance, 0.0)  # E[x^2] - E[x]^2 can round below 0
    if value == 0:
        return "0"
    return f"{value:.2f}" if value >= 0.01 else f"{value:.1g}"


def fmt_acc_var(accuracy, variance):
    """'93.75 (0.13)', '93.75' without a variance, '-' without a mean."""
    if not finite(accuracy):
        return "-"
    if not finite(variance):
        return fmt_pct(accuracy, 2)
    return f"{fmt_pct(accuracy, 2)} ({fmt_var(variance)})"


def fmt_value(value):
    """A hyperparameter like 0.005 or 0.1 ('?' when unknown)."""
    return f"{value:g}" if finite(value) else "?"


def fmt_eps(value):
    """eps with up to 3 significant digits ('-' when NaN)."""
    return f"{value:.3g}" if finite(value) else "-"


def fmt_delta(value):
    """delta like 1e-4 or 2.5e-6 ('-' when NaN)."""
    if not finite(value):
        return "-"
    if value <= 0:
        return "0"
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa.removesuffix('.0')}e{int(exponent)}"


def fmt_num(value, digits=3):
    """A number with ``digits`` significant digits, or '-'."""
    return f"{value:.{digits}g}" if finite(value) else "-"


# --------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------


def hyperparameters(run):
    """The seed's hyperparameter cell: lambda_np, lambda_p, or r and both."""
    lam_p, lam_np = fmt_value(run.lambda_p), fmt_value(run.lambda_np)
    if run.personalization and run.personalization != "ditto":
        ratio = f"r = {fmt_value(run.ratio)}, " if run.mode == "feo2" else ""
        return f"{ratio}no Ditto"
    if run.mode == "none":
        return f"{LAMBDA}_np = {lam_np}"
    if run.mode == "dp-fedavg":
        return f"{LAMBDA}_p = {lam_p}"
    lambdas = (f"{LAMBDA}_p = {LAMBDA}_np = {lam_p}" if lam_p == lam_np
               else f"{LAMBDA}_p = {lam_p}, {LAMBDA}_np = {lam_np}")
    if run.mode == "feo2":
        return f"r = {fmt_value(run.ratio)}, {lambdas}"
    return lambdas


def describe_setup(setup, runs):
    """'non-IID, opt-out clients at random' and the like, from the decks."""
    feo2 = [run for run in runs if run.mode == "feo2"]
    labels = sorted({run.opt_out_label for run in feo2})
    fractions = sorted({run.opt_out_fraction for run in feo2
                        if finite(run.opt_out_fraction)})
    share = (f"{100 * fractions[0]:g}% of the clients opt out"
             if len(fractions) == 1 else "clients opt out")
    if not feo2:
        return "no FeO2 run"
    if labels == [-1]:
        return f"{share}, drawn at random"
    if len(labels) == 1 and labels[0] >= 0:
        return f"{share}, drawn among the holders of label {labels[0]}"
    return f"{share}, opt-out labels " + ", ".join(
        "any" if label < 0 else str(label) for label in labels)


def privacy_summary(runs):
    """'(3.6, 1e-04)-DP' over the private runs (each listed if they
    differ), or 'no private run'."""
    private = [run for run in runs if run.private]
    if not private:
        return "no private run"
    pairs = {(fmt_eps(run.epsilon), fmt_delta(run.delta)) for run in private}
    if len(pairs) == 1:
        eps, delta = next(iter(pairs))
        return f"private clients ({eps}, {delta})-DP"
    return "private clients " + "; ".join(
        f"{run.name} ({fmt_eps(run.epsilon)}, {fmt_delta(run.delta)})-DP"
        for run in private)


def rounds_summary(runs):
    """'300 rounds', or the rounds per run when they differ."""
    rounds = {run.rounds for run in runs}
    if len(rounds) == 1:
        return f"{next(iter(rounds))} rounds"
    return "rounds " + ", ".join(f"{run.name} {run.rounds}" for run in runs)


VAR_NOTE = ("(var): variance across clients of the per-client accuracy as a "
            "fraction, x 100 (= %^2 / 100, the scale of FeO2's Tables "
            "1-2). ")


def table_one(setup, runs):
    """The seed's Table 1 analog for one set-up."""
    rows = []
    for run in runs:
        m = run.final
        rows.append([
            run.name, run.algorithm, hyperparameters(run),
            fmt_pct(m["acc_g"], 2),
            fmt_acc_var(m["acc_g_p"], m["var_g_p"]),
            fmt_acc_var(m["acc_g_np"], m["var_g_np"]),
            fmt_pct(m["delta_g"], 2),
            fmt_acc_var(m["acc_l_p"], m["var_l_p"]),
            fmt_acc_var(m["acc_l_np"], m["var_l_np"]),
            fmt_pct(m["delta_l"], 2)])
    return Table(
        title=f"{setup}: {describe_setup(setup, runs)}; "
              f"{privacy_summary(runs)}; {rounds_summary(runs)}",
        keys=["run", "algorithm", "hyperparameters"],
        groups=[("global model", [
                    "Acc_g%", "Acc_g,p% (var)", "Acc_g,np% (var)",
                    f"{DELTA}_g%"]),
                ("personalized local models", [
                    "Acc_l,p% (var)", "Acc_l,np% (var)", f"{DELTA}_l%"])],
        rows=rows,
        footnote="Final round. Acc_g: the global model on the server's test "
                 "set; Acc_g,p / Acc_g,np: on the private / opt-out clients' "
                 "local test data, mean over clients; Acc_l: the clients' "
                 f"Ditto personal models; {DELTA} = np - p. " + VAR_NOTE
                 + "'-': no such clients (non-private: every client counts as "
                 "opt-out; DP-FedAvg: none opts out) or not evaluated.")


def gain_line(runs):
    """'FeO2 vs DP-FedAvg: best Acc_g gain +x.xx% (r = ...)'."""
    dp = [run for run in runs if run.mode == "dp-fedavg"
          and finite(run.final["acc_g"])]
    feo2 = [run for run in runs if run.mode == "feo2"
            and finite(run.final["acc_g"])]
    if not dp or not feo2:
        missing = "DP-FedAvg" if not dp else "FeO2"
        return f"FeO2 vs DP-FedAvg: - (no {missing} run)"
    base = dp[0]
    best = max(feo2, key=lambda run: run.final["acc_g"])
    gain = 100 * (best.final["acc_g"] - base.final["acc_g"])
    ties = [run for run in feo2
            if abs(run.final["acc_g"] - best.final["acc_g"]) < 1e-12]
    r = ", ".join(fmt_value(run.ratio) for run in ties)
    return f"FeO2 vs DP-FedAvg: best Acc_g gain {gain:+.2f}% (r = {r})"


def table_runs(setups):
    """A line per run: what it did, for the record."""
    rows = []
    for setup, runs in setups.items():
        for run in runs:
            opt_out = str(run.opt_out_clients) if run.mode == "feo2" else "-"
            if run.mode == "feo2" and run.opt_out_label >= 0:
                opt_out += f" (label {run.opt_out_label})"
            clip = last(run.clip_norm) if run.clip_norm is not None \
                else math.nan
            rows.append([
                setup, run.name, run.mode or "?", run.personalization or "?",
                str(run.rounds), opt_out, fmt_num(run.noise_multiplier, 4),
                (f"({fmt_eps(run.epsilon)}, {fmt_delta(run.delta)})"
                 if run.private else "-"),
                fmt_num(clip, 3), fmt_num(run.wall_time, 3)])
    return Table(
        title="Runs", keys=["set-up", "run", "privacy.mode",
                            "personalization"],
        groups=[("", ["rounds",
                      "opt-out clients", "z", f"({EPS}, {DELTA.lower()})",
                      "final S", "train s"])],
        rows=rows,
        footnote=f"z: overall noise multiplier (solved for the target {EPS} "
                 f"over the rounds); ({EPS}, {DELTA.lower()}): the "
                 "accountant's value after the last round; final S: the "
                 "clipping norm of the last round (adaptive clipping); train "
                 "s: /metrics/wall_time_s of the last round (excludes "
                 "set-up).")


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------


def run_colors(setups):
    """One colour per run name, the same in every panel."""
    names = []
    for runs in setups.values():
        for run in runs:
            if run.name not in names:
                names.append(run.name)
    cycle = color_cycle()
    return {name: cycle[i % len(cycle)] for i, name in enumerate(names)}


def run_style(run):
    """Line style: the baselines dashed / dash-dotted, so that a FeO2 run
    drawn over them (r near 1 is close to DP-FedAvg) leaves them visible."""
    return {"none": "-.", "dp-fedavg": "--"}.get(run.mode, "-")


def run_label(run):
    """Legend entry: algorithm and r."""
    if run.mode == "feo2":
        return f"FeO2, r = {fmt_value(run.ratio)}"
    if run.name in BASELINES or run.mode in MODE_TITLES:
        return run.algorithm
    return run.name


def panels(count, entries):
    """A figure with ``count`` panels in a row (one column for one panel,
    the text width for more) and a strip for a legend of ``entries``."""
    lines = math.ceil(entries / legend_columns(count))
    fig, axes = style.figure(columns=1 if count == 1 else 2, cols=count,
                             height=2.6 + 0.17 * lines, sharey=True,
                             legend_rows=lines)
    return fig, axes[0]


def legend_columns(count):
    return 3 if count == 1 else 5


def legend(fig, axes):
    """One legend for all panels, above them."""
    handles, labels = legend_entries(axes)
    style.figure_legend(fig, handles, labels,
                        columns=legend_columns(len(axes)))


def panel_title(ax, setup, runs, count):
    """The set-up's name, and what it means when there is room."""
    ax.set_title(f"{setup}: {describe_setup(setup, runs)}" if count > 1
                 else setup, fontsize=7)


def figure_acc_g(setups, path):
    """Acc_g per round, a line per run, a panel per set-up."""
    colors = run_colors(setups)
    fig, axes = panels(len(setups), len(colors))
    for ax, (setup, runs) in zip(axes, setups.items()):
        for run in runs:
            rounds = np.arange(1, run.test_accuracy.size + 1)
            ax.plot(rounds, 100 * run.test_accuracy,
                    linestyle=run_style(run), color=colors[run.name],
                    label=run_label(run), zorder=3 if run.mode != "feo2"
                    else 2)
        panel_title(ax, setup, runs, len(setups))
        style.round_axis(ax)
    axes[0].set_ylabel("global model test accuracy (%)")
    legend(fig, axes)
    return save(fig, path)


def figure_clip_norm(setups, path):
    """The clipping norm per round of the private runs, a panel per
    set-up; None (with a note) when no run is private."""
    private = {setup: [run for run in runs
                       if run.clip_norm is not None and run.clip_norm.size]
               for setup, runs in setups.items()}
    if not any(private.values()):
        note("no private run with /privacy/clip_norm: "
             f"{os.path.basename(path)} not written")
        return None
    colors = run_colors(setups)
    fig, axes = panels(len(private), len(colors))
    values = np.concatenate([run.clip_norm for runs in private.values()
                             for run in runs])
    values = values[np.isfinite(values) & (values > 0)]
    for ax, (setup, runs) in zip(axes, private.items()):
        for run in runs:
            rounds = np.arange(1, run.clip_norm.size + 1)
            ax.plot(rounds, run.clip_norm,
                    linestyle=run_style(run), color=colors[run.name],
                    label=run_label(run), zorder=3 if run.mode != "feo2"
                    else 2)
        if not runs:
            ax.text(0.5, 0.5, "no private run", transform=ax.transAxes,
                    ha="center", va="center", color="0.5")
        panel_title(ax, setup, setups[setup], len(private))
        style.round_axis(ax)
    if values.size and values.max() / values.min() > 20:
        for ax in axes:
            ax.set_yscale("log")
    axes[0].set_ylabel("clipping norm S")
    legend(fig, axes)
    return save(fig, path)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def parse_args(argv):
    """Parse the command line."""
    parser = argparse.ArgumentParser(
        description="Tables (FeO2 Table 1 analog; docs/references.md) and "
                    "figures of the "
                    "FeO2 experiments written by "
                    "scripts/run_feo2_experiments.sh.")
    parser.add_argument("root", metavar="ROOT",
                        help="results root: ROOT/<setup>/<algorithm>/"
                             "results.h5")
    report_common.add_markdown_option(parser)
    report_common.add_figure_options(parser, "ROOT/figures")
    return parser.parse_args(argv)


def main(argv=None):
    """Entry point; returns the process exit status."""
    args = parse_args(argv)
    setups, status = report_common.load_results_root(
        PROG, args.root, load_root,
        "<setup>/<algorithm>/results.h5, as written by "
        "scripts/run_feo2_experiments.sh")
    if setups is None:
        return status

    render = render_markdown if args.markdown else render_plain
    blocks = []
    if args.markdown:
        blocks.append("## [FeO2](../references.md#feo2): federated learning "
                      "with opt-out DP, Table 1 analog")
    blocks.append(render(table_runs(setups)))
    for setup, runs in setups.items():
        line = gain_line(runs)
        blocks.append(render(table_one(setup, runs)) + "\n\n"
                      + (f"**{line}**" if args.markdown else line))
    print("\n\n".join(blocks))

    if args.no_figures:
        return 0
    directory = args.figures or os.path.join(args.root, "figures")
    return report_common.write_figures(PROG, directory, (
        (functools.partial(figure_acc_g, setups), "feo2_acc_g.png"),
        (functools.partial(figure_clip_norm, setups), "feo2_clip_norm.png")))


if __name__ == "__main__":
    sys.exit(main())
