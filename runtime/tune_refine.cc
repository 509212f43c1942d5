#include "runtime/tune_refine.h"

#include <algorithm>
#include <limits>

#include "runtime/tune_format.h"

namespace loom {
namespace {

// A value replaces the best so far only if its step is this much shorter:
// the cost model does not tell smaller differences apart (a bucket size
// that moves the step by 0.01% is a coin toss on a real run), and the
// value the passes chose themselves is the one to keep then.
constexpr double kMinGain = 0.005;

// One value of a knob to try: the best plan so far with one edit.
struct Probe {
  std::string label;  // the value, as --explain prints it
  proto::Strategy strategy;
};

// What its plan did.
struct Outcome {
  bool fits = false;  // false for a plan that failed
  double step_s = std::numeric_limits<double>::infinity();
};

class Refiner {
 public:
  Refiner(const TunedPlan& winner, int probes, const SimulateCandidates& simulate)
      : best_(winner), probes_(std::max(1, probes)), simulate_(simulate) {}

  void RecomputedLayers(const GptConfig& config);
  void BucketSize();
  void Sharding();

  Refinement result() && {
    Refinement r{std::move(lines_), std::move(tried_names_)};
    r.declined.erase(best_.candidate.name);
    for (const std::string& name : taken_) r.declined.erase(name);
    return r;
  }

 private:
  const proto::Strategy& strategy() const { return best_.candidate.strategy; }

  // Starts a knob whose value in the best plan is `label`.
  void Begin(const std::string& knob, const std::string& label);
  // Says what became of the knob.
  void End();
  // Simulates the probes together and takes the fastest that fits, if it
  // beats the best plan; what each did.
  std::vector<Outcome> Try(const std::vector<Probe>& probes);
  // Whether a step this long would replace the best plan.
  bool Gains(double step_s) const { return step_s < best_.step_time_s * (1 - kMinGain); }
  // The knob's fullest value that fits, where its plans take more memory
  // (and less time) as the value grows from `fit` (which fits) to `over`
  // (taken not to), in at most `max_rounds` rounds of `probes_` values
  // each, narrowing (fit, over) to what they showed. None if the fullest
  // value, which should step fastest, gains nothing.
  void FullestThatFits(int64_t fit, int64_t over, int max_rounds,
                       const std::function<Probe(int64_t)>& probe_of);

