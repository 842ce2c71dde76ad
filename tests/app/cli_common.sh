# Shared by the CLI test scripts (tests/app/cli_*.sh, called as SCRIPT FLUENCE_BINARY SOURCE_DIR,
# which they source this with): the paths (fluence, source_dir, mpirun, python), a work folder
# removed on exit, counters, the bad-input check, deck writing, runs at several rank counts, the
# bitwise comparison of two results files, the -log_view stage check and the stop/resume check.
# Each script ends with cli_summary.

fluence=$1
source_dir=$2
mpirun="$source_dir/scripts/mpirun.sh"
python=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

passed=0
failed=0

pass() { passed=$((passed + 1)); echo "ok: $1"; }
fail() { failed=$((failed + 1)); echo "FAILED: $1"; }

# expect_input_error NAME EXPECTED_TEXT DECK [ARGS...]: runs `train` (or $COMMAND) on 2 ranks and
# checks exit code 2, that stderr names the problem exactly once, that no results.h5 was written
# and that an output directory that did not exist before does not exist after.
expect_input_error() {
  local name=$1 expected=$2 deck=$3
  shift 3
  local out=${OUT_DIR:-"$work/out_$name"}
  local existed=0
  [ -e "$out" ] && existed=1
  "$mpirun" -n 2 "$fluence" "${COMMAND:-train}" "$deck" --out "$out" "$@" >"$work/stdout" 2>"$work/stderr"
  local code=$?
  local count
  count=$(grep -c -F -- "$expected" "$work/stderr")
  # A refused run leaves no results and no output directory it created (issue 24).
  if [ "$code" -eq 2 ] && [ "$count" -eq 1 ] && [ ! -e "$out/results.h5" ] &&
    { [ "$existed" -eq 1 ] || [ ! -e "$out" ]; }; then
    pass "bad input: $name"
  else
    fail "bad input: $name (exit $code, message seen $count times, expected '$expected')"
    sed 's/^/    /' "$work/stderr" | head -5
  fi
}

write_deck() { cat >"$work/$1.toml"; }

