// loom profile --comm's fitting: a link's α-β and each regime's costs
// from the timed calls (profiling/comm_fit.h does the least squares),
// printed with their residuals and recorded in the cluster's link.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "cost_model/comm_model.h"
#include "profiling/comm_fit.h"
#include "tools/profile_util.h"

namespace loom {

namespace {

// Fits α and β over `samples` and prints the fit and its residuals.
StatusOr<CommFit> PrintFit(const std::string& title,
                           const std::vector<CommSample>& samples,
                           bool half_duplex, bool rows) {
  auto fit = FitAlphaBeta(samples, half_duplex);
  if (!fit.ok()) {
    // Said, not skipped: on a busy host one duplex (or one collective) may
    // not fit where the other does.
    std::printf("%s: not determined (%s)\n", title.c_str(), fit.status().message().c_str());
    return fit.status().WithContext(title);
  }
  std::printf("%s: alpha %s, beta %s, rms residual %.1f%%%s\n", title.c_str(),
              Time(fit->latency_seconds).c_str(), Rate(fit->bandwidth).c_str(),
              100 * fit->rms_relative_residual,
              fit->latency_clamped ? " (alpha pinned to 0)" : "");
  if (!rows) return fit;
  for (size_t i = 0; i < samples.size(); ++i) {
    std::printf("  %-34s measured %11s  model %11s  residual %+6.1f%%\n",
                samples[i].label.c_str(), Time(samples[i].seconds).c_str(),
                Time(fit->predicted[i]).c_str(), 100 * fit->relative_residual[i]);
  }
  return fit;
}

// The samples of `timings` under Loom's direct algorithms, all and by op.
StatusOr<std::vector<CommSample>> SamplesOf(const std::vector<CommTiming>& timings,
                                            std::map<std::string, std::vector<CommSample>>* by_op) {
  std::vector<CommSample> all;
  for (const CommTiming& t : timings) {
    LOOM_ASSIGN_OR_RETURN(CommCall kind, CollectiveCallOf(t.op));
    CommSample s{StrCat(t.op, " n=", t.ranks, " ", t.bytes, " B"),
                 TermsOf(kind, CommAlgorithm::kDirect, t.ranks),
                 static_cast<double>(t.bytes), t.median_seconds};
    all.push_back(s);
    (*by_op)[t.op].push_back(s);
  }
  return all;
}

// Each collective's own fit on a link of the kind kept; a collective whose
// samples cannot determine one is left to the link's values.
template <typename Costs>
void FitCollectives(const std::map<std::string, std::vector<CommSample>>& by_op,
                    bool half_duplex, Costs* out) {
  out->clear_collective();
  for (const auto& [op, samples] : by_op) {
    auto own = PrintFit(StrCat("  ", op), samples, half_duplex, false);
    if (!own.ok()) continue;
    proto::CollectiveCost* c = out->add_collective();
    c->set_kind(op);
    c->set_latency_seconds(own->latency_seconds);
    c->set_bandwidth(own->bandwidth);
  }
}

// Link.after_idle: at each longer gap, the median over the calls of their
// time less the same call's at the fitted gap (each call measured in both,
// so no model stands between them); a negative median is recorded as 0.
void RecordAfterIdle(const LinkTimings& timings, proto::Link* link, std::string* note) {
  link->clear_after_idle();
  if (timings.after_idle.empty()) return;
  std::printf("parties arriving together after longer compute (the extra over the gap of "
              "%s):\n", Time(timings.together_gap_seconds).c_str());
  proto::IdleCost* base = link->add_after_idle();
  base->set_idle_seconds(timings.together_gap_seconds);
  base->set_extra_seconds(0);
  std::string points;
  for (const auto& [gap, calls] : timings.after_idle) {
    std::vector<double> extra;
    for (size_t i = 0; i < calls.size() && i < timings.together.size(); ++i) {
      extra.push_back(calls[i].median_seconds - timings.together[i].median_seconds);
    }
    if (extra.empty() || gap <= link->after_idle(link->after_idle_size() - 1).idle_seconds()) {
      std::printf("  after %s: not recorded (no calls, or not above the gap before)\n",
                  Time(gap).c_str());
      continue;
    }
    std::sort(extra.begin(), extra.end());
    const double median = extra[extra.size() / 2];
    std::printf("  after %-10s extra %11s (median of %zu calls; from %s to %s)\n",
                Time(gap).c_str(), Time(median).c_str(), extra.size(),
                Time(extra.front()).c_str(), Time(extra.back()).c_str());
    proto::IdleCost* p = link->add_after_idle();
    p->set_idle_seconds(gap);
    p->set_extra_seconds(std::clamp(median, 0.0, 1.0));
    points += StrCat(points.empty() ? "" : ", ", Time(median), " after ", Time(gap));
  }
  if (!points.empty()) *note += StrCat("; after idle: ", points);
}

}  // namespace

bool DeterminesLink(const std::vector<CommTiming>& timings) {
  std::map<std::string, std::vector<CommSample>> by_op;
  StatusOr<std::vector<CommSample>> all = SamplesOf(timings, &by_op);
  return all.ok() && (FitAlphaBeta(*all, false).ok() || FitAlphaBeta(*all, true).ok());
}

StatusOr<proto::WaitedCosts> FitRegimeCosts(const std::string& title,
                                            const std::vector<CommTiming>& timings,
                                            const std::string& label, bool half_duplex,
                                            std::string* note) {
  std::map<std::string, std::vector<CommSample>> by_op;
  LOOM_ASSIGN_OR_RETURN(std::vector<CommSample> samples, SamplesOf(timings, &by_op));
  std::printf("%s:\n", title.c_str());
  StatusOr<CommFit> fit = PrintFit("joint fit", samples, half_duplex, true);
  if (!fit.ok()) {
    std::printf("%s; no %s costs recorded\n", fit.status().message().c_str(), label.c_str());
    return fit.status();
  }
  proto::WaitedCosts out;
  out.set_latency_seconds(fit->latency_seconds);
  out.set_bandwidth(fit->bandwidth);
  FitCollectives(by_op, half_duplex, &out);
  char residual[96];
  std::snprintf(residual, sizeof(residual), "; %s: rms residual %.1f%%", label.c_str(),
                100 * fit->rms_relative_residual);
  *note += residual;
  return out;
}

Status FitLink(const LinkTimings& timings, const std::string& source,
               std::optional<bool> known_duplex, proto::Cluster* cluster, proto::Link* link) {
  std::map<std::string, std::vector<CommSample>> by_op;
  LOOM_ASSIGN_OR_RETURN(std::vector<CommSample> all, SamplesOf(timings.together, &by_op));
  // Full or half duplex: where not known, the data decide, by the smaller
  // residual.
  std::printf("parties arriving together:\n");
  bool half_duplex = known_duplex.value_or(false);
  if (!known_duplex.has_value()) {
    // (A duplex whose fit the samples cannot determine loses.)
    StatusOr<CommFit> full = PrintFit("joint fit, full duplex", all, false, false);
    StatusOr<CommFit> half = PrintFit("joint fit, half duplex", all, true, false);
    if (!full.ok() && !half.ok()) return full.status();
    half_duplex =
        !full.ok() || (half.ok() && half->rms_relative_residual < full->rms_relative_residual);
  }
  LOOM_ASSIGN_OR_RETURN(
      CommFit fit,
      PrintFit(StrCat("kept: ", half_duplex ? "half" : "full", " duplex (direct algorithm)"), all,
               half_duplex, true));
  link->set_bandwidth(fit.bandwidth);
  link->set_latency_seconds(fit.latency_seconds);
  link->set_half_duplex(half_duplex);
  link->set_measured(true);
  // And each collective's own: one α-β does not describe them all here
  // (an all-reduce's two exchanges cost more than two sends' latencies).
  FitCollectives(by_op, half_duplex, link);
  char residual[96];
  std::snprintf(residual, sizeof(residual), "%zu samples, rms residual %.1f%%", all.size(),
                100 * fit.rms_relative_residual);
  std::string note = StrCat(source, ", ", residual);
  // The regimes' own costs, where measured; a regime whose fit the samples
  // do not determine is left to the link's values.
  proto::HostLinkCosts* host = HostCostsOf(link, cluster);
  host->clear_after_wait();
  host->clear_awake();
  host->clear_shared_cores();
  struct Regime {
    const char* title;
    const std::vector<CommTiming>* timings;
    const char* label;
    proto::WaitedCosts* (proto::HostLinkCosts::*costs)();
  };
  const Regime regimes[] = {
      {"parties arriving apart (the first waits for the last)", &timings.waited, "arriving apart",
       &proto::HostLinkCosts::mutable_after_wait},
      {"back to back, the cores kept awake", &timings.awake, "awake",
       &proto::HostLinkCosts::mutable_awake},
      {"two ranks on each core, both groups calling", &timings.shared_cores, "shared cores",
       &proto::HostLinkCosts::mutable_shared_cores},
  };
  for (const Regime& r : regimes) {
    if (r.timings->empty()) continue;
    StatusOr<proto::WaitedCosts> costs =
        FitRegimeCosts(r.title, *r.timings, r.label, half_duplex, &note);
    if (costs.ok()) *(host->*r.costs)() = std::move(*costs);
  }
  RecordAfterIdle(timings, link, &note);
  link->set_source(note);
  return Status::OK();
}

}  // namespace loom
