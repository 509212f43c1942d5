// The vocabulary-parallel cross entropy on CUDA: the CPU kernel's algorithm
// and arithmetic (kernels/cpu/vocab_parallel_cross_entropy.h) with the
// per-row work on the device between the three reductions across the
// shards, which the caller supplies on device tensors (an NCCL
// communicator's all-reduce), as for the CPU version.
#ifndef LOOM_EXECUTOR_KERNELS_CUDA_VOCAB_PARALLEL_CROSS_ENTROPY_H_
#define LOOM_EXECUTOR_KERNELS_CUDA_VOCAB_PARALLEL_CROSS_ENTROPY_H_

#include "executor/kernel.h"
#include "executor/kernels/cpu/vocab_parallel_cross_entropy.h"

namespace loom {

// c_softmax_with_cross_entropy's forward on the kernel's CUDA device and
// stream. `reduce` may be empty only when the op's nranks is 1. It is
// called with the stream's work so far complete (communicators are
// host-synchronous), and must leave the reduced rows in the same tensors.
Status VocabParallelCrossEntropyCuda(const KernelContext& ctx, const ShardReduceFn& reduce);

}  // namespace loom

#endif  // LOOM_EXECUTOR_KERNELS_CUDA_VOCAB_PARALLEL_CROSS_ENTROPY_H_
