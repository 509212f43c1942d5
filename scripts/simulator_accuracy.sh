#!/usr/bin/env bash
# How close `loom simulate` comes to measured step times on this host.
#
# For every run of the list below, 2-5 times in passes over the whole
# list (a row's runs are minutes apart): train the layout for real
# (`loom run`, median step time after the warm-up steps) with its ops
# profiled between the run's steps into a fresh cost table
# (--interleaved_profile), and simulate it with that table (`loom simulate
# --json`); write one row per layout and network, the median of the runs'
# errors, into docs/simulator_accuracy.md with the mean and the largest
# |error| per network, the commands, the host and its load.
#
# Loopback runs are in-process `loom run` with the cluster `local`;
# emulated runs are `loom launch --nproc N --net_rate RATE -- loom run`
# (root only: they are skipped with a note otherwise) with the cluster
# `emulated`. Not run by CI but for one small row and --resimulate
# (unittests/validation_scripts_test.cc): in full it takes an hour
# and more and wants a quiet host, so
# before each measurement it waits (up to --quiet_wait seconds) until other
# processes keep fewer than --quiet_cores cores busy, and it reports how
# busy they kept the host during each row's runs.
#
# --profile_once measures the prediction a user gets instead (issue 39,
# item 5): the host profiled once before any run (the links as above,
# then every row's ops by `loom profile --plan` into one cost table), each
# run plain `loom run`, and every row simulated from that one profile.
# Its table goes into docs/tuner_accuracy.md (between markers of its own).
#
#   scripts/simulator_accuracy.sh [--out FILE] [--steps K] [--warmup W]
#       [--repeats R] [--max_repeats R2] [--networks loopback,emulated] [--net_rate 1gbit]
#       [--cluster FILE] [--emulated_cluster FILE] [--only REGEX] [--keep DIR]
#       [--quiet_cores C] [--quiet_wait S] [--retries N] [--noise_seconds S]
#       [--resimulate DIR] [--profile_once]
#
# --keep DIR keeps every run (its plan, cost table, cluster, measured
# median) and the clusters; --resimulate DIR then writes the page again
# from those runs with this LOOM's simulator, in seconds and measuring
# nothing: a change to the model is judged against the same runs.
#
# LOOM (environment) names the loom binary; default build/bin/loom.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=""  # default: docs/simulator_accuracy.md, with --profile_once docs/tuner_accuracy.md
PROFILE_ONCE=0
PROFILE_SECONDS=""  # --profile_once: how long the ops' profile before the runs took
STEPS=""          # steps per run (empty: the model's, below); the first WARMUP are not counted
WARMUP=2          # ... nor the profile's first WARMUP steps
REPEATS=2         # runs of each layout; the median of their errors counts
MAX_REPEATS=5     # ... more, up to this many, while the errors are SPREAD_LIMIT apart:
                  # the four-rank loopback rows' runs varied 176-212 ms (one plan, three
                  # runs in a row), and the median of three still follows one bad run
SPREAD_LIMIT=5    # points of error
NOISE_SECONDS=20  # the host's own noise (one core's sgemm) is timed this long; 0: not
NETWORKS=loopback,emulated
NET_RATE=1gbit
LOCAL_CLUSTER=""     # empty: measured first (loom profile --comm)
EMULATED_CLUSTER=""  # empty: measured first (loom launch ... loom profile --comm)
ONLY=""
KEEP=""  # a directory: each run's plan, cost table and cluster are kept there
RESIM=""  # a KEEP directory of earlier runs: simulated again, nothing measured
QUIET_CORES=0.1  # other processes' load under which the host counts as quiet
QUIET_WAIT=300
BUSY_RUN=0.2     # a run during which others used more cores is repeated
RETRIES=3
LOOM=${LOOM:-build/bin/loom}

while (($#)); do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --max_repeats) MAX_REPEATS=$2; shift 2 ;;
    --networks) NETWORKS=$2; shift 2 ;;
    --net_rate) NET_RATE=$2; shift 2 ;;
    --cluster) LOCAL_CLUSTER=$2; shift 2 ;;
    --emulated_cluster) EMULATED_CLUSTER=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    --quiet_cores) QUIET_CORES=$2; shift 2 ;;
    --quiet_wait) QUIET_WAIT=$2; shift 2 ;;
    --retries) RETRIES=$2; shift 2 ;;
    --noise_seconds) NOISE_SECONDS=$2; shift 2 ;;
    --resimulate) RESIM=$2; shift 2 ;;
    --profile_once) PROFILE_ONCE=1; shift ;;
    -h|--help) sed -n '2,41p' "$0"; exit 0 ;;
    *) echo "simulator_accuracy.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -x "$LOOM" ] || { echo "simulator_accuracy.sh: $LOOM is missing; build first" >&2; exit 1; }