# write_small_deck NAME ROUNDS [LINE...]: $work/NAME.toml, a synthetic federation of 1,500 rows over
# 6 clients trained for ROUNDS rounds of batch 16, each LINE added to [federation] (the checkpoint
# and bad-input scripts' deck: seconds a run).
write_small_deck() {
  local name=$1 rounds=$2
  shift 2
  {
    printf 'seed = 6\n[data.synthetic]\nrows = 1500\nnumeric = 3\ncategorical = [3]\n'
    printf '[partition]\nclients = 6\n[federation]\nrounds = %s\nbatch_size = 16\n' "$rounds"
    [ $# -eq 0 ] || printf '%s\n' "$@"
  } | write_deck "$name"
}

# run_on_ranks PREFIX COMMAND DECK "RANKS" ARGS...: runs the command on each rank count into
# $work/PREFIX<ranks> (quiet, log beside it); sets ok=0 and shows the log's tail on a failure.
run_on_ranks() {
  local prefix=$1 command=$2 deck=$3 counts=$4 ranks
  shift 4
  for ranks in $counts; do
    "$mpirun" -n "$ranks" "$fluence" "$command" "$deck" --out "$work/$prefix$ranks" --quiet "$@" \
      >"$work/$prefix$ranks.log" 2>&1 || { ok=0; tail -3 "$work/$prefix$ranks.log" | sed 's/^/    /'; }
  done
}

compare_runs() {  # the same datasets, each but wall times, timings, the run's costs and the rank layout identical
  "$python" - "$1" "$2" <<'PY'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
names = {}
for f in (a, b):
    names[f] = []
    f.visititems(lambda n, o: names[f].append(n) if isinstance(o, h5py.Dataset) else None)
assert sorted(names[a]) == sorted(names[b]), set(names[a]) ^ set(names[b])
for name in names[a]:
    if "wall_time" in name or "timing" in name or name.startswith("fldp/time_") or name == "clients/rank" \
            or name in ("metrics/setup_time_s", "metrics/peak_memory_bytes", "metrics/rank", "metrics/host"):
        continue
    x, y = a[name][()], b[name][()]
    assert np.array_equal(x, y, equal_nan=np.issubdtype(np.asarray(x).dtype, np.floating)), name
PY
}

# check_log_stages NAME LOG USED: the -log_view report in LOG ("Summary of Stages", which lists
# the stages a run pushed) shows time in exactly the comma-separated USED ones of fluence's six
# phases (core/log_stage.hpp), so each phase is a stage and runs where its work is.
check_log_stages() {
  local name=$1 log=$2 used=$3
  if "$python" - "$log" "$used" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
# " 1:          Set-up: 1.2345e-02  12.3%  ..." in the "Summary of Stages" table
times = {m.group(1): float(m.group(2))
         for m in re.finditer(r"^\s*\d+:\s+([A-Za-z -]+?):\s+([0-9.eE+-]+)\s+[0-9.]+%", text, re.M)}
stages = {"Set-up", "Training", "IHVP", "Retraining", "Votes", "Output"}
used = {stage for stage in stages if times.get(stage, 0.0) > 0}
assert used == set(sys.argv[2].split(",")), f"stages in the report: {times}"
PY
  then
    pass "$name: -log_view reports the phases as stages, time in $used"
  else
    fail "$name: -log_view stages"
  fi
}

# --- checkpoints of the sweeps (issue 6: whatif, fldp, influence) ----------------------------------
# Each: a 2-rank run stopped by SIGUSR1 on its last rank at a unit boundary (the hidden
# --test-stop-at N raises it there, so the stop point is deterministic) checkpoints and exits 4;
# `--restart latest` on 3 ranks, and a restart from an early checkpoint on 1 rank, end bitwise as
# the uninterrupted 2-rank runs above (whatif2, fldp2, inf2).
# sweep_resume NAME COMMAND DECK REFERENCE STOP_AT EARLY ARGS...
sweep_resume() {
  local name=$1 command=$2 deck=$3 reference=$4 stop_at=$5 early=$6
  shift 6
  local out="$work/${name}S" code
  "$mpirun" -n 2 "$fluence" "$command" "$deck" --out "$out" --quiet "$@" --set output.checkpoint_every=4 \
    --set output.keep=100 --test-stop-at "$stop_at" >"$work/${name}S.log" 2>&1
  code=$?
  rm -rf "$work/${name}E" && mkdir -p "$work/${name}E" && cp "$out/chk_$(printf %06d "$early").h5" "$work/${name}E/" 2>/dev/null
  if [ "$code" -eq 4 ] && [ -e "$out/chk_$(printf %06d "$stop_at").h5" ] && [ ! -e "$out/results.h5" ] &&
    grep -q "stop signal received: checkpoint .*chk_$(printf %06d "$stop_at").h5 written after" "$work/${name}S.log" &&
    "$mpirun" -n 3 "$fluence" "$command" "$deck" --out "$out" --quiet "$@" --restart latest >"$work/${name}R.log" 2>&1 &&
    compare_runs "$reference" "$out/results.h5" &&
    "$mpirun" -n 1 "$fluence" "$command" "$deck" --out "$work/${name}E" --quiet "$@" --restart latest >"$work/${name}E.log" 2>&1 &&
    compare_runs "$reference" "$work/${name}E/results.h5"; then
    pass "$command: stopped at checkpoint $stop_at (exit 4), resumed on 3 ranks and from checkpoint $early on 1 rank: bitwise identical"
  else
    fail "$command stop/resume (exit $code)"
    tail -3 "$work/${name}S.log" "$work/${name}R.log" "$work/${name}E.log" 2>/dev/null | sed 's/^/    /'
  fi
}

# write_idx_images DIR: a small gzip/plain IDX image set (9 x 9 images of 4 classes, 2,400 training
# and 1,100 test rows: a blob whose place and size depend on the label, 5% salt noise).
write_idx_images() {
"$python" - "$1" <<'PY'
import gzip, os, struct, sys
import numpy as np
directory = sys.argv[1]
os.makedirs(directory, exist_ok=True)
rng = np.random.default_rng(3)
def write(name, array, compress):
    header = struct.pack(">I", 0x0800 | array.ndim) + b"".join(struct.pack(">I", d) for d in array.shape)
    opener = gzip.open if compress else open
    with opener(os.path.join(directory, name + (".gz" if compress else "")), "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())
for part, rows in (("train", 2400), ("t10k", 1100)):
    labels = rng.integers(0, 4, rows)
    images = np.zeros((rows, 9, 9))
    for i, label in enumerate(labels):  # a blob whose place and size depend on the label
        r, c = 1 + label, 2 + (label % 2) * 2
        images[i, r:r + 4, c:c + 3 + label % 3] = rng.integers(40, 256, (4, 3 + label % 3))
    images[rng.random(images.shape) < 0.05] = 255
    write(f"{part}-images-idx3-ubyte", images, part == "train")
    write(f"{part}-labels-idx1-ubyte", labels, False)
PY
}

cli_summary() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}

# stop_inside_unit COMMAND DECK NAME K UNIT REFERENCE ARGS...: a stop inside a long unit of a sweep
# (docs/operations.md "Stops inside a unit"). `COMMAND DECK ARGS` on 2 ranks, stopped at the last
# rank's K-th boundary inside a unit (the hidden --test-stop-inside K), must exit 4 without results,
# log "stop inside U: N iterations|block iterations|Newton steps saved" (U matching the extended
# regex UNIT, N > 0) and leave the partial unit in its last checkpoint (/state/COMMAND.partial
# with its state, or the datasets PARTIAL_DATASETS names, and /state/sweep.partial); the restart on 3 ranks must log "resuming U after N ..." for that same unit
# and count (a restart that redid the unit from its start would give the same bits, so the message
# and the checkpoint's datasets are what show the partial state was used) and equal REFERENCE (the
# uninterrupted 2-rank run's directory) bitwise.
stop_inside_unit() {
  local command=$1 deck=$2 name=$3 k=$4 unit=$5 reference=$6
  shift 6
  local out="$work/$name" code saved resume checkpoint
  "$mpirun" -n 2 "$fluence" "$command" "$deck" --out "$out" --quiet "$@" --test-stop-inside "$k" \
    >"$out.log" 2>&1
  code=$?
  saved=$(grep -Eo -- "stop inside ($unit): [1-9][0-9]* (block iterations|iterations|Newton steps|rounds) saved" \
    "$out.log" | head -1)
  resume=$(sed -E 's/^stop inside (.*): ([0-9]+ [a-zA-Z ]+) saved$/resuming \1 after \2/' <<<"$saved")
  checkpoint=$(ls "$out"/chk_*.h5 2>/dev/null | tail -1)
  if [ "$code" -eq 4 ] && [ -n "$saved" ] && [ ! -e "$out/results.h5" ] && [ -n "$checkpoint" ] &&
    "$python" -c "import h5py,sys; f=h5py.File(sys.argv[1],'r'); d=[f'state/{sys.argv[2]}.{n}' for n in sys.argv[3:]]; assert all(n in f and f[n].size > 0 for n in d) and 'state/sweep.partial' in f" \
      "$checkpoint" "$command" ${PARTIAL_DATASETS:-partial partial_state} &&
    "$mpirun" -n 3 "$fluence" "$command" "$deck" --out "$out" "$@" --restart latest \
      >"$out.resume.log" 2>&1 &&
    grep -Fq -- "$resume" "$out.resume.log" &&
    compare_runs "$reference/results.h5" "$out/results.h5"; then
    pass "$command: $saved (boundary $k); $resume on 3 ranks, bitwise identical"
  else
    fail "$command: stop inside $name (boundary $k, exit $code, '$saved')"
    tail -4 "$out.log" "$out.resume.log" 2>/dev/null | sed 's/^/    /'
  fi
}
