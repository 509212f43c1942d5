// The safetensors format (Hugging Face): an 8-byte little-endian header
// length, a JSON header naming each tensor's dtype, shape and byte range,
// then the raw tensors. Loom's checkpoints use it so that PyTorch and
// Hugging Face tools load Loom's parameters directly.
#ifndef LOOM_RUNTIME_SAFETENSORS_H_
#define LOOM_RUNTIME_SAFETENSORS_H_

#include <map>
#include <string>

#include "executor/tensor.h"
#include "framework/status.h"

namespace loom {

struct SafetensorsContents {
  std::map<std::string, Tensor> tensors;
  // The header's "__metadata__": string keys to string values.
  std::map<std::string, std::string> metadata;
};

// The file's bytes: tensors in name order, the header padded with spaces
// to a multiple of 8 bytes so that every tensor starts aligned.
std::string EncodeSafetensors(const SafetensorsContents& contents);

// Parses a whole file. Every malformed part (a header longer than the
// file, bad JSON, an unknown dtype, byte ranges that overlap, leave gaps or
// do not match the shape) is an error naming `origin` and the tensor.
StatusOr<SafetensorsContents> DecodeSafetensors(const std::string& bytes,
                                                const std::string& origin);

}  // namespace loom

#endif  // LOOM_RUNTIME_SAFETENSORS_H_
