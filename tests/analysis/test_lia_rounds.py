#!/usr/bin/python3
"""analysis/lia_rounds.py: its tables against the per-round arrays of two tiny `fluence lia`
runs with lia.mode = "per_round" (two seeds), read with h5py and averaged here; the rounds it
shows; rounds without a precision; and its refusals (a single-shot run, runs with different
numbers of rounds).

Usage: test_lia_rounds.py FLUENCE_BINARY SOURCE_DIR
"""

import io
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
import lia_rounds  # noqa: E402

PER_ROUND = ('lia.mode="per_round"', 'lia.methods=["lia","oracle"]', "lia.rounds=6",
             "lia.sign_check=0", "lia.minority.fractions=[]")


def run_main(*argv):
    out = io.StringIO()
    with redirect_stdout(out):
        status = lia_rounds.main(list(argv))
    return status, out.getvalue()


def plain_rows(text, title):
    """{first cell: the other cells} of the plain table titled `title`."""
    lines = text.split(title, 1)[1].splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("-----"))
    rows = {}
    for line in lines[rule + 1:]:
        if not line.strip():
            break
        cells = line.split("  ")
        cells = [c.strip() for c in cells if c.strip()]
        rows[cells[0]] = cells[1:]
    return rows


class ShownRounds(unittest.TestCase):
    def test_hand_worked(self):
        self.assertEqual(lia_rounds.shown_rounds(25, False), [0, 1, 4, 9, 14, 19, 24])
        self.assertEqual(lia_rounds.shown_rounds(6, False), [0, 1, 4, 5])
        self.assertEqual(lia_rounds.shown_rounds(1, False), [0])
        self.assertEqual(lia_rounds.shown_rounds(4, True), [0, 1, 2, 3])

    def test_rounds_without_precision_are_left_out(self):
        # A round that rejects nobody has no precision (NaN in /lia/round/precision).
        self.assertEqual(lia_rounds.spread(np.array([0.5, np.nan, 0.7])), "60.0 (50.0-70.0)")
        self.assertEqual(lia_rounds.spread(np.array([np.nan, np.nan])), "-")


class OnRuns(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs = tiny_runs.Runs(FLUENCE, SOURCE)
        deck = cls.runs.input("lia_synthetic.toml")
        cls.paths = [cls.runs.run("lia", deck, f"seed{s}", f"seed={s}", *PER_ROUND)
                     for s in (4, 5)]
        cls.dirs = [os.path.dirname(p) for p in cls.paths]

    @classmethod
    def tearDownClass(cls):
        cls.runs.cleanup()

    def arrays(self, name):
        values = []
        for path in self.paths:
            with h5py.File(path, "r") as f:
                values.append(100 * f[name][()])
        return np.array(values)

    def test_by_round_table_is_the_mean_of_the_files(self):
        status, text = run_main(*self.dirs)
        self.assertEqual(status, 0)
        rows = plain_rows(text, "By round")
        shown = [0, 1, 4, 5]  # rounds 1, 2, 5 and the last of 6
        for label, name, digits in (("recall %", "/lia/round/recall", 1),
                                    ("precision %", "/lia/round/precision", 1),
                                    ("per-round LIA, test accuracy %",
                                     "/lia/round/test_accuracy", 2),
                                    ("oracle, test accuracy %",
                                     "/lia/fl/oracle/test_accuracy", 2)):
            values = self.arrays(name)
            if name.startswith("/lia/fl/"):
                # docs/outputs.md: M0 first, then one entry per round.
                self.assertEqual(values.shape[1], 7)
                values = values[:, 1:]
            mean = values.mean(axis=0)
            self.assertEqual(rows[label], [f"{mean[t]:.{digits}f}" for t in shown], label)

    def test_by_run_table_against_the_files(self):
        _, text = run_main(*self.dirs)
        rows = plain_rows(text, "By run")
        recall = self.arrays("/lia/round/recall")
        last = self.arrays("/lia/round/test_accuracy")[:, -1]
        oracle = self.arrays("/lia/fl/oracle/test_accuracy")[:, -1]
        single = self.arrays("/lia/fl/lia/test_accuracy")[:, -1]
        for i, label in enumerate(("seed4", "seed5")):
            r = recall[i]
            self.assertEqual(rows[label][0], f"{r.mean():.1f} ({r.min():.1f}-{r.max():.1f})")
            self.assertEqual(rows[label][2:], [f"{last[i]:.2f}", f"{oracle[i]:.2f}",
                                               f"{last[i] - oracle[i]:+.2f}", f"{single[i]:.2f}"])
        self.assertEqual(rows["mean"][2:4], [f"{last.mean():.2f}", f"{oracle.mean():.2f}"])

    def test_every_round_and_markdown(self):
        status, text = run_main("--all-rounds", "--markdown", *self.dirs)
        self.assertEqual(status, 0)
        self.assertIn("| round | 1 | 2 | 3 | 4 | 5 | 6 |", text)

    def test_a_single_shot_run_is_refused(self):
        single = self.runs.run("lia", self.runs.input("lia_synthetic.toml"), "single",
                               "lia.rounds=2", "lia.sign_check=0", "lia.minority.fractions=[]")
        done = subprocess.run(["/usr/bin/python3",
                               os.path.join(SOURCE, "analysis", "lia_rounds.py"),
                               self.dirs[0], os.path.dirname(single)],
                              capture_output=True, text=True)
        self.assertEqual(done.returncode, 2)
        self.assertIn("not a lia.mode = \"per_round\" run", done.stderr)

    def test_runs_with_different_rounds_are_refused(self):
        short = self.runs.run("lia", self.runs.input("lia_synthetic.toml"), "short",
                              *PER_ROUND, "lia.rounds=3")
        status, _ = run_main(self.dirs[0], os.path.dirname(short))
        self.assertEqual(status, 2)


if __name__ == "__main__":
    unittest.main()
