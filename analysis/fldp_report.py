#!/usr/bin/python3
"""Tables and figures of the FLDP-FL experiments (seed 000, Carey & Wu, §5).

Reads the results files that ``scripts/run_fldp_experiments.sh`` writes with
``fluence fldp`` under ROOT::

    ROOT/<dataset>/q1/eps_<eps>/results.h5   Q1: one client, eps -> eps'
    ROOT/<dataset>/q2/results.h5             Q2: 1..5 clients, 3 -> 1
    ROOT/<dataset>/q3/x_<X>/results.h5       Q3: the client holds X of the data
    ROOT/<dataset>/q4/results.h5             Q4: full retraining vs estimate

for whichever datasets and experiments exist, and prints

* Q1, like seed 000 Table 2: a row per (eps, eps') cell that exists
  (eps' < eps), per dataset ALD, AAD and ED as mean +- std over the
  re-randomized retrains, ED_exp (the distance to the exact expected retrain,
  what the estimator targets) and, when the run made Newton refinement steps
  (``fldp.newton_steps > 0``), ED_N<k>: the distance of the k-th (last) Newton
  iterate to the expected retrain;
* Q2 (seed 000 Fig. 2 top): a row per number m of changing clients;
* Q3 (seed 000 Fig. 2 bottom): a row per share X of the changing client;
* Q4 (seed 000 Table 3): per dataset the time of one full federated
  retraining (mean of ``/fldp/time_retrain_s``), of the estimate
  (``/fldp/time_estimate_s``), their ratio, the one-off set-up time of the
  estimator (``/fldp/time_setup_s``: Hessian factorization or
  preconditioner) and the ratio with the set-up included.

ALD = L(theta_est) - L(theta_retrain) and AAD = Acc(theta_est) -
Acc(theta_retrain) on the server's test set, ED = ||theta_est -
theta_retrain||_2 (seed 000 Eq. 28-30); AAD is printed in percentage points,
like the paper. Standard deviations are over the retrain draws (numpy's
default, ddof = 0). Cases where clients leave (``case_remove``) are not part of
these tables and are skipped.

Figures (analysis/style.py: vector PDF and 300-dpi PNG, into ``--figures
DIR``, default ``ROOT/figures``):

* ``fig1_aad.png`` (seed 000 Fig. 1): AAD against eps', a line per training
  eps (colour and marker), a panel per dataset, the shaded band = ±1 std
  over the draws;
* ``fig2_multi.png`` (seed 000 Fig. 2): ALD, AAD and ED against the number of
  changing clients (top row) and against the changing client's share X
  (bottom row), a line per dataset, the shaded band = ±1 std over the draws;
  dashed: the same metric against the exact expected retrain.

Usage::

    analysis/fldp_report.py out/fldp
    analysis/fldp_report.py out/fldp --markdown > docs/results/fldp.md
    analysis/fldp_report.py /tmp/fldp-try --figures /tmp/fldp-figs
    analysis/fldp_report.py out/fldp --no-figures

The tables go to stdout (aligned plain text, or GitHub markdown with
``--markdown``); notes about missing or unreadable experiments and the paths
of the written figures go to stderr. Exit status 2 when ROOT holds no results
(or is not a directory), 0 otherwise.

Needs h5py, numpy and matplotlib (Debian: python3-h5py, python3-numpy,
python3-matplotlib).
"""

import argparse
import functools
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

import report_common  # noqa: E402  (first: selects matplotlib's Agg backend)
from report_common import (  # noqa: E402
    EPS, ResultsError, Table, decode, deck_settings, legend_entries,
    render_plain, save, scalar)

import numpy as np  # noqa: E402
import style  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

KNOWN_DATASETS = ("acs", "credit_g", "fashion_mnist")
DATASET_TITLES = {
    "acs": "ACS Income (synthetic)",
    "credit_g": "German credit",
    "fashion_mnist": "Fashion-MNIST",
}
EXPERIMENTS = ("q1", "q2", "q3", "q4")
PM = "\u00b1"
PROG = "fldp_report"

# a note for the user on stderr (skipped or unreadable experiments)
note = functools.partial(report_common.note, PROG)


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------


