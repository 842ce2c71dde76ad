#!/usr/bin/env bash
# Stops inside a long unit of `fluence influence` (issue 41; docs/operations.md "Stops inside a
# unit"): a stop signal that arrives during a CG solve (s_test, a client's parameter-change
# vector), a Newton retrain or a LiSSA recursion saves the unit's partial state in the checkpoint,
# and `--restart latest` on 3 ranks continues the unit where it stopped and ends bitwise as the
# uninterrupted 2-rank run. The stop is raised deterministically by the hidden
# --test-stop-inside K (SIGUSR1 on the last rank at its K-th boundary inside a unit: a CG
# iteration, a Newton step, a LiSSA step; the same handler as TERM). A restart that redid the unit
# from its start would give the same bits too, so each case also checks that the checkpoint holds
# the partial unit (/state/influence.partial) and that the restart says it resumed it after k > 0
# iterations or steps (and the CG unit test counts the products of a continued solve).
# Called as cli_stop_inside.sh FLUENCE_BINARY SOURCE_DIR.
set -u
source "$(dirname "$0")/cli_common.sh"

deck="$source_dir/inputs/influence_synthetic.toml"
common=(--set federation.rounds=5)

# stop_inside NAME K STOP_TEXT RESUME_TEXT REFERENCE ARGS...: the run stopped at boundary K exits
# 4 with STOP_TEXT (an extended regex) in its log and /state/influence.partial in its checkpoint;
# the restart on 3 ranks logs RESUME_TEXT and equals REFERENCE bitwise.
stop_inside() {
  local name=$1 k=$2 stop_text=$3 resume_text=$4 reference=$5
  shift 5
  local out="$work/$name" code
  "$mpirun" -n 2 "$fluence" influence "$deck" --out "$out" --quiet "${common[@]}" "$@" \
    --test-stop-inside "$k" >"$out.log" 2>&1
  code=$?
  local checkpoint
  checkpoint=$(ls "$out"/chk_*.h5 2>/dev/null | tail -1)
  if [ "$code" -eq 4 ] && [ ! -e "$out/results.h5" ] && [ -n "$checkpoint" ] &&
    grep -Eq -- "$stop_text" "$out.log" &&
    "$python" -c "import h5py,sys; f=h5py.File(sys.argv[1],'r'); assert 'state/' + sys.argv[2] in f and 'state/sweep.partial' in f" "$checkpoint" "${PARTIAL:-influence.partial}" &&
    "$mpirun" -n 3 "$fluence" influence "$deck" --out "$out" "${common[@]}" "$@" --restart latest \
      >"$out.resume.log" 2>&1 &&
    grep -Eq -- "$resume_text" "$out.resume.log" &&
    compare_runs "$reference/results.h5" "$out/results.h5"; then
    pass "influence: stop inside $name (boundary $k): $(grep -Eo -- "$stop_text" "$out.log" | head -1); resumed on 3 ranks bitwise identical"
  else
    fail "influence: stop inside $name (boundary $k, exit $code)"
    tail -4 "$out.log" "$out.resume.log" 2>/dev/null | sed 's/^/    /'
  fi
}

"$mpirun" -n 2 "$fluence" influence "$deck" --out "$work/cgR" --quiet "${common[@]}" >"$work/cgR.log" 2>&1 ||
  fail "uninterrupted influence run"
# The boundaries before each unit, from the reference's iteration counts: a CG solve of i
# iterations polls i - 1 times (not after the converged last one); a Newton retrain once a step.
read -r s_test_polls solve_polls <<<"$("$python" -c "
import h5py, sys
it = h5py.File(sys.argv[1], 'r')['/ihvp/iterations'][...]
print(int(it[0]) - 1, int(sum(int(i) - 1 for i in it)))" "$work/cgR/results.h5")"

stop_inside s_test 4 "stop inside the s_test solve: 5 iterations saved" \
  "resuming the s_test solve after 5 iterations" "$work/cgR"
stop_inside client_vector $((s_test_polls + 3)) "stop inside the solve for client 0: 4 iterations saved" \
  "resuming the solve for client 0 after 4 iterations" "$work/cgR"
stop_inside retrain $((solve_polls + 3)) "stop inside the retrain for client 0: 2 Newton steps saved" \
  "resuming the retrain for client 0 after 2 Newton steps" "$work/cgR"

# LiSSA: the recursion polls before each step; the 120th boundary falls in s_test's first repeat.
lissa=(--set 'influence.solver="lissa"' --set influence.lissa.depth=300 --set influence.lissa.repeats=2
  --set influence.vectors=false --set influence.retrain=false)
"$mpirun" -n 2 "$fluence" influence "$deck" --out "$work/lissaR" --quiet "${common[@]}" "${lissa[@]}" \
  >"$work/lissaR.log" 2>&1 || fail "uninterrupted LiSSA influence run"
stop_inside lissa 420 "stop inside the s_test solve: 419 iterations saved" \
  "resuming the s_test solve after 419 iterations" "$work/lissaR" "${lissa[@]}"

cli_summary
