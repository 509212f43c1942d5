// A measurement taken either on in-process ranks over loopback, or, under
// `loom launch`, as this process's share of one taken by all the launch's
// ranks over the link between them: the one choice every `loom profile`
// host measurement makes.
#ifndef LOOM_PROFILING_LAUNCH_MEMBER_H_
#define LOOM_PROFILING_LAUNCH_MEMBER_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "executor/comm/comm_world.h"
#include "framework/status.h"
#include "runtime/launch_env.h"

namespace loom {

// `in_process()` without a launch; with one, `member(all)` where `all`
// communicates among every rank of `env`'s launch, met as `world` (a name
// each measurement a process takes makes its own) within `timeout` (the
// launch's default where absent).
template <typename InProcess, typename Member>
auto InProcessOrAsMember(const std::optional<LaunchEnv>& env, const std::string& world,
                         std::optional<std::chrono::milliseconds> timeout, InProcess in_process,
                         Member member) -> decltype(in_process()) {
  if (!env.has_value()) return in_process();
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CommWorld> ranks, LaunchWorld(*env, world, timeout));
  LOOM_ASSIGN_OR_RETURN(Communicator * all, ranks->Get(kDpRing));
  return member(*all);
}

}  // namespace loom

#endif  // LOOM_PROFILING_LAUNCH_MEMBER_H_
