#!/usr/bin/env bash
# Rounds to a target test accuracy for FedAvg, FedProx, SCAFFOLD, FedAdam and FedYogi on McMahan
# et al.'s 2NN in the pathological non-IID set-up (inputs/fmnist_2nn.toml: 100 clients of two label
# shards, a fixed cohort of 10 a round, one local epoch of batch 10), each method at the best of a
# small learning-rate grid (the client's step for FedAvg, FedProx and SCAFFOLD; the server's for
# FedAdam and FedYogi, whose clients keep the deck's 0.05), over --seeds; then the table of
# docs/results/optimizers.md (a seed that never reaches the target counts as --rounds + 1 in the
# mean, and the table says how many reached it).
#
# Usage: scripts/run_optimizer_comparison.sh [--rounds R] [--seeds "1 2 3"] [--target 0.75]
#                                            [--out ROOT] [--ranks N] [--report-only]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
rounds=150
seeds="1 2 3"
target=0.75
out="$here/out/optimizers"
ranks=${SLURM_NTASKS:-2}
report_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --target) target=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --report-only) report_only=1; shift ;;
    *) echo "unknown option $1" >&2; exit 1 ;;
  esac
done
fluence=${FLUENCE:-"$here/build/fluence"}
# method | grid variable | grid | fixed settings
methods=(
  "fedavg|federation.learning_rate|0.01 0.02 0.05 0.1|"
  "fedprox|federation.learning_rate|0.01 0.02 0.05 0.1|federation.client_update=\"fedprox\" federation.proximal_mu=0.01"
  "scaffold|federation.learning_rate|0.01 0.02 0.05 0.1|federation.client_update=\"scaffold\""
  "fedadam|federation.server_learning_rate|0.003 0.01 0.03 0.1|federation.server_optimizer=\"adam\""
  "fedyogi|federation.server_learning_rate|0.003 0.01 0.03 0.1|federation.server_optimizer=\"yogi\""
)
if [ "$report_only" -eq 0 ]; then
  for entry in "${methods[@]}"; do
    IFS='|' read -r method variable grid fixed <<<"$entry"
    for value in $grid; do
      for seed in $seeds; do
        sets=(--set "federation.rounds=$rounds" --set "seed=$seed" --set "$variable=$value")
        for setting in $fixed; do sets+=(--set "$setting"); done
        run_dir="$out/$method/$value/seed$seed"
        # A finished run is kept (rerunning the script resumes the grid); a run that diverges (exit
        # 3: too large a step) leaves a marker and counts as never reaching the target.
        [ -f "$run_dir/results.h5" ] || [ -f "$run_dir/diverged" ] && continue
        echo "$method $variable=$value seed $seed" >&2
        bash "$here/scripts/mpirun.sh" -n "$ranks" "$fluence" train "$here/inputs/fmnist_2nn.toml" \
          --out "$run_dir" --quiet --force "${sets[@]}" >/dev/null ||
          { mkdir -p "$run_dir" && touch "$run_dir/diverged"; }
      done
    done
  done
fi
/usr/bin/python3 - "$out" "$rounds" "$target" "$seeds" "${methods[@]}" <<'PY'
import os, sys, h5py, numpy as np
out, rounds, target, seeds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4].split()
def rounds_to_target(path):
    if not os.path.exists(path):  # diverged (the script's marker): never reaches the target
        return rounds + 1, float("nan"), float("nan")
    with h5py.File(path, "r") as f:
        acc, r = f["/metrics/test_accuracy"][...], f["/metrics/round"][...]
        reached = np.nonzero(acc >= target)[0]
        return (int(r[reached[0]]) if len(reached) else rounds + 1), float(acc[-1]), float(f["/metrics/wall_time_s"][-1]) / len(r)
print(f"| method | best {'/'.join(['learning rate'])} | rounds to {100 * target:.0f}% (mean over seeds) | seeds reaching it | per seed | accuracy after round {rounds} (mean) | s per round |")
print("| --- | --- | ---: | ---: | --- | ---: | ---: |")
for entry in sys.argv[5:]:
    method, variable, grid, _ = entry.split("|")
    best = None
    for value in grid.split():
        results = [rounds_to_target(f"{out}/{method}/{value}/seed{s}/results.h5") for s in seeds]
        mean = np.mean([r[0] for r in results])
        if best is None or mean < best[0]:
            best = (mean, value, results)
    mean, value, results = best
    reached = sum(r[0] <= rounds for r in results)
    per_seed = ", ".join(str(r[0]) if r[0] <= rounds else ("diverged" if np.isnan(r[1]) else f">{rounds}")
                         for r in results)
    print(f"| {method} | {variable.split('.')[-1]} = {value} | {mean:.1f} | {reached}/{len(results)} | {per_seed} | "
          f"{100 * np.nanmean([r[1] for r in results]):.2f}% | {np.nanmedian([r[2] for r in results]):.3f} |")
PY
