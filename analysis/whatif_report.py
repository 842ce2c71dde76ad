#!/usr/bin/python3
"""Tables and figures of ``fluence whatif`` runs (seed 001, Carey, Van & Wu,
"Evaluating the Impact of LDP on Utility Loss via Influence Functions", §V).

Each RUN_DIR holds the ``results.h5`` of one ``fluence whatif`` run: for K
group fractions k (share of the training rows perturbed), E privacy budgets
eps and the influence variants present (``rr``: general randomized response
on features and/or label, seed Eq. 13; ``rr_l``: label only, no noise
correction, Eq. 14; ``rr_flc``: label with forward loss correction, Eq. 22),
the influence estimate of the change of the test loss (``estimated`` [K x
E]) and, when the run retrained, the actual change after randomizing and
retraining R times (``actual`` [K x E x R]) and after retraining on the exact
expected objective (``expected_retrain`` [K x E]).  RUN_DIR may also be the
path of the results file itself.

Printed on stdout (aligned plain text, or GitHub markdown with
``--markdown``):

* Runs: one line per run (dataset, randomized attributes, group, test rows,
  base test loss, grid sizes, variants, retrained or not);
* Table III analog: rows = group fraction k (%), columns = for each run and
  each variant with retraining, first a block of MAE rows, then a block of
  Spearman rho rows, each closed by a "mean" row over k.  Both are per k over
  the eps grid, averaged over the R repeats (``/whatif/<variant>/mae`` and
  ``spearman``, recomputed from ``estimated`` and ``actual`` when absent);
* the same table against the expected retrain (``mae_expected``,
  ``spearman_expected``), when a run has it;
* Estimates (runs without retraining, instead of Table III): per run and
  variant, the estimated change of the test loss, a row per eps, a column
  per k;
* Table IV analog per run: time of the initial training, of the IHVP, of one
  (k, eps) cell, of one group (E cells) and of all K groups, influence vs
  retraining, with the speed-up (retraining / influence).  As in the seed,
  the per-group and all-groups rows assume one variant and one retraining
  per cell; the measured totals (all variants, all repeats) follow in the
  last row.

Figures (analysis/style.py: vector PDF and 300-dpi PNG, unless
``--no-figures``; into ``--figures DIR``, default ``<first RUN_DIR>/figures``),
for runs that retrained:

* ``fig1_<label>_actual_vs_estimated.png`` (seed Fig. 1), one per run: a
  panel per group fraction (at most 10, evenly chosen), x = estimated change
  of the test loss, y = actual change (mean over the repeats, error bars =
  std when R > 1), a point per eps coloured by eps (viridis, log scale: dark
  = small eps, yellow = large; colour bar on the right), dashed y = x; a row
  of panels per variant (with
  rr_l and rr_flc: top row no noise correction, bottom row FLC, as in the
  seed), a single variant wraps into rows of 5 panels;
* ``fig2_actual_vs_estimated_k<k>pct.png`` (seed Fig. 2), when two or more
  runs retrained: a panel per run (e.g. features / label / both randomized)
  at one group fraction (``--fig2-fraction``, default the largest), variant
  ``--fig2-variant`` (default rr, else the run's first variant).

Usage::

    analysis/whatif_report.py out/whatif_adult
    analysis/whatif_report.py out/adult out/acs --labels Adult ACS --markdown
    analysis/whatif_report.py out/feat out/label out/both \\
        --labels features label both --fig2-fraction 75% --figures /tmp/figs
    analysis/whatif_report.py out/whatif_adult --no-figures

Notes (skipped figures, inexact fractions) and the paths of the written
figures go to stderr.  Exit status 2 when a RUN_DIR has no results.h5, the
file has no /whatif group or an unusable layout, or the figures cannot be
written; 0 otherwise.

Needs h5py, numpy and matplotlib (Debian: python3-h5py, python3-numpy,
python3-matplotlib).
"""

import argparse
import functools
import math
import os
import re
import sys
import warnings
from dataclasses import dataclass, field
from typing import Dict, Optional

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

import report_common  # noqa: E402  (first: selects matplotlib's Agg backend)
from report_common import (  # noqa: E402
    DELTA, EPS, ResultsError, Table, decode, fmt_num, fmt_pct,
    render_markdown, save, scalar)

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import style  # noqa: E402
from matplotlib.colors import LogNorm, Normalize  # noqa: E402

