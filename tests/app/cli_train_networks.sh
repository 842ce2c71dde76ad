#!/usr/bin/env bash
# `fluence train` with neural networks (issue 23): a CNN and an MLP on small IDX images, bitwise
# identical on 1-3 ranks, the CNN's stop and resume, DP-FedAvg with the CNN.
# Usage: cli_train_networks.sh FLUENCE_BINARY SOURCE_DIR (one CTest entry per script: tests/CMakeLists.txt)
set -u
# shellcheck source=tests/app/cli_common.sh
source "$(dirname "$0")/cli_common.sh"

write_idx_images "$work/idx"

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
# The CNN (federation.eval_train_loss = false) computes no final gradient: its final line has no
# "|grad h| nan" (issue 41); the MLP's, which evaluates the training loss, shows the norm.
if grep -q "^final: test loss [0-9.]*  test accuracy [0-9.]*%$" "$work/cnn1.log" &&
  ! grep -qiw "nan" "$work/cnn1.log" &&
  grep -q "^final: test loss .*  |grad h| [0-9.e+-]*$" "$work/mlp1.log"; then
  pass "networks: no |grad h| field where the final gradient was not computed"
else
  fail "networks: the final line"
  grep -h "^final" "$work/cnn1.log" "$work/mlp1.log" | sed 's/^/    /'
fi

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
# Plain DP-FedAvg (no opt-out clients, no local test data) computes no client-level FeO2 metric:
# no "feo2 metrics" line of NaNs (issue 41).
if [ "$ok" -eq 1 ] && compare_runs "$work/cnndp2/results.h5" "$work/cnndp3/results.h5" &&
  ! grep -q "feo2 metrics" "$work/cnndp2.log" && ! grep -qiw "nan" "$work/cnndp2.log" &&
  "$python" -c "import h5py,sys; f=h5py.File(sys.argv[1]); assert f['/privacy/epsilon'][-1] > 0" \
    "$work/cnndp2/results.h5"; then
  pass "networks: DP-FedAvg with the CNN is bitwise identical on 2 and 3 ranks"
else fail "networks: DP-FedAvg with the CNN"; fi

cli_summary
