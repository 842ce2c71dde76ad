#!/usr/bin/env bash
# `fluence audit DECK --collect DIR` (issue 39, the multi-run audit): 40 tiny private `fluence
# train` runs, seed k, the one target canary inserted (audit.canary_inclusion = "all") for even k
# and absent ("none") for odd k, as jobs/audit.sbatch runs them. With a large noise multiplier the
# Clopper-Pearson lower bound stays below the accountant's eps (0 here); with a tiny one the
# target separates perfectly and the bound is clearly positive (it can be no more than about 0.8
# with 10 evaluation runs a side at 95%), still below the accountant's (huge) eps. The collector's
# output is bitwise the same on 1 and 3 ranks; analysis/audit_report.py reads it; jobs/audit.sbatch
# runs the array's tasks and the collector outside SLURM. Refused, each
# naming the file: a run of another deck, a run without canaries, forced inclusion of 2 canaries,
# and too few runs on one side.
# Usage: cli_audit_runs.sh FLUENCE_BINARY SOURCE_DIR (one CTest entry per script: tests/CMakeLists.txt)
set -u
# shellcheck source=tests/app/cli_common.sh
source "$(dirname "$0")/cli_common.sh"

write_deck target <<'EOF2'
seed = 1
[data.synthetic]
rows = 400
numeric = 200
classes = 2
[partition]
clients = 4
[federation]
rounds = 3
batch_size = 16
[privacy]
mode = "dp-fedavg"
sampling_rate = 1.0
noise_multiplier = 3.0
clip = 0.5
adaptive_clip = false
[audit]
canaries = 1
EOF2

# runs FOLDER COUNT ARGS...: COUNT runs of the target deck into FOLDER/run_k (1 rank each).
runs() {
  local folder=$1 count=$2 k inclusion
  shift 2
  for ((k = 0; k < count; k++)); do
    if [ $((k % 2)) -eq 0 ]; then inclusion=all; else inclusion=none; fi
    "$mpirun" -n 1 "$fluence" train "$work/target.toml" --out "$folder/run_$k" --quiet \
      --set "seed=$((100 + k))" --set "audit.canary_inclusion=\"$inclusion\"" "$@" \
      >"$work/run.log" 2>&1 || { ok=0; tail -3 "$work/run.log" | sed 's/^/    /'; return; }
  done
}

check_audit() {  # check_audit RESULTS LOW HIGH: the bounds within [LOW, HIGH] and below the accountant's eps
  "$python" - "$@" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
low, high = float(sys.argv[2]), float(sys.argv[3])
g = f["/audit/multi_run"]
assert list(g["inserted"][...]) == [1 - k % 2 for k in range(40)]
assert list(g["seed"][...]) == list(range(100, 140))
names = [n.decode() if isinstance(n, bytes) else n for n in g["run"][...]]
assert names == [f"run_{k}/results.h5" for k in range(40)], names[:12]
assert f["/audit/confidence"][()] == 0.95 and g["delta"][()] == 1e-5
eps = g["epsilon"][()]
for name in ("all_iterates", "final"):
    a = g[name]
    lower = a["epsilon_lower"][()]
    assert low <= lower <= high and lower <= eps, (name, lower, eps)
    fpr, tpr = a["roc_fpr"][...], a["roc_tpr"][...]
    assert fpr[0] == 0 and tpr[0] == 0 and fpr[-1] == 1 and tpr[-1] == 1
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)
    assert 0 <= a["auc"][()] <= 1 and a["evaluation_runs_with"][()] == 10
print({name: (float(g[name]["epsilon_lower"][()]), float(g[name]["auc"][()])) for name in ("all_iterates", "final")}, "eps", eps)
PY
}

ok=1
runs "$work/noisy" 40
"$mpirun" -n 1 "$fluence" audit "$work/target.toml" --collect "$work/noisy" --out "$work/noisy/audit" \
  >"$work/collect1.log" 2>&1 || { ok=0; tail -3 "$work/collect1.log"; }
"$mpirun" -n 3 "$fluence" audit "$work/target.toml" --collect "$work/noisy" --out "$work/collect3" \
  >"$work/collect3.log" 2>&1 || { ok=0; tail -3 "$work/collect3.log"; }
if [ "$ok" -eq 1 ] && check_audit "$work/noisy/audit/results.h5" 0 0.5 &&
  compare_runs "$work/noisy/audit/results.h5" "$work/collect3/results.h5"; then
  pass "audit --collect: 40 runs at z = 3, lower bound below the accountant's eps; bitwise on 1 and 3 ranks"
else fail "audit --collect at z = 3"; fi

# A second collection skips the first's own output (noisy/audit/results.h5 lies below the folder).
if "$mpirun" -n 1 "$fluence" audit "$work/target.toml" --collect "$work/noisy" --out "$work/noisy/audit" \
  --force >"$work/again.log" 2>&1 && grep -q "multi-run audit of 40 runs" "$work/again.log"; then
  pass "audit --collect: the collector's own results.h5 below the folder is not a run"
