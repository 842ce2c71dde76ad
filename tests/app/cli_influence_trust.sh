#!/usr/bin/env bash
# Influence outputs that say whether they can be trusted (issue 41): the curvature at each
# retrained point with saddle points flagged, unconverged retrains named and left out of the
# trusted statistics, warnings of rank-local solves from every rank, the model's stationarity
# flagged in the file, residuals above influence.rtol flagged and warned; for `influence`, `fldp`
# and `whatif` (docs/outputs.md).
# Usage: cli_influence_trust.sh FLUENCE_BINARY SOURCE_DIR (one CTest entry per script)
set -u
# shellcheck source=tests/app/cli_common.sh
source "$(dirname "$0")/cli_common.sh"

influence_deck="$source_dir/inputs/influence_synthetic.toml"
mlp_deck="$source_dir/inputs/influence_mlp.toml"

# run NAME RANKS COMMAND DECK ARGS...: $work/NAME/results.h5, console in $work/NAME.log.
run() {
  local name=$1 ranks=$2 command=$3 deck=$4
  shift 4
  "$mpirun" -n "$ranks" "$fluence" "$command" "$deck" --out "$work/$name" --quiet "$@" \
    >"$work/$name.log" 2>&1 || { echo "    $command $name failed:"; tail -5 "$work/$name.log" | sed 's/^/    /'; }
}

# A converged run of the logistic model: every retrain converged at a minimum, so the trusted
# statistics are the full ones, bitwise. The curvature at each retrained point is known exactly:
# the softmax loss is invariant to adding one vector to every class's weights, so its Hessian is
# singular along that direction and lambda_min of the objective is model.l2 itself; SLEPc's
# relative tolerance (influence.eigen_tolerance 1e-8) bounds the error, 1e-7 l2 leaves it room.
run base 2 influence "$influence_deck" --set influence.vectors=false
if "$python" - "$work/base/results.h5" "$influence_deck" "$work/base.log" <<'PY'
import sys, tomllib, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
l2 = tomllib.load(open(sys.argv[2], "rb"))["model"]["l2"]
log = open(sys.argv[3]).read()
N = f["/influence/client_removal_estimate"].shape[0]
assert np.all(f["/influence/retrain_converged"][...] == 1)
assert np.all(f["/influence/retrain_saddle"][...] == 0)
eig = f["/influence/retrain_min_eigenvalue"][...]
assert eig.shape == (N,) and np.all(np.abs(eig - l2) <= 1e-7 * l2), eig
for name in ("spearman", "mae"):
    assert f[f"/influence/{name}_trusted"][()] == f[f"/influence/{name}"][()], name
    assert f[f"/influence/{name}_trusted"].attrs["retrains"] == N
residual = f["/ihvp/relative_residual"][...]
assert np.array_equal(f["/ihvp/residual_above_tolerance"][...], (residual > 1e-10).astype(int))
assert not f["/ihvp/residual_above_tolerance"][...].any()
g = f["/influence/model_gradient_norm"]
assert g[()] == f["/model/gradient_norm"][()] and g.attrs["stationary"] == 1, g[()]
assert g.attrs["tolerance"] == 1e-10
assert "saddle" not in log and "did not converge" not in log and "not a stationary" not in log
PY
then pass "influence: converged minima flagged as such, lambda_min = l2 at every retrained point, trusted = full statistics"
else fail "influence: trust flags of a converged run"; fi

# Retrains stopped by federation.polish_max_steps = 3 short of tolerance 1e-8: after three Newton
# steps half of them are below it (|grad h| 6.5e-10 .. 7.1e-8), half above, and the trained
# model (6.0e-8) is not stationary. The unconverged are flagged, named on the console, and left
# out of the trusted statistics, which are those of the others (numpy/scipy over the subset).
run steps 2 influence "$influence_deck" --set influence.vectors=false \
  --set federation.polish_max_steps=3 --set federation.tolerance=1e-8
