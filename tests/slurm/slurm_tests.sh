#!/usr/bin/env bash
# The job scripts under a real SLURM: a one-node cluster (slurm-wlm + munge, both installed by
# scripts/install-deps.sh) is started in a temporary directory with its own slurm.conf, munge key,
# socket and ports, so that it touches no system-wide state; the EXIT trap cancels its jobs, stops
# the daemons by their PID files and removes the directory, also when a check fails. The jobs
# launch their ranks with srun (`srun --mpi=pmix`, jobs/lib/launch.sh) unless a check says
# otherwise, and run side by side (--oversubscribe) so that requeue delays overlap. Then:
#   1. jobs/quickstart.sbatch runs to completion with srun, the job's memory and --cpus-per-task
#      declared, writing under FLUENCE_SCRATCH (results.h5 with /model/theta, on SLURM_NTASKS
#      ranks);
#   2. jobs/sweep.sbatch as a 2-task array over jobs/sweeps/quickstart_rounds.txt, launched with
#      mpirun (FLUENCE_LAUNCHER=mpirun), writing under SCRATCH;
#   3. jobs/quickstart.sbatch with more rounds gets USR1 (`scancel --signal=USR1 --batch`, what
#      --signal=B:USR1@<s> sends before the time limit; SLURM's minimum limit is a minute and its
#      signal timing is coarse, so the test signals by hand); the batch shell forwards it to srun,
#      srun to every task: the tasks exit 4, the job requeues itself, resumes from --restart
#      latest and ends bitwise equal to an uninterrupted run outside SLURM;
#   4. the same job, but TERM to every task of its step (`scancel --signal=TERM <job>`, what
#      SLURM sends the tasks on scancel and at the time limit): checkpoint, exit 4, requeue,
#      bitwise resume;
#   5. a job with rounds of several seconds cancelled with scancel inside a round (TERM to every
#      process of the job, srun and the batch shell included, SIGKILL after KillWait): a
#      checkpoint of the last finished round, every task exits 4, the job ends CANCELLED without
#      requeueing itself, and the job resubmitted into the same directory resumes bitwise;
#   6. outside SLURM: scripts/run_feo2_experiments.sh run through jobs/lib/requeue.sh stops with
#      exit 4 on USR1 to the job shell, and the rerun resumes the run from its checkpoint.
# A missing SLURM or munge, or daemons that do not come up, fail the test (never a skip).
# Usage: slurm_tests.sh FLUENCE_BINARY SOURCE_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: slurm_tests.sh FLUENCE_BINARY SOURCE_DIR" >&2; exit 2; }
fluence=$(realpath "$1")
source_dir=$(realpath "$2")
mpirun="$source_dir/scripts/mpirun.sh"
python=/usr/bin/python3
export PATH="$PATH:/usr/sbin:/sbin"
start_time=$SECONDS
deadline=$((SECONDS + 330)) # below the CTest TIMEOUT, so that the EXIT trap always gets to run
# Only what a check sets: a site's scratch directory must not move the outputs.
unset FLUENCE_SCRATCH SCRATCH FLUENCE_LAUNCHER SRUN
passed=0
failed=0

