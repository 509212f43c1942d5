// The program loader on arbitrary bytes: framed binary and text format,
// then the verifier. Anything may be refused; nothing may crash, leak or
// hit undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <string>

#include "framework/op_registry.h"
#include "framework/serialization.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  loom::RegisterAllOps();
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  (void)loom::ParseProgram(bytes, /*text_format=*/true);
  // Binary: as given, and framed, so that the checksum does not stop every
  // mutation at the door.
  (void)loom::ParseProgram(bytes, /*text_format=*/false);
  (void)loom::ParseProgram(loom::FrameBytes("LOOMPROG", bytes), /*text_format=*/false);
  return 0;
}
