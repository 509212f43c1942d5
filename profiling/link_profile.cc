#include "profiling/link_profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "cost_model/comm_model.h"
#include "executor/comm/comm_world.h"
#include "executor/comm/gloo_communicator.h"
#include "executor/cpu/host_threads.h"
#include "profiling/host_effects_profile.h"
#include "profiling/host_profiler.h"
#include "profiling/launch_member.h"
#include "profiling/link_fit.h"
#include "profiling/report_text.h"
#include "profiling/shared_cores_profile.h"

namespace loom {

namespace {

// loom launch --net_rate shapes each rank's egress with a token bucket.
bool Shaped(const LinkProfileOptions& o) {
  return o.launch.has_value() && o.launch->net_burst_bytes > 0;
}

// What the options ask for is measurable, or the field at fault.
Status CheckOptions(const LinkProfileOptions& o) {
  if (o.launch.has_value() && o.launch->world_size < 2) {
    return FailedPrecondition("the links under loom launch need 2 ranks or more");
  }
  if (!o.launch.has_value() && o.ranks < 2) {
    return InvalidArgument("the links need 2 in-process ranks or more, got ", o.ranks);
  }
  if (MessageSizes(o.max_bytes).empty()) {
    return InvalidArgument("max_bytes must be at least 4096, got ", o.max_bytes);
  }
  if (Shaped(o) && o.long_bytes <= 0) {
    return InvalidArgument(
        "long_bytes must be positive on a shaped link (loom launch --net_rate): its long "
        "allreduces measure the shaper's rate");
  }
  const double gap = 0.5 * (o.between_min_seconds + o.between_max_seconds);
  if (!o.idle_gaps.empty() && gap <= 0) {
    return InvalidArgument("idle gaps need compute between the calls");
  }
  for (size_t i = 0; i < o.idle_gaps.size(); ++i) {
    if (!(o.idle_gaps[i] > (i == 0 ? gap : o.idle_gaps[i - 1]))) {
      return InvalidArgument("idle gaps must increase, each above the step regime's mean gap");
    }
  }
  return Status::OK();
}

// The step regime's calls: in-process ranks or the launch's; means over
// more rounds where compute comes between calls (they wait on the
// scheduler, and are noisier than medians back to back); the parties
// arriving together first (TimeRegimes also times them apart).
CommProfileOptions StepCalls(const LinkProfileOptions& o) {
  CommProfileOptions c;
  c.ranks = o.launch.has_value() ? o.launch->world_size : o.ranks;
  c.between_calls_min_seconds = o.between_min_seconds;
  c.between_calls_max_seconds = o.between_max_seconds;
  if (c.between_calls_max_seconds > 0) c.samples = o.rounds;
  c.sizes = MessageSizes(o.max_bytes);
  c.together = c.between_calls_max_seconds > 0;
  if (Shaped(o)) c.max_wire_bytes = o.launch->net_burst_bytes;
  return c;
}

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

// The calls in each regime the options and the host call for (Link's
// fields: together, after_wait, awake, after_idle, shared_cores).
StatusOr<LinkTimings> TimeRegimes(const LinkProfileOptions& request, const CommProfileOptions& step,
                                  const proto::Cluster& cluster) {
  const std::optional<LaunchEnv>& env = request.launch;
  CommProfileOptions options = step;
  LinkTimings link_timings;
  link_timings.max_wire_bytes = options.max_wire_bytes;
  std::vector<CommTiming>& timings = link_timings.together;
  // On a busy host the times may not grow with the bytes moved, and then
  // determine no bandwidth. In one process, time them again (twice at
  // most); the ranks of a launch cannot agree to without a round trip,
  // and report it.
  for (int attempt = 1;; ++attempt) {
    LOOM_ASSIGN_OR_RETURN(timings, TimeCollectives(options, env));
    if (env.has_value() || attempt == 3 || DeterminesLink(timings)) break;
    std::fprintf(
        stderr,
        "the times do not grow with the bytes moved (a busy host?): timing again, %d of 3\n",
        attempt + 1);
  }
  if (options.between_calls_max_seconds <= 0) return link_timings;
  options.together = false;
  LOOM_ASSIGN_OR_RETURN(link_timings.waited, TimeCollectives(options, env));
  // And back to back with the cores kept awake, as a call finds them
  // where they compute or other ranks share them (HostLinkCosts.awake). In one
  // process only: each process of a launch would need its own wakers.
  // Where every call came slower than after compute, the host stalled
  // them: time them again (twice at most), else leave the regime out.
  if (!env.has_value()) {
    const CommProfileOptions awake = AwakeCallOptions(options, GlooSendBufferBytes());
    for (int attempt = 1;; ++attempt) {
      LOOM_ASSIGN_OR_RETURN(link_timings.awake, TimeCollectives(awake, env));
      if (!AwakeCallsStalled(link_timings.awake, timings)) break;
      if (attempt == 3) {
        PrintTo(request.out,
                "back to back, the cores kept awake: slower than after compute in 3 attempts "
                "(the host's scheduling stalled the calls); not recorded\n");
        link_timings.awake.clear();
        break;
      }
      std::fprintf(stderr,
                   "back to back, the cores kept awake, the calls came slower than after "
                   "compute (a stall): timing again, %d of 3\n",
                   attempt + 1);
    }
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
  // there are cores (HostLinkCosts.shared_cores). The parties of a
  // tensor-parallel all-reduce arrive together.
  if (!env.has_value() && request.shared_between_max_seconds > 0 &&
      cluster.shared_host().core_sharing() == proto::SharedHost::PINNED) {
    CommProfileOptions shared = options;
    shared.between_calls_min_seconds = request.shared_between_min_seconds;
    shared.between_calls_max_seconds = request.shared_between_max_seconds;
    shared.together = true;
    StatusOr<std::vector<CommTiming>> on_shared = TimeOnSharedCores(shared, env);
    if (on_shared.status().code() == StatusCode::kFailedPrecondition) {
      PrintTo(request.out, "shared cores: not measured (%s)\n",
              on_shared.status().message().c_str());
    } else {
      LOOM_RETURN_IF_ERROR(on_shared.status());
      link_timings.shared_cores = std::move(*on_shared);
    }
  }
  return link_timings;
}

// Fits and records into `link` (of `cluster`) what was timed, and reports
// it; rank 0's part.
Status RecordLink(const LinkProfileOptions& request, const CommProfileOptions& options,
                  const LinkTimings& timings, const HostEffects& host,
                  const std::vector<int>& members, proto::Cluster* cluster, proto::Link* link) {
  const std::optional<LaunchEnv>& env = request.launch;
  FILE* out = request.out;
  const bool shaped = Shaped(request);
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
                     " ranks, ", regime,
                     shaped ? StrCat(", links shaped by tc tbf, calls of at most ",
                                     options.max_wire_bytes, " B on the wire (the bucket)")
                            : ""),
              shaped ? std::optional<bool>(false) : std::nullopt, cluster, link, out));
  // A p2p step's sends return once handed to the socket
  // (Link.send_buffer_bytes).
  link->set_send_buffer_bytes(GlooSendBufferBytes());
  PrintTo(out, "sends: up to %lld B return once in the socket's buffer (Gloo's SO_SNDBUF here)\n",
          static_cast<long long>(link->send_buffer_bytes()));
  const InterferenceResult& r = host.interference;
  PrintTo(out,
          "interference: matmul on %d threads %s alone, %s beside %lld allreduces of %lld B on %d "
          "ranks: slowdown %.2f (median of %d cycles)%s\n",
          r.compute_threads, Time(r.alone_seconds).c_str(), Time(r.with_comm_seconds).c_str(),
          static_cast<long long>(r.allreduces), static_cast<long long>(host.io.allreduce_bytes),
          host.io.ranks, r.slowdown, host.io.cycles,
          r.slowdown < 1 ? " (below 1 is noise; recorded as 1)" : "");
  PrintTo(out,
          "the other way: one allreduce %s alone, %s beside the matmuls: slowdown %.2f (median of "
          "the cycles')\n",
          Time(r.allreduce_alone_seconds).c_str(), Time(r.allreduce_with_compute_seconds).c_str(),
          r.comm_slowdown);
  RecordCallCpu(host.call_cpu,
                StrCat("loom profile --comm, ", Today(), ": allreduces back to back beside ",
                       "compute ", where, ", ", options.ranks, " ranks, the process CPU clock"),
                HostCostsOf(link, cluster), out);
  // A new fit: a bound measured against an older one no longer applies.
  link->clear_sustained_bandwidth();
  link->clear_burst_bytes();
  if (request.long_bytes > 0) {
    RecordSustainedRate(request.long_bytes, host.long_seconds, members, shaped, cluster, link, out);
  }
  if (shaped) {
    // The bucket is loom launch's own (tc tbf's burst): known, not fitted.
    link->set_burst_bytes(env->net_burst_bytes);
    PrintTo(out,
            "shaped link: its bucket of %lld B (loom launch's) recorded as burst_bytes; the calls "
            "fitted above were those its credit covers (larger ones pay the rate the long "
            "transfers measured)\n",
            static_cast<long long>(env->net_burst_bytes));
  }
  cluster->set_comm_compute_slowdown(std::max(1.0, r.slowdown));
  cluster->mutable_shared_host()->set_compute_comm_slowdown(std::max(1.0, r.comm_slowdown));
  return Status::OK();
}

