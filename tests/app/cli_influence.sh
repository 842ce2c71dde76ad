#!/usr/bin/env bash
# `fluence influence` (issue 3): the results contract and every dataset bitwise identical on 1-4
# ranks, --model, solver options and solvers, the plot script, an MLP, and stop/resume of the sweep.
# Usage: cli_influence.sh FLUENCE_BINARY SOURCE_DIR (one CTest entry per script: tests/CMakeLists.txt)
set -u
# shellcheck source=tests/app/cli_common.sh
source "$(dirname "$0")/cli_common.sh"

# --- fluence influence (issue 3) ------------------------------------------------------------------
influence_deck="$source_dir/inputs/influence_synthetic.toml"
for ranks in 1 2 3 4; do
  log_view=()  # the 2-rank run also reports its phases
  [ "$ranks" -eq 2 ] && log_view=(-log_view)
  "$mpirun" -n "$ranks" "$fluence" influence "$influence_deck" --out "$work/inf$ranks" --quiet "${log_view[@]}" \
    >"$work/inf$ranks.log" 2>&1 || { fail "influence on $ranks ranks"; sed 's/^/    /' "$work/inf$ranks.log" | tail -5; }
done
check_log_stages influence "$work/inf2.log" "Set-up,Training,IHVP,Retraining,Output"
if "$python" - "$work" <<'PY'
import sys, h5py, numpy as np
work = sys.argv[1]
files = [h5py.File(f"{work}/inf{r}/results.h5", "r") for r in (1, 2, 3, 4)]
f = files[1]
for path in ("/influence/client_removal_estimate", "/influence/client_removal_actual",
             "/influence/spearman", "/influence/mae", "/influence/vectors",
             "/hessian/eigenvalue_min", "/hessian/eigenvalue_max", "/hessian/condition_number",
             "/ihvp/solver", "/ihvp/iterations", "/ihvp/relative_residual", "/model/theta"):
    assert path in f, "missing dataset " + path
N, p = 20, f["/model/theta"].size
assert f["/influence/client_removal_estimate"].shape == (N,)
assert f["/influence/vectors"].shape == (N, p)
assert f["/ihvp/iterations"].shape == (N + 1,)
assert np.all(f["/ihvp/relative_residual"][...] <= 1e-9)
assert f["/influence/spearman"][()] >= 0.95, f["/influence/spearman"][()]
# The vectors were written by their owning ranks: each must reproduce its estimate through the
# test gradient (s_test route vs vector route), so a row written to the wrong place fails.
assert np.all(np.abs(f["/influence/vectors"][...]).sum(axis=1) > 0)
def same(path, a, b):
    x, y = a[path][()], b[path][()]
    if isinstance(x, np.ndarray):  # variable-length strings (object arrays) by value
        return x.tolist() == y.tolist() if x.dtype == object else x.tobytes() == y.tobytes()
    return x == y
names = []
files[0].visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
for name in names:
    if name in ("metrics/wall_time_s", "clients/rank", "metrics/setup_time_s",
                "metrics/peak_memory_bytes", "metrics/rank", "metrics/host") or "/timing/" in name:
        continue
    for r, g in zip((2, 3, 4), files[1:]):
        assert same(name, files[0], g), f"{name} differs between 1 and {r} ranks"
PY
then pass "influence: contract, Spearman >= 0.95, every dataset bitwise identical on 1-4 ranks"; else fail "influence determinism/contract"; fi

# The Kronecker preconditioner (docs/math.md §3.1): every dataset bitwise identical on 1-3 ranks
# (and with -ihvp_pc_type kronecker instead of the key), the estimates within the CG tolerance of
# Jacobi's (rtol 1e-10 times cond(H) ~ 1e3), in fewer iterations in all.
ok=1
for ranks in 1 2 3; do
  "$mpirun" -n "$ranks" "$fluence" influence "$influence_deck" --out "$work/kinf$ranks" --quiet \
    --set 'influence.preconditioner="kronecker"' >"$work/kinf$ranks.log" 2>&1 ||
    { ok=0; tail -3 "$work/kinf$ranks.log" | sed 's/^/    /'; }
done
"$mpirun" -n 2 "$fluence" influence "$influence_deck" --out "$work/kinfopt" --quiet \
  -ihvp_pc_type kronecker >"$work/kinfopt.log" 2>&1 || ok=0
