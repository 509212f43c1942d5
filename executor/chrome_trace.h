// Writes executed instructions as Chrome trace JSON (the "traceEvents"
// format Perfetto and chrome://tracing open): one process per rank, one
// thread per stream, one complete ("X") event per instruction.
#ifndef LOOM_EXECUTOR_CHROME_TRACE_H_
#define LOOM_EXECUTOR_CHROME_TRACE_H_

#include <string>
#include <vector>

#include "executor/rank_executor.h"

namespace loom {

std::string ChromeTraceJson(const std::vector<TraceEvent>& events);
Status WriteChromeTrace(const std::vector<TraceEvent>& events,
                        const std::string& path);

}  // namespace loom

#endif  // LOOM_EXECUTOR_CHROME_TRACE_H_
