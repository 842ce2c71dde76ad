#!/usr/bin/env bash
# The layering check (scripts/check_layering.py, docs/architecture.md "Modules"): the repository's
# own sources pass it, and it fails on includes planted against the order in a small tree of its
# own (a lower module including a higher one, through the include path and by a relative path,
# and one command module including another), naming each of them, while the allowed ones pass.
# Usage: layering_tests.sh SOURCE_DIR
set -u
source_dir=$1
check="$source_dir/scripts/check_layering.py"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
fail() { failed=1; echo "FAILED: $1"; }

/usr/bin/python3 "$check" "$source_dir" >"$work/tree.txt" 2>&1 ||
  { fail "the repository's includes go against the layering"; cat "$work/tree.txt"; }

plant() {  # plant FILE INCLUDE
  mkdir -p "$work/planted/$(dirname "$1")"
  printf '#include "%s"\n' "$2" >>"$work/planted/$1"
}
plant src/fldp/allowed.cpp fluence/influence/ihvp.hpp      # a peer the order allows
plant src/io/allowed.cpp fluence/fl/federation.hpp         # a lower module
plant src/io/allowed.cpp local.hpp                          # its own folder
plant src/core/bad.cpp fluence/fl/federation.hpp
plant include/fluence/model/bad.hpp fluence/io/results.hpp
plant src/io/relative.cpp ../app/checkpoints.hpp
plant src/influence/peer.cpp fluence/fldp/fldp.hpp
/usr/bin/python3 "$check" "$work/planted" >"$work/planted.txt" 2>&1
code=$?
if [ "$code" -ne 1 ] || [ "$(grep -c "includes" "$work/planted.txt")" -ne 4 ] ||
  ! grep -q "^src/core/bad.cpp:1: includes \"fluence/fl/federation.hpp\" (fl), above core" "$work/planted.txt" ||
  ! grep -q "^include/fluence/model/bad.hpp:1: .*(io), above model" "$work/planted.txt" ||
  ! grep -q "^src/io/relative.cpp:1: .*(app), above io" "$work/planted.txt" ||
  ! grep -q "^src/influence/peer.cpp:1: .*(fldp)" "$work/planted.txt" || grep -q "allowed" "$work/planted.txt"; then
  fail "planted includes against the layering: exit $code"
  sed 's/^/    /' "$work/planted.txt"
fi
[ "$failed" -eq 0 ] && echo "ok: the tree passes the layering check; 4 planted includes fail it, 3 allowed pass"
exit "$failed"
