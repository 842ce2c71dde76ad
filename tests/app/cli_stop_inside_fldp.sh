#!/usr/bin/env bash
# Stops inside a long unit of `fluence fldp` (issue 41; docs/operations.md "Stops inside a unit"):
# a stop during one case's estimate solve (CG), its expected retrain, its Newton refinement or a
# re-randomized retrain (Newton, or by rounds with fldp.retrain_mode = "full") saves the case's partial state in the checkpoint (/state/fldp.*),
# and `--restart latest` on 3 ranks continues the case where it stopped and ends bitwise as the
# uninterrupted 2-rank run (stop_inside_unit in cli_common.sh: the stop is raised at a known
# boundary by the hidden --test-stop-inside K, and the restart must say it resumed that unit).
# Called as cli_stop_inside_fldp.sh FLUENCE_BINARY SOURCE_DIR.
set -u
source "$(dirname "$0")/cli_common.sh"

deck="$source_dir/inputs/fldp_synthetic.toml"
# Two cases (client 1's change, then one client to eps' = 0.5), two re-randomized retrains each.
small=(--set data.synthetic.rows=3000 --set 'fldp.sweep.counts=[1]' --set 'fldp.sweep.epsilon=[0.5]'
  --set fldp.sweep.remove=false --set fldp.retrain_seeds=2)

"$mpirun" -n 2 "$fluence" fldp "$deck" --out "$work/R" --quiet "${small[@]}" >"$work/R.log" 2>&1 ||
  fail "uninterrupted fldp run"
# The boundaries before case 0's expected retrain: its one change's CG solve of i iterations
# polls i - 1 times (not after the converged last one); then a Newton run polls before each step.
solve_polls=$("$python" -c "
import h5py, sys
print(int(h5py.File(sys.argv[1], 'r')['/fldp/ihvp_iterations'][0]) - 1)" "$work/R/results.h5")

stop_inside_unit fldp "$deck" estimate 3 "the solve for client 1" "$work/R" "${small[@]}"
stop_inside_unit fldp "$deck" expected_retrain $((solve_polls + 3)) "the expected retrain of case 0" \
  "$work/R" "${small[@]}"
# On this deck case 0's expected retrain takes 5 Newton steps and its refinement 3 (fldp.newton_steps,
# tolerance 0): boundaries solve_polls + 6 .. + 8 are the refinement's, then draw 0's.
stop_inside_unit fldp "$deck" refine $((solve_polls + 8)) "the Newton refinement of case 0" \
  "$work/R" "${small[@]}"
stop_inside_unit fldp "$deck" draw $((solve_polls + 12)) "the retrain of case 0 draw [0-9]+" \
  "$work/R" "${small[@]}"

# A full re-randomized retrain (fldp.retrain_mode = "full", the deck's 10 rounds) polls after each
# round: boundary solve_polls + 8 + 4 is draw 0's fourth round.
full=("${small[@]}" --set 'fldp.retrain_mode="full"')
"$mpirun" -n 2 "$fluence" fldp "$deck" --out "$work/fullR" --quiet "${full[@]}" >"$work/fullR.log" 2>&1 ||
  fail "uninterrupted fldp run, retrain_mode full"
stop_inside_unit fldp "$deck" draw_full $((solve_polls + 12)) "the retrain of case 0 draw 0" \
  "$work/fullR" "${full[@]}"

cli_summary
