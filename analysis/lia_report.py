#!/usr/bin/python3
"""Tables and figures of the LIA experiments (seed 002, "LIA: Privacy-
Preserving Data Quality Evaluation in Federated Learning Using a Lazy
Influence Approximation", §IV: Figs. 3-5, 9-10, Tables II-III).

Reads the results files that ``scripts/run_lia_experiments.sh`` writes with
``fluence lia`` under ROOT::

    ROOT/<variant>/grid/<setting>/p<P>_eps<E>/results.h5
    ROOT/<variant>/corruption/c<F>/results.h5
    ROOT/<variant>/fl/<setting>/results.h5
    ROOT/<variant>/minority/results.h5
    ROOT/<variant>/signcheck/eps<E>/results.h5

(<variant>: the vote baseline, ``median`` or ``model``, or the name given
with ``--variant``).  Any other ``results.h5`` under ROOT with a ``/lia``
group is read too; its family is then inferred from the deck (minority
fractions set: minority; sign check: signcheck; FL rounds: fl; else grid).
The settings (participants P, eps, alpha, corruption, corrupted fraction,
vote baseline) come from the resolved deck in the root attribute ``deck``,
not from the directory names.  One eps per run: ``lia.epsilon_train`` (the
script sets ``lia.epsilon_vote`` to the same; a run where they differ shows
both).

Printed on stdout (aligned plain text, or GitHub markdown with
``--markdown``):

* Runs: per variant and family, the number of runs and their wall time
  (sum of ``/lia/timing/*``: set-up, contributors, votes, FL) on the ranks
  they ran on;
* Targets (the issue's): for each variant, the non-IID set-up (alpha = 0.1,
  30% label-shifted, eps = 1, 500 participants): recall >= 95% and
  precision >= 90%, and LIA + FedAvg within 3 points of the oracle after
  the FL rounds, each with its numbers and "met" / "not met";
* Grid (seed Figs. 4 and 10): per variant and setting, a row per number of
  participants, recall, precision and accuracy (%) per eps;
* Corruption (seed Table II): a row per corrupted fraction;
* FL (seed Fig. 3): per variant and setting, a row per method with the
  participants aggregated, the test accuracy of M0, after the first round
  and at the end, and the gap to the oracle;
* Minority (seed Fig. 5): a row per share of the missing class in a
  newcomer's batch: newcomers, share accepted, mean vote sum against the
  threshold, and for reference the share of honest participants accepted;
* Sign check (seed Fig. 9): a row per eps, the share of (contributor,
  validator) pairs where the lazy vote's sign equals the exact influence's;
* Variants: the runs present in several variants (same path below the
  variant), recall / precision / accuracy side by side.

'-' marks a value that does not exist (NaN): precision when nobody was
rejected, recall without corrupted participants.

Figures (analysis/style.py: vector PDF and 300-dpi PNG, unless
``--no-figures``; into ``--figures DIR``, default ``ROOT/figures``; the data
set named from the runs' decks): ``lia_grid_<variant>.png`` (recall, precision, accuracy
against participants, a line per eps, a column per setting; Fig. 10
analog), ``lia_corruption.png``, ``lia_fl.png`` (test accuracy per round,
a panel per variant and setting; Fig. 3 analog), ``lia_minority.png``
(with the seed's two quoted values), ``lia_signcheck.png`` and
``lia_votes_<variant>.png`` (the target run's vote sums per contributor
before and after randomized response, with the threshold; Fig. 2 analog).

Usage::

    analysis/lia_report.py out/lia
    analysis/lia_report.py out/lia --markdown --no-figures
    analysis/lia_report.py /tmp/lia-try --figures /tmp/lia-figs

Notes about unfinished or unreadable runs and the paths of the written
figures go to stderr.  Exit status 2 when ROOT is not a directory, holds no
readable run, or the figures cannot be written; 0 otherwise.

Needs h5py, numpy and matplotlib (Debian: python3-h5py, python3-numpy,
python3-matplotlib); the deck is parsed with tomllib (Python >= 3.11).
"""

import argparse
import functools
import math
import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

import report_common  # noqa: E402  (first: selects matplotlib's Agg backend)
from report_common import (  # noqa: E402
    EPS, Table, deck_settings, finite, fmt_pct, legend_entries,
    render_markdown, render_plain, save, scalar)

import numpy as np  # noqa: E402
import style  # noqa: E402

PROG = "lia_report"
FAMILIES = ("grid", "corruption", "fl", "minority", "signcheck")
VARIANTS = ("median", "model")          # known variants, in display order
METHODS = ("none", "oracle", "krum", "trimmed_mean", "centered_clipping",
           "lia", "lia_cc")
METHOD_TITLES = {"none": "no filtering", "oracle": "oracle",
                 "krum": "KRUM", "trimmed_mean": "trimmed mean",
                 "centered_clipping": "centered clipping",
                 "lia": "LIA + FedAvg", "lia_cc": "LIA + centered clipping"}
