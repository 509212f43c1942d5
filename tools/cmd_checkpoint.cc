// loom checkpoint: what a checkpoint holds, checked as --resume checks it:
// its manifest, then every tensor with a sum and its first values, so that
// a reader in another framework can compare (scripts/check_checkpoint_torch.py).
#include <cstdio>

#include "runtime/checkpoint.h"
#include "tools/command.h"

DEFINE_int32(values, 4, "leading values of each tensor to print");

namespace loom {
namespace {

void PrintTensors(const char* file, const std::map<std::string, Tensor>& tensors) {
  for (const auto& [name, t] : tensors) {
    const std::vector<float> v = t.ToFloatVector();
    double sum = 0;
    for (float x : v) sum += x;
    std::string shape;
    for (int64_t d : t.shape()) shape += StrCat(shape.empty() ? "" : ",", d);
    std::printf("%s %s %s [%s] sum %.17g first", file, name.c_str(), DataTypeName(t.dtype()),
                shape.c_str(), sum);
    for (int i = 0; i < FLAGS_values && i < static_cast<int>(v.size()); ++i) {
      std::printf(" %.9g", v[i]);
    }
    std::printf("\n");
  }
}

}  // namespace

Status RunCheckpoint(const std::vector<std::string>& args) {
  if (args.size() != 1) return InvalidArgument("expects one DIR (a checkpoint or a save_dir)");
  if (FLAGS_values < 0) return InvalidArgument("--values must be >= 0, got ", FLAGS_values);
  LOOM_ASSIGN_OR_RETURN(Checkpoint c, LoadCheckpoint(args[0]));
  std::printf("checkpoint %s: step %lld, saved by %s, data %s, %zu parameters, %zu optimizer "
              "tensors\n",
              c.path.c_str(), static_cast<long long>(c.info.step), c.info.layout.c_str(),
              c.info.data.c_str(), c.state.parameters.size(), c.state.optimizer.size());
  PrintTensors("model.safetensors", c.state.parameters);
  PrintTensors("optimizer.safetensors", c.state.optimizer);
  return Status::OK();
}

}  // namespace loom
