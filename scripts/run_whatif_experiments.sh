#!/usr/bin/env bash
# Run seed 001's what-if evaluation of eps-LDP (Carey, Van & Wu, §V: Table III, Figs. 1-2) with
# `fluence whatif` on the decks inputs/whatif_<dataset>.toml, then summarize it with
# analysis/whatif_report.py.
#
# Usage:
#   scripts/run_whatif_experiments.sh [DATASET...] [--ranks N] [--out ROOT]
#                                     [--only table3,fig2] [--set key=value ...] [--quiet]
#                                     [--dry-run] [--no-report]
#
#   DATASET      adult, credit_g, fashion_mnist (default: all three, in that order)
#   --ranks N    MPI ranks per run (default 2, or $SLURM_NTASKS inside a SLURM job)
#   --out ROOT   results root (default out/whatif): experiment <x> of <dataset> goes to
#                ROOT/<dataset>/<x>
#   --only LIST  comma-separated subset of the experiments table3,fig2 (default: both)
#   --set K=V    extra deck override appended to every run after the experiment's own
#                (repeatable; e.g. --set whatif.repeats=1 --set 'whatif.epsilons=[0.5,5.0]' for
#                a quick trial; the last --set of a key wins)
#   --quiet      pass --quiet to fluence (no per-round or retrain progress lines)
#   --dry-run    print the commands without running them (and without the report)
#   --no-report  do not run analysis/whatif_report.py at the end
#
# Experiments (every run: `fluence whatif inputs/whatif_<dataset>.toml --set ... --out DIR`):
#   table3          Table III / Fig. 1: the deck as it is: the group's labels randomized with k-RR,
#                   estimates rr_l and rr_flc over 10 group fractions 1%..30% x 30 eps 0.001..10,
#                   against randomized retrains and the exact expected retrain per cell.
#   fig2/features   Fig. 2: variant rr at group fraction 0.75, randomizing two categorical
#                   features (adult: cat1, cat2; credit_g: housing, job; fashion_mnist: ink, its
#                   only categorical attribute),
#   fig2/label      ... randomizing the label only,
#   fig2/both       ... randomizing the features and the label together.
#
# Report (unless --no-report or --dry-run), for whatever exists under ROOT: Table III over the
# table3 runs (figures in ROOT/figures), and for each dataset with all three fig2 runs the
# features / label / both comparison (figures in ROOT/figures/<dataset>_fig2).
#
# A run whose results.h5 already exists is skipped, so an interrupted sweep resumes where it
# stopped (fluence writes results.h5.partial and renames it only when complete); a run with
# checkpoints in its directory continues from the newest (--restart latest). USR1 or TERM to this
# script stops the run in progress at its next unit boundary with a checkpoint (fluence exit 4),
# starts no further run and exits 4 (docs/operations.md). Every command is printed before it runs.
# A failed run does not stop the others: the failures are listed at the end, the report still
# covers what exists, and the exit status is 1 (2 for a usage error).
#
# Environment: FLUENCE (the binary, default build/fluence), MPIRUN (the launcher, default
# scripts/mpirun.sh, which allows running as root and oversubscription; e.g. MPIRUN=srun),
# PYTHON (default /usr/bin/python3 when present).
#
# Examples:
#   scripts/run_whatif_experiments.sh credit_g --ranks 2
#   scripts/run_whatif_experiments.sh credit_g --out /tmp/whatif-try --set whatif.repeats=1 \
#       --set 'whatif.epsilons=[0.5,5.0]' --set 'whatif.fractions=[0.1,0.3]'
#   sbatch jobs/whatif.sbatch      # all three datasets, one SLURM array task each
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/experiments.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/experiments.sh"
all_datasets=(adult credit_g fashion_mnist)
all_experiments=(table3 fig2)
fig2_variants=(features label both)

# fig2_features DATASET: the categorical features that Fig. 2 randomizes, as a TOML string list
fig2_features() {
  case "$1" in
    adult) echo '"cat1","cat2"' ;;
    credit_g) echo '"housing","job"' ;;
    fashion_mnist) echo '"ink"' ;;
  esac
}

