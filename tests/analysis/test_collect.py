#!/usr/bin/python3
"""Issue 27: analysis/collect.py on a tiny sweep of three `fluence train` runs (FeO2 at two
ratios and DP-FedAvg, the layout of scripts/run_feo2_experiments.sh) and on a what-if run: the
one-row-per-run table, the --long round and --long group_fraction,eps tables against the files
read with h5py, the deck columns against the decks compared here, the errors; and
analysis/feo2_report.py, which reads its runs through collect, on the same tree.

Usage: test_collect.py FLUENCE_BINARY SOURCE_DIR
"""

import io
import math
import os
import shutil
import subprocess
import tomllib
import unittest

import h5py
import numpy as np
import pandas as pd

import tiny_runs

FLUENCE, SOURCE = tiny_runs.arguments()
COLLECT = os.path.join(SOURCE, "analysis", "collect.py")
PYTHON = "/usr/bin/python3"
SWEEP = {  # run directory -> deck settings (the tiny FeO2 deck's own: feo2, ratio 0.5)
    "noniid/feo2_r0.5": [],
    "noniid/feo2_r0.9": ["privacy.ratio=0.9"],
    "noniid/dpfedavg": ['privacy.mode="dp-fedavg"', "privacy.opt_out_fraction=0"],
}


def flat_deck(path):
    """The resolved deck of a results file as {'section.key': value}."""
    def walk(table, prefix=""):
        for key, value in table.items():
            if isinstance(value, dict):
                yield from walk(value, f"{prefix}{key}.")
            else:
                yield f"{prefix}{key}", value
    with h5py.File(path, "r") as f:
        return dict(walk(tomllib.loads(f.attrs["deck"])))


def collect(*arguments):
    done = subprocess.run([PYTHON, COLLECT, *arguments], capture_output=True, text=True)
    return done.returncode, done.stdout, done.stderr


