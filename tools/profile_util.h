// What the two halves of `loom profile` share: timing ops
// (cmd_profile_ops.cc) and measuring the host (cmd_profile.cc).
#ifndef LOOM_TOOLS_PROFILE_UTIL_H_
#define LOOM_TOOLS_PROFILE_UTIL_H_

#include <cstdarg>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cost_model/cluster.pb.h"
#include "cost_model/cost_table.h"
#include "framework/status.h"
#include "profiling/call_cpu_profiler.h"
#include "profiling/core_wait_profiler.h"
#include "profiling/host_profiler.h"
#include "profiling/op_profiler.h"
#include "runtime/launch_env.h"

namespace loom {

// "12.34 us", "5.678 ms", "1.234 s".
std::string Time(double seconds);
// "1.23 GB/s".
std::string Rate(double bytes_per_second);

// Progress lines of the link's measurements, on stderr.
void PrintCommProgress(const std::string& what);

// The share of the last 10 s in which some runnable task waited for a CPU
// (Linux PSI), or -1 where the kernel does not report it. Read before
// measuring (the measurement's own threads raise it): on a shared host a
// busy neighbour slows every measurement, so the value is reported.
double CpuPressure();
// "CPU pressure 3% before measuring", with a warning when it is high; ""
// when unknown.
std::string PressureNote(double pressure);

// OK for a CPU cluster: loom profile measures this host's CPU.
Status CheckCpu(const proto::Cluster& cluster);

// A --comm_*between_ms flag's value (`name` without the dashes): "MIN,MAX"
// milliseconds into seconds, or "0" (both 0).
Status ParseBetween(const std::string& name, const std::string& flag, double* min_seconds,
                    double* max_seconds);

// A timed op as a cost table's row for `device`; `context` says where it
// was timed ("step", "alone").
proto::CostEntry CostEntryOf(const OpTiming& timing, const std::string& device,
                             const char* context);

// Merges `entries` into the cost table at `path`, read just before (another
// profile may have written it meanwhile), and saves it; the merged table.
StatusOr<CostTable> MergeIntoCostTable(const std::string& path,
                                       const std::vector<proto::CostEntry>& entries,
                                       CostTable::MergeCounts* counts);

// "2026-11-23".
std::string Today();

// A link's calls as `loom profile --comm` timed them, by regime; a regime
// not measured is empty.
struct LinkTimings {
  std::vector<CommTiming> together;      // parties arriving together
  std::vector<CommTiming> waited;        // parties arriving apart
  std::vector<CommTiming> awake;         // back to back, the cores kept awake
  std::vector<CommTiming> shared_cores;  // two ranks on each core (HostLinkCosts.shared_cores)
  // Parties arriving together after longer compute (Link.after_idle): the
  // mean gap (seconds) and the calls, and the mean gap `together` had.
  std::vector<std::pair<double, std::vector<CommTiming>>> after_idle;
  double together_gap_seconds = 0;
};

// Fits the link's α and β (and half or full duplex: `half_duplex` where
// known, else by the smaller residual) and each collective's own to
// `timings.together` for Loom's direct algorithms, and each other regime
// measured to its own costs (after_wait, awake, shared_cores) and the
// extra of calls after longer gaps (after_idle); prints the fits and
// records them in `link` as measured, with `source` and the residuals,
// the regimes' in its costs on shared cores (HostCostsOf).
Status FitLink(const LinkTimings& timings, const std::string& source,
               std::optional<bool> half_duplex, proto::Cluster* cluster, proto::Link* link);

// Whether `timings` determine a link's α-β under either duplex.
bool DeterminesLink(const std::vector<CommTiming>& timings);

// One regime's costs fitted to `timings` on a link of the given duplex,
// printed under `title`; appends "; LABEL: rms residual X%" to `note`.
StatusOr<proto::WaitedCosts> FitRegimeCosts(const std::string& title,
                                            const std::vector<CommTiming>& timings,
                                            const std::string& label, bool half_duplex,
                                            std::string* note);

// The link that ranks 0..ranks-1 span in `cluster`: intra-node for the
// ranks of one host, inter-node for the one-rank nodes of `emulated`.
proto::Link* LinkSpannedBy(int ranks, proto::Cluster* cluster);
// The costs on shared cores (Cluster.shared_host) of `link`, one of
// `cluster`'s two links.
proto::HostLinkCosts* HostCostsOf(const proto::Link* link, proto::Cluster* cluster);

// loom profile --comm (profile_comm.cc): measures and fits the links the
// ranks span into `cluster`, under a launch across nodes both levels;
// `*measured` the links fitted, empty on a launch's ranks other than 0
// (they only take part, and write nothing).
Status MeasureComm(proto::Cluster* cluster, std::vector<proto::Link*>* measured);

// Calls timed in the step regime of `options` by two groups of ranks on
// the same cores, calling at once (HostLinkCosts.shared_cores): in-process groups
// of options.ranks (ProfileCommOnSharedCores), or under a launch (`env`)
// its two halves, rank i of each half pinned to the process's i-th core.
// Each call's mean over the groups, on rank 0; none elsewhere.
// FailedPrecondition where the cores cannot be shared so (fewer cores
// than a group's ranks).
StatusOr<std::vector<CommTiming>> TimeOnSharedCores(const CommProfileOptions& options,
                                                    const std::optional<LaunchEnv>& env);

// loom profile --comm_shared_only: only the shared_cores costs of the link
// a group spans, measured by TimeOnSharedCores and fitted at the link's
// recorded duplex into `cluster`; `*link_out` is that link, or null on a
// launch's ranks other than 0.
Status ProfileSharedCores(proto::Cluster* cluster, proto::Link** link_out);

// loom profile --comm: how long calls wait for cores that compute
// (profiling/core_wait_profiler.h), among in-process ranks or, with `env`,
// every rank of the launch (each calls this; its rank 0 records), fitted
// and recorded as `cluster`'s core_wait, unless --comm_core_wait_calls is
// 0; said and skipped where it cannot run (fewer cores than ranks, cores
// not pinned).
Status ProfileCoreWait(proto::Cluster* cluster, const std::optional<LaunchEnv>& env);

// loom profile --comm: the CPU a rank spends on its own all-reduces back
// to back (profiling/call_cpu_profiler.h), among `ranks` in-process ranks
// or, with `env`, as this member of the launch (every member calls it),
// at sizes up to `max_bytes`; none where --comm_call_cpu_seconds is 0.
StatusOr<std::vector<CallCpuSample>> MeasureCallCpuHere(int ranks, int64_t max_bytes,
                                                        const std::optional<LaunchEnv>& env);
// Prints `samples` beside their fit and records it as `host`'s call_cpu
// with `source` (its residual appended), unless they determine no rate
// (said so; the link's kept). Nothing where `samples` is empty.
Status RecordCallCpu(const std::vector<CallCpuSample>& samples, const std::string& source,
                     proto::HostLinkCosts* host);

// fprintf to `out`, or nothing where `out` is null.
inline void __attribute__((format(printf, 2, 3))) PrintTo(FILE* out, const char* format, ...) {
  if (out == nullptr) return;
  va_list args;
  va_start(args, format);
  std::vfprintf(out, format, args);
  va_end(args);
}

// Fits calls timed beside compute bursts (profiling/core_wait_profiler.h) on
// `ranks` pinned ranks, prints them beside the fit under `heading` to `out`
// (null: nothing printed), and records the fit as `cluster`'s core_wait
// with `source` (its residual appended), unless it is too far from its
// samples to describe them (said so; the cluster's kept).
Status RecordCoreWait(const std::vector<CoreWaitTiming>& timings, int ranks,
                      const std::string& heading, const std::string& source,
                      proto::Cluster* cluster, FILE* out = stdout);

// The op-timing half: `loom profile` without --comm or --calibrate_device.
Status ProfileOps();

}  // namespace loom

#endif  // LOOM_TOOLS_PROFILE_UTIL_H_
