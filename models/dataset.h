// Where training batches come from. A batch is a pure function of (seed,
// step, row), never of what was drawn before, so that any split of a
// global batch into data-parallel replicas and micro-batches sees serial
// training's rows, and a resumed run continues with the batches it would
// have drawn.
#ifndef LOOM_MODELS_DATASET_H_
#define LOOM_MODELS_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "framework/counter_rng.h"

namespace loom {

class Dataset {
 public:
  virtual ~Dataset() = default;
  // The global batch of `step`: `batch` rows of the model's sequence
  // length and their next-token labels, row-major.
  virtual void Batch(int64_t step, int64_t batch, std::vector<int64_t>* tokens,
                     std::vector<int64_t>* labels) const = 0;
  // What it reads, for logs and checkpoints ("synthetic", "GPL-3 (text,
  // 35147 tokens)").
  virtual std::string Describe() const = 0;
};

// The draw of row `row` of `step`'s batch.
inline uint64_t RowKey(uint64_t seed, int64_t step, int64_t row) {
  return SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(step) * 1000003 + row));
}

}  // namespace loom

#endif  // LOOM_MODELS_DATASET_H_
