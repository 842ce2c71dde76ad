#!/usr/bin/python3
"""Issue 25's pretrained-features workflow (docs/embeddings.md): embeddings that the test makes
itself (a fixed random ReLU layer over clustered inputs, standing in for a pretrained network) are
packed by scripts/embeddings_to_npz.py, which also writes the LIA deck, and `fluence lia` runs on
them. Checked against an independent path: the same numbers written as CSV text and read by the
CSV source give bitwise the same /lia results and the same trained model (the values are
multiples of 2^-10, exact in float32, in double and in decimal text), on 2 ranks against 1. The packer's refusals: exit 2 and one line
naming the array and the problem, and no archive written.

Usage: test_embeddings.py FLUENCE_BINARY SOURCE_DIR
"""

import os
import subprocess
import unittest

import h5py
import numpy as np

import tiny_runs

FLUENCE, SOURCE = tiny_runs.arguments()
PACKER = os.path.join(SOURCE, "scripts", "embeddings_to_npz.py")
CLASSES, INPUTS, WIDTH = 10, 20, 32


def embeddings(rng, rows):
    """ReLU(x W) of class-clustered x, rounded to multiples of 2^-10."""
    labels = rng.integers(0, CLASSES, rows)
    x = CENTRES[labels] + rng.normal(0.0, 1.0, (rows, INPUTS))
    values = np.round(np.maximum(x @ WEIGHTS, 0.0) * 1024) / 1024
    return values.astype(np.float32), labels.astype(np.int64)


_rng = np.random.default_rng(11)
CENTRES = _rng.normal(0.0, 1.0, (CLASSES, INPUTS))
WEIGHTS = _rng.normal(0.0, 1.0 / np.sqrt(INPUTS), (INPUTS, WIDTH))


def pack(*arguments):
    return subprocess.run(["/usr/bin/python3", PACKER, *arguments], capture_output=True,
                          text=True)


def lia_datasets(path):
    """Every /lia dataset but the timings, by name."""
    found = {}
    with h5py.File(path, "r") as f:
        def keep(name, obj):
            if isinstance(obj, h5py.Dataset) and "timing" not in name:
                found[name] = obj[()]
        f["/lia"].visititems(keep)
    return found


class Embeddings(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs = tiny_runs.Runs(FLUENCE, SOURCE)
        work = cls.work = cls.runs.work
        rng = np.random.default_rng(5)
        cls.x, cls.y = embeddings(rng, 3000)
        cls.xt, cls.yt = embeddings(rng, 600)
        np.save(os.path.join(work, "x.npy"), cls.x)
        np.save(os.path.join(work, "y.npy"), cls.y)
        np.savez(os.path.join(work, "test.npz"), x=cls.xt, y=cls.yt)
        cls.deck = os.path.join(work, "decks", "lia.toml")
        os.makedirs(os.path.dirname(cls.deck))
        done = pack("--train-features", os.path.join(work, "x.npy"),
                    "--train-labels", os.path.join(work, "y.npy"),
                    "--test-features", os.path.join(work, "test.npz") + ":x",
                    "--test-labels", os.path.join(work, "test.npz") + ":y",
                    "--out", os.path.join(work, "embeddings.npz"), "--deck", cls.deck,
                    "--participants", "40")
        assert done.returncode == 0, done.stderr

    @classmethod
    def tearDownClass(cls):
        cls.runs.cleanup()

    def test_archive_holds_the_arrays(self):
        with np.load(os.path.join(self.work, "embeddings.npz")) as archive:
            np.testing.assert_array_equal(archive["x_train"], self.x)
            np.testing.assert_array_equal(archive["y_train"], self.y)
            np.testing.assert_array_equal(archive["x_test"], self.xt)
            self.assertEqual(archive["x_train"].dtype, np.float32)
            self.assertEqual(list(archive["names"][:2]), ["e0", "e1"])
        with open(self.deck) as f:
            text = f.read()
        self.assertIn('path = "../embeddings.npz"', text)  # relative to the deck's directory
        self.assertIn("participants = 40", text)

    def test_lia_on_embeddings_equals_the_csv_path(self):
        npy = self.runs.run("lia", self.deck, "npy2", ranks=2)
        header = ",".join([f"e{j}" for j in range(WIDTH)] + ["label"])
        for name, x, y in (("train.csv", self.x, self.y), ("test.csv", self.xt, self.yt)):
            rows = np.column_stack([x.astype(np.float64), y])
            np.savetxt(os.path.join(self.work, name), rows, delimiter=",", header=header,
                       comments="", fmt=["%.17g"] * WIDTH + ["%d"])
        # The packer's deck without its [data.arrays] section (the CSV source takes no such keys)
        with open(self.deck) as f:
            text = f.read()
        start = text.index("[data.arrays]")
        text = text[:start] + text[text.index("\n[", start + 1) + 1:]
        csv_deck = self.runs.deck("lia_csv", text)
        csv = self.runs.run("lia", csv_deck, "csv1", 'data.source="csv"',
                            f'data.path="{os.path.join(self.work, "train.csv")}"',
                            f'data.test_path="{os.path.join(self.work, "test.csv")}"',
                            'data.label="label"', ranks=1)
        # LIA's outputs are decisions and vote counts, which a small change in the data need not
        # move; a trained logistic model's parameters move with any. `fluence train` on the same
        # two decks (their [lia] section ignored with a warning) must give the same bits.
        theta = []
        for deck, out, ranks, settings in (
                (self.deck, "train_npy", 2, ()),
                (csv_deck, "train_csv", 1, ('data.source="csv"',
                                            f'data.path="{os.path.join(self.work, "train.csv")}"',
                                            f'data.test_path="{os.path.join(self.work, "test.csv")}"',
                                            'data.label="label"'))):
            path = self.runs.run("train", deck, out, "federation.rounds=3", *settings, ranks=ranks)
            with h5py.File(path, "r") as f:
                theta.append(f["/model/theta"][...])
        self.assertEqual(theta[0].shape, (CLASSES, WIDTH + 1))
        np.testing.assert_array_equal(theta[0], theta[1])
        a, b = lia_datasets(npy), lia_datasets(csv)
        self.assertEqual(sorted(a), sorted(b))
        self.assertIn("vote_sum", a)
        for name in a:
            with self.subTest(dataset=name):
                np.testing.assert_array_equal(a[name], b[name])
        with h5py.File(npy, "r") as f:
            self.assertEqual(f["/lia/vote_sum"].shape, (40,))
            self.assertGreater(int(f["/lia/corrupted"][...].sum()), 0)

    def test_refusals(self):
        work = self.work
        bad = self.x.copy()
        bad[17, 3] = np.nan
        np.save(os.path.join(work, "nan.npy"), bad)
        np.save(os.path.join(work, "short.npy"), self.y[:-1])
        np.save(os.path.join(work, "one.npy"), np.zeros_like(self.y))
        cases = [
            ("nan.npy", "y.npy", "training features: row 17 is not finite"),
            ("x.npy", "short.npy", "training: 3000 feature rows but 2999 labels"),
            ("x.npy", "one.npy", "training labels: a single class (0)"),
            ("x.npy", "test.npz", "holds 2 arrays (x, y): name one"),
            ("missing.npy", "y.npy", "missing.npy: no such file"),
        ]
        for features, labels, message in cases:
            out = os.path.join(work, "refused.npz")
            with self.subTest(message=message):
                done = pack("--train-features", os.path.join(work, features),
                            "--train-labels", os.path.join(work, labels), "--out", out)
                self.assertEqual(done.returncode, 2, done.stderr)
                self.assertIn(message, done.stderr)
                self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)
                self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    unittest.main()
