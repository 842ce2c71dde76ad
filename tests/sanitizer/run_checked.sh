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
# - fast_unwind_on_malloc=0: Open MPI, PETSc and OpenBLAS are built without frame pointers, where
#   the fast unwinder stops, so a leak's stack would end in the allocating library; the slow
#   unwinder (about a third slower here) gives whole stacks, which the suppressions need to name
#   one PETSc function instead of all of PETSc.
# - allocator_may_return_null=1: malloc (PETSc's, HDF5's, OpenBLAS's) returns NULL for an
#   allocation too large for the machine as in a normal build, for the library to report; ASan's
#   operator new still ends the process instead of throwing std::bad_alloc (see below).
# - OMPI_MCA_coll=^adapt: Open MPI loads its coll/adapt component, which Fluence never uses, and
#   unloads it again, leaving 30 bytes whose stack lies in the unloaded module and so cannot be
#   named by any suppression; excluded, it is never loaded.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:check_initialization_order=1:fast_unwind_on_malloc=0:allocator_may_return_null=1:log_path=$reports/asan"
export OMPI_MCA_coll="^adapt"
# Tells a test that it runs under the sanitizers (cli_bad_inputs.sh skips its one case that needs
# operator new to throw std::bad_alloc, which ASan's does not).
export FLUENCE_SANITIZER_BUILD=1
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$reports/ubsan"
export LSAN_OPTIONS="suppressions=$here/suppressions.txt:print_suppressions=0"
# GCC 12's UndefinedBehaviorSanitizer, linked beside AddressSanitizer, ignores log_path and
# prints its reports to stderr (measured: a signed overflow in a test program wrote no file). The
# first report still ends the process with a non-zero exit code (-fno-sanitize-recover), and the
# test's own output is kept and searched for one, so a report that reaches it fails the test even
# where a script does not check that exit code; a run whose stderr a script discards is caught by
# its exit code only.
"$@" 2>&1 | tee "$reports/.output"
code=${PIPESTATUS[0]}
if grep -q "runtime error: " "$reports/.output"; then
  echo "FAILED: an UndefinedBehaviorSanitizer report (runtime error) in the output above"
  [ "$code" -ne 0 ] || code=1
fi
rm -f "$reports/.output"
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