@dataclass
class Case:
    """One FLDP case of a results file, with its metrics per retrain draw."""

    eps_from: float
    eps_to: float
    clients: int                 # number of changing clients
    ald: np.ndarray              # [draws]
    aad: np.ndarray              # [draws], fraction
    ed: np.ndarray               # [draws]
    ald_expected: float
    aad_expected: float
    ed_expected: float
    ed_newton: float             # after the last Newton step (NaN: none)
    newton_steps: int
    time_estimate: float
    time_retrain: float
    newton_ed: np.ndarray        # [steps] ED_exp after each Newton step (empty: none)
    newton_time: np.ndarray      # [steps] the refined estimate's seconds (NaN: not recorded)


@dataclass
class Run:
    """The FLDP results of one results file."""

    path: str
    cases: List[Case]
    time_setup: float
    solver: str
    scope: str
    train_rows: int
    parameters: int
    client0_share: float
    retrain_mode: str
    schedule: str
    base_accuracy: float
    draws: int


def dataset(h5, name, path):
    """Dataset ``name`` as a numpy array, or raise a clear ResultsError."""
    if name not in h5:
        raise ResultsError(
            f"{path}: dataset '{name}' is missing (not a 'fluence fldp' "
            "results file, or run with fldp.retrain = false)")
    return np.asarray(h5[name][()])


def optional(h5, name):
    """Dataset ``name`` as a numpy array, or None when it is absent."""
    return np.asarray(h5[name][()]) if name in h5 else None


def per_draw(values, cases, name, path):
    """A [cases x draws] dataset as a 2-D float array (1-D: one draw)."""
    values = np.asarray(values, dtype=float)
    if values.ndim == 1:
        values = values.reshape(-1, 1)
    if values.shape[0] != cases:
        raise ResultsError(f"{path}: {name} has {values.shape[0]} rows, "
                           f"expected {cases} (one per case)")
    return values


def per_case(values, cases, name, path):
    """A [cases] dataset as a 1-D float array of length ``cases``."""
    values = np.atleast_1d(np.asarray(values, dtype=float)).reshape(-1)
    if values.size != cases:
        raise ResultsError(f"{path}: {name} has {values.size} entries, "
                           f"expected {cases} (one per case)")
    return values


