#!/usr/bin/env bash
# Issue 25's distributed ownership for the sources read from plain files, 2 ranks, one FedAvg
# round with 100 iid clients (each rank's rows scattered over the whole file):
#  - SOURCE=csv (default): 1,000,000 rows x 20 columns of CSV (18 numeric, a categorical "group"
#    of 10 levels, a 0/1 label; about 0.17 GB), default FILE /tmp/fluence_bench_1m.csv;
#  - SOURCE=npy: 1,000,000 rows x 64 float32 features and int64 labels in a stored .npz
#    (numpy.savez; about 0.26 GB), default FILE /tmp/fluence_bench_1m.npz.
# Reports the set-up time (/metrics/setup_time_s), the second pass's read time from the console
# and each rank's peak resident memory (/metrics/peak_memory_bytes). The file is written once into
# FILE (never the repository) and kept, so a rerun (or a run of another build) skips the writing;
# delete it afterwards.
# Usage: [SOURCE=csv|npy] bench/bench_ownership_files.sh [BUILD] [FILE]
#        (needs /usr/bin/python3 with numpy and h5py)
set -euo pipefail
source_kind=${SOURCE:-csv}
build=${1:-build}
if [ "$source_kind" = npy ]; then file=${2:-/tmp/fluence_bench_1m.npz}; else file=${2:-/tmp/fluence_bench_1m.csv}; fi
here=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

if [ "$source_kind" = npy ] && [ ! -s "$file" ]; then
  /usr/bin/python3 - "$file" <<'PY'
import os
import sys
import numpy as np
rng = np.random.default_rng(3)
x = rng.normal(size=(1_000_000, 64)).astype(np.float32)
y = (x[:, 0] + rng.normal(size=len(x)) > 0).astype(np.int64)
with open(sys.argv[1] + ".partial", "wb") as f:
    np.savez(f, x=x, y=y)
os.rename(sys.argv[1] + ".partial", sys.argv[1])
PY
fi
if [ "$source_kind" = csv ] && [ ! -s "$file" ]; then
  /usr/bin/python3 - "$file" <<'PY'
import sys
import numpy as np
rows, numeric, block = 1_000_000, 18, 100_000
rng = np.random.default_rng(2)
w = rng.normal(0.0, 1.0, numeric)
with open(sys.argv[1] + ".partial", "w") as f:
    f.write(",".join([f"x{j}" for j in range(numeric)] + ["group", "label"]) + "\n")
    for start in range(0, rows, block):
        x = rng.normal(0.0, 1.0, (block, numeric))
        group = rng.integers(0, 10, block)
        y = (x @ w + 0.3 * group + rng.normal(0.0, 2.0, block) > 1.35).astype(int)
        lines = [",".join(f"{v:.6g}" for v in x[i]) + f",g{group[i]},{y[i]}" for i in range(block)]
        f.write("\n".join(lines) + "\n")
PY
  mv "$file.partial" "$file"
fi
if [ "$source_kind" = npy ]; then
  data_keys='source = "npy"'
else
  data_keys='source = "csv"
categorical = ["group"]'
fi
cat >"$out/deck.toml" <<DECK
seed = 1
[data]
$data_keys
path = "$file"
[partition]
clients = 100
[federation]
rounds = 1
local_epochs = 1
batch_size = 64
learning_rate = 0.05
DECK
/usr/bin/time -f "%e %U %S" -o "$out/cpu" bash "$here/scripts/mpirun.sh" -n 2 "$build/fluence" \
  train "$out/deck.toml" --out "$out/run" >"$out/log" 2>&1 || { tail -20 "$out/log"; exit 1; }
read_s=$(sed -n 's/^data: .* read in \([0-9.]*\) s$/\1/p' "$out/log")
/usr/bin/python3 - "$out/run/results.h5" "$(stat -c %s "$file")" "${read_s:-nan}" \
  "$(cat "$out/cpu")" <<'PY'
import sys
import h5py
f = h5py.File(sys.argv[1], "r")
size, read_s = int(sys.argv[2]), float(sys.argv[3])
wall, user, system = (float(v) for v in sys.argv[4].split())
peaks = f["/metrics/peak_memory_bytes"][...]
print(f"file: {size / 1e9:.3f} GB; set-up {float(f['/metrics/setup_time_s'][()]):.2f} s; "
      f"second pass (values of the rows kept) {read_s:.2f} s; whole run {wall:.1f} s wall, "
      f"{user:.1f} s user + {system:.1f} s system on 2 ranks")
print("peak memory per rank: " + ", ".join(f"{p / 2**30:.3f} GiB" for p in peaks))
print(f"test accuracy after one round {float(f['/model/test_accuracy'][()]):.4f}")
PY
