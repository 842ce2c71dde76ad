#!/usr/bin/env bash
# `fluence audit DECK --membership MODEL.h5` (issue 39, membership inference, docs/math.md §11.5):
# the loss-threshold attack on an overfitted model (150 features, 480 training rows, no L2). The
# per-example losses are checked against the training run's own numbers (their means are its final
# /metrics/train_loss and /metrics/test_loss), the AUC against a brute-force Mann-Whitney count and
# the TPR at 1% FPR against a brute-force threshold scan; the results are bitwise the same on 1 and
# 3 ranks; a private model is accepted; a model of another deck is refused, naming the key; and
# client-level LiRA with shadow federations (audit.lira_shadows) against the loss threshold.
# Usage: cli_audit_membership.sh FLUENCE_BINARY SOURCE_DIR (one CTest entry per script: tests/CMakeLists.txt)
set -u
# shellcheck source=tests/app/cli_common.sh
source "$(dirname "$0")/cli_common.sh"

write_deck overfit <<'EOF2'
seed = 2
[data.synthetic]
rows = 600
numeric = 150
classes = 2
[partition]
clients = 4
[federation]
rounds = 30
batch_size = 8
local_epochs = 3
learning_rate = 0.2
eval_train_loss = true
[model]
l2 = 0.0
EOF2
ok=1
"$mpirun" -n 2 "$fluence" train "$work/overfit.toml" --out "$work/model" --quiet >"$work/train.log" 2>&1 ||
  { ok=0; tail -3 "$work/train.log"; }
run_on_ranks member audit "$work/overfit.toml" "1 3" --membership "$work/model/results.h5"
if [ "$ok" -eq 1 ] && "$python" - "$work" <<'PY' && compare_runs "$work/member1/results.h5" "$work/member3/results.h5"; then
import sys, h5py, numpy as np
work = sys.argv[1]
trained = h5py.File(f"{work}/model/results.h5", "r")
g = h5py.File(f"{work}/member1/results.h5", "r")["/audit/membership"]
members, nonmembers = g["member_loss"][...], g["nonmember_loss"][...]
assert members.shape == (480,) and nonmembers.shape == (120,)
assert abs(members.mean() - trained["/metrics/train_loss"][-1]) < 1e-9 * max(1, members.mean())
assert abs(nonmembers.mean() - trained["/metrics/test_loss"][-1]) < 1e-9 * nonmembers.mean()
# scores -loss: AUC = P(member > non) + P(tie) / 2, by brute force over all pairs
s_in, s_out = -members[:, None], -nonmembers[None, :]
auc = (s_in > s_out).mean() + 0.5 * (s_in == s_out).mean()
assert abs(g["auc"][()] - auc) < 1e-12 and auc > 0.6, (g["auc"][()], auc)
# TPR at 1% FPR: the best threshold over every distinct score whose FPR is <= 1%
best = max(((-members >= t).mean() for t in np.unique(np.concatenate([-members, -nonmembers, [np.inf]]))
            if (-nonmembers >= t).mean() <= 0.01), default=0.0)
assert g["tpr_at_fpr_0.01"][()] == best, (g["tpr_at_fpr_0.01"][()], best)
fpr, tpr = g["roc_fpr"][...], g["roc_tpr"][...]
assert fpr[0] == 0 and tpr[-1] == 1 and np.all(np.diff(fpr) >= 0)
PY
  pass "audit --membership: losses as the run's train and test loss, AUC and TPR by brute force, bitwise on 1 and 3 ranks"
else fail "audit --membership"; fi

if "$mpirun" -n 2 "$fluence" train "$work/overfit.toml" --out "$work/private" --quiet \
  --set 'privacy.mode="dp-fedavg"' --set privacy.adaptive_clip=false >"$work/private.log" 2>&1 &&
  "$mpirun" -n 2 "$fluence" audit "$work/overfit.toml" --out "$work/member_private" --quiet \
    --membership "$work/private/results.h5" --set 'privacy.mode="dp-fedavg"' --set privacy.adaptive_clip=false \
    >"$work/member_private.log" 2>&1 && [ -e "$work/member_private/results.h5" ]; then
  pass "audit --membership: a privately trained model"
else fail "audit --membership of a private model"; tail -3 "$work/member_private.log"; fi

# Client-level LiRA (audit.lira_shadows): 40 clients, a target and 8 shadow federations each on a
# half of them. LiRA beats the loss threshold on the same target at 1% FPR; the AUCs by brute force
# from the written scores; bitwise on 1 and 3 ranks.
write_deck lira <<'EOF2'
seed = 2
[data.synthetic]
rows = 1000
numeric = 100
classes = 2
[partition]
clients = 40
[federation]
rounds = 10
batch_size = 8
local_epochs = 3
learning_rate = 0.2
[model]
l2 = 0.0
[audit]
lira_shadows = 8
EOF2
ok=1
"$mpirun" -n 2 "$fluence" train "$work/lira.toml" --out "$work/lira_model" --quiet >"$work/train.log" 2>&1 ||
  { ok=0; tail -3 "$work/train.log"; }
run_on_ranks lira audit "$work/lira.toml" "1 3" --membership "$work/lira_model/results.h5"
if [ "$ok" -eq 1 ] && "$python" - "$work/lira1/results.h5" <<'PY' && compare_runs "$work/lira1/results.h5" "$work/lira3/results.h5"; then
import sys, h5py, numpy as np
g = h5py.File(sys.argv[1], "r")["/audit/membership/client_lira"]
member = g["member"][...].astype(bool)
assert member.shape == (40,) and 10 < member.sum() < 30
for name, score in (("lira", g["lira_score"][...]), ("loss_threshold", g["loss_score"][...])):
    s_in, s_out = score[member][:, None], score[~member][None, :]
    auc = (s_in > s_out).mean() + 0.5 * (s_in == s_out).mean()
    assert abs(g[name]["auc"][()] - auc) < 1e-12, name
assert g["lira"]["tpr_at_fpr_0.01"][()] > g["loss_threshold"]["tpr_at_fpr_0.01"][()]
assert g["lira"]["auc"][()] > 0.9
PY
  pass "audit --membership: client-level LiRA with 8 shadows above the loss threshold at 1% FPR, bitwise on 1 and 3 ranks"
else fail "client-level LiRA"; fi
COMMAND=audit expect_input_error lira_odd "audit.lira_shadows = 3: expected an even number >= 4" \
  "$work/lira.toml" --membership "$work/lira_model/results.h5" --set audit.lira_shadows=3

COMMAND=audit expect_input_error membership_other_deck "federation.rounds = 30 there, 5 here" \
  "$work/overfit.toml" --membership "$work/model/results.h5" --set federation.rounds=5

cli_summary
