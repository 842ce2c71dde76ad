#!/usr/bin/env bash
# `fluence fldp` (issue 4): the results contract, Newton refinement, every dataset bitwise identical
# on 1-4 ranks (Monte Carlo included), --model, the report scripts, and stop/resume of the cases.
# Usage: cli_fldp.sh FLUENCE_BINARY SOURCE_DIR (one CTest entry per script: tests/CMakeLists.txt)
set -u
# shellcheck source=tests/app/cli_common.sh
source "$(dirname "$0")/cli_common.sh"

# --- fluence fldp (issue 4) -----------------------------------------------------------------------
# Monte Carlo forced (enumeration_limit 4 < 5 x 2 combinations) so its streams are covered too.
fldp_deck="$source_dir/inputs/fldp_synthetic.toml"
for ranks in 1 2 3 4; do
  log_view=()  # the 2-rank run also reports its phases
  [ "$ranks" -eq 2 ] && log_view=(-log_view)
  "$mpirun" -n "$ranks" "$fluence" fldp "$fldp_deck" --out "$work/fldp$ranks" --quiet \
    --set fldp.enumeration_limit=4 --set fldp.monte_carlo_samples=16 --set fldp.monte_carlo_batches=4 "${log_view[@]}" \
    >"$work/fldp$ranks.log" 2>&1 || { fail "fldp on $ranks ranks"; sed 's/^/    /' "$work/fldp$ranks.log" | tail -5; }
done
check_log_stages fldp "$work/fldp2.log" "Set-up,Training,IHVP,Retraining,Output"
if "$python" - "$work" <<'PY'
import sys, h5py, numpy as np
work = sys.argv[1]
files = [h5py.File(f"{work}/fldp{r}/results.h5", "r") for r in (1, 2, 3, 4)]
f = files[1]
cases, clients, p, draws, steps = 7, 5, f["/model/theta"].size, 3, 3
shapes = {"/fldp/case_eps_from": (cases,), "/fldp/case_eps_to": (cases,),
          "/fldp/case_clients": (cases, clients), "/fldp/theta_estimate": (cases, p),
          "/fldp/theta_expected": (cases, p), "/fldp/ald": (cases, draws),
          "/fldp/aad": (cases, draws), "/fldp/ed": (cases, draws), "/fldp/ed_expected": (cases,),
          "/fldp/newton_ed_expected": (cases, steps), "/fldp/time_estimate_s": (cases,),
          "/fldp/time_newton_s": (cases, steps),
          "/fldp/time_retrain_s": (cases,), "/fldp/mc_standard_error": (cases,)}
for path, shape in shapes.items():
    assert path in f, "missing dataset " + path
    assert f[path].shape == shape, (path, f[path].shape, shape)
assert list(f["/fldp/case_clients"][1]) == [1, 0, 0, 0, 0] and f["/fldp/case_eps_to"][1] == 2.0
assert f["/fldp/case_remove"][3] == 1 and np.isnan(f["/fldp/case_eps_to"][3])
mc = f["/fldp/mc_standard_error"][...]
removal = f["/fldp/case_remove"][...] == 1
assert np.all(mc[~removal] > 0) and np.all(mc[removal] == 0), mc
# Newton refinement converges to the exact expected retrain.
assert np.all(f["/fldp/newton_ed_expected"][:, -1] <= 1e-6), f["/fldp/newton_ed_expected"][:, -1]
names = []
files[0].visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
for name in names:
    if name in ("metrics/wall_time_s", "clients/rank", "metrics/setup_time_s",
                "metrics/peak_memory_bytes", "metrics/rank", "metrics/host") or name.startswith("fldp/time_"):
        continue
    for r, g in zip((2, 3, 4), files[1:]):
        a, b = files[0][name][()], g[name][()]
        if not isinstance(a, np.ndarray):
            same = a == b
        else:  # variable-length strings (object arrays) by value
            same = a.tolist() == b.tolist() if a.dtype == object else a.tobytes() == b.tobytes()
        assert same, f"{name} differs between 1 and {r} ranks"
PY
then pass "fldp: contract, Newton refinement, every dataset bitwise identical on 1-4 ranks (Monte Carlo included)"; else fail "fldp determinism/contract"; fi