pass() { passed=$((passed + 1)); echo "ok: $1 ($((SECONDS - start_time)) s)"; }
fail() { failed=$((failed + 1)); echo "FAILED: $1"; }
# die MESSAGE: the cluster itself does not work; show its logs and stop
die() {
  echo "FAILED: $*" >&2
  show_logs
  exit 1
}
show_logs() {
  local log
  for log in "$work"/*.log; do
    [ -f "$log" ] || continue
    echo "--- $(basename "$log") (last lines)" >&2
    tail -n 15 "$log" | sed 's/^/    /' >&2
  done
}

for tool in munged mungekey slurmctld slurmd sbatch scontrol squeue scancel sinfo; do
  command -v "$tool" >/dev/null ||
    { echo "FAILED: $tool is not installed (slurm-wlm, munge: bash scripts/install-deps.sh)" >&2; exit 1; }
done
[ -x "$fluence" ] || { echo "FAILED: no executable $fluence" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/fluence-slurm.XXXXXX")
export SLURM_CONF="$work/slurm.conf"

# pid_of NAME: the PID in $work/NAME.pid ("" when there is none)
pid_of() { cat "$work/$1.pid" 2>/dev/null || true; }

# stop_daemon NAME: TERM the daemon of $work/NAME.pid, KILL it after 10 s
stop_daemon() {
  local pid
  pid=$(pid_of "$1")
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

cleanup() {
  local status=$?
  if [ -n "$(pid_of slurmctld)" ]; then
    # the jobs first: their processes belong to slurmstepd, which outlives slurmd
    timeout 15 scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 60); do
      [ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.25
    done
  fi
  stop_daemon slurmd
  stop_daemon slurmctld
  stop_daemon munged
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the cluster ------------------------------------------------------------------------------
# Two free TCP ports for slurmctld and slurmd (the defaults 6817/6818 may be taken by a cluster of
# the machine, or by another instance of this test).
read -r ctld_port slurmd_port < <("$python" - <<'PY'
import random, socket
ports = []
while len(ports) < 2:
    port = random.randrange(20000, 32000)
    with socket.socket() as s:
        try:
            s.bind(("", port))
        except OSError:
            continue
    if port not in ports:
        ports.append(port)
print(*ports)
PY
)
host=$(hostname -s)
# The CPUs this test may use, whatever OMP_NUM_THREADS or OMP_THREAD_LIMIT say: GNU nproc honours
# them (an HPC module set-up's OMP_NUM_THREADS=1 made it print 1, and a 1-CPU node left the 2-task
# jobs PENDING); CPU affinity still counts.
cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
memory=$(awk '/^MemTotal:/ { print int($2 / 1024 * 0.9) }' /proc/meminfo)
mkdir -p "$work/state" "$work/spool"

# munge with its own key, socket, PID and log file: no clash with a munged of the machine.
mungekey --create --keyfile="$work/munge.key" || die "mungekey --create failed"
munged --force --socket="$work/munge.socket" --key-file="$work/munge.key" \
  --pid-file="$work/munged.pid" --log-file="$work/munged.log" --seed-file="$work/munged.seed" ||
  die "munged did not start"
munge -S "$work/munge.socket" -n </dev/null | unmunge -S "$work/munge.socket" >/dev/null ||
  die "munge cannot encode and decode a credential"

# cred_expire=10: a requeued job may start 11 s after its requeue (SLURM's default is 121 s);
# sched_interval/bf_interval: the scheduler notices that much sooner.
cat >"$SLURM_CONF" <<EOF
ClusterName=fluencetest
SlurmctldHost=$host
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$(id -un)
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$work/munge.socket,cred_expire=10
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobRequeue=1
MailProg=/bin/true
NodeName=$host CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
slurmctld -f "$SLURM_CONF" || die "slurmctld did not start"
slurmd -f "$SLURM_CONF" || die "slurmd did not start"
state=""
for _ in $(seq 120); do
  state=$(sinfo -h -n "$host" -o %t 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.25
done
[ "$state" = idle ] || die "the node did not become idle within 30 s (state '$state')"
pass "one-node SLURM up: $host, $cpus CPU(s), ports $ctld_port/$slurmd_port"

# --- helpers ----------------------------------------------------------------------------------
# job_field JOB FIELD: FIELD of `scontrol show job JOB` ("" when the job is unknown)
job_field() {
  { scontrol show job -o "$1" 2>/dev/null || true; } | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}

# wait_job JOB SECONDS: wait until JOB has ended (a requeued job has not), print its state
wait_job() {
  local job=$1 until=$((SECONDS + $2)) state=""
  [ "$until" -le "$deadline" ] || until=$deadline
  while [ "$SECONDS" -lt "$until" ]; do
    state=$(job_field "$job" JobState)
    case "$state" in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE | PREEMPTED)
        echo "$state"
        return 0
        ;;
    esac
    sleep 0.5
  done
  echo "still ${state:-unknown} after $2 s"
}

# wait_until JOB SECONDS COMMAND...: wait until COMMAND succeeds (status 0), or JOB has left the
# queue or the time is up (status 1)
wait_until() {
  local job=$1 until=$((SECONDS + $2)) state
  shift 2
  while [ "$SECONDS" -lt "$until" ]; do
    "$@" && return 0
    state=$(job_field "$job" JobState)
    case "$state" in
      PENDING | CONFIGURING | RUNNING) ;;
      *) return 1 ;;
    esac
    sleep 0.1
  done
  return 1
}

has_checkpoint() { compgen -G "$1/chk_*.h5" >/dev/null; }

# tasks_exited_4 LOG: srun reported the tasks of its step as exited with code 4, and no task
# otherwise (killed, another code): the ranks themselves stopped with a checkpoint
tasks_exited_4() {
  grep -q "^srun: error: .*: tasks\{0,1\} [0-9,-]*: Exited with exit code 4$" "$1" &&
    ! grep "^srun: error: .*: tasks\{0,1\} [0-9,-]*: " "$1" | grep -qv "Exited with exit code 4$"
}

# submit ENV... -- SBATCH_ARGS...: sbatch from the repository root (the scripts source jobs/lib/
# from there) with ENV added to the job's environment, sharing the node's CPUs with the other
# jobs; prints the job id
submit() {
  local env=()
  while [ "$1" != -- ]; do
    env+=("$1")
    shift
  done
  shift
  (cd "$source_dir" && env "${env[@]}" sbatch --parsable --time=00:10:00 --oversubscribe "$@") |
    cut -d';' -f1
}

# compare_runs A.h5 B.h5: every dataset but wall times, timings and the rank layout bitwise
# identical
compare_runs() {
  "$python" - "$1" "$2" <<'PY'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
def check(name, obj):
    if isinstance(obj, h5py.Dataset) and "wall_time" not in name and "timing" not in name \
            and name not in ("clients/rank", "metrics/setup_time_s", "metrics/peak_memory_bytes",
                             "metrics/rank", "metrics/host"):
        x, y = obj[()], b[name][()]
        assert np.array_equal(x, y, equal_nan=np.issubdtype(np.asarray(x).dtype, np.floating)), name
a.visititems(check)
assert np.array_equal(a["/model/theta"][...], b["/model/theta"][...])
PY
}

common=(FLUENCE="$fluence" MPIRUN="$mpirun")
qs_rounds=1500 # enough rounds that the run is still going when its first checkpoint appears
long_stop=(--quiet --set "federation.rounds=$qs_rounds")
# Rounds of several seconds (a wide MLP; about 3 s on 2 idle cores) and no checkpoint due: the
# only checkpoint comes from the stop. Not quiet: the job's log shows each round's end.
slow=(--set federation.rounds=3 --set 'model.type="mlp"' --set 'model.hidden=[800,800]'
  --set 'federation.polish="none"' --set federation.local_epochs=6 --set output.checkpoint_every=100)

# --- submissions: everything at once, the stops are sent as soon as each job has trained a little
qs_job=$(submit "${common[@]}" FLUENCE_SCRATCH="$work/scratch" SCRATCH="$work/not-here" \
  FLUENCE_ARGS=--quiet -- --output="$work/quickstart.log" jobs/quickstart.sbatch) ||
  die "sbatch jobs/quickstart.sbatch failed"
sweep_job=$(submit "${common[@]}" FLUENCE_LAUNCHER=mpirun SCRATCH="$work/site" FLUENCE_OUT=sweep \
  FLUENCE_ARGS=--quiet -- --array=0-1 --ntasks=1 --output="$work/sweep_%a.log" jobs/sweep.sbatch \
  jobs/sweeps/quickstart_rounds.txt) || die "sbatch --array=0-1 jobs/sweep.sbatch failed"
usr1_job=$(submit "${common[@]}" FLUENCE_OUT="$work/usr1" FLUENCE_ARGS="${long_stop[*]}" -- \
  --output="$work/usr1.log" jobs/quickstart.sbatch) || die "sbatch jobs/quickstart.sbatch failed"
term_job=$(submit "${common[@]}" FLUENCE_OUT="$work/term" FLUENCE_ARGS="${long_stop[*]}" -- \
  --output="$work/term.log" jobs/quickstart.sbatch) || die "sbatch jobs/quickstart.sbatch failed"
cancel_job=$(submit "${common[@]}" FLUENCE_OUT="$work/cancel" FLUENCE_ARGS="${slow[*]}" -- \
  --output="$work/cancel.log" jobs/quickstart.sbatch) || die "sbatch jobs/quickstart.sbatch failed"

# 3: USR1 to the batch shell once training runs (its first checkpoint, round 25, exists).
usr1_sent=0
if wait_until "$usr1_job" 90 has_checkpoint "$work/usr1"; then
  scancel --signal=USR1 --batch "$usr1_job" && usr1_sent=1
fi
# 4: TERM to the tasks of the job's steps (not the batch shell).
term_sent=0
if wait_until "$term_job" 90 has_checkpoint "$work/term"; then
  scancel --signal=TERM "$term_job" && term_sent=1
fi
# 5: the job cancelled half a second after round 1's line, printed once round 2 has ended (the
# test evaluation overlaps the next round), so inside round 3.
cancel_sent=0
if wait_until "$cancel_job" 120 grep -qs "round     1/3" "$work/cancel.log"; then
  sleep 0.5
  scancel "$cancel_job" && cancel_sent=1
fi

# The uninterrupted runs, outside SLURM, while the stopped jobs wait out their requeue delay.
"$mpirun" -n 2 "$fluence" train "$source_dir/inputs/quickstart.toml" --out "$work/reference" \
  "${long_stop[@]}" >"$work/reference.log" 2>&1 &
reference=$!
"$mpirun" -n 2 "$fluence" train "$source_dir/inputs/quickstart.toml" --out "$work/slow_reference" \
  "${slow[@]}" --quiet >"$work/slow_reference.log" 2>&1 &
slow_reference=$!

# --- 1: the quick start, srun, the declared resources, the scratch directory ---------------------
state=$(wait_job "$qs_job" 120)
qs_out="$work/scratch/runs/quickstart-$qs_job"
if [ "$state" = COMPLETED ] && [ "$(job_field "$qs_job" ExitCode)" = 0:0 ] &&
  [ "$(job_field "$qs_job" MinMemoryNode)" = 2G ] &&
  grep -q "launcher: srun --mpi=pmix --cpus-per-task=1)" "$work/quickstart.log" &&
  [ ! -e "$work/not-here" ] && [ ! -e "$source_dir/runs/quickstart-$qs_job" ] &&
  "$python" - "$qs_out/results.h5" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
theta = f["/model/theta"][...]
assert theta.shape == (2, 19) and np.all(np.isfinite(theta)), theta.shape
assert len(f["/metrics/round"]) == 50
assert int(f.attrs["ranks"]) == 2, "the job ran on SLURM_NTASKS = 2 ranks"
PY
then
  pass "sbatch jobs/quickstart.sbatch: COMPLETED with srun --mpi=pmix (2 ranks, --cpus-per-task=1, --mem=2G), results.h5 under FLUENCE_SCRATCH"
else
  fail "sbatch jobs/quickstart.sbatch (job $qs_job: $state, exit $(job_field "$qs_job" ExitCode), memory $(job_field "$qs_job" MinMemoryNode))"
  tail -n 5 "$work/quickstart.log" | sed 's/^/    /'
fi

# --- 2: a 2-task sweep with mpirun ---------------------------------------------------------------
sweep_ok=1
for task in 0 1; do
  state=$(wait_job "${sweep_job}_$task" 120)
  if [ "$state" != COMPLETED ] || ! grep -q "(launcher: $mpirun)" "$work/sweep_$task.log"; then
    sweep_ok=0
    echo "    sweep task $task: $state"
    tail -n 5 "$work/sweep_$task.log" | sed 's/^/    /'
  fi
done
# Lines 0 and 1 of the sweep: 10 and 25 rounds. Same seed and streams, so the 25-round history
# starts with the 10-round one.
if [ "$sweep_ok" -eq 1 ] && "$python" - "$work/site/sweep/task_0/results.h5" "$work/site/sweep/task_1/results.h5" <<'PY'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
ra, rb = a["/metrics/round"][...], b["/metrics/round"][...]
assert len(ra) == 10 and len(rb) == 25, (len(ra), len(rb))
for name in ("train_loss", "test_loss", "test_accuracy"):
    x, y = a["/metrics/" + name][...], b["/metrics/" + name][...]
    assert np.array_equal(x, y[:10]), name
assert "/model/theta" in a and "/model/theta" in b
for f, rounds in ((a, 10), (b, 25)):
    deck = f.attrs["deck"]
    deck = deck.decode() if isinstance(deck, bytes) else deck
    assert f"rounds = {rounds}" in deck, deck
PY
then
  pass "sbatch --array=0-1 jobs/sweep.sbatch with FLUENCE_LAUNCHER=mpirun: task_0 (10 rounds) and task_1 (25 rounds, same first 10) under SCRATCH"
else
  fail "array job jobs/sweep.sbatch (job $sweep_job)"
fi

# --- 5 (first part): the cancelled job --------------------------------------------------------
# scancel sends TERM to every process of the job, srun included ("forcing job termination"), and
# SIGKILL only after KillWait: the ranks give up round 3, checkpoint round 2 and exit 4, but the
# job is being cancelled (COMPLETING), so the script must not requeue it.
state=$(wait_job "$cancel_job" 60)
sleep 3 # a requeue would show by now: the job ends only once its batch script has
cancel_ok=0
if [ "$cancel_sent" -eq 1 ] && [ "$state" = CANCELLED ] &&
  [ "$(job_field "$cancel_job" JobState)" = CANCELLED ] &&
  [ "$(job_field "$cancel_job" Restarts)" = 0 ] && grep -q "not requeueing" "$work/cancel.log" &&
  grep -q "stop signal received: checkpoint .*chk_00000[12].h5 written after round [12];" \
    "$work/cancel.log" && tasks_exited_4 "$work/cancel.log" && [ ! -e "$work/cancel/results.h5" ]; then
  cancel_ok=1
else
  fail "cancelled job (job $cancel_job: signalled $cancel_sent, $state, now $(job_field "$cancel_job" JobState), Restarts=$(job_field "$cancel_job" Restarts))"
  sed 's/^/    /' "$work/cancel.log" | tail -n 8
fi
# Resubmitted into the same output directory, it resumes from the checkpoint.
resubmit_job=$(submit "${common[@]}" FLUENCE_OUT="$work/cancel" FLUENCE_ARGS="${slow[*]} --quiet" -- \
  --output="$work/resubmit.log" jobs/quickstart.sbatch) || die "sbatch jobs/quickstart.sbatch failed"

# --- 3 and 4: stopped, exit 4, requeued, resumed ---------------------------------------------------
reference_status=0
wait "$reference" || reference_status=$?
# requeued_bitwise NAME JOB SENT: the job named NAME stopped with a checkpoint, its tasks exited 4,
# it requeued itself once and resumed from the checkpoint to the uninterrupted run's results
requeued_bitwise() {
  local name=$1 job=$2 sent=$3 state restarts
  state=$(wait_job "$job" 150)
  restarts=$(job_field "$job" Restarts)
  if [ "$sent" -eq 1 ] && [ "$state" = COMPLETED ] && [ "$restarts" = 1 ] &&
    [ "$(job_field "$job" ExitCode)" = 0:0 ] &&
    grep -q "stop signal received: checkpoint" "$work/$name.log" && tasks_exited_4 "$work/$name.log" &&
    grep -q "stopped (exit 4): requeueing job $job" "$work/$name.log" &&
    grep -q "restart: .*chk_" "$work/$name.log" && [ "$reference_status" -eq 0 ] &&
    compare_runs "$work/reference/results.h5" "$work/$name/results.h5"; then
    return 0
  fi
  echo "    job $job: signalled $sent, $state, Restarts=$restarts, reference exit $reference_status"
  sed 's/^/    /' "$work/$name.log" | tail -n 12
  return 1
}
if requeued_bitwise usr1 "$usr1_job" "$usr1_sent"; then
  pass "USR1 to the batch shell -> srun -> every task: checkpoint, tasks exit 4, scontrol requeue (Restarts=1), --restart latest: bitwise equal to the uninterrupted run"
else
  fail "USR1 stop/requeue/resume through srun"
fi
if requeued_bitwise term "$term_job" "$term_sent"; then
  pass "scancel --signal=TERM (every task of the step): checkpoint, tasks exit 4, requeue, --restart latest: bitwise equal to the uninterrupted run"
else
  fail "TERM to the step's tasks: stop/requeue/resume"
fi

# --- 5 (second part): the resubmitted job ---------------------------------------------------------
slow_status=0
wait "$slow_reference" || slow_status=$?
state=$(wait_job "$resubmit_job" 120)
if [ "$cancel_ok" -eq 1 ] && [ "$state" = COMPLETED ] && grep -q "restart: .*chk_" "$work/resubmit.log" &&
  [ "$slow_status" -eq 0 ] && compare_runs "$work/slow_reference/results.h5" "$work/cancel/results.h5"; then
  pass "scancel inside a round: round given up, checkpoint $(grep -o 'chk_[0-9]*.h5 written after round [0-9]*' "$work/cancel.log" | head -n 1), tasks exit 4, CANCELLED without requeue; resubmitted, bitwise equal to the uninterrupted run"
elif [ "$cancel_ok" -eq 1 ]; then
  fail "resubmission of the cancelled job (job $resubmit_job: $state, reference exit $slow_status)"
  sed 's/^/    /' "$work/resubmit.log" | tail -n 8
fi

# --- 6: the experiment scripts stop with exit 4 and resume (outside SLURM) ------------------------
# A small FeO2 run (200 of the Fashion-MNIST clients, 60 rounds, a checkpoint every 5) through
# jobs/lib/requeue.sh as the experiment job scripts run it; USR1 to that shell once the run has
# checkpointed.
feo2_args=(--setups noniid --only feo2_r0.1 --ranks 2 --out "$work/feo2" --no-report --quiet
  --set partition.clients=200 --set federation.rounds=60 --set personalization.metrics_every=20
  --set output.checkpoint_every=5)
cat >"$work/driver.sh" <<'EOF'
set -euo pipefail
source jobs/lib/requeue.sh
requeue_run scripts/run_feo2_experiments.sh "$@"
exit "$requeue_status"
EOF
driver() {
  cd "$source_dir" && FLUENCE="$fluence" MPIRUN="$mpirun" exec bash "$work/driver.sh" "${feo2_args[@]}"
}
(driver) >"$work/feo2_first.log" 2>&1 &
shell=$!
until=$((SECONDS + 90))
while [ "$SECONDS" -lt "$until" ] && kill -0 "$shell" 2>/dev/null; do
  compgen -G "$work/feo2/noniid/feo2_r0.1/chk_*.h5" >/dev/null && break
  sleep 0.1
done
kill -USR1 "$shell" 2>/dev/null || true
first=0
wait "$shell" || first=$?
second=0
(driver) >"$work/feo2_second.log" 2>&1 || second=$?
if [ "$first" -eq 4 ] && grep -q "stopped by a signal during" "$work/feo2_first.log" &&
  [ ! -e "$work/feo2/noniid/feo2_r0.1/results.h5.partial" ] && [ "$second" -eq 0 ] &&
  grep -q -- "--restart latest" "$work/feo2_second.log" &&
  grep -q "restart: .*chk_" "$work/feo2_second.log" &&
  [ -f "$work/feo2/noniid/feo2_r0.1/results.h5" ]; then
  pass "run_feo2_experiments.sh under jobs/lib/requeue.sh: USR1 -> exit 4; the rerun resumes with --restart latest"
else
  fail "experiment script stop/resume (exits $first, $second)"
  tail -n 4 "$work/feo2_first.log" "$work/feo2_second.log" | sed 's/^/    /'
fi

echo "$passed passed, $failed failed ($((SECONDS - start_time)) s)"
if [ "$failed" -ne 0 ]; then show_logs; fi
[ "$failed" -eq 0 ]
