#!/usr/bin/python3
"""Table, DP check and ROC figure of membership inference (issue 39,
docs/math.md §11.5): the ``results.h5`` files that ``fluence audit DECK
--membership MODEL.h5`` writes with ``audit.membership_level = "example"``.

Printed on stdout (aligned plain text, or GitHub markdown with
``--markdown``): per results file and attack (LiRA, and the loss threshold on
the same target) the examples, the AUC and the TPR at 0.1% and 1% FPR.  For a
privately trained target (``/audit/membership/example_lira/epsilon`` finite)
every point of each ROC (the two attacks on the target's halves, and the loss
threshold of MODEL.h5 against the test rows) is checked against the
guarantee TPR <= e^eps FPR + delta: the raw slack e^eps FPR + delta - TPR and
the slack at 95% confidence per point (Clopper-Pearson upper bound on FPR,
lower bound on TPR); the number of points, the violations and the worst slack
of each are printed, and the exit status is 1 when a confident slack is
negative (evidence against the guarantee).

Figure (analysis/style.py: vector PDF and 300-dpi PNG, unless
``--no-figures``; into ``--figures DIR``, default the first results file's
directory): ``membership_roc.png``, the ROC curves on log-log axes with the
lines TPR = e^eps FPR + delta of the private targets.
"""

import argparse
import math
import os
import sys

import report_common  # first: the plotting style and the Agg backend
from report_common import Table, fmt_num

import h5py  # noqa: E402
import numpy as np  # noqa: E402
from scipy.stats import beta as beta_dist  # noqa: E402

PROG = "membership_report.py"
GROUP = "/audit/membership/example_lira"
ATTACKS = (("lira", "LiRA"), ("loss_threshold", "loss threshold"))
CONFIDENCE = 0.95


def read_roc(group):
    return {"fpr": group["roc_fpr"][...], "tpr": group["roc_tpr"][...],
            "auc": float(group["auc"][()]),
            "tpr_0.001": float(group["tpr_at_fpr_0.001"][()]),
            "tpr_0.01": float(group["tpr_at_fpr_0.01"][()])}


def parse(path):
    with h5py.File(path, "r") as h5:
        if GROUP not in h5:
            raise report_common.ResultsError(
                f"{path}: no {GROUP} (run `fluence audit --membership` with "
                "audit.lira_shadows > 0 and audit.membership_level = \"example\")")
        g = h5[GROUP]
        member = g["member"][...].astype(bool)
        run = {"path": path, "examples": member.size,
               "members": int(member.sum()), "nonmembers": int((~member).sum()),
               "shadows": int(g["shadow_in"].shape[0]),
               "epsilon": float(g["epsilon"][()]), "delta": float(g["delta"][()]),
               "attacks": {name: read_roc(g[name]) for name, _ in ATTACKS}}
        m = h5["/audit/membership"]
        run["test_roc"] = read_roc(m)
        run["test_sides"] = (m["member_loss"].size, m["nonmember_loss"].size)
    return run


def clopper_pearson(k, n, alpha):
    """One-sided (lower, upper) bounds at 1 - alpha on a binomial rate."""
    lower = 0.0 if k == 0 else beta_dist.ppf(alpha, k, n - k + 1)
    upper = 1.0 if k == n else beta_dist.ppf(1 - alpha, k + 1, n - k)
    return lower, upper


def check_bound(roc, members, nonmembers, eps, delta):
    """Raw and confident slack of TPR <= e^eps FPR + delta at every ROC point."""
    factor = math.exp(eps)
    alpha = 1.0 - CONFIDENCE
    raw, confident = [], []
    for fpr, tpr in zip(roc["fpr"], roc["tpr"]):
        raw.append(factor * fpr + delta - tpr)
        tpr_low, _ = clopper_pearson(round(tpr * members), members, alpha)
        _, fpr_high = clopper_pearson(round(fpr * nonmembers), nonmembers, alpha)
        # Uncapped (a bound above 1 is met by every point): the minimum is then where the curve
        # comes closest to the line, not the trivial corner (1, 1).
        confident.append(factor * fpr_high + delta - tpr_low)
    raw, confident = np.array(raw), np.array(confident)
    return {"points": raw.size, "raw_violations": int((raw < 0).sum()),
            "raw_worst": float(raw.min()), "violations": int((confident < 0).sum()),
            "worst": float(confident.min())}