def parse_run(h5, path):
    """Parse the datasets of an open results file."""
    eps_from = np.atleast_1d(dataset(h5, "/fldp/case_eps_from", path))
    eps_from = eps_from.astype(float)
    n = eps_from.size
    eps_to = per_case(dataset(h5, "/fldp/case_eps_to", path), n,
                      "/fldp/case_eps_to", path)
    mask = np.asarray(dataset(h5, "/fldp/case_clients", path))
    mask = mask.reshape(n, -1) if n else mask
    remove = per_case(dataset(h5, "/fldp/case_remove", path), n,
                      "/fldp/case_remove", path)
    ald = per_draw(dataset(h5, "/fldp/ald", path), n, "/fldp/ald", path)
    aad = per_draw(dataset(h5, "/fldp/aad", path), n, "/fldp/aad", path)
    ed = per_draw(dataset(h5, "/fldp/ed", path), n, "/fldp/ed", path)
    expected = {
        key: per_case(dataset(h5, f"/fldp/{key}_expected", path), n,
                      f"/fldp/{key}_expected", path)
        for key in ("ald", "aad", "ed")}
    newton = optional(h5, "/fldp/newton_ed_expected")
    if newton is not None and newton.size:
        newton = per_draw(newton, n, "/fldp/newton_ed_expected", path)
    else:
        newton = None
    time_estimate = per_case(dataset(h5, "/fldp/time_estimate_s", path), n,
                             "/fldp/time_estimate_s", path)
    newton_time = optional(h5, "/fldp/time_newton_s")  # absent before it was written
    if newton is not None and newton_time is not None and newton_time.size:
        newton_time = per_draw(newton_time, n, "/fldp/time_newton_s", path)
    elif newton is not None:
        newton_time = np.full(newton.shape, math.nan)
    retrain_times = optional(h5, "/fldp/time_retrain_s")
    time_retrain = (per_case(retrain_times, n, "/fldp/time_retrain_s", path)
                    if retrain_times is not None else np.full(n, math.nan))

    cases = []
    for i in range(n):
        if remove[i]:
            continue
        cases.append(Case(
            eps_from=float(eps_from[i]), eps_to=float(eps_to[i]),
            clients=int(np.count_nonzero(mask[i])),
            ald=ald[i], aad=aad[i], ed=ed[i],
            ald_expected=float(expected["ald"][i]),
            aad_expected=float(expected["aad"][i]),
            ed_expected=float(expected["ed"][i]),
            ed_newton=float(newton[i, -1]) if newton is not None else math.nan,
            newton_steps=newton.shape[1] if newton is not None else 0,
            time_estimate=float(time_estimate[i]),
            time_retrain=float(time_retrain[i]),
            newton_ed=newton[i] if newton is not None else np.empty(0),
            newton_time=newton_time[i] if newton is not None else np.empty(0)))

    deck = deck_settings(h5)
    federation = deck.get("federation", {})
    schedule = ""
    if federation:
        epochs = federation.get("local_epochs", "?")
        schedule = (f"{federation.get('rounds', '?')} rounds x {epochs} "
                    f"epoch{'' if epochs == 1 else 's'}, batch "
                    f"{federation.get('batch_size', '?')}")
    sizes = optional(h5, "/clients/size")
    share = math.nan
    if sizes is not None and sizes.size and float(np.sum(sizes)) > 0:
        share = float(sizes.reshape(-1)[0]) / float(np.sum(sizes))
    theta = optional(h5, "/model/theta")
    return Run(
        path=path, cases=cases,
        time_setup=scalar(h5, "/fldp/time_setup_s"),
        solver=decode(h5["/fldp/solver"][()]) if "/fldp/solver" in h5 else "",
        scope=(decode(h5["/fldp/hessian_scope"][()])
               if "/fldp/hessian_scope" in h5 else ""),
        train_rows=int(np.sum(sizes)) if sizes is not None else 0,
        parameters=int(theta.size) if theta is not None else 0,
        client0_share=share,
        retrain_mode=str(deck.get("fldp", {}).get("retrain_mode", "")),
        schedule=schedule,
        base_accuracy=scalar(h5, "/fldp/base_test_accuracy"),
        draws=int(ald.shape[1]) if n else 0)


def load(path):
    """The Run of one ``fluence fldp`` results file, or None with a note on
    stderr when the file is unusable."""
    return report_common.load_results(PROG, path,
                                      lambda h5: parse_run(h5, path))


def number_from_dir(name, prefix):
    """The number in a directory name like ``eps_3`` / ``x_0.4`` (or None)."""
    if not name.startswith(prefix):
        return None
    text = name[len(prefix):]
    if text.lower() in ("inf", "infinity"):
        return math.inf
    try:
        return float(text)
    except ValueError:
        return None


def numbered_runs(directory, prefix):
    """{number: Run} for the ``<prefix><number>/results.h5`` under a dir."""
    runs = {}
    if not os.path.isdir(directory):
        return runs
    for name in sorted(os.listdir(directory)):
        value = number_from_dir(name, prefix)
        if value is None or not os.path.isdir(os.path.join(directory, name)):
            continue
        path = report_common.results_file(PROG, os.path.join(directory, name))
        if path is None:
            continue
        run = load(path)
        if run is not None:
            runs[value] = run
    return runs


def single_run(directory):
    """The Run of ``directory/results.h5``, or None."""
    path = report_common.results_file(PROG, directory)
    return load(path) if path is not None else None


@dataclass
class Dataset:
    """The experiments found for one dataset."""

    name: str
    q1: Dict[float, Run] = field(default_factory=dict)
    q2: Optional[Run] = None
    q3: Dict[float, Run] = field(default_factory=dict)
    q4: Optional[Run] = None

    @property
    def title(self):
        return DATASET_TITLES.get(self.name, self.name)

    def empty(self):
        return not (self.q1 or self.q2 or self.q3 or self.q4)


