#include "profiling/link_fit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "cost_model/comm_model.h"
#include "profiling/comm_fit.h"
#include "profiling/core_wait_fit.h"
#include "profiling/report_text.h"

namespace loom {

namespace {

// A core-wait fit further than this (rms, relative) from its samples is
// not recorded.
constexpr double kMaxCoreWaitResidual = 0.5;

// A shaped link's calls within its bucket whose times do not grow with
// their bytes: the bytes cost nothing the profile could see, and β is the
// largest a cluster file takes (ValidateCluster's bound).
constexpr double kBytesUnseen = 1e15;

// Fits α and β over `samples` and prints the fit and its residuals.
StatusOr<CommFit> PrintFit(const std::string& title, const std::vector<CommSample>& samples,
                           bool half_duplex, bool rows, FILE* out,
                           double bandwidth_if_undetermined = 0) {
  auto fit = FitAlphaBeta(samples, half_duplex, bandwidth_if_undetermined);
  if (!fit.ok()) {
    // Said, not skipped: on a busy host one duplex (or one collective) may
    // not fit where the other does.
    PrintTo(out, "%s: not determined (%s)\n", title.c_str(), fit.status().message().c_str());
    return fit.status().WithContext(title);
  }
  PrintTo(out, "%s: alpha %s, beta %s, rms residual %.1f%%%s\n", title.c_str(),
          Time(fit->latency_seconds).c_str(),
          fit->bandwidth_pinned ? "unseen" : Rate(fit->bandwidth).c_str(),
          100 * fit->rms_relative_residual,
          fit->latency_clamped    ? " (alpha pinned to 0)"
          : fit->bandwidth_pinned ? " (the times do not grow with the bytes the bucket covers: "
                                    "those bytes cost nothing measurable)"
                                  : "");
  if (!rows) return fit;
  for (size_t i = 0; i < samples.size(); ++i) {
    PrintTo(out, "  %-34s measured %11s  model %11s  residual %+6.1f%%\n", samples[i].label.c_str(),
            Time(samples[i].seconds).c_str(), Time(fit->predicted[i]).c_str(),
            100 * fit->relative_residual[i]);
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
                 TermsOf(kind, CommAlgorithm::kDirect, t.ranks), static_cast<double>(t.bytes),
                 t.median_seconds};
    all.push_back(s);
    (*by_op)[t.op].push_back(s);
  }
  return all;
}

// Each collective's own fit on a link of the kind kept; a collective whose
// samples cannot determine one is left to the link's values.
template <typename Costs>
void FitCollectives(const std::map<std::string, std::vector<CommSample>>& by_op, bool half_duplex,
                    Costs* costs, FILE* out, double bandwidth_if_undetermined = 0) {
  costs->clear_collective();
  for (const auto& [op, samples] : by_op) {
    auto own =
        PrintFit(StrCat("  ", op), samples, half_duplex, false, out, bandwidth_if_undetermined);
    if (!own.ok()) continue;
    proto::CollectiveCost* c = costs->add_collective();
    c->set_kind(op);
    c->set_latency_seconds(own->latency_seconds);
    c->set_bandwidth(own->bandwidth);
  }
}

// Link.after_idle: at each longer gap, the median over the calls of their
// time less the same call's at the fitted gap (each call measured in both,
// so no model stands between them); a negative median is recorded as 0.
void RecordAfterIdle(const LinkTimings& timings, proto::Link* link, std::string* note, FILE* out) {
  link->clear_after_idle();
  if (timings.after_idle.empty()) return;
  PrintTo(out, "parties arriving together after longer compute (the extra over the gap of %s):\n",
          Time(timings.together_gap_seconds).c_str());
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
      PrintTo(out, "  after %s: not recorded (no calls, or not above the gap before)\n",
              Time(gap).c_str());
      continue;
    }
    std::sort(extra.begin(), extra.end());
    const double median = extra[extra.size() / 2];
    PrintTo(out, "  after %-10s extra %11s (median of %zu calls; from %s to %s)\n",
            Time(gap).c_str(), Time(median).c_str(), extra.size(), Time(extra.front()).c_str(),
            Time(extra.back()).c_str());
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
                                            std::string* note, FILE* out) {
  std::map<std::string, std::vector<CommSample>> by_op;
  LOOM_ASSIGN_OR_RETURN(std::vector<CommSample> samples, SamplesOf(timings, &by_op));
  PrintTo(out, "%s:\n", title.c_str());
  StatusOr<CommFit> fit = PrintFit("joint fit", samples, half_duplex, true, out);
  if (!fit.ok()) {
    PrintTo(out, "%s; no %s costs recorded\n", fit.status().message().c_str(), label.c_str());
    return fit.status();
  }
  proto::WaitedCosts costs;
  costs.set_latency_seconds(fit->latency_seconds);
  costs.set_bandwidth(fit->bandwidth);
  FitCollectives(by_op, half_duplex, &costs, out);
  char residual[96];
  std::snprintf(residual, sizeof(residual), "; %s: rms residual %.1f%%", label.c_str(),
                100 * fit->rms_relative_residual);
  *note += residual;
  return costs;
}