ALPHA = "\u03b1"
# the targets
TARGET = {"participants": 500, "alpha": 0.1, "corrupted_fraction": 0.3,
          "corruption": "label_shift", "epsilon": 1.0}
TARGET_RECALL = 0.95
TARGET_PRECISION = 0.90
TARGET_FL_GAP = 0.03
# seed 002 §IV-E (Fig. 5, CIFAR-10): acceptance at 5% and 20%
SEED_MINORITY = ((0.05, 0.63), (0.20, 0.54))

note = functools.partial(report_common.note, PROG)  # a note on stderr


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------


def number(value, default=math.nan):
    """A deck value as a float: "inf" -> inf, missing/other -> default."""
    if isinstance(value, str) and value.strip().lower() in ("inf", "+inf"):
        return math.inf
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def array(h5, name, dtype=float):
    """A dataset as a 1-D (or as stored) numpy array, or None."""
    if name not in h5:
        return None
    return np.asarray(h5[name][()], dtype=dtype)


@dataclass
class Run:
    """One ``fluence lia`` run."""

    variant: str
    family: str
    rel: str                       # the path below the variant
    path: str
    participants: int
    epsilon_train: float           # deck value (inf: no noise)
    epsilon_vote: float
    alpha: float
    corruption: str
    corrupted_fraction: float
    corruption_rate: float
    vote_baseline: str
    vote_accounting: str
    rounds: int
    recall: float
    precision: float
    accuracy: float
    threshold: float
    m0_accuracy: float
    noise_multiplier: float
    flip_probability: float
    overlapping: bool
    corrupted: np.ndarray          # [P] 0/1
    accepted: np.ndarray           # [P] 0/1
    vote_sum: np.ndarray           # [P]
    true_vote_sum: Optional[np.ndarray]
    sign_agreement: float
    sign_checked: int
    fl: Dict[str, Tuple[np.ndarray, int]] = field(default_factory=dict)
    minority_fractions: Optional[np.ndarray] = None
    minority_acceptance: Optional[np.ndarray] = None
    minority_vote_sum: Optional[np.ndarray] = None
    minority_class: int = -1
    timing: Dict[str, float] = field(default_factory=dict)
    ranks: int = 0
    revision: str = ""             # root attribute git_revision
    threshold_rule: str = "kmeans"  # lia.threshold
    dataset: str = "?"             # from the deck's [data] (style.dataset_name)
    body: str = "identity"         # lia.body

    @property
    def eps(self):
        """The run's eps (training and vote alike in the script's runs)."""
        return self.epsilon_train

    @property
    def iid(self):
        return math.isinf(self.alpha)

    @property
    def wall(self):
        values = [v for k, v in self.timing.items()
                  if k in ("setup", "contributors", "votes", "fl")
                  and finite(v)]
        return sum(values) if values else math.nan

    @property
    def setting(self):
        """The data setting: alpha, corruption, corrupted share, rate."""
        return (self.alpha, self.corruption, self.corrupted_fraction,
                self.corruption_rate)

    def is_target(self):
        """The issue's target set-up (a minority run's participants lack a
        class, so it is not one)."""
        if (self.minority_fractions is not None
                and self.minority_fractions.size):
            return False
        return (self.participants == TARGET["participants"]
                and close(self.alpha, TARGET["alpha"])
                and close(self.corrupted_fraction,
                          TARGET["corrupted_fraction"])
                and self.corruption == TARGET["corruption"]
                and close(self.epsilon_train, TARGET["epsilon"])
                and close(self.epsilon_vote, TARGET["epsilon"])
                and close(self.corruption_rate, 1.0))


def close(a, b):
    """a == b up to rounding (inf == inf)."""
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def infer_family(deck_lia, rounds):
    """The family of a run outside the script's layout, from its deck."""
    minority = deck_lia.get("minority", {})
    if minority.get("fractions"):
        return "minority"
    if int(number(deck_lia.get("sign_check"), 0)) > 0:
        return "signcheck"
    if rounds > 0:
        return "fl"
    return "grid"