  TunedPlan best_;
  const int probes_;
  const SimulateCandidates& simulate_;
  std::string knob_, label_, first_label_;
  std::vector<std::string> tried_;  // this knob's probes and their outcomes
  std::vector<RefinedKnob> lines_;
  std::set<std::string> tried_names_, taken_;
};

void Refiner::Begin(const std::string& knob, const std::string& label) {
  knob_ = knob;
  label_ = first_label_ = label;
  tried_.clear();
}

void Refiner::End() {
  if (tried_.empty()) return;
  std::string tried;
  for (const std::string& t : tried_) tried += StrCat("; ", t);
  lines_.push_back({knob_, label_ == first_label_
                               ? StrCat(label_, " kept, ", TuneMs(best_.step_time_s), tried)
                               : StrCat(label_, ", ", TuneMs(best_.step_time_s), " (was ",
                                        first_label_, ")", tried)});
}

std::vector<Outcome> Refiner::Try(const std::vector<Probe>& probes) {
  std::vector<TuneCandidate> candidates;
  for (const Probe& p : probes) {
    // No bounds: the space's are of the knobs it turns, and fewer
    // recomputed layers step faster than the winner's time bound.
    TuneCandidate c;
    c.strategy = p.strategy;
    c.name = TuneCandidateName(p.strategy);
    candidates.push_back(std::move(c));
  }
  const std::vector<StatusOr<TunedPlan>> plans = simulate_(candidates);
  for (const TuneCandidate& c : candidates) tried_names_.insert(c.name);
  std::vector<Outcome> outcomes(probes.size());
  int faster = -1;
  for (size_t i = 0; i < probes.size(); ++i) {
    if (!plans[i].ok()) {
      tried_.push_back(StrCat(probes[i].label, ": failed: ", plans[i].status().message()));
      continue;
    }
    const TunedPlan& p = *plans[i];
    outcomes[i] = {p.fits, p.step_time_s};
    tried_.push_back(StrCat(probes[i].label, ": ", TuneMs(p.step_time_s),
                            p.fits ? "" : ", over the memory limit"));
    if (p.fits && Gains(p.step_time_s) &&
        (faster < 0 || p.step_time_s < plans[faster]->step_time_s)) {
      faster = static_cast<int>(i);
    }
  }
  if (faster >= 0) {
    best_ = *plans[faster];
    label_ = probes[faster].label;
    taken_.insert(best_.candidate.name);
  }
  return outcomes;
}

void Refiner::FullestThatFits(int64_t fit, int64_t over, int max_rounds,
                              const std::function<Probe(int64_t)>& probe_of) {
  for (int round = 0; round < max_rounds && over - fit > 1; ++round) {
    // The first round tries the fullest value (if it fits, nothing between
    // can beat it) and values evenly below; later ones, values evenly
    // between what fits and what does not.
    const int64_t top = round == 0 ? over - 1 : over;
    std::vector<int64_t> values;
    if (round == 0) values.push_back(top);
    const int between = round == 0 ? probes_ - 1 : probes_;
    for (int i = between; i >= 1; --i) {
      const int64_t v = fit + (top - fit) * i / (between + 1);
      if (v > fit && v < top && (values.empty() || v < values.back())) values.push_back(v);
    }
    std::vector<Probe> probes;
    for (int64_t v : values) probes.push_back(probe_of(v));
    const std::vector<Outcome> tried = Try(probes);
    // The fullest value is the fastest the knob can give: if even it gains
    // nothing, fitting less of it cannot either.
    if (round == 0 && !Gains(tried[0].step_s)) return;
    for (size_t i = 0; i < values.size(); ++i) {
      if (tried[i].fits) fit = std::max(fit, values[i]);
    }
    for (size_t i = 0; i < values.size(); ++i) {
      if (!tried[i].fits && values[i] > fit) over = std::min(over, values[i]);
    }
  }
}

void Refiner::RecomputedLayers(const GptConfig& config) {
  const proto::RecomputeStrategy& rc = strategy().recompute();
  if (rc.granularity() == "none" || rc.num_layers() != 0) return;
  const int64_t chunks = static_cast<int64_t>(std::max(1, strategy().pipeline().degree())) *
                         std::max(1, strategy().pipeline().vpp_degree());
  const int64_t per_chunk = (config.num_layers + chunks - 1) / chunks;
  if (per_chunk < 2) return;
  Begin("recomputed layers", StrCat("all ", per_chunk, " of each chunk"));
  // The value grown is the layers kept whole: from none (the winner) to all
  // (no recomputation, which the search tried).
  const proto::Strategy base = strategy();
  FullestThatFits(0, per_chunk, /*max_rounds=*/64, [&](int64_t kept) {
    Probe p{StrCat("the first ", per_chunk - kept, " of each chunk's ", per_chunk), base};
    p.strategy.mutable_recompute()->set_num_layers(static_cast<int>(per_chunk - kept));
    return p;
  });
  End();
}

void Refiner::BucketSize() {
  const int64_t planned = best_.bucket_bytes;
  if (strategy().dp().degree() <= 1 || planned <= 1 || !strategy().passes().dp_bucketing()) {
    return;
  }
  const bool users = strategy().dp().bucket_size_bytes() > 0;
  Begin("bucket size", TuneBytes(planned) + (users ? "" : " (the cost model's)"));
  auto probe_of = [&](int64_t bytes) {
    Probe p{TuneBytes(bytes), strategy()};
    p.strategy.mutable_dp()->set_bucket_size_bytes(bytes);
    return p;
  };
  std::vector<Probe> first = {probe_of(2 * planned)};
  if (planned / 2 >= 1) first.push_back(probe_of(planned / 2));
  Try(first);
  // Further the way that helped, while it helps.
  for (int round = 0; round < 2 && best_.bucket_bytes != planned; ++round) {
    const int64_t at = best_.bucket_bytes;
    const int64_t next = at > planned ? 2 * at : at / 2;
    if (next < 1) break;
    const std::string before = label_;
    Try({probe_of(next)});
    if (label_ == before) break;
  }
  End();
}

void Refiner::Sharding() {
  const proto::ShardingStrategy& z = strategy().sharding();
  const int dp = strategy().dp().degree();
  if (z.stage() == 0 || dp <= 1) return;
  if (z.fetch_mode() == "all_gather") {
    Begin("fetch mode", "all_gather");
    Probe p{"auto", strategy()};
    p.strategy.mutable_sharding()->set_fetch_mode("auto");
    Try({p});
    End();
  }
  if (z.stage() != 3) return;
  Begin("prefetch depth", StrCat(z.prefetch_depth()));
  std::vector<Probe> deeper;
  for (int depth = z.prefetch_depth() + 1; depth <= z.prefetch_depth() + 2; ++depth) {
    Probe p{StrCat(depth), strategy()};
    p.strategy.mutable_sharding()->set_prefetch_depth(depth);
    deeper.push_back(std::move(p));
  }
  Try(deeper);
  End();
  if (strategy().sharding().keep_gathered_bytes() != 0) return;
  // No rank's buckets hold more than its whole parameters (fp32 under AMP
  // too, where the master weights are the sharded ones): the most worth
  // asking for is all of them.
  const int64_t whole = best_.peak_rank_parameter_bytes * dp;
  if (whole <= 1) return;
  Begin("buckets kept gathered for the step", "none");
  const proto::Strategy base = strategy();
  FullestThatFits(0, whole + 1, /*max_rounds=*/3, [&](int64_t bytes) {
    Probe p{bytes >= whole ? std::string("all") : TuneBytes(bytes), base};
    p.strategy.mutable_sharding()->set_keep_gathered_bytes(bytes >= whole ? -1 : bytes);
    return p;
  });
  End();
}

}  // namespace

Refinement RefineWinner(const TunedPlan& winner, const GptConfig& config, int probes,
                        const SimulateCandidates& simulate) {
  Refiner refiner(winner, probes, simulate);
  refiner.RecomputedLayers(config);
  refiner.BucketSize();
  refiner.Sharding();
  return std::move(refiner).result();
}

}  // namespace loom