VARIANTS = ("rr", "rr_l", "rr_flc")        # file order = display order
VARIANT_TITLES = {"rr": "RR", "rr_l": "RR-L", "rr_flc": "RR-FLC"}
SECOND_ORDER = "_2"  # suffix of the second-order pseudo-variants (/whatif/<v>/second_order)
TIMING_KEYS = ("initial_training_s", "ihvp_s", "influence_cells_s",
               "influence_total_s", "per_cell_s", "retrain_total_s",
               "retrain_per_cell_s", "retrain_count")
RHO = "\u03c1"
MAX_PANELS = 10      # fig1: group fractions shown per variant
WRAP_COLUMNS = 5     # fig1 with a single variant: panels per row
# eps along a perceptually uniform scale without a pale end (a diverging map
# centred near eps = 1 drew those points nearly white)
CMAP = style.SEQUENTIAL
PROG = "whatif_report"

note = functools.partial(report_common.note, PROG)  # a note on stderr


def quiet_nanmean(values, axis=None):
    """np.nanmean without the 'mean of empty slice' warning (gives NaN)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        return np.nanmean(values, axis=axis)


def quiet_nanstd(values, axis=None):
    """np.nanstd without the 'degrees of freedom' warning (gives NaN)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        return np.nanstd(values, axis=axis)


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------


@dataclass
class Variant:
    """One influence variant of a run (``/whatif/<name>``)."""

    name: str
    estimated: np.ndarray                 # [K, E]
    actual: Optional[np.ndarray]          # [K, E, R] or None (no retrain)
    expected: Optional[np.ndarray]        # [K, E] or None
    mae: np.ndarray                       # [K], NaN without retraining
    spearman: np.ndarray                  # [K]
    mae_expected: np.ndarray              # [K]
    spearman_expected: np.ndarray         # [K]

    @property
    def title(self):
        if self.name.endswith(SECOND_ORDER):
            base = self.name[:-len(SECOND_ORDER)]
            return VARIANT_TITLES.get(base, base) + " 2nd"
        return VARIANT_TITLES.get(self.name, self.name)

    @property
    def first_order(self):
        return not self.name.endswith(SECOND_ORDER)

    @property
    def retrained(self):
        return self.actual is not None or bool(np.isfinite(self.mae).any())

    @property
    def has_expected(self):
        return (self.expected is not None
                or bool(np.isfinite(self.mae_expected).any()))


@dataclass
class Run:
    """The /whatif results of one results file."""

    path: str
    label: str
    eps: np.ndarray                       # [E]
    fractions: np.ndarray                 # [K]
    group_rows: np.ndarray                # [K]
    variants: Dict[str, Variant]
    timing: Dict[str, float]
    base_test_loss: float
    attrs: Dict[str, str] = field(default_factory=dict)

    @property
    def repeats(self):
        return max((v.actual.shape[2] for v in self.variants.values()
                    if v.actual is not None), default=0)

    @property
    def retrained(self):
        return any(v.retrained for v in self.variants.values())


def array(group, name, shape, path):
    """Dataset ``name`` of ``group`` as a float array of ``shape``, or None
    when absent; a shape mismatch raises ResultsError."""
    if name not in group:
        return None
    values = np.asarray(group[name][()], dtype=float)
    if values.size != int(np.prod(shape)):
        raise ResultsError(
            f"{path}: {group.name}/{name} has shape {values.shape}, "
            f"expected {tuple(shape)}")
    return values.reshape(shape)


def ranks(values):
    """Ranks 1..n with ties averaged (for Spearman's rho)."""
    order = np.argsort(values, kind="mergesort")
    ranked = np.empty(len(values))
    ranked[order] = np.arange(1, len(values) + 1)
    for value in np.unique(values):
        tied = values == value
        ranked[tied] = ranked[tied].mean()
    return ranked


