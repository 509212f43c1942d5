// An embedded, deterministic dataset, so that training needs no download.
//
// Each sequence walks a fixed random permutation of the vocabulary: after
// token t comes next[t], except that with probability 1/16 the next token is
// drawn uniformly instead. A model can learn the permutation, so the loss
// falls from log(V) toward the noise floor (about 0.6 nats for V = 128);
// the noise keeps it from collapsing to zero.
#ifndef LOOM_MODELS_SYNTHETIC_DATA_H_
#define LOOM_MODELS_SYNTHETIC_DATA_H_

#include <cstdint>
#include <vector>

#include "models/dataset.h"

namespace loom {

class SyntheticDataset : public Dataset {
 public:
  SyntheticDataset(int64_t vocab_size, int64_t seq_len, int64_t seed);

  void Batch(int64_t step, int64_t batch, std::vector<int64_t>* tokens,
             std::vector<int64_t>* labels) const override;
  std::string Describe() const override { return "synthetic"; }

 private:
  int64_t vocab_size_;
  int64_t seq_len_;
  uint64_t seed_;
  std::vector<int64_t> next_;
};

}  // namespace loom

#endif  // LOOM_MODELS_SYNTHETIC_DATA_H_
