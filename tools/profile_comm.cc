// loom profile --comm and --comm_shared_only: their flags, read into
// what profiling/link_profile.h and shared_cores_profile.h measure.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/launch_env.h"
#include "tools/common_flags.h"
#include "tools/profile_util.h"

DEFINE_int32(comm_ranks, 2, "in-process ranks for --comm");
DEFINE_string(comm_between_ms, "0.1,1",
              "--comm: before each call every rank computes for a random time in this range (ms, "
              "'MIN,MAX'), as in a training step, and a call's time is the mean from its last "
              "party's arrival; '0': calls back to back with the cores kept awake, the median");
DEFINE_string(
    comm_shared_between_ms, "0.01,0.02",
    "--comm on in-process ranks with pinned cores: the calls are timed again with two groups of "
    "ranks on the same cores, calling at once with this compute (ms, 'MIN,MAX') before each call, "
    "for the link's shared_cores costs (a call beside another rank's call on its core, as when a "
    "plan pins more ranks than cores); '0': not measured");
DEFINE_string(comm_idle_ms, "",
              "--comm: also time the calls with the parties arriving together after these mean "
              "gaps of compute (ms, comma-separated, each above --comm_between_ms's; the gap drawn "
              "from half to one and a half times it), and record what each adds over the fitted "
              "gap as the link's after_idle; empty: not measured");
DEFINE_int32(comm_rounds, 101, "--comm with compute between calls: timed rounds of every call");
DEFINE_int64(comm_max_bytes, 16 << 20, "largest message for --comm (sizes go from 4 KiB by x4)");
DEFINE_int64(
    comm_long_bytes, 16 << 20,
    "--comm: also time allreduces of this many bytes, and where the fitted link prices them more "
    "than 10% too fast (a shaped link's token bucket), record the rate they ran at as the link's "
    "sustained_bandwidth; 0: skip. Under loom launch --net_rate, always recorded");
DEFINE_double(interference_seconds, 1.0,
              "seconds the interference measurement computes alone (and about as long each runs "
              "the allreduces alone and both together)");
DEFINE_double(
    comm_call_cpu_seconds, 0.5,
    "--comm: time all-reduces back to back for about this long at each of three sizes (4 kB, 64 "
    "kB, 1 MiB, up to --comm_max_bytes) in 5 rounds, beside a thread computing on each rank's "
    "core, with the process CPU clock less the compute's, and record the link's call_cpu (the CPU "
    "a call takes from its rank's core where ranks share cores); 0: not measured, the link's kept");
DEFINE_int32(
    comm_core_wait_calls, 0,
    "--comm: time this many all-reduces beside each length of compute burst on the ranks' cores "
    "(in-process ranks, or a launch's with a core each) and record the cluster's core_wait; 0: not "
    "measured, the cluster's kept (off by default: since Gloo's loop thread yields to compute, the "
    "fit priced training steps on this host slow, docs/simulator_accuracy.md)");
DEFINE_int64(comm_core_wait_bytes, 16 << 10,
             "--comm_core_wait_calls: the all-reduces' size (small, so that the wait and not the "
             "bytes decides; the fit takes the bytes' part from the link)");
DEFINE_bool(comm_shared_only, false,
            "measure only the link's shared_cores costs (two groups of ranks on the same cores "
            "calling at once) into --cluster_out's measured link, keeping the rest of the file: "
            "under loom launch, the launch's two halves (an even number of ranks, 4 or more, rank "
            "i of each half on core i); else two groups of --comm_ranks in-process ranks. A later "
            "--comm refits the link and drops them");

namespace loom {
namespace {

// --comm_idle_ms in seconds, increasing, each above the mean gap of
// --comm_between_ms (which must have compute between calls).
StatusOr<std::vector<double>> ParseIdleGaps(const LinkProfileOptions& options) {
  std::vector<double> gaps;
  if (FLAGS_comm_idle_ms.empty()) return gaps;
  const double fitted = 0.5 * (options.between_min_seconds + options.between_max_seconds);
  if (fitted <= 0) {
    return InvalidArgument(
        "--comm_idle_ms needs compute between the calls: --comm_between_ms must not be '0'");
  }
  for (const std::string& item : CommaList(FLAGS_comm_idle_ms)) {
    char* end = nullptr;
    const double ms = std::strtod(item.c_str(), &end);
    const double last = gaps.empty() ? fitted : gaps.back();
    if (item.empty() || *end != '\0' || !std::isfinite(ms) || ms * 1e-3 <= last || ms > 1000) {
      return InvalidArgument(
          "--comm_idle_ms must list increasing gaps in ms, each above the one before and the mean "
          "of --comm_between_ms (",
          fitted * 1e3, " ms), at most 1000; got '", FLAGS_comm_idle_ms, "'");
    }
    gaps.push_back(ms * 1e-3);
  }
  return gaps;
}

}  // namespace

StatusOr<LinkProfileOptions> LinkProfileOptionsFromFlags() {
  LinkProfileOptions o;
  LOOM_ASSIGN_OR_RETURN(o.launch, LaunchEnvFromEnvironment());
  o.ranks = FLAGS_comm_ranks;
  LOOM_RETURN_IF_ERROR(ParseBetween("comm_between_ms", FLAGS_comm_between_ms,
                                    &o.between_min_seconds, &o.between_max_seconds));
  LOOM_RETURN_IF_ERROR(ParseBetween("comm_shared_between_ms", FLAGS_comm_shared_between_ms,
                                    &o.shared_between_min_seconds, &o.shared_between_max_seconds));
  LOOM_ASSIGN_OR_RETURN(o.idle_gaps, ParseIdleGaps(o));
  o.rounds = FLAGS_comm_rounds;
  o.max_bytes = FLAGS_comm_max_bytes;
  if (MessageSizes(o.max_bytes).empty()) {
    return InvalidArgument("--comm_max_bytes must be at least 4096");
  }
  o.long_bytes = FLAGS_comm_long_bytes;
  if (o.launch.has_value() && o.launch->net_burst_bytes > 0 && o.long_bytes <= 0) {
    return InvalidArgument(
        "--comm_long_bytes must be positive on a shaped link (loom launch --net_rate): its long "
        "allreduces measure the shaper's rate");
  }
  o.interference_seconds = FLAGS_interference_seconds;
  if (!(FLAGS_comm_call_cpu_seconds >= 0) || FLAGS_comm_call_cpu_seconds > 60) {
    return InvalidArgument("--comm_call_cpu_seconds must be 0 to 60, got ",
                           FLAGS_comm_call_cpu_seconds);
  }
  o.call_cpu_seconds = FLAGS_comm_call_cpu_seconds;
  if (FLAGS_comm_core_wait_calls < 0) {
    return InvalidArgument("--comm_core_wait_calls must not be negative, got ",
                           FLAGS_comm_core_wait_calls);
  }
  o.core_wait_calls = FLAGS_comm_core_wait_calls;
  if (FLAGS_comm_core_wait_bytes < 4 || FLAGS_comm_core_wait_bytes > (int64_t{1} << 30)) {
    return InvalidArgument("--comm_core_wait_bytes must be 4 to 2^30, got ",
                           FLAGS_comm_core_wait_bytes);
  }
  o.core_wait_bytes = FLAGS_comm_core_wait_bytes;
  if (FLAGS_comm_shared_only && o.shared_between_max_seconds <= 0) {
    return InvalidArgument(
        "--comm_shared_only needs compute between the calls: --comm_shared_between_ms must not be "
        "'0'");
  }
  o.out = stdout;
  return o;
}

}  // namespace loom
