#include "executor/cpu/host_threads.h"

#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <thread>

namespace loom {

std::vector<int> CoresOfThisProcess() {
  std::vector<int> cores;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cores.push_back(c);
    }
  }
  if (cores.empty()) {
    for (unsigned c = 0; c < std::max(1u, std::thread::hardware_concurrency()); ++c) {
      cores.push_back(static_cast<int>(c));
    }
  }
  return cores;
}

bool PinThread(pthread_t thread, int core) {
  if (core < 0 || core >= CPU_SETSIZE) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  return pthread_setaffinity_np(thread, sizeof(set), &set) == 0;
}

SavedThreadAffinity::SavedThreadAffinity()
    : saved_(pthread_getaffinity_np(pthread_self(), sizeof(cores_), &cores_) == 0) {}

SavedThreadAffinity::~SavedThreadAffinity() {
  if (saved_) pthread_setaffinity_np(pthread_self(), sizeof(cores_), &cores_);
}

BatchPolicyForNewThreads::BatchPolicyForNewThreads() : policy_(sched_getscheduler(0)) {
  if (policy_ != SCHED_OTHER) return;
  sched_param param{};
  changed_ = sched_setscheduler(0, SCHED_BATCH, &param) == 0;
}

BatchPolicyForNewThreads::~BatchPolicyForNewThreads() {
  if (!changed_) return;
  sched_param param{};
  sched_setscheduler(0, policy_, &param);
}

std::set<pid_t> ThreadsOfThisProcess() {
  std::set<pid_t> tids;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task", error)) {
    tids.insert(static_cast<pid_t>(std::stol(entry.path().filename().string())));
  }
  return tids;
}

std::string ThreadName(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

NameForNewThreads::NameForNewThreads(const char* name) {
  changed_ = pthread_getname_np(pthread_self(), saved_, sizeof(saved_)) == 0 &&
             pthread_setname_np(pthread_self(), name) == 0;
}

NameForNewThreads::~NameForNewThreads() {
  if (changed_) pthread_setname_np(pthread_self(), saved_);
}

}  // namespace loom