// Fits the link that `members` span in `cluster` (in-process ranks, or
// the ranks of a launch that options.launch makes a group of) from their calls.
// `*link_out` is that link, or null on the members other than the first
// (they only take part, and write nothing).
Status MeasureLink(const LinkProfileOptions& options, const std::vector<int>& members,
                   proto::Cluster* cluster, proto::Link** link_out) {
  const std::optional<LaunchEnv>& env = options.launch;
  *link_out = nullptr;
  // Its measurements pin this thread; the next level's start from all the
  // process's cores again.
  SavedThreadAffinity keep_cores;
  const CommProfileOptions step = StepCalls(options);
  LOOM_ASSIGN_OR_RETURN(const LinkTimings timings, TimeRegimes(options, step, *cluster));
  LOOM_ASSIGN_OR_RETURN(const HostEffects host, TimeHostEffects(options, cluster));
  if (env.has_value() && env->rank != 0) return Status::OK();
  proto::Link* link = CommModel(*cluster).LevelOf(members) == LinkLevel::kInterNode
                          ? cluster->mutable_inter_node()
                          : cluster->mutable_intra_node();
  LOOM_RETURN_IF_ERROR(RecordLink(options, step, timings, host, members, cluster, link));
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
Status MeasureComm(const LinkProfileOptions& options, proto::Cluster* cluster,
                   std::vector<proto::Link*>* measured) {
  measured->clear();
  LOOM_RETURN_IF_ERROR(CheckOptions(options));
  const std::optional<LaunchEnv>& env = options.launch;
  auto measure = [&](const std::optional<LaunchEnv>& group,
                     const std::vector<int>& members) -> Status {
    LinkProfileOptions of_group = options;
    of_group.launch = group;
    proto::Link* link = nullptr;
    LOOM_RETURN_IF_ERROR(MeasureLink(of_group, members, cluster, &link));
    if (link != nullptr) measured->push_back(link);
    return Status::OK();
  };
  if (!env.has_value() || env->nodes == 1) {
    std::vector<int> all(env.has_value() ? env->world_size : options.ranks);
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
    PrintTo(options.out, "%d nodes of %d ranks (recorded as the cluster's): %s\n", env->nodes,
            per_node,
            per_node > 1 ? "the link inside node 0, then the link between nodes"
                         : "the link between nodes (one rank a node: none inside one)");
  }
  if (std::optional<LaunchEnv> inside = LaunchSubgroup(*env, node0, "intra-node");
      inside.has_value() && per_node > 1) {
    if (prints) PrintTo(options.out, "link inside a node (ranks 0-%d):\n", per_node - 1);
    LOOM_RETURN_IF_ERROR(measure(inside, node0).WithContext("the link inside node 0"));
  }
  Tensor done(TensorMeta{proto::FP32, {1}});
  done.data<float>()[0] = 1;
  LOOM_RETURN_IF_ERROR(
      all_ranks->AllReduce({&done}, ReduceOp::kSum)
          .WithContext(
              "waiting up to 15 min for node 0's ranks to measure the link inside a node"));
  if (std::optional<LaunchEnv> across = LaunchSubgroup(*env, firsts, "inter-node")) {
    if (prints) PrintTo(options.out, "link between nodes (ranks 0, %d, ...):\n", per_node);
    LOOM_RETURN_IF_ERROR(measure(across, firsts).WithContext("the link between nodes"));
  }
  return Status::OK();
}

}  // namespace loom
