// Gloo's TCP event-loop thread, made to wait for a pair's mutex instead of
// spinning for it.
//
// The loop thread handles a pair's socket only if it takes the pair's mutex
// at once (a try-lock). Otherwise it returns to epoll, finds the socket
// still readable, and tries again: it spins while a rank's thread holds the
// mutex to post a message. CreateGlooTcpDevice already runs the loop thread
// under SCHED_BATCH, so that it never preempts a posting thread when it
// wakes. But a kernel thread (ksoftirqd, rcu) that preempts the holder is
// often followed by the loop thread rather than by the holder, and the loop
// thread then spins on the holder's core until the next scheduler tick: 4
// ms, about once in a gpt-tiny mp=2 step (docs/performance.md, "Gloo's
// event loop and the 4 ms stalls").
//
// The remedy lives outside Gloo. The process's pthread_mutex_trylock,
// defined in gloo_loop_thread.cc ahead of the C library's, gives every
// thread the C library's answer, except a registered loop thread that finds
// the mutex held: that one sleeps on the mutex, so the holder gets the core,
// and returns holding it when the holder lets go. It waits at most
// kGlooLoopWaitBound and then fails as a try-lock does. That keeps Gloo's
// reason for the try-lock: a thread that holds a pair's mutex and waits for
// the loop to go round (Loop::unregisterDescriptor, as a pair closes) is
// held up by at most the bound.
//
// Under AddressSanitizer and ThreadSanitizer the function is left to their
// runtimes, which define it themselves; the loop then spins as before.
#ifndef LOOM_EXECUTOR_COMM_GLOO_LOOP_THREAD_H_
#define LOOM_EXECUTOR_COMM_GLOO_LOOP_THREAD_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>

namespace loom {

// How long a loop thread waits for a held pair mutex before it gives up as
// a try-lock would. Longer than a post takes (one writev), shorter than a
// scheduler tick, the spin it replaces.
inline constexpr std::chrono::microseconds kGlooLoopWaitBound{1000};

// Whether this build puts loop threads to sleep on a held mutex (false under
// the sanitizers above).
bool GlooLoopThreadsWait();

// Makes thread `tid` (a Gloo device's loop thread) wait for held mutexes, or
// no longer. False when the registry is full (then it spins, as before).
bool RegisterGlooLoopThread(pid_t tid);
void UnregisterGlooLoopThread(pid_t tid);
bool IsGlooLoopThread(pid_t tid);

// How many times a loop thread has found a mutex held and waited for it,
// since the process started.
int64_t GlooLoopWaits();

}  // namespace loom

#endif  // LOOM_EXECUTOR_COMM_GLOO_LOOP_THREAD_H_
