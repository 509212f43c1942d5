#include "passes/pass.h"

#include "cost_model/cluster.h"

namespace loom {

PassContext::PassContext(proto::Strategy strategy, int rank, Program program,
                         Program startup)
    : strategy_(std::move(strategy)),
      rank_(rank),
      program_(std::move(program)),
      startup_(std::move(startup)) {}

int PassContext::dp_degree() const {
  return resolved_.has_dp_degree() ? resolved_.dp_degree() : strategy_.dp().degree();
}

int PassContext::mp_degree() const {
  return resolved_.has_mp_degree() ? resolved_.mp_degree() : strategy_.mp().degree();
}

int PassContext::pp_degree() const {
  return resolved_.has_pp_degree() ? resolved_.pp_degree() : strategy_.pipeline().degree();
}

int PassContext::vpp_degree() const {
  return resolved_.has_vpp_degree() ? resolved_.vpp_degree()
                                    : strategy_.pipeline().vpp_degree();
}

int PassContext::micro_batches() const {
  return resolved_.has_micro_batches() ? resolved_.micro_batches()
                                       : strategy_.pipeline().micro_batches();
}

std::string PassContext::schedule_mode() const {
  return resolved_.has_schedule_mode() ? resolved_.schedule_mode()
                                       : strategy_.pipeline().schedule_mode();
}

int64_t PassContext::dp_bucket_bytes() const {
  return resolved_.has_dp_bucket_bytes() ? resolved_.dp_bucket_bytes()
                                         : strategy_.dp().bucket_size_bytes();
}

StatusOr<const OpCostEstimator*> PassContext::CostModelOrLocal() {
  if (cost_model_ != nullptr) return cost_model_;
  if (local_cost_model_ == nullptr) {
    LOOM_ASSIGN_OR_RETURN(proto::Cluster local, LoadCluster("local"));
    local_cost_model_ = std::make_shared<OpCostModel>(std::move(local), CostTable());
  }
  return local_cost_model_.get();
}

StatusOr<const CommModel*> PassContext::CommModelOrLocal() {
  if (comm_model_ != nullptr) return comm_model_;
  if (local_comm_model_ == nullptr) {
    LOOM_ASSIGN_OR_RETURN(proto::Cluster local, LoadCluster("local"));
    local_comm_model_ = std::make_shared<CommModel>(std::move(local));
  }
  return local_comm_model_.get();
}

ParallelLayout PassContext::layout() const {
  ParallelLayout layout = LayoutOf(strategy());
  layout.dp = dp_degree();
  layout.mp = mp_degree();
  layout.pp = pp_degree();
  return layout;
}

RankPlan PassContext::TakeRankPlan() {
  auto set = std::make_shared<ProgramSet>();
  set->programs = std::move(plan_.programs);
  set->startup = std::move(startup_);
  plan_.programs.clear();
  startup_ = Program();
  RankPlan rp;
  rp.rank = rank_;
  rp.coords = coords();
  rp.num_chunks = plan_.num_chunks;
  rp.jobs = plan_.jobs;
  rp.program_set = std::move(set);
  rp.resolved = resolved_;
  return rp;
}

StatusOr<std::string> PassOptions::GetString(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) {
    return InvalidArgument("pass ", pass_, ": option '", key, "' is not set");
  }
  return it->second;
}

StatusOr<int64_t> PassOptions::GetInt(const std::string& key) const {
  LOOM_ASSIGN_OR_RETURN(std::string v, GetString(key));
  try {
    size_t used = 0;
    int64_t n = std::stoll(v, &used);
    if (used == v.size()) return n;
  } catch (...) {
  }
  return InvalidArgument("pass ", pass_, ": option ", key, "=", v,
                         " is not an integer");
}

StatusOr<bool> PassOptions::GetBool(const std::string& key) const {
  LOOM_ASSIGN_OR_RETURN(std::string v, GetString(key));
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  return InvalidArgument("pass ", pass_, ": option ", key, "=", v,
                         " is not true or false");
}

}  // namespace loom