if "$python" - "$work/steps/results.h5" "$work/steps.log" <<'PY'
import re, sys, h5py, numpy as np
from scipy.stats import spearmanr
f = h5py.File(sys.argv[1], "r")
log = open(sys.argv[2]).read()
norm = f["/influence/retrain_gradient_norm"][...]
converged = f["/influence/retrain_converged"][...]
assert np.array_equal(converged, (norm <= 1e-8).astype(int)), (norm, converged)
assert 0 < converged.sum() < converged.size, converged
bad = np.flatnonzero(converged == 0)
for k in bad:
    assert f"the retrain without client {k} stopped at |grad h|" in log, k
named = re.search(r"retrains did not converge \(without clients ([0-9, ]+)\)", log).group(1)
assert [int(k) for k in named.split(", ")] == bad.tolist(), named
keep = converged == 1
est, act = f["/influence/client_removal_estimate"][...], f["/influence/client_removal_actual"][...]
rho = spearmanr(est[keep], act[keep]).correlation
mae = np.mean(np.abs(est[keep] - act[keep]))
assert abs(f["/influence/spearman_trusted"][()] - rho) <= 1e-12, (f["/influence/spearman_trusted"][()], rho)
assert abs(f["/influence/mae_trusted"][()] - mae) <= 1e-12 * mae
assert f["/influence/spearman_trusted"].attrs["retrains"] == keep.sum()
g = f["/influence/model_gradient_norm"]
assert g.attrs["stationary"] == 0 and g[()] > 1e-8 and g[()] == f["/model/gradient_norm"][()]
assert "influence: the scores are computed at a model that is not a stationary point" in log
PY
then pass "influence: unconverged retrains flagged, named, left out of the trusted statistics; the model's non-stationarity flagged"
else fail "influence: unconverged retrains"; fi

# Saddle points: a tanh MLP whose weights are all zero is a stationary point in the weights (tanh(0)
# = 0 makes their gradient vanish exactly) with negative curvature where the two layers couple;
# Newton without a client moves only the output biases and stops there, converged. Every retrain
# is flagged a saddle (lambda_min < 0), named, and the trusted statistics are empty (NaN).
mlp_set=(--set partition.clients=6 --set federation.rounds=1 --set 'federation.polish="none"')
"$mpirun" -n 2 "$fluence" train "$mlp_deck" --out "$work/mlptrain" --quiet "${mlp_set[@]}" >/dev/null 2>&1
"$python" -c "
import h5py, shutil, sys
shutil.copy(sys.argv[1], sys.argv[2])
h5py.File(sys.argv[2], 'r+')['/model/theta'][...] = 0.0" "$work/mlptrain/results.h5" "$work/zero.h5"
run saddle 2 influence "$mlp_deck" "${mlp_set[@]}" --set influence.vectors=false --model "$work/zero.h5"
if "$python" - "$work/saddle/results.h5" "$work/saddle.log" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
log = open(sys.argv[2]).read()
eig = f["/influence/retrain_min_eigenvalue"][...]
assert np.all(eig < -0.1), eig
assert np.all(f["/influence/retrain_saddle"][...] == 1)
assert np.all(f["/influence/retrain_converged"][...] == 1)  # stationary, yet not minima
assert np.all(f["/influence/retrain_gradient_norm"][...] <= 1e-10)
for k in range(eig.size):
    assert f"the retrain without client {k} stopped at a saddle point" in log, k
assert f"{eig.size} of {eig.size} retrains stopped at saddle points" in log
assert f["/influence/spearman_trusted"].attrs["retrains"] == 0
assert np.isnan(f["/influence/spearman_trusted"][()]) and np.isnan(f["/influence/mae_trusted"][()])
assert f["/influence/model_gradient_norm"].attrs["stationary"] == 0
PY
then pass "influence: retrains stopped at saddle points flagged (lambda_min < 0) and left out"
else fail "influence: saddle points"; fi

# Solves above influence.rtol: CG capped at 2 iterations; the flags are exactly residual > rtol,
# and the warning names the solves (s_test first, then the clients).
run residual 2 influence "$influence_deck" --set influence.retrain=false --set influence.max_iterations=2
if "$python" - "$work/residual/results.h5" "$work/residual.log" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
log = open(sys.argv[2]).read()
residual = f["/ihvp/relative_residual"][...]
flags = f["/ihvp/residual_above_tolerance"][...]
assert np.array_equal(flags, (residual > 1e-10).astype(int)) and flags.all(), (residual, flags)
assert f"influence: {flags.size} of {flags.size} solves ended with a relative residual above influence.rtol" in log
assert "(largest %.3e): s_test, client 0, client 1" % residual.max() in log
PY
then pass "influence: residuals above influence.rtol flagged per solve and warned"
else fail "influence: residual flags"; fi

