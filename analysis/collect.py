#!/usr/bin/python3
"""One tidy table of a tree of Fluence runs (issue 27).

Finds every ``results.h5`` under ROOT (a sweep of ``scripts/run_*_experiments.sh``, or any tree of
``--out`` directories) and writes one table:

* by default one row per run: ``run`` (the run directory relative to ROOT), ``command`` (train,
  influence, ...), ``ranks``, ``seed``, the deck keys whose values differ between the runs (as
  ``section.key`` columns, from the resolved deck in the root attribute ``deck``; ``output.dir``
  left out: ``run`` says where), then one column per result, named by its dataset path without
  the leading ``/``: every scalar dataset (``model/test_accuracy``, ``privacy/delta``,
  ``lia/recall``, ...), the value after the last round of every per-round series
  (``metrics/test_accuracy``, ``privacy/epsilon``, ``feo2/acc_g``, ...), and the length of every
  dimension (``metrics/round.length``: the rounds; ``privacy/opt_out_client.length``: the
  opt-out clients; ...);
* with ``--long DIMS`` one row per run and cell of the dimensions DIMS (comma-separated
  dimension names, docs/outputs.md "Conventions"): ``--long round`` a row per run and round
  with every per-round series (``metrics/test_accuracy``, ``privacy/clip_norm``, ...);
  ``--long group_fraction,eps`` a row per run and what-if cell (``whatif/rr/estimated``, ...);
  ``--long case`` a row per run and fldp case. The dimensions' coordinates (or 0-based indices
  where a dimension has none) are columns, then the run's deck columns, then every array whose
  dimensions are exactly DIMS.

Strings are text, lists from the deck JSON; a value a run does not have is empty (NaN). Numbers
are written with the digits that read back to the same double (pandas:
``pd.read_csv(path, float_precision="round_trip")``).

Usage::

    analysis/collect.py out/feo2                         # CSV on stdout
    analysis/collect.py out/feo2 -o out/feo2/runs.csv
    analysis/collect.py out/cnn_dp --long round -o rounds.csv
    analysis/collect.py out/whatif --long group_fraction,eps -o cells.parquet
    analysis/collect.py out/feo2 --key privacy.mode      # a deck key even where all runs agree

Output: CSV (``-o FILE.csv``, or stdout), or Parquet (``-o FILE.parquet``) where pyarrow is
installed (Debian 12 does not package it). The file is written through a temporary name, so a
failed run of collect leaves no half-written table. Notes on skipped runs go to stderr. Exit
status 2 (one line on stderr) when ROOT is not a directory, holds no readable run, an option is
bad or the table cannot be written; 0 otherwise.

Files written before issue 27 have no dimension scales: their 1-D arrays in ``/metrics``,
``/privacy`` and ``/feo2`` of the rounds' length are taken as per-round series; their other
arrays have no dimension names and only appear in ``--long`` tables of dimensions named
``<dataset path>#<axis>``.

``feo2_report.py`` reads its runs through ``collect_runs`` and ``collect_long`` (this module's
API); other scripts can do the same.

Needs h5py, numpy and pandas (Debian: python3-h5py, python3-numpy, python3-pandas).
"""

import argparse
import json
import math
import os
import sys
import tempfile
import tomllib
import warnings

import h5py
import numpy as np
import pandas as pd

PROG = "collect"
RESULTS_FILE = "results.h5"
NOT_A_VARIABLE = "This is a netCDF dimension but not a netCDF variable"
# output.dir differs by construction (`run` says where); seed is the `seed` column already
LEFT_OUT_KEYS = ("output.dir", "seed")
ROUND_GROUPS = ("metrics", "privacy", "feo2")   # per-round series of files before issue 27
EXIT_ERROR = 2


class CollectError(Exception):
    """A problem with the command line or the tree; the message is for the user."""


def note(message):
    print(f"{PROG}: {message}", file=sys.stderr)


# --------------------------------------------------------------------------
# Reading one results file
# --------------------------------------------------------------------------


