#!/usr/bin/env bash
# `fluence lia` (issue 7): votes, decisions, the sign check, the minority experiment and the FL
# curves bitwise identical across rank counts (plain and relevance-weighted votes), and stop/resume
# of its stages.
# Usage: cli_lia.sh FLUENCE_BINARY SOURCE_DIR (one CTest entry per script: tests/CMakeLists.txt)
set -u
# shellcheck source=tests/app/cli_common.sh
source "$(dirname "$0")/cli_common.sh"

# --- fluence lia (issue 7) -----------------------------------------------------------------------
# Votes, decisions, the sign check, the minority experiment and the FL curves are bitwise the same
# on 1, 2 and 3 ranks (with validator subsets and split validation sets exercised too).
lia_deck="$source_dir/inputs/lia_synthetic.toml"
lia_extra=(--quiet --set lia.validators_per_contributor=25 --set lia.validation_subsets=2 --set lia.participants=70
  --set 'lia.vote_baseline="quantile"' --set lia.vote_quantile=0.3 --set audit.canaries=200)
for ranks in 1 2 3; do
  log_view=()  # the 2-rank run also reports its phases
  [ "$ranks" -eq 2 ] && log_view=(-log_view)
  "$mpirun" -n "$ranks" "$fluence" lia "$lia_deck" --out "$work/lia$ranks" "${lia_extra[@]}" "${log_view[@]}" \
    >"$work/lia$ranks.log" 2>&1 || { fail "lia on $ranks ranks"; tail -5 "$work/lia$ranks.log" | sed 's/^/    /'; }
done
check_log_stages lia "$work/lia2.log" "Set-up,Training,Votes,Retraining,Output"
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
# The record-canary audit (bitwise across ranks above): 200 canaries, about half inserted, bounds
# in [0, the accountant's eps of the audited training].
assert f["/audit/canary_inserted"].shape == (200,) and 60 < f["/audit/canary_inserted"][...].sum() < 140
eps = f["/audit/epsilon_accountant"][()]
assert 0 < eps <= f["/lia/epsilon_train"][()] + 1e-9
for name in ("epsilon_lower", "epsilon_lower_final"):
    assert 0 <= f["/audit/" + name][()] <= eps, name
assert np.all(np.isfinite(f["/audit/canary_score_all_iterates"][...]))
PY
then pass "lia on 1, 2, 3 ranks: bitwise-identical votes, decisions, sign check, minority, FL curves and record-canary audit"
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

# lia: the filtering stage is unit 1, the seven FL methods units 2-8.
sweep_resume lr lia "$lia_deck" "$work/liarel1/results.h5" 6 4 "${lia_rel[@]:1}"
sweep_resume li lia "$lia_deck" "$work/lia2/results.h5" 6 4 --set lia.validators_per_contributor=25 \
  --set lia.validation_subsets=2 --set lia.participants=70 --set 'lia.vote_baseline="quantile"' \
  --set lia.vote_quantile=0.3 --set audit.canaries=200

cli_summary