Status FitLink(const LinkTimings& timings, const std::string& source,
               std::optional<bool> known_duplex, proto::Cluster* cluster, proto::Link* link,
               FILE* out) {
  std::map<std::string, std::vector<CommSample>> by_op;
  LOOM_ASSIGN_OR_RETURN(std::vector<CommSample> all, SamplesOf(timings.together, &by_op));
  // Full or half duplex: where not known, the data decide, by the smaller
  // residual.
  PrintTo(out, "parties arriving together:\n");
  bool half_duplex = known_duplex.value_or(false);
  if (!known_duplex.has_value()) {
    // (A duplex whose fit the samples cannot determine loses.)
    StatusOr<CommFit> full = PrintFit("joint fit, full duplex", all, false, false, out);
    StatusOr<CommFit> half = PrintFit("joint fit, half duplex", all, true, false, out);
    if (!full.ok() && !half.ok()) return full.status();
    half_duplex =
        !full.ok() || (half.ok() && half->rms_relative_residual < full->rms_relative_residual);
  }
  const double unseen = timings.max_wire_bytes > 0 ? kBytesUnseen : 0;
  LOOM_ASSIGN_OR_RETURN(CommFit fit, PrintFit(StrCat("kept: ", half_duplex ? "half" : "full",
                                                     " duplex (direct algorithm)"),
                                              all, half_duplex, true, out, unseen));
  link->set_bandwidth(fit.bandwidth);
  link->set_latency_seconds(fit.latency_seconds);
  link->set_half_duplex(half_duplex);
  link->set_measured(true);
  // And each collective's own: one α-β does not describe them all here
  // (an all-reduce's two exchanges cost more than two sends' latencies).
  FitCollectives(by_op, half_duplex, link, out, unseen);
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
        FitRegimeCosts(r.title, *r.timings, r.label, half_duplex, &note, out);
    if (costs.ok()) *(host->*r.costs)() = std::move(*costs);
  }
  RecordAfterIdle(timings, link, &note, out);
  link->set_source(note);
  return Status::OK();
}

void RecordSustainedRate(int64_t bytes, double seconds, const std::vector<int>& ranks, bool shaped,
                         proto::Cluster* cluster, proto::Link* link, FILE* out) {
  const CommModel model(*cluster);
  const double priced =
      model.CommSeconds(CommCall::kAllReduce, CommAlgorithm::kDirect, bytes, ranks);
  const double wire_bytes =
      model.WireBytes(CommCall::kAllReduce, CommAlgorithm::kDirect, bytes, ranks);
  const bool slower = shaped || seconds > 1.1 * priced;
  if (slower) link->set_sustained_bandwidth(wire_bytes / seconds);
  PrintTo(
      out, "long transfers: allreduce of %lld B %s measured, %s priced by the fit%s\n",
      static_cast<long long>(bytes), Time(seconds).c_str(), Time(priced).c_str(),
      slower ? StrCat(": sustained rate ", Rate(wire_bytes / seconds), " recorded").c_str() : "");
}

