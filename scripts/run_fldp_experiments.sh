#!/usr/bin/env bash
# Run seed 000's FLDP-FL evaluation (Carey & Wu, §5: Q1-Q4, Tables 2-3, Figs. 1-2) with
# `fluence fldp` on the decks inputs/fldp_<dataset>.toml, then summarize it with
# analysis/fldp_report.py.
#
# Usage:
#   scripts/run_fldp_experiments.sh [DATASET...] [--ranks N] [--out ROOT]
#                                   [--only q1,q2,q3,q4] [--set key=value ...] [--quiet]
#                                   [--dry-run] [--no-report]
#
#   DATASET      acs, credit_g, fashion_mnist (default: all three, in that order)
#   --ranks N    MPI ranks per run (default 2, or $SLURM_NTASKS inside a SLURM job)
#   --out ROOT   results root (default out/fldp): run <q> of <dataset> goes to ROOT/<dataset>/<q>
#   --only LIST  comma-separated subset of the experiments q1,q2,q3,q4 (default: all four)
#   --set K=V    extra deck override appended to every run after the experiment's own
#                (repeatable; e.g. --set data.max_train_rows=2000 for a quick trial; the last
#                --set of a key wins)
#   --quiet      pass --quiet to fluence (no per-round or per-case progress lines)
#   --dry-run    print the commands without running them (and without the report)
#   --no-report  do not run analysis/fldp_report.py at the end
#
# Experiments (every run: `fluence fldp inputs/fldp_<dataset>.toml --set ... --out DIR`):
#   q1/eps_<eps>  Table 2 / Fig. 1: training eps in inf, 5, 4, 3, 2, 1; the deck's sweep makes
#                 client 0 change every LDP attribute to each eps' in 5, 4, 3, 2, 1, 0.5, 0.1
#                 below eps.
#   q2            Fig. 2 top: eps 3 -> 1 for 1, 2, 3, 4, 5 changing clients (0, 0-1, ...).
#   q3/x_<X>      Fig. 2 bottom: eps 3 -> 1 for client 0 holding X = 0.2, 0.3, ..., 0.8 of the
#                 training rows, the other four sharing the rest equally (partition.sizes).
#   q4            Table 3: time of one full federated retraining from zero (the seed's schedule:
#                 100 rounds x 3 local epochs, batch 1, learning rate 0.01, dense Hessian)
#                 against the time of the estimate, eps 3 -> 1 for one client. fashion_mnist
#                 keeps its own schedule (batch-1 SGD over 60,000 images x 300 epochs is
#                 impractical) and times a single retraining draw (about 5 minutes).
#
# A run whose results.h5 already exists is skipped, so an interrupted sweep resumes where it
# stopped (fluence writes results.h5.partial and renames it only when complete). Every command is
# printed before it runs. A failed run does not stop the others: the failures are listed at the
# end, the report still covers what exists, and the exit status is 1 (2 for a usage error).
# A stop signal (USR1, TERM, INT; what jobs/*.sbatch forward on a SLURM time limit) ends the
# current run with a checkpoint where the command has them, starts no further run and exits
# with status 4; rerunning continues (--restart latest where a checkpoint exists).
#
# Environment: FLUENCE (the binary, default build/fluence), MPIRUN (the launcher, default
# scripts/mpirun.sh, which allows running as root and oversubscription; e.g. MPIRUN=srun),
# PYTHON (default /usr/bin/python3 when present).
#
# Examples:
#   scripts/run_fldp_experiments.sh credit_g --ranks 2
#   scripts/run_fldp_experiments.sh credit_g --out /tmp/fldp-try --set federation.rounds=5
#   sbatch jobs/fldp.sbatch        # all three datasets, one SLURM array task each
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/experiments.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/experiments.sh"
all_datasets=(acs credit_g fashion_mnist)
all_experiments=(q1 q2 q3 q4)

root="out/fldp"
datasets=()
while [ $# -gt 0 ]; do
  if take_shared_option "$@"; then shift "$taken"; else datasets+=("$1"); shift; fi
done

check_ranks
[ ${#datasets[@]} -gt 0 ] || datasets=("${all_datasets[@]}")
for ds in "${datasets[@]}"; do
  [ -f "$repo/inputs/fldp_$ds.toml" ] ||
    die "unknown dataset '$ds': no deck inputs/fldp_$ds.toml (known: ${all_datasets[*]})"
done
experiments=("${all_experiments[@]}")
if [ -n "$only" ]; then
  IFS=',' read -r -a experiments <<<"$only"
  for q in "${experiments[@]}"; do
    case "$q" in
      q1 | q2 | q3 | q4) ;;
      *) die "--only: unknown experiment '$q' (q1,q2,q3,q4)" ;;
    esac
  done
fi

locate_tools

# fldp_run DIR DECK SET...: run `fluence fldp DECK SET... --out DIR` unless DIR/results.h5 exists
fldp_run() {
  run_or_skip "$1" fldp "${@:2}"
}

# sizes_for X: partition.sizes with client 0 holding fraction X and four clients sharing 1 - X; the
# last entry takes the rounding so that the printed fractions sum to 1
sizes_for() {
  awk -v x="$1" 'BEGIN {
    o = sprintf("%.6g", (1 - x) / 4); l = sprintf("%.6g", 1 - x - 3 * o)
    printf "[%s, %s, %s, %s, %s]", x, o, o, o, l }'
}

run_dataset() {
  local ds="$1" deck="$repo/inputs/fldp_$1.toml" base="$root/$1" q eps x
  for q in "${experiments[@]}"; do
    echo "== $ds $q"
    case "$q" in
      q1)
        for eps in inf 5 4 3 2 1; do
          if [ "$eps" = inf ]; then
            fldp_run "$base/q1/eps_$eps" "$deck" --set 'ldp.epsilon="inf"'
          else
            fldp_run "$base/q1/eps_$eps" "$deck" --set "ldp.epsilon=$eps.0"
          fi
        done
        ;;
      q2)
        fldp_run "$base/q2" "$deck" --set ldp.epsilon=3.0 --set 'fldp.sweep.counts=[1,2,3,4,5]' \
          --set 'fldp.sweep.epsilon=[1.0]'
        ;;
      q3)
        for x in 0.2 0.3 0.4 0.5 0.6 0.7 0.8; do
          fldp_run "$base/q3/x_$x" "$deck" --set ldp.epsilon=3.0 --set 'fldp.sweep.epsilon=[1.0]' \
            --set "partition.sizes=$(sizes_for "$x")"
        done
        ;;
      q4)
        local timing=(--set ldp.epsilon=3.0 --set 'fldp.sweep.epsilon=[1.0]'
          --set 'fldp.retrain_mode="full"' --set fldp.newton_steps=0)
        if [ "$ds" != fashion_mnist ]; then
          timing+=(--set federation.rounds=100 --set federation.local_epochs=3
            --set federation.batch_size=1 --set federation.learning_rate=0.01
            --set 'influence.solver="explicit"')
        else
          timing+=(--set fldp.retrain_seeds=1)
        fi
        fldp_run "$base/q4" "$deck" "${timing[@]}"
        ;;
    esac
  done
}

echo "# fldp experiments: ${datasets[*]} (${experiments[*]}) into $root with $ranks rank(s)"
for ds in "${datasets[@]}"; do
  run_dataset "$ds"
done
print_run_counts

if [ "$dry_run" -eq 0 ] && [ "$report" -eq 1 ]; then
  report_cmd=("$PYTHON" "$repo/analysis/fldp_report.py" "$root")
  print_cmd "${report_cmd[@]}"
  "${report_cmd[@]}" || report_status=$?
fi
finish
