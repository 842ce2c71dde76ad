#!/usr/bin/env bash
# The cost of an in-run canary audit (issue 39: <= 10% of the run): inputs/bench_feo2.toml (DP-FedAvg
# on Fashion-MNIST, 2,000 clients, softmax regression, 200 rounds) without canaries and with
# audit.canaries = 1000, alternating, best of 3 each, training wall time (/metrics/wall_time_s: the
# rounds, the per-round scoring included, set-up excluded) on 2 ranks.
# Usage: bench/bench_canary_audit.sh [BUILD]
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
ranks=${RANKS:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -A best
for repeat in 1 2 3; do
  for canaries in 0 1000; do
    bash "$here/scripts/mpirun.sh" -n "$ranks" "$build/fluence" train "$here/inputs/bench_feo2.toml" \
      --out "$out/c$canaries" --force --quiet --set audit.canaries=$canaries >/dev/null
    t=$(/usr/bin/python3 -c "import h5py; print(h5py.File('$out/c$canaries/results.h5')['/metrics/wall_time_s'][-1])")
    best[$canaries]=$(/usr/bin/python3 -c "print(min(float('$t'), float('${best[$canaries]:-inf}')))")
  done
done
/usr/bin/python3 - "${best[0]}" "${best[1000]}" "$out/c1000/results.h5" <<'PY'
import sys, h5py
plain, audited = float(sys.argv[1]), float(sys.argv[2])
f = h5py.File(sys.argv[3], "r")
print(f"bench_feo2 (200 rounds, 2 ranks): {plain:.3f} s without canaries, {audited:.3f} s with 1,000 "
      f"(+{100 * (audited / plain - 1):.1f}%); eps {f['/privacy/epsilon'][-1]:.3f}, one-run lower bound "
      f"{f['/audit/epsilon_lower'][()]:.3f} (all iterates) / {f['/audit/epsilon_lower_final'][()]:.3f} (final), "
      f"canary estimate {f['/audit/epsilon_estimate'][()]:.3f} / {f['/audit/epsilon_estimate_final'][()]:.3f}")
PY
