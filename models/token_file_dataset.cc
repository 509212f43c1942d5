#include "models/token_file_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace loom {

StatusOr<TokenFileDataset::Width> TokenWidthFromName(const std::string& name) {
  if (name == "uint16") return TokenFileDataset::Width::kUint16;
  if (name == "uint32") return TokenFileDataset::Width::kUint32;
  if (name == "byte") return TokenFileDataset::Width::kByte;
  return InvalidArgument("token dtype '", name, "' is not one of uint16, uint32, byte");
}

StatusOr<std::unique_ptr<TokenFileDataset>> TokenFileDataset::Open(const std::string& path,
                                                                   Width width, int64_t seq_len,
                                                                   int64_t vocab_size,
                                                                   int64_t seed) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFound(path, ": cannot open: ", std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path, ": not a regular file");
  }
  std::unique_ptr<TokenFileDataset> d(new TokenFileDataset);
  d->path_ = path;
  d->width_ = width;
  d->seq_len_ = seq_len;
  d->seed_ = static_cast<uint64_t>(seed);
  d->bytes_ = static_cast<size_t>(st.st_size);
  const int w = static_cast<int>(width);
  if (d->bytes_ % w != 0) {
    ::close(fd);
    return InvalidArgument(path, ": ", d->bytes_, " bytes is not a whole number of ", w,
                           "-byte token ids (is --data_dtype right?)");
  }
  d->num_tokens_ = static_cast<int64_t>(d->bytes_ / w);
  if (d->num_tokens_ <= seq_len) {
    ::close(fd);
    return InvalidArgument(path, ": ", d->num_tokens_, " tokens, but a row of seq_len ", seq_len,
                           " needs ", seq_len + 1);
  }
  void* map = ::mmap(nullptr, d->bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return Internal(path, ": mmap failed: ", std::strerror(errno));
  d->data_ = static_cast<const uint8_t*>(map);
  // Every id must name a row of the embedding; one scan, before training.
  for (int64_t i = 0; i < d->num_tokens_; ++i) {
    const int64_t t = d->Token(i);
    if (t >= vocab_size) {
      return InvalidArgument(path, ": token ", i, " (byte offset ", i * w, ") is ", t,
                             ", outside the model's vocabulary of ", vocab_size,
                             " (raise --vocab_size, or check --data_dtype)");
    }
  }
  return d;
}

TokenFileDataset::~TokenFileDataset() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), bytes_);
}

int64_t TokenFileDataset::Token(int64_t i) const {
  const uint8_t* p = data_ + i * static_cast<int>(width_);
  switch (width_) {
    case Width::kByte: return p[0];
    case Width::kUint16: return p[0] | (p[1] << 8);
    case Width::kUint32:
      return static_cast<int64_t>(p[0] | (p[1] << 8) | (p[2] << 16) |
                                  (static_cast<uint32_t>(p[3]) << 24));
  }
  return 0;
}

void TokenFileDataset::Batch(int64_t step, int64_t batch, std::vector<int64_t>* tokens,
                             std::vector<int64_t>* labels) const {
  tokens->resize(batch * seq_len_);
  labels->resize(batch * seq_len_);
  const uint64_t windows = static_cast<uint64_t>(num_tokens_ - seq_len_);
  for (int64_t r = 0; r < batch; ++r) {
    const int64_t start = static_cast<int64_t>(RowKey(seed_, step, r) % windows);
    for (int64_t i = 0; i < seq_len_; ++i) {
      (*tokens)[r * seq_len_ + i] = Token(start + i);
      (*labels)[r * seq_len_ + i] = Token(start + i + 1);
    }
  }
}

std::string TokenFileDataset::Describe() const {
  const char* kind = width_ == Width::kByte ? "bytes" : width_ == Width::kUint16 ? "uint16" : "uint32";
  return StrCat(path_, " (", kind, ", ", num_tokens_, " tokens)");
}

}  // namespace loom
