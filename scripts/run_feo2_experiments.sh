#!/usr/bin/env bash
# Run seed 004's FeO2 evaluation (Aldaghri, Mahdavifar & Beirami, §5: Table 1, federated learning
# with opt-out DP and Ditto personalization) with `fluence train` on the deck
# inputs/feo2_fashion_mnist.toml, then summarize it with analysis/feo2_report.py.
#
# Usage:
#   scripts/run_feo2_experiments.sh [--setups noniid,skewed] [--only LIST] [--ranks N]
#                                   [--out ROOT] [--set key=value ...] [--quiet]
#                                   [--dry-run] [--no-report]
#
#   --setups LIST  comma-separated subset of the set-ups noniid,skewed (default: both)
#   --only LIST    comma-separated subset of the algorithms nonprivate,dpfedavg,feo2_r0.01,
#                  feo2_r0.1,feo2_r0.9 (default: all five)
#   --ranks N      MPI ranks per run (default 2, or $SLURM_NTASKS inside a SLURM job)
#   --out ROOT     results root (default out/feo2): algorithm <a> of set-up <s> goes to
#                  ROOT/<s>/<a>
#   --set K=V      extra deck override appended to every run after the algorithm's own
#                  (repeatable; e.g. --set federation.rounds=40 --set
#                  personalization.metrics_every=10 for a quick trial; the last --set of a key
#                  wins)
#   --quiet        pass --quiet to fluence (no per-round progress lines)
#   --dry-run      print the commands without running them (and without the report)
#   --no-report    do not run analysis/feo2_report.py at the end
#
# Set-ups (seed Table 1, on Fashion-MNIST instead of MNIST: 2,000 clients holding 30 images of a
# single label each, 5% sampled per round, 5% opting out, client-level (3.6, 1e-4)-DP for the
# private clients, Ditto with lambda_p = lambda_np = 0.005; see the deck):
#   noniid   the opt-out clients are drawn at random among all clients,
#   skewed   the FeO2 runs draw them among the holders of label 7 (privacy.opt_out_label=7; the
#            seed's skewed variant draws them among the holders of digit 7).
#
# Algorithms (every run: `fluence train inputs/feo2_fashion_mnist.toml --set ... --out DIR`):
#   nonprivate   privacy.mode="none", privacy.opt_out_fraction=0: FedAvg + Ditto, no DP (every
#                client counts as opt-out in the /feo2 metrics)
#   dpfedavg     privacy.mode="dp-fedavg", privacy.opt_out_fraction=0: every client private
#   feo2_r<r>    privacy.mode="feo2", privacy.ratio=<r> for r = 0.01, 0.1, 0.9: FeO2's two-step
#                aggregation with the deck's 5% opt-out clients
# The nonprivate and dpfedavg runs have no opt-out clients, so they are the same in both set-ups
# (run in both all the same, so that each set-up's table is complete on its own).
#
# Report (unless --no-report or --dry-run): analysis/feo2_report.py ROOT --figures ROOT/figures,
# for whatever exists under ROOT: per set-up, the Table 1 analog and the gain of FeO2 over
# DP-FedAvg; figures of Acc_g and of the clipping norm per round.
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
#   scripts/run_feo2_experiments.sh --ranks 2
#   scripts/run_feo2_experiments.sh --setups noniid --out /tmp/feo2-try \
#       --set federation.rounds=40 --set personalization.metrics_every=10
#   scripts/run_feo2_experiments.sh --only dpfedavg,feo2_r0.1 --dry-run
#   sbatch jobs/feo2.sbatch        # both set-ups, one SLURM array task each
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib/experiments.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/experiments.sh"
deck="$repo/inputs/feo2_fashion_mnist.toml"
all_setups=(noniid skewed)
all_algorithms=(nonprivate dpfedavg feo2_r0.01 feo2_r0.1 feo2_r0.9)
skewed_label=7

root="out/feo2"
setups_arg=""
while [ $# -gt 0 ]; do
  case "$1" in
    --setups) [ $# -ge 2 ] || die "--setups needs a value"; setups_arg="$2"; shift 2 ;;
    --setups=*) setups_arg="${1#--setups=}"; [ -n "$setups_arg" ] || die "--setups needs a value"
      shift ;;
    --only=*) only="${1#--only=}"; [ -n "$only" ] || die "--only needs a value"; shift ;;
    *) take_shared_option "$@" ||
      die "unexpected argument '$1' (set-ups go in --setups; see --help)"
      shift "$taken" ;;
  esac
done

check_ranks
[ -n "$root" ] || die "--out needs a non-empty directory"
for ((i = 0; i < ${#extra[@]}; i++)); do
  if [ "${extra[i]}" = --set ]; then
    [[ "${extra[i + 1]}" == ?*=* ]] || die "--set needs key=value (got '${extra[i + 1]}')"
  fi
done
setups=("${all_setups[@]}")
if [ -n "$setups_arg" ]; then
  list="$(split_list --setups "$setups_arg" "${all_setups[@]}")" || exit 2
  mapfile -t setups <<<"$list"
fi
algorithms=("${all_algorithms[@]}")
if [ -n "$only" ]; then
  list="$(split_list --only "$only" "${all_algorithms[@]}")" || exit 2
  mapfile -t algorithms <<<"$list"
fi
[ -f "$deck" ] || die "no deck $deck"

locate_tools

# train_run DIR SET...: run `fluence train DECK SET... --out DIR` unless DIR/results.h5 exists
train_run() {
  run_or_skip "$1" train "$deck" "${@:2}"
}

run_setup() {
  local setup="$1" base="$root/$1" algorithm skew=()
  [ "$setup" = skewed ] && skew=(--set "privacy.opt_out_label=$skewed_label")
  for algorithm in "${algorithms[@]}"; do
    echo "== $setup $algorithm"
    case "$algorithm" in
      nonprivate)
        train_run "$base/$algorithm" --set 'privacy.mode="none"' --set privacy.opt_out_fraction=0
        ;;
      dpfedavg)
        train_run "$base/$algorithm" --set 'privacy.mode="dp-fedavg"' \
          --set privacy.opt_out_fraction=0
        ;;
      feo2_r*)
        train_run "$base/$algorithm" --set 'privacy.mode="feo2"' \
          --set "privacy.ratio=${algorithm#feo2_r}" ${skew[@]+"${skew[@]}"}
        ;;
    esac
  done
}

echo "# feo2 experiments: ${setups[*]} (${algorithms[*]}) into $root with $ranks rank(s)"
for setup in "${setups[@]}"; do
  run_setup "$setup"
done
print_run_counts

if [ "$dry_run" -eq 0 ] && [ "$report" -eq 1 ]; then
  # the report covers every set-up and algorithm under ROOT (not only the ones run now)
  found=0
  for setup in "${all_setups[@]}"; do
    for algorithm in "${all_algorithms[@]}"; do
      if [ -f "$root/$setup/$algorithm/results.h5" ]; then found=1; fi
    done
  done
  if [ "$found" -eq 1 ]; then
    echo "== report"
    run_report feo2_report.py "$root" --figures "$root/figures"
  else
    echo "# report: no complete run under $root"
  fi
fi
finish
