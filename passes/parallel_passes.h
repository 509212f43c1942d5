// Registry entries of the parallelization passes, one per file.
#ifndef LOOM_PASSES_PARALLEL_PASSES_H_
#define LOOM_PASSES_PARALLEL_PASSES_H_

#include "passes/pass.h"

namespace loom {

PassInfo TensorParallelPassInfo();

}  // namespace loom

#endif  // LOOM_PASSES_PARALLEL_PASSES_H_
