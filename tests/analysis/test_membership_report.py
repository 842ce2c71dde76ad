#!/usr/bin/python3
"""analysis/membership_report.py: its Clopper-Pearson bounds against their defining binomial
tails, the DP check's slacks against a hand-worked ROC, and the table and check of a tiny private
`fluence audit --membership` run (example-level LiRA) against the results file read with h5py.

Usage: test_membership_report.py FLUENCE_BINARY SOURCE_DIR
"""

import io
import math
import os
import subprocess
import sys
import unittest
from contextlib import redirect_stdout

import h5py
from scipy.stats import beta, binom

import tiny_runs

FLUENCE, SOURCE = tiny_runs.arguments()
sys.path.insert(0, os.path.join(SOURCE, "analysis"))
import membership_report  # noqa: E402

DECK = """seed = 2
[data.synthetic]
rows = 400
numeric = 20
classes = 2
[partition]
clients = 320
[federation]
rounds = 10
[privacy]
mode = "dp-fedavg"
sampling_rate = 0.2
epsilon = 2.0
delta = 1e-5
adaptive_clip = false
[audit]
lira_shadows = 4
membership_level = "example"
"""


class ClopperPearson(unittest.TestCase):
    def test_bounds_meet_their_tails(self):
        # Lower L: P[Bin(n, L) >= k] = alpha; upper U: P[Bin(n, U) <= k] = alpha (1e-9).
        for k, n in ((1, 10), (5, 10), (0, 50), (50, 50), (3, 979)):
            low, high = membership_report.clopper_pearson(k, n, 0.05)
            if k == 0:
                self.assertEqual(low, 0.0)
            else:
                self.assertAlmostEqual(binom.sf(k - 1, n, low), 0.05, delta=1e-9)
            if k == n:
                self.assertEqual(high, 1.0)
            else:
                self.assertAlmostEqual(binom.cdf(k, n, high), 0.05, delta=1e-9)


class Slack(unittest.TestCase):
    def test_hand_worked_roc(self):
        # eps = 0, delta = 0: the bound is TPR <= FPR. Points (0, 0), (0, 0.5), (0.5, 1), (1, 1)
        # with 10 members and 10 non-members: raw slacks 0, -0.5, -0.5, 0.
        roc = {"fpr": [0.0, 0.0, 0.5, 1.0], "tpr": [0.0, 0.5, 1.0, 1.0]}
        c = membership_report.check_bound(roc, 10, 10, 0.0, 0.0)
        self.assertEqual((c["points"], c["raw_violations"]), (4, 2))
        self.assertAlmostEqual(c["raw_worst"], -0.5)
        # At 95% per point: (0, 0.5) -> U(0/10) - L(5/10) = (1 - 0.05^0.1) - 0.2224 > 0.
        upper0 = 1 - 0.05 ** 0.1
        expected = min(upper0 - beta.ppf(0.05, 5, 6),
                       beta.ppf(0.95, 6, 5) - beta.ppf(0.05, 10, 1),
                       1.0 - beta.ppf(0.05, 10, 1), upper0 - 0.0)
        self.assertAlmostEqual(c["worst"], expected, places=12)
        self.assertEqual(c["violations"], int(expected < 0))


class TinyRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs = tiny_runs.Runs(FLUENCE, SOURCE)
        deck = cls.runs.deck("private_lira", DECK)
        model = cls.runs.run("train", deck, "model")
        out = os.path.join(cls.runs.work, "audit")
        done = subprocess.run([os.path.join(SOURCE, "scripts", "mpirun.sh"), "-n", "2", FLUENCE,
                               "audit", deck, "--out", out, "--quiet", "--membership", model],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError((done.stdout + done.stderr)[-2000:])
        cls.path = os.path.join(out, "results.h5")

    @classmethod
    def tearDownClass(cls):
        cls.runs.cleanup()

    def test_table_and_check(self):
        text = io.StringIO()
        with redirect_stdout(text):
            status = membership_report.main([self.path, "--no-figures"])
        output = text.getvalue()
        with h5py.File(self.path, "r") as h5:
            g = h5["/audit/membership/example_lira"]
            eps = g["epsilon"][()]
            points = (g["lira/roc_fpr"].size + g["loss_threshold/roc_fpr"].size
                      + h5["/audit/membership/roc_fpr"].size)
            auc = g["lira/auc"][()]
        self.assertTrue(math.isfinite(eps) and 0 < eps <= 2.0 + 1e-9, eps)
        self.assertIn(f"{auc:.4f}", output)
        self.assertIn(f"checked at {points} ROC points", output)
        # The mechanism is correct: no point above the bound at 95% (the exit status says so).
        self.assertEqual(status, 0, output)
        self.assertIn("no point above the bound", output)


if __name__ == "__main__":
    unittest.main()
