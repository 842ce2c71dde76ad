#!/usr/bin/env bash
# Run seed 002's evaluation of lazy-influence data filtering (LIA, §IV: Figs. 3-5, 9-10, Tables
# II-III) with `fluence lia` on the deck inputs/lia_fashion_mnist.toml (Fashion-MNIST instead of
# CIFAR-10), then summarize it with analysis/lia_report.py.
#
# Usage:
#   scripts/run_lia_experiments.sh [FAMILY...] [--baseline median|model] [--variant NAME]
#                                  [--settings noniid,iid] [--participants LIST]
#                                  [--epsilons LIST] [--ranks N] [--out ROOT]
#                                  [--set key=value ...] [--quiet] [--dry-run] [--no-report]
#
#   FAMILY          grid, corruption, fl, minority, signcheck (default: all five, in that
#                   order); --only grid,fl is the same as the arguments grid fl
#   --baseline B    lia.vote_baseline of every run: median (default; docs/math.md §9, beyond the
#                   seed) or model (Eq. 1 as written: the loss of M_t itself)
#   --variant NAME  name of the run tree (default: the baseline): every run goes to
#                   ROOT/NAME/<family>/...; give another name when --set changes something
#                   else, e.g. --variant seed_accounting --set 'lia.vote_accounting="seed"'
#   --settings LIST comma-separated subset of noniid,iid for grid and fl (default: both)
#   --participants LIST  grid only: comma-separated subset of 100,200,500,1000 (default: all;
#                   other positive integers are allowed too)
#   --epsilons LIST grid and signcheck: comma-separated subset of 0.5,0.75,1,2,inf (default:
#                   0.5,0.75,1,2,inf for grid, 0.5,1,2,inf for signcheck)
#   --ranks N       MPI ranks per run (default 2, or $SLURM_NTASKS inside a SLURM job)
#   --out ROOT      results root (default out/lia)
#   --set K=V       extra deck override appended to every run after the family's own
#                   (repeatable; the last --set of a key wins). Also from the environment:
#                   LIA_SET='lia.clip=2 lia.local_epochs=5' (space-separated K=V words, applied
#                   before the --set options). Use a new --variant name for changed settings:
#                   a run whose results.h5 exists is skipped whatever the overrides.
#   --quiet         pass --quiet to fluence
#   --dry-run       print the commands without running them (and without the report)
#   --no-report     do not run analysis/lia_report.py at the end
#
# Families (every run: `fluence lia inputs/lia_fashion_mnist.toml --set ... --out DIR`; one eps
# value sets both lia.epsilon_train and lia.epsilon_vote, "inf" as the TOML string "inf"; the
# deck: 100 training + 50 validation images per participant, 30% corrupted, DP-SGD delta 1e-5):
#   grid        Figs. 4 and 10: participants {100, 200, 500, 1000} x eps {0.5, 0.75, 1, 2, inf},
#               lia.rounds=0 (filtering only), in two settings:
#                 noniid  lia.alpha=0.1, lia.corruption="label_shift"
#                 iid     lia.alpha="inf", lia.corruption="random_label"
#               -> ROOT/NAME/grid/<setting>/p<P>_eps<E>
#   corruption  Table II: lia.corrupted_fraction {0, 0.1, 0.2, 0.3, 0.4}, 500 participants,
#               eps 1, noniid, rounds 0 -> ROOT/NAME/corruption/c<F>
#   fl          Fig. 3: FL after filtering, the deck's 25 rounds and all seven methods (none,
#               oracle, krum, trimmed_mean, centered_clipping, lia, lia_cc), 500 participants,
#               eps 1 -> ROOT/NAME/fl/<setting>
#   minority    Fig. 5: [lia.minority] fractions [0.05, 0.1, 0.15, 0.2] of class 0, 64 newcomers
#               per fraction, 500 participants lacking class 0, eps 1, noniid, rounds 0
#               -> ROOT/NAME/minority
#   signcheck   Fig. 9: lia.sign_check=50 (exact influence of 50 contributors by retraining),
#               200 participants, eps {0.5, 1, 2, inf}, noniid, rounds 0
#               -> ROOT/NAME/signcheck/eps<E>
#
# Report (unless --no-report or --dry-run): analysis/lia_report.py ROOT --figures ROOT/figures,
# for whatever exists under ROOT (every variant): the grid, corruption, FL, minority and
# sign-check tables, the comparison of the variants on the runs they share, and the issue's
# targets.
#
# A run whose results.h5 already exists is skipped, so an interrupted sweep resumes where it
# stopped (fluence writes results.h5.partial and renames it only when complete). Every command is
# printed before it runs. A failed run does not stop the others: the failures are listed at the
# end, the report still covers what exists, and the exit status is 1 (2 for a usage error).
# A stop signal (USR1, TERM, INT; what jobs/*.sbatch forward on a SLURM time limit) starts no
# further run and exits with status 4; rerunning continues (`fluence lia` checkpoints after the
# filtering stage and after each FL method: a run that left a chk_*.h5 resumes from it with
# --restart latest).
#
# Cost (measured on 2 ranks of a 2-core machine shared with other jobs; wall time per run,
# MPI start-up and data loading included): about 3-8 s at 100 or 200 participants, 6-25 s at 500
# and 20-30 s at 1,000 (filtering only); an FL run (25 rounds x 7 methods, 500 participants) 65-85
# s; a sign-check run (50 exact retrains) 35-50 s. All five families with both settings: about
# 15-20 minutes.
#
# Environment: FLUENCE (the binary, default build/fluence), MPIRUN (the launcher, default
# scripts/mpirun.sh, which allows running as root and oversubscription; e.g. MPIRUN=srun),
# PYTHON (default /usr/bin/python3 when present), LIA_SET (see --set).
#
# Examples:
#   scripts/run_lia_experiments.sh --ranks 2
#   scripts/run_lia_experiments.sh grid --settings noniid --participants 100,200 \
#       --epsilons 1,inf --out /tmp/lia-try
#   scripts/run_lia_experiments.sh grid --baseline model --participants 500 --epsilons 1,inf
#   scripts/run_lia_experiments.sh fl --dry-run
#   sbatch jobs/lia.sbatch         # the five families, one SLURM array task each
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/experiments.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/experiments.sh"
deck="$repo/inputs/lia_fashion_mnist.toml"
all_families=(grid corruption fl minority signcheck)
all_settings=(noniid iid)
grid_participants=(100 200 500 1000)
grid_epsilons=(0.5 0.75 1 2 inf)
signcheck_epsilons=(0.5 1 2 inf)
corrupted_fractions=(0 0.1 0.2 0.3 0.4)
minority_fractions="[0.05, 0.1, 0.15, 0.2]"
minority_class=0
minority_runs=64
eps_set=()
setting_set=()
sign_check=50
signcheck_participants=200
main_participants=500
main_epsilon=1

