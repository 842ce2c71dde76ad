#!/usr/bin/env bash
# The output directory belongs to one run (issue 24; docs/operations.md "The output directory"):
#  - a second run into the directory of a live run is refused (exit 2, the holder named), and
#    the first run is not disturbed;
#  - a run killed with SIGKILL leaves no stale lock: the next run in its directory starts;
#  - a finished results.h5 is not overwritten without --force, and is with it.
# Called as cli_output_directory.sh FLUENCE_BINARY SOURCE_DIR.
set -u
source "$(dirname "$0")/cli_common.sh"

quickstart="$source_dir/inputs/quickstart.toml"
long=(--set federation.rounds=100000 --set 'federation.polish="none"' --quiet)
short=(--set federation.rounds=3 --quiet)

# A live run holds the directory.
"$mpirun" -n 2 "$fluence" train "$quickstart" "${long[@]}" --out "$work/live" >"$work/live.log" 2>&1 &
live=$!
for _ in $(seq 400); do grep -q "pid" "$work/live/.fluence.lock" 2>/dev/null && break; sleep 0.05; done
"$mpirun" -n 2 "$fluence" train "$quickstart" "${short[@]}" --out "$work/live" >"$work/second.log" 2>&1
code=$?
if [ "$code" -eq 2 ] && [ "$(grep -c "output directory '$work/live' is in use by another fluence run (pid [0-9]* on host" "$work/second.log")" -eq 1 ] &&
  kill -0 "$live" 2>/dev/null; then
  pass "a second run into a live run's directory: exit 2, the holder named, the first run goes on"
else
  fail "second run into a live directory (exit $code)"
  sed 's/^/    /' "$work/second.log" | head -5
fi

# SIGKILL to the live run's ranks and launcher: the kernel drops the lock with the process.
pkill -KILL -f "fluence train $quickstart .*--out $work/live\$" 2>/dev/null
kill -KILL "$live" 2>/dev/null
wait "$live" 2>/dev/null
"$mpirun" -n 2 "$fluence" train "$quickstart" "${short[@]}" --out "$work/live" >"$work/after.log" 2>&1
code=$?
if [ "$code" -eq 0 ] && [ -e "$work/live/results.h5" ]; then
  pass "after a SIGKILL of the holder, the next run in its directory starts (no stale lock)"
else
  fail "run after a killed holder (exit $code)"
  sed 's/^/    /' "$work/after.log" | head -5
fi

# A finished results.h5: refused without --force, replaced with it.
before=$(stat -c %Y.%s "$work/live/results.h5")
sleep 1
"$mpirun" -n 2 "$fluence" train "$quickstart" "${short[@]}" --out "$work/live" >"$work/again.log" 2>&1
code=$?
if [ "$code" -eq 2 ] && grep -q "already holds a finished run's results.h5: give this run another --out, or pass --force" "$work/again.log" &&
  [ "$(stat -c %Y.%s "$work/live/results.h5")" = "$before" ]; then
  pass "a finished results.h5 is refused without --force (exit 2, file untouched)"
else
  fail "finished results.h5 without --force (exit $code)"
  sed 's/^/    /' "$work/again.log" | head -5
fi
"$mpirun" -n 2 "$fluence" train "$quickstart" "${short[@]}" --out "$work/live" --force >"$work/force.log" 2>&1
code=$?
if [ "$code" -eq 0 ] && [ "$(stat -c %Y.%s "$work/live/results.h5")" != "$before" ]; then
  pass "--force overwrites a finished results.h5"
else
  fail "--force (exit $code)"
  sed 's/^/    /' "$work/force.log" | head -5
fi

cli_summary
