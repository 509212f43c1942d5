// loom opt: runs a pass pipeline over one rank's program and prints the
// result, in the manner of LLVM's opt and mlir-opt.
#include <iostream>
#include <sstream>

#include "framework/program_printer.h"
#include "framework/serialization.h"
#include "passes/pass_manager.h"
#include "passes/test_passes.h"
#include "tools/command.h"
#include "tools/common_flags.h"

DEFINE_string(passes, "", "the pass pipeline, e.g. tensor-parallel{degree=2}");
DEFINE_string(print_after, "", "print the program after these passes (comma-separated)");
DEFINE_bool(print_after_all, false, "print the program after every pass");
DEFINE_bool(time_passes, false, "report each pass's wall time");
DEFINE_bool(verify_each, true, "verify the program after every pass");
DEFINE_string(disable_passes, "", "skip these passes (comma-separated), for bisecting");
DEFINE_string(dump_dir, "", "write NN-<pass>.pbtxt here after every pass");
DEFINE_bool(explain, false, "print why passes chose what they did");
// Left out of `loom opt --help`: Loom's own golden tests of the pass
// manager need these passes; users have no use for them.
DEFINE_bool(test_passes, false,
            "also register the passes that test the pass manager (no-op, test-fail, "
            "test-break-verifier)");
DECLARE_string(o);
DECLARE_string(startup);
DECLARE_bool(vars);

namespace loom {
namespace {

std::set<std::string> SplitList(const std::string& s) {
  std::set<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.insert(item);
  }
  return out;
}

}  // namespace

Status RunOpt(const std::vector<std::string>& args) {
  if (args.size() != 1) return InvalidArgument("expects one program FILE");
  LOOM_ASSIGN_OR_RETURN(proto::Strategy strategy, StrategyFromFlags());
  LOOM_ASSIGN_OR_RETURN(Program program, LoadProgram(args[0]));
  Program startup;
  if (!FLAGS_startup.empty()) {
    LOOM_ASSIGN_OR_RETURN(startup, LoadProgram(FLAGS_startup));
  }
  // The strategy numbers the ranks; the passes take their values from the
  // pipeline's options.
  const ParallelLayout grid = LayoutOf(strategy);
  const int world = grid.world_size();
  if (FLAGS_rank < 0 || FLAGS_rank >= world) {
    return InvalidArgument("--rank ", FLAGS_rank, " is outside the ", world,
                           " ranks of the strategy");
  }
  PassManagerOptions options;
  options.verify_each = FLAGS_verify_each;
  options.disable_passes = SplitList(FLAGS_disable_passes);
  if (FLAGS_test_passes) RegisterTestPasses();
  PassManager pm(options);
  LOOM_RETURN_IF_ERROR(pm.AddPipeline(FLAGS_passes));
  std::ostringstream side;  // instrumentation output, printed before the result
  if (FLAGS_print_after_all || !FLAGS_print_after.empty()) {
    pm.AddInstrumentation(
        MakePrintAfter(SplitList(FLAGS_print_after), FLAGS_print_after_all, &side));
  }
  if (FLAGS_time_passes) pm.AddInstrumentation(MakeTimePasses(&side));
  if (!FLAGS_dump_dir.empty()) pm.AddInstrumentation(MakeDumpAfterEach(FLAGS_dump_dir));

  PassContext ctx(grid, FLAGS_rank, std::move(program), std::move(startup));
  Status run = pm.Run(ctx);
  std::cout << side.str();
  if (!run.ok()) return run;
  std::cout << "// pipeline: " << pm.PipelineString() << "\n";
  std::cout << "// rank " << FLAGS_rank << " (" << CoordsToString(ctx.coords())
            << ")\n";
  if (FLAGS_explain) {
    for (const std::string& r : ctx.remarks()) std::cout << "// " << r << "\n";
  }
  PrintOptions print;
  print.vars = FLAGS_vars;
  if (ctx.plan().programs.empty()) {
    PrintProgram(ctx.program(), std::cout, print);
  } else {
    std::cout << "jobs: " << JobListToString(ctx.plan().jobs, ctx.plan().num_chunks > 1)
              << "\n";
    for (const auto& [key, p] : ctx.plan().programs) {
      std::cout << "== " << JobProgramName(key, ctx.plan().num_chunks > 1)
                << " program ==\n";
      PrintProgram(p, std::cout, print);
    }
  }
  if (!FLAGS_o.empty()) LOOM_RETURN_IF_ERROR(SaveProgram(ctx.program(), FLAGS_o));
  return Status::OK();
}

}  // namespace loom
