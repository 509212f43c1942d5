// loom train: trains a preset serially, or any saved program (--program),
// printing every step; checkpoints and resumes (runtime/training_loop.h).
#include <cmath>
#include <cstdio>
#include <sstream>

#include "framework/serialization.h"
#include "runtime/parallel_trainer.h"
#include "runtime/program_trainer.h"
#include "runtime/serial_trainer.h"
#include "tools/command.h"
#include "tools/common_flags.h"
#include "tools/flag_groups.h"

DECLARE_string(startup);  // cmd_model.cc
DEFINE_string(fetch, "", "with --program: vars to print after each step, comma-separated");
DEFINE_int32(fetch_values, 8, "leading values of each --fetch var to print");

namespace loom {
namespace {

std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

void PrintFetched(const ProgramTrainer& trainer, const std::vector<std::string>& names,
                  int64_t step) {
  for (const std::string& name : names) {
    StatusOr<const Tensor*> t = trainer.FetchVar(name);
    if (!t.ok()) continue;
    std::printf("step %lld %s %s:", static_cast<long long>(step), name.c_str(),
                MetaToString((*t)->meta()).c_str());
    const std::vector<float> v = (*t)->ToFloatVector();
    for (int i = 0; i < FLAGS_fetch_values && i < static_cast<int>(v.size()); ++i) {
      std::printf(" %.6g", v[i]);
    }
    std::printf("%s\n", static_cast<int>(v.size()) > FLAGS_fetch_values ? " ..." : "");
  }
}

Status TrainProgram() {
  for (const char* flag : kFixedByProgramFlags) {
    if (FlagGiven(flag)) {
      return InvalidArgument("--", flag, " cannot be used with --program: the program fixes "
                             "the model and its optimizer");
    }
  }
  if (FLAGS_fetch_values < 0) return InvalidArgument("--fetch_values must be >= 0");
  LOOM_ASSIGN_OR_RETURN(Program main, LoadProgram(FLAGS_program));
  Program startup;
  if (!FLAGS_startup.empty()) {
    LOOM_ASSIGN_OR_RETURN(startup, LoadProgram(FLAGS_startup));
  }
  if (FLAGS_device != "cpu") {
    return InvalidArgument("--device ", FLAGS_device, " with --program: loom train runs a "
                           "program on the CPU; `loom run --program` runs it on a device");
  }
  ProgramTrainer::Options options;
  options.seed = FLAGS_seed;
  options.fetch = SplitList(FLAGS_fetch);
  const TokenFeed feed = TokenFeedOf(main);
  if (feed.vocab > 0) {
    LOOM_ASSIGN_OR_RETURN(options.data, DatasetFromFlags(feed.vocab, feed.seq_len, FLAGS_seed));
  } else if (FlagGiven("data") || FlagGiven("text")) {
    return InvalidArgument("--program ", FLAGS_program, " reads no token ids (no data var '",
                           kTokensVar, "' looked up in an embedding) for --data or --text");
  }
  LOOM_ASSIGN_OR_RETURN(auto trainer, ProgramTrainer::Create(std::move(main), std::move(startup),
                                                             FLAGS_program, options));
  auto on_step = [&](const StepReport& r) {
    if (!std::isnan(r.loss)) {
      PrintStep(r);
    } else {
      std::printf("step %lld time_ms %.3f\n", static_cast<long long>(r.step), r.ms);
    }
    PrintFetched(*trainer, options.fetch, r.step);
    std::fflush(stdout);
  };
  return RunTrainingLoop(*trainer, TrainingLoopOptionsFromFlags(), on_step, PrintNote);
}

}  // namespace

Status RunTrain(const std::vector<std::string>& args) {
  if (!args.empty()) return InvalidArgument("unexpected argument '", args[0], "'");
  if (FLAGS_steps <= 0) return InvalidArgument("--steps must be positive");
  if (!FLAGS_program.empty()) return TrainProgram();
  if (FlagGiven("startup") || FlagGiven("fetch")) {
    return InvalidArgument("--startup and --fetch go with --program");
  }
  LOOM_ASSIGN_OR_RETURN(GptConfig config, GptConfigFromFlags());
  LOOM_ASSIGN_OR_RETURN(OptimizerConfig opt, OptimizerConfigFromFlags());
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<const Dataset> data, DatasetFromFlags(config));
  LOOM_ASSIGN_OR_RETURN(DeviceType device, DeviceFromFlags());
  if (device != DeviceType::kCpu) {
    // Serial training on a device is the plan of one rank there.
    ParallelTrainer::Options options;
    options.device = device;
    options.data = data;
    LOOM_ASSIGN_OR_RETURN(auto trainer,
                          ParallelTrainer::Create(config, opt, proto::Strategy(), options));
    return RunTrainingLoop(*trainer, TrainingLoopOptionsFromFlags(), PrintStep, PrintNote);
  }
  LOOM_ASSIGN_OR_RETURN(AmpConfig amp, AmpConfigFromFlags());
  LOOM_ASSIGN_OR_RETURN(auto trainer, SerialTrainer::Create(config, opt, data, amp));
  return RunTrainingLoop(*trainer, TrainingLoopOptionsFromFlags(), PrintStep, PrintNote);
}

}  // namespace loom
