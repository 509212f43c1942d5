#include "profiling/step_profiler.h"

#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "executor/cpu/cpu_device.h"
#include "framework/median.h"
#include "runtime/parallel_trainer.h"
#include "scheduler/cold_inputs.h"

namespace loom {
namespace {

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

// The stretch of compute each instruction belongs to: stretches end at
// communicating instructions (in instruction order), where ranks that run
// the plan meet.
std::vector<int> StretchOf(const RankGraph& graph) {
  std::vector<int> stretch(graph.instructions().size(), 0);
  int s = 0;
  for (const Instruction& ins : graph.instructions()) {
    if (ins.communicates()) ++s;
    stretch[ins.id] = s;
  }
  return stretch;
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

StatusOr<std::unique_ptr<InStepProfiler>> InStepProfiler::Create(
    const GptConfig& config, const Plan& plan, const StepProfileOptions& options) {
  if (options.steps < 1) return InvalidArgument("in-step profiling needs at least 1 timed step");
  if (options.warmup_steps < 0) return InvalidArgument("in-step warm-up steps must not be negative");
  std::unique_ptr<InStepProfiler> p(new InStepProfiler);
  p->options_ = options;
  p->ranks_ = InStepTimedRanks(plan);
  const int cores = static_cast<int>(CoresOfThisProcess().size());
  p->copies_ = std::max(1, std::min(options.side_by_side > 0 ? options.side_by_side
                                                              : plan.layout.world_size(),
                                    cores));
  // Every timed rank's trainers first, then the steps in turns over the
  // ranks: a VM's core can change speed by tens of % for seconds at a time
  // (docs/simulator_accuracy.md), and ranks timed one after the other
  // would price each stage's ops at a phase of its own; in turns, every
  // op's samples span the whole profile.
  // Ranks the plan pins two to a core get the shared cores' lockstep.
  const bool beside = options.shared_core_steps > 0 && p->copies_ > 1 &&
                      plan.layout.world_size() > cores;
  p->timed_.resize(p->ranks_.size());
  for (size_t i = 0; i < p->ranks_.size(); ++i) {
    const int rank = p->ranks_[i];
    TimedRank& t = p->timed_[i];
    auto copy_on_core = [&](int core) {
      ParallelTrainer::Options o;
      o.local_ranks = {rank};
      o.local_communication = true;
      o.trace = true;
      o.pin_cores = p->copies_ > 1;
      o.pin_offset = core - rank;
      return ParallelTrainer::CreateFromPlan(config, plan,
                                             StrCat("in-step profile of rank ", rank), o);
    };
    t.copies.resize(p->copies_);
    for (int c = 0; c < p->copies_; ++c) {
      LOOM_ASSIGN_OR_RETURN(t.copies[c], copy_on_core(c));
    }
    if (beside) {
      t.beside.resize(p->copies_);
      for (int c = 0; c < p->copies_; ++c) {
        LOOM_ASSIGN_OR_RETURN(t.beside[c], copy_on_core(c));
      }
    }
    for (const RankGraph& g : t.copies[0]->graph().ranks) {
      if (g.rank == rank) t.graph = &g;
    }
    if (t.graph == nullptr) return Internal("rank ", rank, " is missing from its lowered plan");
    t.prev = PreviousOnStream(*t.graph);
    t.stretch = StretchOf(*t.graph);
    if (options.cache_share > 0) t.cold = ColdInputBytes(*t.graph->body, options.cache_share);
  }
  return p;
}

InStepProfiler::~InStepProfiler() = default;

// One step's events of `t` into the samples: per signature the mean
// of its runs in the step, each timed on its stream, dispatch included.
void InStepProfiler::AddStepSamples(const TimedRank& t, const std::vector<TraceEvent>& events) {
  const RankGraph& graph = *t.graph;
  const std::vector<int>& prev = t.prev;
  const std::vector<const TraceEvent*> by_id = ById(graph, events);
  std::map<std::string, std::pair<double, int>> step_sum;
  for (const TraceEvent& e : events) {
    if (e.instruction < 0) continue;
    const Instruction& ins = graph.instructions()[e.instruction];
    if (!graph.body->Computes(ins)) continue;
    const std::string& signature = graph.body->signatures[ins.signature];
    auto& [seconds, runs] = step_sum[signature];
    seconds += (e.end_ns - StreamStartNs(prev, by_id, ins)) * 1e-9;
    ++runs;
    Samples& s = by_signature_[signature];
    if (!t.cold.empty()) {
      s.cold_bytes += t.cold[ins.id];
      ++s.cold_runs;
    }
    if (s.timing.signature.empty()) {
      s.timing.type = ins.op_type;
      s.timing.signature = signature;
      s.timing.work = graph.body->Work(ins);
    }
  }
  for (const auto& [signature, sum] : step_sum) {
    Samples& s = by_signature_[signature];
    s.step_means.push_back(sum.first / sum.second);
    s.runs_per_step = sum.second;
  }
}

StatusOr<std::vector<std::vector<TraceEvent>>> InStepProfiler::StepTogether(
    const std::vector<ParallelTrainer*>& trainers, int step) {
  std::vector<Status> status(trainers.size());
  std::vector<std::thread> threads;
  for (size_t c = 0; c < trainers.size(); ++c) {
    threads.emplace_back([&, c] { status[c] = trainers[c]->Step(step).status(); });
  }
  for (std::thread& th : threads) th.join();
  for (const Status& st : status) LOOM_RETURN_IF_ERROR(st);
  std::vector<std::vector<TraceEvent>> events(trainers.size());
  for (size_t c = 0; c < trainers.size(); ++c) events[c] = trainers[c]->TakeTrace();
  return events;
}

Status InStepProfiler::Step(int step) {
  const int sampled = step - options_.warmup_steps;
  for (TimedRank& t : timed_) {
    // The copies step together, so that each op runs beside the others'.
    std::vector<ParallelTrainer*> copies;
    for (auto& c : t.copies) copies.push_back(c.get());
    LOOM_ASSIGN_OR_RETURN(std::vector<std::vector<TraceEvent>> events,
                          StepTogether(copies, step));
    if (sampled < 0) continue;
    for (int c = 0; c < copies_; ++c) AddStepSamples(t, events[c]);
    if (copies_ > 1) {
      if (auto ratio = LockstepRatio(t, events)) lockstep_ratios_.push_back(*ratio);
    }
    if (t.beside.empty() || sampled >= options_.shared_core_steps) continue;
    // Again with the second copies beside: only the first copies' stretches
    // count, each pair on two cores as two ranks that meet.
    for (auto& c : t.beside) copies.push_back(c.get());
    LOOM_ASSIGN_OR_RETURN(events, StepTogether(copies, step));
    events.resize(copies_);
    if (auto ratio = LockstepRatio(t, events)) shared_lockstep_ratios_.push_back(*ratio);
  }
  return Status::OK();
}

// The copies ran the same ops at once, each on a core of its own. Ranks
// that meet after every stretch of compute would wait for the slowest
// copy's stretch each time: the step's sum of those over the sum of the
// copies' mean stretches.
std::optional<double> InStepProfiler::LockstepRatio(
    const TimedRank& t, const std::vector<std::vector<TraceEvent>>& copies) {
  const int stretches = t.stretch.empty() ? 1 : t.stretch.back() + 1;
  std::vector<double> slowest(stretches, 0), total(stretches, 0);
  for (const std::vector<TraceEvent>& events : copies) {
    std::vector<double> own(stretches, 0);
    for (const TraceEvent& e : events) {
      if (e.instruction < 0 || !t.graph->body->Computes(t.graph->instructions()[e.instruction])) {
        continue;
      }
      own[t.stretch[e.instruction]] += (e.end_ns - e.start_ns) * 1e-9;
    }
    for (int s = 0; s < stretches; ++s) {
      slowest[s] = std::max(slowest[s], own[s]);
      total[s] += own[s];
    }
  }
  double slowest_sum = 0, mean_sum = 0;
  for (int s = 0; s < stretches; ++s) {
    slowest_sum += slowest[s];
    mean_sum += total[s] / copies.size();
  }
  if (mean_sum <= 0) return std::nullopt;
  return slowest_sum / mean_sum;
}

std::optional<double> InStepProfiler::LockstepSlowdown() const {
  if (lockstep_ratios_.empty()) return std::nullopt;
  return Median(lockstep_ratios_);
}

std::optional<double> InStepProfiler::SharedCoreLockstep() const {
  if (shared_lockstep_ratios_.empty()) return std::nullopt;
  return Median(shared_lockstep_ratios_);
}

std::vector<OpTiming> InStepProfiler::Timings() const {
  std::vector<OpTiming> out;
  for (const auto& [signature, s] : by_signature_) {
    OpTiming timing = s.timing;
    timing.median_seconds = Median(s.step_means);
    timing.samples = static_cast<int>(s.step_means.size());
    timing.runs_per_sample = s.runs_per_step;
    if (s.cold_runs > 0) timing.cold_input_bytes = s.cold_bytes / s.cold_runs;
    out.push_back(std::move(timing));
  }
  return out;
}

StatusOr<InStepProfile> ProfileInStep(const GptConfig& config, const Plan& plan,
                                      const StepProfileOptions& options,
                                      const StepProgressFn& progress) {
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<InStepProfiler> profiler,
                        InStepProfiler::Create(config, plan, options));
  const int total_steps = options.warmup_steps + options.steps;
  for (int step = 0; step < total_steps; ++step) {
    if (progress) progress(step, total_steps);
    LOOM_RETURN_IF_ERROR(profiler->Step(step));
  }
  InStepProfile profile;
  profile.timings = profiler->Timings();
  profile.lockstep = profiler->LockstepSlowdown();
  profile.shared_core_lockstep = profiler->SharedCoreLockstep();
  profile.copies = profiler->copies();
  return profile;
}

}  // namespace loom
