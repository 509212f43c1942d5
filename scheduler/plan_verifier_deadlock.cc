// Check 7 of the plan verifier, deadlock freedom: all ranks are simulated
// together. A rank runs until it blocks, and runs again when what it waits
// for happens: a send never blocks, a recv blocks until its paired send was
// issued, a collective until every member of its group has reached it. If
// ranks are still blocked when none can move, the error follows the chain of
// waits from the lowest blocked rank.
#include <string>
#include <vector>

#include "scheduler/plan_verifier_internal.h"

namespace loom {
namespace plan_verifier_internal {
namespace {

// How many blocked ranks a deadlock message describes.
constexpr int kMaxReportedRanks = 4;

}  // namespace

Status PlanVerifier::Simulate() {
  const int n = world();
  const int pp = layout_.pp;
  struct Cursor {
    int job = 0;
    int op = 0;
  };
  std::vector<Cursor> cursor(n);
  std::vector<int> sent(static_cast<size_t>(n) * pp, 0);
  std::vector<int> received(sent.size(), 0);
  std::vector<int> arrived(groups_.size(), 0);
  std::vector<std::vector<int>> waiting(groups_.size());
  std::vector<int> wait_channel(n, -1), wait_group(n, -1);
  std::vector<char> done(n, 0);
  std::vector<int> ready;
  ready.reserve(n);
  for (int r = n - 1; r >= 0; --r) ready.push_back(r);

  // Moves the cursor past jobs whose ops are all done.
  auto settle = [&](int r) {
    Cursor& c = cursor[r];
    const std::vector<const ProgramInfo*>& jobs = ranks_[r].jobs;
    while (c.job < static_cast<int>(jobs.size()) &&
           c.op >= static_cast<int>(jobs[c.job]->ops.size())) {
      ++c.job;
      c.op = 0;
    }
  };
  auto advance = [&](int r) {
    ++cursor[r].op;
    ++stats_.ops;
    settle(r);
  };

  while (!ready.empty()) {
    const int r = ready.back();
    ready.pop_back();
    const RankCoords& coords = rank(r).coords;
    const std::vector<const ProgramInfo*>& jobs = ranks_[r].jobs;
    settle(r);
    bool blocked = false;
    while (!blocked && cursor[r].job < static_cast<int>(jobs.size())) {
      const OpInfo& oi = jobs[cursor[r].job]->ops[cursor[r].op];
      switch (oi.kind) {
        case OpKind::kCompute:
          advance(r);
          break;
        case OpKind::kSend: {
          const int dst = layout_.RankAtStage(coords, oi.peer);
          const int ch = Channel(dst, coords.pp);
          ++sent[ch];
          if (wait_channel[dst] == ch) {
            wait_channel[dst] = -1;
            ready.push_back(dst);
          }
          advance(r);
          break;
        }
        case OpKind::kRecv: {
          const int ch = Channel(r, oi.peer);
          if (received[ch] < sent[ch]) {
            ++received[ch];
            advance(r);
          } else {
            wait_channel[r] = ch;
            blocked = true;
          }
          break;
        }
        case OpKind::kCollective: {
          const int g = Group(oi.ring, coords);
          const int size = static_cast<int>(groups_[g].size());
          if (++arrived[g] < size) {
            waiting[g].push_back(r);
            wait_group[r] = g;
            blocked = true;
            break;
          }
          // The last member arrived: everyone passes.
          ++stats_.collectives;
          arrived[g] = 0;
          for (int w : waiting[g]) {
            wait_group[w] = -1;
            advance(w);
            ready.push_back(w);
          }
          waiting[g].clear();
          advance(r);
          break;
        }
      }
    }
    if (!blocked) done[r] = 1;
  }

  std::vector<int> blocked;
  for (int r = 0; r < n; ++r) {
    if (!done[r]) blocked.push_back(r);
  }
  if (blocked.empty()) return Status::OK();

  // What blocked rank r waits for: the sender of its recv, or a member of
  // its collective's group that has not arrived.
  auto waits_for = [&](int r) {
    if (wait_channel[r] >= 0) {
      return layout_.RankAtStage(rank(r).coords, wait_channel[r] % pp);
    }
    const int g = wait_group[r];
    if (g < 0) return -1;
    for (int m : groups_[g]) {
      if (wait_group[m] != g) return m;
    }
    return -1;
  };
  auto describe = [&](int r) {
    const Cursor& c = cursor[r];
    const OpInfo& oi = ranks_[r].jobs[c.job]->ops[c.op];
    std::string what;
    if (oi.kind == OpKind::kRecv) {
      what = StrCat("recv from stage ", oi.peer, ", var ", *oi.var);
    } else {
      const int g = wait_group[r];
      what = StrCat(oi.op->type(), " on ring ", RingName(oi.ring), ", ",
                    g >= 0 ? arrived[g] : 0, " of ",
                    g >= 0 ? groups_[g].size() : 0, " ranks arrived");
    }
    return StrCat(RankName(r), " waits at job ", c.job, " (",
                  JobName(r, c.job), ") op ", c.op, " (", what, ")");
  };
  // Follow the chain of waits from the lowest blocked rank.
  std::string msg = "deadlock: ";
  std::vector<char> listed(n, 0);
  int r = blocked[0];
  int reported = 0;
  while (r >= 0 && !done[r] && !listed[r] && reported < kMaxReportedRanks) {
    msg += StrCat(reported ? "; " : "", describe(r));
    listed[r] = 1;
    ++reported;
    r = waits_for(r);
  }
  if (static_cast<int>(blocked.size()) > reported) {
    msg += StrCat("; ", blocked.size(), " of ", n, " ranks blocked in all");
  }
  return FailedPrecondition(msg);
}

}  // namespace plan_verifier_internal
}  // namespace loom
