// A Gloo store that bounds every wait of a group's setup by one deadline
// and remembers which keys it waited for last, so that a failed setup can
// name the member that did not show up, and tell a member that never came
// from a store that failed.
#ifndef LOOM_EXECUTOR_COMM_DEADLINE_STORE_H_
#define LOOM_EXECUTOR_COMM_DEADLINE_STORE_H_

#include <chrono>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

namespace loom {

// Gloo's rendezvous waits with the context timeout per key, and some
// stores' get() waits 30 s on its own: this bounds them all by `deadline`.
class DeadlineStore : public gloo::rendezvous::Store {
 public:
  using Clock = std::chrono::steady_clock;

  DeadlineStore(gloo::rendezvous::Store* inner, Clock::time_point deadline)
      : inner_(inner), deadline_(deadline) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  bool timed_out() const { return timed_out_; }
  // The store itself failed (unreachable, gone), rather than a member.
  bool store_failed() const { return store_failed_; }
  const std::vector<std::string>& last_keys() const { return last_keys_; }

 private:
  gloo::rendezvous::Store* inner_;
  Clock::time_point deadline_;
  std::vector<std::string> last_keys_;
  bool timed_out_ = false;
  bool store_failed_ = false;
};

}  // namespace loom

#endif  // LOOM_EXECUTOR_COMM_DEADLINE_STORE_H_
