// loom demo: the guided tour. For now: serial training of gpt-tiny, showing
// the loss fall.
#include <chrono>
#include <cstdio>

#include "tools/command.h"
#include "tools/common_flags.h"
#include "tools/serial_trainer.h"

namespace loom {

Status RunDemo(const std::vector<std::string>& args) {
  if (!args.empty()) return InvalidArgument("unexpected argument '", args[0], "'");
  LOOM_ASSIGN_OR_RETURN(GptConfig config, GptPreset("gpt-tiny"));
  config.seed = FLAGS_seed;
  LOOM_ASSIGN_OR_RETURN(OptimizerConfig opt, OptimizerConfigFromFlags());
  const int64_t steps = 200;
  std::printf(
      "Loom demo: serial training of gpt-tiny (%lld layers, hidden %lld, "
      "%lld heads, vocab %lld, %lld x %lld tokens per step, %lld parameters)\n"
      "on the built-in synthetic dataset, %s lr %g, %lld steps.\n\n",
      static_cast<long long>(config.num_layers),
      static_cast<long long>(config.hidden),
      static_cast<long long>(config.num_heads),
      static_cast<long long>(config.vocab_size),
      static_cast<long long>(config.batch_size),
      static_cast<long long>(config.seq_len),
      static_cast<long long>(config.NumParameters()), opt.type.c_str(),
      opt.learning_rate, static_cast<long long>(steps));
  LOOM_ASSIGN_OR_RETURN(auto trainer, SerialTrainer::Create(config, opt));
  float first = 0, last = 0;
  double total_ms = 0;
  for (int64_t step = 0; step < steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    LOOM_ASSIGN_OR_RETURN(last, trainer->Step(step));
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start).count();
    total_ms += ms;
    if (step == 0) first = last;
    if (step % 20 == 0 || step == steps - 1) {
      int bar = static_cast<int>(40.0f * last / first + 0.5f);
      std::printf("step %4lld  loss %7.4f  %6.2f ms  %s\n",
                  static_cast<long long>(step), last, ms,
                  std::string(std::max(bar, 1), '#').c_str());
    }
  }
  std::printf("\nloss %.4f -> %.4f (%.0f%% of the first step) in %lld steps, "
              "%.2f ms per step on average\n",
              first, last, 100.0f * last / first, static_cast<long long>(steps),
              total_ms / steps);
  return Status::OK();
}

}  // namespace loom
