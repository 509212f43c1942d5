// Whole-file reads and atomic writes, for every artifact Loom saves
// (programs, plans, traces, tables): a crash or a full disk never leaves a
// half-written file where a good one was.
#ifndef LOOM_FRAMEWORK_FILE_UTIL_H_
#define LOOM_FRAMEWORK_FILE_UTIL_H_

#include <string>

#include <google/protobuf/message.h>

#include "framework/status.h"

namespace loom {

// Writes `bytes` to a temporary file beside `path` (making its directory
// if missing), flushes it to disk and renames it over `path`. A path that
// is not a regular file (/dev/stdout) is written in place. Errors begin
// with the path.
Status WriteFileAtomically(const std::string& path, const std::string& bytes);

// Flushes `dir`'s entries (a rename into it, a file made or removed) to
// disk, so that they survive a power loss as the files' contents do.
Status SyncDirectory(const std::string& dir);

// Whether WriteFileAtomically(path, ...) could write there (its directory
// made and writable, or a device), checked before work whose result goes
// there, so that a bad output path fails first, not after a long run.
Status CheckWritable(const std::string& path);

// The whole file. Errors begin with the path.
StatusOr<std::string> ReadFile(const std::string& path);

// Parses protobuf text format into `message`. Errors read "<origin>: line
// L, column C: <protobuf's message>", naming the unknown or malformed
// field.
Status ParseTextProto(const std::string& text, const std::string& origin,
                      google::protobuf::Message* message);
// Text format of `message`, for files a user reads and edits.
std::string TextProtoToString(const google::protobuf::Message& message);

}  // namespace loom

#endif  // LOOM_FRAMEWORK_FILE_UTIL_H_
