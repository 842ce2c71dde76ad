#!/usr/bin/python3
"""Table and ROC figure of a multi-run privacy audit (issue 39, docs/math.md
§11.4): the ``results.h5`` that ``fluence audit DECK --collect ROOT`` writes
(``jobs/audit.sbatch`` puts it in ``ROOT/audit``).

Printed on stdout (aligned plain text, or GitHub markdown with
``--markdown``): the runs (with and without the target canary), the
accountant's eps and delta, and per distinguisher (the target's all-iterates
score: white box; its final-model score: black box) the Clopper-Pearson lower
bound on eps at the stated confidence, the Gaussian-fit estimate, the AUC and
the TPR at 0.1% and 1% FPR.  A lower bound above the accountant's eps is
flagged: the mechanism leaks more than it claims.

Figure (analysis/style.py: vector PDF and 300-dpi PNG, unless
``--no-figures``; into ``--figures DIR``, default the results file's
directory): ``audit_roc.png``, the two ROC curves on log-log axes with the
line TPR = e^eps FPR + delta of the accountant's guarantee, which no test of a
correct mechanism can cross (beyond sampling error).
"""

import argparse
import math
import os
import sys

import report_common  # first: the plotting style and the Agg backend
from report_common import EPS, Table, fmt_num, fmt_pct

import numpy as np  # noqa: E402

PROG = "audit_report.py"
ATTACKS = (("all_iterates", "all iterates (white box)"),
           ("final", "final model (black box)"))


def parse(h5):
    group = h5["/audit/multi_run"]
    inserted = group["inserted"][...]
    run = {"runs": len(inserted), "with": int(np.sum(inserted == 1)),
           "without": int(np.sum(inserted == 0)),
           "epsilon": float(group["epsilon"][()]),
           "delta": float(group["delta"][()]),
           "confidence": float(h5["/audit/confidence"][()]), "attacks": {}}
    for name, _ in ATTACKS:
        attack = group[name]
        run["attacks"][name] = {
            key: float(attack[key][()])
            for key in ("epsilon_lower", "epsilon_estimate", "auc",
                        "tpr_at_fpr_0.001", "tpr_at_fpr_0.01")}
        run["attacks"][name]["fpr"] = attack["roc_fpr"][...]
        run["attacks"][name]["tpr"] = attack["roc_tpr"][...]
    return run


def table(run):
    rows = []
    for name, label in ATTACKS:
        a = run["attacks"][name]
        flag = " (!)" if a["epsilon_lower"] > run["epsilon"] else ""
        rows.append([label, fmt_num(a["epsilon_lower"]) + flag,
                     fmt_num(a["epsilon_estimate"]), fmt_num(a["auc"]),
                     fmt_pct(a["tpr_at_fpr_0.001"]),
                     fmt_pct(a["tpr_at_fpr_0.01"])])
    footnote = (
        f"{run['runs']} runs: {run['with']} with the target canary, "
        f"{run['without']} without. Accountant: {EPS} = "
        f"{fmt_num(run['epsilon'])} at delta = {run['delta']:.3g}; lower "
        f"bounds at {100 * run['confidence']:.0f}% confidence"
        " ((!): above the accountant's eps).")
    return Table(title="Multi-run audit", keys=["distinguisher"],
                 groups=[("", [f"{EPS} lower", f"{EPS} estimate", "AUC",
                               "TPR@0.1%", "TPR@1%"])],
                 rows=rows, footnote=footnote)


def draw_roc(run, path):
    import matplotlib.pyplot as plt  # noqa: F401  (Agg, set by style)
    import style
    fig, axes = style.figure()
    ax = axes[0][0]
    floor = 1.0 / max(run["with"], run["without"], 1) / 2
    for index, (name, label) in enumerate(ATTACKS):
        a = run["attacks"][name]
        ax.plot(np.maximum(a["fpr"], floor), np.maximum(a["tpr"], floor),
                color=style.color(index), label=label, drawstyle="steps-post")
    fpr = np.logspace(math.log10(floor), 0, 200)
    eps, delta = run["epsilon"], run["delta"]
    bound = np.minimum(1.0, np.exp(min(eps, 700)) * fpr + delta)
    ax.plot(fpr, bound, color="0.4", linestyle="--",
            label=f"TPR = e^{EPS} FPR + δ ({EPS} = {fmt_num(eps)})")
    ax.plot(fpr, fpr, color="0.7", linestyle=":", label="chance")
    report_common.finish_roc_axes(ax)
    return report_common.save(fig, path)


def build_parser():
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("results", help="results.h5 of `fluence audit --collect`"
                        " (or its directory)")
    report_common.add_markdown_option(parser)
    report_common.add_figure_options(parser, "the results file's directory")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    path = args.results
    if os.path.isdir(path):
        path = os.path.join(path, report_common.RESULTS_FILE)
    if not os.path.isfile(path):
        return report_common.error(PROG, f"{path}: no such file")
    try:
        run = report_common.read_results(path, parse)
    except report_common.ResultsError as err:
        return report_common.error(PROG, f"{err} (not a multi-run audit?)")
    t = table(run)
    print(report_common.render_markdown(t) if args.markdown
          else report_common.render_plain(t))
    if args.no_figures:
        return 0
    directory = args.figures or os.path.dirname(os.path.abspath(path))
    return report_common.write_figures(
        PROG, directory, [(lambda p: draw_roc(run, p), "audit_roc.png")])


if __name__ == "__main__":
    sys.exit(main())
