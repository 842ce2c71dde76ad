#!/usr/bin/env bash
# CPU counts in the scripts ignore the OpenMP variables (issue 41): GNU nproc honours
# OMP_NUM_THREADS and OMP_THREAD_LIMIT, so under an HPC module set-up's OMP_NUM_THREADS=1 a bare
# `nproc` printed 1 (the SLURM test then made a 1-CPU node whose 2-task jobs stayed PENDING, and
# `make` built with -j 1). Checked:
#  - no script, job or Makefile line of the repository calls nproc other than as
#    `env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc` (which still honours CPU affinity);
#  - with both variables exported as 1, the Makefile's JOBS is that count (`make -n`, nothing built).
# The SLURM test itself runs with them exported (tests/CMakeLists.txt).
# Usage: cpu_count_tests.sh SOURCE_DIR
set -u
source_dir=$1
failed=0
fail() { failed=1; echo "FAILED: $1"; }

bare=$(grep -rnE --exclude=cpu_count_tests.sh '(^|[^[:alnum:]_-])nproc([^[:alnum:]_-]|$)' "$source_dir/Makefile" "$source_dir/scripts" \
  "$source_dir/jobs" "$source_dir/tests" "$source_dir/bench" "$source_dir/.ci" 2>/dev/null |
  grep -vE '^[^:]+:[0-9]+:[[:space:]]*#' | grep -vF 'env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc')
[ -z "$bare" ] || fail "nproc without 'env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT':
$bare"

expected=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
commands=$(OMP_NUM_THREADS=1 OMP_THREAD_LIMIT=1 make -n -C "$source_dir" build SKIP_DEPS=1 \
  BUILD_DIR=/nonexistent/build 2>&1)
grep -qx "cmake --build /nonexistent/build -j $expected" <<<"$commands" ||
  fail "make with OMP_NUM_THREADS=1: expected 'cmake --build ... -j $expected', got:
$commands"

[ "$failed" -eq 0 ] && echo "ok: CPU counts ignore OMP_NUM_THREADS and OMP_THREAD_LIMIT ($expected CPUs)"
exit "$failed"
