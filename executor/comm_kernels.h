// The communication ops of a plan, run over a rank's CommWorld: the
// collectives and send/recv that passes insert, and the vocabulary-parallel
// cross entropy, whose forward needs three all-reduces.
#ifndef LOOM_EXECUTOR_COMM_KERNELS_H_
#define LOOM_EXECUTOR_COMM_KERNELS_H_

#include "executor/comm/comm_world.h"
#include "executor/rank_executor.h"

namespace loom {

// The CommKernelFn of `world`'s rank; `world` must outlive it.
CommKernelFn MakeCommKernels(CommWorld* world);

}  // namespace loom

#endif  // LOOM_EXECUTOR_COMM_KERNELS_H_
