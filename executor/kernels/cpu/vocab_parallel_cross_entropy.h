// Megatron's vocabulary-parallel cross entropy, shared by the CPU kernel
// (one rank) and the communication kernel (several ranks): the same
// arithmetic, with the three reductions across the vocabulary shards
// supplied by the caller.
#ifndef LOOM_EXECUTOR_KERNELS_CPU_VOCAB_PARALLEL_CROSS_ENTROPY_H_
#define LOOM_EXECUTOR_KERNELS_CPU_VOCAB_PARALLEL_CROSS_ENTROPY_H_

#include <functional>

#include "executor/kernel.h"

namespace loom {

// Reduces every row's value across the shards in place: the maximum when
// `max`, else the sum. Tensors are FP32 (maxima) or FP64 (sums).
using ShardReduceFn = std::function<Status(const std::vector<Tensor*>& rows, bool max)>;

// c_softmax_with_cross_entropy's forward. `reduce` may be empty only when
// the op's nranks is 1.
Status VocabParallelCrossEntropy(const KernelContext& ctx, const ShardReduceFn& reduce);

}  // namespace loom

#endif  // LOOM_EXECUTOR_KERNELS_CPU_VOCAB_PARALLEL_CROSS_ENTROPY_H_
