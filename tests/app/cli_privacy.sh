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

# PLD and PRV from the command line on Opacus's published case (z = 1.5, q = 0.04, 2,249 steps,
# delta = 1e-5: PRV eps 6.777395712150674 with eps_error 0.01): PRV's upper end within 1e-6 of it,
# PLD at most that and within 0.011 below, inside PRV's bracket, both below RDP; the inverse
# through PLD; an unknown accountant is a usage error (exit 1) naming the allowed ones.
if "$fluence" privacy --noise 1.5 --sampling-rate 0.04 --steps 2249 --delta 1e-5 --accountant pld --json >"$work/pld.json" 2>&1 &&
  "$fluence" privacy --noise 1.5 --sampling-rate 0.04 --steps 2249 --delta 1e-5 --accountant prv --json >"$work/prv.json" 2>&1 &&
  "$fluence" privacy --noise 1.5 --sampling-rate 0.04 --steps 2249 --delta 1e-5 --json >"$work/rdp.json" 2>&1 &&
  "$fluence" privacy --epsilon 2 --sampling-rate 0.01 --steps 1000 --delta 1e-5 --accountant pld --json >"$work/pld_inverse.json" 2>&1 &&
  "$python" - "$work/pld.json" "$work/prv.json" "$work/rdp.json" "$work/pld_inverse.json" <<'PY'
import json, sys
pld, prv, rdp, inverse = (json.load(open(p)) for p in sys.argv[1:])
opacus = 6.777395712150674
assert pld["accountant"] == "pld" and prv["accountant"] == "prv", (pld, prv)
assert abs(prv["epsilon"] - opacus) < 1e-6 and prv["epsilon"] == prv["epsilon_upper"], prv
assert opacus - 0.011 <= pld["epsilon"] <= opacus, pld
assert prv["epsilon_lower"] <= pld["epsilon"] <= prv["epsilon_upper"], (pld, prv)
assert pld["epsilon"] < rdp["epsilon"] and prv["epsilon"] < rdp["epsilon"], (pld, prv, rdp)
assert inverse["epsilon"] <= 2.0 and inverse["noise_multiplier"] > 0, inverse
PY
then pass "privacy --accountant pld|prv: Opacus's PRV value, PLD inside the bracket and below RDP, inverse by PLD"
else fail "privacy --accountant pld|prv"; cat "$work/pld.json" "$work/prv.json"; fi
"$fluence" privacy --noise 1 --sampling-rate 0.01 --steps 10 --delta 1e-5 --accountant moments >"$work/unknown.log" 2>&1
code=$?
if [ "$code" -eq 1 ] && grep -q "rdp,pld,prv" "$work/unknown.log"; then pass "privacy --accountant: an unknown name is refused with the allowed ones"
else fail "privacy --accountant unknown (exit $code)"; cat "$work/unknown.log"; fi

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
