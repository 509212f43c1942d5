// Reading and writing the cost model's text-format files: parse errors
// that name the file, line and field, and atomic writes, so that a reader
// never sees half a table and a crash never leaves one behind.
#ifndef LOOM_COST_MODEL_TEXT_PROTO_H_
#define LOOM_COST_MODEL_TEXT_PROTO_H_

#include <string>

#include <google/protobuf/message.h>

#include "framework/status.h"

namespace loom {

// The whole file; NotFound "<path>: cannot open" when it cannot be read.
StatusOr<std::string> ReadTextFile(const std::string& path);

// Parses text format into `message`. Errors read "<origin>: line L, column
// C: <protobuf's message>", which names the unknown or malformed field.
Status ParseTextProto(const std::string& text, const std::string& origin,
                      google::protobuf::Message* message);

// Writes `contents` to a temporary file in the target's directory (created
// if missing), flushes it to disk and renames it over `path`.
Status WriteFileAtomically(const std::string& path, const std::string& contents);

// Text format of `message`, for files a user reads and edits.
std::string TextProtoToString(const google::protobuf::Message& message);

}  // namespace loom

#endif  // LOOM_COST_MODEL_TEXT_PROTO_H_