def dataset_names(root):
    """Dataset directories under ROOT: the known ones first, then others."""
    names = [d for d in sorted(os.listdir(root))
             if os.path.isdir(os.path.join(root, d))
             and any(os.path.isdir(os.path.join(root, d, q))
                     for q in EXPERIMENTS)]
    known = [d for d in KNOWN_DATASETS if d in names]
    return known + [d for d in names if d not in KNOWN_DATASETS]


def load_root(root):
    """Every dataset with at least one readable experiment under ROOT."""
    found = []
    for name in dataset_names(root):
        base = os.path.join(root, name)
        ds = Dataset(name=name,
                     q1=numbered_runs(os.path.join(base, "q1"), "eps_"),
                     q2=single_run(os.path.join(base, "q2")),
                     q3=numbered_runs(os.path.join(base, "q3"), "x_"),
                     q4=single_run(os.path.join(base, "q4")))
        missing = [q for q, have in (("q1", ds.q1), ("q2", ds.q2),
                                     ("q3", ds.q3), ("q4", ds.q4))
                   if not have]
        if ds.empty():
            note(f"{name}: no readable results, skipped")
            continue
        if missing:
            note(f"{name}: no {', '.join(missing)} results")
        found.append(ds)
    return found


# --------------------------------------------------------------------------
# Statistics and formatting
# --------------------------------------------------------------------------


def mean_std(values):
    """(mean, std) over the finite draws; NaN when there are none (std: NaN
    for a single draw, which has no spread)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if not values.size:
        return math.nan, math.nan
    if values.size == 1:
        return float(values[0]), math.nan
    return float(values.mean()), float(values.std())


def fmt_eps(value):
    """An epsilon for a table cell: inf as the infinity sign."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "?"
    if math.isinf(value):
        return "\u221e"
    return f"{value:g}"


def fmt_num(value, digits=3):
    """A number with ``digits`` significant digits, or '-' when NaN."""
    return report_common.fmt_num(value, digits, smallest=1e-3)


def fmt_pm(mean, std, digits=3):
    """'mean ± std' with the same decimals for both, chosen so that the
    larger of |mean| and std shows ``digits`` significant digits."""
    if not math.isfinite(mean):
        return "-"
    if not math.isfinite(std):
        return fmt_num(mean, digits)
    reference = max(abs(mean), std)
    if reference == 0:
        return f"0 {PM} 0"
    if not 1e-4 <= reference < 1e4:
        return f"{mean:.{digits - 1}e} {PM} {std:.{digits - 1}e}"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(reference))))
    return f"{mean:.{decimals}f} {PM} {std:.{decimals}f}"


def fmt_pp(mean, std):
    """AAD in percentage points: '+1.69 ± 0.10'."""
    if not math.isfinite(mean):
        return "-"
    text = f"{100 * mean:+.2f}"
    if math.isfinite(std):
        text += f" {PM} {100 * std:.2f}"
    return text


def metric_cells(case):
    """ALD, AAD, ED (mean ± std over draws), ED_exp, ED after Newton."""
    return [fmt_pm(*mean_std(case.ald)),
            fmt_pp(*mean_std(case.aad)),
            fmt_pm(*mean_std(case.ed)),
            fmt_num(case.ed_expected),
            fmt_num(case.ed_newton)]


# --------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------


def render_markdown(table):
    """A GitHub markdown table; columns named '<dataset> <metric>', or, with
    a single dataset, named by the metric with the dataset above the
    table."""
    if len(table.groups) > 1:
        return report_common.render_markdown(table, header=table.keys + [
            f"{title} {m}" for title, metrics in table.groups
            for m in metrics])
    title = table.groups[0][0] if table.groups else ""
    return report_common.render_markdown(
        table, header=table.header(),
        intro=f"Dataset: {title}." if title else "")


METRICS = ["ALD", "AAD (pp)", "ED", "ED_exp", "ED_Newton"]
METRIC_NOTE = (
    "ALD, AAD (percentage points), ED: estimate minus re-randomized "
    "retrain, mean {pm} std over the draws; ED_exp: distance to the exact "
    "expected retrain; ED_Newton: after the last Newton refinement step "
    "('-': none).").format(pm=PM)


def grouped_rows(datasets, cases_of):
    """Rows keyed by a sortable tuple: {key: {dataset name: Case}}."""
    rows = {}
    for ds in datasets:
        for key, case in cases_of(ds):
            rows.setdefault(key, {})[ds.name] = case
    return rows