for other in kinf2 kinf3 kinfopt; do
  compare_runs "$work/kinf1/results.h5" "$work/$other/results.h5" || ok=0
done
if [ "$ok" -eq 1 ] && "$python" - "$work/inf1/results.h5" "$work/kinf1/results.h5" <<'PY'
import sys, h5py, numpy as np
jacobi, kronecker = (h5py.File(p, "r") for p in sys.argv[1:3])
assert np.all(kronecker["/ihvp/relative_residual"][...] <= 1e-9)
for path in ("/influence/client_removal_estimate", "/influence/vectors"):
    a, b = jacobi[path][...], kronecker[path][...]
    assert np.max(np.abs(a - b)) <= 1e-6 * np.max(np.abs(a)), (path, np.max(np.abs(a - b)))
ij, ik = jacobi["/ihvp/iterations"][...].sum(), kronecker["/ihvp/iterations"][...].sum()
assert ik < ij, (ik, ij)
print(f"    CG iterations in all: Jacobi {ij}, Kronecker {ik}")
PY
then pass "influence: kronecker preconditioner bitwise on 1-3 ranks and by -ihvp_pc_type, agrees with jacobi in fewer iterations"
else fail "influence: kronecker preconditioner"; fi

"$mpirun" -n 2 "$fluence" train "$influence_deck" --out "$work/inftrain" --quiet >/dev/null 2>&1
"$mpirun" -n 2 "$fluence" influence "$influence_deck" --out "$work/infmodel" --quiet \
  --model "$work/inftrain/results.h5" --set influence.retrain=false >"$work/infmodel.log" 2>&1
if "$python" - "$work/inf2/results.h5" "$work/infmodel/results.h5" <<'PY'
import sys, h5py
a, b = (h5py.File(p, "r") for p in sys.argv[1:3])
for path in ("/model/theta", "/influence/client_removal_estimate", "/influence/vectors"):
    assert a[path][...].tobytes() == b[path][...].tobytes(), path
assert "/influence/client_removal_actual" not in b
PY
then pass "influence --model reuses a trained model (identical estimates)"; else fail "influence --model"; fi

if "$mpirun" -n 2 "$fluence" influence "$influence_deck" --out "$work/infmon" --quiet \
  --set influence.retrain=false --set influence.vectors=false -ihvp_ksp_monitor -hessian_eps_view \
  >"$work/infmon.txt" 2>&1 && grep -q "KSP Residual norm" "$work/infmon.txt" &&
  grep -q "EPS Object" "$work/infmon.txt"; then
  pass "influence: -ihvp_ksp_monitor and -hessian_eps_view pass through"
else
  fail "influence PETSc/SLEPc options"
fi

for solver in explicit lissa; do
  if "$mpirun" -n 2 "$fluence" influence "$influence_deck" --out "$work/inf_$solver" --quiet \
    --set influence.retrain=false --set influence.vectors=false --set "influence.solver=\"$solver\"" \
    --set influence.lissa.depth=3000 >"$work/inf_$solver.log" 2>&1 &&
    "$python" - "$work/inf2/results.h5" "$work/inf_$solver/results.h5" <<'PY'
import sys, h5py, numpy as np
cg, other = (h5py.File(p, "r")["/influence/client_removal_estimate"][...] for p in sys.argv[1:3])
# explicit: exact to rounding; LiSSA with the exact Hessian, depth 3000: Neumann truncation.
assert np.max(np.abs(other - cg)) <= 1e-3 * np.max(np.abs(cg)), np.max(np.abs(other - cg))
PY
  then pass "influence: $solver agrees with cg"; else fail "influence solver $solver"; fi
done

if "$python" "$source_dir/analysis/plot_influence.py" "$work/inf2/results.h5" -o "$work/inf.png" >/dev/null &&
  [ -s "$work/inf.png" ]; then
  pass "analysis/plot_influence.py"
else
  fail "analysis/plot_influence.py"
fi

