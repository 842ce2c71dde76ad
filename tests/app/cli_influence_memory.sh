#!/usr/bin/env bash
# Up-front memory estimates of `influence`, `fldp`, `whatif` and `lia` (issue 41;
# docs/operations.md "Memory"): a network's batch buffers and LiSSA's sampled rows are counted
# before training, lia's layers and votes before the layers are trained, and a deck they do not fit
# exits 2 naming the estimate, the limit and the key; a batch_size above every
# client's rows allocates for the rows there are (it was an OOM kill: federation.batch_size = 1e8
# with an MLP), with the same bits as any batch_size above them.
# Usage: cli_influence_memory.sh FLUENCE_BINARY SOURCE_DIR (one CTest entry per script)
set -u
# shellcheck source=tests/app/cli_common.sh
source "$(dirname "$0")/cli_common.sh"

influence_deck="$source_dir/inputs/influence_synthetic.toml"
mlp_deck="$source_dir/inputs/influence_mlp.toml"

# LiSSA: 3e8 sampled rows a product are 1.2 GB of positions per rank on 2 ranks, and one client's
# drawn rows (1.5e7 of 19 features) 2.1 GB more: refused before training, for every command that
# solves.
export FLUENCE_MEMORY_LIMIT=256M
for command in influence fldp; do
  deck=$influence_deck
  [ "$command" = fldp ] && deck="$source_dir/inputs/fldp_synthetic.toml"
  COMMAND=$command expect_input_error "lissa_batch_$command" \
    "for influence.lissa.batch = 300000000: the sampled rows' positions" "$deck" \
    --set 'influence.solver="lissa"' --set influence.lissa.batch=300000000
done
grep -q "more than the 256.0 MiB a rank has (FLUENCE_MEMORY_LIMIT=256M)" "$work/stderr" &&
  pass "the refusal names the estimate and the limit" || fail "the refusal names the limit"

# A network's batch buffers: 2 clients of about 1,500 rows, a hidden layer of 20,000 units, and
# batches of whole clients: about 240 MB of layer outputs and deltas in float, above the 100 MB a
# rank may use, while the model and data (about 10 MB) fit.
export FLUENCE_MEMORY_LIMIT=100M
for command in influence whatif; do
  deck=$mlp_deck
  [ "$command" = whatif ] && deck="$source_dir/inputs/whatif_mlp.toml"
  COMMAND=$command expect_input_error "network_batch_$command" \
    "for the training batch buffers" "$deck" --set partition.clients=2 \
    --set 'model.hidden=[20000]' --set federation.batch_size=100000000 --set influence.vectors=false
done

# lia: 30,000 participants vote on each other: a rank's 15,000 validators keep a loss difference
# for every contributor (3.4 GiB in doubles), far above 1 GiB, while the 200,000-row table fits.
export FLUENCE_MEMORY_LIMIT=1G
COMMAND=lia expect_input_error lia_validators "for a rank's validators' loss differences: 15000 validators x 30000 contributors" \
  "$source_dir/inputs/lia_synthetic.toml" --set data.synthetic.rows=200000 --set lia.participants=30000
unset FLUENCE_MEMORY_LIMIT

# batch_size = 1e8 with an MLP trains in its few MB (under an 8 GB address-space limit; buffers
# for 1e8 rows were about 30 GB) and gives the same bits as batch_size = 100000, also above every
# client's rows.
ok=1
for batch in 100000000 100000; do
  (
    ulimit -v 8000000
    "$mpirun" -n 2 "$fluence" train "$mlp_deck" --out "$work/batch$batch" --quiet \
      --set federation.batch_size=$batch --set federation.rounds=2 >"$work/batch$batch.log" 2>&1
  ) || { ok=0; tail -3 "$work/batch$batch.log" | sed 's/^/    /'; }
done
if [ "$ok" -eq 1 ] && compare_runs "$work/batch100000000/results.h5" "$work/batch100000/results.h5"; then
  pass "federation.batch_size = 1e8 with an MLP: full-client batches, the bits of batch_size = 100000"
else
  fail "federation.batch_size = 1e8 with an MLP"
fi

# FLUENCE_MEMORY_LIMIT malformed on rank 1 only (its environment, set by a wrapper from
# OMPI_COMM_WORLD_RANK; an MPMD launch or a site's per-node module does the same): every rank
# exits 2 with the message, none waits in a collective (timeout: a hang fails, exit 124). Each
# rank's own exit status is recorded by the wrapper, so an abort of the others would show.
for command in train influence; do
  rm -f "$work/rank_code."*
  timeout 120 "$mpirun" -n 2 bash -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then export FLUENCE_MEMORY_LIMIT=lots; fi
    "$@"; code=$?; echo $code >"'"$work"'/rank_code.$OMPI_COMM_WORLD_RANK"; exit $code' wrapper "$fluence" "$command" \
    "$source_dir/inputs/quickstart.toml" --out "$work/one_rank_$command" --quiet >"$work/one_rank_$command.log" 2>&1
  code=$?
  if [ "$code" -eq 2 ] && [ "$(cat "$work/rank_code.0" 2>/dev/null)" = 2 ] &&
    [ "$(cat "$work/rank_code.1" 2>/dev/null)" = 2 ] &&
    [ "$(grep -c 'FLUENCE_MEMORY_LIMIT = "lots" is not allowed' "$work/one_rank_$command.log")" -eq 1 ] &&
    [ ! -e "$work/one_rank_$command/results.h5" ]; then
    pass "$command: FLUENCE_MEMORY_LIMIT malformed on rank 1 only: both ranks exit 2, one message"
  else
    fail "$command: FLUENCE_MEMORY_LIMIT malformed on rank 1 only (mpirun exit $code, rank 0 $(cat "$work/rank_code.0" 2>/dev/null), rank 1 $(cat "$work/rank_code.1" 2>/dev/null); 124: hung)"
    tail -3 "$work/one_rank_$command.log" | sed 's/^/    /'
  fi
done

cli_summary
