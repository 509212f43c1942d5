// Which op types communicate at run time, for the passes that place, pair
// and check them (lowering, the plan verifier).
#ifndef LOOM_SCHEDULER_COMM_OPS_H_
#define LOOM_SCHEDULER_COMM_OPS_H_

#include <string>

namespace loom {

// True for the collectives a group of ranks runs together on a ring:
// allreduce, allgather, reduce_scatter, broadcast and
// c_softmax_with_cross_entropy. Not send / recv (point to point), and not
// identity (local).
inline bool IsRuntimeCollective(const std::string& op_type) {
  return op_type == "allreduce" || op_type == "allgather" ||
         op_type == "reduce_scatter" || op_type == "broadcast" ||
         op_type == "c_softmax_with_cross_entropy";
}

}  // namespace loom

#endif  // LOOM_SCHEDULER_COMM_OPS_H_
