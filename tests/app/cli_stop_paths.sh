#!/usr/bin/env bash
# Stop signals through the launcher (issue 24; docs/operations.md "Stop signals"): what `scancel`,
# a time limit and an interactive Ctrl-C do to a run started with mpirun.
#  - TERM and INT to mpirun while rank 0 prints a progress line every round (Open MPI 4.1's mpirun
#    stops reading the ranks' output at once, passes the signal on a second later and kills the
#    ranks a second after that): a checkpoint is written, no results.h5, and `--restart latest` on
#    3 ranks ends bitwise as the uninterrupted run. mpirun itself exits 1 (its own abort status).
#  - TERM to mpirun in the middle of a round that lasts longer than mpirun's grace, FedAvg and
#    DP-FedAvg: the round is given up, the previous round's checkpoint is written, and the resume is
#    bitwise identical.
#  - USR1 to mpirun (forwarded, no kill): exit 4.
# Called as cli_stop_paths.sh FLUENCE_BINARY SOURCE_DIR.
set -u
source "$(dirname "$0")/cli_common.sh"

quickstart="$source_dir/inputs/quickstart.toml"
fast=(--set federation.rounds=3000 --set 'federation.polish="none"' --set output.checkpoint_every=100000)

# signal_launcher SIGNAL OUT WAIT_FOR DELAY ARGS...: starts `fluence train ARGS --out OUT` on 2 ranks
# (not quiet: a line per round), waits until the log matches WAIT_FOR, sleeps DELAY, sends SIGNAL to
# mpirun and sets `code` to mpirun's exit status.
signal_launcher() {
  local signal=$1 out=$2 wait_for=$3 delay=$4
  shift 4
  rm -rf "$out"
  # The wrapper execs mpirun, so $! is mpirun's pid.
  "$mpirun" -n 2 "$fluence" train "$@" --out "$out" >"$out.log" 2>&1 &
  local launcher=$! _
  for _ in $(seq 600); do grep -q -- "$wait_for" "$out.log" 2>/dev/null && break; sleep 0.05; done
  sleep "$delay"
  kill "-$signal" "$launcher"
  wait "$launcher"
  code=$?
}

# resumes_bitwise OUT REFERENCE ARGS...: `--restart latest` in OUT on 3 ranks equals REFERENCE.
resumes_bitwise() {
  local out=$1 reference=$2
  shift 2
  "$mpirun" -n 3 "$fluence" train "$@" --out "$out" --quiet --restart latest >"$out.resume.log" 2>&1 &&
    compare_runs "$reference/results.h5" "$out/results.h5"
}

"$mpirun" -n 2 "$fluence" train "$quickstart" "${fast[@]}" --out "$work/fastR" --quiet >"$work/fastR.log" 2>&1 ||
  fail "uninterrupted quick-start run"
for signal in TERM INT; do
  out="$work/fast$signal"
  signal_launcher "$signal" "$out" "round   200/" 0 "$quickstart" "${fast[@]}"
  if ls "$out"/chk_*.h5 >/dev/null 2>&1 && [ ! -e "$out/results.h5" ] &&
    resumes_bitwise "$out" "$work/fastR" "$quickstart" "${fast[@]}"; then
    pass "SIG$signal to mpirun with a line per round: checkpoint $(basename "$(ls "$out"/chk_*.h5 | tail -1)"), mpirun exit $code, resume on 3 ranks bitwise identical"
  else
    fail "SIG$signal to mpirun with a line per round (mpirun exit $code)"
    tail -3 "$out.log" | sed 's/^/    /'
  fi
done

# Rounds of about 3 s on 2 ranks (a wide MLP), no checkpoint due: the only checkpoint can come from
# the stop. TERM half a second after round 1's line (printed when round 2 ends: the overlapped
# evaluation) falls into round 3.
slow=("$quickstart" --set federation.rounds=3 --set 'model.type="mlp"' --set 'model.hidden=[800,800]'
  --set 'federation.polish="none"' --set federation.local_epochs=6 --set output.checkpoint_every=100)
