#!/usr/bin/env bash
# The set-up stage of `fluence train` on Fashion-MNIST (issue 41: <= 0.5 s on 2 ranks): reading the
# IDX files, the partition, the encodings, the clients' rows and the test set, as
# /metrics/setup_time_s records it (the slowest rank's wall time from the start of the run to the
# first round). inputs/fmnist_2nn.toml (the 2NN, 100 clients) and inputs/feo2_fashion_mnist.toml
# (logistic, standardized, 2,000 clients with local test rows), each run with federation.rounds = 0,
# REPEATS times (default 5): median and best, and the CPU time (user + system) of the busiest rank
# over the whole run (set-up, MPI start-up, the final evaluation and the output: the machine is
# shared, and CPU time is what other sessions' load inflates least). With two binaries they
# alternate, run by run.
# Usage: bench/bench_setup.sh BINARY [SECOND_BINARY]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
ranks=${RANKS:-2}
repeats=${REPEATS:-5}
binaries=("$@")
[ ${#binaries[@]} -ge 1 ] || { echo "usage: $0 BINARY [SECOND_BINARY]" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "# $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg), $ranks ranks, $repeats repeats"
for deck in fmnist_2nn feo2_fashion_mnist; do
  for b in "${!binaries[@]}"; do : >"$out/$deck.$b"; done
  for repeat in $(seq "$repeats"); do
    for b in "${!binaries[@]}"; do
      bash "$here/scripts/mpirun.sh" -n "$ranks" bash -c \
        '/usr/bin/time -f "%U %S" -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' "$out/cpu" \
        "${binaries[$b]}" train "$here/inputs/$deck.toml" \
        --set federation.rounds=0 --out "$out/run" --force --quiet >/dev/null
      /usr/bin/python3 - "$out" >>"$out/$deck.$b" <<'PY'
import glob, sys, h5py
out = sys.argv[1]
cpu = max(sum(map(float, open(f).read().split()[-2:])) for f in glob.glob(f"{out}/cpu.*"))
print(h5py.File(f"{out}/run/results.h5")["/metrics/setup_time_s"][()], cpu)
PY
    done
  done
  for b in "${!binaries[@]}"; do
    /usr/bin/python3 - "$out/$deck.$b" "$deck" "${binaries[$b]}" <<'PY'
import sys, numpy as np
t, cpu = np.loadtxt(sys.argv[1], ndmin=2).T
print(f"{sys.argv[2]:20s} {sys.argv[3]}: set-up median {np.median(t):.3f} s, best {t.min():.3f} s; "
      f"CPU per rank (whole run) median {np.median(cpu):.2f} s, best {cpu.min():.2f} s "
      f"({len(t)} runs)")
PY
  done
done
