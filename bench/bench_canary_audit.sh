#!/usr/bin/env bash
# The cost of an in-run canary audit (issue 39: <= 10% of the run): inputs/bench_feo2.toml (DP-FedAvg
# on Fashion-MNIST, 2,000 clients, softmax regression, 200 rounds) without canaries and with
# audit.canaries = 1000, alternating run by run, REPEATS times each (default 3), training wall time
# (/metrics/wall_time_s: the rounds, the per-round scoring included, set-up excluded) on 2 ranks.
# Prints the best and the median of each and the cost from both (the machine is shared: the median
# of many alternations says more than one best).
# Usage: [REPEATS=N] bench/bench_canary_audit.sh [BUILD]
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
ranks=${RANKS:-2}
repeats=${REPEATS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
: >"$out/times"
for repeat in $(seq "$repeats"); do
  for canaries in 0 1000; do
    bash "$here/scripts/mpirun.sh" -n "$ranks" "$build/fluence" train "$here/inputs/bench_feo2.toml" \
      --out "$out/c$canaries" --force --quiet --set audit.canaries=$canaries >/dev/null
    /usr/bin/python3 -c "import h5py; print($canaries, h5py.File('$out/c$canaries/results.h5')['/metrics/wall_time_s'][-1])" >>"$out/times"
  done
done
/usr/bin/python3 - "$out/times" "$out/c1000/results.h5" "$repeats" <<'PY'
import statistics, sys, h5py
times = {0: [], 1000: []}
for line in open(sys.argv[1]):
    canaries, seconds = line.split()
    times[int(canaries)].append(float(seconds))
best = {c: min(t) for c, t in times.items()}
median = {c: statistics.median(t) for c, t in times.items()}
f = h5py.File(sys.argv[2], "r")
print(f"bench_feo2 (200 rounds, 2 ranks, {sys.argv[3]} alternations): best {best[0]:.3f} s without "
      f"canaries, {best[1000]:.3f} s with 1,000 (+{100 * (best[1000] / best[0] - 1):.1f}%); median "
      f"{median[0]:.3f} s and {median[1000]:.3f} s (+{100 * (median[1000] / median[0] - 1):.1f}%); "
      f"eps {f['/privacy/epsilon'][-1]:.3f}, one-run lower bound "
      f"{f['/audit/epsilon_lower'][()]:.3f} (all iterates) / {f['/audit/epsilon_lower_final'][()]:.3f} (final), "
      f"canary estimate {f['/audit/epsilon_estimate'][()]:.3f} / {f['/audit/epsilon_estimate_final'][()]:.3f}")
PY
