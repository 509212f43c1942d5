// Saving and loading programs, in protobuf text format (*.pbtxt) or binary.
//
// Binary files carry a small frame: the magic "LOOMPROG", the payload length
// and a 64-bit FNV-1a checksum of the payload, so that a truncated or
// corrupted file is reported as such instead of parsing into a shorter,
// wrong program. Loading runs the verifier.
#ifndef LOOM_FRAMEWORK_SERIALIZATION_H_
#define LOOM_FRAMEWORK_SERIALIZATION_H_

#include <string>

#include <google/protobuf/message.h>

#include "framework/file_util.h"  // WriteFileAtomically, ReadFile
#include "framework/program.h"

namespace loom {

// True for names ending in .pbtxt or .txt.
bool IsTextFormatPath(const std::string& path);

std::string SerializeProgramBinary(const Program& program);
std::string SerializeProgramText(const Program& program);
// Parses a framed binary or a text-format program and verifies it.
StatusOr<Program> ParseProgram(const std::string& bytes, bool text_format);

// Writes atomically (WriteFileAtomically).
Status SaveProgram(const Program& program, const std::string& path);
// Errors begin with the path.
StatusOr<Program> LoadProgram(const std::string& path);

// ---- Framing and files, shared with other artifacts (plans) ----------------

// Parses protobuf text format; errors read "not a text-format <what>:
// line L, column C: ...".
Status ParseTextFormat(const std::string& text, const std::string& what,
                       google::protobuf::Message* message);

// A binary protobuf payload; errors name `what` and, for a message missing
// required fields, which ("blocks[0].ops[0].type").
Status ParseBinaryPayload(const std::string& payload, const std::string& what,
                          google::protobuf::Message* message);

// `magic` (8 characters), the payload's length and checksum, the payload.
std::string FrameBytes(const std::string& magic, const std::string& payload);
// The payload of FrameBytes' output. Errors name `what` ("program",
// "plan"): "truncated plan: header promises N bytes, file holds M",
// "corrupted plan: checksum mismatch", or a bad magic.
StatusOr<std::string> UnframeBytes(const std::string& bytes,
                                   const std::string& magic,
                                   const std::string& what);

}  // namespace loom

#endif  // LOOM_FRAMEWORK_SERIALIZATION_H_