def build_rows(keyed, datasets, key_cells):
    """Rows of cells: key cells, then the metric cells of each dataset."""
    rows = []
    for key in sorted(keyed):
        cells = key_cells(key)
        for ds in datasets:
            case = keyed[key].get(ds.name)
            cells.extend(metric_cells(case) if case is not None
                         else [""] * len(METRICS))
        rows.append(cells)
    return rows


def q1_cases(ds):
    """((-eps, eps'), Case) for the one-client cases of the Q1 runs."""
    for eps, run in ds.q1.items():
        for case in run.cases:
            if case.clients != 1 or not math.isfinite(case.eps_to):
                continue
            if math.isfinite(case.eps_from) and case.eps_from != eps:
                note(f"{run.path}: case eps {case.eps_from:g} differs from "
                     f"the directory's eps_{fmt_eps(eps)}; using the file's")
                eps = case.eps_from
            yield (-eps, case.eps_to), case


def table_q1(datasets):
    """Seed 000 Table 2: one client changes eps -> eps'."""
    with_q1 = [ds for ds in datasets if ds.q1]
    if not with_q1:
        return None
    keyed = grouped_rows(with_q1, q1_cases)
    return Table(
        title=f"Q1 (Table 2): one client changes {EPS} -> {EPS}'",
        keys=[EPS, f"{EPS}'"], groups=[(ds.title, METRICS) for ds in with_q1],
        rows=build_rows(keyed, with_q1,
                        lambda k: [fmt_eps(-k[0]), fmt_eps(k[1])]),
        footnote=METRIC_NOTE)


def q2_cases(ds):
    """((m, eps, eps'), Case) for the Q2 cases."""
    if ds.q2 is None:
        return
    for case in ds.q2.cases:
        yield (case.clients, -case.eps_from, -case.eps_to), case


def table_q2(datasets):
    """Seed 000 Fig. 2 (top): m clients change eps -> eps'."""
    with_q2 = [ds for ds in datasets if ds.q2 is not None]
    if not with_q2:
        return None
    keyed = grouped_rows(with_q2, q2_cases)
    return Table(
        title=f"Q2 (Fig. 2 top): m clients change {EPS} -> {EPS}'",
        keys=["m", f"{EPS} -> {EPS}'"],
        groups=[(ds.title, METRICS) for ds in with_q2],
        rows=build_rows(keyed, with_q2, lambda k: [
            str(k[0]), f"{fmt_eps(-k[1])} -> {fmt_eps(-k[2])}"]),
        footnote=METRIC_NOTE)


def q3_cases(ds):
    """((X, eps, eps'), Case) for the one-client cases of the Q3 runs."""
    for x, run in ds.q3.items():
        for case in run.cases:
            if case.clients == 1:
                yield (x, -case.eps_from, -case.eps_to), case


def table_q3(datasets):
    """Seed 000 Fig. 2 (bottom): the changing client holds X of the data."""
    with_q3 = [ds for ds in datasets if ds.q3]
    if not with_q3:
        return None
    keyed = grouped_rows(with_q3, q3_cases)
    return Table(
        title=f"Q3 (Fig. 2 bottom): the changing client holds X of the "
              f"training rows, {EPS} -> {EPS}'",
        keys=["X", f"{EPS} -> {EPS}'"],
        groups=[(ds.title, METRICS) for ds in with_q3],
        rows=build_rows(keyed, with_q3, lambda k: [
            f"{100 * k[0]:g}%", f"{fmt_eps(-k[1])} -> {fmt_eps(-k[2])}"]),
        footnote=METRIC_NOTE)