def parse_run(h5, variant, family, rel, path):
    """Parse an open results file of a ``fluence lia`` run."""
    if "lia" not in h5:
        raise report_common.ResultsError(
            f"{path}: no /lia group (not a 'fluence lia' results file)")
    deck = deck_settings(h5)
    lia = deck.get("lia", {})
    rounds = int(number(lia.get("rounds"), 0))
    if family not in FAMILIES:
        family = infer_family(lia, rounds)
    fl = {}
    if "lia/fl" in h5:
        for method in h5["lia/fl"]:
            group = h5["lia/fl"][method]
            if "test_accuracy" not in group:
                continue
            acc = np.atleast_1d(np.asarray(group["test_accuracy"][()],
                                           dtype=float))
            clients = group["test_accuracy"].attrs.get(
                "clients", group.attrs.get("clients", -1))
            fl[method] = (acc, int(np.asarray(clients).reshape(-1)[0]))
    timing = {}
    if "lia/timing" in h5:
        for key in h5["lia/timing"]:
            timing[key] = scalar(h5, f"lia/timing/{key}")
    minority = lia.get("minority", {})
    checked = array(h5, "lia/sign_checked", int)
    return Run(
        variant=variant, family=family, rel=rel, path=path,
        participants=int(number(lia.get("participants"),
                                array(h5, "lia/vote_sum").size)),
        epsilon_train=number(lia.get("epsilon_train")),
        epsilon_vote=number(lia.get("epsilon_vote")),
        alpha=number(lia.get("alpha")),
        corruption=str(lia.get("corruption", "?")),
        corrupted_fraction=number(lia.get("corrupted_fraction")),
        corruption_rate=number(lia.get("corruption_rate"), 1.0),
        vote_baseline=str(lia.get("vote_baseline", "model")),
        vote_accounting=str(lia.get("vote_accounting", "exact")),
        rounds=rounds,
        recall=scalar(h5, "lia/recall"),
        precision=scalar(h5, "lia/precision"),
        accuracy=scalar(h5, "lia/accuracy"),
        threshold=scalar(h5, "lia/threshold"),
        m0_accuracy=scalar(h5, "lia/m0_test_accuracy"),
        noise_multiplier=scalar(h5, "lia/noise_multiplier"),
        flip_probability=scalar(h5, "lia/vote_flip_probability"),
        overlapping=scalar(h5, "lia/overlapping_data", 0.0) > 0,
        corrupted=array(h5, "lia/corrupted", int),
        accepted=array(h5, "lia/accepted", int),
        vote_sum=array(h5, "lia/vote_sum"),
        true_vote_sum=array(h5, "lia/true_vote_sum"),
        sign_agreement=scalar(h5, "lia/sign_agreement"),
        sign_checked=0 if checked is None else int(checked.size),
        fl=fl,
        minority_fractions=array(h5, "lia/minority/fractions"),
        minority_acceptance=array(h5, "lia/minority/acceptance"),
        minority_vote_sum=array(h5, "lia/minority/vote_sum"),
        minority_class=int(number(minority.get("class"), -1)),
        timing=timing,
        ranks=int(np.asarray(h5.attrs.get("ranks", 0)).reshape(-1)[0]),
        revision=report_common.decode(h5.attrs.get("git_revision", "")),
        threshold_rule=str(lia.get("threshold", "kmeans")),
        dataset=style.dataset_name(deck),
        body=str(lia.get("body", "identity")))


def find_runs(root):
    """Every ``fluence lia`` run under ROOT, in a stable order."""
    runs = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs
                            if not (directory == root and d == "figures"))
        rel = os.path.relpath(directory, root)
        if "results.h5" not in files:
            if "results.h5.partial" in files:
                note(f"skipped: {directory}: no results.h5 (run unfinished?)")
            continue
        parts = [] if rel == "." else rel.split(os.sep)
        variant = parts[0] if len(parts) > 1 else "."
        family = parts[1] if len(parts) > 1 else ""
        below = os.sep.join(parts[1:]) if len(parts) > 1 else rel
        path = os.path.join(directory, "results.h5")
        run = report_common.load_results(
            PROG, path,
            lambda h5, v=variant, f=family, r=below, p=path:
                parse_run(h5, v, f, r, p))
        if run is not None:
            runs.append(run)
    return runs


def variant_order(runs):
    """The variants present: the known ones first, then the others."""
    names = sorted({run.variant for run in runs})
    return ([v for v in VARIANTS if v in names]
            + [v for v in names if v not in VARIANTS])


def eps_key(value):
    """Sort key for eps values: numbers ascending, inf last."""
    return (1, 0.0) if math.isinf(value) else (0, value)


# --------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------


def fmt_eps(value):
    """eps as 0.5, 1, inf ('?' when unknown)."""
    if value is None or math.isnan(value):
        return "?"
    return "inf" if math.isinf(value) else f"{value:g}"


def fmt_num(value, digits=3):
    return f"{value:.{digits}g}" if finite(value) else "-"


def describe_setting(run, with_fraction=True):
    """'non-IID α = 0.1, label_shift, 30% corrupted'."""
    data = "IID" if run.iid else f"non-IID {ALPHA} = {run.alpha:g}"
    text = f"{data}, {run.corruption}"
    if with_fraction and finite(run.corrupted_fraction):
        text += f", {100 * run.corrupted_fraction:g}% corrupted"
    if finite(run.corruption_rate) and run.corruption_rate < 1:
        text += f" ({100 * run.corruption_rate:g}% of each batch)"
    return text