def spearman(x, y):
    """Spearman's rho over the pairs where both are finite (NaN if < 3)."""
    keep = np.isfinite(x) & np.isfinite(y)
    if keep.sum() < 3:
        return math.nan
    rx, ry = ranks(x[keep]), ranks(y[keep])
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def agreement(estimated, actual):
    """Per group fraction, mean over repeats of (MAE, rho) over the eps grid.

    ``estimated`` is [K, E], ``actual`` [K, E, R]; the fallback for files
    without the mae / spearman datasets."""
    k_count, _, repeats = actual.shape
    mae = np.full((k_count, repeats), math.nan)
    rho = np.full((k_count, repeats), math.nan)
    for k in range(k_count):
        for r in range(repeats):
            diff = np.abs(estimated[k] - actual[k, :, r])
            if np.isfinite(diff).any():
                mae[k, r] = quiet_nanmean(diff)
            rho[k, r] = spearman(estimated[k], actual[k, :, r])
    return quiet_nanmean(mae, axis=1), quiet_nanmean(rho, axis=1)


def read_variant(group, name, k_count, e_count, path, second_order=False):
    """Read ``/whatif/<name>`` (its ``second_order`` estimate when asked, as
    the pseudo-variant ``<name>_2``); metrics missing from the file are
    computed from the arrays when possible, else NaN."""
    sub = group[name]
    source = sub["second_order"] if second_order else sub
    estimated = array(source, "estimated", (k_count, e_count), path)
    if estimated is None:
        raise ResultsError(f"{path}: {sub.name}/estimated is missing")
    actual = None
    if "actual" in sub:
        raw = np.asarray(sub["actual"][()], dtype=float)
        repeats = raw.size // max(1, k_count * e_count)
        actual = array(sub, "actual", (k_count, e_count, max(1, repeats)),
                       path)
    expected = array(sub, "expected_retrain", (k_count, e_count), path)
    nan = np.full(k_count, math.nan)
    metrics = {key: array(source, key, (k_count,), path)
               for key in ("mae", "spearman", "mae_expected",
                           "spearman_expected")}
    if metrics["mae"] is None and actual is not None:
        metrics["mae"], metrics["spearman"] = agreement(
            estimated, quiet_nanmean(actual, axis=2)[:, :, None])
    if metrics["mae_expected"] is None and expected is not None:
        metrics["mae_expected"], metrics["spearman_expected"] = agreement(
            estimated, expected[:, :, None])
    metrics = {key: nan if value is None else value
               for key, value in metrics.items()}
    return Variant(name=name + (SECOND_ORDER if second_order else ""),
                   estimated=estimated, actual=actual, expected=expected,
                   **metrics)


def read_timing(group):
    """The /whatif/timing scalars as floats (NaN when absent)."""
    if "timing" not in group:
        return {key: math.nan for key in TIMING_KEYS}
    return {key: scalar(group["timing"], key) for key in TIMING_KEYS}


def parse_whatif(h5, path):
    """Parse the /whatif group of an open results file (label set later)."""
    if "whatif" not in h5:
        raise ResultsError(f"{path}: no /whatif group (not a 'fluence "
                           "whatif' results file)")
    group = h5["whatif"]
    for name in ("eps", "group_fraction"):
        if name not in group:
            raise ResultsError(f"{path}: /whatif/{name} is missing")
    eps = np.atleast_1d(np.asarray(group["eps"][()], dtype=float))
    fractions = np.atleast_1d(
        np.asarray(group["group_fraction"][()], dtype=float))
    k_count, e_count = fractions.size, eps.size
    rows = array(group, "group_rows", (k_count,), path)
    variants = {name: read_variant(group, name, k_count, e_count, path)
                for name in VARIANTS if name in group}
    for name in VARIANTS:
        if name in group and "second_order" in group[name]:
            variants[name + SECOND_ORDER] = read_variant(
                group, name, k_count, e_count, path, second_order=True)
    if not variants:
        raise ResultsError(f"{path}: /whatif has none of the variants "
                           f"{', '.join(VARIANTS)}")
    return Run(path=path, label="", eps=eps, fractions=fractions,
               group_rows=(rows if rows is not None
                           else np.full(k_count, math.nan)),
               variants=variants, timing=read_timing(group),
               base_test_loss=scalar(group, "base_test_loss"),
               attrs={key: decode(value).strip()
                      for key, value in group.attrs.items()})


