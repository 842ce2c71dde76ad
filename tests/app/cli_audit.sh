#!/usr/bin/env bash
# `fluence audit` (issue 39, the LDP audit): a deck's randomized response measured as it runs, one
# case per attribute and distinct eps (a per-client override makes a second case), each measured eps
# within 5% of the configured one, its lower bound below it, the inference accuracy within a point
# of the Bayes bound, bitwise identical on 1, 2 and 3 ranks; a deck randomizing nothing is refused.
# Usage: cli_audit.sh FLUENCE_BINARY SOURCE_DIR (one CTest entry per script: tests/CMakeLists.txt)
set -u
# shellcheck source=tests/app/cli_common.sh
source "$(dirname "$0")/cli_common.sh"

write_deck ldp_audit <<'EOF2'
seed = 3
[data.synthetic]
rows = 1500
numeric = 2
categorical = [4]
classes = 3
[partition]
clients = 6
[ldp]
attributes = ["cat0", "label"]
epsilon = 2.0
[[ldp.client]]
id = 4
epsilon = { label = 0.7 }
EOF2
ok=1
run_on_ranks audit audit "$work/ldp_audit.toml" "1 2 3"
if [ "$ok" -eq 1 ] && "$python" - "$work/audit1/results.h5" "$work/audit2/results.h5" "$work/audit3/results.h5" <<'PY'
import sys, h5py, numpy as np
files = [h5py.File(p, "r") for p in sys.argv[1:]]
f = files[0]
cases = [c.decode() if isinstance(c, bytes) else c for c in f["/audit/ldp/case"][...]]
eps = f["/audit/ldp/epsilon"][...]
assert cases == ["cat0", "label", "label"] and list(eps) == [2.0, 0.7, 2.0], (cases, eps)
assert list(f["/audit/ldp/domain"][...]) == [4, 3, 3]
estimate, lower = f["/audit/ldp/epsilon_estimate"][...], f["/audit/ldp/epsilon_lower"][...]
assert np.all(np.abs(estimate - eps) <= 0.05 * eps), estimate
assert np.all(lower <= eps) and np.all(lower > 0.7 * eps), lower
assert np.all(np.abs(f["/audit/ldp/inference_accuracy"][...] - f["/audit/ldp/bayes_accuracy"][...]) < 0.01)
assert f["/audit/confidence"][()] == 0.95
for other in files[1:]:
    for name in ("epsilon_estimate", "epsilon_lower", "inference_accuracy", "draws"):
        assert np.array_equal(f["/audit/ldp/" + name][...], other["/audit/ldp/" + name][...]), name
PY
then pass "audit: LDP audit per attribute and eps (5% of the configured eps, Bayes accuracy), bitwise on 1-3 ranks"
else fail "audit: LDP audit"; fi

write_deck no_ldp <<'EOF2'
seed = 3
[data.synthetic]
rows = 300
[partition]
clients = 3
EOF2
COMMAND=audit expect_input_error audit_no_ldp "randomizes no attribute" "$work/no_ldp.toml"

cli_summary
