// loom model: writes a GPT training program.
#include <iostream>

#include "framework/serialization.h"
#include "tools/command.h"
#include "tools/common_flags.h"

DEFINE_string(o, "", "output file; a .pbtxt name writes text format");
DEFINE_string(startup, "",
              "the startup (initialization) program: loom model also writes it here; loom "
              "train and loom run --program read it");

namespace loom {

Status RunModel(const std::vector<std::string>& args) {
  if (FLAGS_o.empty()) return InvalidArgument("-o FILE is required");
  if (!args.empty()) return InvalidArgument("unexpected argument '", args[0], "'");
  LOOM_ASSIGN_OR_RETURN(GptConfig config, GptConfigFromFlags());
  LOOM_ASSIGN_OR_RETURN(OptimizerConfig opt, OptimizerConfigFromFlags());
  LOOM_ASSIGN_OR_RETURN(TrainingProgram tp, BuildGptTrainingProgram(config, opt));
  LOOM_ASSIGN_OR_RETURN(AmpConfig amp, AmpConfigFromFlags());
  LOOM_RETURN_IF_ERROR(ApplyAmp(tp.main, amp, &tp.startup));
  LOOM_RETURN_IF_ERROR(SaveProgram(tp.main, FLAGS_o));
  if (!FLAGS_startup.empty()) {
    LOOM_RETURN_IF_ERROR(SaveProgram(tp.startup, FLAGS_startup));
  }
  std::cout << "wrote " << FLAGS_o << ": " << config.name << ", "
            << tp.main.global_block().num_ops() << " ops, "
            << tp.param_grads.size() << " parameters ("
            << config.NumParameters() << " elements)\n";
  return Status::OK();
}

}  // namespace loom
