// Where host threads run: the cores this process may use, and pinning a
// thread to one, so that ranks sharing a host keep to cores of their own.
#ifndef LOOM_EXECUTOR_CPU_HOST_THREADS_H_
#define LOOM_EXECUTOR_CPU_HOST_THREADS_H_

#include <pthread.h>
#include <sched.h>

#include <vector>

namespace loom {

// The cores this process may run on (its affinity mask), in order; all of
// the host's if the mask cannot be read.
std::vector<int> CoresOfThisProcess();

// Keeps `thread` to `core`; best effort (false where the OS refuses).
// Called before a new thread first runs, it also decides where it starts.
bool PinThread(pthread_t thread, int core);

// The calling thread's cores, given back to it at the end of the scope:
// measurements that pin it for a while do not leave it, and the threads it
// makes later, on one core.
class SavedThreadAffinity {
 public:
  SavedThreadAffinity();
  ~SavedThreadAffinity();
  SavedThreadAffinity(const SavedThreadAffinity&) = delete;
  SavedThreadAffinity& operator=(const SavedThreadAffinity&) = delete;

 private:
  cpu_set_t cores_;
  bool saved_;
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_CPU_HOST_THREADS_H_