LOOM=$(realpath "$LOOM")
if [ -n "$RESIM" ]; then
  for f in runs measured.env; do
    [ -f "$RESIM/$f" ] || { echo "simulator_accuracy.sh: --resimulate $RESIM: no $f there (a --keep directory of a measurement holds it)" >&2; exit 1; }
  done
  [ -n "$KEEP" ] && { echo "simulator_accuracy.sh: --resimulate measures nothing to --keep" >&2; exit 2; }
  RESIM=$(realpath "$RESIM")
  # The measurement's settings and host, as it recorded them.
  . "$RESIM/measured.env"
  PROFILE_ONCE=${PROFILE_ONCE:-0}
  LOCAL_CLUSTER=${LOCAL_CLUSTER:-$RESIM/local.cluster.pbtxt}
  EMULATED_CLUSTER=${EMULATED_CLUSTER:-$RESIM/emulated.cluster.pbtxt}
fi
# (After --resimulate's settings: its measurement says which page it was.)
if [ -z "$OUT" ]; then
  OUT=docs/simulator_accuracy.md
  ((PROFILE_ONCE)) && OUT=docs/tuner_accuracy.md
fi

# The runs: networks | model flags | layout flags. Every schedule runs on
# the pipelined layouts; a layout without a pipeline has no schedule. Both
# models have 4 layers, so that VPP can give each of 2 stages 2 chunks, and
# a batch that makes a step tenths of a second of compute here: at their
# presets' batches (gpt-tiny: 8 x 32 tokens) a step is a few ms of
# microsecond ops, and this host's thread scheduling, not the plan, decides
# it (docs/simulator_accuracy.md, "Noise floor"). gpt-small keeps its width
# and heads but a 512-token vocabulary, so that the data-parallel gradients
# (118 MB) cross the emulated link in about a second a step.
TINY="--preset gpt-tiny --layers 4 --batch_size 64 --seq_len 64"
SMALL="--preset gpt-small --layers 4 --vocab_size 512 --batch_size 8 --seq_len 32"
# One core's speed here moves between two rates 1.8x apart every second
# or two. A profile taken before its run, even of several seconds, caught
# other phases than the run: a row's errors, run by run, spread by up to
# 40 points (gpt-tiny mp=2 pp=2 1F1B: +19.8, +5.2, +20.5). Profiled
# between the run's steps, the run and its table share the host's seconds
# (the same row: +15.6, +15.3, +15.4). Steps a run:
TINY_STEPS=40
SMALL_STEPS=16
LAYOUTS=(
  "--dp 2"
  "--mp 2"
  "--pp 2 --micro_batches 4 --schedule FThenB"
  "--pp 2 --micro_batches 4 --schedule 1F1B"
  "--pp 2 --micro_batches 4 --schedule Eager1F1B"
  "--pp 2 --micro_batches 4 --schedule VPP --vpp 2"
  "--pp 2 --micro_batches 4 --schedule ZBH1"
  "--mp 2 --pp 2 --micro_batches 4 --schedule FThenB"
  "--mp 2 --pp 2 --micro_batches 4 --schedule 1F1B"
  "--mp 2 --pp 2 --micro_batches 4 --schedule Eager1F1B"
  "--mp 2 --pp 2 --micro_batches 4 --schedule VPP --vpp 2"
  "--mp 2 --pp 2 --micro_batches 4 --schedule ZBH1"
  "--mp 2 --pp 2 --micro_batches 4 --schedule 1F1B-overlap"
  "--dp 2 --pp 2 --micro_batches 2 --schedule 1F1B"
)
RUNS=()
for layout in "${LAYOUTS[@]}"; do RUNS+=("loopback,emulated|$TINY|$layout|$TINY_STEPS"); done
for layout in "${LAYOUTS[@]}"; do RUNS+=("loopback,emulated|$SMALL|$layout|$SMALL_STEPS"); done