def describe_variant(variant, runs):
    """'vote baseline median' (and the vote accounting when not exact)."""
    baselines = sorted({r.vote_baseline for r in runs
                        if r.variant == variant})
    accounting = sorted({r.vote_accounting for r in runs
                         if r.variant == variant})
    text = f"variant {variant}: vote baseline " + "/".join(baselines)
    if accounting and accounting != ["exact"]:
        text += ", vote accounting " + "/".join(accounting)
    thresholds = sorted({r.threshold_rule for r in runs
                         if r.variant == variant})
    if thresholds and thresholds != ["kmeans"]:
        text += ", threshold " + "/".join(thresholds)
    bodies = sorted({r.body for r in runs if r.variant == variant})
    if bodies and bodies != ["identity"]:
        text += ", body " + "/".join(bodies)
    return text


def eps_label(run):
    """eps, or 'train/vote' when they differ."""
    if close(run.epsilon_train, run.epsilon_vote):
        return fmt_eps(run.epsilon_train)
    return f"{fmt_eps(run.epsilon_train)}/{fmt_eps(run.epsilon_vote)}"


# --------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------


def table_runs(runs, variants):
    """Runs and wall time per variant and family."""
    rows = []
    for variant in variants:
        for family in FAMILIES:
            chosen = [r for r in runs
                      if r.variant == variant and r.family == family]
            if not chosen:
                continue
            walls = [r.wall for r in chosen if finite(r.wall)]
            ranks = sorted({r.ranks for r in chosen if r.ranks})
            revisions = sorted({r.revision[:7] for r in chosen
                                if r.revision})
            rows.append([
                variant, family, str(len(chosen)),
                ",".join(str(k) for k in ranks) or "?",
                ",".join(revisions) or "?",
                fmt_num(sum(walls), 3) if walls else "-",
                fmt_num(min(walls), 3) if walls else "-",
                fmt_num(max(walls), 3) if walls else "-"])
    return Table(
        title="Runs", keys=["variant", "family"],
        groups=[("", ["runs", "ranks", "revision", "total s", "min s",
                      "max s"])],
        rows=rows,
        footnote="Wall seconds per run: /lia/timing/{setup,contributors,"
                 "votes,fl} summed (rank 0; excludes MPI start-up, the "
                 "sign check's retrains and writing results.h5); revision: the git revision(s) of "
                 "the fluence that wrote the runs.")


def target_lines(runs, variants):
    """The issue's targets per variant: (text lines)."""
    lines = []
    for variant in variants:
        mine = [r for r in runs if r.variant == variant and r.is_target()]
        if not mine:
            continue
        # filtering: prefer a grid run, then corruption, then any
        order = {"grid": 0, "corruption": 1, "fl": 2}
        filt = sorted(mine, key=lambda r: order.get(r.family, 3))[0]
        recall_ok = finite(filt.recall) and filt.recall >= TARGET_RECALL
        prec_ok = finite(filt.precision) and filt.precision >= TARGET_PRECISION
        lines.append(
            f"{variant}: recall {fmt_pct(filt.recall, 2)}% (target >= "
            f"{100 * TARGET_RECALL:g}%: {'met' if recall_ok else 'not met'}),"
            f" precision {fmt_pct(filt.precision, 2)}% (target >= "
            f"{100 * TARGET_PRECISION:g}%: {'met' if prec_ok else 'not met'})"
            f", accuracy {fmt_pct(filt.accuracy, 2)}% "
            f"[{filt.family}/{filt.rel.split(os.sep)[-1]}]")
        fl = [r for r in mine if "lia" in r.fl and "oracle" in r.fl]
        for run in fl:
            lia = run.fl["lia"][0][-1]
            oracle = run.fl["oracle"][0][-1]
            gap = oracle - lia
            ok = gap <= TARGET_FL_GAP
            extra = ""
            if "lia_cc" in run.fl:
                extra = (f"; LIA + centered clipping "
                         f"{fmt_pct(run.fl['lia_cc'][0][-1], 2)}%")
            lines.append(
                f"{variant}: after {run.fl['lia'][0].size - 1} FL rounds "
                f"LIA + FedAvg {fmt_pct(lia, 2)}% vs oracle "
                f"{fmt_pct(oracle, 2)}%: gap {100 * gap:+.2f} points "
                f"(target <= {100 * TARGET_FL_GAP:g}: "
                f"{'met' if ok else 'not met'}){extra}")
    return lines


