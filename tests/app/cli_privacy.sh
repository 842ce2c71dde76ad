#!/usr/bin/env bash
# `fluence privacy` (the RDP accountant against tensorflow/privacy's numbers) and `fluence
# feo2-theory` (FeO2's Lemma 1 simulation, identical on 1 and 3 ranks).
# --- fluence privacy (issue 8: the RDP accountant) -------------------------------------------------
# Usage: cli_privacy.sh FLUENCE_BINARY SOURCE_DIR (one CTest entry per script: tests/CMakeLists.txt)
set -u
# shellcheck source=tests/app/cli_common.sh
source "$(dirname "$0")/cli_common.sh"

# --- fluence privacy (issue 8: the RDP accountant) -------------------------------------------------
if "$fluence" privacy --noise 1.3 --sampling-rate 0.0025 --steps 6000 --delta 1e-5 --json >"$work/privacy.json" 2>&1 &&
  "$fluence" privacy --epsilon 0.7242234026106222 --sampling-rate 0.0025 --steps 6000 --delta 1e-5 --json \
    >"$work/privacy_inverse.json" 2>&1 &&
  "$python" - "$work/privacy.json" "$work/privacy_inverse.json" <<'PY'
import json, sys
forward = json.load(open(sys.argv[1]))
assert list(forward) == ["epsilon", "delta", "order"], forward
assert abs(forward["epsilon"] - 0.7242234026) < 1e-9 and forward["order"] == 19 and forward["delta"] == 1e-5
inverse = json.load(open(sys.argv[2]))
assert abs(inverse["noise_multiplier"] - 1.3) < 1e-7, inverse
PY
then pass "privacy: --json eps and order (tensorflow/privacy reference), --epsilon inverts it"; else fail "privacy accountant CLI"; fi

write_deck feo2_theory <<'EOF'
seed = 5
[feo2_theory]
clients = 30
samples = 4
trials = 3000
ratios = [0.2, 1.0]
EOF
"$mpirun" -n 1 "$fluence" feo2-theory "$work/feo2_theory.toml" --out "$work/pe1" >"$work/pe1.log" 2>&1 &&
  "$mpirun" -n 3 "$fluence" feo2-theory "$work/feo2_theory.toml" --out "$work/pe3" >"$work/pe3.log" 2>&1
if grep -q "(r\*)" "$work/pe1.log" && "$python" - "$work/pe1/results.h5" "$work/pe3/results.h5" <<'PY'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
assert a["/feo2_theory/ratio"].shape == (3,) and a["/feo2_theory/ratio"][2] == a["/feo2_theory/r_star"][()]
for path in ("/feo2_theory/empirical_variance", "/feo2_theory/theoretical_variance"):
    assert np.array_equal(a[path][...], b[path][...]), path
PY
then pass "feo2-theory: Lemma 1 table, r*, identical on 1 and 3 ranks"; else fail "feo2-theory"; fi

cli_summary
