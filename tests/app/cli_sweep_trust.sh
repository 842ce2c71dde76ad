#!/usr/bin/env bash
# Retrains of `fluence fldp` and `fluence whatif` that say whether they can be trusted (issue 41,
# as `influence` does for its retrains: tests/app/cli_influence_trust.sh; docs/outputs.md): each
# retrain's gradient norm and convergence flag, the unconverged named in one warning; for fldp the
# curvature at each retrained point with saddle points flagged; for whatif the metrics also over
# the cells whose retrains all converged.
# Usage: cli_sweep_trust.sh FLUENCE_BINARY SOURCE_DIR (one CTest entry per script)
set -u
source "$(dirname "$0")/cli_common.sh"

deck="$source_dir/inputs/fldp_synthetic.toml"
small=(--set data.synthetic.rows=3000 --set 'fldp.sweep.counts=[1]' --set 'fldp.sweep.epsilon=[0.5]'
  --set fldp.sweep.remove=false --set fldp.retrain_seeds=2 --set fldp.newton_steps=0
  --set federation.tolerance=1e-8)

# Converged: every retrain of the logistic model reaches the tolerance at a minimum, and its
# curvature is known exactly: the softmax loss is invariant to adding one vector to every class's
# weights, so the Hessian is singular along it and lambda_min of the objective is model.l2 (1e-3)
# itself, to SLEPc's relative tolerance (influence.eigen_tolerance 1e-8; 1e-7 l2 leaves it room).
"$mpirun" -n 2 "$fluence" fldp "$deck" --out "$work/ok" --quiet "${small[@]}" >"$work/ok.log" 2>&1
if "$python" - "$work/ok/results.h5" "$work/ok.log" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
log = open(sys.argv[2]).read()
for prefix, shape in (("expected_retrain", (2,)), ("retrain", (2, 2))):
    norm = f[f"/fldp/{prefix}_gradient_norm"][...]
    assert norm.shape == shape and np.all(norm <= 1e-8), (prefix, norm)
    assert np.all(f[f"/fldp/{prefix}_converged"][...] == 1)
    eig = f[f"/fldp/{prefix}_min_eigenvalue"][...]
    assert np.all(np.abs(eig - 1e-3) <= 1e-10), (prefix, eig)
    assert np.all(f[f"/fldp/{prefix}_saddle"][...] == 0)
assert "did not converge" not in log and "stopped above federation.tolerance" not in log
PY
then pass "fldp: converged retrains flagged so, their curvature model.l2 (no saddle points)"
else fail "fldp: trust of converged retrains"; sed 's/^/    /' "$work/ok.log" | tail -5; fi

# One Newton step per retrain (federation.polish_max_steps = 1) leaves them above the tolerance:
# each flag follows its gradient norm, and the warning names every unconverged retrain.
"$mpirun" -n 2 "$fluence" fldp "$deck" --out "$work/short" --quiet "${small[@]}" \
  --set federation.polish_max_steps=1 >"$work/short.log" 2>&1
if "$python" - "$work/short/results.h5" "$work/short.log" <<'PY'
import re, sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
log = open(sys.argv[2]).read()
expected = f["/fldp/expected_retrain_gradient_norm"][...]
expected_flags = f["/fldp/expected_retrain_converged"][...]
assert np.array_equal(expected_flags, (expected <= 1e-8).astype(expected_flags.dtype))
draws = f["/fldp/retrain_gradient_norm"][...]
flags = f["/fldp/retrain_converged"][...]
assert np.array_equal(flags, (draws <= 1e-8).astype(flags.dtype)), (draws, flags)
names = []  # per case: its expected retrain, then its draws
for c in range(flags.shape[0]):
    names += [f"case {c} expected"] if not expected_flags[c] else []
    names += [f"case {c} draw {d}" for d in range(flags.shape[1]) if not flags[c, d]]
