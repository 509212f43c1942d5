// Where and how host threads run: the cores this process may use, pinning
// a thread to one (ranks sharing a host keep to cores of their own), and the
// scheduling policy new threads inherit.
#ifndef LOOM_EXECUTOR_CPU_HOST_THREADS_H_
#define LOOM_EXECUTOR_CPU_HOST_THREADS_H_

#include <pthread.h>
#include <sched.h>
#include <sys/types.h>

#include <set>
#include <string>
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

// Runs the calling thread under SCHED_BATCH for the scope, so that the
// threads it starts meanwhile inherit the policy: a batch thread that wakes
// never preempts a running one (sched(7)). A real-time or batch caller is
// left as it is; the caller's own policy comes back at the end.
class BatchPolicyForNewThreads {
 public:
  BatchPolicyForNewThreads();
  ~BatchPolicyForNewThreads();
  BatchPolicyForNewThreads(const BatchPolicyForNewThreads&) = delete;
  BatchPolicyForNewThreads& operator=(const BatchPolicyForNewThreads&) = delete;

 private:
  const int policy_;
  bool changed_ = false;
};

// The threads of this process, by kernel thread id.
std::set<pid_t> ThreadsOfThisProcess();

// A thread's name as the kernel shows it (/proc/self/task/TID/comm); empty
// if the thread is gone.
std::string ThreadName(pid_t tid);

// Names the calling thread `name` (at most 15 characters) for the scope, so
// that the threads it starts meanwhile carry the name: a library's thread
// can then be told from the others. The caller's name comes back at the end.
class NameForNewThreads {
 public:
  explicit NameForNewThreads(const char* name);
  ~NameForNewThreads();
  NameForNewThreads(const NameForNewThreads&) = delete;
  NameForNewThreads& operator=(const NameForNewThreads&) = delete;

 private:
  char saved_[16] = {};
  bool changed_ = false;
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_CPU_HOST_THREADS_H_
