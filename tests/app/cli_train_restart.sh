#!/usr/bin/env bash
# `fluence train` checkpoints, restarts and stop signals (issue 6): restarts from several rounds and
# rank counts are bitwise identical, a stop signal to one rank, a corrupted newest checkpoint, and
# jobs/quickstart.sbatch stopped by USR1 and resumed.
# Usage: cli_train_restart.sh FLUENCE_BINARY SOURCE_DIR (one CTest entry per script: tests/CMakeLists.txt)
set -u
# shellcheck source=tests/app/cli_common.sh
source "$(dirname "$0")/cli_common.sh"

# --- checkpoints, restart, stop signals (issue 6, train) -------------------------------------------
write_small_deck ck 12 'polish = "newton"'
"$mpirun" -n 2 "$fluence" train "$work/ck.toml" --out "$work/ckA" --quiet >/dev/null 2>&1
"$mpirun" -n 2 "$fluence" train "$work/ck.toml" --out "$work/ckB" --quiet --set output.checkpoint_every=4 --set output.keep=3 >/dev/null 2>&1
ok=1
for ranks in 1 3; do
  for chk in 4 8; do
    rm -rf "$work/ckR" && mkdir -p "$work/ckR" && cp "$work/ckB/chk_$(printf %06d $chk).h5" "$work/ckR/"
    "$mpirun" -n "$ranks" "$fluence" train "$work/ck.toml" --out "$work/ckR" --quiet --restart latest >"$work/ckR.log" 2>&1 &&
      compare_runs "$work/ckA/results.h5" "$work/ckR/results.h5" || { ok=0; echo "    restart from round $chk on $ranks ranks differs"; }
  done
done
if [ "$ok" -eq 1 ] && [ "$(ls "$work/ckB"/chk_*.h5 | wc -l)" -eq 3 ]; then
  pass "train checkpoints (keep 3 of 4, 8, 12); restart from rounds 4 and 8 on 1 and 3 ranks is bitwise identical"
else fail "train checkpoint/restart"; fi
# Checkpoints written on 1 and on 3 ranks resume on 2 and on 1 (issue 6: 1->2, 2->3, 3->1).
ok=1
for pair in "1 2" "3 1"; do
  read -r from to <<<"$pair"
  rm -rf "$work/ckP" "$work/ckQ" && mkdir -p "$work/ckQ"
  "$mpirun" -n "$from" "$fluence" train "$work/ck.toml" --out "$work/ckP" --quiet --set output.checkpoint_every=6 >/dev/null 2>&1
  cp "$work/ckP/chk_000006.h5" "$work/ckQ/" 2>/dev/null
  "$mpirun" -n "$to" "$fluence" train "$work/ck.toml" --out "$work/ckQ" --quiet --restart latest >"$work/ckQ.log" 2>&1 &&
    compare_runs "$work/ckA/results.h5" "$work/ckQ/results.h5" || { ok=0; echo "    $from -> $to ranks differs"; }
done
if [ "$ok" -eq 1 ]; then pass "train checkpoints from 1 and 3 ranks resume on 2 and 1 ranks bitwise identically"
else fail "train restart across rank counts"; fi

# The server optimizer's moments and the accountants' state are part of the checkpoint: FedAdam
# with DP-FedAvg, accounted by RDP and PLD, restarted from round 6 on 3 ranks, ends bitwise as the
# uninterrupted run on 2 (a moment or an accountant left out of the checkpoint restarts from zero).
adam='--set federation.server_optimizer="adam" --set federation.server_learning_rate=0.05 --set privacy.mode="dp-fedavg" --set privacy.sampling_rate=0.5 --set privacy.noise_multiplier=0.8 --set privacy.adaptive_clip=false --set privacy.report_accountants=["pld"]'
rm -rf "$work/ckO" "$work/ckO6" && mkdir -p "$work/ckO6"
# shellcheck disable=SC2086
"$mpirun" -n 2 "$fluence" train "$work/ck.toml" --out "$work/ckO" --quiet --set federation.polish='"none"' $adam --set output.checkpoint_every=6 >"$work/ckO.log" 2>&1
cp "$work/ckO/chk_000006.h5" "$work/ckO6/" 2>/dev/null
# shellcheck disable=SC2086
if "$mpirun" -n 3 "$fluence" train "$work/ck.toml" --out "$work/ckO6" --quiet --set federation.polish='"none"' $adam --restart latest >"$work/ckO6.log" 2>&1 &&
  compare_runs "$work/ckO/results.h5" "$work/ckO6/results.h5" &&
  "$python" - "$work/ckO/results.h5" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
rdp, pld = (f[f"/privacy/accountants/{n}/epsilon"][...] for n in ("rdp", "pld"))
assert rdp.shape == pld.shape == (12,) and np.all(pld <= rdp) and np.all(np.diff(pld) > 0), (rdp, pld)
assert np.array_equal(f["/privacy/epsilon"][...], rdp) and f["/privacy/accountant"][()] == b"rdp"
PY
then pass "train: FedAdam + DP-FedAvg (RDP and PLD) restarted from round 6 on 3 ranks is bitwise the uninterrupted run"
else fail "train: server optimizer / accountant state across a restart"; tail -5 "$work/ckO6.log"; fi

