#include "runtime/tuner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <thread>

#include "cost_model/cluster.h"
#include "cost_model/comm_model.h"
#include "passes/amp.h"
#include "runtime/simulation.h"
#include "runtime/tune_format.h"
#include "scheduler/schedule.h"

namespace loom {
namespace {

// The dtype the strategy's GEMMs run in (it validated, so its AMP parses).
DataType GemmDtype(const proto::Strategy& s) {
  const StatusOr<AmpConfig> amp = AmpConfigOf(s);
  return amp.ok() && amp->level > 0 ? amp->dtype : proto::FP32;
}

// The peak FLOP/s of all `ranks` together: each its device's, or one
// device's when every rank shares one host (ranks_per_device 0).
double PeakFlopsOf(const proto::Cluster& cluster, int ranks, DataType dtype) {
  const double device = DevicePeakFlops(cluster.device(), dtype);
  const int per_device = cluster.ranks_per_device();
  if (per_device <= 0) return device;
  return device * std::max(1.0, static_cast<double>(ranks) / per_device);
}

// Plans that do the same work with less, each with why a fitting one
// makes `s` pointless: `s` with no recomputation, which only adds work to
// save memory. (Not so a lower ZeRO stage: stage 3's gathers can hide
// under the forward where stage 1's wait after the update, and gpt3-1.3b
// on 8 a100 steps faster at stage 3.)
std::vector<std::pair<std::string, const char*>> CheaperSiblings(const proto::Strategy& s) {
  std::vector<std::pair<std::string, const char*>> out;
  if (s.recompute().granularity() != "none") {
    proto::Strategy t = s;
    t.mutable_recompute()->set_granularity("none");
    out.emplace_back(TuneCandidateName(t), "the same plan without recomputation fits");
  }
  return out;
}

class Search {
 public:
  Search(const GptConfig& config, const OptimizerConfig& optimizer, const CostContext& costs,
         const TuneOptions& options)
      : config_(config),
        optimizer_(optimizer),
        costs_(costs),
        options_(options),
        timer_(CostModelTimers(costs)) {
    plan_options_.costs = &costs;
    // Thousands of candidates are planned only to be timed: the program
    // verifier after every pass took 16% of a gpt3-175b candidate's time.
    // The winner is planned again, verified pass by pass, before -o saves
    // it.
    plan_options_.pass_manager.verify_each = false;
  }

  StatusOr<TuneReport> Run();

 private:
  // Simulates one candidate: a plan, or the planner's error.
  StatusOr<TunedPlan> Simulate(const TuneCandidate& c) const;
  // Simulates `candidates` in the threads, the most micro-batches first
  // (a plan's instructions grow with them, and so does the time to lower
  // and simulate it, so no thread starts a long one as the others end),
  // and records each in the report; the results in order.
  std::vector<StatusOr<TunedPlan>> SimulateAndRecord(
      const std::vector<const TuneCandidate*>& candidates);
  // The best plan that fits, of those simulated so far; null if none.
  const TunedPlan* Best() const;
  // Reports the search's state to options_.progress.
  void UpdateProgress(TuneProgress& progress) const;
  // Why the search would skip `c` now, or nothing.
  std::optional<std::string> SkipReason(const TuneCandidate& c) const;
  void Record(const TuneCandidate& c, StatusOr<TunedPlan> result);

