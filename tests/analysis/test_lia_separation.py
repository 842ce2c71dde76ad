#!/usr/bin/python3
"""analysis/lia_separation.py: the best precision at recall >= 95% against hand-worked cases and
against a brute force over every threshold on a tiny `fluence lia` run, and its table's recall,
precision and medians against the results file read with h5py.

Usage: test_lia_separation.py FLUENCE_BINARY SOURCE_DIR
"""

import io
import math
import os
import subprocess
import sys
import unittest
from contextlib import redirect_stdout

import h5py
import numpy as np

import tiny_runs

FLUENCE, SOURCE = tiny_runs.arguments()
sys.path.insert(0, os.path.join(SOURCE, "analysis"))
import lia_separation  # noqa: E402


def brute_force_best(sums, corrupted, recall=0.95):
    """Every threshold T (between and beyond the distinct sums) rejecting {sum < T}: the highest
    precision among those that catch at least `recall` of the corrupted."""
    values = sorted(set(float(s) for s in sums))
    thresholds = [v + 0.5 for v in values]  # sums are vote counts: integers
    best = -1.0
    for t in thresholds:
        rejected = [s < t for s in sums]
        caught = sum(r and c for r, c in zip(rejected, corrupted))
        if caught >= recall * sum(corrupted) and any(rejected):
            best = max(best, caught / sum(rejected))
    return best


class BestPrecision(unittest.TestCase):
    def test_hand_worked_cases(self):
        # Corrupted at -9, -8, -2; honest at -5, -1. Recall >= 95% needs all three corrupted:
        # {<= -2} rejects 4 with 3 corrupted (0.75), {<= -1} rejects 5 (0.6): 0.75.
        self.assertEqual(lia_separation.best_precision(
            [-9, -8, -5, -2, -1], [1, 1, 0, 1, 0]), 0.75)
        # The best set is not the smallest one reaching the recall: with recall 0.5 of four
        # corrupted, {<= -6} holds 2 of 4 (0.5), {<= -5} 3 of 5, {<= -4} 4 of 6 (0.667).
        self.assertAlmostEqual(lia_separation.best_precision(
            [-9, -8, -7, -6, -5, -4, 0], [1, 0, 0, 1, 1, 1, 0], recall=0.5), 4 / 6)
        # A tie cannot be split: the honest -3 goes with the corrupted -3.
        self.assertEqual(lia_separation.best_precision([-3, -3, 1], [1, 0, 0]), 0.5)
        self.assertTrue(math.isnan(lia_separation.best_precision([1, 2], [0, 0])))

    def test_against_brute_force_on_random_sums(self):
        rng = np.random.default_rng(3)
        for _ in range(200):
            n = int(rng.integers(2, 40))
            sums = rng.integers(-20, 20, n)
            corrupted = rng.random(n) < 0.3
            if not corrupted.any():
                continue
            self.assertAlmostEqual(lia_separation.best_precision(sums, corrupted),
                                   brute_force_best(list(sums), list(corrupted)), places=12)


class OnARun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs = tiny_runs.Runs(FLUENCE, SOURCE)
        cls.path = cls.runs.lia()

    @classmethod
    def tearDownClass(cls):
        cls.runs.cleanup()

    def test_table_against_the_file(self):
        out = io.StringIO()
        with redirect_stdout(out):
            status = lia_separation.main([os.path.dirname(self.path)])
        self.assertEqual(status, 0)
        cells = out.getvalue().splitlines()[-1].split()
        with h5py.File(self.path, "r") as f:
            lia = f["lia"]
            corrupted = lia["corrupted"][()].astype(bool)
            true_sums = lia["true_vote_sum"][()]
            self.assertEqual(cells[1], f"{100 * lia['recall'][()]:.1f}")
            self.assertEqual(cells[2], f"{100 * lia['precision'][()]:.1f}")
            expected_best = brute_force_best(list(lia["vote_sum"][()]), list(corrupted))
            self.assertEqual(cells[3], f"{100 * expected_best:.1f}")
            self.assertEqual(float(cells[5]), float(np.median(true_sums[~corrupted])))

    def test_missing_run_is_refused(self):
        done = subprocess.run(["/usr/bin/python3",
                               os.path.join(SOURCE, "analysis", "lia_separation.py"),
                               os.path.join(self.runs.work, "absent")],
                              capture_output=True, text=True)
        self.assertEqual(done.returncode, 2)
        self.assertIn("no results.h5", done.stderr)


if __name__ == "__main__":
    unittest.main()
