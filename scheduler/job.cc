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
  if (!job.whole()) s += StrCat("#", job.part);
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

StatusOr<Job> ParseJob(const std::string& text) {
  Job job;
  if (text == "O") {
    job.type = JobType::kOptimizer;
    return job;
  }
  auto bad = [&] {
    return InvalidArgument("'", text, "' is not a job (F3, B3, b3, w3, F3.1, B3#2 or O)");
  };
  if (text.size() < 2) return bad();
  const size_t hash = text.find('#');
  const std::string name = text.substr(0, hash);
  switch (text[0]) {
    case 'F': job.type = JobType::kForward; break;
    case 'B': job.type = JobType::kBackward; break;
    case 'b': job.type = JobType::kBackwardB; break;
    case 'w': job.type = JobType::kBackwardW; break;
    default: return bad();
  }
  const size_t dot = name.find('.');
  const std::string mb = name.substr(1, dot == std::string::npos ? std::string::npos : dot - 1);
  const std::string chunk = dot == std::string::npos ? "0" : name.substr(dot + 1);
  auto number = [](const std::string& s, int* out) {
    if (s.empty() || s.size() > 9) return false;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
    }
    *out = std::stoi(s);
    return true;
  };
  if (!number(mb, &job.micro_batch) || !number(chunk, &job.chunk)) return bad();
  if (hash != std::string::npos && !number(text.substr(hash + 1), &job.part)) return bad();
  return job;
}

std::vector<Job> SplitJob(const Job& job, const std::vector<int>& cuts) {
  if (cuts.empty()) return {job};
  std::vector<Job> parts;
  int begin = 0;
  for (size_t i = 0; i <= cuts.size(); ++i) {
    Job part = job;
    part.part = static_cast<int>(i);
    part.op_begin = begin;
    part.op_end = i < cuts.size() ? cuts[i] : -1;
    parts.push_back(part);
    begin = part.op_end;
  }
  return parts;
}

}  // namespace loom
