// The starts of one job's ranks, agreed among the launches of all its
// nodes through the job's store (loom launch --max_restarts across nodes).
//
// Each start is a generation, 0 first; a generation's ranks meet under keys
// of their own (LaunchCommOptions). A launch whose ranks fail marks their
// generation failed, then starts the lowest generation not so marked. The
// launches of the surviving nodes and one started later to replace a lost
// node thus pick the same generation without talking to each other. A
// replacement that comes before the failure is seen joins the failing
// generation, fails with it, and moves on with the rest.
#ifndef LOOM_RUNTIME_LAUNCH_GENERATIONS_H_
#define LOOM_RUNTIME_LAUNCH_GENERATIONS_H_

#include <exception>
#include <memory>
#include <string>

#include "framework/status.h"

namespace gloo::rendezvous {
class RedisStore;
}

namespace loom {

class LaunchGenerations {
 public:
  // Counted by this launch alone: one node, meeting in a file store.
  LaunchGenerations() = default;
  // Agreed in the redis-server at `endpoint` under `job`'s keys.
  static StatusOr<LaunchGenerations> InRedis(const std::string& endpoint, const std::string& job);

  // The lowest generation from `at_least` on not marked failed.
  StatusOr<int> Next(int at_least);
  // Marks `generation` failed; the same generation marked by several
  // launches is marked once.
  Status MarkFailed(int generation);

  // Says that the job is not to be restarted, and why (a launch told to
  // stop by its user): the other nodes' launches end rather than wait for
  // a node that will not come back.
  Status MarkStopped(const std::string& why);
  // Why the job was stopped; empty: it was not.
  StatusOr<std::string> Stopped();

 private:
  std::string FailedKey(int generation) const;
  std::string StoppedKey() const { return job_ + "/stopped"; }
  // Sets `key` unless a launch has (saying `what` in an error).
  Status SetOnce(const std::string& key, const std::string& value, const std::string& what);
  // An Unavailable naming the store and `what` it failed to do.
  Status StoreError(const std::string& what, const std::exception& e) const;

  std::shared_ptr<gloo::rendezvous::RedisStore> store_;
  std::string job_, endpoint_;
};

}  // namespace loom

#endif  // LOOM_RUNTIME_LAUNCH_GENERATIONS_H_