def results_path(run_dir):
    """The results file of RUN_DIR (or RUN_DIR itself when it is a file)."""
    if os.path.isfile(run_dir):
        return run_dir
    path = os.path.join(run_dir, "results.h5")
    if not os.path.isdir(run_dir):
        raise ResultsError(f"{run_dir}: no such directory")
    if not os.path.isfile(path):
        raise ResultsError(f"{run_dir}: no results.h5 (run unfinished, or "
                           "not a 'fluence whatif' output directory?)")
    return path


def read_run(run_dir):
    """Read the results file of RUN_DIR into a Run."""
    path = results_path(run_dir)
    return report_common.read_results(path,
                                      lambda h5: parse_whatif(h5, path))


def run_dir_of(run):
    """The directory that holds the run's results file."""
    return os.path.dirname(os.path.abspath(run.path))


def assign_labels(runs, labels):
    """Label each run: --labels, else its directory's name (with the parent
    when two runs share a name), else the dataset attribute."""
    if labels:
        for run, label in zip(runs, labels):
            run.label = label
        return
    names = [os.path.basename(run_dir_of(run)) for run in runs]
    for run, name in zip(runs, names):
        if names.count(name) > 1:
            parent = os.path.basename(os.path.dirname(run_dir_of(run)))
            name = f"{parent}/{name}" if parent else name
        run.label = name or run.attrs.get("dataset") or run.path


# --------------------------------------------------------------------------
# Formatting and rendering
# --------------------------------------------------------------------------


def fmt_rho(value):
    """A correlation with 3 decimals, or '-' when NaN."""
    return f"{value:.3f}" if math.isfinite(value) else "-"


def fmt_seconds(value):
    """A duration in seconds, or '-' when NaN."""
    return f"{fmt_num(value)} s" if math.isfinite(value) else "-"


def fmt_ratio(value):
    """A speed-up factor like '158x', or '-' when NaN."""
    return f"{fmt_num(value)}x" if math.isfinite(value) else "-"


def render_plain(table):
    """An aligned plain-text table; an untitled group next to titled ones
    gets a rule of '-' in the line of group titles."""
    return report_common.render_plain(table, untitled="-")


# --------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------


def describe_attributes(text):
    """'a,b,label' -> 'features a, b + label' (what was randomized)."""
    names = [a.strip() for a in text.split(",") if a.strip()]
    features = [a for a in names if a != "label"]
    parts = []
    if features:
        parts.append(("feature " if len(features) == 1 else "features ")
                     + ", ".join(features))
    if "label" in names:
        parts.append("label")
    return " + ".join(parts) or "?"


def eps_range(eps):
    """'30 in [0.001, 5]' for an eps grid."""
    if not eps.size:
        return "0"
    return f"{eps.size} in [{eps.min():g}, {eps.max():g}]"


def table_runs(runs):
    """One line per run: what was randomized, for whom, and the grids."""
    rows = []
    for run in runs:
        attrs = run.attrs
        group = attrs.get("group_attribute", "")
        if group:
            group += f" in {{{attrs.get('group_values', '')}}}"
            if attrs.get("group_size"):
                group += f" ({attrs['group_size']} rows)"
        rows.append([
            run.label, attrs.get("dataset", "") or "-",
            describe_attributes(attrs.get("attributes", "")),
            group or "-", attrs.get("test_rows", "") or "-",
            fmt_num(run.base_test_loss, 4), str(run.fractions.size),
            eps_range(run.eps), str(run.repeats) if run.retrained else "-",
            ", ".join(v.title for v in run.variants.values()),
            "yes" if run.retrained else "no"])
    return Table(
        title="Runs", keys=["run"],
        groups=[("", ["dataset", "randomized", "group", "test rows",
                      "base test loss", "K", f"{EPS} grid", "R", "variants",
                      "retrained"])],
        rows=rows,
        footnote=f"K: group fractions; R: randomize-and-retrain repeats per "
                 f"(k, {EPS}) cell; group: the records eligible for "
                 "perturbation.")


def fraction_keys(runs):
    """Sorted union of the group fractions of the runs (rounded keys)."""
    return sorted({round(float(f), 9) for run in runs for f in run.fractions})


def metric_column(run, variant, metric, keys):
    """Cells of one variant's metric for each k key (blank: k not in run)."""
    by_key = {round(float(f), 9): i for i, f in enumerate(run.fractions)}
    values = getattr(variant, metric)
    return [values[by_key[key]] if key in by_key else None for key in keys]


