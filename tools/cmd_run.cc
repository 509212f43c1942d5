// loom run: trains under a parallel strategy. All ranks run in this process
// by default; under `loom launch` (LOOM_RANK, LOOM_WORLD_SIZE and
// LOOM_STORE_DIR set) this process runs its one rank and meets the others
// through a file store.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "scheduler/trace.h"
#include "tools/command.h"
#include "tools/common_flags.h"
#include "tools/parallel_trainer.h"

DEFINE_string(trace, "", "write a Chrome trace (Perfetto) of the last step here");
DEFINE_int32(comm_timeout, 60, "seconds a rank waits for a peer before failing");

namespace loom {

Status RunRun(const std::vector<std::string>& args) {
  if (!args.empty()) return InvalidArgument("unexpected argument '", args[0], "'");
  if (FLAGS_steps <= 0) return InvalidArgument("--steps must be positive");
  if (FLAGS_comm_timeout <= 0) return InvalidArgument("--comm_timeout must be positive");
  LOOM_ASSIGN_OR_RETURN(proto::Strategy strategy, StrategyFromFlags());
  LOOM_ASSIGN_OR_RETURN(GptConfig config, GptConfigFromFlags());
  LOOM_ASSIGN_OR_RETURN(OptimizerConfig opt, OptimizerConfigFromFlags());
  ParallelTrainer::Options options;
  options.comm.timeout = std::chrono::seconds(FLAGS_comm_timeout);
  options.trace = !FLAGS_trace.empty();
  std::string trace_path = FLAGS_trace;
  const char* rank = std::getenv("LOOM_RANK");
  if (rank != nullptr) {
    const char* world = std::getenv("LOOM_WORLD_SIZE");
    const char* store = std::getenv("LOOM_STORE_DIR");
    if (world == nullptr || store == nullptr) {
      return InvalidArgument("LOOM_RANK is set but LOOM_WORLD_SIZE or LOOM_STORE_DIR is not "
                             "(start ranks with loom launch)");
    }
    LOOM_RETURN_IF_ERROR(ValidateStrategy(strategy, std::atoi(world)));
    options.local_ranks = {std::atoi(rank)};
    options.comm.file_store_dir = store;
    if (!trace_path.empty()) trace_path += StrCat(".rank", rank, ".json");
  }
  LOOM_ASSIGN_OR_RETURN(auto trainer, ParallelTrainer::Create(config, opt, strategy, options));
  for (int64_t step = 0; step < FLAGS_steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    LOOM_ASSIGN_OR_RETURN(float loss, trainer->Step(step));
    const double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start).count();
    // Only the process holding the loss prints it, so a launch prints each
    // step once, as the in-process run does.
    if (!std::isnan(loss)) {
      std::printf("step %lld loss %.6f time_ms %.3f\n", static_cast<long long>(step), loss, ms);
      std::fflush(stdout);
    }
    if (options.trace && step + 1 < FLAGS_steps) trainer->TakeTrace();  // keep the last
  }
  if (options.trace) {
    LOOM_RETURN_IF_ERROR(WriteChromeTrace(trainer->TakeTrace(), trace_path));
  }
  return Status::OK();
}

}  // namespace loom
