#!/usr/bin/python3
"""Pack embeddings computed elsewhere (a pretrained network's features, one row per image) into
the .npz archive that `data.source = "npy"` reads, and write a deck for LIA's set-up on them: the
frozen body is the network that made the embeddings, and Fluence trains and votes on the last
layer only (LIA, docs/references.md#lia, §III-B; docs/embeddings.md has the whole workflow).

The inputs are NumPy arrays (.npy files, or .npz archives with an array name after a colon:
`features.npz:x`): the training features [n, d] and labels [n], and optionally the test split.
Checked before anything is written: 2-D finite float features, 1-D integer labels of the same
length, the same width in both splits, at least two classes. The archive holds x_train, y_train
(and x_test, y_test), float32 features and int64 labels, and the feature names e0 .. e{d-1}.

Usage:
  scripts/embeddings_to_npz.py --train-features F --train-labels L
                               [--test-features F --test-labels L]
                               --out ARCHIVE.npz [--deck DECK.toml] [--results DIR]
                               [--participants P]

--deck writes a copy of inputs/lia_embeddings.toml whose data.path points to the archive (relative
to the deck's directory) and whose output.dir is --results (default out/lia_embeddings);
--participants sets lia.participants there. Needs numpy (Debian's python3-numpy).
"""
import argparse
import os
import re
import sys

import numpy as np

TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "inputs",
                        "lia_embeddings.toml")


class EmbeddingError(Exception):
    pass


def load_array(spec, what):
    """`path.npy`, or `path.npz:name` (or a one-array .npz without a name)."""
    path, name = spec, ""
    if not os.path.exists(spec) and ":" in spec:
        path, name = spec.rsplit(":", 1)
    if not os.path.isfile(path):
        raise EmbeddingError(f"{what}: {path}: no such file")
    try:
        loaded = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as error:
        raise EmbeddingError(f"{what}: {path}: not a NumPy .npy or .npz file ({error})")
    if isinstance(loaded, np.ndarray):
        if name:
            raise EmbeddingError(f"{what}: {path} is a .npy file; only a .npz takes ':{name}'")
        return loaded
    names = list(loaded.keys())
    if not name:
        if len(names) != 1:
            raise EmbeddingError(f"{what}: {path} holds {len(names)} arrays ({', '.join(names)}): "
                                 f"name one as {path}:NAME")
        name = names[0]
    if name not in names:
        raise EmbeddingError(f"{what}: {path} has no array '{name}' (it has {', '.join(names)})")
    return loaded[name]


def checked_split(features, labels, split):
    if features.ndim != 2:
        raise EmbeddingError(f"{split} features: expected a 2-D array [rows, dimensions], got "
                             f"shape {features.shape}")
    if not np.issubdtype(features.dtype, np.floating) and features.dtype != np.uint8:
        raise EmbeddingError(f"{split} features: expected floats (or uint8), got {features.dtype}")
    if not np.all(np.isfinite(features)):
        row = int(np.argwhere(~np.isfinite(features))[0][0])
        raise EmbeddingError(f"{split} features: row {row} is not finite (NaN or infinite)")
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise EmbeddingError(f"{split} labels: expected a 1-D integer array, got shape "
                             f"{labels.shape} of {labels.dtype}")
    if len(labels) != len(features):
        raise EmbeddingError(f"{split}: {len(features)} feature rows but {len(labels)} labels")
    if labels.min() < 0:
        raise EmbeddingError(f"{split} labels: {labels.min()} is negative (classes are 0, 1, ...)")
    return features.astype(np.float32), labels.astype(np.int64)


def write_deck(path, archive, results, participants, has_test):
    with open(TEMPLATE, encoding="utf-8") as f:
        text = f.read()
    if not has_test:  # the deck's data.test_fraction then holds training rows out
        text = re.sub(r"(?m)^test_(features|labels) = .*\n", "", text)
    relative = os.path.relpath(os.path.abspath(archive), os.path.dirname(os.path.abspath(path)))
    text, count = re.subn(r'(?m)^path = ".*"', f'path = "{relative}"', text, count=1)
    assert count == 1, "inputs/lia_embeddings.toml has no data.path line"
    text = re.sub(r'(?m)^dir = ".*"', f'dir = "{results}"', text, count=1)
    if participants is not None:
        text = re.sub(r"(?m)^participants = \d+", f"participants = {participants}", text, count=1)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train-features", required=True, metavar="F")
    parser.add_argument("--train-labels", required=True, metavar="L")
    parser.add_argument("--test-features", metavar="F")
    parser.add_argument("--test-labels", metavar="L")
    parser.add_argument("--out", required=True, metavar="ARCHIVE.npz")
    parser.add_argument("--deck", metavar="DECK.toml")
    parser.add_argument("--results", default="out/lia_embeddings", metavar="DIR")
    parser.add_argument("--participants", type=int, metavar="P")
    args = parser.parse_args(argv)
    try:
        if (args.test_features is None) != (args.test_labels is None):
            raise EmbeddingError("--test-features and --test-labels go together")
        x, y = checked_split(load_array(args.train_features, "--train-features"),
                             load_array(args.train_labels, "--train-labels"), "training")
        if len(np.unique(y)) < 2:
            raise EmbeddingError(f"training labels: a single class ({y[0]}); LIA needs two or more")
        arrays = {"x_train": x, "y_train": y,
                  "names": np.array([f"e{j}" for j in range(x.shape[1])])}
        if args.test_features is not None:
            xt, yt = checked_split(load_array(args.test_features, "--test-features"),
                                   load_array(args.test_labels, "--test-labels"), "test")
            if xt.shape[1] != x.shape[1]:
                raise EmbeddingError(f"test features have {xt.shape[1]} dimensions, the training "
                                     f"features {x.shape[1]}")
            arrays.update(x_test=xt, y_test=yt)
        if args.participants is not None and args.participants < 2:
            raise EmbeddingError(f"--participants {args.participants}: expected at least 2")
    except EmbeddingError as error:
        print(f"embeddings_to_npz: error: {error}", file=sys.stderr)
        return 2
    temporary = args.out + ".partial.npz"
    np.savez_compressed(temporary, **arrays)
    os.replace(temporary, args.out)
    print(f"embeddings_to_npz: wrote {args.out}: {x.shape[0]} training rows x {x.shape[1]} "
          f"dimensions, {len(np.unique(y))} classes"
          + (f", {arrays['x_test'].shape[0]} test rows" if "x_test" in arrays else ""))
    if args.deck:
        write_deck(args.deck, args.out, args.results, args.participants, "x_test" in arrays)
        print(f"embeddings_to_npz: wrote {args.deck}; run: mpirun -n 2 build/fluence lia "
              f"{args.deck}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