# Influence with an MLP (inputs/influence_mlp.toml): damped Newton polish to a strict local minimum,
# CG on the exact Hessian products; bitwise identical on 1-3 ranks, the estimates track retraining
# (Spearman >= 0.9), the explicit solver (dense Hessian from products) agrees with CG.
mlp_influence="$source_dir/inputs/influence_mlp.toml"
ok=1
for ranks in 1 2 3; do
  "$mpirun" -n "$ranks" "$fluence" influence "$mlp_influence" --out "$work/minf$ranks" --quiet \
    >"$work/minf$ranks.log" 2>&1 || { ok=0; tail -3 "$work/minf$ranks.log" | sed 's/^/    /'; }
done
for ranks in 2 3; do compare_runs "$work/minf1/results.h5" "$work/minf$ranks/results.h5" || ok=0; done
"$mpirun" -n 2 "$fluence" influence "$mlp_influence" --out "$work/minfx" --quiet \
  --set 'influence.solver="explicit"' --set influence.retrain=false >"$work/minfx.log" 2>&1 || ok=0
if [ "$ok" -eq 1 ] && "$python" - "$work/minf1/results.h5" "$work/minfx/results.h5" <<'PY'
import sys, h5py, numpy as np
cg, explicit = (h5py.File(p, "r") for p in sys.argv[1:3])
assert cg["/hessian/eigenvalue_min"][()] > 0, cg["/hessian/eigenvalue_min"][()]
assert cg["/model/gradient_norm"][()] <= 1e-10, cg["/model/gradient_norm"][()]
assert cg["/influence/spearman"][()] >= 0.9, cg["/influence/spearman"][()]
a, b = cg["/influence/client_removal_estimate"][...], explicit["/influence/client_removal_estimate"][...]
assert np.max(np.abs(a - b)) <= 1e-8 * np.max(np.abs(a)), np.max(np.abs(a - b))
PY
then pass "networks: influence on an MLP (damped Newton, R-operator CG, explicit): 1-3 ranks bitwise, Spearman >= 0.9"
else fail "networks: influence on an MLP"; fi

# The automatic damping's floor (docs/math.md §4) at an MLP that is no minimum (no polish:
# lambda_min < 0 even with influence.damping = 0.01): "relative" leaves 1e-8 lambda_max of the
# damped operator, "damping" keeps the deck's 0.01 above lambda_min, and its solve is the better
# conditioned (fewer CG iterations).
ok=1
for floor in relative damping; do
  "$mpirun" -n 2 "$fluence" influence "$mlp_influence" --out "$work/floor_$floor" --quiet \
    --set 'federation.polish="none"' --set influence.retrain=false --set influence.vectors=false \
    --set influence.damping=0.01 --set "influence.auto_damping_floor=\"$floor\"" \
    >"$work/floor_$floor.log" 2>&1 || { ok=0; tail -3 "$work/floor_$floor.log" | sed 's/^/    /'; }
done
if [ "$ok" -eq 1 ] && "$python" - "$work/floor_relative/results.h5" "$work/floor_damping/results.h5" <<'PY'
import sys, h5py
relative, damping = (h5py.File(p, "r") for p in sys.argv[1:3])
low, high = relative["/hessian/eigenvalue_min"][()], relative["/hessian/eigenvalue_max"][()]
assert low < -0.01, low  # indefinite even with the deck's damping
assert damping["/hessian/eigenvalue_min"][()] == low  # the same spectrum, undamped
expected = {"relative": 1e-8 * (high + 0.01) - low, "damping": 0.01 - low}
for name, f in (("relative", relative), ("damping", damping)):
    got = f["/influence/damping"][()]
    assert abs(got - expected[name]) <= 1e-12, (name, got, expected[name])
assert damping["/ihvp/iterations"][0] < relative["/ihvp/iterations"][0], (
    damping["/ihvp/iterations"][0], relative["/ihvp/iterations"][0])
PY
then pass "influence: auto_damping_floor relative / damping at an indefinite MLP"
else fail "influence: auto_damping_floor"; fi

# influence (CG): 20 rounds, the model at 21, 20 vectors (22-41), 20 leave-one-out retrains (42-61).
sweep_resume in influence "$influence_deck" "$work/inf2/results.h5" 46 29
# influence with an MLP: 10 rounds, the model at 11, 40 vectors (12-51), 40 retrains (52-91);
# checkpoint 31 is unit 20 (every 4 units).
sweep_resume mi influence "$mlp_influence" "$work/minf2/results.h5" 60 31

cli_summary
