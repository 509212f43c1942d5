#include "scheduler/schedule.h"

#include <map>
#include <utility>

#include "scheduler/schedules_impl.h"

namespace loom {

const std::vector<ScheduleInfo>& Schedules() {
  // name, function, splits_backward, uses_chunks, summary[, splits_jobs,
  // without_overlap].
  static const std::vector<ScheduleInfo>* const schedules =
      new std::vector<ScheduleInfo>{
          {"FThenB", ScheduleFThenB, false, false,
           "GPipe: all forwards, then all backwards"},
          {"1F1B", Schedule1F1B, false, false,
           "PipeDream-flush: warm-up forwards, then one forward, one backward"},
          {"Eager1F1B", ScheduleEager1F1B, false, false,
           "1F1B with about twice the warm-up, so sends overlap compute"},
          {"VPP", ScheduleVPP, false, true,
           "interleaved 1F1B over pipeline.vpp_degree model chunks per stage"},
          {"ZBH1", ScheduleZBH1, true, false,
           "zero-bubble H1: backward split into B and W, W fills the bubble"},
          {"1F1B-overlap", Schedule1F1BOverlap, false, false,
           "1F1B whose steady state interleaves each backward with a forward, part by part "
           "between tensor-parallel all-reduces, so each all-reduce runs under the other's "
           "compute",
           /*splits_jobs=*/true, /*without_overlap=*/"1F1B"},
          {"ZBV", ScheduleZBV, true, true,
           "zero-bubble V: two chunks per stage placed in a V, backward split into B and W; "
           "no bubble but the fill, at 1F1B's activation memory",
           /*splits_jobs=*/false, /*without_overlap=*/nullptr, /*v_shape=*/true},
      };
  return *schedules;
}

StageAndChunk PlaceVirtualStage(int v, int stages, bool v_shape) {
  if (!v_shape) return {v % stages, v / stages};
  return v < stages ? StageAndChunk{v, 0} : StageAndChunk{2 * stages - 1 - v, 1};
}

int VirtualStageOf(int stage, int chunk, int stages, bool v_shape) {
  if (!v_shape) return chunk * stages + stage;
  return chunk == 0 ? stage : 2 * stages - 1 - stage;
}

StatusOr<const ScheduleInfo*> FindSchedule(const std::string& name) {
  std::string known;
  for (const ScheduleInfo& s : Schedules()) {
    if (name == s.name) return &s;
    known += StrCat(known.empty() ? "" : ", ", s.name);
  }
  return NotFound("unknown schedule '", name, "' (known: ", known, ")");
}

const ScheduleInfo* DefaultSchedule() {
  static const ScheduleInfo* const schedule = FindSchedule("1F1B").value();
  return schedule;
}

Status ValidateJobList(const ScheduleParams& p, const std::vector<Job>& jobs) {
  // Per (micro-batch, chunk) and job kind: where its first part is, the
  // last part seen, and whether that part ended the program.
  struct Progress {
    int first = -1;
    const Job* last = nullptr;
    bool complete() const { return last != nullptr && last->op_end < 0; }
  };
  struct Seen {
    Progress forward, backward, b, w;
  };
  std::map<std::pair<int, int>, Seen> seen;
  int optimizer = -1;
  auto where = [&](int i) {
    return StrCat("stage ", p.stage, ", job ", i, " (",
                  JobToString(jobs[i], p.chunks > 1), ")");
  };
  for (int i = 0; i < static_cast<int>(jobs.size()); ++i) {
    const Job& j = jobs[i];
    if (optimizer >= 0) {
      return InvalidArgument(where(i), ": comes after the optimizer job");
    }
    if (j.type == JobType::kOptimizer) {
      if (!j.whole()) return InvalidArgument(where(i), ": the optimizer job is not split");
      optimizer = i;
      continue;
    }
    if (j.micro_batch < 0 || j.micro_batch >= p.micro_batches || j.chunk < 0 ||
        j.chunk >= p.chunks) {
      return InvalidArgument(where(i), ": micro-batch or chunk out of range (",
                             p.micro_batches, " micro-batches, ", p.chunks,
                             " chunks)");
    }
    Seen& s = seen[{j.micro_batch, j.chunk}];
    Progress* slot = nullptr;
    switch (j.type) {
      case JobType::kForward: slot = &s.forward; break;
      case JobType::kBackward: slot = &s.backward; break;
      case JobType::kBackwardB: slot = &s.b; break;
      case JobType::kBackwardW: slot = &s.w; break;
      case JobType::kOptimizer: break;
    }
    if (slot->complete()) return InvalidArgument(where(i), ": appears twice");
    if (slot->last == nullptr) {
      if (j.part != 0 || j.op_begin != 0) {
        return InvalidArgument(where(i), ": the job's first part must be part 0 from op 0");
      }
      slot->first = i;
    } else if (j.part != slot->last->part + 1 || j.op_begin != slot->last->op_end) {
      return InvalidArgument(where(i), ": does not continue part ", slot->last->part,
                             " (ops ", slot->last->op_begin, "-", slot->last->op_end,
                             "): expected part ", slot->last->part + 1, " from op ",
                             slot->last->op_end);
    }
    if (j.op_end >= 0 && j.op_end <= j.op_begin) {
      return InvalidArgument(where(i), ": empty op range [", j.op_begin, ", ", j.op_end, ")");
    }
    slot->last = &j;
    if (slot->first != i) continue;
    if (j.type != JobType::kForward && !s.forward.complete()) {
      return InvalidArgument(where(i), ": runs before its forward");
    }
    if (j.type == JobType::kBackwardW && !s.b.complete()) {
      return InvalidArgument(where(i), ": runs before its B half");
    }
  }
  if (optimizer < 0) {
    return InvalidArgument("stage ", p.stage, ": no optimizer job");
  }
  for (int mb = 0; mb < p.micro_batches; ++mb) {
    for (int c = 0; c < p.chunks; ++c) {
      auto it = seen.find({mb, c});
      const bool complete = it != seen.end() && it->second.forward.complete() &&
                            (it->second.backward.complete() ||
                             (it->second.b.complete() && it->second.w.complete()));
      const bool mixed = it != seen.end() && it->second.backward.last != nullptr &&
                         (it->second.b.last != nullptr || it->second.w.last != nullptr);
      if (!complete || mixed) {
        return InvalidArgument("stage ", p.stage, ": micro-batch ", mb,
                               ", chunk ", c,
                               " lacks a forward and exactly one backward "
                               "(whole, or B and W), each with all its parts");
      }
    }
  }
  return Status::OK();
}

}  // namespace loom
