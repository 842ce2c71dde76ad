#!/usr/bin/python3
"""Issue 27: every plotting script of analysis/ renders tiny outputs without error in the one
style of analysis/style.py: each figure 3.5 in or 7 in wide, written as a vector PDF of that
width and a 300-dpi PNG, no command line or path in its texts, the Okabe-Ito palette; and the
three fixes the issue lists: the what-if colour map has no near-white epsilon, the fldp AAD
figure draws bands, not a bundle of error bars, lia_report names the data set from the deck
(not "Fashion-MNIST" on synthetic runs). The scripts run in this process (Agg backend), their
figures caught at style.save.

Usage: test_plots.py FLUENCE_BINARY SOURCE_DIR
"""

import contextlib
import io
import os
import re
import shutil
import sys
import unittest

import h5py
import tiny_runs

FLUENCE, SOURCE = tiny_runs.arguments()
sys.path.insert(0, os.path.join(SOURCE, "analysis"))

import style  # noqa: E402  (first: the Agg backend)

import feo2_report  # noqa: E402
import fldp_report  # noqa: E402
import lia_report  # noqa: E402
import matplotlib  # noqa: E402
import numpy as np  # noqa: E402
import plot_influence  # noqa: E402
import plot_networks  # noqa: E402
import plot_privacy_utility  # noqa: E402
import plot_training  # noqa: E402
import whatif_report  # noqa: E402
from matplotlib.colors import LogNorm, to_rgb  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from PIL import Image  # noqa: E402

WIDTHS = (style.SINGLE_COLUMN, style.DOUBLE_COLUMN)


class Caught:
    """The figures the scripts save (style.save, wrapped), with their texts."""

    def __init__(self):
        self.figures = []  # (png path, width in inches, texts, figure's artists summary)
        self.original = style.save

    def save(self, fig, path):
        texts = [t.get_text() for t in fig.findobj(Text) if t.get_text()]
        errorbars = sum(isinstance(c, ErrorbarContainer) for ax in fig.axes
                        for c in ax.containers)
        bands = sum(len(ax.collections) for ax in fig.axes)
        png = self.original(fig, path)
        self.figures.append(dict(png=png, width=fig.get_size_inches()[0], texts=texts,
                                 errorbars=errorbars, collections=bands))
        return png

    def __enter__(self):
        style.save = self.save
        return self

    def __exit__(self, *exc):
        style.save = self.original

    def named(self, name):
        return [f for f in self.figures if os.path.basename(f["png"]) == name]


