// The pass interface, its registry entry and the context every pass works
// on.
//
// A pass has one job. It takes what it needs as its options (a typed
// struct, pass_options.h), reads what earlier passes resolved and the
// rank's coordinates from the PassContext, edits the rank's program (or,
// late in the pipeline, the rank's plan), and reports whether it changed
// anything. Printing, timing, verification and dumps are the
// PassManager's, never the pass's.
#ifndef LOOM_PASSES_PASS_H_
#define LOOM_PASSES_PASS_H_

#include <any>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "cost_model/cost_context.h"
#include "framework/program.h"
#include "passes/pass_options.h"
#include "passes/shared_analyses.h"
#include "scheduler/plan.h"

namespace loom {

// The rank's plan while passes build it: its job programs are still
// editable. PlanRank wraps them into the shared, immutable program set of
// a RankPlan (PassContext::TakeRankPlan).
struct WorkingPlan {
  int num_chunks = 1;
  std::vector<Job> jobs;
  std::map<JobProgramKey, Program> programs;
};

// What a pass works on: one rank's program and plan.
//
// Every value a pass uses arrives as one of its options. What a pass
// resolves (degrees, micro-batches, the schedule, bucket sizes, sharding)
// it records in resolved(), which later passes read and the rank's plan
// carries.
class PassContext {
 public:
  // Rank `rank` of the grid `layout` (the degrees the ranks are numbered
  // by, until passes resolve others). `startup` initializes the parameters
  // and optimizer state of `program`; passes that reshape parameters
  // rewrite both.
  PassContext(const ParallelLayout& layout, int rank, Program program,
              Program startup = Program());
  // The same, reading `program` and `startup` in place until a pass first
  // asks for one mutably (then it is copied) or replaces it (set_program,
  // set_startup): a pipeline whose first pass builds smaller programs
  // (pipeline-split keeps one stage) never copies the whole. Both must
  // outlive the context and not change while it reads them; their op
  // numbering must be current when several contexts read them from
  // different threads (Block::OpIndex renumbers lazily).
  PassContext(const ParallelLayout& layout, int rank, const Program* program,
              const Program* startup);

  const proto::ResolvedStrategy& resolved() const { return resolved_; }
  // For the fields other than the degrees, which go through Resolve*
  // below so that the layout follows them.
  proto::ResolvedStrategy& resolved() { return resolved_; }

  // A pass that resolves a degree moves the layout, and the rank's
  // coordinates, with it: later passes plan for the layout it resolved.
  void ResolveDpDegree(int degree);
  void ResolveMpDegree(int degree);
  void ResolvePpDegree(int degree);
  // Ranks sharing one ZeRO state (sharding pass); below the dp degree it
  // is hybrid sharding (ParallelLayout::sharding).
  void ResolveShardingDegree(int degree);

  // The layout as resolved so far, kept rather than rebuilt on each call.
  const ParallelLayout& layout() const { return layout_; }
  int dp_degree() const { return layout_.dp; }
  int mp_degree() const { return layout_.mp; }
  int pp_degree() const { return layout_.pp; }
  // As pipeline-split / gradient-accumulation resolved them, else 1.
  int vpp_degree() const;
  int micro_batches() const;
  int rank() const { return rank_; }
  const RankCoords& coords() const { return coords_; }

  // What work costs on the cluster the plan is for (PlanOptions::costs);
  // null when the caller named no cluster. Not owned.
  const CostContext* costs() const { return costs_; }
  void set_costs(const CostContext* costs) { costs_ = costs; }
  // The costs, for a pass that cannot choose without them: the error says
  // `why` it needs them (the pass manager names the pass).
  StatusOr<const CostContext*> CostsFor(const std::string& why) const;
  // Pipeline-split weighs layers by FLOP counts even where costs() could
  // price them (PlanOptions::cut_by_flops).
  bool cut_by_flops() const { return cut_by_flops_; }
  void set_cut_by_flops(bool by_flops) { cut_by_flops_ = by_flops; }

