#!/usr/bin/env bash
# End-to-end tests of the `fluence` executable under mpirun: help/version, validate, the quick start
# at 1-4 ranks (bitwise-identical /model/theta), the results-file contract, PETSc option pass-through,
# and every command's results, restarts and stop signals. The bad-input cases (issues 2 and 24) are
# the table of cli_bad_inputs.sh.
# Usage: cli_tests.sh FLUENCE_BINARY SOURCE_DIR
set -u
# shellcheck source=tests/app/cli_common.sh
source "$(dirname "$0")/cli_common.sh"

# --- help, version, validate ---------------------------------------------------------------------
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

# inputs/README.md's key tables are what `fluence keys --markdown` prints, the prose between them
# aside (scripts/update_key_tables.py writes them; tests/app/test_deck_schema.cpp checks the same
# in-process).
if "$fluence" keys --markdown >"$work/keys.md" &&
  diff <(grep -E '^(### |\|)' "$work/keys.md") \
    <(awk '/^## Keys$/ { on = 1; next } /^## / { on = 0 } on' "$source_dir/inputs/README.md" |
      grep -E '^(### |\|)') >"$work/keys.diff"; then
  pass "keys --markdown prints inputs/README.md's key tables"
else
  fail "keys --markdown differs from inputs/README.md's key tables"
  head -5 "$work/keys.diff"
fi

# --- quick start on 1, 2, 3, 4 ranks: identical theta ----------------------------------------------
for ranks in 1 2 3 4; do
  "$mpirun" -n "$ranks" "$fluence" train "$source_dir/inputs/quickstart.toml" --out "$work/qs$ranks" \
    --quiet >"$work/qs$ranks.log" 2>&1 || fail "quickstart on $ranks ranks"
done
if "$python" - "$work" <<'PY'
import sys, h5py, numpy as np
work = sys.argv[1]
files = [h5py.File(f"{work}/qs{r}/results.h5", "r") for r in (1, 2, 3, 4)]
theta = [f["/model/theta"][...] for f in files]
for r, t in zip((2, 3, 4), theta[1:]):
    assert t.tobytes() == theta[0].tobytes(), f"/model/theta differs between 1 and {r} ranks"
for name in ("round", "train_loss", "test_loss", "test_accuracy"):
    base = files[0]["/metrics/" + name][...]
    for f in files[1:]:
        assert f["/metrics/" + name][...].tobytes() == base.tobytes(), name
assert [int(f.attrs["ranks"]) for f in files] == [1, 2, 3, 4]
PY
then pass "quickstart /model/theta and metrics bitwise identical on 1, 2, 3, 4 ranks"; else fail "rank-count determinism"; fi

if "$python" - "$work/qs2/results.h5" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
for attr in ("fluence_version", "git_revision", "command", "ranks", "seed", "deck"):
    assert attr in f.attrs, "missing attribute " + attr
for path in ("/metrics/round", "/metrics/train_loss", "/metrics/test_loss", "/metrics/test_accuracy",
             "/metrics/wall_time_s", "/model/theta", "/model/gradient_norm", "/clients/size",
             "/clients/rank", "/clients/epsilon"):
    assert path in f, "missing dataset " + path
T = len(f["/metrics/round"])
assert T == 50 and all(len(f["/metrics/" + n]) == T for n in ("train_loss", "test_loss", "test_accuracy", "wall_time_s"))
assert f["/model/theta"].shape == (2, 19), f["/model/theta"].shape  # 6 numeric + 3+4+5 one-hot + bias
assert f["/model/gradient_norm"][()] <= 1e-10
# The run's costs: a set-up time in [0, 60) s (the quick start's synthetic data take well under
# a second); each of the 2 ranks' peak resident memory at least 10 MiB (Open MPI, PETSc and HDF5
# alone map more) and below the machine's memory (os.sysconf): a wrong unit (kB) or field fails.
import os
setup = f["/metrics/setup_time_s"][()]
assert 0 <= setup < 60, setup
peaks = f["/metrics/peak_memory_bytes"][...]
total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
assert peaks.shape == (2,) and np.all(peaks >= 10 * 2**20) and np.all(peaks < total), peaks
assert f["/clients/epsilon"].shape == (5, 3)
assert list(f["/clients/epsilon"].attrs["attributes"].astype(str)) == ["cat0", "cat1", "label"]
assert np.all(f["/clients/epsilon"][...] == 2.0)
assert f["/clients/size"][...].sum() == 4800
assert sorted(set(f["/clients/rank"][...])) == [0, 1]
deck = f.attrs["deck"]
deck = deck.decode() if isinstance(deck, bytes) else deck
assert "polish = 'newton'" in deck or 'polish = "newton"' in deck
PY
then pass "results.h5 contract"; else fail "results.h5 contract"; fi

# --- quick start within 5 points of the clean central model ----------------------------------------
"$mpirun" -n 2 "$fluence" train "$source_dir/inputs/quickstart.toml" --out "$work/central" --quiet \
  --set ldp.epsilon=inf --set partition.clients=1 --set federation.rounds=0 >/dev/null 2>&1
