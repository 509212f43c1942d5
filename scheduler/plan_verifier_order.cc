// Check 4b: reductions of persistable vars follow their last write.
#include <unordered_map>

#include "framework/op_registry.h"
#include "scheduler/plan_verifier_internal.h"

namespace loom {
namespace plan_verifier_internal {

Status PlanVerifier::CheckReductionsFollowWrites(int r) const {
  const RankPlan& rp = rank(r);
  int last_mb = 0;
  for (const Job& j : rp.jobs) last_mb = std::max(last_mb, j.micro_batch);
  // The rank's step as one sequence; for each persistable var, where a
  // backward-type job last writes it (accumulates into it). The optimizer
  // job's writes (updates, zeroing for the next step) come after its use.
  struct Write {
    int64_t position;
    OpRef ref;
  };
  std::unordered_map<std::string, Write> last_write;
  int64_t position = 0;
  for (int j = 0; j < static_cast<int>(rp.jobs.size()); ++j) {
    const Program* program = rp.ProgramFor(job(r, j));
    if (program == nullptr) continue;
    const Block& block = program->global_block();
    const bool accumulates = IsBackwardType(job(r, j).type);
    const auto [begin, end] = OpsOf(r, j);
    for (int index = begin; index < end; ++index) {
      const Op* op = ranks_[r].jobs[j]->ops[index].op;
      if (accumulates && CommKindOf(op->type()) != CommKind::kCollective) {
        for (const std::string& out : op->OutputVars()) {
          const proto::VarDesc* v = block.FindVar(out);
          if (v != nullptr && v->persistable()) last_write[out] = {position, {r, j, index}};
        }
      }
      ++position;
    }
  }
  position = 0;
  for (int j = 0; j < static_cast<int>(rp.jobs.size()); ++j) {
    const Program* program = rp.ProgramFor(job(r, j));
    if (program == nullptr) continue;
    const Block& block = program->global_block();
    const bool runs_all = job(r, j).micro_batch == last_mb ||
                          job(r, j).type == JobType::kOptimizer;
    const auto [begin, end] = OpsOf(r, j);
    for (int index = begin; index < end; ++index) {
      const Op* op = ranks_[r].jobs[j]->ops[index].op;
      const bool runs = (!op->desc().last_micro_batch_only() || runs_all) &&
                        (!op->desc().first_micro_batch_only() || job(r, j).micro_batch == 0);
      if (runs && CommKindOf(op->type()) == CommKind::kCollective) {
        for (const std::string& in : op->InputVars()) {
          const proto::VarDesc* v = block.FindVar(in);
          auto it = last_write.find(in);
          if (v == nullptr || !v->persistable() || it == last_write.end() ||
              it->second.position < position) {
            continue;
          }
          return FailedPrecondition(
              Where(OpRef{r, j, index}), " reduces '", in,
              "' before its last write in the step, ", Where(it->second.ref));
        }
      }
      ++position;
    }
  }
  return Status::OK();
}

}  // namespace plan_verifier_internal
}  // namespace loom
