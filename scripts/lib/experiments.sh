# shellcheck shell=bash
# Shared by scripts/run_{fldp,whatif,feo2}_experiments.sh, which source it right after
# `set -euo pipefail`: the shared options, the run-or-skip loop over fluence runs, the tool
# locations, the report and the final failure listing. Error messages are prefixed with the
# sourcing script's name, and its header comment is its --help.
#
# Stop signals (USR1, TERM, INT; jobs/lib/requeue.sh sends USR1 to the script's whole process
# group on a SLURM time limit or preemption) do not kill the script: the running fluence gets them
# too, writes a checkpoint and exits with code 4, and the script then exits with code 4 instead of
# starting the next run. Rerunning resumes: finished runs are skipped, and a run with a checkpoint
# continues from it (--restart latest). A signal to the script alone lets the current run finish.

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
script_path="${BASH_SOURCE[1]}"
script_name="$(basename "$script_path" .sh)"

# the shared options' settings (each script sets its own default results root)
ranks="${SLURM_NTASKS:-2}"
root=""
only=""
dry_run=0
report=1
extra=()
# the runs done and skipped, and the directories of the failed ones
ran=0
skipped=0
failed=()
# the exit status of the report (0 when it succeeded or did not run)
report_status=0
# a stop signal was received: no further run starts, and the script exits with code 4
stop_requested=0
trap 'stop_requested=1' USR1 TERM INT

# split_list OPTION LIST [KNOWN...]: print the entries of the comma-separated LIST, one a line,
# each checked against KNOWN when given (duplicates dropped, order kept); a usage error (exit 2)
# otherwise
split_list() {
  local option="$1" list="$2" item seen=" " items=() count=0
  shift 2
  local known=" $* " names
  names="$(IFS=,; echo "$*")"
  IFS=',' read -r -a items <<<"$list"
  for item in ${items[@]+"${items[@]}"}; do
    [ -n "$item" ] || die "$option: empty entry in '$list'"
    if [ $# -gt 0 ]; then
      case "$known" in
        *" $item "*) ;;
        *) die "$option: unknown entry '$item' (known: $names)" ;;
      esac
    fi
    case "$seen" in
      *" $item "*) continue ;;
    esac
    seen+="$item "
    echo "$item"
    count=$((count + 1))
  done
  [ "$count" -gt 0 ] || die "$option needs at least one entry"
}

# usage: print the sourcing script's header comment (its --help)
usage() {
  sed -n '2,/^set -euo pipefail/{/^set -euo/d;s/^# \{0,1\}//;p}' "$script_path"
}

# die MESSAGE...: print a usage error and exit with status 2
die() {
  echo "$script_name: error: $*" >&2
  exit 2
}

# take_shared_option ARGS...: apply the shared option $1, setting taken; return 1 if $1 is no option
# shellcheck disable=SC2034 # taken, root, only and report are read by the sourcing script
take_shared_option() {
  taken=1
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --ranks) [ $# -ge 2 ] || die "--ranks needs a value"; ranks="$2"; taken=2 ;;
    --ranks=*) ranks="${1#--ranks=}" ;;
    --out) [ $# -ge 2 ] || die "--out needs a value"; root="$2"; taken=2 ;;
    --out=*) root="${1#--out=}" ;;
    --only) [ $# -ge 2 ] || die "--only needs a value"; only="$2"; taken=2 ;;
    --only=*) only="${1#--only=}" ;;
    --set) [ $# -ge 2 ] || die "--set needs key=value"; extra+=(--set "$2"); taken=2 ;;
    --set=*) extra+=(--set "${1#--set=}") ;;
    --quiet) extra+=(--quiet) ;;
    --dry-run) dry_run=1 ;;
    --no-report) report=0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) return 1 ;;
  esac
}

# check_ranks: a usage error unless --ranks is a positive integer
check_ranks() {
  [[ "$ranks" =~ ^[1-9][0-9]*$ ]] || die "--ranks must be a positive integer (got '$ranks')"
}