  const GptConfig& config_;
  const OptimizerConfig& optimizer_;
  const CostContext& costs_;
  const TuneOptions& options_;
  TimerFactory timer_;
  PlanOptions plan_options_;
  // The model's programs, built and prepared once: AMP is held fixed, so
  // every candidate plans from them.
  std::unique_ptr<GptPrograms> programs_;
  TuneReport report_;
  std::vector<double> fitting_times_;  // sorted
  std::set<std::string> fitting_names_;
  int best_ = -1;  // in report_.simulated: the first of the fastest that fit
};

StatusOr<TunedPlan> Search::Simulate(const TuneCandidate& c) const {
  SimulationOptions o;
  o.fold_data_parallel = true;
  o.fold_tensor_parallel = true;
  LOOM_ASSIGN_OR_RETURN(GptSimulation sim, SimulateGpt(*programs_, c.strategy, timer_, o,
                                                       plan_options_));
  const SimulationResult& r = sim.result;
  TunedPlan p;
  p.candidate = c;
  p.step_time_s = r.step_time_s;
  p.bubble_fraction = r.bubble_fraction;
  p.exposed_comm_s = r.exposed_comm_s;
  const RankMetrics& peak = r.PeakRank();
  p.peak_bytes = peak.peak_bytes();
  p.peak_rank = peak.rank;
  p.peak_rank_parameter_bytes = peak.persistent.parameters + peak.persistent.master_weights;
  p.bucket_bytes = sim.plan.resolved.dp_bucket_bytes();
  p.fits = options_.memory_limit_bytes <= 0 || p.peak_bytes <= options_.memory_limit_bytes;
  if (r.step_time_s > 0) {
    p.tokens_per_s = static_cast<double>(config_.batch_size * config_.seq_len) / r.step_time_s;
    p.mfu = config_.TrainingFlopsPerStep() /
            (r.step_time_s *
             PeakFlopsOf(costs_.cluster(), options_.space.devices, GemmDtype(c.strategy)));
  }
  return p;
}

std::optional<std::string> Search::SkipReason(const TuneCandidate& c) const {
  if (options_.exhaustive) return std::nullopt;
  const size_t k = static_cast<size_t>(std::max(1, options_.top_k));
  if (fitting_times_.size() >= k && c.time_bound_s >= fitting_times_[k - 1]) {
    return "its time bound is no better than the top plans'";
  }
  for (const auto& [sibling, why] : CheaperSiblings(c.strategy)) {
    if (fitting_names_.count(sibling) > 0) return std::string(why);
  }
  return std::nullopt;
}

void Search::Record(const TuneCandidate& c, StatusOr<TunedPlan> result) {
  if (!result.ok()) {
    report_.failed.emplace_back(c.name, result.status().message());
    report_.outcomes[c.name] = "failed: " + result.status().message();
    return;
  }
  const TunedPlan& p = *result;
  report_.outcomes[c.name] =
      StrCat(TuneMs(p.step_time_s), ", peak ", TuneBytes(p.peak_bytes),
             p.fits ? "" : StrCat(" over the ", TuneBytes(options_.memory_limit_bytes), " limit"));
  if (p.fits) {
    fitting_times_.insert(std::upper_bound(fitting_times_.begin(), fitting_times_.end(),
                                           p.step_time_s),
                          p.step_time_s);
  } else {
    ++report_.over_memory;
  }
  if (p.fits) fitting_names_.insert(c.name);
  if (p.fits && (best_ < 0 || p.step_time_s < report_.simulated[best_].step_time_s)) {
    best_ = static_cast<int>(report_.simulated.size());
  }
  report_.simulated.push_back(p);
}

std::vector<StatusOr<TunedPlan>> Search::SimulateAndRecord(
    const std::vector<const TuneCandidate*>& candidates) {
  std::vector<size_t> longest_first(candidates.size());
  std::iota(longest_first.begin(), longest_first.end(), 0);
  std::stable_sort(longest_first.begin(), longest_first.end(), [&](size_t a, size_t b) {
    return candidates[a]->strategy.pipeline().micro_batches() >
           candidates[b]->strategy.pipeline().micro_batches();
  });
  std::vector<std::optional<StatusOr<TunedPlan>>> results(candidates.size());
  std::atomic<size_t> taken{0};
  auto work = [&] {
    for (size_t i = taken++; i < candidates.size(); i = taken++) {
      results[longest_first[i]] = Simulate(*candidates[longest_first[i]]);
    }
  };
  const size_t threads = static_cast<size_t>(std::max(1, options_.threads));
  std::vector<std::thread> workers;
  for (size_t t = 1; t < std::min(threads, candidates.size()); ++t) workers.emplace_back(work);
  work();
  for (std::thread& t : workers) t.join();
  std::vector<StatusOr<TunedPlan>> out;
  for (size_t i = 0; i < candidates.size(); ++i) {
    Record(*candidates[i], *results[i]);
    out.push_back(std::move(*results[i]));
  }
  return out;
}

void Search::UpdateProgress(TuneProgress& progress) const {
  progress.simulated = static_cast<int>(report_.simulated.size());
  if (const TunedPlan* best = Best(); best != nullptr) {
    progress.best_step_s = best->step_time_s;
    progress.best = best->candidate.name;
  }
  if (options_.progress) options_.progress(progress);
}

const TunedPlan* Search::Best() const {
  return best_ < 0 ? nullptr : &report_.simulated[best_];
}

// Values a round of the refinement tries, whatever the threads, so that
// they do not change the report.
constexpr int kRefineProbes = 2;

StatusOr<TuneReport> Search::Run() {
  const auto start = std::chrono::steady_clock::now();
  LOOM_ASSIGN_OR_RETURN(TuneSpaceResult space,
                        EnumerateTuneSpace(config_, optimizer_, options_.base, costs_,
                                           options_.space, options_.memory_limit_bytes));
  LOOM_ASSIGN_OR_RETURN(const AmpConfig amp, AmpConfigOf(options_.base));
  LOOM_ASSIGN_OR_RETURN(programs_, GptPrograms::Build(config_, optimizer_, amp));
  report_.considered = space.considered;
  report_.candidates = static_cast<int>(space.candidates.size());
  report_.pruned = space.pruned;
  // Cheapest bound first: the first plans found are likely good, and the
  // bound then skips the rest early.
  const std::vector<size_t> order = CheapestBoundFirst(space.candidates);
  // Rounds of a fixed size, whatever the threads, so that the same
  // candidates are skipped on any machine.
  constexpr size_t kRound = 8;
  TuneProgress progress;
  progress.candidates = report_.candidates;
  size_t next = 0;
  // Candidates held back from the last round because a cheaper sibling of
  // theirs was in it: they come first in the next, once the sibling's
  // outcome can skip them.
  std::vector<const TuneCandidate*> deferred;
  while (next < order.size() || !deferred.empty()) {
    // A round: the next kRound candidates not skipped. Skips are
    // decided between rounds only, so the threads' timing changes nothing.
    std::vector<const TuneCandidate*> round;
    std::set<std::string> in_round;
    std::vector<const TuneCandidate*> held = std::move(deferred);
    deferred.clear();
    size_t next_held = 0;
    while (round.size() < kRound && (next_held < held.size() || next < order.size())) {
      const bool was_held = next_held < held.size();
      const TuneCandidate& c = was_held ? *held[next_held++] : space.candidates[order[next++]];
      if (!was_held) ++progress.done;
      if (std::optional<std::string> why = SkipReason(c)) {
        ++report_.pruned[*why];
        report_.outcomes[c.name] = "skipped: " + *why;
        continue;
      }
      const std::vector<std::pair<std::string, const char*>> siblings =
          CheaperSiblings(c.strategy);
      if (!was_held && std::any_of(siblings.begin(), siblings.end(), [&](const auto& sibling) {
            return in_round.count(sibling.first) > 0;
          })) {
        deferred.push_back(&c);
        continue;
      }
      round.push_back(&c);
      in_round.insert(c.name);
    }
    // Held candidates the round had no room for wait for the next.
    deferred.insert(deferred.begin(), held.begin() + next_held, held.end());
    SimulateAndRecord(round);
    UpdateProgress(progress);
    if (options_.time_limit_s > 0 && (next < order.size() || !deferred.empty()) &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >=
            options_.time_limit_s) {
      report_.unsearched = static_cast<int>(order.size() - next + deferred.size());
      break;
    }
  }
  if (const TunedPlan* best = Best(); best != nullptr) {
    report_.search_best = best->candidate.name;
    // A search stopped at its time limit reports what it found by then.
    if (options_.space.refine && report_.unsearched == 0) {
      const TunedPlan winner = *best;  // Record moves report_.simulated
      Refinement refinement = RefineWinner(
          winner, config_, kRefineProbes,
          [&](const std::vector<TuneCandidate>& probes) {
            std::vector<const TuneCandidate*> batch;
            for (const TuneCandidate& c : probes) batch.push_back(&c);
            std::vector<StatusOr<TunedPlan>> plans = SimulateAndRecord(batch);
            UpdateProgress(progress);
            return plans;
          });
      report_.refined = std::move(refinement.knobs);
      report_.declined = std::move(refinement.declined);
    }
  }
  // Best first; equal times keep the search's order, which is fixed.
  std::vector<const TunedPlan*> fitting;
  for (const TunedPlan& p : report_.simulated) {
    if (p.fits && report_.declined.count(p.candidate.name) == 0) fitting.push_back(&p);
  }
  std::stable_sort(fitting.begin(), fitting.end(), [](const TunedPlan* a, const TunedPlan* b) {
    return a->step_time_s < b->step_time_s;
  });
  const size_t k = static_cast<size_t>(std::max(1, options_.top_k));
  for (const TunedPlan* p : fitting) {
    auto same = std::find_if(report_.top.begin(), report_.top.end(), [&](const TunedPlan& t) {
      return t.step_time_s == p->step_time_s && t.peak_bytes == p->peak_bytes &&
             t.exposed_comm_s == p->exposed_comm_s && t.bubble_fraction == p->bubble_fraction;
    });
    if (same != report_.top.end()) {
      same->equivalents.push_back(p->candidate.name);
    } else if (report_.top.size() < k) {
      report_.top.push_back(*p);
    }
  }
  report_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return std::move(report_);
}

// The winner with one knob set otherwise.
struct Variant {
  std::string knob;
  proto::Strategy strategy;
};

// The knobs that apply to the winner's layout.
std::vector<Variant> KnobVariants(const proto::Strategy& w, const TuneOptions& options) {
  const bool dp = w.dp().degree() > 1, mp = w.mp().degree() > 1, pp = w.pipeline().degree() > 1;
  std::vector<Variant> out;
  auto add = [&](const std::string& knob, const std::function<void(proto::Strategy&)>& edit) {
    proto::Strategy s = w;
    edit(s);
    if (TuneCandidateName(s) != TuneCandidateName(w)) out.push_back({knob, s});
  };
  for (int m = 1; m <= 4 * w.pipeline().micro_batches(); m *= 2) {
    add("micro-batches", [&](proto::Strategy& s) { s.mutable_pipeline()->set_micro_batches(m); });
  }
  std::vector<std::string> schedules = options.space.schedules;
  if (schedules.empty()) {
    for (const ScheduleInfo& s : Schedules()) schedules.push_back(s.name);
  }
  for (const std::string& name : schedules) {
    if (!pp && name != "1F1B" && !(mp && name == "1F1B-overlap")) continue;
    add("schedule", [&](proto::Strategy& s) {
      s.mutable_pipeline()->set_schedule_mode(name);
      const StatusOr<const ScheduleInfo*> info = FindSchedule(name);
      s.mutable_pipeline()->set_vpp_degree(info.ok() && (*info)->uses_chunks ? 2 : 1);
    });
  }
  for (int stage = 0; stage <= 3 && dp; ++stage) {
    add("ZeRO stage", [&](proto::Strategy& s) { s.mutable_sharding()->set_stage(stage); });
  }
  for (const char* rc : {"none", "selective", "full"}) {
    add("recomputation", [&](proto::Strategy& s) { s.mutable_recompute()->set_granularity(rc); });
  }
  if (!mp) return out;
  add("sequence parallelism", [&](proto::Strategy& s) {
    s.mutable_mp()->set_sequence_parallel(!s.mp().sequence_parallel());
  });
  add("op-split", [&](proto::Strategy& s) {
    s.mutable_passes()->set_op_split(!s.passes().op_split());
  });
  return out;
}

}  // namespace

StatusOr<TuneReport> Tune(const GptConfig& config, const OptimizerConfig& optimizer,
                          const CostContext& costs, const TuneOptions& options) {
  Search search(config, optimizer, costs, options);
  return search.Run();
}

std::vector<std::string> ExplainWinner(const TuneReport& report, const TuneOptions& options) {
  std::vector<std::string> lines;
  if (report.top.empty()) return lines;
  const TunedPlan& w = report.top.front();
  lines.push_back(StrCat("winner ", w.candidate.name, ": ", TuneMs(w.step_time_s),
                         w.equivalents.empty() ? std::string()
                                               : StrCat(" (the same as ", w.equivalents.size(),
                                                        " other candidates)")));
  // The layout: the best plan of each other (dp, mp, pp).
  std::map<std::string, const TunedPlan*> best_of_layout;
  for (const TunedPlan& p : report.simulated) {
    const proto::Strategy& s = p.candidate.strategy;
    const std::string layout = StrCat("dp", s.dp().degree(), " mp", s.mp().degree(), " pp",
                                      s.pipeline().degree());
    const TunedPlan*& best = best_of_layout[layout];
    if (p.fits && (best == nullptr || p.step_time_s < best->step_time_s)) best = &p;
  }
  for (const auto& [layout, best] : best_of_layout) {
    lines.push_back(StrCat("  layout ", layout, ": ",
                           best == nullptr ? std::string("nothing simulated fits")
                                           : StrCat("best ", best->candidate.name, ", ",
                                                    TuneMs(best->step_time_s))));
  }
  // The search's knobs, against the plan the search found (the refinement
  // then started from it).
  const proto::Strategy* searched = &w.candidate.strategy;
  for (const TunedPlan& p : report.simulated) {
    if (p.candidate.name == report.search_best) searched = &p.candidate.strategy;
  }
  if (report.search_best != w.candidate.name) {
    lines.push_back(StrCat("  the search's best, refined below: ", report.search_best, ": ",
                           report.outcomes.at(report.search_best)));
  }
  for (const Variant& v : KnobVariants(*searched, options)) {
    const std::string name = TuneCandidateName(v.strategy);
    auto it = report.outcomes.find(name);
    std::string outcome;
    if (it != report.outcomes.end()) {
      outcome = it->second;
    } else if (Status valid = ValidateStrategy(v.strategy, options.space.devices); !valid.ok()) {
      outcome = "invalid: " + valid.message();
    } else {
      outcome = "ruled out before the search (see the pruned rules)";
    }
    lines.push_back(StrCat("  ", v.knob, ": ", name, ": ", outcome));
  }
  for (const RefinedKnob& k : report.refined) {
    lines.push_back(StrCat("  refined ", k.knob, ": ", k.outcome));
  }
  return lines;
}

}  // namespace loom
