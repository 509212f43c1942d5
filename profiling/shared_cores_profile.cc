#include "profiling/shared_cores_profile.h"

#include <cstdio>
#include <numeric>
#include <string>

#include "executor/comm/comm_world.h"
#include "executor/cpu/host_threads.h"
#include "profiling/link_fit.h"
#include "profiling/report_text.h"

namespace loom {
namespace {

// The groups' leaders' timings, gathered over the whole launch: each
// call's mean over the two groups, on rank 0.
StatusOr<std::vector<CommTiming>> MeanOverGroups(Communicator& all, int half, size_t cases,
                                                 const std::vector<CommTiming>& mine) {
  Tensor local(TensorMeta{proto::FP64, {1, static_cast<int64_t>(cases)}});
  double* row = local.data<double>();
  for (size_t i = 0; i < cases; ++i) row[i] = i < mine.size() ? mine[i].median_seconds : 0;
  Tensor gathered;
  LOOM_RETURN_IF_ERROR(all.AllGather(local, &gathered));
  std::vector<CommTiming> out;
  if (all.rank() != 0) return out;
  const double* first = gathered.data<double>();
  const double* second = first + half * cases;
  out = mine;
  for (size_t i = 0; i < cases; ++i) out[i].median_seconds = 0.5 * (first[i] + second[i]);
  return out;
}

// A launch of `world` ranks splits into two groups that call at once.
Status CheckHalves(int world) {
  if (world >= 4 && world % 2 == 0) return Status::OK();
  return InvalidArgument(
      "calls on shared cores under loom launch need an even number of ranks, 4 or more (two groups "
      "calling at once), got ",
      world);
}

}  // namespace

StatusOr<std::vector<CommTiming>> TimeOnSharedCores(const CommProfileOptions& options,
                                                    const std::optional<LaunchEnv>& env) {
  if (!env.has_value()) return ProfileCommOnSharedCores(options, /*groups=*/2, PrintCommProgress);
  LOOM_RETURN_IF_ERROR(CheckHalves(env->world_size));
  const int half = env->world_size / 2;
  const std::vector<int> cores = CoresOfThisProcess();
  if (static_cast<int>(cores.size()) < half) {
    return FailedPrecondition("calls on shared cores need a core for each of a group's ", half,
                              " ranks; this process may use ", cores.size());
  }
  const int group = env->rank / half;
  const int member = env->rank % half;
  // Every rank, to gather the leaders' timings; connected before timing.
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CommWorld> everyone,
                        LaunchWorld(*env, "profile-shared-all", options.timeout));
  LOOM_ASSIGN_OR_RETURN(Communicator * all, everyone->Get(kDpRing));
  std::vector<int> members(half);
  std::iota(members.begin(), members.end(), group * half);
  const std::optional<LaunchEnv> mine = LaunchSubgroup(*env, members, StrCat("shared-", group));
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CommWorld> own,
                        LaunchWorld(*mine, "profile-shared", options.timeout));
  LOOM_ASSIGN_OR_RETURN(Communicator * comm, own->Get(kDpRing));
  PinThread(pthread_self(), cores[member]);
  // The groups' compute times differ, as two ranks' on a core do.
  CommProfileOptions o = options;
  o.seed = options.seed + 1000 * group;
  LOOM_ASSIGN_OR_RETURN(std::vector<CommTiming> timings,
                        ProfileCommMember(*comm, o, group == 0 ? PrintCommProgress : nullptr));
  const size_t cases = CommCases(options, half).size();
  if (member == 0 && timings.size() != cases) {
    return Internal("a group timed ", timings.size(), " calls, expected ", cases);
  }
  return MeanOverGroups(*all, half, cases, timings);
}

Status ProfileSharedCores(const LinkProfileOptions& o, proto::Cluster* cluster,
                          proto::Link** link_out) {
  *link_out = nullptr;
  const std::optional<LaunchEnv>& env = o.launch;
  if (cluster->shared_host().core_sharing() != proto::SharedHost::PINNED) {
    return InvalidArgument(
        "--comm_shared_only: the cluster's ranks do not keep to their cores "
        "(shared_host.core_sharing is not PINNED), so no call runs beside another on a shared "
        "core");
  }
  if (env.has_value()) LOOM_RETURN_IF_ERROR(CheckHalves(env->world_size));
  CommProfileOptions options;
  options.ranks = env.has_value() ? env->world_size / 2 : o.ranks;
  options.between_calls_min_seconds = o.shared_between_min_seconds;
  options.between_calls_max_seconds = o.shared_between_max_seconds;
  if (options.between_calls_max_seconds <= 0) {
    return InvalidArgument(
        "calls on shared cores need compute between them (a positive shared_between_max_seconds)");
  }
  options.together = true;  // a tensor-parallel all-reduce's parties arrive together
  options.samples = o.rounds;
  options.sizes = MessageSizes(o.max_bytes);
  if (options.sizes.empty()) return InvalidArgument("max_bytes must be at least 4096");
  proto::Link* link = LinkSpannedBy(options.ranks, cluster);
  if (!link->measured()) {
    return FailedPrecondition(
        "--comm_shared_only adds to a measured link, and this cluster's link between ",
        options.ranks, " ranks is not (run loom profile --comm with the same --cluster_out first)");
  }
  LOOM_ASSIGN_OR_RETURN(std::vector<CommTiming> timings, TimeOnSharedCores(options, env));
  if (env.has_value() && env->rank != 0) return Status::OK();
  // The note replaces an earlier measurement's.
  std::string note = link->source();
  const size_t earlier = note.find("; shared cores");
  if (earlier != std::string::npos) {
    const size_t next = note.find("; ", earlier + 2);
    note.erase(earlier, next == std::string::npos ? std::string::npos : next - earlier);
  }
  StatusOr<proto::WaitedCosts> costs = FitRegimeCosts(
      StrCat("two groups of ", options.ranks, " ranks on the same cores, both calling (",
             env.has_value() ? "a launch's halves" : "in-process", ")"),
      timings, StrCat("shared cores (--comm_shared_only, ", Today(), ")"), link->half_duplex(),
      &note, o.out);
  // Said (on a loaded host the times may not grow with the bytes), and the
  // file left as it was.
  if (!costs.ok()) return Status::OK();
  *HostCostsOf(link, cluster)->mutable_shared_cores() = std::move(*costs);
  link->set_source(note);
  *link_out = link;
  return Status::OK();
}

}  // namespace loom
