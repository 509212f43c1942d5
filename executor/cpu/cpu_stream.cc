#include "executor/cpu/cpu_stream.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace loom {

void CpuStream::OnIssuingThread() {
  // Per thread on Linux (a thread is a schedulable entity of its own).
  // Best effort: where it fails, the stream runs at normal priority.
  if (nice_ != 0) setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice_);
}

}  // namespace loom
