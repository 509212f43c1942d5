// loom profile --comm: the links between ranks (in one process, or the
// processes of a launch, on one node or several), the interference of
// communication and compute, and what a call costs the CPU, measured and
// fitted into a cluster file.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cost_model/cluster.h"
#include "cost_model/comm_model.h"
#include "executor/comm/comm_world.h"
#include "executor/comm/gloo_communicator.h"
#include "executor/cpu/host_threads.h"
#include "profiling/comm_fit.h"
#include "profiling/host_profiler.h"
#include "profiling/launch_member.h"
#include "runtime/launch_env.h"
#include "tools/common_flags.h"
#include "tools/profile_util.h"

DEFINE_int32(comm_ranks, 2, "in-process ranks for --comm");
DEFINE_string(comm_between_ms, "0.1,1",
              "--comm: before each call every rank computes for a random time in this range "
              "(ms, 'MIN,MAX'), as in a training step, and a call's time is the mean from its "
              "last party's arrival; '0': calls back to back with the cores kept awake, the "
              "median");
DEFINE_string(comm_shared_between_ms, "0.01,0.02",
              "--comm on in-process ranks with pinned cores: the calls are timed again with two "
              "groups of ranks on the same cores, calling at once with this compute (ms, "
              "'MIN,MAX') before each call, for the link's shared_cores costs (a call beside "
              "another rank's call on its core, as when a plan pins more ranks than cores); "
              "'0': not measured");
DEFINE_string(comm_idle_ms, "",
              "--comm: also time the calls with the parties arriving together after these mean "
              "gaps of compute (ms, comma-separated, each above --comm_between_ms's; the gap "
              "drawn from half to one and a half times it), and record what each adds over the "
              "fitted gap as the link's after_idle; empty: not measured");
DEFINE_int32(comm_rounds, 101, "--comm with compute between calls: timed rounds of every call");
DEFINE_int64(comm_max_bytes, 16 << 20,
             "largest message for --comm (sizes go from 4 KiB by x4)");
DEFINE_int64(comm_long_bytes, 16 << 20,
             "--comm: also time allreduces of this many bytes, and where the fitted link "
             "prices them more than 10% too fast (a shaped link's token bucket), record the "
             "rate they ran at as the link's sustained_bandwidth; 0: skip. Under loom launch "
             "--net_rate, always recorded");
DEFINE_double(interference_seconds, 1.0,
              "seconds the interference measurement computes alone (and about as long each "
              "runs the allreduces alone and both together)");

