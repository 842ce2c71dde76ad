#!/usr/bin/python3
"""Issue 25's distributed ownership: each rank reads and keeps only its clients' rows, and the
results must not depend on it. The same federation (480 rows of 8 features in 12 natural clients,
a 120-row test file) is written as CSV, HDF5, TFF, LEAF JSON and NumPy arrays, and `fluence train`
(2 rounds, a local test fraction) runs on each on 1, 2, 3 and 4 ranks: every results dataset but
the timings and the rank map is bitwise identical across rank counts, and /model/theta is the same
bits for every file source (the values are multiples of 2^-10: exact in float32, in double and in
decimal text). Synthetic data and an HDF5 file without a test split (its test rows split off the
training rows, so a rank reads the union of both) are checked across rank counts too, and so are
issue 26's numeric scalings that stay inside the protocol: "per_client" (each client's statistics
on its own rank, the test set's over the ranks' shards, or on every rank for a network) and
"public" (rows held out of every client, read by every rank). The hdf5, tff and split-off hdf5
runs are repeated with data.hdf5_driver = "mpio" (collective MPI-IO reads): every dataset the
same bits as with "posix", on every rank count.

Usage: test_source_ranks.py FLUENCE_BINARY SOURCE_DIR
"""

import json
import os
import unittest

import h5py
import numpy as np

import tiny_runs

FLUENCE, SOURCE = tiny_runs.arguments()
CLIENTS, PER_CLIENT, TEST_ROWS, WIDTH, CLASSES = 12, 40, 120, 8, 3
RANKS = (1, 2, 3, 4)
# Datasets that legitimately differ between rank counts: timings, memory and who ran what.
VARYING = ("metrics/wall_time_s", "metrics/setup_time_s", "metrics/peak_memory_bytes",
           "metrics/host", "metrics/rank", "clients/rank")

COMMON = """seed = 3
[partition]
scheme = "{scheme}"
local_test_fraction = 0.1
{extra}[federation]
rounds = 2
batch_size = 8
"""


def make_rows(rng, rows):
    x = np.round(rng.normal(0.0, 1.0, (rows, WIDTH)) * 1024) / 1024
    labels = (np.argmax(x[:, :CLASSES] + rng.normal(0.0, 0.5, (rows, CLASSES)), axis=1))
    return x.astype(np.float32), labels.astype(np.int64)


def as_bytes(value):
    """A dataset's bits; strings (object arrays hold pointers) by value."""
    array = np.asarray(value)
    return repr(array.tolist()).encode() if array.dtype.kind == "O" else array.tobytes()


def datasets(path):
    """Every dataset of a results file by name, but those in VARYING."""
    found = {}
    with h5py.File(path, "r") as f:
        def keep(name, obj):
            if isinstance(obj, h5py.Dataset) and name not in VARYING and "time" not in name:
                found[name] = obj[()]
        f.visititems(keep)
    return found