void RecordCallCpu(const std::vector<CallCpuSample>& samples, const std::string& source,
                   proto::HostLinkCosts* host, FILE* out) {
  if (samples.empty()) return;
  // One latency step and one byte a byte: seconds_per_call + bytes /
  // bytes_per_second, on relative error as the link's own α-β.
  std::vector<CommSample> fit_samples;
  for (const CallCpuSample& s : samples) {
    CommSample f;
    f.label = StrCat("allreduce ", s.bytes, " B");
    f.terms.latency_steps = 1;
    f.terms.byte_factor = 1;
    f.bytes = static_cast<double>(s.bytes);
    f.seconds = s.cpu_seconds;
    fit_samples.push_back(f);
  }
  StatusOr<CommFit> fit = FitAlphaBeta(fit_samples);
  PrintTo(
      out,
      "call CPU: a rank's CPU a call, all-reduces back to back beside compute on every rank's core "
      "(the process CPU clock less the compute's: the call's threads and their kernel time)\n");
  for (size_t i = 0; i < samples.size(); ++i) {
    const CallCpuSample& s = samples[i];
    PrintTo(out, "  allreduce %8lld B  %4d calls  CPU %11s of %11s (%5.1f%%)%s\n",
            static_cast<long long>(s.bytes), s.calls, Time(s.cpu_seconds).c_str(),
            Time(s.wall_seconds).c_str(), 100 * s.cpu_seconds / std::max(s.wall_seconds, 1e-12),
            fit.ok() ? StrCat("  model ", Time(fit->predicted[i])).c_str() : "");
  }
  // A CPU that does not grow with the bytes (a busy host) determines no
  // rate: said, and the link's kept.
  if (!fit.ok()) {
    PrintTo(out, "call CPU: not recorded (%s); the link's kept\n",
            std::string(fit.status().message()).c_str());
    return;
  }
  proto::CallCpu* c = host->mutable_call_cpu();
  c->set_seconds_per_call(fit->latency_seconds);
  c->set_bytes_per_second(fit->bandwidth);
  c->set_source(StrCat(source, ", rms residual ",
                       static_cast<int>(std::lround(100 * fit->rms_relative_residual)), "%"));
  PrintTo(out, "call CPU: %s a call + %s of bytes; rms residual %.1f%%\n",
          Time(fit->latency_seconds).c_str(), Rate(fit->bandwidth).c_str(),
          100 * fit->rms_relative_residual);
}

Status RecordCoreWait(const std::vector<CoreWaitTiming>& timings, int ranks,
                      const std::string& heading, const std::string& source,
                      proto::Cluster* cluster, FILE* out) {
  // Idle cores are priced by the link (a call on them wakes a halted core,
  // in the step regime the link was fitted in): shown, not fitted.
  std::vector<CoreWaitSample> samples;
  double idle = -1;
  for (const CoreWaitTiming& t : timings) {
    if (t.burst_seconds > 0) {
      samples.push_back({t.burst_seconds, t.median_seconds});
    } else {
      idle = t.median_seconds;
    }
  }
  // Each rank on a core of its own: the simulator takes the longest wait
  // over the parties' cores, and so does the fit.
  LOOM_ASSIGN_OR_RETURN(CoreWaitFit fit, FitCoreWait(samples, ranks));
  PrintTo(out, "core wait: %s\n", heading.c_str());
  if (idle >= 0) {
    PrintTo(out, "  on idle cores                      measured %11s  (not fitted)\n",
            Time(idle).c_str());
  }
  for (size_t i = 0; i < samples.size(); ++i) {
    const double burst = samples[i].burst_seconds;
    PrintTo(
        out, "  beside %-28s measured %11s  model %11s\n",
        std::isinf(burst) ? "compute that never pauses" : StrCat("bursts of ", Time(burst)).c_str(),
        Time(samples[i].call_seconds).c_str(), Time(fit.predicted[i]).c_str());
  }
  PrintTo(out,
          "core wait: %.2f waits of at most %s each; %s on busy cores with nothing to wait for "
          "(not recorded: the link's awake costs price that); rms residual %.1f%%\n",
          fit.waits, Time(fit.slice_seconds).c_str(), Time(fit.busy_call_seconds).c_str(),
          100 * fit.rms_relative_residual);
  // A fit this far from its samples describes nothing the simulator could
  // use: on the emulated network calls beside compute ran faster than on
  // idle cores (the wire, not the core, decides there).
  if (fit.rms_relative_residual > kMaxCoreWaitResidual) {
    PrintTo(out,
            "core wait: not recorded (rms residual over %.0f%%: the model of waits for busy cores "
            "does not describe these calls); the cluster's kept\n",
            100 * kMaxCoreWaitResidual);
    return Status::OK();
  }
  proto::CoreWait* w = cluster->mutable_shared_host()->mutable_core_wait();
  w->set_waits(fit.waits);
  w->set_slice_seconds(fit.slice_seconds);
  w->set_source(StrCat(source, ", rms residual ",
                       static_cast<int>(std::lround(100 * fit.rms_relative_residual)), "%"));
  return Status::OK();
}

proto::Link* LinkSpannedBy(int ranks, proto::Cluster* cluster) {
  std::vector<int> members(ranks);
  for (int r = 0; r < ranks; ++r) members[r] = r;
  const bool inter = CommModel(*cluster).LevelOf(members) == LinkLevel::kInterNode;
  return inter ? cluster->mutable_inter_node() : cluster->mutable_intra_node();
}

proto::HostLinkCosts* HostCostsOf(const proto::Link* link, proto::Cluster* cluster) {
  proto::SharedHost* host = cluster->mutable_shared_host();
  return link == &cluster->inter_node() ? host->mutable_inter_node() : host->mutable_intra_node();
}

}  // namespace loom
