# shellcheck shell=bash
# How the job scripts start fluence's ranks and where they write (jobs/README.md, docs/operations.md
# "Job scripts"), sourced by every jobs/*.sbatch after jobs/lib/requeue.sh.
#
#   job_launcher     set the array `launcher`: the command that starts the ranks, followed by
#                    `-n <ranks> fluence ...`. FLUENCE_LAUNCHER picks it: `srun` (the default inside
#                    a SLURM job) runs `$SRUN` (default `srun --mpi=pmix`) with the job's
#                    --cpus-per-task; `mpirun` (the default outside SLURM) runs `$MPIRUN` (default
#                    `mpirun`; scripts/mpirun.sh as root). Another value: exit 2.
#   job_path PATH    print PATH, under the scratch directory when PATH is relative and one is set:
#                    FLUENCE_SCRATCH, else SCRATCH (a set but empty FLUENCE_SCRATCH means none).
#                    Absolute paths are kept as given.
#
# srun launches the ranks as the tasks of a job step, so SLURM signals them itself: USR1 that the
# batch shell forwards (requeue_run) reaches srun, which passes it on to every task, and
# `scancel --signal=TERM|USR1 <job>` (the steps, not the batch shell) reaches the tasks directly.
# A plain `scancel` or the time limit sends TERM to every process of the job, the tasks included:
# they have until SIGKILL after KillWait (30 s by default) to checkpoint and exit 4. Only a TERM to
# srun alone (`kill -TERM <srun pid>`) kills the tasks at once (docs/operations.md).

job_launcher() {
  local kind=${FLUENCE_LAUNCHER:-}
  if [ -z "$kind" ]; then
    if [ -n "${SLURM_JOB_ID:-}" ]; then kind=srun; else kind=mpirun; fi
  fi
  case "$kind" in
    srun)
      read -r -a launcher <<<"${SRUN:-srun --mpi=pmix}"
      # Since SLURM 22.05 a step no longer inherits the job's --cpus-per-task.
      if [ -n "${SLURM_CPUS_PER_TASK:-}" ]; then
        launcher+=("--cpus-per-task=$SLURM_CPUS_PER_TASK")
      fi
      ;;
    mpirun) read -r -a launcher <<<"${MPIRUN:-mpirun}" ;;
    *)
      echo "FLUENCE_LAUNCHER='$kind' is not a launcher: use srun or mpirun" >&2
      exit 2
      ;;
  esac
}

job_path() {
  local scratch=${FLUENCE_SCRATCH-${SCRATCH:-}}
  case "$1" in
    /*) echo "$1" ;;
    *) if [ -n "$scratch" ]; then echo "${scratch%/}/$1"; else echo "$1"; fi ;;
  esac
}