if "$python" - "$work/qs2/results.h5" "$work/central/results.h5" <<'PY'
import sys, h5py
ldp, clean = (h5py.File(p, "r")["/model/test_accuracy"][()] for p in sys.argv[1:3])
print(f"    quickstart accuracy {ldp:.4f}, clean central {clean:.4f}")
assert clean - ldp <= 0.05
PY
then pass "quickstart within 5 points of the clean central model"; else fail "quickstart accuracy"; fi

# --- PETSc options pass through --------------------------------------------------------------------
if "$mpirun" -n 2 "$fluence" train "$source_dir/inputs/quickstart.toml" --out "$work/logview" --quiet \
  -log_view -newton_ksp_monitor >"$work/logview.txt" 2>&1 &&
  grep -q "PETSc Performance Summary" "$work/logview.txt" && grep -q "KSP Residual norm" "$work/logview.txt"; then
  pass "PETSc options (-log_view, -newton_ksp_monitor) pass through"
else
  fail "PETSc options pass-through"
fi

# --- command-line details -----------------------------------------------------------------------
# The bad-input cases (refusals, exit codes, one-line messages, nothing left behind) are the table
# of tests/app/cli_bad_inputs.sh.
qs="$source_dir/inputs/quickstart.toml"
# An --out path with a quote and a backslash is taken as it is (it was spliced into TOML unescaped).
odd="$work/o\"ut\\x"
"$mpirun" -n 2 "$fluence" train "$qs" --out "$odd" --quiet --set federation.rounds=2 >"$work/odd.log" 2>&1
code=$?
if [ "$code" -eq 0 ] && [ -e "$odd/results.h5" ]; then pass "--out with a quote and a backslash in the path"
else fail "--out with a quote and a backslash (exit $code)"; sed 's/^/    /' "$work/odd.log" | head -3; fi
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

# --- fluence influence (issue 3) ------------------------------------------------------------------
influence_deck="$source_dir/inputs/influence_synthetic.toml"
for ranks in 1 2 3 4; do
  "$mpirun" -n "$ranks" "$fluence" influence "$influence_deck" --out "$work/inf$ranks" --quiet \
    >"$work/inf$ranks.log" 2>&1 || { fail "influence on $ranks ranks"; sed 's/^/    /' "$work/inf$ranks.log" | tail -5; }
done
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
                "metrics/peak_memory_bytes", "metrics/rank"):
        continue
    for r, g in zip((2, 3, 4), files[1:]):
        assert same(name, files[0], g), f"{name} differs between 1 and {r} ranks"
PY
then pass "influence: contract, Spearman >= 0.95, every dataset bitwise identical on 1-4 ranks"; else fail "influence determinism/contract"; fi

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


# --- fluence fldp (issue 4) -----------------------------------------------------------------------
# Monte Carlo forced (enumeration_limit 4 < 5 x 2 combinations) so its streams are covered too.
fldp_deck="$source_dir/inputs/fldp_synthetic.toml"
for ranks in 1 2 3 4; do
  "$mpirun" -n "$ranks" "$fluence" fldp "$fldp_deck" --out "$work/fldp$ranks" --quiet \
    --set fldp.enumeration_limit=4 --set fldp.monte_carlo_samples=16 --set fldp.monte_carlo_batches=4 \
    >"$work/fldp$ranks.log" 2>&1 || { fail "fldp on $ranks ranks"; sed 's/^/    /' "$work/fldp$ranks.log" | tail -5; }
done
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
                "metrics/peak_memory_bytes", "metrics/rank") or name.startswith("fldp/time_"):
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

