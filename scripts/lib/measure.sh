# Shell helpers shared by the scripts that measure runs against the
# simulator (overlap_emulated.sh, sharding_emulated.sh,
# simulator_accuracy.sh). Source it; it defines functions only.

# The median of the numbers on stdin, one per line ("nan" for none).
median() {
  sort -g | awk '{ v[NR] = $1 }
    END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
          else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# The time_ms of each `loom run` step line on stdin from step $1 on, one
# per line: found by its name, since the line grows fields (lr, ...).
step_times() {
  awk -v from="$1" '$1 == "step" && $2 >= from {
    for (i = 3; i < NF; ++i) if ($i == "time_ms") print $(i + 1) }'
}

# The ranks a layout's flags ask for: dp x mp x pp.
world_size() {
  local dp=1 mp=1 pp=1
  set -- $1
  while (($#)); do
    case "$1" in
      --dp) dp=$2 ;; --mp) mp=$2 ;; --pp) pp=$2 ;;
    esac
    shift
  done
  echo $((dp * mp * pp))
}

# Replaces the lines from BEGIN to END (marker lines) of OUT with the file
# GENERATED, or writes a new OUT titled TITLE holding it.
replace_generated() {
  local out=$1 begin=$2 end=$3 generated=$4 title=$5 tmp
  tmp=$(mktemp)
  if [ -f "$out" ] && grep -qF "$begin" "$out"; then
    awk -v gen="$generated" -v b="$begin" -v e="$end" '
      $0 == b { while ((getline line < gen) > 0) print line; skip = 1; next }
      $0 == e { skip = 0; next }
      !skip' "$out" > "$tmp"
  else
    { echo "# $title"; echo; cat "$generated"; } > "$tmp"
  fi
  mkdir -p "$(dirname "$out")"
  mv "$tmp" "$out"
  echo "wrote $out" >&2
}

# Trains the saved plan $1 on $2 ranks under `loom launch --net_rate
# $NET_RATE` for $STEPS steps (`loom run $RUN_FLAGS`, traced), prints the
# median step time (ms) of steps 1 on, and leaves in $WORK/compare.log the
# last step's trace compared with `loom simulate --plan` on cluster $3 and
# cost table $4. Needs LOOM, WORK, STEPS, NET_RATE and RUN_FLAGS.
launch_and_compare() {
  local plan=$1 n=$2 cluster=$3 table=$4 trace=$WORK/trace.json traces
  rm -f "$trace".rank*.json
  "$LOOM" launch --nproc "$n" --net_rate "$NET_RATE" -- \
    "$LOOM" run --plan "$plan" --steps "$STEPS" --trace "$trace" $RUN_FLAGS \
    > "$WORK/run.log" 2>&1 || { cat "$WORK/run.log" >&2; return 1; }
  step_times 1 < "$WORK/run.log" | median
  traces=$(ls "$trace".rank*.json | paste -sd, -)
  "$LOOM" simulate --plan "$plan" --cluster "$cluster" --cost_table "$table" \
    --compare "$traces" > "$WORK/compare.log" 2>&1 || { cat "$WORK/compare.log" >&2; return 1; }
}

# From $WORK/compare.log: the simulated step (ms), and the measured and
# simulated exposed ms of communication category $1 (mp, dp, p2p,
# sharding).
simulated_step() { awk '$1 == "step:" { print $6 }' "$WORK/compare.log"; }
exposed_of() {
  sed -n "s/^exposed comm (ms, mean over ranks):.* $1 measured \([0-9.]*\) simulated \([0-9.]*\).*/\1 \2/p" \
    "$WORK/compare.log"
}

# emulated_setup NAME LAST_HELP_LINE ARGS...: what the scripts that train on
# the emulated network share before measuring. Parses their options
# (--out, --steps, --net_rate, --run_flags; -h prints the script's lines 2
# to LAST_HELP_LINE), checks for a built $LOOM and for root and tc (without
# them: SKIPPED, exit 0), sets LOOM to its real path and WORK to a fresh
# directory removed on exit.
emulated_setup() {
  local name=$1 help=$2
  shift 2
  while (($#)); do
    case "$1" in
      --out) OUT=$2; shift 2 ;;
      --steps) STEPS=$2; shift 2 ;;
      --net_rate) NET_RATE=$2; shift 2 ;;
      --run_flags) RUN_FLAGS=$2; shift 2 ;;
      -h|--help) sed -n "2,${help}p" "scripts/$name"; exit 0 ;;
      *) echo "$name: unknown argument '$1'" >&2; exit 2 ;;
    esac
  done
  [ -x "$LOOM" ] || { echo "$name: $LOOM is missing; build first" >&2; exit 1; }
  if [ "$(id -u)" -ne 0 ] || ! command -v tc > /dev/null; then
    echo "$name: SKIPPED: needs root and iproute2 (ip, tc) for loom launch --net_rate" >&2
    exit 0
  fi
  LOOM=$(realpath "$LOOM")
  WORK=$(mktemp -d "/tmp/loom-${name%.sh}.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
}