# eps_args EPS: set eps_set to the --set pair of both epsilons ("inf" as the TOML string "inf")
eps_args() {
  local value="$1"
  [ "$value" = inf ] && value='"inf"'
  eps_set=(--set "lia.epsilon_train=$value" --set "lia.epsilon_vote=$value")
}

# setting_args SETTING: set setting_set to the --set words of a data setting
setting_args() {
  case "$1" in
    noniid) setting_set=(--set lia.alpha=0.1 --set 'lia.corruption="label_shift"') ;;
    iid) setting_set=(--set 'lia.alpha="inf"' --set 'lia.corruption="random_label"') ;;
  esac
}

root="out/lia"
families=()
baseline=median
variant=""
settings_arg=""
participants_arg=""
epsilons_arg=""
while [ $# -gt 0 ]; do
  case "$1" in
    --baseline) [ $# -ge 2 ] || die "--baseline needs a value"; baseline="$2"; shift 2 ;;
    --baseline=*) baseline="${1#--baseline=}"; shift ;;
    --variant) [ $# -ge 2 ] || die "--variant needs a value"; variant="$2"; shift 2 ;;
    --variant=*) variant="${1#--variant=}"; shift ;;
    --settings) [ $# -ge 2 ] || die "--settings needs a value"; settings_arg="$2"; shift 2 ;;
    --settings=*) settings_arg="${1#--settings=}"; [ -n "$settings_arg" ] ||
      die "--settings needs a value"; shift ;;
    --participants) [ $# -ge 2 ] || die "--participants needs a value"
      participants_arg="$2"; shift 2 ;;
    --participants=*) participants_arg="${1#--participants=}"; [ -n "$participants_arg" ] ||
      die "--participants needs a value"; shift ;;
    --epsilons) [ $# -ge 2 ] || die "--epsilons needs a value"; epsilons_arg="$2"; shift 2 ;;
    --epsilons=*) epsilons_arg="${1#--epsilons=}"; [ -n "$epsilons_arg" ] ||
      die "--epsilons needs a value"; shift ;;
    *) if take_shared_option "$@"; then shift "$taken"; else families+=("$1"); shift; fi ;;
  esac
done

check_ranks
[ -n "$root" ] || die "--out needs a non-empty directory"
case "$baseline" in
  median | model) ;;
  *) die "--baseline must be median or model (got '$baseline')" ;;
esac
[ -n "$variant" ] || variant="$baseline"
if ! [[ "$variant" =~ ^[A-Za-z0-9_.+-]+$ ]] || [ "$variant" = figures ]; then
  die "--variant: '$variant' is no valid directory name (letters, digits, _ . + -; not 'figures')"
fi
if [ -n "$only" ]; then
  list="$(split_list --only "$only" "${all_families[@]}")" || exit 2
  mapfile -t more <<<"$list"
  families+=("${more[@]}")
fi
for family in ${families[@]+"${families[@]}"}; do
  case " ${all_families[*]} " in
    *" $family "*) ;;
    *) die "unknown family '$family' (known: ${all_families[*]})" ;;
  esac