def metric_block(runs, metric, keys, label, fmt):
    """Rows of one block (MAE or rho) of Table III, closed by a mean row."""
    columns = [metric_column(run, v, metric, keys)
               for run, v in table_columns(runs, metric)]
    rows = []
    for i, key in enumerate(keys):
        cells = ["" if col[i] is None else fmt(col[i]) for col in columns]
        rows.append([label if i == 0 else "", fmt_pct(key, 2)] + cells)
    means = [quiet_nanmean(np.array([c for c in col if c is not None],
                                    dtype=float)) for col in columns]
    rows.append([label if not keys else "", "mean"]
                + [fmt(float(m)) for m in means])
    return rows


def table_columns(runs, metric):
    """(run, variant) pairs that have the metric (retrain / expected)."""
    need = "has_expected" if metric.endswith("_expected") else "retrained"
    return [(run, v) for run in runs for v in run.variants.values()
            if getattr(v, need)]


def table_iii(runs, expected=False):
    """Seed Table III: MAE and rho per group fraction, run and variant."""
    suffix = "_expected" if expected else ""
    pairs = table_columns(runs, "mae" + suffix)
    if not pairs:
        return None
    with_data = [run for run in runs if any(r is run for r, _ in pairs)]
    keys = fraction_keys(with_data)
    groups = [(run.label, [v.title for r, v in pairs if r is run])
              for run in with_data]
    rows = (metric_block(with_data, "mae" + suffix, keys, "MAE", fmt_num)
            + metric_block(with_data, "spearman" + suffix, keys, RHO,
                           fmt_rho))
    target = ("the retrain on the exact expected objective" if expected
              else "the mean change over the randomize-and-retrain runs")
    return Table(
        title=f"Table III{' (expected retrain)' if expected else ''}: "
              f"influence estimate vs {'expected ' if expected else ''}"
              "retraining",
        keys=["", "k (%)"], groups=groups, rows=rows,
        footnote=f"Per group fraction k, over the {EPS} grid: mean absolute "
                 f"error and Spearman {RHO} between the estimated and the "
                 f"actual change of the test loss, against {target}; mean: "
                 "over k; '-': not available (NaN).")


def table_estimates(run, variant):
    """Estimated change of the test loss, a row per eps, a column per k."""
    rows = [[f"{eps:.3g}"] + [fmt_num(float(variant.estimated[k, e]))
                            for k in range(run.fractions.size)]
            for e, eps in enumerate(run.eps)]
    return Table(
        title=f"Estimates ({run.label}, {variant.title}): estimated "
              f"{DELTA} test loss (no retraining)",
        keys=[EPS],
        groups=[("k (%)", [fmt_pct(f, 2) for f in run.fractions])],
        rows=rows,
        footnote=f"Influence estimate of the change of the test loss (base "
                 f"{fmt_num(run.base_test_loss, 4)}) when the records of "
                 f"fraction k are randomized with {EPS}-LDP.")


def per_cell_times(run):
    """(influence, retrain) seconds for one (k, eps) cell of one variant."""
    t = run.timing
    cells = run.fractions.size * run.eps.size
    influence = t["per_cell_s"]
    if not math.isfinite(influence) and cells:
        first = [v for v in run.variants.values() if v.first_order]
        influence = t["influence_cells_s"] / (cells * len(first))
    retrain = t["retrain_per_cell_s"]
    if not math.isfinite(retrain) and t["retrain_count"] > 0:
        retrain = t["retrain_total_s"] / t["retrain_count"]
    return influence, retrain


def ratio(numerator, denominator):
    """numerator / denominator, NaN unless both are finite and > 0."""
    if (math.isfinite(numerator) and math.isfinite(denominator)
            and denominator > 0):
        return numerator / denominator
    return math.nan


def timing_row(name, influence, retrain):
    """A row of Table IV with the speed-up of the influence estimate."""
    return [name, fmt_seconds(influence), fmt_seconds(retrain),
            fmt_ratio(ratio(retrain, influence))]


