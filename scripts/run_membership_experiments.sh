#!/usr/bin/env bash
# The membership-inference tables of docs/results/audit.md (issue 39; docs/math.md §11.5), on
# Fashion-MNIST, the first 2,000 training and 2,000 test images:
#  1. non-private: McMahan et al.'s 2NN (inputs/fmnist_2nn.toml) on 20 clients of 2 label shards,
#     every client every round, 5 local epochs, 30 rounds; example-level LiRA with SHADOWS shadow
#     models (default 16) against the loss threshold on the same target (each model trained on a
#     random half of every client's images); and again on the first 1,000 images, 10 clients,
#     10 local epochs (overfit further);
#  2. DP-FedAvg at eps = 1, 4, 8 (delta = 1e-5) of softmax regression as inputs/bench_feo2.toml
#     (q = 0.05, 200 rounds, S = 0.5, here fixed), with one image per client so that the
#     accountant's client-level add/remove adjacency is exactly an image's membership, 5 local
#     epochs at learning rate 0.5; example-level LiRA with 8 shadows, each trained privately as
#     the target.
# Then analysis/membership_report.py prints the tables, checks TPR <= e^eps FPR + delta at every
# ROC point of the private runs and draws the ROC figure into OUT.
# Usage: scripts/run_membership_experiments.sh BUILD/fluence [OUT] (RANKS=2, SHADOWS=16 by default)
set -euo pipefail
fluence=${1:?usage: scripts/run_membership_experiments.sh path/to/fluence [out]}
out=${2:-out/membership_experiments}
here=$(cd "$(dirname "$0")/.." && pwd)
ranks=${RANKS:-2}
shadows=${SHADOWS:-16}
mkdir -p "$out"
subset=(--set data.max_train_rows=2000 --set data.max_test_rows=2000
  --set 'audit.membership_level="example"')
run() {  # NAME DECK SETTINGS...: train the deck's model, then audit it (wall seconds on stderr)
  local name=$1 deck=$here/inputs/$2
  shift 2
  local start
  start=$(date +%s)
  bash "$here/scripts/mpirun.sh" -n "$ranks" "$fluence" train "$deck" --out "$out/$name/model" \
    --force --quiet "$@" >"$out/$name.log" 2>&1 </dev/null
  bash "$here/scripts/mpirun.sh" -n "$ranks" "$fluence" audit "$deck" --out "$out/$name" --force \
    --membership "$out/$name/model/results.h5" "$@" >>"$out/$name.log" 2>&1 </dev/null
  echo "$name: $(($(date +%s) - start)) s (train + audit, $ranks ranks)" >&2
}
run 2nn_nonprivate fmnist_2nn.toml "${subset[@]}" --set partition.clients=20 \
  --set federation.rounds=30 --set 'federation.client_sampling="all"' \
  --set federation.local_epochs=5 --set "audit.lira_shadows=$shadows"
run 2nn_nonprivate_1k fmnist_2nn.toml "${subset[@]}" --set data.max_train_rows=1000 \
  --set partition.clients=10 --set federation.rounds=30 --set 'federation.client_sampling="all"' \
  --set federation.local_epochs=10 --set "audit.lira_shadows=$shadows"
for epsilon in 1 4 8; do
  run "softmax_dp_eps$epsilon" bench_feo2.toml "${subset[@]}" --set partition.clients=2000 \
    --set 'partition.scheme="iid"' --set federation.local_epochs=5 \
    --set federation.learning_rate=0.5 --set privacy.adaptive_clip=false \
    --set "privacy.epsilon=$epsilon" --set privacy.delta=1e-5 --set audit.lira_shadows=8
done
/usr/bin/python3 "$here/analysis/membership_report.py" --markdown --figures "$out" \
  "$out/2nn_nonprivate" "$out/2nn_nonprivate_1k" "$out/softmax_dp_eps1" "$out/softmax_dp_eps4" "$out/softmax_dp_eps8"