done
[ ${#families[@]} -gt 0 ] || families=("${all_families[@]}")
settings=("${all_settings[@]}")
if [ -n "$settings_arg" ]; then
  list="$(split_list --settings "$settings_arg" "${all_settings[@]}")" || exit 2
  mapfile -t settings <<<"$list"
fi
participants=("${grid_participants[@]}")
if [ -n "$participants_arg" ]; then
  list="$(split_list --participants "$participants_arg")" || exit 2
  mapfile -t participants <<<"$list"
  for p in "${participants[@]}"; do
    if ! [[ "$p" =~ ^[1-9][0-9]*$ ]] || [ "$p" -lt 3 ]; then
      die "--participants: '$p' is not an integer >= 3"
    fi
  done
fi
epsilons_grid=("${grid_epsilons[@]}")
epsilons_sign=("${signcheck_epsilons[@]}")
if [ -n "$epsilons_arg" ]; then
  list="$(split_list --epsilons "$epsilons_arg")" || exit 2
  mapfile -t epsilons_grid <<<"$list"
  for e in "${epsilons_grid[@]}"; do
    [ "$e" = inf ] || [[ "$e" =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$ ]] ||
      die "--epsilons: '$e' is neither a positive number nor inf"
  done
  epsilons_sign=("${epsilons_grid[@]}")
fi
# LIA_SET words first, then the --set options (the last of a key wins)
env_sets=()
if [ -n "${LIA_SET:-}" ]; then
  read -r -a words <<<"$LIA_SET"
  for word in "${words[@]}"; do
    [[ "$word" == ?*=* ]] || die "LIA_SET: '$word' is not key=value"
    env_sets+=(--set "$word")
  done
fi
for ((i = 0; i < ${#extra[@]}; i++)); do
  if [ "${extra[i]}" = --set ]; then
    [[ "${extra[i + 1]}" == ?*=* ]] || die "--set needs key=value (got '${extra[i + 1]}')"
  fi
done
extra=(--set "lia.vote_baseline=\"$baseline\"" ${env_sets[@]+"${env_sets[@]}"}
  ${extra[@]+"${extra[@]}"})
[ -f "$deck" ] || die "no deck $deck"

locate_tools

base="$root/$variant"

# lia_run DIR SET...: run `fluence lia DECK SET... --out DIR` unless DIR/results.h5 exists
lia_run() {
  run_or_skip "$1" lia "$deck" "${@:2}"
}

run_family() {
  local family="$1" setting p e f
  echo "== $family"
  case "$family" in
    grid)
      for setting in "${settings[@]}"; do
        setting_args "$setting"
        for p in "${participants[@]}"; do
          for e in "${epsilons_grid[@]}"; do
            eps_args "$e"
            lia_run "$base/grid/$setting/p${p}_eps$e" "${setting_set[@]}" "${eps_set[@]}" \
              --set "lia.participants=$p" --set lia.rounds=0
          done
        done
      done
      ;;
    corruption)
      setting_args noniid
      eps_args "$main_epsilon"
      for f in "${corrupted_fractions[@]}"; do
        lia_run "$base/corruption/c$f" "${setting_set[@]}" "${eps_set[@]}" \
          --set "lia.participants=$main_participants" --set "lia.corrupted_fraction=$f" \
          --set lia.rounds=0
      done
      ;;
    fl)
      eps_args "$main_epsilon"
      for setting in "${settings[@]}"; do
        setting_args "$setting"
        lia_run "$base/fl/$setting" "${setting_set[@]}" "${eps_set[@]}" \
          --set "lia.participants=$main_participants"
      done
      ;;
    minority)
      setting_args noniid
      eps_args "$main_epsilon"
      lia_run "$base/minority" "${setting_set[@]}" "${eps_set[@]}" \
        --set "lia.participants=$main_participants" --set lia.rounds=0 \
        --set "lia.minority.fractions=$minority_fractions" \
        --set "lia.minority.class=$minority_class" --set "lia.minority.runs=$minority_runs"
      ;;
    signcheck)
      setting_args noniid
      for e in "${epsilons_sign[@]}"; do
        eps_args "$e"
        lia_run "$base/signcheck/eps$e" "${setting_set[@]}" "${eps_set[@]}" \
          --set "lia.participants=$signcheck_participants" --set "lia.sign_check=$sign_check" \
          --set lia.rounds=0
      done
      ;;
  esac
}

echo "# lia experiments: ${families[*]} (variant $variant, vote baseline $baseline) into $base" \
  "with $ranks rank(s)"
for family in "${families[@]}"; do
  run_family "$family"
done
print_run_counts

if [ "$dry_run" -eq 0 ] && [ "$report" -eq 1 ]; then
  # the report covers every variant and family under ROOT (not only the runs made now)
  if [ -n "$(find "$root" -name results.h5 -print -quit 2>/dev/null)" ]; then
    echo "== report"
    run_report lia_report.py "$root" --figures "$root/figures"
  else
    echo "# report: no complete run under $root"
  fi
fi
finish