# stops_within_long_round NAME WHAT ARGS...: an uninterrupted run of ARGS, then the same run with
# TERM to mpirun half a second after round 1's line: round 3 is given up, checkpoint 2 is the only
# one, no results.h5, and the resume on 3 ranks is bitwise identical.
stops_within_long_round() {
  local name=$1 what=$2
  shift 2
  "$mpirun" -n 2 "$fluence" train "$@" --out "$work/${name}R" --quiet >"$work/${name}R.log" 2>&1 ||
    fail "uninterrupted run with $what"
  local out="$work/${name}T"
  signal_launcher TERM "$out" "round     1/3" 0.5 "$@"
  if [ -e "$out/chk_000002.h5" ] && [ ! -e "$out/chk_000003.h5" ] && [ ! -e "$out/results.h5" ] &&
    resumes_bitwise "$out" "$work/${name}R" "$@"; then
    pass "SIGTERM to mpirun within $what longer than its grace: round 3 given up, checkpoint 2, resume bitwise identical"
  else
    fail "SIGTERM within $what (mpirun exit $code; checkpoints: $(ls "$out" | tr '\n' ' '))"
    tail -3 "$out.log" | sed 's/^/    /'
  fi
}
stops_within_long_round slow "a FedAvg round" "${slow[@]}"
# DP-FedAvg (adaptive clipping, every client sampled): the private round in progress is given up
# with the clipping norm, the accountant and the histories untouched.
stops_within_long_round private "a DP-FedAvg round" "${slow[@]}" --set 'privacy.mode="dp-fedavg"' \
  --set privacy.noise_multiplier=1.0 --set privacy.count_noise=1.0

signal_launcher USR1 "$work/fastU" "round   200/" 0 "$quickstart" "${fast[@]}"
if [ "$code" -eq 4 ] && ls "$work/fastU"/chk_*.h5 >/dev/null 2>&1 &&
  resumes_bitwise "$work/fastU" "$work/fastR" "$quickstart" "${fast[@]}"; then
  pass "SIGUSR1 to mpirun: forwarded to the ranks, checkpoint, exit 4, resume bitwise identical"
else
  fail "SIGUSR1 to mpirun (exit $code)"
  tail -3 "$work/fastU.log" | sed 's/^/    /'
fi

# A stop inside a long unit (issue 41; docs/operations.md "Stops inside a unit"): TERM to mpirun
# while `influence` solves s_test by CG, each iteration a federated Hessian product over 150,000
# training rows x 2,130 parameters, so that the solve (50 iterations) lasts about 5.5 s on an idle
# machine (26 s at load 15), against the second or so that mpirun takes to pass the signal on (the
# kill goes 0.3 s after the model's checkpoint, written just before s_test). The ranks stop the
# solve at the next iteration and checkpoint its state (/state/influence.partial; mpirun no longer
# relays their output), and `--restart latest` on 3 ranks continues it: bitwise the uninterrupted
# run. (With 1,130 parameters the 2.5-s solve sometimes ended before the signal reached the ranks.)
big=("$source_dir/inputs/influence_synthetic.toml" --set data.synthetic.rows=150000
  --set data.synthetic.numeric=200 --set data.synthetic.classes=10 --set federation.rounds=1
  --set 'federation.polish="none"' --set influence.spectrum=false --set influence.vectors=false
  --set influence.retrain=false --set output.checkpoint_every=1)
"$mpirun" -n 2 "$fluence" influence "${big[@]}" --out "$work/bigR" --quiet >"$work/bigR.log" 2>&1 ||
  fail "uninterrupted influence run with a long s_test"
out="$work/bigT"
"$mpirun" -n 2 "$fluence" influence "${big[@]}" --out "$out" --quiet >"$out.log" 2>&1 &
launcher=$!
# The model's checkpoint (rounds trained + 1 = 2) is written just before s_test.
deadline=$((SECONDS + 120))
until [ -e "$out/chk_000002.h5" ] || [ "$SECONDS" -ge "$deadline" ]; do sleep 0.05; done
sleep 0.3
kill -TERM "$launcher"
wait "$launcher"
code=$?
last=$(ls "$out"/chk_*.h5 2>/dev/null | tail -1)
if [ -n "$last" ] && [ ! -e "$out/results.h5" ] &&
  "$python" -c "import h5py,sys; f=h5py.File(sys.argv[1],'r'); assert f['state/influence.partial'][0] == 1 and f['state/influence.partial_state'][0] > 0" "$last" &&
  "$mpirun" -n 3 "$fluence" influence "${big[@]}" --out "$out" --restart latest >"$out.resume.log" 2>&1 &&
  grep -q "resuming the s_test solve after" "$out.resume.log" &&
  compare_runs "$work/bigR/results.h5" "$out/results.h5"; then
  pass "SIGTERM to mpirun inside influence's s_test solve: $(grep -o "resuming the s_test solve after [0-9]* iterations" "$out.resume.log"), bitwise identical on 3 ranks"
else
  fail "SIGTERM to mpirun inside influence's s_test solve (mpirun exit $code; checkpoints: $(ls "$out" | tr '\n' ' '))"
  tail -3 "$out.log" "$out.resume.log" 2>/dev/null | sed 's/^/    /'
fi

cli_summary