root="out/whatif"
datasets=()
while [ $# -gt 0 ]; do
  if take_shared_option "$@"; then shift "$taken"; else datasets+=("$1"); shift; fi
done

check_ranks
[ -n "$root" ] || die "--out needs a non-empty directory"
[ ${#datasets[@]} -gt 0 ] || datasets=("${all_datasets[@]}")
for ds in "${datasets[@]}"; do
  case " ${all_datasets[*]} " in
    *" $ds "*) ;;
    *) die "unknown dataset '$ds' (known: ${all_datasets[*]})" ;;
  esac
  [ -f "$repo/inputs/whatif_$ds.toml" ] || die "dataset '$ds': no deck inputs/whatif_$ds.toml"
done
experiments=("${all_experiments[@]}")
if [ -n "$only" ]; then
  IFS=',' read -r -a experiments <<<"$only"
  [ ${#experiments[@]} -gt 0 ] || die "--only needs at least one of table3,fig2"
  for x in "${experiments[@]}"; do
    case "$x" in
      table3 | fig2) ;;
      *) die "--only: unknown experiment '$x' (table3,fig2)" ;;
    esac
  done
fi

locate_tools

# whatif_run DIR DECK SET...: run `fluence whatif DECK SET... --out DIR` unless DIR/results.h5
# exists
whatif_run() {
  run_or_skip "$1" whatif "${@:2}"
}

run_dataset() {
  local ds="$1" deck="$repo/inputs/whatif_$1.toml" base="$root/$1" x variant attributes
  local features
  features="$(fig2_features "$ds")"
  for x in "${experiments[@]}"; do
    echo "== $ds $x"
    case "$x" in
      table3)
        whatif_run "$base/table3" "$deck"
        ;;
      fig2)
        for variant in "${fig2_variants[@]}"; do
          case "$variant" in
            features) attributes="[$features]" ;;
            label) attributes='["label"]' ;;
            both) attributes="[$features,\"label\"]" ;;
          esac
          whatif_run "$base/fig2/$variant" "$deck" --set 'whatif.variants=["rr"]' \
            --set 'whatif.fractions=[0.75]' --set "whatif.attributes=$attributes"
        done
        ;;
    esac
  done
}

echo "# whatif experiments: ${datasets[*]} (${experiments[*]}) into $root with $ranks rank(s)"
for ds in "${datasets[@]}"; do
  run_dataset "$ds"
done
print_run_counts

if [ "$dry_run" -eq 0 ] && [ "$report" -eq 1 ]; then
  # Table III over every dataset's table3 run under ROOT (not only the ones run now)
  runs=()
  labels=()
  for ds in "${all_datasets[@]}"; do
    if [ -f "$root/$ds/table3/results.h5" ]; then
      runs+=("$root/$ds/table3")
      labels+=("$ds")
    fi
  done
  reported=0
  if [ ${#runs[@]} -gt 0 ]; then
    echo "== report: Table III"
    run_report whatif_report.py "${runs[@]}" --labels "${labels[@]}" --figures "$root/figures"
    reported=1
  fi
  # Fig. 2 per dataset with all three runs
  for ds in "${all_datasets[@]}"; do
    runs=()
    for variant in "${fig2_variants[@]}"; do
      if [ -f "$root/$ds/fig2/$variant/results.h5" ]; then runs+=("$root/$ds/fig2/$variant"); fi
    done
    if [ ${#runs[@]} -eq ${#fig2_variants[@]} ]; then
      echo "== report: $ds Fig. 2"
      run_report whatif_report.py "${runs[@]}" --labels "${fig2_variants[@]}" \
        --figures "$root/figures/${ds}_fig2"
      reported=1
    elif [ ${#runs[@]} -gt 0 ]; then
      echo "# report: $ds Fig. 2 skipped (${#runs[@]} of ${#fig2_variants[@]} runs complete)"
    fi
  done
  [ "$reported" -eq 1 ] || echo "# report: no complete run under $root"
fi
finish
