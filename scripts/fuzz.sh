#!/usr/bin/env bash
# Builds the libFuzzer harnesses of fuzz/ with clang (ASan, UBSan) in
# build-fuzz/ and runs each for a bounded time on a corpus seeded from the
# repository's programs and configs. Exits non-zero, with the crashing input
# kept in build-fuzz/crashes/, if any harness crashes, leaks or hits
# undefined behaviour.
#
#   scripts/fuzz.sh [--seconds S] [--runs N] [--jobs J]
#
# --seconds bounds each harness's time (default 60), --runs its executions
# (default: no bound); the summary prints the executions each ran.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_EACH=60
RUNS=-1
while (($#)); do
  case "$1" in
    --seconds) SECONDS_EACH=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
command -v clang++ > /dev/null || { echo "fuzz.sh: clang++ is missing (scripts/setup.sh installs it)" >&2; exit 1; }

BUILD=build-fuzz
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ -DLOOM_FUZZ=ON -DLOOM_BUILD_TESTS=OFF -DLOOM_BUILD_BENCH=OFF \
  -DLOOM_CUDA=OFF > /dev/null
cmake --build "$BUILD" -j "$(nproc)" --target program_fuzzer strategy_fuzzer pass_pipeline_fuzzer \
  checkpoint_fuzzer

# Seeds: every program and strategy the repository holds, and a model.
SEEDS=$BUILD/seeds
rm -rf "$SEEDS" && mkdir -p "$SEEDS"/{program,strategy,pass_pipeline,checkpoint} "$BUILD/crashes"
[ -x build/bin/loom ] && build/bin/loom model --preset gpt-tiny --layers 1 -o "$SEEDS/tiny.pbtxt" > /dev/null
for f in unittests/opt/*.pbtxt "$SEEDS"/tiny.pbtxt; do
  [ -f "$f" ] || continue
  cp "$f" "$SEEDS/program/$(basename "$f")"
  { echo "tensor-parallel{degree=2},pipeline-split{stages=2}"; cat "$f"; } > "$SEEDS/pass_pipeline/$(basename "$f")"
done
cp configs/*.pbtxt "$SEEDS/strategy/"
# A one-layer model's checkpoint files.
if [ -x build/bin/loom ]; then
  build/bin/loom train --layers 1 --steps 1 --save_dir "$SEEDS/ckpt" > /dev/null
  cp "$SEEDS"/ckpt/step-*/*.safetensors "$SEEDS/checkpoint/"
  rm -rf "$SEEDS/ckpt"
fi

status=0
for h in program strategy pass_pipeline checkpoint; do
  corpus=$BUILD/corpus/$h
  mkdir -p "$corpus"
  log=$BUILD/$h.log
  # -rss_limit_mb: an input that makes Loom allocate gigabytes is a finding.
  if "$BUILD/bin/${h}_fuzzer" "$corpus" "$SEEDS/$h" -max_total_time="$SECONDS_EACH" \
       -runs="$RUNS" -rss_limit_mb=4096 -timeout=20 -max_len=65536 \
       -artifact_prefix="$BUILD/crashes/${h}-" -print_final_stats=1 > "$log" 2>&1; then
    result="ok"
  else
    result="FAILED (see $log, input in $BUILD/crashes/)"
    status=1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  echo "fuzz: ${h}_fuzzer ${runs:-?} executions in at most ${SECONDS_EACH} s: $result"
done
exit $status