def grid_tables(runs, variants):
    """Recall / precision / accuracy per participants x eps, per variant
    and setting."""
    tables = []
    for variant in variants:
        grid = [r for r in runs if r.variant == variant and r.family == "grid"]
        settings = sorted({r.setting for r in grid},
                          key=lambda s: (math.isinf(s[0]), s[0], s[1], s[2],
                                         s[3]))
        for setting in settings:
            chosen = [r for r in grid if r.setting == setting]
            labels = sorted({eps_label(r) for r in chosen},
                            key=lambda lab: eps_key(number(lab.split("/")[0])))
            sizes = sorted({r.participants for r in chosen})
            cells = {(r.participants, eps_label(r)): r for r in chosen}
            rows = []
            for size in sizes:
                row = [str(size)]
                for metric in ("recall", "precision", "accuracy"):
                    for lab in labels:
                        run = cells.get((size, lab))
                        row.append(fmt_pct(getattr(run, metric))
                                   if run else "")
                rows.append(row)
            eps_columns = [f"{EPS}={lab}" for lab in labels]
            tables.append(Table(
                title=f"Filtration ({variant}): {describe_setting(chosen[0])}",
                keys=["participants"],
                groups=[("recall %", eps_columns),
                        ("precision %", eps_columns),
                        ("accuracy %", eps_columns)],
                rows=rows,
                footnote=f"{describe_variant(variant, runs)}. One {EPS} for "
                         "DP-SGD (delta = 1e-5) and the votes; recall = "
                         "rejected corrupted / corrupted, precision = "
                         "rejected corrupted / rejected, accuracy = correct "
                         "decisions / participants; '-': undefined (nobody "
                         "rejected); empty: not run."))
    return tables


def corruption_table(runs, variants):
    """A row per corrupted fraction (seed Table II)."""
    rows = []
    for variant in variants:
        chosen = sorted((r for r in runs if r.variant == variant
                         and r.family == "corruption"),
                        key=lambda r: r.corrupted_fraction)
        for run in chosen:
            corrupted = int(run.corrupted.sum())
            rejected = int((run.accepted == 0).sum())
            honest_rejected = int(((run.accepted == 0)
                                   & (run.corrupted == 0)).sum())
            rows.append([
                variant, f"{100 * run.corrupted_fraction:g}",
                str(run.participants), eps_label(run), str(corrupted),
                str(rejected), str(honest_rejected), fmt_pct(run.recall),
                fmt_pct(run.precision), fmt_pct(run.accuracy),
                fmt_num(run.threshold, 4)])
    if not rows:
        return None
    return Table(
        title="Corrupted fraction (LIA Table II analog)",
        keys=["variant", "corrupted %"],
        groups=[("", ["P", EPS, "corrupted", "rejected", "honest rejected",
                      "recall %", "precision %", "accuracy %",
                      "threshold"])],
        rows=rows,
        footnote="Non-IID (the deck's alpha), label_shift. The k-means "
                 "threshold always splits the vote sums in two, so without "
                 "corrupted participants it rejects honest ones (recall "
                 "undefined).")


def fl_tables(runs, variants):
    """A row per FL method, per variant and setting (seed Fig. 3)."""
    tables = []
    for variant in variants:
        for run in (r for r in runs if r.variant == variant and r.fl):
            methods = [m for m in METHODS if m in run.fl] + sorted(
                m for m in run.fl if m not in METHODS)
            oracle = run.fl["oracle"][0][-1] if "oracle" in run.fl else None
            rows = []
            for method in methods:
                acc, clients = run.fl[method]
                gap = (100 * (acc[-1] - oracle)) if oracle is not None \
                    else math.nan
                rows.append([
                    METHOD_TITLES.get(method, method),
                    str(clients) if clients >= 0 else "?",
                    fmt_pct(acc[0], 2),
                    fmt_pct(acc[1], 2) if acc.size > 1 else "-",
                    fmt_pct(acc[-1], 2),
                    f"{gap:+.2f}" if finite(gap) else "-"])
            rounds = run.fl[methods[0]][0].size - 1
            tables.append(Table(
                title=f"FL after filtering ({variant}, {run.rel}): "
                      f"{describe_setting(run)}, {run.participants} "
                      f"participants, {EPS} = {eps_label(run)}, "
                      f"{rounds} rounds",
                keys=["method"],
                groups=[("", ["clients", "M0 %", "round 1 %",
                              f"round {rounds} %", "vs oracle"])],
                rows=rows,
                footnote="Test accuracy of the aggregated last layer; "
                         "clients: participants aggregated (KRUM and the "
                         "trimmed mean know the number of corrupted ones); "
                         "vs oracle: final accuracy minus the oracle's, in "
                         "points. Filtration of this run: recall "
                         f"{fmt_pct(run.recall)}%, precision "
                         f"{fmt_pct(run.precision)}%."))
    return tables


