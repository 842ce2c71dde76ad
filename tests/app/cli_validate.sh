#!/usr/bin/env bash
# `fluence --help`, `--version` and `fluence validate`: the resolved deck echoed once, every section
# checked before a deck is called valid, `--command NAME`, every deck in inputs/ validates, and
# `fluence keys --markdown` prints the key tables.
# Usage: cli_validate.sh FLUENCE_BINARY SOURCE_DIR (one CTest entry per script: tests/CMakeLists.txt)
set -u
# shellcheck source=tests/app/cli_common.sh
source "$(dirname "$0")/cli_common.sh"

# --- help, version, validate ---------------------------------------------------------------------
# Every command's --help is as recorded in tests/app/help/ (issue 42: the command table must
# not change what users read); regenerate a file only with the change that means to change it.
ok=1
for help in "$source_dir"/tests/app/help/*.txt; do
  command=$(basename "$help" .txt)
  if [ "$command" = top ]; then "$fluence" --help; else "$fluence" "$command" --help; fi 2>&1 |
    sed 's|^Usage: [^ ]*fluence|Usage: fluence|' | diff -u "$help" - >"$work/help.diff" ||
    { ok=0; echo "    fluence $command --help differs from $help:"; head -20 "$work/help.diff"; }
done
if [ "$ok" -eq 1 ]; then pass "every command's --help as recorded (tests/app/help)"; else fail "--help changed"; fi
if "$fluence" --help | grep -q "train" && "$fluence" train --help | grep -q -- "--set"; then
  pass "help"
else
  fail "help"
fi
if "$fluence" --version | grep -q "^fluence [0-9]"; then pass "version"; else fail "version"; fi
if "$mpirun" -n 2 "$fluence" validate "$source_dir/inputs/quickstart.toml" >"$work/validate" 2>&1 &&
  grep -q "deck is valid" "$work/validate" && grep -q "learning_rate = 0.05" "$work/validate" &&
  grep -q "# partition: 5 clients" "$work/validate" && [ "$(grep -c "deck is valid" "$work/validate")" -eq 1 ]; then
  pass "validate echoes the resolved deck once"
else
  fail "validate"
  head -5 "$work/validate"
fi

"$fluence" validate "$source_dir/inputs/fldp_credit_g.toml" --no-data --set 'partition.sizes=[0.5,0.5]' \
  >"$work/validate_bad.out" 2>"$work/validate_bad.err"
code=$?
if [ "$code" -eq 2 ] && grep -q "partition.sizes has 2 entries" "$work/validate_bad.err" &&
  ! grep -q "deck is valid" "$work/validate_bad.out" &&
  "$mpirun" -n 2 "$fluence" validate "$source_dir/inputs/fldp_credit_g.toml" 2>&1 | grep -q "# fldp: 4 case(s)"; then
  pass "validate checks every section (and the fldp cases) before calling a deck valid"
else
  fail "validate: exit $code on a bad deck"
fi

qs="$source_dir/inputs/quickstart.toml"

# validate --command NAME: that command's checks and the warning about the sections it ignores.
lia_deck_v="$source_dir/inputs/lia_synthetic.toml"
"$mpirun" -n 2 "$fluence" validate "$lia_deck_v" --command lia >"$work/vl.out" 2>"$work/vl.err"
code_lia=$?
"$mpirun" -n 2 "$fluence" validate "$lia_deck_v" --command train >"$work/vt.out" 2>"$work/vt.err"
code_train=$?
"$mpirun" -n 2 "$fluence" validate "$qs" --command whatif >"$work/vw.out" 2>"$work/vw.err"
code_whatif=$?
if [ "$code_lia" -eq 0 ] && grep -q "^# lia: 60 participants" "$work/vl.out" && [ ! -s "$work/vl.err" ] &&
  [ "$code_train" -eq 0 ] && grep -q "warning: fluence train does not read \[lia\]" "$work/vt.err" &&
  [ "$code_whatif" -eq 2 ] && grep -q "whatif.group.attribute is required" "$work/vw.err"; then
  pass "validate --command: lia's checks, train's warning about [lia], whatif's required group"
else
  fail "validate --command (exit codes $code_lia $code_train $code_whatif)"
  cat "$work/vl.err" "$work/vt.err" "$work/vw.err" | sed 's/^/    /' | head -6
fi

# A lia deck whose "public" statistics come from lia's own public rows (warm-up) validates without
# --command: the federated commands, which would need data.public_fraction, are left unchecked.
"$mpirun" -n 2 "$fluence" validate "$lia_deck_v" --set 'data.numeric_scaling="public"' \
  >"$work/vp.out" 2>"$work/vp.err"
code=$?
if [ "$code" -eq 0 ] && grep -q "^# lia: 60 participants" "$work/vp.out" &&
  grep -q "^# data.numeric_scaling = \"public\" takes fluence lia's public rows here" "$work/vp.out" &&
  [ ! -s "$work/vp.err" ]; then
  pass "validate: a lia deck with data.numeric_scaling = \"public\" and no data.public_fraction"
else
  fail "validate of a lia deck with \"public\" scaling (exit $code)"
  sed 's/^/    /' "$work/vp.err" | head -3
fi

bad_decks=""
for deck in "$source_dir"/inputs/*.toml; do
  "$fluence" validate "$deck" --no-data >/dev/null 2>"$work/deck.err" || bad_decks="$bad_decks $(basename "$deck")"
done
if [ -z "$bad_decks" ]; then pass "every deck in inputs/ validates"; else fail "decks that do not validate:$bad_decks"; fi

# `fluence keys --markdown` runs and prints key tables; that they are inputs/README.md's is
# DeckSchema.InputsReadmeKeyTablesAreTheSchemas (tests/app/test_deck_schema.cpp), in-process.
if "$fluence" keys --markdown >"$work/keys.md" && grep -q '^| .federation\.rounds. |' "$work/keys.md"; then
  pass "keys --markdown prints the key tables"
else
  fail "keys --markdown"
  head -5 "$work/keys.md"
fi

cli_summary
