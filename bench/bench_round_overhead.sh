#!/usr/bin/env bash
# Two binaries of `fluence train` side by side on the same machine (issue 38: a change to the round
# must add <= 2%): inputs/bench_feo2.toml (DP-FedAvg, 200 rounds) by /metrics/wall_time_s, and
# inputs/fmnist_2nn.toml (40 rounds) by its median round, alternating the binaries three times, best
# of three. Usage: bench/bench_round_overhead.sh BEFORE_BINARY AFTER_BINARY
set -euo pipefail
before=$1 after=$2
here=$(cd "$(dirname "$0")/.." && pwd)
ranks=${RANKS:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {  # binary tag deck extra...
  local binary=$1 tag=$2 deck=$3
  shift 3
  bash "$here/scripts/mpirun.sh" -n "$ranks" "$binary" train "$here/inputs/$deck.toml" \
    --out "$out/$tag" --force --quiet "$@" >/dev/null
  /usr/bin/python3 - "$out/$tag/results.h5" "$deck" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
t = f["/metrics/wall_time_s"][...]
print(np.median(np.diff(t)) if sys.argv[2] == "fmnist_2nn" else t[-1])
PY
}
declare -A best
for repeat in 1 2 3; do
  for side in before after; do
    binary=${!side}
    for deck in bench_feo2 fmnist_2nn; do
      extra=()
      [ "$deck" = fmnist_2nn ] && extra=(--set federation.rounds=40)
      t=$(run "$binary" "$side-$deck" "$deck" "${extra[@]}")
      key="$side-$deck"
      best[$key]=$(/usr/bin/python3 -c "print(min(float('$t'), float('${best[$key]:-inf}')))")
    done
  done
done
for deck in bench_feo2 fmnist_2nn; do
  /usr/bin/python3 -c "
b, a = float('${best[before-$deck]}'), float('${best[after-$deck]}')
what = 'training' if '$deck' == 'bench_feo2' else 'median round'
print(f'$deck ({what}, best of 3, $ranks ranks): before {b:.4f} s, after {a:.4f} s ({100 * (a / b - 1):+.1f}%)')"
done
