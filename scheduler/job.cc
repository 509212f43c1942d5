#include "scheduler/job.h"

namespace loom {

const char* JobTypeName(JobType type) {
  switch (type) {
    case JobType::kForward: return "forward";
    case JobType::kBackward: return "backward";
    case JobType::kBackwardB: return "backward_b";
    case JobType::kBackwardW: return "backward_w";
    case JobType::kOptimizer: return "optimizer";
  }
  return "?";
}

StatusOr<JobType> ParseJobType(const std::string& name) {
  for (JobType t : {JobType::kForward, JobType::kBackward, JobType::kBackwardB,
                    JobType::kBackwardW, JobType::kOptimizer}) {
    if (name == JobTypeName(t)) return t;
  }
  return InvalidArgument("unknown job type '", name, "'");
}

std::string JobToString(const Job& job, bool with_chunk) {
  const char* letter = "?";
  switch (job.type) {
    case JobType::kForward: letter = "F"; break;
    case JobType::kBackward: letter = "B"; break;
    case JobType::kBackwardB: letter = "b"; break;
    case JobType::kBackwardW: letter = "w"; break;
    case JobType::kOptimizer: return "O";
  }
  std::string s = StrCat(letter, job.micro_batch);
  if (with_chunk) s += StrCat(".", job.chunk);
  return s;
}

std::string JobListToString(const std::vector<Job>& jobs, bool with_chunk) {
  std::string out;
  for (const Job& j : jobs) {
    if (!out.empty()) out += ' ';
    out += JobToString(j, with_chunk);
  }
  return out;
}

}  // namespace loom
