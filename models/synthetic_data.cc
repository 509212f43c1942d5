#include "models/synthetic_data.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace loom {
namespace {

// A counter-based generator: each (seed, step, row, position) has its own
// value, independent of how many values anyone drew before.
uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

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
    uint64_t row_key = SplitMix64(seed_ ^ SplitMix64(step * 1000003 + r));
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
