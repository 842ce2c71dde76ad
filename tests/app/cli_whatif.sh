#!/usr/bin/env bash
# `fluence whatif` (issue 5): the results contract, every dataset bitwise identical on 1-4 ranks,
# --model, the report scripts, and stop/resume of the sweep.
# Usage: cli_whatif.sh FLUENCE_BINARY SOURCE_DIR (one CTest entry per script: tests/CMakeLists.txt)
set -u
# shellcheck source=tests/app/cli_common.sh
source "$(dirname "$0")/cli_common.sh"

# --- fluence whatif (issue 5) ---------------------------------------------------------------------
whatif_deck="$source_dir/inputs/whatif_synthetic.toml"
for ranks in 1 2 3 4; do
  log_view=()  # the 2-rank run also reports its phases
  [ "$ranks" -eq 2 ] && log_view=(-log_view)
  "$mpirun" -n "$ranks" "$fluence" whatif "$whatif_deck" --out "$work/whatif$ranks" --quiet \
    --set whatif.test_sample=500 "${log_view[@]}" >"$work/whatif$ranks.log" 2>&1 ||
    { fail "whatif on $ranks ranks"; sed 's/^/    /' "$work/whatif$ranks.log" | tail -5; }
done
check_log_stages whatif "$work/whatif2.log" "Set-up,Training,IHVP,Retraining,Output"
if "$python" - "$work" <<'PY'
import sys, h5py, numpy as np
work = sys.argv[1]
files = [h5py.File(f"{work}/whatif{r}/results.h5", "r") for r in (1, 2, 3, 4)]
f = files[0]
K, E, R = 3, 4, 3
assert list(f["/whatif/eps"][...]) == [0.1, 1.0, 3.0, 6.0]
assert f["/whatif/group_fraction"].shape == (K,) and f["/whatif/group_rows"].shape == (K,)
assert np.all(np.diff(f["/whatif/group_rows"][...]) > 0)
assert f["/whatif"].attrs["test_rows"] == 500
for v in ("rr", "rr_l", "rr_flc"):
    assert f[f"/whatif/{v}/estimated"].shape == (K, E)
    assert f[f"/whatif/{v}/actual"].shape == (K, E, R)
    assert f[f"/whatif/{v}/expected_retrain"].shape == (K, E)
    for m in ("mae", "spearman", "mae_per_draw", "spearman_per_draw", "mae_expected", "spearman_expected"):
        assert f[f"/whatif/{v}/{m}"].shape == (K,)
        assert f[f"/whatif/{v}/second_order/{m}"].shape == (K,)
    assert np.all(np.isfinite(f[f"/whatif/{v}/actual"][...]))
for name in ("ihvp_s", "influence_cells_s", "influence_total_s", "per_cell_s", "retrain_total_s",
             "retrain_per_cell_s", "initial_training_s"):
    assert f["/whatif/timing/" + name][()] >= 0
assert f["/whatif/retrain_worst_gradient_norm"][()] <= 1e-8
def check(name, obj):
    if not isinstance(obj, h5py.Dataset) or "timing" in name or name in (
            "metrics/wall_time_s", "clients/rank", "metrics/setup_time_s",
            "metrics/peak_memory_bytes", "metrics/rank", "metrics/host"):
        return
    for other in files[1:]:
        a, b = obj[()], other[name][()]
        floating = np.issubdtype(np.asarray(a).dtype, np.floating)
        assert np.array_equal(a, b, equal_nan=floating), name
f.visititems(check)
PY
then pass "whatif: contract, every dataset bitwise identical on 1-4 ranks"; else fail "whatif determinism/contract"; fi

# CG with influence.preconditioner = "kronecker" (docs/math.md §3.1) instead of the deck's explicit
# solver: bitwise identical on 1 and 3 ranks, the estimates within the CG tolerance of explicit's.
ok=1
for ranks in 1 3; do
  "$mpirun" -n "$ranks" "$fluence" whatif "$whatif_deck" --out "$work/kwhatif$ranks" --quiet \
    --set whatif.test_sample=500 --set 'influence.solver="cg"' \
    --set 'influence.preconditioner="kronecker"' >"$work/kwhatif$ranks.log" 2>&1 ||
    { ok=0; tail -3 "$work/kwhatif$ranks.log" | sed 's/^/    /'; }
done
compare_runs "$work/kwhatif1/results.h5" "$work/kwhatif3/results.h5" || ok=0
if [ "$ok" -eq 1 ] && "$python" - "$work/whatif1/results.h5" "$work/kwhatif1/results.h5" <<'PY'
import sys, h5py, numpy as np
explicit, kronecker = (h5py.File(p, "r") for p in sys.argv[1:3])
for v in ("rr", "rr_l", "rr_flc"):
    a, b = explicit[f"/whatif/{v}/estimated"][...], kronecker[f"/whatif/{v}/estimated"][...]
    assert np.max(np.abs(a - b)) <= 1e-6 * np.max(np.abs(a)), (v, np.max(np.abs(a - b)))
PY
then pass "whatif: cg with the kronecker preconditioner bitwise on 1 and 3 ranks, agrees with explicit"
else fail "whatif: kronecker preconditioner"; fi

"$mpirun" -n 2 "$fluence" whatif "$whatif_deck" --out "$work/whatifmodel" --quiet --model "$work/whatif2/results.h5" \
  --set whatif.test_sample=500 --set whatif.retrain=false >"$work/whatifmodel.log" 2>&1
if "$python" - "$work/whatif2/results.h5" "$work/whatifmodel/results.h5" <<'PY'
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
for path in ("/model/theta", "/whatif/rr/estimated", "/whatif/rr_flc/second_order/estimated"):
    assert np.array_equal(a[path][...], b[path][...]), path
assert "/whatif/rr/actual" not in b and np.all(np.isnan(b["/whatif/rr/mae"][...]))
PY
then pass "whatif --model reuses a trained model (identical estimates; no retrains)"; else fail "whatif --model"; fi

if "$python" "$source_dir/analysis/whatif_report.py" "$work/whatif2" --figures "$work/whatif_fig" \
  >"$work/whatif_report.txt" 2>&1 && grep -q "Table III" "$work/whatif_report.txt" &&
  grep -q "Table IV" "$work/whatif_report.txt" && ls "$work/whatif_fig"/fig1_*.png >/dev/null 2>&1 &&
  "$python" "$source_dir/analysis/whatif_report.py" "$work/whatif2" --markdown --no-figures | grep -q "^|" &&
  FLUENCE="$fluence" bash "$source_dir/scripts/run_whatif_experiments.sh" adult credit_g --out "$work/whatif_dry" \
    --dry-run >"$work/whatif_dry.txt" 2>&1 && [ "$(grep -c "fluence whatif" "$work/whatif_dry.txt")" -eq 8 ]; then
  pass "analysis/whatif_report.py tables and figures; run_whatif_experiments.sh --dry-run"
else
  fail "whatif report"
  tail -5 "$work/whatif_report.txt" | sed 's/^/    /'
fi

# whatif: 2 rounds, the model at 3, 12 second-order rows (4-15), 48 retrain chains (16-63).
sweep_resume wi whatif "$whatif_deck" "$work/whatif2/results.h5" 26 11 --set whatif.test_sample=500

cli_summary
