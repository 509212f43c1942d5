// A pass pipeline over a loaded program: the input is a pipeline string, a
// newline, then a text-format program. Whatever program the loader accepts
// and whatever pipeline parses, the passes refuse or rewrite; they never
// crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "framework/op_registry.h"
#include "framework/serialization.h"
#include "passes/pass_manager.h"
#include "passes/pass_registry.h"
#include "passes/strategy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  loom::RegisterAllPasses();
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  if (newline == std::string::npos || newline > 256) return 0;
  auto program = loom::ParseProgram(input.substr(newline + 1), /*text_format=*/true);
  if (!program.ok()) return 0;
  loom::PassManager pm;
  if (!pm.AddPipeline(input.substr(0, newline)).ok()) return 0;
  loom::PassContext ctx(loom::ParallelLayout{1, 2, 2}, 0, std::move(program).value());
  (void)pm.Run(ctx);
  return 0;
}
