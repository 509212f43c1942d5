#include "executor/cpu/cpu_stream.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "executor/cpu/host_threads.h"

namespace loom {

void CpuStream::OnIssuingThread() {
  // Per thread on Linux (a thread is a schedulable entity of its own).
  // Best effort: where it fails, the stream runs at normal priority.
  if (nice_ != 0) setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice_);
  // Best effort too: a core the process may not use leaves the thread
  // where the OS puts it.
  PinThread(pthread_self(), core_);
}

}  // namespace loom
