#!/usr/bin/env bash
# The canary-audit table of docs/results/audit.md: DP-FedAvg on Fashion-MNIST (inputs/bench_feo2.toml:
# 2,000 clients, softmax regression, q = 0.05, 200 rounds), the noise solved for a target eps by the
# run's accountant, with audit.canaries canary clients: the one-run lower bound (all iterates = white
# box, final model = black box) and Andrew et al.'s canary estimate beside the accountant's eps, and
# both again from the white-box likelihood-ratio statistic (/audit/*_likelihood).
# Usage: scripts/run_audit_experiments.sh BUILD/fluence [OUT] (RANKS=2 by default)
set -euo pipefail
fluence=${1:?usage: scripts/run_audit_experiments.sh path/to/fluence [out]}
out=${2:-out/audit_experiments}
here=$(cd "$(dirname "$0")/.." && pwd)
ranks=${RANKS:-2}
mkdir -p "$out"
echo "| target eps | delta | canaries | z | accountant eps | lower bound, all iterates (max) | lower bound, all iterates (likelihood) | lower bound, final | estimate, all iterates (max) | estimate, all iterates (likelihood) | estimate, final | seconds |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
while read -r epsilon delta canaries; do
  tag="eps${epsilon}_d${delta}_m${canaries}"
  start=$(date +%s.%N)
  bash "$here/scripts/mpirun.sh" -n "$ranks" "$fluence" train "$here/inputs/bench_feo2.toml" \
    --out "$out/$tag" --force --quiet --set "privacy.epsilon=$epsilon" --set "privacy.delta=$delta" \
    --set "audit.canaries=$canaries" --set privacy.adaptive_clip=false >"$out/$tag.log" 2>&1 </dev/null
  seconds=$(/usr/bin/python3 -c "import time; print(f'{time.time() - $start:.0f}')")
  /usr/bin/python3 - "$out/$tag/results.h5" "$epsilon" "$delta" "$canaries" "$seconds" <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
a = lambda name: f["/audit/" + name][()]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {sys.argv[4]} | {f['/privacy/noise_multiplier'][()]:.3f} | "
      f"{f['/privacy/epsilon'][-1]:.3f} | {a('epsilon_lower'):.3f} | {a('epsilon_lower_likelihood'):.3f} | "
      f"{a('epsilon_lower_final'):.3f} | {a('epsilon_estimate'):.3f} | "
      f"{a('epsilon_estimate_likelihood'):.3f} | {a('epsilon_estimate_final'):.3f} | {sys.argv[5]} |")
PY
done <<'CASES'
4 1e-5 1000
4 1e-8 1000
4 1e-8 5000
1 1e-8 5000
16 1e-8 5000
CASES
