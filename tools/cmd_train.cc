// loom train: trains a preset serially, printing every step.
#include <chrono>
#include <cstdio>

#include "runtime/serial_trainer.h"
#include "tools/command.h"
#include "tools/common_flags.h"

namespace loom {

Status RunTrain(const std::vector<std::string>& args) {
  if (!args.empty()) return InvalidArgument("unexpected argument '", args[0], "'");
  if (FLAGS_steps <= 0) return InvalidArgument("--steps must be positive");
  LOOM_ASSIGN_OR_RETURN(GptConfig config, GptConfigFromFlags());
  LOOM_ASSIGN_OR_RETURN(OptimizerConfig opt, OptimizerConfigFromFlags());
  LOOM_ASSIGN_OR_RETURN(auto trainer, SerialTrainer::Create(config, opt));
  for (int64_t step = 0; step < FLAGS_steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    LOOM_ASSIGN_OR_RETURN(float loss, trainer->Step(step));
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start).count();
    std::printf("step %lld loss %.6f time_ms %.3f\n",
                static_cast<long long>(step), loss, ms);
    std::fflush(stdout);
  }
  return Status::OK();
}

}  // namespace loom
