#!/usr/bin/env bash
# Builds Loom with clang's sanitizers and runs tests under them:
#
#   asan  build-asan/: AddressSanitizer (with LeakSanitizer) and
#         UndefinedBehaviorSanitizer; the whole test suite.
#   tsan  build-tsan/: ThreadSanitizer; the tests of the multi-stream
#         RankExecutor, the Gloo communicators and the trainers that run
#         ranks as threads or processes (TSAN_TESTS below).
#
#   scripts/sanitize.sh [asan|tsan|all] [--jobs J]
#
# Default: all. J bounds the build's and CTest's parallelism (default: the
# core count). Each sanitizer writes its reports, from the tests and from
# every `loom` they start, to build-<name>/sanitizer-logs/; the script
# prints them and exits non-zero if there is any, or if a test fails.
set -euo pipefail
cd "$(dirname "$0")/.."

WHICH=all
JOBS=$(nproc)
while (($#)); do
  case "$1" in
    asan|tsan|all) WHICH=$1; shift ;;
    --jobs) JOBS=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "sanitize.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
command -v clang++ > /dev/null || { echo "sanitize.sh: clang++ is missing (scripts/setup.sh installs it)" >&2; exit 1; }

# The test binaries (unittests/<name>.cc) that run ranks as threads (one
# per rank, and one per stream within a rank) or as processes.
TSAN_TESTS=(
  communicator_test       # Gloo collectives and send/recv
  comm_world_test         # rings, the store, faults and timeouts
  parallel_training_test  # RankExecutor streams under every schedule and layout
  parameter_parity_test   # the same, parameters after SGD steps
  op_split_test           # split row-parallel matmuls trained on two ranks
  vocab_parallel_ops_test # the vocab-parallel loss over a two-rank ring
  plan_io_test            # a plan loaded from disk, trained on its ranks
  launch_test             # loom launch: rank processes over TCP, signals
  profile_test            # the host profiler's threads, comm profiling
  checkpoint_test         # parallel save and resume, launched ranks' shards
)

# Tests left out of both jobs, each with its reason. They still run in the
# release suite (ctest --test-dir build).
EXCLUDE=(
  # Scale, not memory safety: 45 s under ASan here. The verifier's checks
  # themselves run on the smaller plans of the other PlanVerifier tests.
  'PlanVerifier.VerifiesA512RankPlan'
  # Numbers, not memory safety: steps of gpt-small-width layers set beside
  # the simulator's peak. The allocator's counting runs in every executor
  # test under ASan.
  'DeviceMemory.MeasuredPeakFollowsTheSimulatedPeak'
  # Numbers over many trainings, not memory safety, each several minutes
  # under ASan; the same code paths run there in the smaller tests of their
  # files (one or two layouts each).
  'Sharding.EveryFetchModeAndBucketSizeMatchesSerialTraining'
  'Sharding.Stage3MatchesStage2AndHoldsAnNthOfTheParameters'
  'SequenceParallel.FollowsTensorParallelismOnEveryLayout'
  # Wall time over an emulated link and a Python script over kept runs:
  # timing, not memory.
  'PipelineRounds.NoSwapOfTwoTransfersShortensTheStep'
  # Simulated steps against their unit-time arithmetic over schedules and
  # depths, and 200 serial steps against a loss target: numbers, not
  # memory (the simulator and the serial trainer run under ASan in every
  # other test of their files).
  'PipelineRounds.StepIsTheBusiestStreamPlusTheFill'
  'SerialTraining.GptTinyLossHalvesIn200Steps'
  'SimulatorAccuracyScript.KeptRunsSimulateAgainToTheSameRow'
  # Every plan of a space simulated, against bounds: numbers, not memory,
  # 50 s to 250 s each under ASan. The tuner's code runs under ASan in its
  # other tests (the winner trained, the threads, the JSON, the command).
  'Tuner.BoundsHoldForEveryPlanSimulated'
  'Tuner.PrunedSearchFindsTheExhaustiveWinner'
  'Tuner.MemoryBoundHoldsOverPipelinesUnderBf16'
  'Tuner.MemoryBoundHoldsAndComesCloseUnderBf16'
  'Tuner.TimeBoundHoldsOverDeepPipelinesOnGpus'
  # A search against the wall clock: timing, not memory.
  'Tuner.TimeLimitStopsAfterTheRoundThatPassesIt'
  # Numbers over many trainings, not memory safety: every schedule on
  # three layouts (ParameterParity's tests run every schedule on one
  # layout each under both sanitizers), and 300 steps of bf16 O2 against fp32 (the O2
  # rewrite and the bf16 kernels run in the other Amp tests).
  'ParallelTraining.EveryScheduleOnEveryLayoutMatchesSerial'
  'Amp.Bf16O2TrainingFollowsFp32'
  # Timing: a rank slowed by a cgroup CPU quota, named by its peer. The
  # launch and straggler code runs under ASan in the other tests.
  'Straggler.ALaunchNamesTheRankOnASlowDevice'
  # A script's table against its page: figures, not memory. The simulations
  # it runs are those of the simulator tests.
  'MegatronTable5Script.PrintsTheDocumentedRowOfTheSmallestModel'
  # A thread's scheduling policy, not memory or races. It failed once in
  # the TSan job of a fresh clone (2026-12-02, its output lost) and passed
  # in every TSan run here since; it runs in the release suite.
  'CommWorldTest.GloosEventLoopThreadNeverPreemptsTheRanksThreads'
)
# A CTest regex that matches exactly the names in EXCLUDE.
exclude_regex() {
  local IFS='|'
  echo "^(${EXCLUDE[*]//./\\.})\$"
}

