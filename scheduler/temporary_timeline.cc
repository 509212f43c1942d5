#include "scheduler/temporary_timeline.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace loom {
namespace {

// A change of what the rank holds. At one instant, the ends of
// instructions that ran for a while come first, then starts in the trace's
// order; an instruction that took no time starts and ends in one change.
struct Change {
  int64_t time_ns;
  enum Kind : int8_t { kEnd, kStart, kStartAndEnd } kind;
  int instruction;
  int event;  // index in the trace, to order the starts of an instant
};

}  // namespace

StatusOr<TemporaryTimeline> ReplayTemporaries(const RankGraph& graph,
                                              const std::vector<TraceEvent>& events,
                                              const std::vector<std::string>& kept) {
  const RankGraphBody& body = *graph.body;
  const int num_instructions = static_cast<int>(body.instructions.size());
  std::vector<char> seen(num_instructions, 0);
  std::vector<Change> changes;
  for (size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& e = events[i];
    if (e.rank != graph.rank) continue;
    if (e.instruction < 0 || e.instruction >= num_instructions) {
      return InvalidArgument("trace event ", i, " (rank ", e.rank, ", ", e.op, "): instruction ",
                             e.instruction, " is not one of the rank's ", num_instructions);
    }
    if (seen[e.instruction]++) {
      return InvalidArgument("trace event ", i, ": ",
                             InstructionLocation(graph, body.instructions[e.instruction]),
                             " runs twice; replay one step at a time");
    }
    const int event = static_cast<int>(i);
    const int64_t allocates = e.arrived_ns >= 0 ? e.arrived_ns : e.start_ns;
    if (e.end_ns <= allocates) {
      changes.push_back({allocates, Change::kStartAndEnd, e.instruction, event});
    } else {
      changes.push_back({allocates, Change::kStart, e.instruction, event});
      changes.push_back({e.end_ns, Change::kEnd, e.instruction, event});
    }
  }
  std::sort(changes.begin(), changes.end(), [](const Change& a, const Change& b) {
    if (a.time_ns != b.time_ns) return a.time_ns < b.time_ns;
    if ((a.kind == Change::kEnd) != (b.kind == Change::kEnd)) return a.kind == Change::kEnd;
    return a.event < b.event;
  });

  // Held from the start: fed (until its last toucher), or kept (always).
  enum Held : char { kNotHeld, kFed, kKept };
  const std::set<std::string> kept_names(kept.begin(), kept.end());
  std::vector<Held> held(body.temporaries.size(), kNotHeld);
  for (size_t t = 0; t < body.temporaries.size(); ++t) {
    const Temporary& temp = body.temporaries[t];
    held[t] = temp.fed ? kFed : NamesTemporary(body, temp, kept_names) ? kKept : kNotHeld;
  }

  TemporaryTimeline out;
  out.rank = graph.rank;
  std::vector<int> touches_left(body.temporaries.size());
  std::vector<char> live(body.temporaries.size(), 0);
  int64_t bytes = 0;
  auto reset = [&] {
    for (size_t t = 0; t < body.temporaries.size(); ++t) {
      touches_left[t] = body.temporaries[t].touched_by;
    }
    std::fill(live.begin(), live.end(), 0);
    bytes = 0;
    for (size_t t = 0; t < body.temporaries.size(); ++t) {
      if (held[t] != kNotHeld) {
        live[t] = 1;
        bytes += body.temporaries[t].bytes;
      }
    }
  };
  auto untouch = [&](int t) {
    if (--touches_left[t] == 0 && live[t] && held[t] != kKept) {
      live[t] = 0;
      bytes -= body.temporaries[t].bytes;
    }
  };
  // What it held until it starts goes before what it makes comes.
  auto allocate = [&](const Instruction& ins) {
    for (int i = ins.uses_end(); i < ins.touches_begin + ins.touches_count; ++i) {
      untouch(body.touches[i]);
    }
    for (int i = 0; i < ins.allocs; ++i) {
      const int t = body.touches[ins.touches_begin + i];
      if (!live[t]) {
        live[t] = 1;
        bytes += body.temporaries[t].bytes;
      }
    }
  };
  auto release = [&](const Instruction& ins) {
    for (int i = ins.touches_begin; i < ins.uses_end(); ++i) untouch(body.touches[i]);
  };
  reset();
  int peak_change = -1;
  // An instant's changes make one point, of what it ends holding; where
  // it held more on the way (an instruction that took no time), a point of
  // that comes first and the end's 1 ns later.
  int64_t instant = changes.empty() ? 0 : changes.front().time_ns;
  int64_t instant_high = bytes;
  bool changed = false;
  auto flush = [&] {
    if (!changed) return;
    if (instant_high > bytes) out.points.push_back({instant, instant_high});
    out.points.push_back({instant_high > bytes ? instant + 1 : instant, bytes});
    changed = false;
  };
  for (size_t k = 0; k < changes.size(); ++k) {
    const Change& c = changes[k];
    const Instruction& ins = body.instructions[c.instruction];
    if (c.time_ns != instant) {
      flush();
      instant = c.time_ns;
      instant_high = bytes;
    }
    const int64_t before = bytes;
    if (c.kind != Change::kEnd) {
      allocate(ins);
      instant_high = std::max(instant_high, bytes);
      if (bytes > out.peak_bytes) {
        out.peak_bytes = bytes;
        out.peak_instruction = c.instruction;
        peak_change = static_cast<int>(k);
      }
    }
    if (c.kind != Change::kStart) release(ins);
    changed |= bytes != before || instant_high > before;
  }
  flush();
  // The set at the peak, found again by a second pass up to it (cheaper
  // than copying the set at every new high).
  if (peak_change >= 0) {
    reset();
    for (int k = 0; k < peak_change; ++k) {
      const Change& c = changes[k];
      const Instruction& ins = body.instructions[c.instruction];
      if (c.kind != Change::kEnd) allocate(ins);
      if (c.kind != Change::kStart) release(ins);
    }
    allocate(body.instructions[changes[peak_change].instruction]);
    for (size_t t = 0; t < live.size(); ++t) {
      if (live[t]) out.live_at_peak.push_back(static_cast<int>(t));
    }
  }
  return out;
}

