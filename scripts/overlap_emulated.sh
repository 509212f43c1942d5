#!/usr/bin/env bash
# 1F1B against 1F1B-overlap for real, on the emulated network, beside what
# the simulator predicted for the same runs.
#
# For each layout: profile its ops into a fresh cost table (`loom profile`),
# then for each schedule train it under `loom launch --net_rate RATE` (one
# process and one shaped link per rank), take the median step time after
# the first step, and read the last step's trace with `loom simulate
# --compare`, which gives the measured and the simulated exposed mp
# communication (the shared accounting, scheduler/timeline_metrics.h) and
# the simulated step. Writes the table between the markers of OUT.
#
# Needs root (network namespaces, tc); not run by CI: it takes minutes.
#
# Runs pass RUN_FLAGS to `loom run` (default --stream_priorities: the
# communication streams outrank calc, so a ready all-reduce gets a core
# while both cores compute; without it its thread waits up to a scheduler
# slice, ~2 ms here, for one).
#
#   scripts/overlap_emulated.sh [--out FILE] [--steps K] [--net_rate 200mbit]
#                               [--run_flags "FLAGS"]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/measure.sh

OUT=docs/overlap_emulated.md
# Steps 1 on are timed: ten medians steady the gain to about a point (at
# five it moved 4 points between runs).
STEPS=11
NET_RATE=200mbit
RUN_FLAGS="--stream_priorities"
LOOM=${LOOM:-build/bin/loom}
MODEL="--preset gpt-small --layers 12 --batch_size 8 --seq_len 32"
LAYOUTS=("--mp 2 --micro_batches 8" "--mp 2 --pp 2 --micro_batches 8")
SCHEDULES=(1F1B 1F1B-overlap)

emulated_setup overlap_emulated.sh 21 "$@"

ROWS=$WORK/rows
: > "$ROWS"
for layout in "${LAYOUTS[@]}"; do
  table=$WORK/table.pbtxt
  echo "profiling $layout ..." >&2
  "$LOOM" profile $MODEL $layout --schedule 1F1B-overlap --cost_table "$table" > "$WORK/profile.log" 2>&1 ||
    { cat "$WORK/profile.log" >&2; exit 1; }
  n=$(world_size "$layout")
  for schedule in "${SCHEDULES[@]}"; do
    echo "running $layout --schedule $schedule on $n ranks at $NET_RATE ..." >&2
    # One plan for the run and the simulation (a simulation given a
    # cluster would balance the pipeline by its costs, a run by FLOPs).
    plan=$WORK/plan.pb
    "$LOOM" plan $MODEL $layout --schedule "$schedule" -o "$plan" > /dev/null
    measured=$(launch_and_compare "$plan" "$n" emulated "$table") || exit 1
    echo "$layout|$schedule|$measured|$(simulated_step)|$(exposed_of mp)" | tee -a "$ROWS" >&2
  done
done

BEGIN_MARK="<!-- scripts/overlap_emulated.sh: generated from here -->"
END_MARK="<!-- scripts/overlap_emulated.sh: generated up to here -->"
{
  echo "$BEGIN_MARK"
  echo
  echo "Written by \`scripts/overlap_emulated.sh\` on $(date -u +%Y-%m-%d): \`$MODEL\`, each"
  echo "rank a process of \`loom launch --net_rate $NET_RATE\`, running \`loom run $RUN_FLAGS\`;"
  echo "measured step: the median of"
  echo "steps 1 to $((STEPS - 1)); exposed mp: time in which mp communication runs and"
  echo "calc does not (mean over ranks), measured from the last step's trace and"
  echo "simulated on \`--cluster emulated\` with the layout's ops profiled just before."
  echo
  echo "| layout | schedule | measured step ms | simulated step ms | exposed mp measured ms | exposed mp simulated ms |"
  echo "| --- | --- | ---: | ---: | ---: | ---: |"
  while IFS='|' read -r layout schedule measured simulated exposed; do
    read -r em es <<< "$exposed"
    echo "| \`$layout\` | $schedule | $measured | $simulated | $em | $es |"
  done < "$ROWS"
  echo
  echo "| layout | measured gain % | predicted gain % | measured exposed mp, overlap / 1F1B |"
  echo "| --- | ---: | ---: | ---: |"
  awk -F'|' '{ split($5, e, " "); k = $1 }
       $2 == "1F1B" { m0[k] = $3; s0[k] = $4; e0[k] = e[1]; order[++n] = k }
       $2 != "1F1B" { m1[k] = $3; s1[k] = $4; e1[k] = e[1] }
       END { for (i = 1; i <= n; ++i) { k = order[i];
               printf "| `%s` | %.1f | %.1f | %.0f%% |\n", k, 100 * (m0[k] - m1[k]) / m0[k],
                      100 * (s0[k] - s1[k]) / s0[k], (e0[k] > 0 ? 100 * e1[k] / e0[k] : 0) } }' "$ROWS"
  echo
  echo "$END_MARK"
} > "$WORK/generated"
replace_generated "$OUT" "$BEGIN_MARK" "$END_MARK" "$WORK/generated" \
  "1F1B-overlap on the emulated network"
