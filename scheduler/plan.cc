#include "scheduler/plan.h"

#include <sstream>

namespace loom {

std::string JobProgramName(const JobProgramKey& key, bool with_chunk) {
  std::string name = JobTypeName(key.type);
  if (with_chunk) name += StrCat(".", key.chunk);
  return name;
}

std::string PlanToJson(const Plan& plan) {
  std::ostringstream os;
  os << "{\"ranks\":[";
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    const RankPlan& rp = plan.ranks[r];
    if (r) os << ",";
    os << "{\"rank\":" << rp.rank << ",\"coords\":{\"dp\":" << rp.coords.dp
       << ",\"mp\":" << rp.coords.mp << ",\"pp\":" << rp.coords.pp
       << "},\"jobs\":[";
    for (size_t j = 0; j < rp.jobs.size(); ++j) {
      const Job& job = rp.jobs[j];
      if (j) os << ",";
      os << "{\"type\":\"" << JobTypeName(job.type)
         << "\",\"micro_batch\":" << job.micro_batch
         << ",\"chunk\":" << job.chunk << "}";
    }
    os << "],\"programs\":{";
    bool first = true;
    for (const auto& [key, program] : rp.programs) {
      if (!first) os << ",";
      first = false;
      os << "\"" << JobProgramName(key, rp.num_chunks > 1) << "\":[";
      bool first_op = true;
      for (Op* op : program.global_block().ops()) {
        if (!first_op) os << ",";
        first_op = false;
        os << "\"" << op->type() << "\"";
      }
      os << "]";
    }
    os << "}}";
  }
  os << "]}";
  return os.str();
}

std::string PlanToText(const Plan& plan) {
  std::ostringstream os;
  for (const RankPlan& rp : plan.ranks) {
    os << "rank " << rp.rank << " (" << CoordsToString(rp.coords) << "): "
       << JobListToString(rp.jobs, rp.num_chunks > 1) << "\n";
    for (const auto& [key, program] : rp.programs) {
      os << "  " << JobProgramName(key, rp.num_chunks > 1) << ": "
         << program.global_block().num_ops() << " ops\n";
    }
  }
  return os.str();
}

}  // namespace loom