def text(value):
    """An HDF5 string (bytes or str, scalar or 1-element array) as str."""
    if isinstance(value, np.ndarray):
        value = value.reshape(-1)[0] if value.size == 1 else value.tolist()
    if isinstance(value, (bytes, np.bytes_)):
        return value.decode("utf-8", errors="replace")
    return str(value)


def flatten(table, prefix=""):
    """A TOML table as {'section.key': value}; lists become JSON text."""
    flat = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + "."))
        elif isinstance(value, list):
            flat[name] = json.dumps(value)
        else:
            flat[name] = value
    return flat


def deck_of(h5):
    """The resolved deck (root attribute `deck`), flattened; {} when absent or unreadable."""
    try:
        return flatten(tomllib.loads(text(h5.attrs.get("deck", ""))))
    except (tomllib.TOMLDecodeError, ValueError):
        return {}


def is_scale(dataset):
    return text(dataset.attrs.get("CLASS", b"")) == "DIMENSION_SCALE"


def has_coordinates(scale):
    """False for netCDF's 'dimension but not a variable' (an index without values)."""
    return not text(scale.attrs.get("NAME", b"")).startswith(NOT_A_VARIABLE)


def round_length(h5):
    return h5["metrics/round"].shape[0] if "metrics/round" in h5 else None


def dimensions(h5, dataset):
    """The dimension names of each axis: its dimension scale's name, the dataset's own name for
    a scale, or (files before issue 27) 'round' for the per-round series and
    '<path>#<axis>' otherwise."""
    name = dataset.name.lstrip("/")
    if is_scale(dataset):
        return (name.rsplit("/", 1)[-1],)
    found = []
    for axis in range(dataset.ndim):
        scales = dataset.dims[axis]
        if len(scales):
            found.append(scales[0].name.rsplit("/", 1)[-1])
        elif (dataset.ndim == 1 and name.split("/")[0] in ROUND_GROUPS
              and dataset.shape[0] == round_length(h5)):
            found.append("round")
        else:
            found.append(f"{name}#{axis}")
    return tuple(found)


def coordinate(h5, dataset, axis, dimension):
    """The values along one axis: the scale's values, else 0-based positions."""
    length = dataset.shape[axis]
    scales = dataset.dims[axis] if not is_scale(dataset) else [dataset]
    if len(scales) and has_coordinates(scales[0]):
        values = scales[0][()]
    elif dimension == "round" and "metrics/round" in h5 and len(h5["metrics/round"]) == length:
        values = h5["metrics/round"][()]
    else:
        return np.arange(length)
    if values.dtype.kind in "SO":
        return np.array([text(v) for v in values], dtype=object)
    return values


def value_of(dataset):
    """A 0-d dataset as a Python number or str."""
    value = dataset[()]
    if dataset.dtype.kind in "SO":
        return text(value)
    return value.item() if hasattr(value, "item") else value


def datasets(h5):
    """(path without '/', dataset) of every dataset holding results (not bare dimensions)."""
    found = []

    def visit(name, item):
        if isinstance(item, h5py.Dataset) and not (is_scale(item) and not has_coordinates(item)):
            found.append((name, item))
    h5.visititems(visit)
    return found


def dimension_lengths(h5):
    """{'<group>/<dimension>.length': n} of every dimension scale in the file."""
    lengths = {}

    def visit(name, item):
        if isinstance(item, h5py.Dataset) and is_scale(item):
            lengths[f"{name}.length"] = item.shape[0]
    h5.visititems(visit)
    if not lengths and "metrics/round" in h5:  # before issue 27
        lengths["metrics/round.length"] = round_length(h5)
    return lengths


def run_identity(h5):
    """command, ranks, seed of a run (root attributes)."""
    words = text(h5.attrs.get("command", "")).split()
    return {"command": words[1] if len(words) > 1 else "",
            "ranks": int(h5.attrs["ranks"]) if "ranks" in h5.attrs else math.nan,
            "seed": int(h5.attrs["seed"]) if "seed" in h5.attrs else math.nan}


