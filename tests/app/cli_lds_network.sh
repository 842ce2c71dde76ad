#!/usr/bin/env bash
# FL-LDS on a network (issue 40; docs/math.md §1.8, §3): the subset federations retrained as the
# network was trained (influence.retrain_mode = "full": the deck's FedAvg schedule, the same seeds,
# cohorts and shuffles, without the left-out clients), every dataset but the timings bitwise
# identical on 1 and 2 ranks; the first-order estimator (influence.solver = "first_order") on the
# same subsets and ground truth, and equal to exact CG where the Hessian is a multiple of the
# identity.
# Usage: cli_lds_network.sh FLUENCE_BINARY SOURCE_DIR (one CTest entry per script: tests/CMakeLists.txt)
set -u
# shellcheck source=tests/app/cli_common.sh
source "$(dirname "$0")/cli_common.sh"

# A tiny tanh MLP by FedAvg: 20 clients, a fixed cohort of 2 per round for 3 rounds, so that most
# clients are never in a cohort; 8 subsets, each without 2 clients.
write_deck ldsnet <<'TOML'
seed = 8
[data.synthetic]
rows = 2400
numeric = 4
categorical = [3]
classes = 3
signal = 2.0
[partition]
clients = 20
scheme = "dirichlet"
alpha = 0.5
[model]
type = "mlp"
hidden = [8]
activation = "tanh"
l2 = 1e-2
[federation]
rounds = 3
client_sampling = "fixed"
sampling_rate = 0.1
batch_size = 32
learning_rate = 0.1
[influence]
solver = "cg"
rtol = 1e-10
retrain_mode = "full"
lds_subsets = 8
lds_fraction = 0.1
TOML

ok=1
run_on_ranks cg influence "$work/ldsnet.toml" "1 2"
run_on_ranks fo influence "$work/ldsnet.toml" "2" --set 'influence.solver="first_order"'
if [ "$ok" -eq 1 ] && compare_runs "$work/cg1/results.h5" "$work/cg2/results.h5" &&
  "$python" - "$work/cg2/results.h5" "$work/fo2/results.h5" <<'PY'
import sys, h5py, numpy as np
cg, fo = (h5py.File(p, "r") for p in sys.argv[1:])
def ranks(v):  # brute force: 1 + the number below, ties the mean of their places
    return np.array([1 + sum(w < x for w in v) + (sum(w == x for w in v) - 1) / 2 for x in v])
for f in (cg, fo):
    ids, predicted, actual = f["/lds/clients"][...], f["/lds/predicted"][...], f["/lds/actual"][...]
    assert ids.shape == (8, 2) and np.all(np.diff(ids, axis=1) > 0)
    estimate = f["/influence/client_removal_estimate"][...]
    assert np.allclose(predicted, estimate[ids].sum(axis=1), rtol=1e-12, atol=0)
    ra, rb = ranks(predicted), ranks(actual)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    rho = (ra * rb).sum() / np.sqrt((ra * ra).sum() * (rb * rb).sum())
    assert abs(f["/lds/score"][()] - rho) <= 1e-12, (f["/lds/score"][()], rho)
    assert f["/influence/timing/s_test"][()] > 0
# The retrain is the training schedule without the clients: a subset whose clients were never in a
# cohort retrains to the trained model bit for bit (a Newton retrain, or other draws, would move
# it), the others do not.
actual = cg["/lds/actual"][...]
assert np.any(actual == 0.0) and np.any(actual != 0.0), actual
# The same seed: the first-order run has the same subsets and ground truth.
assert (cg["/lds/clients"][...] == fo["/lds/clients"][...]).all()
assert (cg["/lds/actual"][...] == fo["/lds/actual"][...]).all()
assert fo["/ihvp/solver"][()].decode() == "first_order" and fo["/ihvp/iterations"][0] == 0
print(f"    LDS: cg {cg['/lds/score'][()]:.3f}, first order {fo['/lds/score'][()]:.3f}; "
      f"{int(np.sum(actual == 0.0))} of 8 subsets without any sampled client")
PY
then pass "FL-LDS on an mlp with schedule retrains: bitwise on 1-2 ranks, first-order on the same ground truth"
else fail "FL-LDS on an mlp"; fi

# H + damping I with damping 1e6 is 1e6 I to about 1e-6: the first-order estimate (H ~ c I, c the
# Rayleigh quotient along grad L_test) is then exact CG's to that order.
ok=1
for solver in cg first_order; do
  run_on_ranks "id_$solver" influence "$work/ldsnet.toml" "2" --set "influence.solver=\"$solver\"" \
    --set influence.damping=1e6 --set influence.spectrum=false --set influence.lds_subsets=0
done
if [ "$ok" -eq 1 ] && "$python" - "$work/id_cg2/results.h5" "$work/id_first_order2/results.h5" <<'PY'
import sys, h5py, numpy as np
cg, fo = (h5py.File(p, "r")["/influence/client_removal_estimate"][...] for p in sys.argv[1:])
error = np.abs(fo - cg).max() / np.abs(cg).max()
assert error <= 1e-4 and np.abs(cg).max() > 0, error
print(f"    first order vs CG at H ~ 1e6 I: relative difference {error:.1e}")
PY
then pass "first-order estimator = exact CG where H is a multiple of the identity"
else fail "first-order estimator against CG at H ~ c I"; fi

cli_summary
