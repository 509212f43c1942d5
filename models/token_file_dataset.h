// Training on real tokens: a file of token ids, memory-mapped, in the
// layout nanoGPT's prepare scripts and Megatron's raw datasets write (a
// flat little-endian array of uint16 or uint32 ids, no header), or any
// file read as bytes (vocabulary 256: `--text`). Row r of step s's batch
// is the window of seq_len + 1 tokens at an offset drawn from (seed, s, r),
// as nanoGPT samples its batches; labels are the window shifted by one.
#ifndef LOOM_MODELS_TOKEN_FILE_DATASET_H_
#define LOOM_MODELS_TOKEN_FILE_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>

#include "framework/status.h"
#include "models/dataset.h"

namespace loom {

class TokenFileDataset : public Dataset {
 public:
  // Bytes per token id: 1 reads a text as bytes.
  enum class Width { kByte = 1, kUint16 = 2, kUint32 = 4 };

  // Maps `path` and checks it: a whole number of ids, more than `seq_len`
  // of them, every id below `vocab_size` (the error names the first that
  // is not, and where).
  static StatusOr<std::unique_ptr<TokenFileDataset>> Open(const std::string& path, Width width,
                                                          int64_t seq_len, int64_t vocab_size,
                                                          int64_t seed);
  ~TokenFileDataset() override;

  void Batch(int64_t step, int64_t batch, std::vector<int64_t>* tokens,
             std::vector<int64_t>* labels) const override;
  std::string Describe() const override;

  int64_t num_tokens() const { return num_tokens_; }
  int64_t Token(int64_t i) const;

 private:
  TokenFileDataset() = default;

  std::string path_;
  Width width_ = Width::kByte;
  int64_t seq_len_ = 0;
  uint64_t seed_ = 0;
  const uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
  int64_t num_tokens_ = 0;
};

// "uint16", "uint32" or "byte"; an error naming the others otherwise.
StatusOr<TokenFileDataset::Width> TokenWidthFromName(const std::string& name);

}  // namespace loom

#endif  // LOOM_MODELS_TOKEN_FILE_DATASET_H_
