// Where host threads run: the cores this process may use, and pinning a
// thread to one, so that ranks sharing a host keep to cores of their own.
#ifndef LOOM_EXECUTOR_CPU_HOST_THREADS_H_
#define LOOM_EXECUTOR_CPU_HOST_THREADS_H_

#include <pthread.h>

#include <vector>

namespace loom {

// The cores this process may run on (its affinity mask), in order; all of
// the host's if the mask cannot be read.
std::vector<int> CoresOfThisProcess();

// Keeps `thread` to `core`; best effort (false where the OS refuses).
// Called before a new thread first runs, it also decides where it starts.
bool PinThread(pthread_t thread, int core);

}  // namespace loom

#endif  // LOOM_EXECUTOR_CPU_HOST_THREADS_H_
