# shellcheck shell=bash
# Sourced by the jobs/*.sbatch array jobs, so that a job survives its time limit and preemption
# (docs/operations.md): SLURM warns the batch shell with USR1 (--signal=B:USR1@...) or preempts it
# with TERM; the running fluence command finishes its unit of work, writes a checkpoint and exits 4;
# the job requeues itself, and the rerun continues from the checkpoints (--restart latest).

# run_stoppable CMD...: run CMD in the background, passing USR1 and TERM on to it as USR1; return
# its exit status (4: stopped after a checkpoint)
run_stoppable() {
  "$@" &
  local pid=$! status=0
  trap 'kill -USR1 "$pid" 2>/dev/null' USR1 TERM
  while :; do
    status=0
    wait "$pid" || status=$?
    kill -0 "$pid" 2>/dev/null || break  # wait returned for a trapped signal: keep waiting
  done
  trap - USR1 TERM
  return "$status"
}

# requeue_if_stopped STATUS: requeue this SLURM job when STATUS is 4 (stopped after a checkpoint)
requeue_if_stopped() {
  [ "$1" -eq 4 ] || return 0
  if [ -n "${SLURM_JOB_ID:-}" ] && command -v scontrol >/dev/null; then
    echo "stopped with checkpoints: requeueing job $SLURM_JOB_ID"
    scontrol requeue "$SLURM_JOB_ID"
  fi
}