namespace loom {

namespace {

// The collectives timed on in-process ranks over loopback, or under `loom
// launch` between its processes (on the emulated network with
// --net_rate). Rank 0 gets the timings, the others none.
StatusOr<std::vector<CommTiming>> TimeCollectives(const CommProfileOptions& options,
                                                  const std::optional<LaunchEnv>& env) {
  // A fresh world each time (the store refuses a key twice); every member
  // of a group makes them in the same order.
  static std::map<std::string, int> worlds_of_group;
  const std::string world =
      env.has_value() ? StrCat("profile-", worlds_of_group[env->job_id]++) : "";
  return InProcessOrAsMember(
      env, world, std::nullopt, [&] { return ProfileComm(options, PrintCommProgress); },
      [&](Communicator& all) { return ProfileCommMember(all, options, PrintCommProgress); });
}

// Where the fitted `link` prices an allreduce of `bytes` among `ranks`
// more than 10% under the `seconds` it took, or the link is `shaped`, the
// link cannot keep its fitted rate over long transfers: records the rate
// the call ran at as its sustained_bandwidth.
void RecordSustainedRate(int64_t bytes, double seconds, const std::vector<int>& ranks,
                         bool shaped, proto::Cluster* cluster, proto::Link* link) {
  const CommModel model(*cluster);
  const double priced =
      model.CommSeconds(CommCall::kAllReduce, CommAlgorithm::kDirect, bytes, ranks);
  const double wire_bytes =
      model.WireBytes(CommCall::kAllReduce, CommAlgorithm::kDirect, bytes, ranks);
  const bool slower = shaped || seconds > 1.1 * priced;
  if (slower) link->set_sustained_bandwidth(wire_bytes / seconds);
  std::printf("long transfers: allreduce of %lld B %s measured, %s priced by the fit%s\n",
              static_cast<long long>(bytes), Time(seconds).c_str(), Time(priced).c_str(),
              slower ? StrCat(": sustained rate ", Rate(wire_bytes / seconds), " recorded").c_str()
                     : "");
}

// --comm_idle_ms in seconds, increasing, each above the mean gap of
// --comm_between_ms (which must have compute between calls).
StatusOr<std::vector<double>> ParseIdleGaps(const CommProfileOptions& options) {
  std::vector<double> gaps;
  if (FLAGS_comm_idle_ms.empty()) return gaps;
  const double fitted =
      0.5 * (options.between_calls_min_seconds + options.between_calls_max_seconds);
  if (fitted <= 0) {
    return InvalidArgument("--comm_idle_ms needs compute between the calls: --comm_between_ms "
                           "must not be '0'");
  }
  for (const std::string& item : CommaList(FLAGS_comm_idle_ms)) {
    char* end = nullptr;
    const double ms = std::strtod(item.c_str(), &end);
    const double last = gaps.empty() ? fitted : gaps.back();
    if (item.empty() || *end != '\0' || !std::isfinite(ms) || ms * 1e-3 <= last || ms > 1000) {
      return InvalidArgument("--comm_idle_ms must list increasing gaps in ms, each above the "
                             "one before and the mean of --comm_between_ms (", fitted * 1e3,
                             " ms), at most 1000; got '", FLAGS_comm_idle_ms, "'");
    }
    gaps.push_back(ms * 1e-3);
  }
  return gaps;
}

// What --comm's flags ask for, checked.
struct CommRequest {
  CommProfileOptions options;
  double shared_min_seconds = 0, shared_max_seconds = 0;
  std::vector<double> idle_gaps;
  // loom launch --net_rate shapes each rank's egress with a token bucket.
  bool shaped = false;
};

StatusOr<CommRequest> CommRequestFromFlags(const std::optional<LaunchEnv>& env) {
  CommRequest r;
  CommProfileOptions& options = r.options;
  options.ranks = env.has_value() ? env->world_size : FLAGS_comm_ranks;
  LOOM_RETURN_IF_ERROR(ParseBetween("comm_between_ms", FLAGS_comm_between_ms,
                                    &options.between_calls_min_seconds,
                                    &options.between_calls_max_seconds));
  LOOM_RETURN_IF_ERROR(ParseBetween("comm_shared_between_ms", FLAGS_comm_shared_between_ms,
                                    &r.shared_min_seconds, &r.shared_max_seconds));
  LOOM_ASSIGN_OR_RETURN(r.idle_gaps, ParseIdleGaps(options));
  r.shaped = env.has_value() && env->net_burst_bytes > 0;
  if (r.shaped && FLAGS_comm_long_bytes <= 0) {
    return InvalidArgument("--comm_long_bytes must be positive on a shaped link (loom launch "
                           "--net_rate): its long allreduces measure the shaper's rate");
  }
  // Means of calls that wait on the scheduler are noisier than medians of
  // calls back to back: more rounds.
  if (options.between_calls_max_seconds > 0) options.samples = FLAGS_comm_rounds;
  options.sizes.clear();
  for (int64_t b = 4 << 10; b <= FLAGS_comm_max_bytes; b *= 4) options.sizes.push_back(b);
  if (options.sizes.empty()) return InvalidArgument("--comm_max_bytes must be at least 4096");
  // In the step regime, twice: the parties arriving together, and apart.
  options.together = options.between_calls_max_seconds > 0;
  return r;
}

// The calls in each regime the request and the host call for (Link's
// fields: together, after_wait, awake, after_idle, shared_cores).
StatusOr<LinkTimings> TimeRegimes(const CommRequest& request, const std::optional<LaunchEnv>& env,
                                  const proto::Cluster& cluster) {
  CommProfileOptions options = request.options;
  LinkTimings link_timings;
  std::vector<CommTiming>& timings = link_timings.together;
  // On a busy host the times may not grow with the bytes moved, and then
  // determine no bandwidth. In one process, time them again (twice at
  // most); the ranks of a launch cannot agree to without a round trip,
  // and report it.
  for (int attempt = 1;; ++attempt) {
    LOOM_ASSIGN_OR_RETURN(timings, TimeCollectives(options, env));
    if (env.has_value() || attempt == 3 || DeterminesLink(timings)) break;
    std::fprintf(stderr, "the times do not grow with the bytes moved (a busy host?): timing "
                 "again, %d of 3\n", attempt + 1);
  }
  if (options.between_calls_max_seconds <= 0) return link_timings;
  options.together = false;
  LOOM_ASSIGN_OR_RETURN(link_timings.waited, TimeCollectives(options, env));
  // And back to back with the cores kept awake, as a call finds them
  // where they compute or other ranks share them (HostLinkCosts.awake). In one
  // process only: each process of a launch would need its own wakers.
  if (!env.has_value()) {
    CommProfileOptions back_to_back = options;
    back_to_back.between_calls_min_seconds = back_to_back.between_calls_max_seconds = 0;
    back_to_back.samples = CommProfileOptions().samples;
    LOOM_ASSIGN_OR_RETURN(link_timings.awake, TimeCollectives(back_to_back, env));
  }
  // And after longer compute, where measured (Link.after_idle).
  link_timings.together_gap_seconds =
      0.5 * (options.between_calls_min_seconds + options.between_calls_max_seconds);
  for (double gap : request.idle_gaps) {
    CommProfileOptions after = options;
    after.together = true;
    after.between_calls_min_seconds = 0.5 * gap;
    after.between_calls_max_seconds = 1.5 * gap;
    LOOM_ASSIGN_OR_RETURN(std::vector<CommTiming> calls, TimeCollectives(after, env));
    link_timings.after_idle.emplace_back(gap, std::move(calls));
  }
  // And with two ranks on each core, where a plan pins more ranks than
  // there are cores (HostLinkCosts.shared_cores). The parties of a tensor-parallel
  // all-reduce arrive together.
  if (!env.has_value() && request.shared_max_seconds > 0 &&
      cluster.shared_host().core_sharing() == proto::SharedHost::PINNED) {
    CommProfileOptions shared = options;
    shared.between_calls_min_seconds = request.shared_min_seconds;
    shared.between_calls_max_seconds = request.shared_max_seconds;
    shared.together = true;
    StatusOr<std::vector<CommTiming>> on_shared = TimeOnSharedCores(shared, env);
    if (on_shared.status().code() == StatusCode::kFailedPrecondition) {
      std::printf("shared cores: not measured (%s)\n", on_shared.status().message().c_str());
    } else {
      LOOM_RETURN_IF_ERROR(on_shared.status());
      link_timings.shared_cores = std::move(*on_shared);
    }
  }
  return link_timings;
}

// What communication does to the host beside the link's own costs.
struct HostEffects {
  InterferenceOptions io;
  InterferenceResult interference;
  static constexpr int kLongCalls = 3;
  double long_seconds = 0;  // kLongCalls all-reduces of --comm_long_bytes
  std::vector<CallCpuSample> call_cpu;
};

// Every member of a launch takes part, over the launched link; the wait
// for busy cores goes into `cluster` on rank 0 (ProfileCoreWait).
StatusOr<HostEffects> TimeHostEffects(const CommRequest& request,
                                      const std::optional<LaunchEnv>& env,
                                      proto::Cluster* cluster) {
  const bool prints = !env.has_value() || env->rank == 0;
  const int ranks = request.options.ranks;
  HostEffects h;
  // How communication and computation slow each other on this host.
  h.io.ranks = ranks;
  h.io.seconds = FLAGS_interference_seconds;
  h.io.allreduce_bytes = std::min<int64_t>(FLAGS_comm_max_bytes, 4 << 20);
  if (prints) {
    std::fprintf(stderr, "timing %lldx%lld matmul loops alone and beside an "
                 "allreduce loop ...\n", static_cast<long long>(h.io.matmul_dim),
                 static_cast<long long>(h.io.matmul_dim));
  }
  LOOM_ASSIGN_OR_RETURN(
      h.interference,
      InProcessOrAsMember(
          env, "profile-interference", std::nullopt, [&] { return MeasureInterference(h.io); },
          [&](Communicator& all) { return MeasureInterferenceMember(all, h.io); }));
  if (FLAGS_comm_long_bytes > 0) {
    const int64_t bytes = FLAGS_comm_long_bytes;
    if (prints) {
      std::fprintf(stderr, "timing %d allreduces of %lld B ...\n", HostEffects::kLongCalls,
                   static_cast<long long>(bytes));
    }
    LOOM_ASSIGN_OR_RETURN(
        h.long_seconds,
        InProcessOrAsMember(
            env, "profile-long", h.io.timeout,
            [&] { return TimeLongAllReduce(ranks, bytes, HostEffects::kLongCalls, h.io.timeout); },
            [&](Communicator& all) {
              return TimeLongAllReduceMember(all, bytes, HostEffects::kLongCalls);
            }));
  }
  // How long calls wait for cores that compute (all of a launch's ranks
  // take part; its rank 0 records).
  LOOM_RETURN_IF_ERROR(ProfileCoreWait(cluster, env));
  // Last: a launch's member pins its thread for it.
  LOOM_ASSIGN_OR_RETURN(h.call_cpu, MeasureCallCpuHere(ranks, FLAGS_comm_max_bytes, env));
  return h;
}

// Fits and records into `link` (of `cluster`) what was timed, and prints
// it; rank 0's part.
Status RecordLink(const CommRequest& request, const LinkTimings& timings, const HostEffects& host,
                  const std::optional<LaunchEnv>& env, const std::vector<int>& members,
                  proto::Cluster* cluster, proto::Link* link) {
  const CommProfileOptions& options = request.options;
  const std::string regime =
      options.between_calls_max_seconds > 0
          ? StrCat("means after ", options.between_calls_min_seconds * 1e3, "-",
                   options.between_calls_max_seconds * 1e3, " ms of compute")
          : "medians back to back";
  const std::string where =
      !env.has_value() ? "on loopback"
      : env->host.empty() || env->host == "127.0.0.1"
          ? "between processes on loopback"
          : StrCat("between launched ranks on an emulated network, host ", env->host);
  // A shaped link is full duplex: each rank's egress is shaped on its own.
  LOOM_RETURN_IF_ERROR(
      FitLink(timings,
              StrCat("loom profile --comm, ", Today(), ": Gloo ", where, ", ", options.ranks,
                     " ranks, ", regime, request.shaped ? ", links shaped by tc tbf" : ""),
              request.shaped ? std::optional<bool>(false) : std::nullopt, cluster, link));
  // A p2p step's sends return once handed to the socket (Link.send_buffer_bytes).
  link->set_send_buffer_bytes(GlooSendBufferBytes());
  std::printf("sends: up to %lld B return once in the socket's buffer (Gloo's SO_SNDBUF here)\n",
              static_cast<long long>(link->send_buffer_bytes()));
  const InterferenceResult& r = host.interference;
  std::printf("interference: matmul on %d threads %s alone, %s beside %lld "
              "allreduces of %lld B on %d ranks: slowdown %.2f (median of %d "
              "cycles)%s\n",
              r.compute_threads, Time(r.alone_seconds).c_str(),
              Time(r.with_comm_seconds).c_str(), static_cast<long long>(r.allreduces),
              static_cast<long long>(host.io.allreduce_bytes), host.io.ranks, r.slowdown,
              host.io.cycles, r.slowdown < 1 ? " (below 1 is noise; recorded as 1)" : "");
  std::printf("the other way: one allreduce %s alone, %s beside the matmuls: slowdown %.2f "
              "(median of the cycles')\n",
              Time(r.allreduce_alone_seconds).c_str(),
              Time(r.allreduce_with_compute_seconds).c_str(), r.comm_slowdown);
  LOOM_RETURN_IF_ERROR(
      RecordCallCpu(host.call_cpu,
                    StrCat("loom profile --comm, ", Today(), ": allreduces back to back beside ",
                           "compute ", where, ", ", options.ranks, " ranks, the process CPU clock"),
                    HostCostsOf(link, cluster)));
  // A new fit: a bound measured against an older one no longer applies.
  link->clear_sustained_bandwidth();
  link->clear_burst_bytes();
  if (FLAGS_comm_long_bytes > 0) {
    RecordSustainedRate(FLAGS_comm_long_bytes, host.long_seconds, members, request.shaped,
                        cluster, link);
  }
  if (request.shaped) {
    // The shaper's bucket is not recorded: its credit priced traced
    // all-reduces at 200 Mbit/s but not at 1 Gbit/s, where tails and long
    // calls outweigh it (configs/clusters/emulated.pbtxt), so where it
    // holds is the cluster file's author's to say.
    std::printf("shaped link: its bucket is %lld B (loom launch's; Link.burst_bytes prices its "
                "credit, not recorded here)\n",
                static_cast<long long>(env->net_burst_bytes));
  }
  cluster->set_comm_compute_slowdown(std::max(1.0, r.slowdown));
  cluster->mutable_shared_host()->set_compute_comm_slowdown(std::max(1.0, r.comm_slowdown));
  return Status::OK();
}

// Fits the link that `members` span in `cluster` (in-process ranks, or
// the ranks of a launch that `env` makes a group of) from their calls.
// `*link_out` is that link, or null on the members other than the first
// (they only take part, and write nothing).
Status MeasureLink(const std::optional<LaunchEnv>& env, const std::vector<int>& members,
                   proto::Cluster* cluster, proto::Link** link_out) {
  *link_out = nullptr;
  // Its measurements pin this thread; the next level's start from all the
  // process's cores again.
  SavedThreadAffinity keep_cores;
  LOOM_ASSIGN_OR_RETURN(const CommRequest request, CommRequestFromFlags(env));
  LOOM_ASSIGN_OR_RETURN(const LinkTimings timings, TimeRegimes(request, env, *cluster));
  LOOM_ASSIGN_OR_RETURN(const HostEffects host, TimeHostEffects(request, env, cluster));
  if (env.has_value() && env->rank != 0) return Status::OK();
  proto::Link* link = CommModel(*cluster).LevelOf(members) == LinkLevel::kInterNode
                          ? cluster->mutable_inter_node()
                          : cluster->mutable_intra_node();
  LOOM_RETURN_IF_ERROR(RecordLink(request, timings, host, env, members, cluster, link));
  *link_out = link;
  return Status::OK();
}

}  // namespace

// Under a launch across nodes, the ranks of node 0 fit the link inside a
// node, then the first rank of each node the link between nodes (each
// level on its own, so that neither's calls slow the other's), and the
// cluster gets the launch's ranks per node, so that the simulator prices
// each group on the level it spans. Elsewhere, one link: the one the ranks
// span.
Status MeasureComm(proto::Cluster* cluster, std::vector<proto::Link*>* measured) {
  measured->clear();
  LOOM_ASSIGN_OR_RETURN(std::optional<LaunchEnv> env, LaunchEnvFromEnvironment());
  if (env.has_value() && env->world_size < 2) {
    return FailedPrecondition("--comm under loom launch needs 2 ranks or more");
  }
  auto measure = [&](const std::optional<LaunchEnv>& group,
                     const std::vector<int>& members) -> Status {
    proto::Link* link = nullptr;
    LOOM_RETURN_IF_ERROR(MeasureLink(group, members, cluster, &link));
    if (link != nullptr) measured->push_back(link);
    return Status::OK();
  };
  if (!env.has_value() || env->nodes == 1) {
    std::vector<int> all(env.has_value() ? env->world_size : FLAGS_comm_ranks);
    for (size_t r = 0; r < all.size(); ++r) all[r] = static_cast<int>(r);
    return measure(env, all);
  }
  const int per_node = env->world_size / env->nodes;
  // A cluster of one-rank nodes (emulated) has no link inside one until it
  // is measured: the link between stands for it till then.
  if (per_node > 1 && !cluster->has_intra_node()) {
    *cluster->mutable_intra_node() = cluster->inter_node();
    cluster->mutable_intra_node()->set_measured(false);
  }
  const int per_device = std::max(1, cluster->ranks_per_device());
  if (per_node % per_device != 0) cluster->set_ranks_per_device(1);
  cluster->set_devices_per_node(per_node / std::max(1, cluster->ranks_per_device()));
  std::vector<int> node0(per_node), firsts(env->nodes);
  for (int r = 0; r < per_node; ++r) node0[r] = r;
  for (int n = 0; n < env->nodes; ++n) firsts[n] = n * per_node;
  const bool prints = env->rank == 0;
  // Every rank of the launch, met now while all are starting. Their
  // all-reduce after node 0's measurement holds the other nodes' first ranks
  // until node 0 is done, and fails at once where a rank of node 0 dies
  // (its sockets close), not after a timeout.
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CommWorld> everyone,
                        LaunchWorld(*env, "profile-levels", std::chrono::minutes(15)));
  LOOM_ASSIGN_OR_RETURN(Communicator * all_ranks, everyone->Get(kDpRing));
  if (prints) {
    std::printf("%d nodes of %d ranks (recorded as the cluster's): %s\n", env->nodes, per_node,
                per_node > 1 ? "the link inside node 0, then the link between nodes"
                             : "the link between nodes (one rank a node: none inside one)");
  }
  if (std::optional<LaunchEnv> inside = LaunchSubgroup(*env, node0, "intra-node");
      inside.has_value() && per_node > 1) {
    if (prints) std::printf("link inside a node (ranks 0-%d):\n", per_node - 1);
    LOOM_RETURN_IF_ERROR(measure(inside, node0).WithContext("the link inside node 0"));
  }
  Tensor done(TensorMeta{proto::FP32, {1}});
  done.data<float>()[0] = 1;
  LOOM_RETURN_IF_ERROR(all_ranks->AllReduce({&done}, ReduceOp::kSum)
                           .WithContext("waiting up to 15 min for node 0's ranks to measure "
                                        "the link inside a node"));
  if (std::optional<LaunchEnv> across = LaunchSubgroup(*env, firsts, "inter-node")) {
    if (prints) std::printf("link between nodes (ranks 0, %d, ...):\n", per_node);
    LOOM_RETURN_IF_ERROR(measure(across, firsts).WithContext("the link between nodes"));
  }
  return Status::OK();
}

}  // namespace loom
