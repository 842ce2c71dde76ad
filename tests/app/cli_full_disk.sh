#!/usr/bin/env bash
# A full disk under the results and under a checkpoint (issue 41): one line naming the cause and the
# file ("no space left on device writing <file>"), exit 3 on every rank, no HDF5 error stack, no
# MPI_ABORT banner, no crash at exit, no partial file; the checkpoints written before the disk
# filled stay resumable, and a resume from them gives the uninterrupted run's bits. The disk is a
# 1 MiB tmpfs filled to a chosen level, so the test needs root (mount): it exits 77 (skipped)
# where it cannot mount one.
# Usage: cli_full_disk.sh FLUENCE_BINARY SOURCE_DIR
set -u
# shellcheck source=tests/app/cli_common.sh
source "$(dirname "$0")/cli_common.sh"

disk="$work/disk"
mkdir -p "$disk"
if [ "$(id -u)" -ne 0 ] || ! mount -t tmpfs -o size=1M fluence_full_disk "$disk" 2>/dev/null; then
  echo "skipped: cannot mount a tmpfs here (needs root)"
  exit 77
fi
trap 'umount "$disk" 2>/dev/null; rm -rf "$work"' EXIT
export OMPI_MCA_odls_base_sigkill_timeout=0
qs="$source_dir/inputs/quickstart.toml"

# fill KIB: the disk holds only a filler of KIB KiB (1 MiB in all) and nothing else.
fill() {
  rm -rf "${disk:?}"/*
  dd if=/dev/zero of="$disk/filler" bs=1K count="$1" 2>/dev/null
}

# check_full NAME FILE: the run just made met the full disk writing FILE (exit 3 and one line
# naming the cause and FILE, nothing else) or wrote its whole results.h5 (exit 0); $work/stderr.
check_full() {
  local name=$1 file=$2 code=$3 problems=""
  if [ "$code" -eq 0 ]; then
    "$python" -c "import h5py, sys; h5py.File(sys.argv[1], 'r')['/model/theta'][...]" \
      "$disk/o/results.h5" 2>/dev/null || problems+=" exit 0 without a readable results.h5;"
  else
    [ "$code" -eq 3 ] || problems+=" exit $code;"
    [ "$(grep -c -F "error: no space left on device writing $file" "$work/stderr")" -eq 1 ] ||
      problems+=" not one line naming the cause and $file;"
    [ "$(grep -c "^error" "$work/stderr")" -eq 1 ] || problems+=" not one error line;"
    [ ! -e "$disk/o/results.h5" ] || problems+=" results.h5 written;"
  fi
  if grep -q -E "HDF5-DIAG|MPI_ABORT|Segmentation|signal|terminate called" "$work/stderr"; then
    problems+=" an error stack, an abort or a crash on stderr;"
  fi
  ! ls "$disk"/o/*.partial >/dev/null 2>&1 || problems+=" a .partial file left;"
  if [ -n "$problems" ]; then
    fail "$name:$problems"
    head -8 "$work/stderr" | cut -c 1-200 | sed 's/^/    /'
    return 1
  fi
}

# The results file at every level of a nearly full disk, from no room at all to enough (about 150
# KiB for the quick start's 60 KiB file): the disk fills before the first array, in the middle of
# the file, at its final close, or not at all. Every run ends cleanly either way.
refused=0 written=0 broken=0 ranks=1
for kib in $(seq 1016 -6 872); do
  fill "$kib"
  "$mpirun" -n "$ranks" "$fluence" train "$qs" --quiet --out "$disk/o" --set federation.rounds=2 \
    >"$work/stdout" 2>"$work/stderr"
  code=$?
  if check_full "results.h5 with $((1024 - kib)) KiB free, $ranks rank(s)" "$disk/o/results.h5" "$code"; then
    [ "$code" -eq 0 ] && written=$((written + 1)) || refused=$((refused + 1))
  else
    broken=$((broken + 1))
  fi
  ranks=$((3 - ranks))
  rm -rf "$disk/o"
done
if [ "$broken" -eq 0 ] && [ "$refused" -ge 3 ] && [ "$written" -ge 1 ]; then
  pass "results.h5 on a disk with 8 to 152 KiB free: $refused refused in one line, $written written"
else
  fail "results.h5 on a nearly full disk: $refused refused, $written written, $broken not clean"
fi
# A checkpoint on a full disk.
fill 1010
"$mpirun" -n 2 "$fluence" train "$qs" --quiet --out "$disk/o" --set federation.rounds=4 \
  --set output.checkpoint_every=1 >"$work/stdout" 2>"$work/stderr"
code=$?
if [ "$code" -eq 3 ] && check_full "first checkpoint on a full disk" "$disk/o/chk_000001.h5" "$code"; then
  pass "first checkpoint on a full disk: one line naming it"
else
  fail "first checkpoint on a full disk (exit $code)"
fi

# Checkpoints every round until the disk fills: the ones written stay, and --restart latest from
# them (after space is freed) ends with the same bits as a run that never stopped.
fill 600
"$mpirun" -n 2 "$fluence" train "$qs" --quiet --out "$disk/o" --set federation.rounds=30 \
  --set output.checkpoint_every=1 --set output.keep=100 >"$work/stdout" 2>"$work/stderr"
code=$?
written=$(find "$disk/o" -name 'chk_*.h5' | wc -l)
failed_at=$(sed -n 's/.*no space left on device writing .*chk_0*\([0-9]*\)\.h5.*/\1/p' "$work/stderr")
if [ "$code" -eq 3 ] && [ "$written" -ge 1 ] && [ "$failed_at" = "$((written + 1))" ] &&
  ! ls "$disk"/o/*.partial >/dev/null 2>&1; then
  pass "checkpoints until the disk filled: $written kept, chk $failed_at refused in one line"
else
  fail "checkpoints until the disk filled (exit $code, $written kept, failed at '$failed_at')"
  head -5 "$work/stderr" | sed 's/^/    /'
fi
mkdir -p "$work/resumed"
cp "$disk"/o/chk_*.h5 "$work/resumed/"
rm -rf "${disk:?}"/*
"$mpirun" -n 2 "$fluence" train "$qs" --quiet --out "$work/resumed" --set federation.rounds=30 \
  --set output.checkpoint_every=1 --set output.keep=100 --restart latest >"$work/resume.log" 2>&1 ||
  fail "resume after the full disk"
"$mpirun" -n 2 "$fluence" train "$qs" --quiet --out "$work/whole" --set federation.rounds=30 \
  >"$work/whole.log" 2>&1 || fail "uninterrupted run"
if compare_runs "$work/whole/results.h5" "$work/resumed/results.h5"; then
  pass "--restart latest after the full disk: the uninterrupted run's bits"
else
  fail "--restart latest after the full disk differs from the uninterrupted run"
fi

cli_summary
