// From timed calls to a cluster file's values: a link's α-β and each
// regime's costs (comm_fit.h does the least squares), the CPU a call
// takes, the wait for busy cores and a long transfer's rate, each
// recorded with its source and residual and reported to a FILE (null:
// nothing printed).
#ifndef LOOM_PROFILING_LINK_FIT_H_
#define LOOM_PROFILING_LINK_FIT_H_

#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cost_model/cluster.pb.h"
#include "framework/status.h"
#include "profiling/call_cpu_profiler.h"
#include "profiling/core_wait_profiler.h"
#include "profiling/host_profiler.h"

namespace loom {

// A link's calls as timed, by regime; a regime not measured is empty.
struct LinkTimings {
  std::vector<CommTiming> together;      // parties arriving together
  std::vector<CommTiming> waited;        // parties arriving apart
  std::vector<CommTiming> awake;         // back to back, the cores kept awake
  std::vector<CommTiming> shared_cores;  // two ranks on each core (HostLinkCosts.shared_cores)
  // Parties arriving together after longer compute (Link.after_idle): the
  // mean gap (seconds) and the calls, and the mean gap `together` had.
  std::vector<std::pair<double, std::vector<CommTiming>>> after_idle;
  double together_gap_seconds = 0;
  // Where positive, only calls of at most this many bytes on the wire were
  // timed (a shaped link's bucket): their times may not grow with their
  // bytes, and then the link's bytes are taken to cost nothing measurable.
  int64_t max_wire_bytes = 0;
};

// Fits the link's α and β (and half or full duplex: `half_duplex` where
// known, else by the smaller residual) and each collective's own to
// `timings.together` for Loom's direct algorithms, and each other regime
// measured to its own costs (after_wait, awake, shared_cores) and the
// extra of calls after longer gaps (after_idle); reports the fits to
// `out` and records them in `link` as measured, with `source` and the
// residuals, the regimes' in its costs on shared cores (HostCostsOf).
Status FitLink(const LinkTimings& timings, const std::string& source,
               std::optional<bool> half_duplex, proto::Cluster* cluster, proto::Link* link,
               FILE* out);

// Whether `timings` determine a link's α-β under either duplex.
bool DeterminesLink(const std::vector<CommTiming>& timings);

// One regime's costs fitted to `timings` on a link of the given duplex,
// reported under `title`; appends "; LABEL: rms residual X%" to `note`.
StatusOr<proto::WaitedCosts> FitRegimeCosts(const std::string& title,
                                            const std::vector<CommTiming>& timings,
                                            const std::string& label, bool half_duplex,
                                            std::string* note, FILE* out);

// Where the fitted `link` prices an all-reduce of `bytes` among `ranks`
// more than 10% under the `seconds` it took, or the link is `shaped` (a
// token bucket), the link cannot keep its fitted rate over long
// transfers: records the rate the call ran at as its sustained_bandwidth.
void RecordSustainedRate(int64_t bytes, double seconds, const std::vector<int>& ranks, bool shaped,
                         proto::Cluster* cluster, proto::Link* link, FILE* out);

// Reports `samples` beside their fit and records it as `host`'s call_cpu
// with `source` (its residual appended), unless they determine no rate
// (said so; the link's kept). Nothing where `samples` is empty.
void RecordCallCpu(const std::vector<CallCpuSample>& samples, const std::string& source,
                   proto::HostLinkCosts* host, FILE* out);

// Fits calls timed beside compute bursts (core_wait_profiler.h) on
// `ranks` pinned ranks, reports them beside the fit under `heading`, and
// records the fit as `cluster`'s core_wait with `source` (its residual
// appended), unless it is too far from its samples to describe them (said
// so; the cluster's kept).
Status RecordCoreWait(const std::vector<CoreWaitTiming>& timings, int ranks,
                      const std::string& heading, const std::string& source,
                      proto::Cluster* cluster, FILE* out);

// The link that ranks 0..ranks-1 span in `cluster`: intra-node for the
// ranks of one host, inter-node for the one-rank nodes of `emulated`.
proto::Link* LinkSpannedBy(int ranks, proto::Cluster* cluster);
// The costs on shared cores (Cluster.shared_host) of `link`, one of
// `cluster`'s two links.
proto::HostLinkCosts* HostCostsOf(const proto::Link* link, proto::Cluster* cluster);

}  // namespace loom

#endif  // LOOM_PROFILING_LINK_FIT_H_
