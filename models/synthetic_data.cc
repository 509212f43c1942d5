#include "models/synthetic_data.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace loom {

SyntheticDataset::SyntheticDataset(int64_t vocab_size, int64_t seq_len,
                                   int64_t seed)
    : vocab_size_(vocab_size), seq_len_(seq_len), seed_(seed),
      next_(vocab_size) {
  std::iota(next_.begin(), next_.end(), 0);
  std::mt19937_64 rng(SplitMix64(seed_));
  std::shuffle(next_.begin(), next_.end(), rng);
}

void SyntheticDataset::Batch(int64_t step, int64_t batch,
                             std::vector<int64_t>* tokens,
                             std::vector<int64_t>* labels) const {
  tokens->resize(batch * seq_len_);
  labels->resize(batch * seq_len_);
  for (int64_t r = 0; r < batch; ++r) {
    uint64_t row_key = RowKey(seed_, step, r);
    int64_t t = static_cast<int64_t>(row_key % vocab_size_);
    for (int64_t i = 0; i <= seq_len_; ++i) {
      if (i < seq_len_) (*tokens)[r * seq_len_ + i] = t;
      if (i > 0) (*labels)[r * seq_len_ + i - 1] = t;
      uint64_t h = SplitMix64(row_key + i + 1);
      t = (h & 15) == 0 ? static_cast<int64_t>((h >> 8) % vocab_size_) : next_[t];
    }
  }
}

}  // namespace loom
