#!/usr/bin/env bash
# The tables of docs/results/accountants.md: eps by the RDP, PLD and PRV accountants on published
# and Fluence cases, and the noise multiplier each needs for FeO2's deck (inputs/feo2_fashion_mnist
# .toml: eps 3.6 at delta 1e-4, q 0.05, 300 rounds). Usage: scripts/accountant_table.sh BUILD/fluence
set -euo pipefail
fluence=${1:?usage: scripts/accountant_table.sh path/to/fluence}
python=/usr/bin/python3
field() {  # field JSON KEY [FORMAT]
  "$python" -c 'import json, sys; print(format(json.loads(sys.argv[1])[sys.argv[2]], sys.argv[3]))' "$1" "$2" "${3:-.4f}"
}
echo "| case | q | z | steps | delta | RDP | PLD | PRV [lower, upper] |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
while IFS='|' read -r name q z steps delta; do
  row="| $name | $q | $z | $steps | $delta |"
  for accountant in rdp pld prv; do
    json=$("$fluence" privacy --noise "$z" --sampling-rate "$q" --steps "$steps" --delta "$delta" --accountant "$accountant" --json)
    cell=$(field "$json" epsilon)
    [ "$accountant" = prv ] && cell="$cell [$(field "$json" epsilon_lower), $(field "$json" epsilon_upper)]"
    row="$row $cell |"
  done
  echo "$row"
done <<'CASES'
Opacus accountants_test (PRV 6.7774 published)|0.04|1.5|2249|1e-5
tensorflow/privacy MNIST (RDP 0.7242 published)|0.0025|1.3|6000|1e-5
inputs/bench_feo2.toml (DP-FedAvg, 200 rounds)|0.05|1.0|200|1e-5
small q, many steps|0.01|0.8|10000|1e-6
large q, few steps|0.5|3.0|100|1e-5
CASES
echo
echo "| accountant | noise multiplier for eps 3.6 | eps it reports | seconds |"
echo "| --- | ---: | ---: | ---: |"
for accountant in rdp pld prv; do
  start=$(date +%s.%N)
  json=$("$fluence" privacy --epsilon 3.6 --sampling-rate 0.05 --steps 300 --delta 1e-4 --accountant "$accountant" --json)
  seconds=$("$python" -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$start" "$(date +%s.%N)")
  echo "| $accountant | $(field "$json" noise_multiplier) | $(field "$json" epsilon) | $seconds |"
done