# locate_tools: set fluence, mpirun and PYTHON from the environment (fluence must exist to run)
locate_tools() {
  fluence="${FLUENCE:-$repo/build/fluence}"
  if [ -n "${MPIRUN:-}" ]; then
    read -r -a mpirun <<<"$MPIRUN"
  else
    mpirun=("$repo/scripts/mpirun.sh")
  fi
  if [ -z "${PYTHON:-}" ]; then
    if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
  fi
  if [ "$dry_run" -eq 0 ] && [ ! -x "$fluence" ]; then
    die "no executable $fluence (build it with make, or set FLUENCE=/path/to/fluence)"
  fi
}

# print_cmd ARGS...: print the command as a copy-pasteable shell line (quoting where needed)
print_cmd() {
  local out="+" word q="'"
  for word in "$@"; do
    if [[ "$word" =~ ^[A-Za-z0-9_./=:,+@%-]+$ ]]; then
      out+=" $word"
    else
      out+=" '${word//$q/$q\\$q$q}'"
    fi
  done
  echo "$out"
}

# exit_stopped MESSAGE: report a stop by a signal (with the runs so far) and exit with code 4
exit_stopped() {
  echo "$script_name: stopped by a signal $*; rerun the script to resume" >&2
  print_run_counts
  exit 4
}

# run_or_skip DIR ARGS...: run `fluence ARGS... --out DIR` unless DIR/results.h5 exists; with a
# checkpoint in DIR, resume from it (--restart latest); exit 4 when a stop signal came
run_or_skip() {
  local dir="$1"
  shift
  if [ -f "$dir/results.h5" ]; then
    echo "= skip $dir (results.h5 exists)"
    skipped=$((skipped + 1))
    return 0
  fi
  [ "$stop_requested" -eq 0 ] || exit_stopped "before $dir"
  local restart=()
  if compgen -G "$dir/chk_*.h5" >/dev/null; then restart=(--restart latest); fi
  local cmd=("${mpirun[@]}" -n "$ranks" "$fluence" "$@" ${extra[@]+"${extra[@]}"}
    ${restart[@]+"${restart[@]}"} --out "$dir")
  print_cmd "${cmd[@]}"
  [ "$dry_run" -eq 1 ] && return 0
  mkdir -p "$dir"
  local start=$SECONDS status=0
  "${cmd[@]}" || status=$?
  # 4: fluence wrote a checkpoint and stopped; any other status after a stop signal: the run was
  # cut off (a command without checkpoints yet) and starts again on the next attempt
  if [ "$status" -eq 4 ] || [ "$stop_requested" -eq 1 ]; then
    exit_stopped "during $dir (fluence exit status $status, after $((SECONDS - start)) s)"
  fi
  if [ "$status" -ne 0 ]; then
    echo "! FAILED (exit status $status) after $((SECONDS - start)) s: $dir" >&2
    failed+=("$dir")
    return 0
  fi
  echo "= done $dir in $((SECONDS - start)) s"
  ran=$((ran + 1))
}

# print_run_counts: print how many runs were done, skipped and failed (or that it was a dry run)
print_run_counts() {
  if [ "$dry_run" -eq 1 ]; then
    echo "# dry run: nothing was run"
  else
    echo "# $ran run(s) done, $skipped skipped (results.h5 existed), ${#failed[@]} failed"
  fi
}

# run_report REPORT ARGS...: run analysis/REPORT ARGS... with PYTHON, a failure into report_status
run_report() {
  local cmd=("$PYTHON" "$repo/analysis/$1" "${@:2}") rc=0
  print_cmd "${cmd[@]}"
  "${cmd[@]}" || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "$script_name: the report exited with status $rc" >&2
    report_status="$rc"
  fi
}

# finish: list the failed runs and exit 1 if there were any, else exit with report_status
finish() {
  if [ ${#failed[@]} -gt 0 ]; then
    echo "$script_name: ${#failed[@]} run(s) failed (rerun the script to retry them):" >&2
    printf '  %s\n' "${failed[@]}" >&2
    exit 1
  fi
  exit "$report_status"
}