# configure DIR FLAGS...: a clang build, without the benchmarks, at -O1 -g
# (no NDEBUG, so library asserts stay on), with the sanitizer's own
# allocator in place of jemalloc.
configure() {
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++ -DLOOM_BUILD_BENCH=OFF -DLOOM_CUDA=OFF -DLOOM_JEMALLOC=OFF \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g -fno-omit-frame-pointer $*" \
    -DCMAKE_EXE_LINKER_FLAGS="$*" -DCMAKE_SHARED_LINKER_FLAGS="$*" > /dev/null
}

# timed WHAT COMMAND...: runs COMMAND and prints its wall time.
timed() {
  local what=$1; shift
  local start=$SECONDS rc=0
  "$@" || rc=$?
  echo "sanitize: $what: $((SECONDS - start)) s$( ((rc)) && echo ", FAILED (exit $rc)")"
  return $rc
}

# reports DIR: prints the sanitizer reports in DIR/sanitizer-logs/ and
# fails if there is any. A report in a process whose exit code or stderr a
# test does not look at (a rank of `loom launch`, say) is caught here.
reports() {
  local logs=$1/sanitizer-logs
  local files=("$logs"/*)
  [ -e "${files[0]}" ] || return 0
  for f in "${files[@]}"; do
    echo "sanitize: report in $f:"
    cat "$f"
  done
  echo "sanitize: ${#files[@]} sanitizer report(s) in $logs"
  return 1
}

# fresh_logs DIR: an empty DIR/sanitizer-logs/, whose path it prints.
fresh_logs() {
  rm -rf "$1/sanitizer-logs" && mkdir -p "$1/sanitizer-logs"
  echo "$PWD/$1/sanitizer-logs"
}

run_asan() {
  local dir=build-asan
  timed "asan build" build_asan || return 1
  local logs
  logs=$(fresh_logs "$dir")
  # LeakSanitizer on; the first UBSan report stops the process (with
  # -fno-sanitize-recover=undefined), as ASan's does.
  export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:log_path=$logs/asan:log_exe_name=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$logs/ubsan:log_exe_name=1"
  # Leaks in libraries Loom does not own, each with its reason (lsan.supp).
  # print_suppressions=0: the count of suppressed leaks is not a report.
  export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
  local rc=0
  timed "asan tests" ctest --test-dir "$dir" --output-on-failure -j "$JOBS" \
    --timeout 900 -E "$(exclude_regex)" || rc=1
  reports "$dir" || rc=1
  return $rc
}
build_asan() {
  # The checkpoint_torch test runs build-asan/pyenv's Python when there is
  # one (CMake looks when configuring): scripts/setup.sh's, in build/.
  mkdir -p build-asan
  if [ -x build/pyenv/bin/python ] && [ ! -e build-asan/pyenv ]; then
    ln -s ../build/pyenv build-asan/pyenv
  fi
  configure build-asan -fsanitize=address,undefined -fno-sanitize-recover=undefined &&
    nice cmake --build build-asan -j "$JOBS"
}

run_tsan() {
  local dir=build-tsan targets=()
  for t in "${TSAN_TESTS[@]}"; do
    [ -f "unittests/$t.cc" ] && targets+=("$t")
  done
  timed "tsan build" build_tsan "${targets[@]}" || return 1
  local logs
  logs=$(fresh_logs "$dir")
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp:log_path=$logs/tsan:log_exe_name=1"
  # OpenBLAS's own threads are not instrumented, so TSan cannot see how
  # they hand results back. RankExecutor already asks for one thread; this
  # covers the serial trainers the tests compare against.
  export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
  # Only the tests of the binaries built above (the others are _NOT_BUILT).
  local regex
  regex=$(ctest --test-dir "$dir" --show-only=json-v1 | python3 -c '
import json, os, re, sys
cmake_escape = lambda n: re.sub(r"([][\\^$.|()*+?])", r"\\\1", n)
wanted = set(sys.argv[1:])
names = [t["name"] for t in json.load(sys.stdin)["tests"]
         if t.get("command") and os.path.basename(t["command"][0]) in wanted]
print("^(" + "|".join(map(cmake_escape, names)) + ")$" if names else "^$")
' "${targets[@]}") || return 1
  # setarch -R: clang 14's TSan cannot map its shadow memory under the
  # wider address-space randomization of newer kernels (vm.mmap_rnd_bits
  # above 28).
  local rc=0
  timed "tsan tests" setarch "$(uname -m)" -R \
    ctest --test-dir "$dir" --output-on-failure -j "$JOBS" --timeout 900 \
      -R "$regex" -E "$(exclude_regex)" || rc=1
  reports "$dir" || rc=1
  return $rc
}
build_tsan() {
  configure build-tsan -fsanitize=thread &&
    nice cmake --build build-tsan -j "$JOBS" --target "$@"
}

status=0
case $WHICH in
  asan) run_asan || status=1 ;;
  tsan) run_tsan || status=1 ;;
  all) run_asan || status=1; run_tsan || status=1 ;;
esac
exit $status
