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

// Each communication op's local part alone, as if its peers cost nothing:
// an all-reduce or broadcast copies its input, an all-gather repeats it
// (along its axis), a reduce-scatter keeps its first part, a send does
// nothing, a recv zeroes its output, and the vocabulary-parallel cross
// entropy computes its shard with the reductions the identity. The numbers
// are not training's; the work of every compute op around them is, which
// is what `loom profile` times a rank's step for.
CommKernelFn MakeLocalCommKernels();

}  // namespace loom

#endif  // LOOM_EXECUTOR_COMM_KERNELS_H_
