#!/usr/bin/env bash
# ZeRO stage 3 for real, on the emulated network, beside the simulator's
# prediction: dp=2 at stage 0 and at stage 3 with prefetch depth 0, 1, 2.
#
# First fits the shaped link (`loom profile --comm` under `loom launch
# --net_rate RATE`) and profiles the model's ops into a fresh cost table.
# Then for each variant: plans it once (`loom plan -o`), trains that plan
# under `loom launch --net_rate RATE` (one process and one shaped link per
# rank), takes the median step after the first, and reads the last step's
# trace with `loom simulate --plan --compare` on the fitted link, which
# gives the measured and the simulated exposed sharding and dp
# communication (time in which it runs and calc does not) and the
# simulated step. Writes the table between the markers of OUT.
#
# Needs root (network namespaces, tc); not run by CI: it takes minutes.
#
#   scripts/sharding_emulated.sh [--out FILE] [--steps K] [--net_rate 2gbit]
#                                [--run_flags "FLAGS"]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/measure.sh

OUT=docs/sharding_emulated.md
STEPS=6
# Fast enough that a step's gathers (twice the parameters) take about as
# long as its compute, so that how many are hidden decides the step.
NET_RATE=2gbit
RUN_FLAGS="--stream_priorities"
LOOM=${LOOM:-build/bin/loom}
MODEL="--preset gpt-small --layers 2 --batch_size 32 --seq_len 32 --vocab_size 512"
LAYOUT="--dp 2"
VARIANTS=("--sharding_stage 0"
          "--sharding_stage 3 --sharding_prefetch_depth 0"
          "--sharding_stage 3 --sharding_prefetch_depth 1"
          "--sharding_stage 3 --sharding_prefetch_depth 2")

emulated_setup sharding_emulated.sh 18 "$@"
n=$(world_size "$LAYOUT")

echo "fitting the link at $NET_RATE ..." >&2
cluster=$WORK/cluster.pbtxt
"$LOOM" launch --nproc 2 --net_rate "$NET_RATE" -- "$LOOM" profile --comm --cluster emulated \
  --cluster_out "$cluster" > "$WORK/fit.log" 2>&1 || { cat "$WORK/fit.log" >&2; exit 1; }
echo "profiling the ops ..." >&2
table=$WORK/table.pbtxt
"$LOOM" profile $MODEL $LAYOUT --sharding_stage 3 --cost_table "$table" > "$WORK/profile.log" 2>&1 ||
  { cat "$WORK/profile.log" >&2; exit 1; }

ROWS=$WORK/rows
: > "$ROWS"
for variant in "${VARIANTS[@]}"; do
  echo "running $LAYOUT $variant on $n ranks at $NET_RATE ..." >&2
  plan=$WORK/plan.pb
  "$LOOM" plan $MODEL $LAYOUT $variant -o "$plan" > /dev/null
  measured=$(launch_and_compare "$plan" "$n" "$cluster" "$table") || exit 1
  echo "$variant|$measured|$(simulated_step)|$(exposed_of sharding)|$(exposed_of dp)" |
    tee -a "$ROWS" >&2
done

BEGIN_MARK="<!-- scripts/sharding_emulated.sh: generated from here -->"
END_MARK="<!-- scripts/sharding_emulated.sh: generated up to here -->"
{
  echo "$BEGIN_MARK"
  echo
  echo "Written by \`scripts/sharding_emulated.sh\` on $(date -u +%Y-%m-%d): \`$MODEL $LAYOUT\`,"
  echo "each rank a process of \`loom launch --net_rate $NET_RATE\`, running"
  echo "\`loom run $RUN_FLAGS\`; measured step: the median of steps 1 to $((STEPS - 1));"
  echo "exposed: time in which that communication runs and calc does not (mean over"
  echo "ranks), measured from the last step's trace and simulated on the link as"
  echo "fitted just before, with the model's ops profiled just before."
  echo
  echo "| variant | measured step ms | simulated step ms | exposed sharding measured ms | simulated ms | exposed dp measured ms | simulated ms |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
  while IFS='|' read -r variant measured simulated sharding dp; do
    read -r sm ss <<< "$sharding"
    read -r dm ds <<< "$dp"
    echo "| \`$variant\` | $measured | $simulated | $sm | $ss | $dm | $ds |"
  done < "$ROWS"
  echo
  echo "$END_MARK"
} > "$WORK/generated"
replace_generated "$OUT" "$BEGIN_MARK" "$END_MARK" "$WORK/generated" \
  "ZeRO stage 3 on the emulated network"