assert names, "one Newton step should leave some retrain above the tolerance"
line = re.search(r"fldp: (\d+) of 6 retrains stopped above federation.tolerance = 1.0e-08 \(([^;]*);", log)
assert line and int(line.group(1)) == len(names) and line.group(2) == ", ".join(names), (line, names)
assert log.count("retrains stopped above federation.tolerance") == 1
PY
then pass "fldp: unconverged retrains flagged in the file and named in one warning"
else fail "fldp: trust of unconverged retrains"; sed 's/^/    /' "$work/short.log" | tail -5; fi

# whatif: two Newton steps per retrain leave some above whatif.retrain_tolerance and some not. Each
# flag follows its gradient norm, the warning counts and names them, and the trusted MAE is the
# estimate's against the mean retrain over the eps whose retrains (both draws and the expectation)
# all converged, NaN where none did; the seed's MAE keeps every cell.
"$mpirun" -n 2 "$fluence" whatif "$source_dir/inputs/whatif_synthetic.toml" --out "$work/whatif" --quiet \
  --set whatif.test_sample=500 --set whatif.repeats=2 --set 'whatif.epsilons=[1.0, 3.0, 6.0]' \
  --set 'whatif.variants=["rr_l"]' --set whatif.retrain_max_iterations=2 >"$work/whatif.log" 2>&1
if "$python" - "$work/whatif/results.h5" "$work/whatif.log" <<'PY'
import re, sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
log = open(sys.argv[2]).read()
v = f["/whatif/rr_l"]
tolerance = 1e-8  # whatif.retrain_tolerance's default
actual_ok = v["actual_converged"][...]
expected_ok = v["expected_retrain_converged"][...]
assert np.array_equal(actual_ok, (v["actual_gradient_norm"][...] <= tolerance).astype(actual_ok.dtype))
assert np.array_equal(expected_ok, (v["expected_retrain_gradient_norm"][...] <= tolerance).astype(expected_ok.dtype))
unconverged = int((actual_ok == 0).sum() + (expected_ok == 0).sum())
assert 0 < unconverged < actual_ok.size + expected_ok.size, unconverged
line = re.search(r"whatif: (\d+) retrains stopped above whatif.retrain_tolerance = 1.0e-08 \(([^;]*);", log)
assert line and int(line.group(1)) == unconverged, line
assert line.group(2).startswith("rr_l fraction 0.05 eps 1 ") and line.group(2).count(", ") + 1 == min(unconverged, 20)
estimated, actual = v["estimated"][...], v["actual"][...]
trusted = np.all(actual_ok == 1, axis=2) & (expected_ok == 1)
assert trusted.any() and not trusted.all()
for k in range(estimated.shape[0]):
    use = trusted[k]
    mae = np.mean(np.abs(estimated[k, use] - actual[k, use].mean(axis=1))) if use.any() else np.nan
    assert np.allclose(v["trusted/mae"][k], mae, rtol=1e-12, equal_nan=True), (k, v["trusted/mae"][k], mae)
    full = np.mean(np.abs(estimated[k] - actual[k].mean(axis=1)))
    assert np.isclose(v["mae"][k], full, rtol=1e-12), (k, v["mae"][k], full)
# The curvature at each retrained point: rr_l leaves the rows' features, so h_S stays convex and,
# as for fldp, its smallest eigenvalue is model.l2 (the softmax invariance direction): no saddles.
for prefix in ("actual", "expected_retrain"):
    eig = v[f"{prefix}_min_eigenvalue"][...]
    assert np.all(np.abs(eig - 1e-3) <= 1e-10), (prefix, eig)
    assert np.all(v[f"{prefix}_saddle"][...] == 0)
assert "saddle points" not in log
PY
then pass "whatif: unconverged retrains flagged and named, curvature model.l2, metrics also over the trusted cells"
else fail "whatif: trust of retrains"; sed 's/^/    /' "$work/whatif.log" | tail -5; fi

cli_summary