WORK=$(mktemp -d /tmp/loom-accuracy.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
TABLE=$WORK/cost_table.pbtxt
ONCE_TABLE=$WORK/once.cost_table.pbtxt  # --profile_once: every row's ops, profiled before the runs
RUN_CLUSTER=$WORK/run.cluster.pbtxt  # a loopback run's cluster (lockstep_slowdown), a launched one's (shared_core_lockstep)
ROWS=$WORK/rows

# Busy and total jiffies of all cores so far (/proc/stat).
cpu_jiffies() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }
# CPU seconds this shell's finished children have used. `times` runs in
# this shell, not in a $(...) subshell, whose children would be its own.
children_cpu() {
  times > "$WORK/times"
  awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$WORK/times"
}
# Cores other processes kept busy over the last `seconds` (we are idle).
others_busy() {
  local b0 t0 b1 t1
  read -r b0 t0 < <(cpu_jiffies)
  sleep "$1"
  read -r b1 t1 < <(cpu_jiffies)
  awk -v b=$((b1 - b0)) -v t=$((t1 - t0)) -v n="$(nproc)" 'BEGIN { printf "%.2f\n", t ? n * b / t : 0 }'
}
load1() { cut -d' ' -f1 /proc/loadavg; }

# Waits until other processes leave the cores alone (under QUIET_CORES
# busy over a second), or QUIET_WAIT seconds pass.
wait_quiet() {
  local waited=0
  while awk -v b="$(others_busy 1)" -v q="$QUIET_CORES" 'BEGIN { exit !(b >= q) }'; do
    ((waited >= QUIET_WAIT)) && return 0
    waited=$((waited + 1))
  done
}

# Runs "$@" and sets OTHERS to the cores other processes used meanwhile:
# all busy time over the wall time, less what the command itself used.
JIFFY=$(getconf CLK_TCK)
timed_run() {
  local b0 t0 b1 t1 c0 c1 w0 w1
  read -r b0 t0 < <(cpu_jiffies)
  children_cpu > "$WORK/c0"
  w0=$(date +%s.%N)
  "$@"
  w1=$(date +%s.%N)
  children_cpu > "$WORK/c1"
  c0=$(< "$WORK/c0")
  c1=$(< "$WORK/c1")
  read -r b1 t1 < <(cpu_jiffies)
  OTHERS=$(awk -v b=$((b1 - b0)) -v hz="$JIFFY" -v c0="$c0" -v c1="$c1" -v w0="$w0" -v w1="$w1" \
    'BEGIN { o = (b / hz - (c1 - c0)) / (w1 - w0); printf "%.2f", o < 0 ? 0 : o }')
}

. scripts/lib/measure.sh

# The median step time (ms) of `loom run` output on stdin, after WARMUP.
step_median() { step_times "$WARMUP" | median; }

# How far apart runs' medians (stdin) are: (slowest - fastest) / their
# median, in %.
spread_of() {
  sort -g | awk '{ v[NR] = $1 } END {
    m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.1f", 100 * (v[NR] - v[1]) / m }'
}

