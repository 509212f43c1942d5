// The pass interface, its options and the context every pass works on.
//
// A pass has one job. It reads the Strategy and the rank's coordinates from
// the PassContext, edits the rank's program (or, late in the pipeline, the
// rank's plan), and reports whether it changed anything. Printing, timing,
// verification and dumps are the PassManager's, never the pass's.
#ifndef LOOM_PASSES_PASS_H_
#define LOOM_PASSES_PASS_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cost_model/comm_model.h"
#include "cost_model/op_cost_model.h"
#include "framework/program.h"
#include "passes/strategy.h"
#include "passes/strategy.pb.h"
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
// The strategy is read-only. A pass whose options override it (or that
// reads a value from it) records the value it used in resolved(), which
// the rank's plan carries; later passes read resolved values through the
// accessors below, which fall back to the strategy.
class PassContext {
 public:
  // `startup` initializes the parameters and optimizer state of `program`;
  // passes that reshape parameters rewrite both.
  PassContext(proto::Strategy strategy, int rank, Program program,
              Program startup = Program());

  const proto::Strategy& strategy() const { return strategy_; }
  const proto::ResolvedStrategy& resolved() const { return resolved_; }
  proto::ResolvedStrategy& resolved() { return resolved_; }

  // Resolved by an earlier pass, else the strategy's.
  int dp_degree() const;
  int mp_degree() const;
  int pp_degree() const;
  int vpp_degree() const;
  int micro_batches() const;
  std::string schedule_mode() const;
  int64_t dp_bucket_bytes() const;
  // From the degrees above: a pass that resolves a degree moves the rank's
  // coordinates with it, as the layout it plans for.
  ParallelLayout layout() const;
  int rank() const { return rank_; }
  RankCoords coords() const { return layout().Coords(rank_); }

  // What ops cost on the cluster the plan is for, for passes that choose
  // by cost (pipeline-split balances its cut with it); null: passes fall
  // back to FLOP counts. Not owned.
  const OpCostEstimator* cost_model() const { return cost_model_; }
  void set_cost_model(const OpCostEstimator* model) { cost_model_ = model; }
  // What communication costs there, for passes that weigh it against
  // compute (op-split); null: such passes price on the local preset.
  const CommModel* comm_model() const { return comm_model_; }
  void set_comm_model(const CommModel* model) { comm_model_ = model; }
  // The models above, or where none was given the local preset's (ops by
  // roofline), made once and kept by the context.
  StatusOr<const OpCostEstimator*> CostModelOrLocal();
  StatusOr<const CommModel*> CommModelOrLocal();

  // The rank's whole program, before it is split into job programs.
  Program& program() { return program_; }
  const Program& program() const { return program_; }
  Program& startup() { return startup_; }
  const Program& startup() const { return startup_; }
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

 private:
  const OpCostEstimator* cost_model_ = nullptr;
  const CommModel* comm_model_ = nullptr;
  std::shared_ptr<const OpCostEstimator> local_cost_model_;
  std::shared_ptr<const CommModel> local_comm_model_;
  const proto::Strategy strategy_;
  proto::ResolvedStrategy resolved_;
  int rank_;
  Program program_;
  Program startup_;
  WorkingPlan plan_;
  std::vector<std::string> history_;
  std::vector<std::string> remarks_;
};

struct PassOptionSpec {
  std::string name;
  std::string default_value;  // "" for options with no default
  std::string help;
};

// A pass's options as parsed from "name{key=value,...}", with the
// defaults of its spec filled in. Typed reads fail with a message naming the
// pass and option.
class PassOptions {
 public:
  PassOptions() = default;
  PassOptions(std::string pass, std::map<std::string, std::string> values)
      : pass_(std::move(pass)), values_(std::move(values)) {}

  bool Has(const std::string& key) const { return values_.count(key) > 0; }
  StatusOr<int64_t> GetInt(const std::string& key) const;
  StatusOr<bool> GetBool(const std::string& key) const;
  StatusOr<std::string> GetString(const std::string& key) const;
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::string pass_;
  std::map<std::string, std::string> values_;
};

class Pass {
 public:
  virtual ~Pass() = default;
  // True if the pass changed the program or plan.
  [[nodiscard]] virtual StatusOr<bool> Run(PassContext& ctx) = 0;
};

// One entry of the pass registry: everything the CLI, the pipeline parser
// and --help need to know about a pass.
struct PassInfo {
  std::string name;     // as written in pipelines: "tensor-parallel"
  std::string summary;  // one line
  std::vector<PassOptionSpec> options;
  // Passes that must have run before this one / may not run with it.
  std::vector<std::string> requires_passes;
  std::vector<std::string> conflicts;
  std::function<StatusOr<std::unique_ptr<Pass>>(const PassOptions&)> create;
};

}  // namespace loom

#endif  // LOOM_PASSES_PASS_H_