  // The rank's whole program, before it is split into job programs.
  Program& program() {
    if (source_program_ != nullptr) set_program(source_program_->Clone());
    return program_;
  }
  const Program& program() const {
    return source_program_ != nullptr ? *source_program_ : program_;
  }
  // Replaces the program (without copying a program read in place).
  void set_program(Program program) {
    program_ = std::move(program);
    source_program_ = nullptr;
  }
  Program& startup() {
    if (source_startup_ != nullptr) set_startup(source_startup_->Clone());
    return startup_;
  }
  const Program& startup() const {
    return source_startup_ != nullptr ? *source_startup_ : startup_;
  }
  void set_startup(Program startup) {
    startup_ = std::move(startup);
    source_startup_ = nullptr;
  }
  // The rank's plan; empty until the job-split pass fills it.
  WorkingPlan& plan() { return plan_; }
  const WorkingPlan& plan() const { return plan_; }

  // The finished rank plan: the job programs and the startup program move
  // into one shared, immutable set, and resolved() is copied. Leaves the
  // context's programs empty.
  RankPlan TakeRankPlan();

  // Passes that have run, in order.
  const std::vector<std::string>& history() const { return history_; }
  void RecordRun(const std::string& pass) { history_.push_back(pass); }

  // Why a pass chose what it did ("pipeline-split: cut after op 412 ..."),
  // printed by `loom opt --explain`.
  void Explain(const std::string& pass, const std::string& why) {
    remarks_.push_back(pass + ": " + why);
  }
  const std::vector<std::string>& remarks() const { return remarks_; }

  // Where a pass may keep what it learns from the program read in place
  // for the other ranks of the planning call (SharedAnalyses); null: no
  // other rank will ask.
  SharedAnalyses* shared_analyses() const { return shared_analyses_; }
  void set_shared_analyses(SharedAnalyses* shared) { shared_analyses_ = shared; }
  // The program still read in place, shared with the other ranks of the
  // planning call, or null once this context holds a copy of its own.
  const Program* shared_program() const { return source_program_; }

 private:
  void SetLayout(const ParallelLayout& layout);

  const CostContext* costs_ = nullptr;
  bool cut_by_flops_ = false;
  SharedAnalyses* shared_analyses_ = nullptr;
  proto::ResolvedStrategy resolved_;
  ParallelLayout layout_;
  RankCoords coords_;
  int rank_;
  // Read in place until copied into program_ and startup_ (null then).
  // Not owned.
  const Program* source_program_ = nullptr;
  const Program* source_startup_ = nullptr;
  Program program_;
  Program startup_;
  WorkingPlan plan_;
  std::vector<std::string> history_;
  std::vector<std::string> remarks_;
};

class Pass {
 public:
  virtual ~Pass() = default;
  // True if the pass changed the program or plan.
  [[nodiscard]] virtual StatusOr<bool> Run(PassContext& ctx) = 0;
};

// One entry of the pass registry: everything the CLI, the pipeline parser
// and --help need to know about a pass. PassInfoOf below fills in
// `defaults` and `create` from the pass's class and options struct.
struct PassInfo {
  std::string name;     // as written in pipelines: "tensor-parallel"
  std::string summary;  // one line
  // Each field of the options struct, in the order `loom passes' lists them.
  std::vector<PassOption> options;
  // Passes that must have run before this one / may not run with it.
  std::vector<std::string> requires_passes;
  std::vector<std::string> conflicts;
  // The options struct as constructed: every option at its default.
  // Empty for a pass without options.
  std::any defaults;
  // Checks across options, after each was parsed; optional. The error
  // names the option; the parser adds the pass.
  std::function<Status(const std::any& options)> check;
  // The pass, given options of the defaults' type.
  std::function<std::unique_ptr<Pass>(const std::any& options)> create;
};

// The options of a pass that takes none.
struct NoPassOptions {};

// A PassInfo for pass class P, constructed from `const O&` (or, for a
// pass without options, from nothing).
template <typename P, typename O = NoPassOptions>
PassInfo PassInfoOf(std::string name, std::string summary) {
  PassInfo info;
  info.name = std::move(name);
  info.summary = std::move(summary);
  if constexpr (std::is_same_v<O, NoPassOptions>) {
    info.create = [](const std::any&) -> std::unique_ptr<Pass> { return std::make_unique<P>(); };
  } else {
    info.defaults = O();
    info.create = [](const std::any& options) -> std::unique_ptr<Pass> {
      return std::make_unique<P>(std::any_cast<const O&>(options));
    };
  }
  return info;
}

// PassInfo::check from a check of the typed struct.
template <typename O>
std::function<Status(const std::any&)> OptionsCheck(std::function<Status(const O&)> check) {
  return [check](const std::any& options) { return check(std::any_cast<const O&>(options)); };
}

}  // namespace loom

#endif  // LOOM_PASSES_PASS_H_
