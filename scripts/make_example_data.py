#!/usr/bin/python3
"""Write the example data of inputs/data: one small federated data set ("blobs") in every format
Fluence reads, so that the decks inputs/{csv,hdf5,tff,leaf,npy}_blobs.toml show each source and
the tests can check that every format loads the same table.

The data: 12 clients (u00 ... u11), each with its own label mix and feature shift (a natural,
non-IID federation), 3 classes, 8 features that are multiples of 1/64 (exact in float32 and short
in text); 480 training and 120 test rows, each client's rows together and the clients in name
order, as TFF and LEAF store them. Deterministic: rerunning writes the same bytes.

Usage: /usr/bin/python3 scripts/make_example_data.py [OUTPUT_DIR]   (default: inputs/data)
Needs numpy and h5py (Debian's python3-numpy and python3-h5py).
"""
import gzip
import io
import json
import os
import sys

import h5py
import numpy as np

CLIENTS = [f"u{i:02d}" for i in range(12)]
FEATURES = [f"f{j}" for j in range(8)]


def make_split(rng, sizes, centres, shifts, mixes):
    x, y, client = [], [], []
    for c, size in enumerate(sizes):
        labels = rng.choice(3, size=size, p=mixes[c])
        values = centres[labels] + shifts[c] + rng.normal(0.0, 1.0, (size, len(FEATURES)))
        x.append(np.round(values * 64) / 64)
        y.append(labels)
        client += [CLIENTS[c]] * size
    return (np.concatenate(x).astype(np.float32), np.concatenate(y).astype(np.int64),
            np.array(client))


def write_csv(path, x, y, client, opener=open):
    with opener(path, "wt") as f:
        f.write(",".join(FEATURES + ["client", "label"]) + "\n")
        for row, label, who in zip(x, y, client):
            f.write(",".join(repr(float(v)) for v in row) + f",{who},{label}\n")


def write_leaf(directory, x, y, client, files):
    os.makedirs(directory, exist_ok=True)
    for index, users in enumerate(files):
        data = {u: {"x": x[client == u].astype(float).tolist(), "y": y[client == u].tolist()}
                for u in users}
        with open(os.path.join(directory, f"part_{index}.json"), "w") as f:
            json.dump({"users": users, "num_samples": [len(data[u]["y"]) for u in users],
                       "user_data": data}, f)


def write_tff(path, x, y, client):
    with h5py.File(path, "w") as f:
        for u in CLIENTS:
            f[f"examples/{u}/x"] = x[client == u]
            f[f"examples/{u}/label"] = y[client == u].astype(np.int32)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..",
                                                              "inputs", "data")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(2025)
    centres = rng.normal(0.0, 0.5, (3, len(FEATURES)))
    shifts = rng.normal(0.0, 0.5, (len(CLIENTS), len(FEATURES)))
    mixes = rng.dirichlet([0.7] * 3, len(CLIENTS))
    train_sizes = rng.multinomial(480 - 12 * 10, [1 / 12] * 12) + 10
    test_sizes = rng.multinomial(120 - 12 * 2, [1 / 12] * 12) + 2
    train = make_split(rng, train_sizes, centres, shifts, mixes)
    test = make_split(rng, test_sizes, centres, shifts, mixes)

    # gzip's header holds a time stamp: 0 keeps the bytes reproducible.
    write_csv(os.path.join(out, "blobs_train.csv.gz"), *train,
              opener=lambda p, m: io.TextIOWrapper(gzip.GzipFile(p, "wb", mtime=0), "ascii"))
    write_csv(os.path.join(out, "blobs_test.csv"), *test)
    with h5py.File(os.path.join(out, "blobs.h5"), "w") as f:
        for name, (x, y, client) in (("train", train), ("test", test)):
            f[f"{name}/x"] = x
            f[f"{name}/y"] = y
        f["train/client"] = train[2].astype("S3")  # fixed-length byte strings
        f["names"] = np.array(FEATURES, dtype=h5py.string_dtype())
    np.savez_compressed(os.path.join(out, "blobs.npz"), x_train=train[0], y_train=train[1],
                        client_train=train[2], x_test=test[0], y_test=test[1],
                        names=np.array(FEATURES))
    write_tff(os.path.join(out, "blobs_tff_train.h5"), *train)
    write_tff(os.path.join(out, "blobs_tff_test.h5"), *test)
    write_leaf(os.path.join(out, "blobs_leaf", "train"), *train, [CLIENTS[:7], CLIENTS[7:]])
    write_leaf(os.path.join(out, "blobs_leaf", "test"), *test, [CLIENTS])


if __name__ == "__main__":
    main()