bad_decks=""
for deck in "$source_dir"/inputs/*.toml; do
  "$fluence" validate "$deck" --no-data >/dev/null 2>"$work/deck.err" || bad_decks="$bad_decks $(basename "$deck")"
done
if [ -z "$bad_decks" ]; then pass "every deck in inputs/ validates"; else fail "decks that do not validate:$bad_decks"; fi

# --- fluence whatif (issue 5) ---------------------------------------------------------------------
whatif_deck="$source_dir/inputs/whatif_synthetic.toml"
for ranks in 1 2 3 4; do
  "$mpirun" -n "$ranks" "$fluence" whatif "$whatif_deck" --out "$work/whatif$ranks" --quiet \
    --set whatif.test_sample=500 >"$work/whatif$ranks.log" 2>&1 ||
    { fail "whatif on $ranks ranks"; sed 's/^/    /' "$work/whatif$ranks.log" | tail -5; }
done
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
            "metrics/peak_memory_bytes", "metrics/rank"):
        return
    for other in files[1:]:
        a, b = obj[()], other[name][()]
        floating = np.issubdtype(np.asarray(a).dtype, np.floating)
        assert np.array_equal(a, b, equal_nan=floating), name
f.visititems(check)
PY
then pass "whatif: contract, every dataset bitwise identical on 1-4 ranks"; else fail "whatif determinism/contract"; fi

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

# --- private training (issue 8: DP-FedAvg, FeO2) --------------------------------------------------
write_deck private_train <<'EOF'
seed = 4
[data.synthetic]
rows = 4000
numeric = 4
categorical = [3]
classes = 2
[partition]
clients = 60
scheme = "label_shards"
shards_per_client = 1
[federation]
rounds = 12
batch_size = 16
[privacy]
mode = "feo2"
sampling_rate = 0.3
noise_multiplier = 0.9
count_noise = 2.0
opt_out_fraction = 0.2
opt_out_label = 1
ratio = 0.5
clip = 0.3
EOF
for ranks in 1 2 3 4; do
  "$mpirun" -n "$ranks" "$fluence" train "$work/private_train.toml" --out "$work/private$ranks" --quiet \
    >"$work/private$ranks.log" 2>&1 || { fail "private train on $ranks ranks"; tail -3 "$work/private$ranks.log"; }
done
if "$python" - "$work" <<'PY'
import sys, h5py, numpy as np
work = sys.argv[1]
files = [h5py.File(f"{work}/private{r}/results.h5", "r") for r in (1, 2, 3, 4)]
f = files[0]
for name in ("epsilon", "best_order", "clip_norm", "sampled_private", "sampled_opt_out"):
    assert f["/privacy/" + name].shape == (12,), name
assert np.all(np.diff(f["/privacy/epsilon"][...]) > 0)
assert len(f["/privacy/opt_out_clients"][...]) == 12
assert f["/privacy/clip_norm"][0] == 0.3 and len(set(f["/privacy/clip_norm"][...])) > 1
for path in ("/model/theta", "/privacy/epsilon", "/privacy/clip_norm", "/metrics/test_loss", "/privacy/opt_out_clients"):
    for other in files[1:]:
        assert np.array_equal(f[path][...], other[path][...]), path
PY
then pass "private train (FeO2, adaptive clipping): /privacy contract, bitwise identical on 1-4 ranks"; else fail "private train determinism/contract"; fi

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
if FLUENCE="$fluence" bash "$source_dir/scripts/run_feo2_experiments.sh" --out "$work/feo2_dry" --dry-run \
  >"$work/feo2_dry.txt" 2>&1 && [ "$(grep -c "fluence train" "$work/feo2_dry.txt")" -eq 10 ] &&
  mkdir -p "$work/feo2_report/noniid" && cp -r "$work/private2" "$work/feo2_report/noniid/feo2_r0.5" &&
  "$python" "$source_dir/analysis/feo2_report.py" "$work/feo2_report" --no-figures >"$work/feo2_report.txt" 2>&1 &&
  grep -q "FeO2" "$work/feo2_report.txt"; then
  pass "run_feo2_experiments.sh --dry-run; analysis/feo2_report.py on a private run"
else
  fail "feo2 experiment script/report"
  tail -5 "$work/feo2_dry.txt" "$work/feo2_report.txt" | sed 's/^/    /'
fi

# --- checkpoints, restart, stop signals (issue 6, train) -------------------------------------------
write_deck ck <<'EOF'
seed = 6
[data.synthetic]
rows = 1500
numeric = 3
categorical = [3]
[partition]
clients = 6
[federation]
rounds = 12
batch_size = 16
polish = "newton"
EOF
"$mpirun" -n 2 "$fluence" train "$work/ck.toml" --out "$work/ckA" --quiet >/dev/null 2>&1
"$mpirun" -n 2 "$fluence" train "$work/ck.toml" --out "$work/ckB" --quiet --set output.checkpoint_every=4 --set output.keep=3 >/dev/null 2>&1
ok=1
for ranks in 1 3; do
  for chk in 4 8; do
    rm -rf "$work/ckR" && mkdir -p "$work/ckR" && cp "$work/ckB/chk_$(printf %06d $chk).h5" "$work/ckR/"
    "$mpirun" -n "$ranks" "$fluence" train "$work/ck.toml" --out "$work/ckR" --quiet --restart latest >"$work/ckR.log" 2>&1 &&
      compare_runs "$work/ckA/results.h5" "$work/ckR/results.h5" || { ok=0; echo "    restart from round $chk on $ranks ranks differs"; }
  done
done
if [ "$ok" -eq 1 ] && [ "$(ls "$work/ckB"/chk_*.h5 | wc -l)" -eq 3 ]; then
  pass "train checkpoints (keep 3 of 4, 8, 12); restart from rounds 4 and 8 on 1 and 3 ranks is bitwise identical"
else fail "train checkpoint/restart"; fi
# Checkpoints written on 1 and on 3 ranks resume on 2 and on 1 (issue 6: 1->2, 2->3, 3->1).
ok=1
for pair in "1 2" "3 1"; do
  read -r from to <<<"$pair"
  rm -rf "$work/ckP" "$work/ckQ" && mkdir -p "$work/ckQ"
  "$mpirun" -n "$from" "$fluence" train "$work/ck.toml" --out "$work/ckP" --quiet --set output.checkpoint_every=6 >/dev/null 2>&1
  cp "$work/ckP/chk_000006.h5" "$work/ckQ/" 2>/dev/null
  "$mpirun" -n "$to" "$fluence" train "$work/ck.toml" --out "$work/ckQ" --quiet --restart latest >"$work/ckQ.log" 2>&1 &&
    compare_runs "$work/ckA/results.h5" "$work/ckQ/results.h5" || { ok=0; echo "    $from -> $to ranks differs"; }
done
if [ "$ok" -eq 1 ]; then pass "train checkpoints from 1 and 3 ranks resume on 2 and 1 ranks bitwise identically"
else fail "train restart across rank counts"; fi

# A stop signal to one rank: the round finishes, a checkpoint is written, exit 4; restarting from
# it on another rank count ends exactly as the uninterrupted run. 20,000 rounds (about 6 s): with
# 4,000 (1 s) a loaded machine's poll could see the first checkpoint only as the run ended.
"$mpirun" -n 2 "$fluence" train "$work/ck.toml" --out "$work/ckS0" --quiet --set federation.rounds=20000 >/dev/null 2>&1
"$mpirun" -n 2 "$fluence" train "$work/ck.toml" --out "$work/ckS" --quiet --set federation.rounds=20000 \
  --set output.checkpoint_every=100 --set output.keep=1 >"$work/ckS.log" 2>&1 &
launcher=$!
# Signal once training runs (its first checkpoint exists), to the last rank only.
for _ in $(seq 500); do [ -e "$work/ckS/chk_000100.h5" ] || ls "$work/ckS"/chk_*.h5 >/dev/null 2>&1 && break; sleep 0.02; done
pid=$(pgrep -f "fluence train $work/ck.toml --out $work/ckS " | tail -1)
[ -n "$pid" ] && kill -USR1 "$pid"
wait "$launcher"
code=$?
if [ "$code" -eq 4 ] && grep -q "stop signal received: checkpoint" "$work/ckS.log" && ls "$work/ckS"/chk_*.h5 >/dev/null 2>&1 &&
  [ ! -e "$work/ckS/results.h5" ] &&
  "$mpirun" -n 3 "$fluence" train "$work/ck.toml" --out "$work/ckS" --quiet --set federation.rounds=20000 --restart latest >/dev/null 2>&1 &&
  compare_runs "$work/ckS0/results.h5" "$work/ckS/results.h5"; then
  pass "SIGUSR1 to one rank: checkpoint, exit 4, restart latest on 3 ranks is bitwise identical"
else fail "stop signal (exit $code)"; tail -3 "$work/ckS.log" | sed 's/^/    /'; fi

# A corrupted newest checkpoint: latest falls back to the previous valid one (the refused
# checkpoints are cases of cli_bad_inputs.sh).
rm -rf "$work/ckL" && mkdir -p "$work/ckL" && cp "$work/ckB"/chk_*.h5 "$work/ckL/" && truncate -s 1000 "$work/ckL/chk_000012.h5"
if "$mpirun" -n 2 "$fluence" train "$work/ck.toml" --out "$work/ckL" --quiet --restart latest >"$work/ckL.log" 2>&1 &&
  grep -q "skipping .*chk_000012.h5" "$work/ckL.log" && grep -q "restart: .*chk_000008.h5" "$work/ckL.log" &&
  compare_runs "$work/ckA/results.h5" "$work/ckL/results.h5"; then
  pass "restart latest skips a corrupted newest checkpoint and says so"
else fail "restart latest fallback"; tail -3 "$work/ckL.log" | sed 's/^/    /'; fi

# Private training on byte-coded image data (IDX: clients' SGD and the test evaluation read 8-bit
# codes; the "ink" attribute adds one-hot columns; Ditto runs the personal SGD on codes too):
# bitwise identical on 1-4 ranks and after a restart on another rank count; the fast per-round test
# loss agrees with the final double evaluation.
write_idx_images "$work/idx"
write_deck idx_private <<EOF
seed = 9
[data]
source = "idx"
path = "$work/idx"
ink_levels = 3
[partition]
clients = 40
scheme = "label_shards"
shards_per_client = 1
local_test_fraction = 0.2
[federation]
rounds = 6
batch_size = 16
learning_rate = 0.05
[privacy]
mode = "dp-fedavg"
sampling_rate = 0.3
noise_multiplier = 1.0
count_noise = 5.0
clip = 0.5
[personalization]
method = "ditto"
EOF
ok=1
for ranks in 1 2 3 4; do
  "$mpirun" -n "$ranks" "$fluence" train "$work/idx_private.toml" --out "$work/idxp$ranks" --quiet \
    >"$work/idxp$ranks.log" 2>&1 || { ok=0; tail -3 "$work/idxp$ranks.log" | sed 's/^/    /'; }
done
for ranks in 2 3 4; do compare_runs "$work/idxp1/results.h5" "$work/idxp$ranks/results.h5" || ok=0; done
rm -rf "$work/idxR" && mkdir -p "$work/idxR"
"$mpirun" -n 2 "$fluence" train "$work/idx_private.toml" --out "$work/idxC" --quiet \
  --set output.checkpoint_every=3 >/dev/null 2>&1 && cp "$work/idxC/chk_000003.h5" "$work/idxR/" &&
  "$mpirun" -n 3 "$fluence" train "$work/idx_private.toml" --out "$work/idxR" --quiet --restart latest \
    >/dev/null 2>&1 && compare_runs "$work/idxp1/results.h5" "$work/idxR/results.h5" || ok=0
if [ "$ok" -eq 1 ] && "$python" - "$work/idxp1/results.h5" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
fast, exact = f["/metrics/test_loss"][-1], f["/model/test_loss"][()]
assert abs(fast - exact) <= 1e-6 * exact, (fast, exact)
assert f["/metrics/test_accuracy"][-1] == f["/model/test_accuracy"][()]
assert np.all(np.isfinite(f["/feo2/acc_l_p"][...]))
PY
then pass "private training on IDX byte codes (ink, Ditto): bitwise identical on 1-4 ranks and across a 2 -> 3 rank restart"
else fail "private training on IDX byte codes"; fi

# The same in float local SGD (federation.local_precision = "single"): bitwise identical on 1 and 3
# ranks; not the double run's bits, but its final model within float rounding (the server noise and
# clipping are the same draws, so the runs differ only by the local arithmetic); and a deck asking
# for it on data without byte codes is refused, naming the key.
ok=1
for ranks in 1 3; do
  "$mpirun" -n "$ranks" "$fluence" train "$work/idx_private.toml" --out "$work/idxs$ranks" --quiet \
    --set 'federation.local_precision="single"' >"$work/idxs$ranks.log" 2>&1 ||
    { ok=0; tail -3 "$work/idxs$ranks.log" | sed 's/^/    /'; }
done
compare_runs "$work/idxs1/results.h5" "$work/idxs3/results.h5" || ok=0
if [ "$ok" -eq 1 ] && "$python" - "$work/idxp1/results.h5" "$work/idxs1/results.h5" <<'PY'
import sys, h5py, numpy as np
double, single = (h5py.File(name, "r")["/model/theta"][...] for name in sys.argv[1:])
difference = np.abs(double - single).max()
# Measured 7e-8 of max |theta| after 6 rounds: float rounding of each update is about 1e-7 of it.
assert 0 < difference <= 1e-5 * np.abs(double).max(), difference
PY
then pass "private training in float local SGD: bitwise identical on 1 and 3 ranks, within 1e-5 of the double run"
else fail "private training in float local SGD"; fi
if "$fluence" train "$source_dir/inputs/quickstart.toml" --out "$work/single_tabular" --quiet \
  --set 'federation.local_precision="single"' >"$work/single_tabular.log" 2>&1; then
  fail "local_precision = single on tabular data was accepted"
elif grep -q "federation.local_precision" "$work/single_tabular.log"; then
  pass "local_precision = single on data without byte codes: refused, naming the key"
else fail "local_precision = single on tabular data: message"; sed 's/^/    /' "$work/single_tabular.log" | tail -3; fi

# jobs/quickstart.sbatch outside SLURM: USR1 to the batch shell reaches the ranks through mpirun,
# they checkpoint and exit 4; running the script again resumes and ends as the uninterrupted run.
"$mpirun" -n 2 "$fluence" train "$source_dir/inputs/quickstart.toml" --out "$work/jobA" --quiet \
  --set federation.rounds=6000 >/dev/null 2>&1
(cd "$source_dir" && FLUENCE_LAUNCHER=mpirun MPIRUN="$mpirun" FLUENCE="$fluence" FLUENCE_OUT="$work/jobB" \
  FLUENCE_ARGS="--quiet --set federation.rounds=6000" bash jobs/quickstart.sbatch >"$work/job1.log" 2>&1) &
job=$!
for _ in $(seq 500); do ls "$work/jobB"/chk_*.h5 >/dev/null 2>&1 && break; sleep 0.02; done
shell=$(pgrep -f "bash jobs/quickstart.sbatch" | head -1)
[ -n "$shell" ] && kill -USR1 "$shell"
wait "$job"
first=$?
(cd "$source_dir" && FLUENCE_LAUNCHER=mpirun MPIRUN="$mpirun" FLUENCE="$fluence" FLUENCE_OUT="$work/jobB" \
  FLUENCE_ARGS="--quiet --set federation.rounds=6000" bash jobs/quickstart.sbatch >"$work/job2.log" 2>&1)
second=$?
if [ "$first" -eq 4 ] && [ "$second" -eq 0 ] && grep -q "restart: " "$work/job2.log" &&
  compare_runs "$work/jobA/results.h5" "$work/jobB/results.h5"; then
  pass "jobs/quickstart.sbatch: USR1 -> checkpoint and exit 4; rerun resumes to the uninterrupted result"
else fail "quickstart job stop/resume (exits $first, $second)"; tail -3 "$work/job1.log" "$work/job2.log" | sed 's/^/    /'; fi
# An unknown launcher stops a job script before it starts anything: exit 2, one line naming the
# variable, its value and the launchers there are, no output directory.
(cd "$source_dir" && FLUENCE_LAUNCHER=mpiexec FLUENCE="$fluence" FLUENCE_OUT="$work/jobL" \
  bash jobs/quickstart.sbatch >"$work/jobL.out" 2>"$work/jobL.err")
code=$?
if [ "$code" -eq 2 ] && [ "$(wc -l <"$work/jobL.err")" -eq 1 ] &&
  grep -q "FLUENCE_LAUNCHER='mpiexec' is not a launcher: use srun or mpirun" "$work/jobL.err" &&
  [ ! -e "$work/jobL" ]; then
  pass "jobs/quickstart.sbatch with FLUENCE_LAUNCHER=mpiexec: exit 2, one line naming it"
else fail "unknown FLUENCE_LAUNCHER (exit $code)"; sed 's/^/    /' "$work/jobL.err"; fi

# Private training with Ditto (per-client personal models) restarts exactly too.
ditto=(--set 'personalization.method="ditto"' --set partition.local_test_fraction=0.2 --quiet)
"$mpirun" -n 2 "$fluence" train "$work/private_train.toml" --out "$work/dittoA" "${ditto[@]}" >/dev/null 2>&1
"$mpirun" -n 2 "$fluence" train "$work/private_train.toml" --out "$work/dittoB" "${ditto[@]}" \
  --set output.checkpoint_every=5 --set output.keep=3 >/dev/null 2>&1
rm -rf "$work/dittoR" && mkdir -p "$work/dittoR" && cp "$work/dittoB/chk_000005.h5" "$work/dittoR/"
if "$mpirun" -n 3 "$fluence" train "$work/private_train.toml" --out "$work/dittoR" "${ditto[@]}" --restart latest \
  >"$work/dittoR.log" 2>&1 && compare_runs "$work/dittoA/results.h5" "$work/dittoR/results.h5"; then
  pass "FeO2 + Ditto + adaptive clipping: restart from round 5 on 3 ranks is bitwise identical"
else fail "FeO2/Ditto restart"; tail -3 "$work/dittoR.log" | sed 's/^/    /'; fi

# --- fluence lia (issue 7) -----------------------------------------------------------------------
# Votes, decisions, the sign check, the minority experiment and the FL curves are bitwise the same
# on 1, 2 and 3 ranks (with validator subsets and split validation sets exercised too).
lia_deck="$source_dir/inputs/lia_synthetic.toml"
lia_extra=(--quiet --set lia.validators_per_contributor=25 --set lia.validation_subsets=2 --set lia.participants=70
  --set 'lia.vote_baseline="quantile"' --set lia.vote_quantile=0.3)
for ranks in 1 2 3; do
  "$mpirun" -n "$ranks" "$fluence" lia "$lia_deck" --out "$work/lia$ranks" "${lia_extra[@]}" >"$work/lia$ranks.log" 2>&1 ||
    { fail "lia on $ranks ranks"; tail -5 "$work/lia$ranks.log" | sed 's/^/    /'; }
done
if "$python" - "$work" <<'PY'
import sys, h5py, numpy as np
work = sys.argv[1]
runs = [h5py.File(f"{work}/lia{r}/results.h5", "r") for r in (1, 2, 3)]
def check(name, obj):
    if isinstance(obj, h5py.Dataset) and "timing" not in name and not name.startswith("metrics/"):
        for other in runs[1:]:
            assert np.array_equal(obj[()], other[name][()], equal_nan=True), name
runs[0].visititems(check)
f = runs[0]
P = 70
for name in ("vote_sum", "accepted", "corrupted", "true_vote_sum", "votes_cast"):
    assert f["/lia/" + name].shape == (P,), name
assert np.all(f["/lia/votes_cast"][...] == 25)
assert f["/lia/corrupted"][...].sum() == 21
acc = f["/lia/accepted"][...]
assert np.array_equal(acc, (f["/lia/vote_sum"][...] >= f["/lia/threshold"][()]).astype(acc.dtype))
for name in ("recall", "precision", "accuracy", "epsilon_train", "epsilon_vote", "sign_agreement"):
    assert np.isfinite(f["/lia/" + name][()]), name
assert abs(f["/lia/epsilon_train"][()] - 2.0) < 1e-6 and abs(f["/lia/epsilon_vote"][()] - 2.0) < 1e-12
for m in ("none", "oracle", "krum", "trimmed_mean", "centered_clipping", "lia", "lia_cc"):
    assert f[f"/lia/fl/{m}/test_accuracy"].shape == (6,), m
assert f["/lia/minority/vote_sum"].shape == (2, 8)
PY
then pass "lia on 1, 2, 3 ranks: bitwise-identical votes, decisions, sign check, minority and FL curves"
else fail "lia results differ across rank counts or miss datasets"; fi

# Relevance-weighted votes (docs/math.md §9): bitwise the same on 1 and 3 ranks, the minority
# newcomers weighted too; the histograms are written and the budgets still add up to eps.
lia_rel=(--quiet --set lia.participants=70 --set 'lia.relevance="predicted_classes"' --set lia.relevance_epsilon=0.5
  --set lia.rounds=2 --set 'lia.vote_baseline="quantile"' --set lia.vote_quantile=0.3)
for ranks in 1 3; do
  "$mpirun" -n "$ranks" "$fluence" lia "$lia_deck" --out "$work/liarel$ranks" "${lia_rel[@]}" >"$work/liarel$ranks.log" 2>&1 ||
    { fail "lia relevance on $ranks ranks"; tail -5 "$work/liarel$ranks.log" | sed 's/^/    /'; }
done
if compare_runs "$work/liarel1/results.h5" "$work/liarel3/results.h5" && "$python" - "$work" <<'PY'
import sys, h5py, numpy as np
f = h5py.File(f"{sys.argv[1]}/liarel1/results.h5", "r")
P, C = 70, f["/lia/batch_labels"].shape[1]
for name in ("batch_histogram", "validation_histogram"):
    assert f["/lia/relevance/" + name].shape == (P, C), name
assert f["/lia/relevance/epsilon"][()] == 0.5
v = f["/lia/vote_sum"][...]
assert np.all(np.abs(v) <= 1) and np.all(np.abs(f["/lia/minority/vote_sum"][...]) <= 1)
acc = f["/lia/accepted"][...]
assert np.array_equal(acc, (v >= f["/lia/threshold"][()]).astype(acc.dtype))
assert abs(f["/lia/epsilon_train"][()] - 2.0) < 1e-6 and abs(f["/lia/epsilon_vote"][()] - 2.0) < 1e-12
PY
then pass "lia with relevance-weighted votes on 1 and 3 ranks: bitwise identical, histograms written"
else fail "lia relevance results differ across rank counts or miss datasets"; fi
# --- neural networks (issue 23) --------------------------------------------------------------------
# A CNN (single precision, a fixed cohort of half the clients) and an MLP (tanh, double, Poisson
# sampling, training loss every round) trained by FedAvg on the IDX images above: every dataset
# bitwise identical on 1, 2 and 3 ranks; the CNN stopped by SIGUSR1 at round 3 resumes on 3 ranks
# to the uninterrupted result; DP-FedAvg with the CNN is rank-count independent too.
write_deck net_cnn <<EOF
seed = 4
[data]
source = "idx"
path = "$work/idx"
numeric_scaling = "none"
[partition]
clients = 12
scheme = "label_shards"
shards_per_client = 2
[model]
type = "cnn"
conv_filters = [4, 6]
conv_kernel = 3
hidden = [16]
l2 = 1e-4
[federation]
rounds = 6
client_sampling = "fixed"
sampling_rate = 0.5
batch_size = 8
learning_rate = 0.05
local_precision = "single"
eval_train_loss = false
EOF
net_mlp=(--set 'model.type="mlp"' --set 'model.hidden=[32, 16]' --set 'model.activation="tanh"'
  --set 'federation.local_precision="double"' --set 'federation.client_sampling="poisson"'
  --set federation.eval_train_loss=true)
net_dp=(--set 'privacy.mode="dp-fedavg"' --set 'federation.client_sampling="all"'
  --set privacy.sampling_rate=0.5 --set privacy.noise_multiplier=0.5 --set privacy.clip=0.5
  --set privacy.count_noise=2.0)
ok=1
for ranks in 1 2 3; do
  "$mpirun" -n "$ranks" "$fluence" train "$work/net_cnn.toml" --out "$work/cnn$ranks" --quiet \
    >"$work/cnn$ranks.log" 2>&1 || { ok=0; tail -3 "$work/cnn$ranks.log" | sed 's/^/    /'; }
  "$mpirun" -n "$ranks" "$fluence" train "$work/net_cnn.toml" --out "$work/mlp$ranks" --quiet \
    "${net_mlp[@]}" >"$work/mlp$ranks.log" 2>&1 || { ok=0; tail -3 "$work/mlp$ranks.log" | sed 's/^/    /'; }
done
for ranks in 2 3; do
  compare_runs "$work/cnn1/results.h5" "$work/cnn$ranks/results.h5" || ok=0
  compare_runs "$work/mlp1/results.h5" "$work/mlp$ranks/results.h5" || ok=0
done
if [ "$ok" -eq 1 ] && "$python" - "$work/cnn1/results.h5" "$work/mlp1/results.h5" <<'PY'
import sys, h5py, numpy as np
cnn, mlp = (h5py.File(p, "r") for p in sys.argv[1:3])
theta = cnn["/model/theta"]
# conv 3x3x1 -> 4 (40), conv 3x3x4 -> 6 (222), dense 24 -> 16 (400), dense 16 -> 4 (68)
assert theta.shape == (730,), theta.shape
model = theta.attrs["model"]
model = model.decode() if isinstance(model, bytes) else model
assert model.startswith("cnn 9x9x1 -> conv 3x3x4 same"), model
assert len(theta.attrs["blocks"]) == 8
for f in (cnn, mlp):
    assert list(f["/metrics/round"][...]) == [1, 2, 3, 4, 5, 6]
    assert f["/metrics/test_accuracy"][-1] >= 0.6, f["/metrics/test_accuracy"][...]
    # the per-round curve is evaluated in float: within 1e-5 of the final double evaluation
    assert abs(f["/metrics/test_loss"][-1] - f["/model/test_loss"][()]) <= 1e-5 * f["/model/test_loss"][()]
assert np.isnan(cnn["/model/gradient_norm"][()]) and np.isnan(cnn["/metrics/train_loss"][...]).all()
assert np.isfinite(mlp["/model/gradient_norm"][()]) and np.isfinite(mlp["/metrics/train_loss"][...]).all()
PY
then pass "networks: CNN (single, fixed cohort) and MLP (tanh, Poisson): bitwise identical on 1-3 ranks, results contract"
else fail "networks: rank-count determinism or contract"; fi

"$mpirun" -n 2 "$fluence" train "$work/net_cnn.toml" --out "$work/cnnS" --quiet --test-stop-at 3 \
  >"$work/cnnS.log" 2>&1
code=$?
if [ "$code" -eq 4 ] && [ -e "$work/cnnS/chk_000003.h5" ] &&
  "$mpirun" -n 3 "$fluence" train "$work/net_cnn.toml" --out "$work/cnnS" --quiet --restart latest \
    >"$work/cnnR.log" 2>&1 && compare_runs "$work/cnn1/results.h5" "$work/cnnS/results.h5"; then
  pass "networks: the CNN stopped at round 3 (exit 4) resumes on 3 ranks bitwise identically"
else fail "networks: CNN stop/resume (exit $code)"; tail -3 "$work/cnnS.log" "$work/cnnR.log" | sed 's/^/    /'; fi

ok=1
for ranks in 2 3; do
  "$mpirun" -n "$ranks" "$fluence" train "$work/net_cnn.toml" --out "$work/cnndp$ranks" --quiet \
    "${net_dp[@]}" >"$work/cnndp$ranks.log" 2>&1 || { ok=0; tail -3 "$work/cnndp$ranks.log" | sed 's/^/    /'; }
done
if [ "$ok" -eq 1 ] && compare_runs "$work/cnndp2/results.h5" "$work/cnndp3/results.h5" &&
  "$python" -c "import h5py,sys; f=h5py.File(sys.argv[1]); assert f['/privacy/epsilon'][-1] > 0" \
    "$work/cnndp2/results.h5"; then
  pass "networks: DP-FedAvg with the CNN is bitwise identical on 2 and 3 ranks"
else fail "networks: DP-FedAvg with the CNN"; fi

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

# whatif: 2 rounds, the model at 3, 12 second-order rows (4-15), 48 retrain chains (16-63).
sweep_resume wi whatif "$whatif_deck" "$work/whatif2/results.h5" 26 11 --set whatif.test_sample=500
# fldp (CG, warm starts carried over): 10 rounds (checkpoint 4 is training), the model at 11, 7 cases.
sweep_resume fl fldp "$fldp_deck" "$work/fldp2/results.h5" 15 4 --set fldp.enumeration_limit=4 \
  --set fldp.monte_carlo_samples=16 --set fldp.monte_carlo_batches=4
# influence (CG): 20 rounds, the model at 21, 20 vectors (22-41), 20 leave-one-out retrains (42-61).
sweep_resume in influence "$influence_deck" "$work/inf2/results.h5" 46 29
# influence with an MLP: 10 rounds, the model at 11, 40 vectors (12-51), 40 retrains (52-91);
# checkpoint 31 is unit 20 (every 4 units).
sweep_resume mi influence "$mlp_influence" "$work/minf2/results.h5" 60 31
# lia: the filtering stage is unit 1, the seven FL methods units 2-8.
sweep_resume lr lia "$lia_deck" "$work/liarel1/results.h5" 6 4 "${lia_rel[@]:1}"
sweep_resume li lia "$lia_deck" "$work/lia2/results.h5" 6 4 --set lia.validators_per_contributor=25 \
  --set lia.validation_subsets=2 --set lia.participants=70 --set 'lia.vote_baseline="quantile"' \
  --set lia.vote_quantile=0.3

cli_summary
