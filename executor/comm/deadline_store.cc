#include "executor/comm/deadline_store.h"

#include <algorithm>
#include <exception>

#include <gloo/common/error.h>

#include "executor/comm/gloo_exchange.h"

namespace loom {

using Millis = std::chrono::milliseconds;

void DeadlineStore::set(const std::string& key, const std::vector<char>& data) {
  try {
    inner_->set(key, data);
  } catch (const std::exception&) {
    store_failed_ = true;
    throw;
  }
}

std::vector<char> DeadlineStore::get(const std::string& key) {
  wait({key});
  try {
    return inner_->get(key);
  } catch (const std::exception&) {
    store_failed_ = true;
    throw;
  }
}

void DeadlineStore::wait(const std::vector<std::string>& keys) {
  wait(keys, TimeLeft(deadline_));
}

void DeadlineStore::wait(const std::vector<std::string>& keys, const Millis& timeout) {
  last_keys_ = keys;
  Millis bound = TimeLeft(deadline_);
  if (timeout != gloo::kNoTimeout) bound = std::min(bound, timeout);
  const Clock::time_point until = Clock::now() + bound;
  try {
    inner_->wait(keys, bound);
  } catch (const gloo::IoException&) {
    // A store that fails (a redis-server gone) may throw the same
    // exception as one that times out; only the clock tells them apart.
    timed_out_ = Clock::now() >= until;
    store_failed_ = !timed_out_;
    throw;
  } catch (const std::exception&) {
    store_failed_ = true;
    throw;
  }
}

}  // namespace loom