def table_iv(run):
    """Seed Table IV: influence estimate vs retraining, seconds."""
    t = run.timing
    k_count, e_count = run.fractions.size, run.eps.size
    cell_i, cell_r = per_cell_times(run)
    init = t["initial_training_s"]
    setup = init + (t["ihvp_s"] if math.isfinite(t["ihvp_s"]) else 0.0)
    rows = [["initial training", fmt_seconds(init), fmt_seconds(init), ""],
            ["IHVP (once)", fmt_seconds(t["ihvp_s"]), "-", ""],
            timing_row(f"per {EPS} (one cell)", cell_i, cell_r),
            timing_row(f"per group ({e_count} cells)", e_count * cell_i,
                       e_count * cell_r),
            timing_row(f"all {k_count} groups", setup + k_count * e_count
                       * cell_i, init + k_count * e_count * cell_r),
            timing_row("measured, all variants/repeats",
                       init + t["influence_total_s"],
                       init + t["retrain_total_s"])]
    count = t["retrain_count"]
    return Table(
        title=f"Table IV ({run.label}): time of the influence estimate vs "
              "retraining",
        keys=["step"], groups=[("", ["influence", "retraining",
                                     "speed-up"])],
        rows=rows,
        footnote=f"One cell = one (k, {EPS}) pair of one variant with one "
                 "retraining; 'all groups' = initial training (+ IHVP) + "
                 f"{k_count} x {e_count} cells, as in the paper. Measured: "
                 "initial training + influence_total_s (IHVP and all cells "
                 f"of the {sum(v.first_order for v in run.variants.values())} "
                 f"variant(s)) vs initial "
                 "training + retrain_total_s ("
                 f"{int(count) if math.isfinite(count) else '?'} "
                 "retrainings). speed-up = retraining / influence.")


def all_tables(runs):
    """The tables to print, in order."""
    tables = [table_runs(runs), table_iii(runs),
              table_iii(runs, expected=True)]
    for run in runs:
        if not run.retrained:
            tables.extend(table_estimates(run, v)
                          for v in run.variants.values())
    tables.extend(table_iv(run) for run in runs)
    return [t for t in tables if t is not None]


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------


def eps_norm(eps_values):
    """Colour normalization of eps: logarithmic for a wide positive grid."""
    eps_values = np.asarray(eps_values, dtype=float)
    eps_values = eps_values[np.isfinite(eps_values)]
    low, high = (eps_values.min(), eps_values.max()) if eps_values.size \
        else (0.0, 1.0)
    if low > 0 and high / low > 20:
        return LogNorm(vmin=low, vmax=high)
    return Normalize(vmin=low, vmax=high if high > low else low + 1)