# influence.preconditioner = "kronecker" (docs/math.md §3.1): bitwise identical on 1 and 3 ranks, the
# estimates within the CG tolerance of the default (Jacobi) run's.
ok=1
for ranks in 1 3; do
  "$mpirun" -n "$ranks" "$fluence" fldp "$fldp_deck" --out "$work/kfldp$ranks" --quiet \
    --set fldp.enumeration_limit=4 --set fldp.monte_carlo_samples=16 --set fldp.monte_carlo_batches=4 \
    --set fldp.retrain=false --set 'influence.preconditioner="kronecker"' >"$work/kfldp$ranks.log" 2>&1 ||
    { ok=0; tail -3 "$work/kfldp$ranks.log" | sed 's/^/    /'; }
done
compare_runs "$work/kfldp1/results.h5" "$work/kfldp3/results.h5" || ok=0
if [ "$ok" -eq 1 ] && "$python" - "$work/fldp1/results.h5" "$work/kfldp1/results.h5" <<'PY'
import sys, h5py, numpy as np
jacobi, kronecker = (h5py.File(p, "r") for p in sys.argv[1:3])
a, b = jacobi["/fldp/theta_estimate"][...], kronecker["/fldp/theta_estimate"][...]
change = np.max(np.abs(a - jacobi["/model/theta"][...].reshape(1, -1)))  # the IHVPs' scale
assert np.max(np.abs(a - b)) <= 1e-6 * change, (np.max(np.abs(a - b)), change)
PY
then pass "fldp: kronecker preconditioner bitwise on 1 and 3 ranks, agrees with jacobi"
else fail "fldp: kronecker preconditioner"; fi

"$mpirun" -n 2 "$fluence" fldp "$fldp_deck" --out "$work/fldpmodel" --quiet --model "$work/fldp2/results.h5" \
  --set fldp.enumeration_limit=4 --set fldp.monte_carlo_samples=16 --set fldp.monte_carlo_batches=4 \
  --set fldp.retrain=false --set fldp.newton_steps=0 >"$work/fldpmodel.log" 2>&1
if "$python" - "$work/fldp2/results.h5" "$work/fldpmodel/results.h5" <<'PY'
import sys, h5py
a, b = (h5py.File(p, "r") for p in sys.argv[1:3])
for path in ("/model/theta", "/fldp/theta_estimate", "/fldp/mc_standard_error"):
    assert a[path][...].tobytes() == b[path][...].tobytes(), path
assert "/fldp/theta_expected" not in b and "/fldp/ed" not in b
PY
then pass "fldp --model reuses a trained model (identical estimates)"; else fail "fldp --model"; fi

mkdir -p "$work/fldp_report/fldp_synthetic/q1/eps_3"
cp "$work/fldp2/results.h5" "$work/fldp_report/fldp_synthetic/q1/eps_3/"
if "$python" "$source_dir/analysis/fldp_report.py" "$work/fldp_report" --figures "$work/fldp_fig" \
  >"$work/fldp_report.txt" 2>&1 && grep -q "Q1 (Table 2)" "$work/fldp_report.txt" && [ -s "$work/fldp_fig/fig1_aad.png" ] &&
  "$python" "$source_dir/analysis/fldp_report.py" "$work/fldp_report" --markdown --no-figures | grep -q "^| ε | ε' |" &&
  FLUENCE="$fluence" bash "$source_dir/scripts/run_fldp_experiments.sh" credit_g --out "$work/fldp_dry" --dry-run \
    >"$work/fldp_dry.txt" 2>&1 && [ "$(grep -c "fluence fldp" "$work/fldp_dry.txt")" -ge 15 ]; then
  pass "analysis/fldp_report.py tables and figures; run_fldp_experiments.sh --dry-run"
else
  fail "fldp report/experiment scripts"
  tail -5 "$work/fldp_report.txt" "$work/fldp_dry.txt" | sed 's/^/    /'
fi

# fldp (CG, warm starts carried over): 10 rounds (checkpoint 4 is training), the model at 11, 7 cases.
sweep_resume fl fldp "$fldp_deck" "$work/fldp2/results.h5" 15 4 --set fldp.enumeration_limit=4 \
  --set fldp.monte_carlo_samples=16 --set fldp.monte_carlo_batches=4

cli_summary
