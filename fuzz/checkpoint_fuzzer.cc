// The checkpoint readers on arbitrary bytes: a safetensors file, and a
// rank's shards as loom launch hands them over (then merged, as rank 0
// merges them). Anything may be refused; nothing may crash, leak or hit
// undefined behaviour, and no header may make the reader allocate more
// than the file could hold.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/safetensors.h"
#include "runtime/training_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  (void)loom::DecodeSafetensors(bytes, "fuzz.safetensors");
  auto shards = loom::DecodeRankShards(bytes, "rank-0.safetensors");
  if (shards.ok()) (void)loom::MergeShards({*shards});
  return 0;
}