def minority_table(runs, variants):
    """A row per minority share (seed Fig. 5)."""
    rows = []
    for variant in variants:
        for run in (r for r in runs if r.variant == variant
                    and r.minority_fractions is not None
                    and r.minority_fractions.size):
            honest = run.corrupted == 0
            honest_accepted = (float(run.accepted[honest].mean())
                               if honest.any() else math.nan)
            sums = np.atleast_2d(run.minority_vote_sum) \
                if run.minority_vote_sum is not None else None
            for i, fraction in enumerate(run.minority_fractions):
                mean_sum = (float(np.mean(sums[i])) if sums is not None
                            and i < sums.shape[0] else math.nan)
                newcomers = (str(sums.shape[1]) if sums is not None
                             else "?")
                rows.append([
                    variant, f"{100 * fraction:g}", newcomers,
                    f"{run.minority_acceptance[i]:.3f}",
                    fmt_num(mean_sum, 4), fmt_num(run.threshold, 4),
                    f"{honest_accepted:.3f}" if finite(honest_accepted)
                    else "-"])
    if not rows:
        return None
    cls = sorted({r.minority_class for r in runs
                  if r.minority_fractions is not None})
    return Table(
        title="Minority newcomers (LIA Fig. 5 analog)",
        keys=["variant", "class share %"],
        groups=[("", ["newcomers", "accepted", "mean vote sum",
                      "threshold", "honest accepted"])],
        rows=rows,
        footnote="The participants lack class "
                 + ",".join(str(c) for c in cls)
                 + "; each newcomer holds the given share of it. accepted: "
                 "share of newcomers whose vote sum reaches the "
                 "population's threshold; honest accepted: share of the "
                 "population's honest participants accepted. The LIA paper "
                 "(CIFAR-10, 512 runs): 0.63 at 5%, 0.54 at 20%.")


def signcheck_table(runs, variants):
    """A row per eps (seed Fig. 9)."""
    rows = []
    for variant in variants:
        chosen = sorted((r for r in runs if r.variant == variant
                         and finite(r.sign_agreement)),
                        key=lambda r: (r.participants, eps_key(r.eps)))
        for run in chosen:
            rows.append([
                variant, eps_label(run), str(run.participants),
                str(run.sign_checked), fmt_pct(run.sign_agreement, 1),
                fmt_num(run.noise_multiplier, 3), fmt_pct(run.recall),
                fmt_pct(run.precision)])
    if not rows:
        return None
    return Table(
        title="Sign of the lazy influence vs the exact influence (LIA "
              "Fig. 9 analog)",
        keys=["variant", EPS],
        groups=[("", ["P", "checked", "agreement %", "DP-SGD sigma",
                      "recall %", "precision %"])],
        rows=rows,
        footnote="agreement: share of (checked contributor, validator) "
                 "pairs where the sign of Eq. 1 (before randomized "
                 "response, baseline 0) equals the sign of the exact "
                 "influence (M0's objective retrained with the batch "
                 "added); only DP-SGD's noise depends on eps here.")


def variant_table(runs, variants):
    """Runs present in several variants, side by side."""
    if len(variants) < 2:
        return None
    by_rel = {}
    for run in runs:
        by_rel.setdefault(run.rel, {})[run.variant] = run
    shared = sorted((rel for rel, v in by_rel.items() if len(v) > 1))
    if not shared:
        return None
    rows = []
    for rel in shared:
        row = [rel]
        for metric in ("recall", "precision", "accuracy"):
            for variant in variants:
                run = by_rel[rel].get(variant)
                row.append(fmt_pct(getattr(run, metric)) if run else "")
        rows.append(row)
    return Table(
        title="Variants compared on the same runs",
        keys=["run"],
        groups=[("recall %", list(variants)),
                ("precision %", list(variants)),
                ("accuracy %", list(variants))],
        rows=rows,
        footnote="; ".join(describe_variant(v, runs) for v in variants)
                 + ". Same deck and seed otherwise, so the same "
                   "participants and batches.")


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------


def data_name(runs):
    """The data set(s) of the runs, from their decks (not assumed)."""
    return " / ".join(sorted({run.dataset for run in runs}))


def figure_grid(runs, variant, path):
    """Recall / precision / accuracy vs participants, a line per eps, a
    column per setting (seed Fig. 10)."""
    grid = [r for r in runs if r.variant == variant and r.family == "grid"]
    settings = sorted({r.setting for r in grid},
                      key=lambda s: (math.isinf(s[0]), s[0], s[1]))
    if not settings:
        return None
    fig, axes = style.figure(columns=1 if len(settings) == 1 else 2, rows=3,
                             cols=len(settings), sharex=True, sharey="row",
                             height=5.6, legend_rows=1)
    epsilons = sorted({r.eps for r in grid}, key=eps_key)
    for col, setting in enumerate(settings):
        chosen = [r for r in grid if r.setting == setting]
        for row, metric in enumerate(("recall", "precision", "accuracy")):
            ax = axes[row][col]
            for i, eps in enumerate(epsilons):
                line = sorted((r for r in chosen if close(r.eps, eps)),
                              key=lambda r: r.participants)
                if not line:
                    continue
                ax.plot([r.participants for r in line],
                        [100 * getattr(r, metric) for r in line],
                        marker=style.MARKERS[i % len(style.MARKERS)],
                        color=style.color(i),
                        label=f"{EPS} = {fmt_eps(eps)}")
            ax.set_xscale("log")
            if col == 0:
                ax.set_ylabel(f"{metric} (%)")
            if row == 0:
                ax.set_title(describe_setting(chosen[0]), fontsize=7)
            if row == 2:
                ax.set_xlabel("participants")
                sizes = sorted({r.participants for r in grid})
                ax.set_xticks(sizes)
                ax.set_xticklabels([str(s) for s in sizes])
                ax.minorticks_off()
    handles, labels = legend_entries(axes.reshape(-1))
    style.figure_legend(fig, handles, labels, columns=min(len(labels), 6))
    return save(fig, path)