def summary_row(h5):
    """The results of one run as {column: value}: scalars, last values of per-round series,
    dimension lengths."""
    row = dimension_lengths(h5)
    for name, dataset in datasets(h5):
        if dataset.ndim == 0:
            row[name] = value_of(dataset)
        elif (dataset.ndim == 1 and dimensions(h5, dataset) == ("round",)
              and not is_scale(dataset)):
            row[name] = dataset[-1].item() if dataset.shape[0] else math.nan
    return row


def cells_frame(h5, wanted):
    """One row per cell of the dimensions `wanted` (a tuple of names) with every array along
    exactly those dimensions; None when the run has none."""
    frames = {}
    for name, dataset in datasets(h5):
        if is_scale(dataset) or dataset.ndim != len(wanted):
            continue
        names = dimensions(h5, dataset)
        if sorted(names) != sorted(wanted):
            continue
        order = [names.index(d) for d in wanted]
        values = np.transpose(dataset[()], order)
        index = pd.MultiIndex.from_product(
            [coordinate(h5, dataset, axis, names[axis]) for axis in order], names=list(wanted))
        column = pd.Series(values.reshape(-1), index=index, name=name)
        if values.dtype.kind in "SO":
            column = column.map(text)
        # Groups with the same dimension (e.g. /metrics and /feo2 along `round`) meet on its
        # coordinates; groups whose coordinates differ (/lia/fl/<method>/round starts at 0)
        # are joined on the union.
        key = tuple(tuple(level) for level in index.levels)
        frames.setdefault(key, []).append(column)
    if not frames:
        return None
    parts = [pd.concat(columns, axis=1) for columns in frames.values()]
    frame = parts[0]
    for part in parts[1:]:
        frame = frame.join(part, how="outer")
    return frame.reset_index()


# --------------------------------------------------------------------------
# The tree
# --------------------------------------------------------------------------


def find_runs(root):
    """(run name, path) of every results.h5 under ROOT, sorted by run name."""
    if not os.path.isdir(root):
        raise CollectError(f"{root}: no such directory")
    found = []
    for directory, subdirectories, files in os.walk(root):
        subdirectories.sort()
        if RESULTS_FILE in files:
            name = os.path.relpath(directory, root).replace(os.sep, "/")
            found.append((name, os.path.join(directory, RESULTS_FILE)))
    return sorted(found)


def read_runs(root, read):
    """[(run, identity, deck, read(h5))] of the readable runs; notes the others."""
    runs = []
    for name, path in find_runs(root):
        try:
            with h5py.File(path, "r") as h5:
                runs.append((name, run_identity(h5), deck_of(h5), read(h5)))
        except (OSError, KeyError, ValueError, TypeError) as err:
            note(f"skipped: {path}: cannot read ({err})")
    if not runs:
        raise CollectError(f"no results.h5 under {root}")
    return runs


def differing_keys(decks, keys=()):
    """Deck keys whose values differ between the runs (or are missing in some), plus `keys`."""
    every = sorted({key for deck in decks for key in deck})
    sentinel = object()
    chosen = [key for key in every if key not in LEFT_OUT_KEYS
              and len({json.dumps(deck.get(key, sentinel), default=str) for deck in decks}) > 1]
    return sorted(set(chosen) | set(keys))


def deck_columns(deck, keys):
    return {key: deck.get(key, math.nan) for key in keys}


def collect_runs(root, keys=()):
    """The one-row-per-run table of the runs under ROOT (a pandas DataFrame)."""
    runs = read_runs(root, summary_row)
    chosen = differing_keys([deck for _, _, deck, _ in runs], keys)
    rows = [{"run": name, **identity, **deck_columns(deck, chosen), **results}
            for name, identity, deck, results in runs]
    frame = pd.DataFrame(rows)
    fixed = ["run", "command", "ranks", "seed"] + chosen
    return frame[fixed + sorted(c for c in frame.columns if c not in fixed)]


