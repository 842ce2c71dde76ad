#!/usr/bin/env bash
# Issue 25's distributed-ownership benchmark: 10,000,000 rows x 64 float32 features in one HDF5
# file, 10,000 natural clients of 1,000 contiguous rows (a client-id dataset), 2 ranks. Reports
# the rows each rank holds, the load (set-up) time and its rate against the file size, one FedAvg
# round, and each rank's peak resident memory (/metrics/peak_memory_bytes). The file (2.6 GB) is
# written once into FILE (default /tmp/fluence_bench_10m.h5; never the repository) and kept, so a
# rerun skips the writing; delete it afterwards.
# Usage: bench/bench_ownership.sh [BUILD] [FILE]     (needs /usr/bin/python3 with h5py)
# ROWS=200000 makes a smaller file (ROWS / 1,000 clients) for a quick check of the script;
# DRIVER=mpio (or posix) sets data.hdf5_driver (default: the deck's default).
set -euo pipefail
build=${1:-build}
file=${2:-/tmp/fluence_bench_10m.h5}
here=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

if [ ! -s "$file" ]; then
  # Written a million rows at a time (peak memory about 0.5 GB); labels from a planted linear
  # model so that one round learns something, 100,000 test rows in the same file.
  /usr/bin/python3 - "$file" "${ROWS:-10000000}" <<'PY'
import sys
import h5py
import numpy as np
rows, width, block, test_rows = int(sys.argv[2]), 64, 1_000_000, 100_000
clients, block = rows // 1000, min(block, rows)
rng = np.random.default_rng(1)
w = rng.normal(0.0, 1.0, width)
def chunk(n):
    x = rng.normal(0.0, 1.0, (n, width)).astype(np.float32)
    y = (x @ w + rng.normal(0.0, 2.0, n) > 0).astype(np.int32)
    return x, y
with h5py.File(sys.argv[1] + ".partial", "w") as f:
    xs = f.create_dataset("x", (rows, width), dtype=np.float32)
    ys = f.create_dataset("y", (rows,), dtype=np.int32)
    f["client"] = (np.arange(rows) // (rows // clients)).astype(np.int32)
    for start in range(0, rows, block):
        xs[start:start + block], ys[start:start + block] = chunk(block)
    f["test_x"], f["test_y"] = chunk(test_rows)
PY
  mv "$file.partial" "$file"
fi
cat >"$out/deck.toml" <<EOF
seed = 1
[data]
source = "hdf5"
path = "$file"
${DRIVER:+hdf5_driver = \"$DRIVER\"}
[data.arrays]
clients = "client"
test_features = "test_x"
test_labels = "test_y"
[partition]
scheme = "natural"
[federation]
rounds = 1
local_epochs = 1
batch_size = 64
learning_rate = 0.05
EOF
bytes=$(stat -c %s "$file")
# The reference read rate: the same file read by dd (from the page cache when it was just
# written or read; a VM cannot drop caches), beside the machine's ~17 GB/s streaming read.
dd_line=$(dd if="$file" of=/dev/null bs=16M 2>&1 | tail -1)
# A second reference: this VM fills fresh memory far below its streaming rate (page faults), and
# a load writes every value it keeps into fresh memory.
touch_line=$(/usr/bin/python3 -c "
import time, numpy as np
t = time.perf_counter(); a = np.empty(64 << 20); a.fill(1.0); print(f'{0.5 / (time.perf_counter() - t):.2f} GB/s')")
/usr/bin/time -f "%U %S" -o "$out/cpu" bash "$here/scripts/mpirun.sh" -n 2 "$build/fluence" train \
  "$out/deck.toml" --out "$out/run" >"$out/log" 2>&1 || { tail -20 "$out/log"; exit 1; }
read_s=$(sed -n 's/^data: .* read in \([0-9.]*\) s$/\1/p' "$out/log")
/usr/bin/python3 - "$out/run/results.h5" "$bytes" "$dd_line" "$touch_line" "$read_s" \
  "$(cat "$out/cpu")" <<'PY'
import sys
import h5py
import numpy as np
f = h5py.File(sys.argv[1], "r")
size, dd, touch, read_s = int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])
user, system = (float(v) for v in sys.argv[6].split())
held = np.bincount(f["/clients/rank"][...], weights=f["/clients/size"][...], minlength=2)
setup = float(f["/metrics/setup_time_s"][()])
round_s = float(f["/metrics/wall_time_s"][-1])
peaks = f["/metrics/peak_memory_bytes"][...]
width = 64
print(f"file: {size / 1e9:.2f} GB; dd of the same file: {dd}; first touch of 0.5 GB: {touch}")
for r, rows in enumerate(held):
    print(f"rank {r}: {int(rows):,} training rows ({rows / held.sum():.1%}), "
          f"peak memory {peaks[r] / 2**30:.2f} GiB")
read = held.sum() * width * 4
print(f"read of the rows kept (float32 to double, both ranks at once): {read / 1e9:.2f} GB in "
      f"{read_s:.2f} s = {read / read_s / 1e9:.2f} GB/s")
print(f"set-up (read, partition, encoding, clients): {setup:.2f} s wall; the run's CPU time "
      f"{user:.1f} s user + {system:.1f} s system on 2 ranks")
print(f"one FedAvg round: {round_s:.2f} s; test accuracy {float(f['/model/test_accuracy'][()]):.4f}")
PY