def table_q4(datasets):
    """Seed 000 Table 3: one full federated retraining vs the estimate."""
    with_q4 = [ds for ds in datasets if ds.q4 is not None and ds.q4.cases]
    if not with_q4:
        return None
    rows = []
    for ds in with_q4:
        run = ds.q4
        if run.retrain_mode and run.retrain_mode != "full":
            note(f"{run.path}: fldp.retrain_mode = \"{run.retrain_mode}\", "
                 "so the retrain time is a Newton re-solve, not full "
                 "federated training")
        retrain = [c.time_retrain for c in run.cases]
        estimate = [c.time_estimate for c in run.cases]
        t_retrain, s_retrain = mean_std(retrain)
        t_estimate, s_estimate = mean_std(estimate)
        ratio = (t_retrain / t_estimate
                 if math.isfinite(t_retrain) and t_estimate > 0 else math.nan)
        setup = run.time_setup if math.isfinite(run.time_setup) else 0.0
        ratio_setup = (t_retrain / (t_estimate + setup)
                       if math.isfinite(t_retrain) and t_estimate + setup > 0
                       else math.nan)
        rows.append([
            ds.title, f"{run.train_rows:,}" if run.train_rows else "-",
            f"{run.parameters:,}" if run.parameters else "-",
            run.schedule or "-", run.solver or "-",
            fmt_num(t_retrain), fmt_num(t_estimate),
            fmt_num(ratio), fmt_num(run.time_setup), fmt_num(ratio_setup)])
    return Table(
        title="Q4 (Table 3): time of one full federated retraining vs the "
              "FLDP-FL estimate (one client, seconds)",
        keys=["dataset", "rows", "p", "schedule", "solver"],
        groups=[("", ["retrain (s)", "estimate (s)", "ratio", "setup (s)",
                      "ratio incl. setup"])],
        rows=rows,
        footnote="retrain: mean of /fldp/time_retrain_s (one retraining from "
                 "zero with the deck's schedule); estimate: "
                 "/fldp/time_estimate_s; ratio = retrain / estimate; setup: "
                 "/fldp/time_setup_s (one-off Hessian factorization or "
                 "preconditioner, shared by all cases); ratio incl. setup = "
                 "retrain / (estimate + setup).")


def table_estimators(datasets):
    """One table where each estimator carries both its error and its time
    (issue 26): over the one-client cases of Q1, the first-order estimate
    and the estimate after each Newton step, their distance to the exact
    expected retrain and their wall time, against Q4's full retraining."""
    rows = []
    for ds in datasets:
        cases = [case for _, case in q1_cases(ds)]
        if not cases:
            continue
        q1_run = next(iter(ds.q1.values()))
        setup = q1_run.time_setup if math.isfinite(q1_run.time_setup) else 0.0
        retrain = math.nan
        if ds.q4 is not None and ds.q4.cases:
            retrain = mean_std([c.time_retrain for c in ds.q4.cases])[0]
        estimators = [("first order", [c.ed_expected for c in cases],
                       [c.time_estimate for c in cases])]
        steps = min(c.newton_steps for c in cases)
        for k in range(steps):
            estimators.append((f"+ {k + 1} Newton step{'s' if k else ''}",
                               [c.newton_ed[k] for c in cases],
                               [c.newton_time[k] for c in cases]))
        for name, errors, times in estimators:
            time = float(np.median(times))
            ratio = retrain / time if math.isfinite(time) and time > 0 else math.nan
            ratio_setup = (retrain / (time + setup)
                           if math.isfinite(time) and time + setup > 0 else math.nan)
            rows.append([ds.title, name, str(len(cases)),
                         fmt_num(float(np.median(errors))),
                         fmt_num(float(np.max(errors))), fmt_num(time),
                         fmt_num(retrain), fmt_num(ratio), fmt_num(ratio_setup)])
    if not rows:
        return None
    return Table(
        title="Estimators: error and time of the same estimate (Q1's "
              "one-client cases)",
        keys=["dataset", "estimator", "cases"],
        groups=[("", ["median ED_exp", "max ED_exp", "median time (s)",
                      "full retrain (s)", "ratio", "ratio incl. setup"])],
        rows=rows,
        footnote="ED_exp: distance to the exact expected retrain "
                 "(/fldp/ed_expected, then /fldp/newton_ed_expected per "
                 "step); time: /fldp/time_estimate_s, then "
                 "/fldp/time_newton_s (the first-order estimate, installing "
                 "the changed client's expected data and the steps so far); "
                 "full retrain: Q4's mean /fldp/time_retrain_s; ratio = full "
                 "retrain / time; ratio incl. setup adds Q1's one-off "
                 "/fldp/time_setup_s to the estimate's time.")