def collect_long(root, wanted, keys=()):
    """One row per run and cell of the dimensions `wanted`, with the arrays along exactly them."""
    wanted = tuple(wanted)
    runs = read_runs(root, lambda h5: cells_frame(h5, wanted))
    chosen = differing_keys([deck for _, _, deck, _ in runs], keys)
    frames = []
    for name, identity, deck, cells in runs:
        if cells is None:
            continue
        cells.insert(0, "run", name)
        for position, key in enumerate(chosen):
            cells.insert(1 + position, key, deck.get(key, math.nan))
        frames.append(cells)
    if not frames:
        raise CollectError(f"no run under {root} has arrays along ({', '.join(wanted)})")
    frame = pd.concat(frames, ignore_index=True)
    fixed = ["run"] + chosen + list(wanted)
    return frame[fixed + sorted(c for c in frame.columns if c not in fixed)]


# --------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------


def parquet_available():
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def check_output(output):
    """The format of OUTPUT ('csv' or 'parquet'), before any work."""
    if output == "-":
        return "csv"
    extension = os.path.splitext(output)[1].lower()
    if extension not in (".csv", ".parquet"):
        raise CollectError(f"-o {output}: the table is written as .csv or .parquet")
    if extension == ".parquet" and not parquet_available():
        raise CollectError(f"-o {output}: Parquet needs pyarrow, which is not installed "
                           "(Debian 12 does not package it); write a .csv")
    directory = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(directory):
        raise CollectError(f"-o {output}: no such directory {directory}")
    return extension[1:]


def exact_text(frame):
    """The frame with its float columns as the shortest text that reads back to the same
    double (pandas' CSV writer drops the 17th digit)."""
    frame = frame.copy()
    for name in frame.columns:
        if frame[name].dtype.kind == "f":
            frame[name] = [repr(float(v)) if not math.isnan(v) else "" for v in frame[name]]
    return frame


def write_table(frame, output, kind):
    """CSV on stdout, or the file through a temporary name in its directory."""
    if output == "-":
        exact_text(frame).to_csv(sys.stdout, index=False)
        return
    directory = os.path.dirname(os.path.abspath(output))
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".collect-", suffix="." + kind)
    os.close(handle)
    try:
        if kind == "parquet":
            frame.to_parquet(temporary, index=False)
        else:
            exact_text(frame).to_csv(temporary, index=False)
        os.replace(temporary, output)
    except BaseException:
        os.remove(temporary)
        raise
    note(f"wrote {output}: {len(frame)} rows, {len(frame.columns)} columns")


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="collect.py",
        description="One tidy table (CSV or Parquet) of the Fluence runs under ROOT: one row "
                    "per run, or per run and cell with --long.")
    parser.add_argument("root", metavar="ROOT", help="a tree of run directories (results.h5)")
    parser.add_argument("-o", "--output", default="-", metavar="FILE",
                        help="FILE.csv or FILE.parquet (default: CSV on stdout)")
    parser.add_argument("--long", metavar="DIMS",
                        help="one row per run and cell of these comma-separated dimensions, "
                             "e.g. round, or group_fraction,eps")
    parser.add_argument("--key", action="append", default=[], metavar="SECTION.KEY",
                        help="a deck key to include even where all runs agree (repeatable)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        kind = check_output(args.output)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=pd.errors.PerformanceWarning)
            if args.long:
                wanted = [d.strip() for d in args.long.split(",") if d.strip()]
                if not wanted:
                    raise CollectError(f"--long {args.long!r}: name one or more dimensions")
                frame = collect_long(args.root, wanted, args.key)
            else:
                frame = collect_runs(args.root, args.key)
        write_table(frame, args.output, kind)
    except CollectError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as err:
        print(f"{PROG}: error: cannot write {args.output}: {err}", file=sys.stderr)
        return EXIT_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
