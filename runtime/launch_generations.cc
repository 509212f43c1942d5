#include "runtime/launch_generations.h"

#include <exception>
#include <utility>
#include <vector>

#include <glog/logging.h>
#define HIREDIS_NESTED_INCLUDE  // Debian's hiredis headers sit in hiredis/
#include <gloo/rendezvous/redis_store.h>

#include "executor/comm/comm_world.h"

namespace loom {

StatusOr<LaunchGenerations> LaunchGenerations::InRedis(const std::string& endpoint,
                                                       const std::string& job) {
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<gloo::rendezvous::Store> store,
                        ConnectRedisStore(endpoint));
  LaunchGenerations generations;
  generations.store_ = std::dynamic_pointer_cast<gloo::rendezvous::RedisStore>(store);
  CHECK(generations.store_ != nullptr) << "ConnectRedisStore made no RedisStore";
  generations.job_ = job;
  generations.endpoint_ = endpoint;
  return generations;
}

std::string LaunchGenerations::FailedKey(int generation) const {
  return StrCat(job_, "/generation-", generation, "-failed");
}

Status LaunchGenerations::StoreError(const std::string& what, const std::exception& e) const {
  return Status(StatusCode::kUnavailable,
                StrCat("the redis store at ", endpoint_, " ", what, ": ", e.what()));
}

StatusOr<int> LaunchGenerations::Next(int at_least) {
  if (store_ == nullptr) return at_least;
  int generation = at_least;
  try {
    while (store_->check({FailedKey(generation)})) ++generation;
  } catch (const std::exception& e) {
    return StoreError(StrCat("did not say which start of job ", job_, " is next"), e);
  }
  return generation;
}

Status LaunchGenerations::SetOnce(const std::string& key, const std::string& value,
                                  const std::string& what) {
  try {
    // Gloo's set is redis's SETNX: of launches that set a key at once, all
    // but the first fail, and find it set.
    if (!store_->check({key})) store_->set(key, {value.begin(), value.end()});
    return Status::OK();
  } catch (const std::exception& e) {
    try {
      if (store_->check({key})) return Status::OK();
    } catch (const std::exception&) {
    }
    return StoreError(StrCat("took no mark that ", what), e);
  }
}

Status LaunchGenerations::MarkFailed(int generation) {
  if (store_ == nullptr) return Status::OK();
  return SetOnce(FailedKey(generation), "1",
                 StrCat("start ", generation, " of job ", job_, " failed"));
}

Status LaunchGenerations::MarkStopped(const std::string& why) {
  if (store_ == nullptr) return Status::OK();
  // The first launch stopped says why.
  return SetOnce(StoppedKey(), why, StrCat("job ", job_, " stopped"));
}

StatusOr<std::string> LaunchGenerations::Stopped() {
  if (store_ == nullptr) return std::string();
  try {
    if (!store_->check({StoppedKey()})) return std::string();
    const std::vector<char> why = store_->get(StoppedKey());
    return std::string(why.begin(), why.end());
  } catch (const std::exception& e) {
    return StoreError(StrCat("did not say whether job ", job_, " was stopped"), e);
  }
}

}  // namespace loom
