// Whole-file reads and atomic writes, for every artifact Loom saves
// (programs, plans, traces, tables): a crash or a full disk never leaves a
// half-written file where a good one was.
#ifndef LOOM_FRAMEWORK_FILE_UTIL_H_
#define LOOM_FRAMEWORK_FILE_UTIL_H_

#include <string>

#include "framework/status.h"

namespace loom {

// Writes `bytes` to a temporary file beside `path`, flushes it to disk and
// renames it over `path`. Errors begin with the path.
Status WriteFileAtomically(const std::string& path, const std::string& bytes);

// The whole file. Errors begin with the path.
StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace loom

#endif  // LOOM_FRAMEWORK_FILE_UTIL_H_