else fail "audit --collect again"; fi

if "$python" "$source_dir/analysis/audit_report.py" "$work/noisy/audit/results.h5" --figures "$work/fig" \
  >"$work/report.txt" 2>"$work/report.err" && grep -q "Multi-run audit" "$work/report.txt" &&
  grep -q "final model (black box)" "$work/report.txt" && [ -s "$work/fig/audit_roc.png" ]; then
  pass "analysis/audit_report.py: the table and the ROC figure"
else fail "analysis/audit_report.py"; sed 's/^/    /' "$work/report.err" | tail -5; fi

# jobs/audit.sbatch outside SLURM: 8 array tasks (seed BASE+k, the bit by k's parity), then the
# collector into <root>/audit.
ok=1
for k in 0 1 2 3 4 5 6 7; do
  SLURM_ARRAY_TASK_ID=$k FLUENCE_DECK="$work/target.toml" FLUENCE_OUT="$work/job" FLUENCE="$fluence" \
    FLUENCE_SCRATCH= FLUENCE_LAUNCHER=mpirun MPIRUN="$mpirun" FLUENCE_ARGS="--set federation.rounds=2" \
    bash -c 'cd "$1" && bash jobs/audit.sbatch' _ "$source_dir" >"$work/job.log" 2>&1 ||
    { ok=0; tail -3 "$work/job.log"; }
done
FLUENCE_DECK="$work/target.toml" FLUENCE_OUT="$work/job" FLUENCE="$fluence" FLUENCE_SCRATCH= \
  FLUENCE_LAUNCHER=mpirun MPIRUN="$mpirun" FLUENCE_ARGS="--set federation.rounds=2" \
  bash -c 'cd "$1" && bash jobs/audit.sbatch collect' _ "$source_dir" >"$work/job.log" 2>&1 ||
  { ok=0; tail -3 "$work/job.log"; }
if [ "$ok" -eq 1 ] && "$python" - "$work/job/audit/results.h5" <<'PY'
import sys, h5py
g = h5py.File(sys.argv[1], "r")["/audit/multi_run"]
assert list(g["seed"][...]) == list(range(1000, 1008)) and list(g["inserted"][...]) == [1, 0] * 4
PY
then pass "jobs/audit.sbatch: 8 array tasks outside SLURM and the collector"
else fail "jobs/audit.sbatch"; fi

ok=1
runs "$work/leaky" 40 --set privacy.noise_multiplier=0.01
"$mpirun" -n 2 "$fluence" audit "$work/target.toml" --collect "$work/leaky" --out "$work/leaky_audit" \
  --set privacy.noise_multiplier=0.01 >"$work/leaky.log" 2>&1 || { ok=0; tail -3 "$work/leaky.log"; }
if [ "$ok" -eq 1 ] && check_audit "$work/leaky_audit/results.h5" 0.5 1.0; then
  pass "audit --collect: 40 runs at z = 0.01, the target separates: lower bound > 0.5"
else fail "audit --collect at z = 0.01"; fi

# Refusals, each naming the offending file.
COMMAND=audit expect_input_error collect_other_deck "leaky/run_0/results.h5: it was trained with another deck: privacy.noise_multiplier = 0.01 there, 3.0 in" \
  "$work/target.toml" --collect "$work/leaky"
mkdir -p "$work/mixed" && cp -r "$work/noisy/run_0" "$work/noisy/run_1" "$work/mixed/"
"$mpirun" -n 1 "$fluence" train "$work/target.toml" --out "$work/mixed/run_2" --quiet --set audit.canaries=0 \
  >"$work/run.log" 2>&1
COMMAND=audit expect_input_error collect_no_canaries "mixed/run_2/results.h5: it holds no canaries" \
  "$work/target.toml" --collect "$work/mixed"
mkdir -p "$work/two" && "$mpirun" -n 1 "$fluence" train "$work/target.toml" --out "$work/two/run_0" --quiet \
  --set audit.canaries=2 --set 'audit.canary_inclusion="all"' >"$work/run.log" 2>&1
COMMAND=audit expect_input_error collect_two_canaries "two/run_0/results.h5: audit.canary_inclusion = \"all\" with 2 canaries" \
  "$work/target.toml" --collect "$work/two" --set audit.canaries=2
rm -rf "$work/mixed/run_2"
COMMAND=audit expect_input_error collect_too_few "1 run(s) with the target canary and 1 without (of 2 runs found)" \
  "$work/target.toml" --collect "$work/mixed"
COMMAND=audit expect_input_error collect_no_folder "--collect $work/nowhere: no such directory" \
  "$work/target.toml" --collect "$work/nowhere"

cli_summary