def summary_table(datasets):
    """One line per dataset: training set-up of its runs."""
    rows = []
    for ds in datasets:
        runs = list(ds.q1.values()) + [ds.q2] + list(ds.q3.values()) + [ds.q4]
        run = next(r for r in runs if r is not None)
        found = ", ".join(
            q for q, have in (("Q1", ds.q1), ("Q2", ds.q2), ("Q3", ds.q3),
                              ("Q4", ds.q4)) if have)
        rows.append([ds.title, f"{run.train_rows:,}", f"{run.parameters:,}",
                     str(run.draws), run.scope or "-", run.solver or "-",
                     found])
    return Table(
        title="Runs", keys=["dataset"],
        groups=[("", ["training rows", "p", "draws", "Hessian", "solver",
                      "experiments"])], rows=rows,
        footnote="draws: re-randomized retrains per case "
                 "(fldp.retrain_seeds).")


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------


def band_line(ax, x, runs_cases, attribute, scale, color, label=None,
              marker="o"):
    """Mean over the draws of ``attribute`` against x, with a shaded
    ±1 std band (not error bars: the lines of a panel stay readable)."""
    means, stds = [], []
    for case in runs_cases:
        mean, std = mean_std(getattr(case, attribute))
        means.append(scale * mean)
        stds.append(scale * std if math.isfinite(std) else math.nan)
    return style.mean_band(ax, x, means, stds, color, label=label,
                           marker=marker)


def figure_q1(datasets, path):
    """Seed 000 Fig. 1: AAD vs eps', a line per eps, a panel per dataset."""
    with_q1 = [ds for ds in datasets if ds.q1]
    if not with_q1:
        note("no Q1 results: fig1_aad.png not written")
        return None
    by_dataset = []
    for ds in with_q1:
        by_eps = {}
        for (neg_eps, eps_to), case in q1_cases(ds):
            by_eps.setdefault(-neg_eps, []).append((eps_to, case))
        by_dataset.append(by_eps)
    # one colour and marker per training eps, the same in every panel
    all_eps = sorted({eps for by_eps in by_dataset for eps in by_eps},
                     reverse=True)
    count = len(with_q1)
    columns = min(count, 3)
    rows = math.ceil(count / columns)
    fig, axes = style.figure(columns=1 if count == 1 else 2, rows=rows,
                             cols=columns, sharey=True,
                             height=(2.3 if count == 1 else 2.1) * rows + 0.4,
                             legend_rows=1)
    all_eps_to = set()
    for ax, ds, by_eps in zip(axes.flat, with_q1, by_dataset):
        for eps in sorted(by_eps, reverse=True):
            i = all_eps.index(eps)
            points = sorted(by_eps[eps], key=lambda p: p[0])
            all_eps_to.update(p[0] for p in points)
            band_line(ax, [p[0] for p in points], [p[1] for p in points],
                      "aad", 100.0, style.color(i),
                      label=f"{EPS} = {fmt_eps(eps)}",
                      marker=style.MARKERS[i % len(style.MARKERS)])
        style.reference_line(ax)
        ax.set_xscale("log")
        ax.set_title(ds.title)
        ax.set_xlabel(f"new {EPS}\u2032")
    for ax in axes.flat[count:]:
        ax.axis("off")
    ticks = sorted(all_eps_to)
    for ax in axes.flat[:count]:
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{t:g}" for t in ticks])
        ax.minorticks_off()
    for row in axes:
        row[0].set_ylabel("AAD (percentage points)")
    handles, labels = legend_entries(axes.flat)
    eps_labels = [f"{EPS} = {fmt_eps(e)}" for e in all_eps]
    order = sorted(range(len(labels)), key=lambda k: eps_labels.index(labels[k]))
    style.figure_legend(fig, [handles[k] for k in order],
                        [labels[k] for k in order],
                        columns=min(len(labels), 5),
                        title=f"training {EPS} of the changing client")
    return save(fig, path)


PANELS = (("ald", "ALD (nat)", 1.0), ("aad", "AAD (pp)", 100.0),
          ("ed", "ED", 1.0))


