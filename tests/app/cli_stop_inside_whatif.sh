#!/usr/bin/env bash
# Stops inside a long unit of `fluence whatif` (issue 41; docs/operations.md "Stops inside a
# unit"): a stop during a retrain chain's Newton retrain at one fraction, or during a second-order
# unit's CG solve at one fraction, saves the unit's partial state in the checkpoint
# (/state/whatif.*), and `--restart latest` on 3 ranks skips the unit's finished fractions,
# continues the interrupted retrain or solve, and ends bitwise as the uninterrupted 2-rank run
# (stop_inside_unit in cli_common.sh).
# Called as cli_stop_inside_whatif.sh FLUENCE_BINARY SOURCE_DIR.
set -u
source "$(dirname "$0")/cli_common.sh"

deck="$source_dir/inputs/whatif_synthetic.toml"
small=(--set whatif.test_sample=500 --set whatif.repeats=1 --set 'whatif.epsilons=[1.0, 3.0]'
  --set 'whatif.variants=["rr_l", "rr_flc"]')

"$mpirun" -n 2 "$fluence" whatif "$deck" --out "$work/R" --quiet "${small[@]}" >"$work/R.log" 2>&1 ||
  fail "uninterrupted whatif run"
# The retrains poll before each Newton step (the deck's explicit solver is not polled): boundary 6
# falls in the first chain (rr_l, eps 1, draw 0) past its first fraction, so the restart also
# takes that fraction's retrain from the checkpoint and warm-starts from the saved iterate.
stop_inside_unit whatif "$deck" retrain 6 "the retrain of rr_l eps 1 draw 0 at fraction 0\.(2|4)" \
  "$work/R" "${small[@]}"

# Second order by CG: each fraction's solve polls after every iteration.
second=(--set 'influence.solver="cg"' --set whatif.second_order=true --set whatif.retrain=false)
"$mpirun" -n 2 "$fluence" whatif "$deck" --out "$work/S" --quiet "${small[@]}" "${second[@]}" \
  >"$work/S.log" 2>&1 || fail "uninterrupted whatif second-order run"
# The first fraction's solve takes 58 iterations on this deck (57 polls): boundary 70 falls in the
# second fraction's, so the restart also takes the first fraction's estimate from the checkpoint.
stop_inside_unit whatif "$deck" second_order 70 "the second-order solve of rr_l eps 1 at fraction 0\.(2|4)" \
  "$work/S" "${small[@]}" "${second[@]}"

cli_summary