# SCAFFOLD's control variates (the server's c and every client's c_i, issue 38) are part of the
# checkpoint: a run with a fixed cohort of half the clients (so that some c_i wait unsampled across
# the restart) and server momentum, restarted from round 6 on 3 ranks, ends bitwise as the
# uninterrupted run on 2; the checkpoint holds c and the 6 clients' c_i, and the run is not FedAvg's.
scaffold='--set federation.client_update="scaffold" --set federation.client_sampling="fixed" --set federation.sampling_rate=0.5 --set federation.server_optimizer="momentum" --set federation.polish="none"'
rm -rf "$work/ckC" "$work/ckC6" "$work/ckC0" && mkdir -p "$work/ckC6"
# shellcheck disable=SC2086
"$mpirun" -n 2 "$fluence" train "$work/ck.toml" --out "$work/ckC" --quiet $scaffold --set output.checkpoint_every=6 >"$work/ckC.log" 2>&1
# shellcheck disable=SC2086
"$mpirun" -n 2 "$fluence" train "$work/ck.toml" --out "$work/ckC0" --quiet $scaffold --set federation.client_update='"sgd"' >/dev/null 2>&1
cp "$work/ckC/chk_000006.h5" "$work/ckC6/" 2>/dev/null
# shellcheck disable=SC2086
if "$mpirun" -n 3 "$fluence" train "$work/ck.toml" --out "$work/ckC6" --quiet $scaffold --restart latest >"$work/ckC6.log" 2>&1 &&
  compare_runs "$work/ckC/results.h5" "$work/ckC6/results.h5" &&
  ! compare_runs "$work/ckC/results.h5" "$work/ckC0/results.h5" 2>/dev/null &&
  "$python" - "$work/ckC6/chk_000006.h5" "$work/ckC/results.h5" <<'PY'
import sys, h5py, numpy as np
found = []
h5py.File(sys.argv[1], "r").visititems(lambda n, o: found.append((n, o.shape)) if n.endswith("parts.client_update") else None)
p = h5py.File(sys.argv[2], "r")["/model/theta"].size
assert len(found) == 1 and found[0][1] == ((6 + 1) * p,), (found, p)
PY
then pass "train: SCAFFOLD (control variates c and c_i) restarted from round 6 on 3 ranks is bitwise the uninterrupted run on 2"
else fail "train: SCAFFOLD's control variates across a restart"; tail -5 "$work/ckC6.log"; fi

# A stop signal to one rank only (what a node-local signal or `kill` of one rank does): that rank's
# handler raises the stop flag, every rank agrees at the end of the round, a checkpoint is written
# and the run exits 4; `--restart latest` on another rank count ends exactly as the uninterrupted
# run. USR1, and HUP (what a rank gets when its terminal or ssh session goes away), which ended the
# rank at once without a checkpoint (exit 59 from mpirun) before it was a stop request (issue 41).
# The case must not pass or fail by timing, so:
#  - the signal goes to a rank process found as a child of mpirun (the wrapper execs mpirun, so $!
#    is mpirun) whose environment says OMPI_COMM_WORLD_RANK=1, never to mpirun itself (which would
#    forward it to every rank) or to a process that merely has a matching command line;
#  - it is sent only once the run is in its rounds (its first checkpoint, at round 100, exists: the
#    handlers are installed before set-up), waiting for that up to 120 s of wall time, not a count
#    of polls that a loaded machine stretches; 20,000 rounds (about 6 s) leave the signal long
#    before the last round;
#  - the exit code must be 4 exactly: 0 would mean the signal was lost or came after the last round
#    (the log's last lines and the rank signalled are printed then).
"$mpirun" -n 2 "$fluence" train "$work/ck.toml" --out "$work/ckS0" --quiet --set federation.rounds=20000 >/dev/null 2>&1
for signal in USR1 HUP; do
  out="$work/ckS$signal"
  "$mpirun" -n 2 "$fluence" train "$work/ck.toml" --out "$out" --quiet --set federation.rounds=20000 \
    --set output.checkpoint_every=100 --set output.keep=1 >"$out.log" 2>&1 &
  launcher=$!
  # A checkpoint file (or its .partial while being written) is looked for once per poll and what
  # was seen is remembered: with output.keep = 1 a checkpoint every ~30 ms replaces the previous
  # one, so a second look a moment later can find none (it failed 3 runs in 4 that way on a loaded
  # machine).
  deadline=$((SECONDS + 120))
  in_rounds=no
  until [ "$SECONDS" -ge "$deadline" ]; do
    if compgen -G "$out/chk_*.h5*" >/dev/null; then in_rounds=yes && break; fi
    sleep 0.05
  done
  rank_pid=""
  for child in $(pgrep -P "$launcher"); do
    if tr '\0' '\n' <"/proc/$child/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then
      rank_pid=$child
    fi
  done
  signalled=no
  if [ "$in_rounds" = yes ] && [ -n "$rank_pid" ] && kill "-$signal" "$rank_pid"; then
    signalled="rank 1 (pid $rank_pid)"
  fi
  wait "$launcher"
  code=$?
  if [ "$signalled" != no ] && [ "$code" -eq 4 ] && grep -q "stop signal received: checkpoint" "$out.log" &&
    ls "$out"/chk_*.h5 >/dev/null 2>&1 && [ ! -e "$out/results.h5" ] &&
    "$mpirun" -n 3 "$fluence" train "$work/ck.toml" --out "$out" --quiet --set federation.rounds=20000 --restart latest >/dev/null 2>&1 &&
    compare_runs "$work/ckS0/results.h5" "$out/results.h5"; then
    pass "SIG$signal to rank 1 only: checkpoint, exit 4, restart latest on 3 ranks is bitwise identical"
  else
    fail "SIG$signal to one rank (signalled: $signalled; exit $code, expected 4)"
    tail -3 "$out.log" | sed 's/^/    /'
  fi