def figure_q2_q3(datasets, path):
    """Seed 000 Fig. 2: ALD/AAD/ED vs m (top) and vs X (bottom)."""
    have_q2 = [ds for ds in datasets if ds.q2 is not None]
    have_q3 = [ds for ds in datasets if ds.q3]
    if not have_q2 and not have_q3:
        note("no Q2 or Q3 results: fig2_multi.png not written")
        return None
    fig, axes = style.figure(columns=2, rows=2, cols=3, height=4.6,
                             legend_rows=1)
    names = [ds.name for ds in datasets]
    rows = ((have_q2, q2_cases, "changing clients m", False),
            (have_q3, q3_cases, "changing client's share X (%)", True))
    for r, (have, cases_of, xlabel, percent) in enumerate(rows):
        ticks = set()
        for c, (attr, label, scale) in enumerate(PANELS):
            ax = axes[r][c]
            for ds in have:
                color = style.color(names.index(ds.name))
                points = sorted(cases_of(ds), key=lambda kc: kc[0])
                if not points:
                    continue
                x = [100 * k[0] if percent else k[0] for k, _ in points]
                ticks.update(x)
                cases = [case for _, case in points]
                band_line(ax, x, cases, attr, scale, color, label=ds.title)
                expected = [scale * getattr(case, f"{attr}_expected")
                            for case in cases]
                ax.plot(x, expected, linestyle="--", marker="x",
                        color=color, linewidth=0.9, alpha=0.8)
            if not have:
                ax.text(0.5, 0.5, "no results", transform=ax.transAxes,
                        ha="center", va="center", color="0.5")
            if attr != "ed":
                style.reference_line(ax)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(label)
        if ticks:
            for ax in axes[r]:
                ax.set_xticks(sorted(ticks))
                ax.set_xticklabels([f"{t:g}" for t in sorted(ticks)])
                if len(ticks) == 1:
                    t = next(iter(ticks))
                    ax.set_xlim(t - 1, t + 1)
    handles, labels = legend_entries(axes.flat)
    handles.append(Line2D([], [], color="0.3", linestyle="--", marker="x"))
    labels.append("against the exact expected retrain")
    style.figure_legend(fig, handles, labels, columns=len(labels))
    return save(fig, path)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def parse_args(argv):
    """Parse the command line."""
    parser = argparse.ArgumentParser(
        description="Tables (FLDP-FL Tables 2-3, Fig. 2 data; "
                    "docs/references.md) and figures "
                    "(Figs. 1-2) of the FLDP-FL experiments written by "
                    "scripts/run_fldp_experiments.sh.")
    parser.add_argument("root", metavar="ROOT",
                        help="results root: ROOT/<dataset>/{q1/eps_*,q2,"
                             "q3/x_*,q4}/results.h5")
    report_common.add_figure_options(
        parser, "ROOT/figures", what="fig1_aad.png and fig2_multi.png")
    report_common.add_markdown_option(
        parser, "GitHub markdown tables (for docs/results/fldp.md) instead "
                "of aligned plain text")
    return parser.parse_args(argv)


def main(argv=None):
    """Entry point; returns the process exit status."""
    args = parse_args(argv)
    datasets, status = report_common.load_results_root(
        PROG, args.root, load_root,
        "<dataset>/{q1/eps_*,q2,q3/x_*,q4}/results.h5, as written "
        "by scripts/run_fldp_experiments.sh")
    if datasets is None:
        return status

    render = render_markdown if args.markdown else render_plain
    tables = [summary_table(datasets), table_q1(datasets),
              table_q2(datasets), table_q3(datasets), table_q4(datasets),
              table_estimators(datasets)]
    if args.markdown:
        print("## [FLDP-FL](../references.md#fldp-fl): influence estimate vs "
              "retraining")
        print()
    print("\n\n".join(render(t) for t in tables if t is not None))

    if args.no_figures:
        return 0
    figures = args.figures or os.path.join(args.root, "figures")
    return report_common.write_figures(PROG, figures, (
        (functools.partial(figure_q1, datasets), "fig1_aad.png"),
        (functools.partial(figure_q2_q3, datasets), "fig2_multi.png")))


if __name__ == "__main__":
    sys.exit(main())