METRICS = ("recall", "precision", "accuracy")


def figure_corruption(runs, variants, path):
    """Recall / precision / accuracy vs the corrupted fraction."""
    chosen = [r for r in runs if r.family == "corruption"]
    if not chosen:
        return None
    fig, axes = style.figure(columns=2, cols=3, height=2.4, sharey=True,
                             legend_rows=1)
    axes = axes[0]
    for i, variant in enumerate(v for v in variants
                                if any(r.variant == v for r in chosen)):
        line = sorted((r for r in chosen if r.variant == variant),
                      key=lambda r: r.corrupted_fraction)
        for ax, metric in zip(axes, METRICS):
            ax.plot([100 * r.corrupted_fraction for r in line],
                    [100 * getattr(r, metric) for r in line],
                    marker=style.MARKERS[i % len(style.MARKERS)],
                    color=style.color(i), label=f"vote baseline {variant}")
    for ax, metric in zip(axes, METRICS):
        ax.set_ylabel(f"{metric} (%)")
        ax.set_xlabel("corrupted participants (%)")
    handles, labels = legend_entries(axes)
    style.figure_legend(fig, handles, labels)
    return save(fig, path)


def figure_fl(runs, variants, path):
    """Test accuracy per round, a panel per FL run (seed Fig. 3)."""
    chosen = [r for v in variants for r in runs if r.variant == v and r.fl]
    if not chosen:
        return None
    columns = min(len(chosen), 3)
    rows = math.ceil(len(chosen) / columns)
    fig, axes = style.figure(columns=1 if len(chosen) == 1 else 2, rows=rows,
                             cols=columns, sharey=True,
                             height=2.3 * rows + 0.5, legend_rows=2)
    colors = {m: style.color(i) for i, m in enumerate(METHODS)}
    for ax, run in zip(axes.flat, chosen):
        for method in [m for m in METHODS if m in run.fl]:
            acc = run.fl[method][0]
            ax.plot(np.arange(acc.size), 100 * acc, color=colors[method],
                    linestyle="--" if method in ("none", "oracle") else "-",
                    label=METHOD_TITLES[method])
        ax.set_title(f"{run.variant}, {run.dataset}\n{describe_setting(run)}",
                     fontsize=7)
        style.round_axis(ax, "round (0 = M0)")
    for ax in axes.flat[len(chosen):]:
        ax.axis("off")
    for row in axes:
        row[0].set_ylabel("test accuracy (%)")
    handles, labels = legend_entries(axes.flat)
    style.figure_legend(fig, handles, labels, columns=4)
    return save(fig, path)


def figure_minority(runs, variants, path):
    """Acceptance vs the share of the missing class (seed Fig. 5)."""
    chosen = [r for v in variants for r in runs if r.variant == v
              and r.minority_fractions is not None
              and r.minority_fractions.size]
    if not chosen:
        return None
    fig, axes = style.figure(columns=1, height=2.8)
    ax = axes[0][0]
    for i, run in enumerate(chosen):
        ax.plot(100 * run.minority_fractions, run.minority_acceptance,
                marker=style.MARKERS[i % len(style.MARKERS)],
                color=style.color(i), label=f"{run.variant} ({run.dataset})")
    ax.plot([100 * f for f, _ in SEED_MINORITY],
            [a for _, a in SEED_MINORITY], linestyle="none", marker="x",
            color="k", label="LIA paper (CIFAR-10), as quoted")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("missing class in the newcomer's batch (%)")
    ax.set_ylabel("newcomers accepted (fraction)")
    ax.legend()
    return save(fig, path)


def figure_signcheck(runs, variants, path):
    """Sign agreement vs eps (seed Fig. 9)."""
    chosen = [r for r in runs if finite(r.sign_agreement)]
    if not chosen:
        return None
    fig, axes = style.figure(columns=1, height=2.6)
    ax = axes[0][0]
    for i, variant in enumerate(v for v in variants
                                if any(r.variant == v for r in chosen)):
        line = sorted((r for r in chosen if r.variant == variant),
                      key=lambda r: eps_key(r.eps))
        labels = [fmt_eps(r.eps) for r in line]
        ax.plot(range(len(line)), [100 * r.sign_agreement for r in line],
                marker=style.MARKERS[i % len(style.MARKERS)],
                color=style.color(i), label=f"vote baseline {variant}")
        ax.set_xticks(range(len(line)))
        ax.set_xticklabels(labels)
    ax.set_xlabel(f"DP-SGD {EPS}")
    ax.set_ylabel("sign agreement with exact influence (%)")
    ax.legend()
    return save(fig, path)