class Collect(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs = tiny_runs.Runs(FLUENCE, SOURCE)
        cls.root = os.path.join(cls.runs.work, "sweep")
        cls.files = {run: cls.runs.private(os.path.join("sweep", run), *settings)
                     for run, settings in SWEEP.items()}
        cls.whatif_root = os.path.join(cls.runs.work, "whatif_tree")
        cls.whatif = cls.runs.whatif(os.path.join("whatif_tree", "synthetic"))

    @classmethod
    def tearDownClass(cls):
        cls.runs.cleanup()

    def table(self, *arguments):
        code, out, err = collect(*arguments)
        self.assertEqual(code, 0, err)
        return pd.read_csv(io.StringIO(out), float_precision="round_trip")

    def test_one_row_per_run(self):
        table = self.table(self.root).set_index("run")
        self.assertEqual(sorted(table.index), sorted(SWEEP))
        self.assertTrue((table["command"] == "train").all())
        self.assertTrue((table["ranks"] == 2).all())
        for run, path in self.files.items():
            with h5py.File(path, "r") as f:
                row = table.loc[run]
                self.assertEqual(row["model/test_accuracy"], f["/model/test_accuracy"][()])
                self.assertEqual(row["metrics/test_accuracy"], f["/metrics/test_accuracy"][-1])
                self.assertEqual(row["privacy/epsilon"], f["/privacy/epsilon"][-1])
                self.assertEqual(row["privacy/delta"], f["/privacy/delta"][()])
                self.assertEqual(row["privacy/mode"], f["/privacy/mode"].asstr()[()])
                self.assertEqual(row["metrics/round.length"], len(f["/metrics/round"]))
                self.assertEqual(row["privacy/opt_out_client.length"],
                                 len(f["/privacy/opt_out_clients"]))

    def test_deck_columns_are_the_keys_that_differ(self):
        decks = {run: flat_deck(path) for run, path in self.files.items()}
        keys = set().union(*decks.values())
        differ = {k for k in keys if len({repr(d.get(k)) for d in decks.values()}) > 1}
        differ -= {"output.dir", "seed"}  # `run` says where; the seed has its own column
        table = self.table(self.root).set_index("run")
        self.assertEqual({c for c in table.columns if c in keys and c != "seed"}, differ)
        self.assertTrue({"privacy.mode", "privacy.ratio", "privacy.opt_out_fraction"} <= differ)
        self.assertEqual(table.loc["noniid/feo2_r0.9", "privacy.ratio"], 0.9)
        self.assertEqual(table.loc["noniid/dpfedavg", "privacy.mode"], "dp-fedavg")
        with_key = self.table(self.root, "--key", "federation.rounds")
        self.assertTrue((with_key["federation.rounds"] == 4).all())

    def test_long_rounds(self):
        table = self.table(self.root, "--long", "round")
        self.assertEqual(len(table), 3 * 4)
        for run, path in self.files.items():
            rows = table[table["run"] == run].sort_values("round")
            with h5py.File(path, "r") as f:
                np.testing.assert_array_equal(rows["round"], f["/metrics/round"][...])
                for name in ("metrics/test_accuracy", "privacy/clip_norm", "feo2/acc_g"):
                    np.testing.assert_array_equal(rows[name], f[name][...])
            self.assertEqual(set(rows["privacy.mode"]), {flat_deck(path)["privacy.mode"]})

    def test_long_whatif_cells_and_parquet_or_csv_file(self):
        output = os.path.join(self.runs.work, "cells.csv")
        code, _, err = collect(self.whatif_root, "--long", "group_fraction,eps", "-o", output)
        self.assertEqual(code, 0, err)
        table = pd.read_csv(output, float_precision="round_trip")
        with h5py.File(self.whatif, "r") as f:
            eps, fractions = f["/whatif/eps"][...], f["/whatif/group_fraction"][...]
            self.assertEqual(len(table), len(eps) * len(fractions))
            for variant in ("rr", "rr_l", "rr_flc"):
                estimated = f[f"/whatif/{variant}/estimated"][...]
                for _, row in table.iterrows():
                    k = list(fractions).index(row["group_fraction"])
                    e = list(eps).index(row["eps"])
                    self.assertEqual(row[f"whatif/{variant}/estimated"], estimated[k, e])

    def test_errors(self):
        code, out, err = collect(os.path.join(self.runs.work, "none"))
        self.assertEqual((code, out), (2, ""))
        self.assertEqual(err.strip().count("\n"), 0)
        self.assertIn("no such directory", err)
        code, _, err = collect(self.root, "--long", "nowhere")
        self.assertEqual(code, 2)
        self.assertIn("has arrays along (nowhere)", err)
        code, _, err = collect(self.root, "-o", os.path.join(self.runs.work, "table.txt"))
        self.assertEqual(code, 2)
        self.assertIn(".csv or .parquet", err)
        parquet = os.path.join(self.runs.work, "table.parquet")
        code, _, err = collect(self.root, "-o", parquet)
        try:
            import pyarrow  # noqa: F401
            self.assertEqual(code, 0, err)
            self.assertEqual(len(pd.read_parquet(parquet)), 3)
        except ImportError:
            self.assertEqual(code, 2)
            self.assertIn("pyarrow", err)
            self.assertFalse(os.path.exists(parquet))

    def test_unreadable_run_is_skipped(self):
        broken = os.path.join(self.runs.work, "broken_tree")
        os.makedirs(os.path.join(broken, "bad"))
        with open(os.path.join(broken, "bad", "results.h5"), "w") as f:
            f.write("not HDF5")
        shutil.copytree(os.path.dirname(self.files["noniid/dpfedavg"]),
                        os.path.join(broken, "good"))
        code, out, err = collect(broken)
        self.assertEqual(code, 0, err)
        self.assertIn("skipped", err)
        self.assertEqual(list(pd.read_csv(io.StringIO(out))["run"]), ["good"])

    def test_feo2_report_reads_the_table(self):
        done = subprocess.run([PYTHON, os.path.join(SOURCE, "analysis", "feo2_report.py"),
                               self.root, "--no-figures"], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        table = self.table(self.root).set_index("run")
        for run in SWEEP:
            name = run.split("/")[1]
            line = next(l for l in done.stdout.splitlines()
                        if l.startswith(name + " ") and "%" not in l and "(" not in l[:12])
            accuracy = 100 * table.loc[run, "feo2/acc_g"]
            self.assertIn(f"{accuracy:.2f}", line.split(), (line, accuracy))
            self.assertFalse(math.isnan(accuracy))

    def test_feo2_seeds_means_the_gains(self):
        # Two "seeds": the tiny tree and a copy whose feo2_r0.5 run is replaced by the r = 0.9
        # run's file, so the second seed's accuracy and gain differ; the means and the
        # last-2-round gain are recomputed here from the files (h5py) against feo2_seeds.py's row.
        second = os.path.join(self.runs.work, "second_seed")
        shutil.rmtree(second, ignore_errors=True)
        shutil.copytree(self.root, second)
        shutil.copyfile(self.files["noniid/feo2_r0.9"],
                        os.path.join(second, "noniid", "feo2_r0.5", "results.h5"))
        accuracy, delta_g = {}, {}
        for run in ("noniid/dpfedavg", "noniid/feo2_r0.5", "noniid/feo2_r0.9"):
            with h5py.File(self.files[run], "r") as f:
                accuracy[run] = 100 * f["/metrics/test_accuracy"][...]
                delta_g[run] = 100 * f["/feo2/delta_g"][-1] if "feo2" in run else 0.0
        dp, seeds = accuracy["noniid/dpfedavg"], ("noniid/feo2_r0.5", "noniid/feo2_r0.9")
        expected = [f"{np.mean([accuracy[r][-1] for r in seeds]):.2f}",
                    f"{np.mean([accuracy[r][-1] - dp[-1] for r in seeds]):+.2f}",
                    f"{np.mean([accuracy[r][-2:].mean() - dp[-2:].mean() for r in seeds]):+.2f}",
                    f"{np.mean([delta_g[r] for r in seeds]):+.2f}"]
        expected = ["-" if text.endswith("nan") else text for text in expected]  # '-': no value
        done = subprocess.run([PYTHON, os.path.join(SOURCE, "analysis", "feo2_seeds.py"),
                               self.root, second, "--last", "2"], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        row = next(l for l in done.stdout.splitlines() if l.split()[:2] == ["noniid", "feo2_r0.5"])
        for text in expected:
            self.assertIn(text, row.split(), (row, expected))
        missing = subprocess.run([PYTHON, os.path.join(SOURCE, "analysis", "feo2_seeds.py"),
                                  self.root, os.path.join(self.runs.work, "nothing")],
                                 capture_output=True, text=True)
        self.assertEqual(missing.returncode, 2)
        self.assertIn("no readable DP-FedAvg run", missing.stderr)

if __name__ == "__main__":
    unittest.main(verbosity=2)