def safe_name(text):
    """A file-name-safe version of a label."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "run"


def shown_fractions(count):
    """Indices of at most MAX_PANELS group fractions, evenly spread."""
    if count <= MAX_PANELS:
        return list(range(count))
    return sorted({int(round(i)) for i in
                   np.linspace(0, count - 1, MAX_PANELS)})


def scatter_panel(ax, run, variant, k, norm):
    """Actual vs estimated change at fraction index k, a point per eps."""
    x = variant.estimated[k]
    y = quiet_nanmean(variant.actual[k], axis=1)
    if variant.actual.shape[2] > 1:
        ax.errorbar(x, y, yerr=quiet_nanstd(variant.actual[k], axis=1),
                    fmt="none", ecolor="0.6", elinewidth=0.8, capsize=2,
                    zorder=1)
    ax.scatter(x, y, c=run.eps, cmap=CMAP, norm=norm, s=12,
               edgecolors="0.2", linewidths=0.3, zorder=2)
    if not np.isfinite(y).any():
        ax.text(0.5, 0.5, "no finite actual values", transform=ax.transAxes,
                ha="center", va="center", fontsize=8, color="0.5")
    finite = np.concatenate([x[np.isfinite(x)], y[np.isfinite(y)]])
    if finite.size:
        low, high = finite.min(), finite.max()
        pad = 0.05 * (high - low or abs(high) or 1.0)
        ax.plot([low - pad, high + pad], [low - pad, high + pad],
                linestyle="--", color=style.NEUTRAL, linewidth=0.8, zorder=0)
    # lower right: the points lie on y = x or above it (retraining changes
    # the loss more than the first-order estimate), so this corner is free
    ax.text(0.97, 0.03, f"MAE {fmt_num(float(variant.mae[k]))}\n"
            f"{RHO} {fmt_rho(float(variant.spearman[k]))}",
            transform=ax.transAxes, va="bottom", ha="right", fontsize=6,
            bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="0.8",
                      alpha=0.8))
    ax.tick_params(labelsize=6)
    ax.ticklabel_format(style="sci", scilimits=(-2, 3), useMathText=True)
    ax.xaxis.get_offset_text().set_fontsize(6)
    ax.yaxis.get_offset_text().set_fontsize(6)


def fig1_layout(variants, shown):
    """(rows, columns, rows per variant) of the Fig. 1 grid."""
    if len(variants) > 1 or len(shown) <= WRAP_COLUMNS:
        return len(variants), len(shown), 1
    per_variant = math.ceil(len(shown) / WRAP_COLUMNS)
    return per_variant, WRAP_COLUMNS, per_variant


def add_colorbar(fig, axes, norm, eps):
    """A shared eps colour bar right of the panels, ticked at the eps grid."""
    mappable = plt.cm.ScalarMappable(norm=norm, cmap=CMAP)
    bar = fig.colorbar(mappable, ax=list(np.ravel(axes)), shrink=0.9,
                       pad=0.01, aspect=30)
    bar.set_label(f"local DP {EPS}")
    grid = np.unique(np.asarray(eps, dtype=float))
    grid = grid[np.isfinite(grid)]
    if 0 < grid.size <= 12:
        bar.set_ticks(grid)
        bar.set_ticklabels([f"{value:g}" for value in grid])
        bar.ax.minorticks_off()


def label_axes(fig):
    """One axis label for the whole grid, each way."""
    fig.supylabel(f"actual {DELTA} test loss (nat)", fontsize=8)
    fig.supxlabel(f"estimated {DELTA} test loss (nat)", fontsize=8)


def figure_fig1(run, path):
    """Seed Fig. 1 for one run; returns the path, or None (no retraining)."""
    variants = [v for v in run.variants.values() if v.actual is not None]
    if not variants:
        note(f"{run.label}: no retraining, Fig. 1 scatter skipped")
        return None
    shown = shown_fractions(run.fractions.size)
    if len(shown) < run.fractions.size:
        note(f"{run.label}: Fig. 1 shows {len(shown)} of "
             f"{run.fractions.size} group fractions")
    nrows, ncols, per_variant = fig1_layout(variants, shown)
    fig, axes = style.figure(columns=1 if ncols == 1 else 2, rows=nrows,
                             cols=ncols, height=min(9.0, (
                                 1.6 if ncols > 2 else 2.4) * nrows + 0.3))
    norm = eps_norm(run.eps)
    for v_index, variant in enumerate(variants):
        for i, k in enumerate(shown):
            row = v_index * per_variant + i // ncols
            ax = axes[row][i % ncols]
            scatter_panel(ax, run, variant, k, norm)
            ax.set_title(f"{variant.title}, k = {100 * run.fractions[k]:.3g}%",
                         fontsize=7)
    for ax in axes.flat[len(variants) * len(shown):]:
        ax.axis("off")
    label_axes(fig)
    add_colorbar(fig, axes, norm, run.eps)
    return save(fig, path)


def pick_variant(run, wanted):
    """The Fig. 2 variant of a run: ``wanted``, else rr, else the first one
    with retraining (None when the run did not retrain)."""
    retrained = [v for v in run.variants.values() if v.actual is not None]
    for name in (wanted, "rr"):
        for v in retrained:
            if v.name == name:
                return v
    return retrained[0] if retrained else None


def nearest_fraction(run, wanted):
    """Index of the run's group fraction nearest to ``wanted`` (None:
    largest); notes when it is not exact."""
    if wanted is None:
        return int(np.argmax(run.fractions))
    k = int(np.argmin(np.abs(run.fractions - wanted)))
    if abs(run.fractions[k] - wanted) > 1e-9:
        note(f"{run.label}: no group fraction {100 * wanted:.3g}%, Fig. 2 "
             f"uses the nearest, {100 * run.fractions[k]:.3g}%")
    return k


def figure_fig2(runs, path_for, fraction, wanted_variant):
    """Seed Fig. 2: a panel per retrained run at one group fraction."""
    chosen = [(run, pick_variant(run, wanted_variant)) for run in runs]
    chosen = [(run, v) for run, v in chosen if v is not None]
    if len(chosen) < 2:
        if len(runs) > 1:
            note("Fig. 2 needs two or more runs with retraining: skipped")
        return None
    cells = [(run, v, nearest_fraction(run, fraction)) for run, v in chosen]
    norm = eps_norm(np.concatenate([run.eps for run, _, _ in cells]))
    fig, axes = style.figure(columns=2, cols=len(cells), height=2.4)
    for ax, (run, variant, k) in zip(axes[0], cells):
        scatter_panel(ax, run, variant, k, norm)
        ax.set_title(f"{run.label} ({variant.title}), "
                     f"k = {100 * run.fractions[k]:.3g}%", fontsize=7)
        ax.set_xlabel(f"estimated {DELTA} test loss (nat)")
    axes[0][0].set_ylabel(f"actual {DELTA} test loss (nat)")
    add_colorbar(fig, axes, norm,
                 np.concatenate([run.eps for run, _, _ in cells]))
    percent = 100 * cells[0][0].fractions[cells[0][2]]
    name = f"fig2_actual_vs_estimated_k{percent:.3g}pct.png"
    return save(fig, path_for(name))


def write_figures(runs, directory, fraction, wanted_variant):
    """Write Fig. 1 per run and Fig. 2; returns the written paths."""
    written = []
    for run in runs:
        name = f"fig1_{safe_name(run.label)}_actual_vs_estimated.png"
        written.append(figure_fig1(run, os.path.join(directory, name)))
    written.append(figure_fig2(runs, lambda n: os.path.join(directory, n),
                               fraction, wanted_variant))
    return [path for path in written if path]


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def fraction_arg(text):
    """argparse type: '0.3', '30' or '30%' -> 0.3."""
    value = text.strip()
    percent = value.endswith("%")
    try:
        number = float(value.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a fraction: {text!r}")
    if percent or number > 1:
        number /= 100.0
    if not 0 < number <= 1:
        raise argparse.ArgumentTypeError(f"fraction out of (0, 1]: {text!r}")
    return number


def parse_args(argv):
    """Parse the command line."""
    parser = argparse.ArgumentParser(
        description="Tables (Carey et al. 2023 Tables III-IV; "
                    "docs/references.md) and figures (Figs. 1-2) "
                    "of 'fluence whatif' runs: influence estimate vs "
                    "retraining under randomized-response LDP.")
    parser.add_argument("runs", metavar="RUN_DIR", nargs="+",
                        help="output directory of a 'fluence whatif' run "
                             "(holding results.h5), or the results file")
    parser.add_argument("--labels", metavar="NAME", nargs="+",
                        help="a name per RUN_DIR for the tables and figures "
                             "(default: the directory names)")
    report_common.add_markdown_option(parser)
    report_common.add_figure_options(parser, "<first RUN_DIR>/figures")
    parser.add_argument("--fig2-fraction", metavar="K", type=fraction_arg,
                        help="group fraction of Fig. 2, e.g. 0.75 or 75%% "
                             "(default: each run's largest; the nearest is "
                             "used)")
    parser.add_argument("--fig2-variant", metavar="V", default="rr",
                        choices=VARIANTS,
                        help="variant of Fig. 2 (default rr, else the "
                             "run's first variant)")
    args = parser.parse_args(argv)
    if args.labels and len(args.labels) != len(args.runs):
        parser.error(f"--labels gives {len(args.labels)} names for "
                     f"{len(args.runs)} RUN_DIRs")
    return args


def main(argv=None):
    """Entry point; returns the process exit status."""
    args = parse_args(argv)
    try:
        runs = [read_run(run_dir) for run_dir in args.runs]
    except ResultsError as err:
        return report_common.error(PROG, str(err))
    assign_labels(runs, args.labels)

    render = render_markdown if args.markdown else render_plain
    if args.markdown:
        print("## What-if LDP ([Carey et al. 2023](../references.md#carey-2023)): "
              "influence estimate vs retraining")
        print()
    print("\n\n".join(render(t) for t in all_tables(runs)))

    if args.no_figures:
        return 0
    directory = args.figures or os.path.join(run_dir_of(runs[0]), "figures")
    try:
        for path in write_figures(runs, directory, args.fig2_fraction,
                                  args.fig2_variant):
            note(f"wrote {path}")
    except OSError as err:
        return report_common.error(
            PROG, f"cannot write figures to {directory}: {err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