def figure_votes(runs, variant, path):
    """The target run's vote sums before / after randomized response with
    the threshold (seed Fig. 2)."""
    mine = [r for r in runs if r.variant == variant and r.is_target()]
    if not mine:
        return None
    order = {"grid": 0, "corruption": 1, "fl": 2}
    run = sorted(mine, key=lambda r: order.get(r.family, 3))[0]
    panels = [("after randomized response", run.vote_sum)]
    if run.true_vote_sum is not None:
        panels.insert(0, ("before randomized response", run.true_vote_sum))
    fig, axes = style.figure(columns=1 if len(panels) == 1 else 2,
                             cols=len(panels), height=2.5, legend_rows=1)
    index = np.arange(run.participants)
    bad = run.corrupted == 1
    for ax, (title, values) in zip(axes[0], panels):
        ax.scatter(index[~bad], values[~bad], s=3, color=style.color(0),
                   label="honest", linewidths=0)
        ax.scatter(index[bad], values[bad], s=3, color=style.color(1),
                   label="corrupted", linewidths=0)
        ax.set_title(title)
        ax.set_xlabel("contributor")
    axes[0][-1].axhline(run.threshold, color="k", linestyle="--",
                        linewidth=0.8, label="k-means threshold")
    axes[0][0].set_ylabel("sum of votes")
    handles, labels = legend_entries(axes[0])
    style.figure_legend(fig, handles, labels)
    return save(fig, path)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Tables and figures of the LIA experiments written by "
                    "scripts/run_lia_experiments.sh (fluence lia; LIA, "
                    "docs/references.md).")
    parser.add_argument("root", metavar="ROOT",
                        help="results root: ROOT/<variant>/<family>/.../"
                             "results.h5")
    report_common.add_markdown_option(parser)
    report_common.add_figure_options(parser, "ROOT/figures")
    return parser.parse_args(argv)


def main(argv=None):
    """Entry point; returns the process exit status."""
    args = parse_args(argv)
    runs, status = report_common.load_results_root(
        PROG, args.root, find_runs,
        "<variant>/<family>/.../results.h5, as written by "
        "scripts/run_lia_experiments.sh")
    if runs is None:
        return status
    variants = variant_order(runs)
    revisions = sorted({r.revision for r in runs if r.revision})
    if len(revisions) > 1:
        note("the runs come from several fluence revisions ("
             + ", ".join(revisions) + "): compare with care")
    missing = [f for f in FAMILIES if not any(r.family == f for r in runs)]
    if missing:
        note(f"no runs of the famil{'y' if len(missing) == 1 else 'ies'} "
             f"{', '.join(missing)} (not run yet?)")

    render = render_markdown if args.markdown else render_plain
    blocks = []
    if args.markdown:
        blocks.append("## [LIA](../references.md#lia): lazy-influence data "
                      "filtering on " + data_name(runs))
    blocks.append(render(table_runs(runs, variants)))
    lines = target_lines(runs, variants)
    title = ("Targets (non-IID alpha = 0.1, 30% label_shift, eps = 1, 500 "
             "participants)")
    if lines:
        if args.markdown:
            blocks.append(f"### {title}\n\n"
                          + "\n".join(f"- {line}" for line in lines))
        else:
            blocks.append(f"{title}\n{'=' * len(title)}\n"
                          + "\n".join(lines))
    else:
        blocks.append(f"{title}: no run of that set-up")
    tables = grid_tables(runs, variants)
    tables.append(corruption_table(runs, variants))
    tables.extend(fl_tables(runs, variants))
    tables.append(minority_table(runs, variants))
    tables.append(signcheck_table(runs, variants))
    tables.append(variant_table(runs, variants))
    blocks.extend(render(t) for t in tables if t is not None)
    print("\n\n".join(blocks))

    if args.no_figures:
        return 0
    directory = args.figures or os.path.join(args.root, "figures")
    figures = []
    for variant in variants:
        figures.append((functools.partial(figure_grid, runs, variant),
                        f"lia_grid_{variant}.png"))
        figures.append((functools.partial(figure_votes, runs, variant),
                        f"lia_votes_{variant}.png"))
    figures += [
        (functools.partial(figure_corruption, runs, variants),
         "lia_corruption.png"),
        (functools.partial(figure_fl, runs, variants), "lia_fl.png"),
        (functools.partial(figure_minority, runs, variants),
         "lia_minority.png"),
        (functools.partial(figure_signcheck, runs, variants),
         "lia_signcheck.png")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        return report_common.write_figures(PROG, directory, figures)


if __name__ == "__main__":
    sys.exit(main())
