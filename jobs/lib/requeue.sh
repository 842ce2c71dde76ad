# shellcheck shell=bash
# The stop-and-requeue pattern of the job scripts (docs/operations.md), sourced by every
# jobs/*.sbatch after `cd "${SLURM_SUBMIT_DIR:-.}"`. SLURM copies a batch script to its spool
# directory before running it, so this file is found from the submit directory: submit from the
# repository root.
#
# SLURM warns the batch shell only (--signal=B:USR1@<s>) before the time limit, and sends TERM to
# every process of the job on scancel, at the limit and on preemption (SIGKILL after KillWait).
# The job's command runs as its own process group, and each of USR1, TERM and INT (Ctrl-C outside
# SLURM) reaching the batch shell is forwarded to that whole group as USR1. The group holds srun
# or mpirun (or a scripts/run_*_experiments.sh script and its launcher), not the ranks when srun
# started them (they are the tasks of a job step): srun and mpirun pass USR1 on to every rank.
# fluence ranks finish their round, write a checkpoint and exit with code 4, and
# scripts/run_*_experiments.sh stop after their current run with code 4 too. A job so stopped that SLURM still counts as RUNNING (the warning, or
# `scancel --signal=USR1 --batch`; not a cancelled one) requeues itself (`scontrol requeue`; the
# job needs --requeue, or JobRequeue=1 in slurm.conf), and the next start resumes in the same
# output directory: `--restart latest` where a checkpoint exists, finished runs skipped. SLURM
# delays a requeued job's start by its credential lifetime (AuthInfo cred_expire, 120 s by
# default) and counts its starts in SLURM_RESTART_COUNT.
#
#   requeue_run CMD [ARG...]   run CMD, forwarding the stop signals; its exit status lands in
#                              requeue_status (the function itself always returns 0)
#   requeue_finish STATUS      exit with STATUS; first, when the command stopped (4, or any
#                              failure after a stop signal) inside a SLURM job that is still
#                              RUNNING (not being cancelled), requeue the job, at most
#                              FLUENCE_MAX_REQUEUES times (default 10: a run that makes no progress
#                              between stops must not loop forever)
#   requeue_has_checkpoint DIR true when DIR holds a checkpoint (chk_*.h5) to resume from

# shellcheck disable=SC2034 # requeue_status is read by the sourcing script
requeue_status=0
requeue_stopping=0 # a stop signal has reached the batch shell
requeue_child=""   # the process group of the running command ("" between commands)

# _requeue_forward: the trap of USR1, TERM and INT
_requeue_forward() {
  requeue_stopping=1
  if [ -n "$requeue_child" ]; then
    echo "$(date '+%F %T') stop signal: forwarding USR1 to process group $requeue_child"
    kill -USR1 -- "-$requeue_child" 2>/dev/null || true
  else
    echo "$(date '+%F %T') stop signal between commands: stopping"
  fi
}
trap _requeue_forward USR1 TERM INT

requeue_run() {
  # With job control on, the background command gets a process group of its own (pgid = pid), so
  # a forwarded signal reaches every process of it and none of the batch shell.
  set -m
  "$@" &
  requeue_child=$!
  set +m
  # A signal that came before the command started is passed on now.
  if [ "$requeue_stopping" -eq 1 ]; then kill -USR1 -- "-$requeue_child" 2>/dev/null || true; fi
  local status again
  while :; do
    status=0
    wait "$requeue_child" || status=$?
    # A status above 128 while the command still runs: a trapped signal interrupted the wait.
    if [ "$status" -gt 128 ] && kill -0 "$requeue_child" 2>/dev/null; then continue; fi
    if [ "$status" -gt 128 ]; then
      # Interrupted, and the command ended meanwhile: bash kept its status for one more wait
      # (127 when the first wait was already the command's own end, by a signal).
      again=0
      wait "$requeue_child" 2>/dev/null || again=$?
      [ "$again" -eq 127 ] || status=$again
    fi
    break
  done
  requeue_child=""
  # shellcheck disable=SC2034
  requeue_status=$status
}

requeue_finish() {
  local status=$1 max=${FLUENCE_MAX_REQUEUES:-10} count=${SLURM_RESTART_COUNT:-0} state
  # Stopped: a checkpoint and exit 4 (srun exits with its tasks' 4), or cut off after a stop
  # signal (mpirun itself answers a TERM from SLURM with exit 1, and commands without checkpoints
  # yet die of the signal).
  if [ "$status" -ne 4 ] && { [ "$requeue_stopping" -eq 0 ] || [ "$status" -eq 0 ]; }; then
    exit "$status"
  fi
  [ -n "${SLURM_JOB_ID:-}" ] || exit "$status"
  if ! command -v scontrol >/dev/null; then
    echo "stopped (exit $status), but scontrol is not on PATH: resubmit the job to resume" >&2
    exit "$status"
  fi
  # Only a job that still runs is requeued: the warning before the time limit, or a signal sent
  # with `scancel --signal`. A job being cancelled, timed out or requeued by SLURM is COMPLETING.
  state=$(scontrol show job -o "$SLURM_JOB_ID" 2>/dev/null | grep -o 'JobState=[A-Z_]*' || true)
  state=${state#JobState=}
  if [ "$state" != RUNNING ]; then
    echo "$(date '+%F %T') stopped (exit $status) while the job is ${state:-unknown to SLURM}:" \
      "not requeueing (resubmit to resume)"
  elif [ "$count" -ge "$max" ]; then
    echo "stopped (exit $status) after $count requeue(s) (FLUENCE_MAX_REQUEUES=$max):" \
      "not requeueing again; resubmit the job to resume" >&2
  else
    echo "$(date '+%F %T') stopped (exit $status): requeueing job $SLURM_JOB_ID" \
      "(restart $((count + 1)))"
    scontrol requeue "$SLURM_JOB_ID" ||
      echo "scontrol requeue $SLURM_JOB_ID failed (submitted without --requeue?):" \
        "resubmit the job to resume" >&2
  fi
  exit "$status"
}

requeue_has_checkpoint() {
  compgen -G "$1/chk_*.h5" >/dev/null
}
