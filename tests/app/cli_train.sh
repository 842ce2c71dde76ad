#!/usr/bin/env bash
# `fluence train` on the quick start: bitwise-identical /model/theta and metrics on 1-4 ranks, the
# results-file contract, accuracy against the clean central model, PETSc options passing through
# (-log_view with the run's phases as log stages) and an --out path with odd characters.
# Usage: cli_train.sh FLUENCE_BINARY SOURCE_DIR (one CTest entry per script: tests/CMakeLists.txt)
set -u
# shellcheck source=tests/app/cli_common.sh
source "$(dirname "$0")/cli_common.sh"

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
check_log_stages train "$work/logview.txt" "Set-up,Training,Output"

qs="$source_dir/inputs/quickstart.toml"

# An --out path with a quote and a backslash is taken as it is (it was spliced into TOML unescaped).
odd="$work/o\"ut\\x"
"$mpirun" -n 2 "$fluence" train "$qs" --out "$odd" --set federation.rounds=2 >"$work/odd.log" 2>&1
code=$?
if [ "$code" -eq 0 ] && [ -e "$odd/results.h5" ]; then pass "--out with a quote and a backslash in the path"
else fail "--out with a quote and a backslash (exit $code)"; sed 's/^/    /' "$work/odd.log" | head -3; fi

# No console field for a metric that was not computed (issue 41): with federation.eval_train_loss =
# false every round line printed "train loss nan"; it leaves the field out, and a run that
# evaluates it (the --out run above) shows it.
"$mpirun" -n 2 "$fluence" train "$qs" --out "$work/no_train_loss" --set federation.rounds=2 \
  --set federation.eval_train_loss=false >"$work/no_train_loss.log" 2>&1
code=$?
if [ "$code" -eq 0 ] && [ "$(grep -c "^round .*/2  test loss [0-9.]*  test acc" "$work/no_train_loss.log")" -eq 2 ] &&
  ! grep -qiw "nan" "$work/no_train_loss.log" && ! grep -q "train loss" "$work/no_train_loss.log" &&
  grep -q "^round .*train loss [0-9.]*  test loss" "$work/odd.log"; then
  pass "round lines without federation.eval_train_loss: no train loss field, no nan"
else
  fail "round lines without federation.eval_train_loss (exit $code)"
  grep "^round\|^final" "$work/no_train_loss.log" | head -3 | sed 's/^/    /'
fi

# Wide data (issue 41): a CSV of 5,000 columns trained to the end, then failed writing results.h5
# (exit 3: the feature names exceeded HDF5's 64 KiB limit on an attribute). The names are in the
# datasets /model/feature and /model/class; the attribute copies are left out beyond
# ResultsFile::kMaxAttributeStrings names; --model reads the names back from the datasets.
"$python" - "$work/wide.csv" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(5)
x = rng.normal(size=(60, 5000))
with open(sys.argv[1], "w") as f:
    f.write(",".join(f"feature_{j:04d}" for j in range(5000)) + ",label\n")
    for row in x:
        f.write(",".join(f"{v:.3f}" for v in row) + f",{int(row[0] > 0)}\n")
PY
printf 'seed = 1\n[data]\nsource = "csv"\npath = "wide.csv"\nlabel = "label"\n[partition]\nclients = 3\n[federation]\nrounds = 1\nbatch_size = 16\npolish = "none"\n' |
  write_deck wide
"$mpirun" -n 2 "$fluence" train "$work/wide.toml" --out "$work/wide" --quiet >"$work/wide.log" 2>&1
code=$?
"$mpirun" -n 2 "$fluence" influence "$work/wide.toml" --model "$work/wide/results.h5" \
  --out "$work/wide_influence" --set influence.retrain=false --quiet >"$work/wide_influence.log" 2>&1
influence_code=$?
if [ "$code" -eq 0 ] && [ "$influence_code" -eq 0 ] && "$python" - "$work/wide/results.h5" <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
features = [name.decode() for name in f["/model/feature"][...]]
assert f["/model/theta"].shape == (2, 5001), f["/model/theta"].shape
assert features[:2] == ["feature_0000", "feature_0001"] and len(features) == 5001, features[:3]
assert [c.decode() for c in f["/model/class"][...]] == ["0", "1"]
assert "features" not in f["/model/theta"].attrs  # 5,001 names: beyond an attribute's 64 KiB
assert list(f["/model/theta"].attrs["classes"]) == ["0", "1"]  # a short list keeps its attribute
PY
then
  pass "5,000 CSV columns: results.h5 written, the names in /model/feature, --model reads them back"
else
  fail "wide data (train exit $code, influence --model exit $influence_code)"
  tail -3 "$work/wide.log" "$work/wide_influence.log" | cut -c 1-200 | sed 's/^/    /'
fi

# A Fluence option after the PETSc options is Fluence's (issue 41): `-newton_ksp_rtol 1e-3 --out
# DIR` took --out and DIR for PETSc values and wrote the results to the deck's output.dir.
(cd "$work" && "$mpirun" -n 2 "$fluence" train "$qs" -newton_ksp_rtol 1e-3 -newton_ksp_monitor \
  --out "$work/after_petsc" --set federation.rounds=2 --quiet >"$work/after_petsc.log" 2>&1)
code=$?
if [ "$code" -eq 0 ] && [ -e "$work/after_petsc/results.h5" ] && [ ! -e "$work/out" ] &&
  grep -q "KSP Residual norm" "$work/after_petsc.log" &&
  "$python" -c "import h5py, sys; assert h5py.File(sys.argv[1])['/metrics/round'].shape == (2,)" \
    "$work/after_petsc/results.h5"; then
  pass "--out and --set after the PETSc options are Fluence's"
else
  fail "--out after the PETSc options (exit $code)"
  tail -3 "$work/after_petsc.log" | sed 's/^/    /'
fi

cli_summary