def run_main(main, argv):
    """main(argv) with stdout and stderr caught; (status, output)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = main(argv)
    return status, out.getvalue()


def pdf_width_points(path):
    with open(path, "rb") as f:
        box = re.search(rb"/MediaBox\s*\[\s*0\s+0\s+([0-9.]+)", f.read())
    return float(box.group(1))


class Plots(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs = tiny_runs.Runs(FLUENCE, SOURCE)
        r, w = cls.runs, cls.runs.work
        cls.train = [r.quickstart("train_eps1", "ldp.epsilon=1.0"),
                     r.quickstart("train_eps3", "ldp.epsilon=3.0")]
        cls.sweep = os.path.join(w, "feo2")
        for name, settings in (("feo2_r0.5", []), ("dpfedavg", ['privacy.mode="dp-fedavg"',
                               "privacy.opt_out_fraction=0"]),
                               ("dp_z2", ['privacy.mode="dp-fedavg"', "privacy.opt_out_fraction=0",
                                          "privacy.noise_multiplier=2.0", "audit.canaries=20"]),
                               ("nonprivate", ['privacy.mode="none"', "privacy.opt_out_fraction=0",
                                               'personalization.method="ditto"'])):
            r.private(os.path.join("feo2", "noniid", name), *settings)
        cls.influence = r.influence()
        cls.whatif = r.whatif()
        fldp = r.fldp()
        cls.fldp_path = fldp
        cls.fldp_root = os.path.join(w, "fldp_tree")
        for part in ("q1/eps_3", "q2", "q3/x_0.2", "q3/x_0.4"):
            os.makedirs(os.path.join(cls.fldp_root, "fldp_synthetic", part))
            shutil.copy(fldp, os.path.join(cls.fldp_root, "fldp_synthetic", part))
        lia = r.lia()
        cls.lia_root = os.path.join(w, "lia_tree")
        for part in ("median/fl", "median/grid/eps_2/p60", "model/fl"):
            os.makedirs(os.path.join(cls.lia_root, part))
            shutil.copy(lia, os.path.join(cls.lia_root, part))
        cls.networks = os.path.join(w, "compare")
        os.makedirs(cls.networks)
        for model in ("2nn", "cnn"):
            for side in ("fluence", "pytorch"):
                for seed in (1, 2):
                    with open(os.path.join(cls.networks, f"{model}_{side}_{seed}.csv"), "w") as f:
                        f.write("round,test_loss,test_accuracy,seconds\n")
                        for t in range(1, 6):
                            f.write(f"{t},{2.0 / t},{0.1 * t + 0.01 * seed},0.1\n")
        cls.figures = os.path.join(w, "figures")
        os.makedirs(cls.figures)
        with Caught() as caught:
            cls.status = {
                "plot_training": run_main(plot_training.main, cls.train + [
                    "-o", os.path.join(cls.figures, "training.png")]),
                "plot_influence": run_main(plot_influence.main, [
                    cls.influence, "-o", os.path.join(cls.figures, "influence.png")]),
                "plot_networks": run_main(plot_networks.main, [
                    cls.networks, "-o", os.path.join(cls.figures, "networks.png")]),
                "plot_privacy_utility": run_main(plot_privacy_utility.main, [
                    cls.sweep, "-o", os.path.join(cls.figures, "privacy_utility.png")]),
                "feo2_report": run_main(feo2_report.main, [
                    cls.sweep, "--figures", cls.figures]),
                "fldp_report": run_main(fldp_report.main, [
                    cls.fldp_root, "--figures", cls.figures]),
                "whatif_report": run_main(whatif_report.main, [
                    cls.whatif, cls.whatif, "--labels", "features", "label",
                    "--figures", cls.figures]),
                "lia_report": run_main(lia_report.main, [
                    cls.lia_root, "--figures", cls.figures]),
            }
        cls.caught = caught

    @classmethod
    def tearDownClass(cls):
        cls.runs.cleanup()

    def test_every_script_renders(self):
        for script, (status, output) in self.status.items():
            with self.subTest(script=script):
                self.assertEqual(status, 0, output)
        names = {os.path.basename(f["png"]) for f in self.caught.figures}
        for name in ("training.png", "influence.png", "networks.png", "privacy_utility.png",
                     "feo2_acc_g.png", "feo2_clip_norm.png", "fig1_aad.png", "fig2_multi.png",
                     "fig1_features_actual_vs_estimated.png", "lia_fl.png",
                     "lia_grid_median.png", "lia_minority.png", "lia_signcheck.png"):
            self.assertIn(name, names)
        self.assertTrue(any(n.startswith("fig2_actual_vs_estimated_k") for n in names))

    def test_column_widths_vector_pdf_and_300_dpi_png(self):
        for figure in self.caught.figures:
            with self.subTest(figure=os.path.basename(figure["png"])):
                self.assertIn(round(figure["width"], 3), WIDTHS)
                with Image.open(figure["png"]) as png:
                    self.assertEqual(png.size[0], round(300 * figure["width"]))
                    self.assertAlmostEqual(png.info["dpi"][0], 300, delta=0.5)
                pdf = figure["png"][:-4] + ".pdf"
                self.assertEqual(pdf_width_points(pdf), 72 * figure["width"])

    def test_no_command_line_or_path_in_texts(self):
        for figure in self.caught.figures:
            for text in figure["texts"]:
                with self.subTest(figure=os.path.basename(figure["png"]), text=text):
                    self.assertNotIn(self.runs.work, text)
                    self.assertNotIn("results.h5", text)
                    self.assertNotIn("--", text)
                    self.assertFalse(re.search(r"\bfluence (train|influence|whatif|lia|fldp)\b",
                                               text))

    def test_legends_name_the_swept_value(self):
        training = self.caught.named("training.png")[0]["texts"]
        self.assertIn("\u03b5 = 1", " ".join(training))   # ldp.epsilon, not the directory
        self.assertNotIn("train_eps1", " ".join(training))
        utility = " ".join(self.caught.named("privacy_utility.png")[0]["texts"])
        self.assertIn("z = 2", utility)
        self.assertIn("DP-FedAvg", utility)
        self.assertIn("non-private", utility)

    def test_privacy_utility_shows_the_audit_lower_bound(self):
        # The run with canary clients adds its measured lower bound beside the accountant's eps.
        figure = self.caught.named("privacy_utility.png")[0]
        self.assertTrue(any("audit lower bound" in text for text in figure["texts"]),
                        figure["texts"])
        self.assertGreaterEqual(figure["collections"], 1)  # the segment to the accountant's eps

    def test_palette_is_okabe_ito(self):
        cycle = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
        self.assertEqual([c.upper() for c in cycle], list(style.OKABE_ITO))

    def test_whatif_colour_map_has_no_near_white_epsilon(self):
        eps = np.array([0.1, 0.3, 1.0, 3.0, 10.0])
        norm = LogNorm(vmin=eps.min(), vmax=eps.max())
        cmap = matplotlib.colormaps[whatif_report.CMAP]
        for value in eps:
            r, g, b = to_rgb(cmap(norm(value)))
            lightness = 0.2126 * r + 0.7152 * g + 0.0722 * b  # relative luminance
            saturation = max(r, g, b) - min(r, g, b)
            self.assertFalse(lightness > 0.8 and saturation < 0.15, (value, r, g, b))

    def test_fldp_aad_draws_bands_not_error_bars(self):
        for name in ("fig1_aad.png", "fig2_multi.png"):
            figure = self.caught.named(name)[0]
            self.assertEqual(figure["errorbars"], 0, name)
            self.assertGreater(figure["collections"], 0, name)  # the fill_between bands

    def test_fldp_estimators_carry_error_and_time(self):
        # The estimator table against the file read here: over the one-client cases with a new
        # eps (not removals), the median first-order ED_exp and time, and after each Newton step
        # the median ED_exp and refined time (issue 26: one estimator, its error and its time).
        with h5py.File(os.path.join(self.fldp_root, "fldp_synthetic", "q1", "eps_3",
                                    os.path.basename(self.fldp_path)), "r") as f:
            one = (f["/fldp/case_clients"][...].reshape(len(f["/fldp/case_eps_to"]), -1)
                   .sum(axis=1) == 1) & ~f["/fldp/case_remove"][...].astype(bool)
            one &= np.isfinite(f["/fldp/case_eps_to"][...])
            errors = [f["/fldp/ed_expected"][one]] + list(f["/fldp/newton_ed_expected"][one].T)
            times = [f["/fldp/time_estimate_s"][one]] + list(f["/fldp/time_newton_s"][one].T)
        table = fldp_report.table_estimators(fldp_report.load_root(self.fldp_root))
        self.assertEqual(len(table.rows), len(errors))  # first order + each Newton step
        for row, error, time in zip(table.rows, errors, times):
            self.assertEqual(row[2], str(int(one.sum())))
            self.assertEqual(row[3], fldp_report.fmt_num(float(np.median(error))))
            self.assertEqual(row[5], fldp_report.fmt_num(float(np.median(time))))
        self.assertEqual([row[1] for row in table.rows][:2], ["first order", "+ 1 Newton step"])

    def test_lia_names_the_data_set_from_the_deck(self):
        texts = " ".join(t for f in self.caught.figures
                         if os.path.basename(f["png"]).startswith("lia_") for t in f["texts"])
        self.assertNotIn("Fashion-MNIST", texts)
        self.assertIn("synthetic", texts)


if __name__ == "__main__":
    unittest.main(verbosity=2)
