#include "runtime/step_profiler.h"

#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "executor/cpu/cpu_device.h"
#include "framework/median.h"
#include "runtime/parallel_trainer.h"

namespace loom {
namespace {

// An instruction whose time is compute: a kernel, or the vocabulary-
// parallel cross entropy, whose reductions are the communication model's.
bool Computes(const Instruction& ins) {
  return ins.kind == InstructionKind::kCompute ||
         (ins.kind == InstructionKind::kCollective && ins.flops > 0);
}

// The step's events by instruction id (null where none ran).
std::vector<const TraceEvent*> ById(const RankGraph& graph, const std::vector<TraceEvent>& events) {
  std::vector<const TraceEvent*> by_id(graph.instructions().size(), nullptr);
  for (const TraceEvent& e : events) {
    if (e.instruction >= 0 && e.instruction < static_cast<int>(by_id.size())) {
      by_id[e.instruction] = &e;
    }
  }
  return by_id;
}

// The instruction before each on its stream, or -1.
std::vector<int> PreviousOnStream(const RankGraph& graph) {
  std::vector<int> prev(graph.instructions().size(), -1);
  for (const StreamQueue& stream : graph.streams()) {
    for (size_t i = 1; i < stream.queue.size(); ++i) prev[stream.queue[i]] = stream.queue[i - 1];
  }
  return prev;
}

// When `ins` had its stream to itself: the end of the instruction before
// it on its stream if it waits for nothing else (the gap is the executor's
// dispatch, which the op pays wherever it runs), else its own start (a wait
// for another stream or rank depends on the layout, and the simulator
// models it).
int64_t StreamStartNs(const std::vector<int>& prev, const std::vector<const TraceEvent*>& by_id,
                      const Instruction& ins) {
  const int64_t start = by_id[ins.id]->start_ns;
  if (!ins.deps.empty() || prev[ins.id] < 0 || by_id[prev[ins.id]] == nullptr) return start;
  return std::min(start, by_id[prev[ins.id]]->end_ns);
}

struct Samples {
  OpTiming timing;
  std::vector<double> step_means;
  int runs_per_step = 0;
};

// One step's events of `graph` into `by_signature`: per signature the mean
// of its runs in the step, each timed on its stream, dispatch included.
void AddStepSamples(const RankGraph& graph, const std::vector<int>& prev,
                    const std::vector<TraceEvent>& events,
                    std::map<std::string, Samples>& by_signature) {
  const std::vector<const TraceEvent*> by_id = ById(graph, events);
  std::map<std::string, std::pair<double, int>> step_sum;
  for (const TraceEvent& e : events) {
    if (e.instruction < 0) continue;
    const Instruction& ins = graph.instructions()[e.instruction];
    if (!Computes(ins)) continue;
    const std::string& signature = graph.body->signatures[ins.signature];
    auto& [seconds, runs] = step_sum[signature];
    seconds += (e.end_ns - StreamStartNs(prev, by_id, ins)) * 1e-9;
    ++runs;
    Samples& s = by_signature[signature];
    if (s.timing.signature.empty()) {
      s.timing.type = ins.op_type;
      s.timing.signature = signature;
      s.timing.work.flops = ins.flops;
      s.timing.work.bytes = ins.bytes;
    }
  }
  for (const auto& [signature, sum] : step_sum) {
    Samples& s = by_signature[signature];
    s.step_means.push_back(sum.first / sum.second);
    s.runs_per_step = sum.second;
  }
}

}  // namespace

std::vector<int> InStepTimedRanks(const Plan& plan) {
  std::vector<int> ranks;
  std::set<const void*> seen;
  for (const RankPlan& r : plan.ranks) {
    if (seen.insert(r.programs_key()).second) ranks.push_back(r.rank);
  }
  return ranks;
}

StatusOr<std::vector<OpTiming>> ProfileInStep(const GptConfig& config, const Plan& plan,
                                              const StepProfileOptions& options,
                                              const StepProgressFn& progress) {
  if (options.steps < 1) return InvalidArgument("in-step profiling needs at least 1 timed step");
  const std::vector<int> ranks = InStepTimedRanks(plan);
  const int cores = static_cast<int>(CoresOfThisProcess().size());
  const int copies = std::max(1, std::min(options.side_by_side > 0 ? options.side_by_side
                                                                    : plan.layout.world_size(),
                                          cores));
  // Every timed rank's trainers first, then the steps in turns over the
  // ranks: a VM's core can change speed by tens of % for seconds at a time
  // (docs/simulator_accuracy.md), and ranks timed one after the other
  // would price each stage's ops at a phase of its own; in turns, every
  // op's samples span the whole profile.
  struct TimedRank {
    std::vector<std::unique_ptr<ParallelTrainer>> copies;  // copy c on core c
    const RankGraph* graph = nullptr;
    std::vector<int> prev;
  };
  std::vector<TimedRank> timed(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int rank = ranks[i];
    TimedRank& t = timed[i];
    t.copies.resize(copies);
    for (int c = 0; c < copies; ++c) {
      ParallelTrainer::Options o;
      o.local_ranks = {rank};
      o.local_communication = true;
      o.trace = true;
      o.pin_cores = copies > 1;
      o.pin_offset = c - rank;
      LOOM_ASSIGN_OR_RETURN(t.copies[c], ParallelTrainer::CreateFromPlan(
                                             config, plan,
                                             StrCat("in-step profile of rank ", rank), o));
    }
    for (const RankGraph& g : t.copies[0]->graph().ranks) {
      if (g.rank == rank) t.graph = &g;
    }
    if (t.graph == nullptr) return Internal("rank ", rank, " is missing from its lowered plan");
    t.prev = PreviousOnStream(*t.graph);
  }
  std::map<std::string, Samples> by_signature;
  const int total_steps = options.warmup_steps + options.steps;
  for (int step = 0; step < total_steps; ++step) {
    if (progress) progress(step, total_steps);
    for (TimedRank& t : timed) {
      // The copies step together, so that each op runs beside the others'.
      std::vector<Status> status(copies);
      std::vector<std::thread> threads;
      for (int c = 0; c < copies; ++c) {
        threads.emplace_back([&, c] { status[c] = t.copies[c]->Step(step).status(); });
      }
      for (std::thread& th : threads) th.join();
      for (const Status& st : status) LOOM_RETURN_IF_ERROR(st);
      for (int c = 0; c < copies; ++c) {
        std::vector<TraceEvent> events = t.copies[c]->TakeTrace();
        if (step < options.warmup_steps) continue;
        AddStepSamples(*t.graph, t.prev, events, by_signature);
      }
    }
  }
  std::vector<OpTiming> out;
  for (auto& [signature, s] : by_signature) {
    s.timing.median_seconds = Median(s.step_means);
    s.timing.samples = static_cast<int>(s.step_means.size());
    s.timing.runs_per_sample = s.runs_per_step;
    out.push_back(std::move(s.timing));
  }
  return out;
}

}  // namespace loom
