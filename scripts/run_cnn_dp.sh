#!/usr/bin/env bash
# DP-FedAvg with McMahan et al.'s CNN on Fashion-MNIST (inputs/fmnist_cnn.toml, with 2,000 clients
# of two 15-image label shards each, as DP-FedAvg needs many clients per round): the non-private
# baseline and DP-FedAvg at three noise multipliers, all with the same Poisson client sampling
# (q = 0.05, about 100 clients a round: both draw their cohorts from the same keyed stream, so they
# see the same clients each round), then a markdown table of the accuracy and the (eps, 1e-5)
# spent (docs/results/networks.md).
#
# Usage: scripts/run_cnn_dp.sh [--rounds R] [--out ROOT] [--ranks N]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
rounds=30
out="$here/out/cnn_dp"
ranks=${SLURM_NTASKS:-2}
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 1 ;;
  esac
done
fluence="$here/build/fluence"
run() {  # NAME SETTINGS...
  local name=$1
  shift
  bash "$here/scripts/mpirun.sh" -n "$ranks" "$fluence" train "$here/inputs/fmnist_cnn.toml" \
    --out "$out/$name" --quiet --set "federation.rounds=$rounds" --set partition.clients=2000 "$@"
}
run nonprivate --set 'federation.client_sampling="poisson"' --set federation.sampling_rate=0.05
for z in 0.8 1.5 3.0; do
  run "dp_z$z" --set 'federation.client_sampling="all"' --set 'privacy.mode="dp-fedavg"' \
    --set privacy.sampling_rate=0.05 --set "privacy.noise_multiplier=$z"
done
/usr/bin/python3 - "$out" <<'PY'
import sys, h5py, numpy as np
out = sys.argv[1]
print("| run | noise multiplier z | noise / update norm | eps at delta = 1e-5 | accuracy after the last round | mean accuracy, last 10 rounds |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for name, z in (("nonprivate", "-"), ("dp_z0.8", "0.8"), ("dp_z1.5", "1.5"), ("dp_z3.0", "3.0")):
    f = h5py.File(f"{out}/{name}/results.h5", "r")
    accuracy = f["/metrics/test_accuracy"][...]
    eps = f"{f['/privacy/epsilon'][-1]:.2f}" if "/privacy/epsilon" in f else "inf"
    # The server adds N(0, (z S / (q N))^2) per coordinate to an average of clipped updates of norm
    # at most S: the noise's norm is z sqrt(p) / (q N) times S.
    p, clients = f["/model/theta"].size, len(f["/clients/size"])
    ratio = "-" if z == "-" else f"{float(z) * p ** 0.5 / (0.05 * clients):.2f}"
    print(f"| {name} | {z} | {ratio} | {eps} | {100 * accuracy[-1]:.2f}% | {100 * accuracy[-10:].mean():.2f}% |")
PY
