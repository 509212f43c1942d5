#include "passes/pass.h"

namespace loom {

PassContext::PassContext(const ParallelLayout& layout, int rank, Program program,
                         Program startup)
    : rank_(rank), program_(std::move(program)), startup_(std::move(startup)) {
  SetLayout(layout);
}

PassContext::PassContext(const ParallelLayout& layout, int rank, const Program* program,
                         const Program* startup)
    : rank_(rank), source_program_(program), source_startup_(startup) {
  SetLayout(layout);
}

void PassContext::SetLayout(const ParallelLayout& layout) {
  layout_ = layout;
  coords_ = layout_.Coords(rank_);
}

void PassContext::ResolveDpDegree(int degree) {
  resolved_.set_dp_degree(degree);
  ParallelLayout l = layout_;
  l.dp = degree;
  SetLayout(l);
}

void PassContext::ResolveMpDegree(int degree) {
  resolved_.set_mp_degree(degree);
  ParallelLayout l = layout_;
  l.mp = degree;
  SetLayout(l);
}

void PassContext::ResolvePpDegree(int degree) {
  resolved_.set_pp_degree(degree);
  ParallelLayout l = layout_;
  l.pp = degree;
  SetLayout(l);
}

void PassContext::ResolveShardingDegree(int degree) {
  resolved_.set_sharding_degree(degree);
  ParallelLayout l = layout_;
  l.sharding = degree < l.dp ? degree : 0;
  SetLayout(l);
}

int PassContext::vpp_degree() const {
  return resolved_.has_vpp_degree() ? resolved_.vpp_degree() : 1;
}

int PassContext::micro_batches() const {
  return resolved_.has_micro_batches() ? resolved_.micro_batches() : 1;
}

StatusOr<const CostContext*> PassContext::CostsFor(const std::string& why) const {
  if (costs_ != nullptr) return costs_;
  return FailedPrecondition(why,
                            " needs the costs of the cluster planned for, and none was "
                            "named (--cluster; PlanOptions::costs)");
}

RankPlan PassContext::TakeRankPlan() {
  auto set = std::make_shared<ProgramSet>();
  set->programs = std::move(plan_.programs);
  set->startup = std::move(startup());
  plan_.programs.clear();
  startup_ = Program();
  RankPlan rp;
  rp.rank = rank_;
  rp.coords = coords_;
  rp.num_chunks = plan_.num_chunks;
  rp.jobs = plan_.jobs;
  rp.program_set = std::move(set);
  rp.resolved = resolved_;
  return rp;
}

}  // namespace loom
