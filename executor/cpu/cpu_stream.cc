#include "executor/cpu/cpu_stream.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace loom {

void CpuStream::OnIssuingThread() {
  // Per thread on Linux (a thread is a schedulable entity of its own).
  // Best effort: where it fails, the stream runs at normal priority.
  if (nice_ != 0) setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice_);
  // Best effort too: a core the process may not use leaves the thread
  // where the OS puts it.
  if (core_ >= 0 && core_ < CPU_SETSIZE) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core_, &set);
    sched_setaffinity(0, sizeof(set), &set);
  }
}

}  // namespace loom