# Warnings of rank-local solves (client scope: each client's own Hessian on the rank that hosts it)
# reach the console from every rank, named, in client order: the same lines on 1, 2 and 3 ranks
# (without the gathering, 2 ranks printed only rank 0's clients).
for ranks in 1 2 3; do
  run client$ranks "$ranks" influence "$influence_deck" --set 'influence.hessian="client"' \
    --set influence.max_iterations=2 --set influence.retrain=false --set influence.vectors=false
  grep '^warning: client ' "$work/client$ranks.log" >"$work/client$ranks.warnings"
done
expected=$(for k in $(seq 0 19); do echo "warning: client $k: IHVP: CG did not converge after 2 iterations"; done)
if [ "$(sed 's/; relative residual.*//' "$work/client1.warnings")" = "$expected" ] &&
  cmp -s "$work/client1.warnings" "$work/client2.warnings" &&
  cmp -s "$work/client1.warnings" "$work/client3.warnings"; then
  pass "influence: warnings of clients on every rank printed by rank 0, named, in client order, alike on 1-3 ranks"
else
  fail "influence: warnings from every rank"
  head -3 "$work/client2.warnings" | sed 's/^/    /'
fi

# fldp: the client-scope solves of clients hosted on ranks 1 and 2 (3 ranks: clients 2, 3, 4) warn
# as on 1 rank; per-case residual flags; the trained model's stationarity.
for ranks in 1 3; do
  run fldp$ranks "$ranks" fldp "$source_dir/inputs/fldp_synthetic.toml" \
    --set 'influence.hessian="client"' --set influence.max_iterations=2 --set fldp.retrain=false \
    --set fldp.newton_steps=0
  grep '^warning: ' "$work/fldp$ranks.log" >"$work/fldp$ranks.warnings"
done
if cmp -s "$work/fldp1.warnings" "$work/fldp3.warnings" &&
  grep -q '^warning: client 2: IHVP: CG did not converge' "$work/fldp3.warnings" &&
  "$python" - "$work/fldp3/results.h5" "$work/fldp3.log" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
log = open(sys.argv[2]).read()
assert f["/clients/rank"][2] > 0  # client 2 is changed in cases 4-6 and hosted off rank 0
residual = f["/fldp/ihvp_relative_residual"][...]
flags = f["/fldp/ihvp_residual_above_tolerance"][...]
assert np.array_equal(flags, (residual > 1e-10).astype(int)) and flags.all(), (residual, flags)
assert "cases 0, 1, 2, 3, 4, 5, 6 (/fldp/ihvp_residual_above_tolerance)" in log
g = f["/fldp/model_gradient_norm"]
assert g.attrs["stationary"] == 1 and g[()] == f["/model/gradient_norm"][()] <= 1e-10
PY
then pass "fldp: warnings of every rank's solves, residual flags per case, the model's stationarity"
else fail "fldp: trust flags"; fi

# whatif: a model without the polish is flagged non-stationary in the file; an s_test capped at one
# CG iteration is flagged above influence.rtol and warned.
run whatif 2 whatif "$source_dir/inputs/whatif_synthetic.toml" --set 'federation.polish="none"' \
  --set 'influence.solver="cg"' --set influence.max_iterations=1 --set whatif.retrain=false \
  --set whatif.second_order=false
if "$python" - "$work/whatif/results.h5" "$work/whatif.log" <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
log = open(sys.argv[2]).read()
g = f["/whatif/model_gradient_norm"]
assert g.attrs["stationary"] == 0 and g[()] == f["/model/gradient_norm"][()] > 1e-10, g[()]
assert "whatif: the scores are computed at a model that is not a stationary point" in log
r = f["/whatif/ihvp_relative_residual"]
assert r[()] > 1e-10 and r.attrs["above_tolerance"] == 1
assert "whatif: the s_test solve ended with a relative residual" in log
PY
then pass "whatif: non-stationary model and s_test residual above influence.rtol flagged in the file"
else fail "whatif: trust flags"; fi

cli_summary
