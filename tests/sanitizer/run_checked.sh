#!/usr/bin/env bash
# run_checked.sh REPORT_DIR COMMAND...: runs one test of the sanitizer build (`make sanitize`,
# FLUENCE_SANITIZE=ON) with the sanitizers' options, and fails it if any process wrote a report.
#
# The options reach every rank: mpirun (scripts/mpirun.sh) starts the ranks of one host with its own
# environment, the two-host test's launch agent and SLURM's srun/sbatch pass theirs on too. Each
# process writes its reports to REPORT_DIR/<sanitizer>.<pid> instead of stderr, so that a report is
# seen even in a run whose exit code a script does not check, or whose exit code a launcher
# replaces (mpirun exits 1 after a TERM whatever the ranks return); the reports are printed here.
#  - halt_on_error: the first report ends the process (ASan does so anyway; UBSan is built with
#    -fno-sanitize-recover, this keeps the options honest), with a non-zero exit code.
#  - Leaks are detected; suppressions.txt names the third-party libraries whose allocations are
#    left for the operating system at exit (never Fluence's code), see the comments there.
set -u
reports=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$reports"
mkdir -p "$reports"
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:check_initialization_order=1:log_path=$reports/asan"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$reports/ubsan"
export LSAN_OPTIONS="suppressions=$here/suppressions.txt:print_suppressions=0"
"$@"
code=$?
found=$(find "$reports" -type f | sort)
if [ -n "$found" ]; then
  for report in $found; do
    echo "==== sanitizer report $report"
    cat "$report"
  done
  echo "FAILED: $(echo "$found" | wc -l) sanitizer report(s) in $reports"
  [ "$code" -ne 0 ] || code=1
fi
exit "$code"
