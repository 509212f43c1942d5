// The strategy loader on arbitrary text: parse, validate, and where valid
// plan rank 0 of a two-layer gpt-tiny with it. Refusals are fine; a crash,
// a hang or undefined behaviour is not.
#include <cstddef>
#include <cstdint>
#include <string>

#include "models/gpt.h"
#include "passes/planner.h"
#include "passes/strategy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const loom::TrainingProgram* program = [] {
    loom::GptConfig c = loom::GptPreset("gpt-tiny").value();
    c.num_layers = 2;
    return new loom::TrainingProgram(loom::BuildGptTrainingProgram(c).value());
  }();
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto strategy = loom::ParseStrategy(text);
  if (!strategy.ok() || !loom::ValidateStrategy(*strategy).ok()) return 0;
  // Small worlds only: planning every rank of a huge one is slow, not wrong.
  if (loom::LayoutOf(*strategy).world_size() > 16 ||
      strategy->pipeline().micro_batches() > 64) {
    return 0;
  }
  // Without verification after each pass: a pass that leaves bad IR then
  // meets the next pass, where a crash is a finding, and an execution
  // takes a third of the time (3.2 -> 1.0 ms in a release build).
  loom::PlanOptions options;
  options.pass_manager.verify_each = false;
  (void)loom::PlanRank(program->main, program->startup, *strategy, 0, options);
  return 0;
}