std::string DescribePeak(const RankGraph& graph, const TemporaryTimeline& timeline, int largest) {
  const RankGraphBody& body = *graph.body;
  auto mb = [](int64_t bytes) { return StrCat(std::round(bytes / 1e4) / 100, " MB"); };
  std::string line = mb(timeline.peak_bytes);
  if (timeline.peak_instruction < 0) return line;
  const Instruction& at = body.instructions[timeline.peak_instruction];
  line += StrCat(" at ", at.op_type, " (job ", JobToString(at.job, body.num_chunks > 1), ") on ",
                 graph.StreamName(at));
  std::vector<int> held = timeline.live_at_peak;
  std::stable_sort(held.begin(), held.end(), [&](int a, int b) {
    return body.temporaries[a].bytes > body.temporaries[b].bytes;
  });
  const int shown = std::min(largest, static_cast<int>(held.size()));
  for (int i = 0; i < shown; ++i) {
    const Temporary& t = body.temporaries[held[i]];
    line += StrCat(i == 0 ? ": " : ", ", body.var_names[t.var],
                   body.micro_batches > 1 ? StrCat(" (micro-batch ", t.micro_batch, ")") : "", " ",
                   mb(t.bytes));
  }
  int64_t rest = 0;
  for (size_t i = shown; i < held.size(); ++i) rest += body.temporaries[held[i]].bytes;
  if (held.size() > static_cast<size_t>(shown)) {
    line += StrCat(", ", held.size() - shown, " others ", mb(rest));
  }
  return line;
}

StatusOr<std::vector<TemporaryTimeline>> ReplayTracedRanks(const ExecutionGraph& graph,
                                                           const std::vector<TraceEvent>& events,
                                                           const std::vector<std::string>& kept) {
  std::set<int> traced;
  for (const TraceEvent& e : events) traced.insert(e.rank);
  std::vector<TemporaryTimeline> timelines;
  for (const RankGraph& rank : graph.ranks) {
    if (traced.count(rank.rank) == 0) continue;
    LOOM_ASSIGN_OR_RETURN(TemporaryTimeline timeline, ReplayTemporaries(rank, events, kept));
    timelines.push_back(std::move(timeline));
  }
  return timelines;
}

std::vector<TraceCounter> TemporaryCounters(const std::vector<TemporaryTimeline>& timelines) {
  std::vector<TraceCounter> counters;
  for (const TemporaryTimeline& timeline : timelines) {
    TraceCounter c{timeline.rank, "temporaries (MB)", {}};
    for (const TemporaryTimeline::Point& p : timeline.points) {
      c.samples.push_back({p.time_ns, p.bytes / 1e6});
    }
    counters.push_back(std::move(c));
  }
  return counters;
}

}  // namespace loom