done

# A corrupted newest checkpoint: latest falls back to the previous valid one (the refused
# checkpoints are cases of cli_bad_inputs.sh).
rm -rf "$work/ckL" && mkdir -p "$work/ckL" && cp "$work/ckB"/chk_*.h5 "$work/ckL/" && truncate -s 1000 "$work/ckL/chk_000012.h5"
if "$mpirun" -n 2 "$fluence" train "$work/ck.toml" --out "$work/ckL" --quiet --restart latest >"$work/ckL.log" 2>&1 &&
  grep -q "skipping .*chk_000012.h5" "$work/ckL.log" && grep -q "restart: .*chk_000008.h5" "$work/ckL.log" &&
  compare_runs "$work/ckA/results.h5" "$work/ckL/results.h5"; then
  pass "restart latest skips a corrupted newest checkpoint and says so"
else fail "restart latest fallback"; tail -3 "$work/ckL.log" | sed 's/^/    /'; fi

# jobs/quickstart.sbatch outside SLURM: USR1 to the batch shell reaches the ranks through mpirun,
# they checkpoint and exit 4; running the script again resumes and ends as the uninterrupted run.
"$mpirun" -n 2 "$fluence" train "$source_dir/inputs/quickstart.toml" --out "$work/jobA" --quiet \
  --set federation.rounds=6000 >/dev/null 2>&1
(cd "$source_dir" && FLUENCE_LAUNCHER=mpirun MPIRUN="$mpirun" FLUENCE="$fluence" FLUENCE_OUT="$work/jobB" \
  FLUENCE_ARGS="--quiet --set federation.rounds=6000" bash jobs/quickstart.sbatch >"$work/job1.log" 2>&1) &
job=$!
for _ in $(seq 500); do ls "$work/jobB"/chk_*.h5 >/dev/null 2>&1 && break; sleep 0.02; done
shell=$(pgrep -f "bash jobs/quickstart.sbatch" | head -1)
[ -n "$shell" ] && kill -USR1 "$shell"
wait "$job"
first=$?
(cd "$source_dir" && FLUENCE_LAUNCHER=mpirun MPIRUN="$mpirun" FLUENCE="$fluence" FLUENCE_OUT="$work/jobB" \
  FLUENCE_ARGS="--quiet --set federation.rounds=6000" bash jobs/quickstart.sbatch >"$work/job2.log" 2>&1)
second=$?
if [ "$first" -eq 4 ] && [ "$second" -eq 0 ] && grep -q "restart: " "$work/job2.log" &&
  compare_runs "$work/jobA/results.h5" "$work/jobB/results.h5"; then
  pass "jobs/quickstart.sbatch: USR1 -> checkpoint and exit 4; rerun resumes to the uninterrupted result"
else fail "quickstart job stop/resume (exits $first, $second)"; tail -3 "$work/job1.log" "$work/job2.log" | sed 's/^/    /'; fi
# An unknown launcher stops a job script before it starts anything: exit 2, one line naming the
# variable, its value and the launchers there are, no output directory.
(cd "$source_dir" && FLUENCE_LAUNCHER=mpiexec FLUENCE="$fluence" FLUENCE_OUT="$work/jobL" \
  bash jobs/quickstart.sbatch >"$work/jobL.out" 2>"$work/jobL.err")
code=$?
if [ "$code" -eq 2 ] && [ "$(wc -l <"$work/jobL.err")" -eq 1 ] &&
  grep -q "FLUENCE_LAUNCHER='mpiexec' is not a launcher: use srun or mpirun" "$work/jobL.err" &&
  [ ! -e "$work/jobL" ]; then
  pass "jobs/quickstart.sbatch with FLUENCE_LAUNCHER=mpiexec: exit 2, one line naming it"
else fail "unknown FLUENCE_LAUNCHER (exit $code)"; sed 's/^/    /' "$work/jobL.err"; fi

cli_summary