def label_of(run):
    return os.path.basename(os.path.dirname(os.path.abspath(run["path"])))


def draw_roc(runs, path):
    import style
    fig, axes = style.figure()
    ax = axes[0][0]
    floor = 1.0 / max(max(r["members"], r["nonmembers"]) for r in runs) / 2
    index = 0
    for run in runs:
        for name, text in ATTACKS:
            a = run["attacks"][name]
            ax.plot(np.maximum(a["fpr"], floor), np.maximum(a["tpr"], floor),
                    color=style.color(index // 2),
                    linestyle="-" if name == "lira" else "--",
                    label=f"{label_of(run)}: {text}", drawstyle="steps-post")
            index += 1
    fpr = np.logspace(math.log10(floor), 0, 200)
    for run in runs:
        if math.isfinite(run["epsilon"]):
            bound = np.minimum(1.0, math.exp(run["epsilon"]) * fpr + run["delta"])
            ax.plot(fpr, bound, color="0.5", linestyle=":", linewidth=0.8)
    ax.plot(fpr, fpr, color="0.7", linestyle=":", label="chance; dotted: e^ε FPR + δ")
    report_common.finish_roc_axes(ax, "x-small")
    return report_common.save(fig, path)


def build_parser():
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("results", nargs="+",
                        help="results.h5 of `fluence audit --membership` (or its directory)")
    report_common.add_markdown_option(parser)
    report_common.add_figure_options(parser, "the first results file's directory")
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    runs = []
    for given in args.results:
        path = given if given.endswith(".h5") else os.path.join(given, "results.h5")
        try:
            runs.append(parse(path))
        except (OSError, KeyError, report_common.ResultsError) as err:
            return report_common.error(PROG, f"{path}: {err}")
    table = Table("Membership inference", ["run", "eps", "shadows", "members", "non-members",
                                           "attack"],
                  [("", ["AUC", "TPR @ 0.1% FPR", "TPR @ 1% FPR"])], [])
    for run in runs:
        for name, text in ATTACKS:
            a = run["attacks"][name]
            table.rows.append([label_of(run), fmt_num(run["epsilon"]), str(run["shadows"]),
                               str(run["members"]), str(run["nonmembers"]), text,
                               f"{a['auc']:.4f}", f"{a['tpr_0.001']:.4f}",
                               f"{a['tpr_0.01']:.4f}"])
    print(report_common.render_markdown(table) if args.markdown
          else report_common.render_plain(table))
    status = 0
    checks = Table("TPR <= e^eps FPR + delta at every ROC point",
                   ["run", "eps", "delta", "ROC"],
                   [("", ["points", "raw violations", "worst raw slack", "violations at 95%",
                          "worst slack at 95%"])], [])
    for run in runs:
        eps, delta = run["epsilon"], run["delta"]
        if not math.isfinite(eps):
            continue
        rocs = [(text + " (halves)", run["attacks"][name], run["members"], run["nonmembers"])
                for name, text in ATTACKS]
        rocs.append(("loss threshold (MODEL.h5: train vs test)", run["test_roc"],
                     *run["test_sides"]))
        for text, roc, members, nonmembers in rocs:
            c = check_bound(roc, members, nonmembers, eps, delta)
            checks.rows.append([label_of(run), fmt_num(eps), f"{delta:g}", text,
                                str(c["points"]), str(c["raw_violations"]),
                                f"{c['raw_worst']:.4f}", str(c["violations"]),
                                f"{c['worst']:.4f}"])
            if c["violations"]:
                status = 1
    if checks.rows:
        print()
        print(report_common.render_markdown(checks) if args.markdown
              else report_common.render_plain(checks))
        total = sum(int(r[4]) for r in checks.rows)
        print(f"\nTPR <= e^eps FPR + delta checked at {total} ROC points: "
              + ("no point above the bound at 95% confidence" if status == 0
                 else "a point above the bound at 95% confidence"))
    if not args.no_figures:
        directory = args.figures or os.path.dirname(os.path.abspath(runs[0]["path"]))
        written = report_common.write_figures(
            PROG, directory, [(lambda p: draw_roc(runs, p), "membership_roc.png")])
        status = status or written
    return status


if __name__ == "__main__":
    sys.exit(main())
