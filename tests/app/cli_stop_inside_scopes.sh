#!/usr/bin/env bash
# Stops inside the solves of `fluence influence` that cli_stop_inside.sh leaves out (issue 41;
# docs/operations.md "Stops inside a unit"): a client-scope local solve (each rank's own, polling
# its own signal), a block of parameter-change vectors by block CG and a retrain by federation
# rounds (influence.retrain_mode = "full" or "warm") save their partial state in the checkpoint,
# and `--restart latest` on 3 ranks continues it and ends bitwise as the uninterrupted 2-rank run
# (stop_inside_unit in cli_common.sh: the stop at a known boundary by the hidden
# --test-stop-inside K, the partial state in the checkpoint, the restart's "resuming" message).
# Called as cli_stop_inside_scopes.sh FLUENCE_BINARY SOURCE_DIR.
set -u
source "$(dirname "$0")/cli_common.sh"

deck="$source_dir/inputs/influence_synthetic.toml"
common=(--set federation.rounds=5)

# Client scope: each rank solves its own clients with their own Hessians, not in step, and polls
# its own signal; the last rank (which --test-stop-inside signals) stops inside its first client's
# solve (client 10 of 20 on 2 ranks) while rank 0's solve of client 0 finishes. The checkpoint
# keeps every rank's interrupted solve (/state/influence.local_partial).
client=("${common[@]}" --set 'influence.hessian="client"')
"$mpirun" -n 2 "$fluence" influence "$deck" --out "$work/clientR" --quiet "${client[@]}" \
  >"$work/clientR.log" 2>&1 || fail "uninterrupted client-scope influence run"
PARTIAL_DATASETS=local_partial stop_inside_unit influence "$deck" client_scope 5 \
  "the local solve for client 10" "$work/clientR" "${client[@]}"

# Block CG (influence.block_size = 4): the block solve polls after every block iteration that
# leaves columns to solve. Boundaries: s_test's, then the first block's (its iterations: the most
# any of its columns, clients 0-3, took, less the last), then the fifth of the second block's.
block=("${common[@]}" --set influence.block_size=4)
"$mpirun" -n 2 "$fluence" influence "$deck" --out "$work/blockR" --quiet "${block[@]}" \
  >"$work/blockR.log" 2>&1 || fail "uninterrupted block-CG influence run"
block_polls=$("$python" -c "
import h5py, sys
it = h5py.File(sys.argv[1], 'r')['/ihvp/iterations'][...]
print(int(it[0]) - 1 + int(max(it[1:5])) - 1)" "$work/blockR/results.h5")
stop_inside_unit influence "$deck" block $((block_polls + 5)) "the block solve from client 4" \
  "$work/blockR" "${block[@]}"

# Retrains by federation rounds poll after every round (the control retrain of "warm" runs
# whole, before the first client's); the boundaries before them are the CG solves' (a solve of i
# iterations polls i - 1 times). "full" stops after round 3 of client 0's retrain (its Newton
# polish then runs after the restart), "warm" after round 2 of client 2's, with server momentum and
# SCAFFOLD so that the round's parts carry state across rounds (saved with the model).
for mode in full warm; do
  rounds=("${common[@]}" --set "influence.retrain_mode=\"$mode\"")
  [ "$mode" = warm ] && rounds+=(--set 'federation.server_optimizer="momentum"'
    --set 'federation.client_update="scaffold"')
  "$mpirun" -n 2 "$fluence" influence "$deck" --out "$work/${mode}R" --quiet "${rounds[@]}" \
    >"$work/${mode}R.log" 2>&1 || fail "uninterrupted influence run, retrain_mode $mode"
  solve_polls=$("$python" -c "
import h5py, sys
print(sum(int(i) - 1 for i in h5py.File(sys.argv[1], 'r')['/ihvp/iterations'][...]))" \
    "$work/${mode}R/results.h5")
  if [ "$mode" = full ]; then k=$((solve_polls + 3)) client=0; else k=$((solve_polls + 12)) client=2; fi
  stop_inside_unit influence "$deck" "retrain_$mode" "$k" "the retrain for client $client" \
    "$work/${mode}R" "${rounds[@]}"
done

cli_summary
