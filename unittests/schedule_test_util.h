// Helpers shared by the schedule tests: a schedule by name, its job lists,
// and JobListToString's form parsed back.
#ifndef LOOM_UNITTESTS_SCHEDULE_TEST_UTIL_H_
#define LOOM_UNITTESTS_SCHEDULE_TEST_UTIL_H_

#include <sstream>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "scheduler/schedule.h"

namespace loom {
namespace schedule_test {

inline const ScheduleInfo& Get(const std::string& name) {
  auto s = FindSchedule(name);
  CHECK(s.ok()) << s.status();
  return **s;
}

inline std::vector<Job> Jobs(const std::string& name, int stage, int stages, int m,
                      int chunks = 1) {
  auto jobs = Get(name).fn(ScheduleParams{stage, stages, m, chunks});
  CHECK(jobs.ok()) << name << ": " << jobs.status();
  return *jobs;
}

// Every stage's list, as JobListToString prints it.
inline std::vector<std::string> Lists(const std::string& name, int stages, int m,
                               int chunks = 1) {
  std::vector<std::string> out;
  for (int s = 0; s < stages; ++s) {
    out.push_back(
        JobListToString(Jobs(name, s, stages, m, chunks), chunks > 1));
  }
  return out;
}

// Parses JobListToString's form back: "F0 b1 w1 O", "F3.1".
inline std::vector<Job> Parse(const std::string& text) {
  std::vector<Job> jobs;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    Job j;
    switch (word[0]) {
      case 'F':
        j.type = JobType::kForward;
        break;
      case 'B':
        j.type = JobType::kBackward;
        break;
      case 'b':
        j.type = JobType::kBackwardB;
        break;
      case 'w':
        j.type = JobType::kBackwardW;
        break;
      case 'O':
        j.type = JobType::kOptimizer;
        break;
      default:
        LOG(FATAL) << "bad job " << word;
    }
    if (j.type != JobType::kOptimizer) {
      const size_t dot = word.find('.');
      j.micro_batch = std::stoi(word.substr(1, dot - 1));
      if (dot != std::string::npos) j.chunk = std::stoi(word.substr(dot + 1));
    }
    jobs.push_back(j);
  }
  return jobs;
}

}  // namespace schedule_test
}  // namespace loom

#endif  // LOOM_UNITTESTS_SCHEDULE_TEST_UTIL_H_