# How far apart the numbers on stdin are: the largest less the smallest.
points_apart() { sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.1f", hi - lo }'; }

# The host's own noise: how far one core's sgemm rate moves over
# NOISE_SECONDS (loom profile --calibrate_device), a line.
host_noise() {
  if [ "$NOISE_SECONDS" = 0 ]; then
    echo "not measured (--noise_seconds 0)"
    return
  fi
  "$LOOM" profile --calibrate_device --calibrate_seconds "$NOISE_SECONDS" \
    --cluster_out "$WORK/noise.cluster.pbtxt" 2>&1 | sed -n 's/^host noise: //p'
}

# step_time_s of `loom simulate --json`: the largest of the document's
# step_time_s fields (the whole step's is the maximum over its ranks).
sim_seconds() { grep -o '"step_time_s":[0-9.eE+-]*' | cut -d: -f2 | sort -g | tail -1; }

can_emulate() {
  [ "$(id -u)" -eq 0 ] && command -v ip > /dev/null && command -v tc > /dev/null
}

# ---- measure the clusters' links ---------------------------------------------
# The links are measured here, in the regime steps run them in (compute
# between calls), unless given.
if [ -z "$RESIM" ] && [ -z "$LOCAL_CLUSTER" ] && [[ ",$NETWORKS," == *",loopback,"* ]]; then
  LOCAL_CLUSTER=$WORK/local.cluster.pbtxt
  wait_quiet
  "$LOOM" profile --comm --cluster local --cluster_out "$LOCAL_CLUSTER" \
    --cost_table "$TABLE" > "$WORK/comm.log" 2>&1 || { cat "$WORK/comm.log" >&2; exit 1; }
  grep '^kept' "$WORK/comm.log" >&2
fi
if [ -z "$RESIM" ] && [ -z "$EMULATED_CLUSTER" ] && [[ ",$NETWORKS," == *",emulated,"* ]] && can_emulate; then
  EMULATED_CLUSTER=$WORK/emulated.cluster.pbtxt
  wait_quiet
  "$LOOM" launch --nproc 2 --net_rate "$NET_RATE" -- "$LOOM" profile --comm --cluster emulated --comm_rounds 81 --comm_max_bytes 1048576 \
    --comm_idle_ms 4,12 --interference_seconds 3 \
    --cluster_out "$EMULATED_CLUSTER" > "$WORK/comm_emulated.log" 2>&1 ||
    { cat "$WORK/comm_emulated.log" >&2; exit 1; }
  grep -E '^kept|^  after ' "$WORK/comm_emulated.log" >&2
  # Layouts of 4 ranks put two on each core: their calls beside each
  # other's, measured by a launch's two halves.
  wait_quiet
  "$LOOM" launch --nproc 4 --net_rate "$NET_RATE" -- "$LOOM" profile --comm_shared_only --cluster emulated --comm_rounds 81 --comm_max_bytes 1048576 \
    --cluster_out "$EMULATED_CLUSTER" > "$WORK/shared_emulated.log" 2>&1 ||
    { cat "$WORK/shared_emulated.log" >&2; exit 1; }
  grep -A1 '^two groups' "$WORK/shared_emulated.log" >&2
fi
# Every run is kept (in KEEP, or in WORK without --keep): its plan, cost
# table, run cluster and measured median. The rows are then simulated from
# the kept runs, measured now or by --resimulate alike.
[ -z "$RESIM" ] && [ -z "$KEEP" ] && KEEP=$WORK/keep
KEPT=0
if [ -n "$KEEP" ]; then
  mkdir -p "$KEEP"
  : > "$KEEP/runs"
  [ -f "$LOCAL_CLUSTER" ] && cp "$LOCAL_CLUSTER" "$KEEP/local.cluster.pbtxt"
  [ -f "$EMULATED_CLUSTER" ] && cp "$EMULATED_CLUSTER" "$KEEP/emulated.cluster.pbtxt"
fi
if [ -z "$RESIM" ]; then
  LINKS=""
  for c in "$LOCAL_CLUSTER" "$EMULATED_CLUSTER"; do
    [ -f "$c" ] && LINKS+="$(basename "$c"): $(grep -h 'source:' "$c" | sed 's/^ *source: "//; s/"$//')"$'\n'
  done
fi

cluster_of() { if [ "$1" = loopback ]; then echo "$LOCAL_CLUSTER"; else echo "$EMULATED_CLUSTER"; fi; }
preset_of() { awk '{ for (i = 1; i <= NF; ++i) if ($i == "--preset") print $(i + 1) }' <<< "$1"; }

# The simulated step time (s) of one kept run: PLAN priced with TABLE on
# CLUSTER.
simulate_run() { "$LOOM" simulate --plan "$1" --cluster "$3" --cost_table "$2" --json | sim_seconds; }
error_of() { awk -v m="$1" -v s="$2" 'BEGIN { printf "%.2f", 100 * (s * 1e3 - m) / m }'; }

# ---- measure ----------------------------------------------------------------
NOTES=()
if [ -z "$RESIM" ]; then
  START_LOAD=$(load1)
  wait_quiet
  NOISE_START=$(host_noise)
  echo "host noise: $NOISE_START" >&2

  # The rows to measure, network|model|layout|steps, each with one plan
  # for its profile, its simulation and its runs: planned alone, each would
  # pick its own cost-model choices (a run plans at --cluster's costs without
  # the cost table, and
  # the data-parallel buckets follow the cluster's link).
  ROW_KEYS=()
  for network in ${NETWORKS//,/ }; do
    if [ "$network" = emulated ] && ! can_emulate; then
      NOTES+=("Emulated runs were skipped: they need root and iproute2 (\`ip\`, \`tc\`); ran as uid $(id -u).")
      continue
    fi
    for run in "${RUNS[@]}"; do
      IFS='|' read -r nets model layout steps <<< "$run"
      [ -n "$ONLY" ] && ! grep -qE -- "$ONLY" <<< "$nets|$model|$layout" && continue
      [[ ",$nets," == *",$network,"* ]] || continue
      i=${#ROW_KEYS[@]}
      ROW_KEYS+=("$network|$model|$layout|${STEPS:-$steps}")
      "$LOOM" plan $model $layout --cluster "$(cluster_of "$network")" -o "$WORK/plan.$i" > "$WORK/plan.log" 2>&1 ||
        { cat "$WORK/plan.log" >&2; exit 1; }
      : > "$WORK/errors.$i"
    done
  done

  # --profile_once: every row's ops into one table before any run, as a
  # user would profile a host once and then predict layouts never run.
  if ((PROFILE_ONCE)); then
    rm -f "$ONCE_TABLE"
    wait_quiet
    p0=$(date +%s.%N)
    for i in "${!ROW_KEYS[@]}"; do
      # Each plan's cluster: its network's, with how much longer the plan's
      # ranks take to meet where it pins two to a core (the profile's
      # steps measure it).
      IFS='|' read -r network _ <<< "${ROW_KEYS[$i]}"
      "$LOOM" profile --plan "$WORK/plan.$i" --cost_table "$ONCE_TABLE" \
        --cluster "$(cluster_of "$network")" --cluster_out "$WORK/once_cluster.$i" \
        > "$WORK/profile.log" 2>&1 || { cat "$WORK/profile.log" >&2; exit 1; }
    done
    PROFILE_SECONDS=$(awk -v a="$p0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
    echo "profiled the ops of ${#ROW_KEYS[@]} plans once, in $PROFILE_SECONDS s" >&2
  fi

  # The runs go in passes over all rows, one run of each row a pass, up to
  # MAX_REPEATS passes while a row's errors disagree: on this host a slow
  # stretch lasts minutes (one row's two runs in a row, 21% slower than the
  # same row's an hour before, agreed within 0.2 points), and spread over
  # the hour a row's runs meet different stretches.
  for ((r = 0; r < MAX_REPEATS; ++r)); do
    for i in "${!ROW_KEYS[@]}"; do
      if ((r >= REPEATS)) && awk -v s="$(points_apart < "$WORK/errors.$i")" \
          -v l="$SPREAD_LIMIT" 'BEGIN { exit !(s <= l) }'; then
        continue
      fi
      IFS='|' read -r network model layout steps <<< "${ROW_KEYS[$i]}"
      cluster=$(cluster_of "$network")
      plan=$WORK/plan.$i
      profiled="--interleaved_profile --profile_warmup $WARMUP --cost_table $TABLE"
      run_table=$TABLE
      if ((PROFILE_ONCE)); then
        # Plain runs, priced by the one profile taken before them.
        runcmd="$LOOM run --plan $plan --steps $steps --cluster $cluster"
        [ "$network" = loopback ] ||
          runcmd="$LOOM launch --nproc $(world_size "$layout") --net_rate $NET_RATE -- $runcmd"
        run_table=$ONCE_TABLE
      elif [ "$network" = loopback ]; then
        # (No core_wait: since Gloo's loop thread yields to compute, its fit
        # priced steps slow; docs/simulator_accuracy.md.)
        runcmd="$LOOM run --plan $plan --steps $steps $profiled --cluster $cluster \
          --interleaved_cluster_out $RUN_CLUSTER"
      else
        # Rank 0's process writes the cluster with the shared cores' lockstep.
        runcmd="$LOOM launch --nproc $(world_size "$layout") --net_rate $NET_RATE -- $LOOM run --plan $plan --steps $steps $profiled \
          --cluster $cluster --interleaved_cluster_out $RUN_CLUSTER"
      fi
      # Each run profiles the plan's ops between its steps, and its error is
      # its simulation against itself: the two share the host's seconds.
      # A run during which other processes took a core is measured again
      # (up to RETRIES times; the last one counts).
      for ((try = 0; try <= RETRIES; ++try)); do
        rm -f "$TABLE" "$RUN_CLUSTER"
        wait_quiet
        timed_run $runcmd > "$WORK/run.log" 2> "$WORK/run.err" ||
          { cat "$WORK/run.err" >&2; exit 1; }
        awk -v o="$OTHERS" -v q="$BUSY_RUN" 'BEGIN { exit !(o <= q) }' && break
        echo "  others kept $OTHERS cores busy during the run; measuring again" >&2
      done
      median=$(step_median < "$WORK/run.log")
      ((PROFILE_ONCE)) && cp "$WORK/once_cluster.$i" "$RUN_CLUSTER"
      ((++KEPT))
      cp "$plan" "$KEEP/plan.$KEPT"
      cp "$run_table" "$KEEP/table.$KEPT.pbtxt"
      run_cluster=$cluster
      if [ -f "$RUN_CLUSTER" ]; then
        cp "$RUN_CLUSTER" "$KEEP/cluster.$KEPT.pbtxt"
        run_cluster=$KEEP/cluster.$KEPT.pbtxt
      fi
      echo "$KEPT|$network|$model|$layout|$median|$OTHERS" >> "$KEEP/runs"
      sim=$(simulate_run "$plan" "$KEEP/table.$KEPT.pbtxt" "$run_cluster")
      error=$(error_of "$median" "$sim")
      echo "$error" >> "$WORK/errors.$i"
      echo "pass $((r + 1)), row $((i + 1))/${#ROW_KEYS[@]} ($(preset_of "$model") $layout, $network):" \
        "$median ms measured, $(awk -v s="$sim" 'BEGIN { printf "%.2f", s * 1e3 }') simulated, $error%;" \
        "$(grep -m1 '^profiled' "$WORK/run.log" || true)" >&2
    done
  done

  wait_quiet
  NOISE_END=$(host_noise)
  echo "host noise: $NOISE_END" >&2
  END_LOAD=$(load1)
  MEASURED_ON=$(date -u +%Y-%m-%d)
  HOST_LINE="$(uname -n), $(nproc) cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1))"
  # What the page says of the measurement, for --resimulate.
  for v in START_LOAD END_LOAD NOISE_START NOISE_END MEASURED_ON HOST_LINE LINKS WARMUP \
      STEPS REPEATS MAX_REPEATS SPREAD_LIMIT QUIET_WAIT QUIET_CORES NET_RATE PROFILE_ONCE \
      PROFILE_SECONDS; do
    printf '%s=%q\n' "$v" "${!v}"
  done > "$KEEP/measured.env"
fi

# ---- simulate the kept runs, a row per layout and network --------------------
RUNS_DIR=${RESIM:-$KEEP}
: > "$ROWS"
for network in ${NETWORKS//,/ }; do
  for run in "${RUNS[@]}"; do
    IFS='|' read -r nets model layout steps <<< "$run"
    [ -n "$ONLY" ] && ! grep -qE -- "$ONLY" <<< "$nets|$model|$layout" && continue
    # The row's kept runs, in the order measured: idx|network|model|layout|median ms|others' load.
    mapfile -t kept < <(awk -F'|' -v k="$network|$model|$layout" '$2 "|" $3 "|" $4 == k' "$RUNS_DIR/runs")
    ((${#kept[@]})) || continue
    medians=()
    sims=()
    errors=()
    others=()
    for rec in "${kept[@]}"; do
      IFS='|' read -r idx _ _ _ median busy <<< "$rec"
      run_cluster=$(cluster_of "$network")
      [ -f "$RUNS_DIR/cluster.$idx.pbtxt" ] && run_cluster=$RUNS_DIR/cluster.$idx.pbtxt
      medians+=("$median")
      others+=("$busy")
      sims+=("$(simulate_run "$RUNS_DIR/plan.$idx" "$RUNS_DIR/table.$idx.pbtxt" "$run_cluster")")
      errors+=("$(error_of "$median" "${sims[-1]}")")
    done
    measured=$(printf '%s\n' "${medians[@]}" | median)
    spread=$(printf '%s\n' "${medians[@]}" | spread_of)
    busy=$(printf '%s\n' "${others[@]}" | sort -g | tail -1)
    simulated=$(printf '%s\n' "${sims[@]}" | median)
    error=$(printf '%s\n' "${errors[@]}" | median)
    row=$(awk -v m="$measured" -v s="$simulated" -v e="$error" 'BEGIN { printf "%.2f|%.2f|%+.1f", m, s * 1e3, e }')
    error_spread=$(printf '%s\n' "${errors[@]}" | points_apart)
    echo "$(preset_of "$model")|$model|$layout|$network|$row|${#medians[@]}|$spread|$busy|$error_spread" |
      tee -a "$ROWS" >&2
    # Each run, in the order measured, for the log.
    echo "  runs ms: ${medians[*]}; simulated s: ${sims[*]}; errors %: ${errors[*]}" >&2
  done
done

# ---- the page ---------------------------------------------------------------
# The generated part goes between two markers; what the file holds around
# them (the analysis, written by people) is kept.
MODE=""
((PROFILE_ONCE)) && MODE=" --profile_once"
BEGIN_MARK="<!-- scripts/simulator_accuracy.sh$MODE: generated from here -->"
END_MARK="<!-- scripts/simulator_accuracy.sh$MODE: generated up to here -->"
{
  echo "$BEGIN_MARK"
  echo
  echo "Simulated against measured step time, written by \`scripts/simulator_accuracy.sh$MODE\`"
  if [ -n "$RESIM" ]; then
    echo "on $(date -u +%Y-%m-%d), the runs of $MEASURED_ON simulated again (\`--resimulate\`)."
  else
    echo "on $MEASURED_ON."
  fi
  echo "Measured: the median step time (\`loom run\`'s time_ms)"
  echo "of steps $WARMUP to the last (${STEPS:-$TINY_STEPS for gpt-tiny, $SMALL_STEPS for gpt-small} steps a run), the median over $REPEATS runs (up to $MAX_REPEATS where the"
  echo "first $REPEATS runs' errors were more than $SPREAD_LIMIT points apart), the runs in passes over all rows,"
  echo "one run of each row a pass, so that a row's runs are minutes apart; simulated: the median over those"
  echo "runs of \`loom simulate --json\`'s step_time_s with ops priced from a cost"
  if ((PROFILE_ONCE)); then
    echo "table profiled on this host once, before any run: every row's plan by"
    echo "\`loom profile --plan\` into one table (${PROFILE_SECONDS:-?} s for all), each"
    echo "writing its plan's cluster with how much longer its ranks take to meet where it"
    echo "pins two to a core (\`shared_core_lockstep\`), the links by"
    echo "\`loom profile --comm\` (below); the runs plain \`loom run\`, never profiled;"
  else
    echo "table profiled on this host between the run's steps (\`loom run"
    echo "--interleaved_profile\`: after each step, one step of every rank's ops, timed;"
    echo "on loopback also the profile's copies'"
    echo "lockstep_slowdown, the slower core's stretches of compute over the mean;"
    echo "on the emulated network, where four ranks share two cores, the same with two"
    echo "copies on each core, the cluster's shared_core_lockstep);"
  fi
  echo "all on one plan, saved by \`loom plan\` with the row's cluster."
  echo "Error: the median over the runs of (simulated - measured) / measured, each"
  echo "run against the simulation of its own table; runs' spread ="
  echo "(slowest - fastest run's median) / measured, the host's noise; errors'"
  echo "spread, the largest less the smallest of the runs' errors, in points."
  echo
  echo "| model | model flags | layout | network | measured ms | simulated ms | error % | runs | runs' spread % | others' load | errors' spread |"
  echo "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  while IFS='|' read -r name model layout network measured simulated error runs spread busy error_spread; do
    echo "| $name | \`$model\` | \`$layout\` | $network | $measured | $simulated | $error | $runs | $spread | $busy | $error_spread |"
  done < "$ROWS"
  echo
  echo "| network | runs | mean \\|error\\| % | max \\|error\\| % | mean runs' spread % | max runs' spread % |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: |"
  for network in ${NETWORKS//,/ }; do
    awk -F'|' -v n="$network" '$4 == n { e = $7 < 0 ? -$7 : $7; s += e; if (e > m) m = e; ++c
        t += $9; if ($9 > tm) tm = $9 }
      END { if (c) printf "| %s | %d | %.1f | %.1f | %.1f | %.1f |\n", n, c, s / c, m, t / c, tm }' "$ROWS"
  done
  for note in "${NOTES[@]+"${NOTES[@]}"}"; do
    echo
    echo "$note"
  done
  echo
  echo "## How it was measured"
  echo
  echo "Host: $HOST_LINE,"
  echo "load average $START_LOAD at the start and $END_LOAD at the end. Before each run"
  echo "the script waited (up to $QUIET_WAIT s) until other processes kept under $QUIET_CORES"
  echo "cores busy over a second; the last column is the most cores other processes used"
  echo "during any of a row's runs (all busy CPU time less the run's own, over its wall time)."
  echo
  echo "The host's own noise, one core's sgemm rate every quarter second for $NOISE_SECONDS s"
  echo "(\`loom profile --calibrate_device --calibrate_seconds $NOISE_SECONDS\`), before the runs:"
  echo "$NOISE_START; after them: $NOISE_END."
  echo
  echo "The clusters' links (measured before the runs unless given):"
  echo
  while IFS= read -r line; do [ -n "$line" ] && echo "- $line"; done <<< "$LINKS"
  echo
  echo "Commands, for each row (MODEL and LAYOUT are its flags, N the product of its degrees):"
  echo
  echo '```sh'
  echo "loom profile --comm --cluster local --cluster_out LOCAL  # the loopback link, its awake and shared-core costs"
  echo "loom launch --nproc 2 --net_rate $NET_RATE -- loom profile --comm --cluster emulated --comm_rounds 81 --comm_max_bytes 1048576 --comm_idle_ms 4,12 --interference_seconds 3 --cluster_out EMULATED"
  echo "loom launch --nproc 4 --net_rate $NET_RATE -- loom profile --comm_shared_only --cluster emulated --comm_rounds 81 --comm_max_bytes 1048576 --cluster_out EMULATED  # its shared-core costs"
  echo "# for each row, CLUSTER its network's (LOCAL or EMULATED):"
  echo "loom plan MODEL LAYOUT --cluster CLUSTER -o PLAN        # one plan for both below"
  if ((PROFILE_ONCE)); then
    echo "loom profile --plan PLAN --cost_table TABLE --cluster CLUSTER --cluster_out PLAN_CLUSTER  # every row's, into one TABLE, before any run"
    echo "# then $REPEATS-$MAX_REPEATS times each; K as above:"
    echo "loom run --plan PLAN --steps K --cluster LOCAL  # loopback"
    echo "loom launch --nproc N --net_rate $NET_RATE -- loom run --plan PLAN --steps K --cluster EMULATED  # emulated"
  else
    echo "# then $REPEATS-$MAX_REPEATS times, each with a fresh TABLE; K as above:"
    echo "loom run --plan PLAN --steps K --interleaved_profile --profile_warmup $WARMUP --cost_table TABLE --cluster LOCAL --interleaved_cluster_out RUN_CLUSTER  # loopback, simulated with RUN_CLUSTER"
    echo "loom launch --nproc N --net_rate $NET_RATE -- loom run --plan PLAN --steps K --interleaved_profile --profile_warmup $WARMUP --cost_table TABLE --cluster EMULATED --interleaved_cluster_out RUN_CLUSTER  # emulated, simulated with RUN_CLUSTER"
  fi
  if ((PROFILE_ONCE)); then
    echo "loom simulate --plan PLAN --cluster PLAN_CLUSTER --cost_table TABLE --json"
  else
    echo "loom simulate --plan PLAN --cluster CLUSTER --cost_table TABLE --json"
  fi
  echo '```'
  echo
  echo "$END_MARK"
} > "$WORK/generated.md"
if [ -f "$OUT" ] && grep -qF "$BEGIN_MARK" "$OUT" && grep -qF "$END_MARK" "$OUT"; then
  awk -v b="$BEGIN_MARK" -v e="$END_MARK" -v gen="$WORK/generated.md" '
    $0 == b { while ((getline line < gen) > 0) print line; skip = 1; next }
    $0 == e { skip = 0; next }
    !skip { print }' "$OUT" > "$OUT.tmp"
elif [ -f "$OUT" ]; then
  # A page of its own without the markers (docs/tuner_accuracy.md): the
  # section goes at its end, and the page is kept.
  { cat "$OUT"; echo; cat "$WORK/generated.md"; } > "$OUT.tmp"
else
  { echo "# Simulator accuracy"; echo; cat "$WORK/generated.md"; } > "$OUT.tmp"
fi
mv "$OUT.tmp" "$OUT"
echo "wrote $OUT" >&2