class SourceRanks(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs = tiny_runs.Runs(FLUENCE, SOURCE)
        cls.work = cls.runs.work
        rng = np.random.default_rng(8)
        cls.x, cls.y = make_rows(rng, CLIENTS * PER_CLIENT)
        cls.tx, cls.ty = make_rows(rng, TEST_ROWS)
        cls.client = np.repeat(np.arange(CLIENTS), PER_CLIENT)
        cls.decks = {name: write(cls, name) for name in
                     ("csv", "hdf5", "tff", "leaf", "npy", "synthetic", "hdf5_split",
                      "hdf5_per_client", "hdf5_public", "mlp_per_client")}
        cls.done = {}

    @classmethod
    def tearDownClass(cls):
        cls.runs.cleanup()

    def across_ranks(self, name, driver="posix"):
        """Runs the deck on 1-4 ranks, checks the datasets equal; the 1-rank results (each
        deck and driver run once, then remembered). The driver is set for hdf5 and tff only."""
        if (name, driver) in self.done:
            return self.done[name, driver]
        hdf5 = name in ("hdf5", "tff", "hdf5_split")
        settings = [f'data.hdf5_driver="{driver}"'] if hdf5 else []
        results = [datasets(self.runs.run("train", self.decks[name], f"{name}_{driver}{r}",
                                          *settings, ranks=r))
                   for r in RANKS]
        self.assertIn("model/theta", results[0])
        for ranks, other in zip(RANKS[1:], results[1:]):
            self.assertEqual(sorted(other), sorted(results[0]))
            for key in results[0]:
                with self.subTest(source=name, driver=driver, ranks=ranks, dataset=key):
                    self.assertEqual(as_bytes(other[key]), as_bytes(results[0][key]))
        self.done[name, driver] = results[0]
        return results[0]

    def test_file_sources_identical_on_1_to_4_ranks_and_to_each_other(self):
        theta = {}
        for name in ("csv", "hdf5", "tff", "leaf", "npy"):
            theta[name] = self.across_ranks(name)["model/theta"]
        for name in ("hdf5", "tff", "leaf", "npy"):
            with self.subTest(source=name):
                np.testing.assert_array_equal(theta[name], theta["csv"])

    def test_synthetic_identical_on_1_to_4_ranks(self):
        self.across_ranks("synthetic")

    def test_hdf5_with_split_off_test_rows_identical_on_1_to_4_ranks(self):
        self.across_ranks("hdf5_split")

    def test_per_client_scaling_identical_on_1_to_4_ranks(self):
        self.across_ranks("hdf5_per_client")
        self.across_ranks("mlp_per_client")

    def test_public_scaling_identical_on_1_to_4_ranks(self):
        self.across_ranks("hdf5_public")

    def test_mpio_driver_identical_to_posix_on_1_to_4_ranks(self):
        for name in ("hdf5", "tff", "hdf5_split"):
            posix, mpio = self.across_ranks(name), self.across_ranks(name, "mpio")
            self.assertEqual(sorted(mpio), sorted(posix))
            for key in posix:
                with self.subTest(source=name, dataset=key):
                    self.assertEqual(as_bytes(mpio[key]), as_bytes(posix[key]))


def write(cls, name):
    """Writes the data in format `name` into the work folder; returns the deck's path."""
    work, x, y, tx, ty, client = cls.work, cls.x, cls.y, cls.tx, cls.ty, cls.client
    names = [f"c{c:02d}" for c in range(CLIENTS)]
    natural = COMMON.format(scheme="natural", extra="")
    if name == "csv":
        header = ",".join([f"f{j}" for j in range(WIDTH)] + ["client", "label"])
        for file, xs, ys, cs in (("train.csv", x, y, client), ("test.csv", tx, ty,
                                                               np.zeros(len(ty), int))):
            with open(os.path.join(work, file), "w") as f:
                f.write(header + "\n")
                for row, label, c in zip(xs, ys, cs):
                    f.write(",".join([f"{v:.17g}" for v in row.astype(np.float64)]
                                     + [names[c], str(label)]) + "\n")
        return cls.runs.deck(name, COMMON.format(scheme="column", extra='column = "client"\n') + f"""[data]
source = "csv"
path = "{work}/train.csv"
test_path = "{work}/test.csv"
label = "label"
""")
    if name in ("hdf5_per_client", "hdf5_public", "mlp_per_client"):
        path = os.path.join(work, "hdf5.h5")  # written for "hdf5" (the dict is filled in order)
        scaling = "public" if name == "hdf5_public" else "per_client"
        extra = ("public_fraction = 0.2\n" if name == "hdf5_public" else "")
        model = ('[model]\ntype = "mlp"\nhidden = [6]\n' if name == "mlp_per_client" else "")
        return cls.runs.deck(name, natural + model + f"""[data]
source = "hdf5"
path = "{path}"
numeric_scaling = "{scaling}"
{extra}[data.arrays]
clients = "client"
test_features = "test_x"
test_labels = "test_y"
""")
    if name in ("hdf5", "hdf5_split"):
        path = os.path.join(work, name + ".h5")
        with h5py.File(path, "w") as f:
            f["x"], f["y"], f["client"] = x, y, client.astype(np.int64)
            if name == "hdf5":
                f["test_x"], f["test_y"] = tx, ty
        if name == "hdf5_split":
            return cls.runs.deck(name, COMMON.format(scheme="iid", extra="clients = 7\n") + f"""[data]
source = "hdf5"
path = "{path}"
test_fraction = 0.25
""")
        return cls.runs.deck(name, natural + f"""[data]
source = "hdf5"
path = "{path}"
[data.arrays]
clients = "client"
test_features = "test_x"
test_labels = "test_y"
""")
    if name == "tff":
        for file, rows in (("train_tff.h5", None), ("test_tff.h5", True)):
            with h5py.File(os.path.join(work, file), "w") as f:
                if rows:
                    f["examples/t/x"], f["examples/t/y"] = tx, ty.astype(np.int32)
                    continue
                for c in range(CLIENTS):
                    mine = client == c
                    f[f"examples/{names[c]}/x"] = x[mine]
                    f[f"examples/{names[c]}/y"] = y[mine].astype(np.int32)
        return cls.runs.deck(name, natural + f"""[data]
source = "tff"
path = "{work}/train_tff.h5"
test_path = "{work}/test_tff.h5"
""")
    if name == "leaf":
        for folder, users, xs, ys, cs in (("leaf_train", names, x, y, client),
                                          ("leaf_test", ["t"], tx, ty, np.zeros(len(ty), int))):
            os.makedirs(os.path.join(work, folder))
            data = {u: {"x": xs[cs == c].astype(np.float64).tolist(),
                        "y": ys[cs == c].tolist()} for c, u in enumerate(users)}
            with open(os.path.join(work, folder, "all.json"), "w") as f:
                json.dump({"users": users, "num_samples": [len(data[u]["y"]) for u in users],
                           "user_data": data}, f)
        return cls.runs.deck(name, natural + f"""[data]
source = "leaf"
path = "{work}/leaf_train"
test_path = "{work}/leaf_test"
""")
    if name == "npy":
        folder = os.path.join(work, "npy")
        os.makedirs(folder)
        for array, values in (("x", x), ("y", y), ("client", client.astype(np.int64)),
                              ("test_x", tx), ("test_y", ty)):
            np.save(os.path.join(folder, array + ".npy"), values)
        return cls.runs.deck(name, natural + f"""[data]
source = "npy"
path = "{folder}"
[data.arrays]
clients = "client"
test_features = "test_x"
test_labels = "test_y"
""")
    return cls.runs.deck(name, COMMON.format(scheme="dirichlet", extra="clients = 9\n") + """[data.synthetic]
rows = 900
numeric = 3
categorical = [3, 4]
classes = 3
""")


if __name__ == "__main__":
    unittest.main()
