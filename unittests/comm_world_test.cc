// CommWorld (each rank's rings) and faults: missing, silent or departed
// peers must give errors naming them within the timeout, never a hang.

#include <sched.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "executor/comm/comm_world.h"
#include "executor/comm/gloo_communicator.h"
#include "executor/cpu/host_threads.h"
#include "unittests/comm_test_util.h"
#include "unittests/loom_cli.h"

namespace loom {
namespace {

using testing::Filled;
using testing::Group;
using testing::Iota;
using testing::Latch;
using testing::MakeGroup;
using testing::RunRanks;
using testing::SameBits;
using testing::SecondsSince;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// --- CommWorld -------------------------------------------------------------

// The members of each ring, from the coordinates alone.
std::vector<int64_t> ExpectedMembers(const ParallelLayout& layout, int rank,
                                     RingId ring) {
  const RankCoords me = layout.Coords(rank);
  std::vector<int64_t> members;
  if (ring == kSharedParamRing) {
    for (int q = 0; q < layout.world_size(); ++q) {
      RankCoords c = layout.Coords(q);
      if (c.dp == me.dp && c.mp == me.mp && c.pp == 0) members.push_back(q);
    }
    for (int q = 0; q < layout.world_size(); ++q) {
      RankCoords c = layout.Coords(q);
      if (c.dp == me.dp && c.mp == me.mp && c.pp == layout.pp - 1) {
        members.push_back(q);
      }
    }
    return members;
  }
  // The other two coordinates equal; ordered by the ring's own coordinate.
  const int extent = ring == kMpRing   ? layout.mp
                     : ring == kDpRing ? layout.dp
                                       : layout.pp;
  for (int k = 0; k < extent; ++k) {
    for (int q = 0; q < layout.world_size(); ++q) {
      RankCoords c = layout.Coords(q);
      bool same = ring == kMpRing ? c.dp == me.dp && c.pp == me.pp && c.mp == k
                  : ring == kDpRing
                      ? c.mp == me.mp && c.pp == me.pp && c.dp == k
                      : c.dp == me.dp && c.mp == me.mp && c.pp == k;
      if (same) members.push_back(q);
    }
  }
  return members;
}

// What a Gloo send hands to its socket at once is Gloo's buffer request
// (the message, up to 32 MiB) as the kernel caps it (net.core.wmem_max):
// what the simulator prices a send's hand-over by (Link.send_buffer_bytes).
TEST(CommWorldTest, GlooSendBufferIsGloosRequestCappedByTheKernel) {
  std::ifstream in("/proc/sys/net/core/wmem_max");
  int64_t wmem_max = 0;
  if (!(in >> wmem_max)) GTEST_SKIP() << "SKIPPED: /proc/sys/net/core/wmem_max not readable";
  EXPECT_EQ(GlooSendBufferBytes(), std::min<int64_t>(wmem_max, 32 << 20));
}

// Gloo's event-loop thread runs under SCHED_BATCH, so that it cannot
// preempt a rank's thread that holds a pair's mutex and then spin for it
// (gloo_device.cc says why); the thread that made the device keeps
// its own policy.
TEST(CommWorldTest, GloosEventLoopThreadNeverPreemptsTheRanksThreads) {
  if (sched_getscheduler(0) != SCHED_OTHER) {
    GTEST_SKIP() << "SKIPPED LOUDLY: this test runs under scheduling policy "
                 << sched_getscheduler(0) << ", which the device keeps for its thread";
  }
  // ThreadSanitizer starts a thread of its own at the process's first
  // thread; one started and joined here first leaves only Gloo's to be new.
  std::thread([] {}).join();
  const std::set<pid_t> before = ThreadsOfThisProcess();
  auto device = CreateGlooTcpDevice();
  ASSERT_TRUE(device.ok()) << device.status();
  std::vector<pid_t> started;
  for (pid_t tid : ThreadsOfThisProcess()) {
    if (before.count(tid) == 0) started.push_back(tid);
  }
  // Gloo's device starts one thread, its event loop; a sanitizer's own
  // thread started beside it would inherit the policy too.
  ASSERT_FALSE(started.empty()) << "Gloo's device started no thread";
  for (pid_t tid : started) {
    EXPECT_EQ(sched_getscheduler(tid), SCHED_BATCH)
        << "thread " << tid << " of " << started.size() << " new";
  }
  EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
}

TEST(CommWorldTest, EachRingHasTheRightMembers) {
  const ParallelLayout layout{/*dp=*/2, /*mp=*/2, /*pp=*/2};
  CommWorldOptions options;
  options.job = "comm-world-rings";
  options.timeout = seconds(10);
  RunRanks(layout.world_size(), [&](int rank) {
    auto world = CommWorld::Create(layout, rank, options);
    ASSERT_TRUE(world.ok()) << world.status();
    for (RingId ring : {kMpRing, kDpRing, kPpRing, kSharedParamRing}) {
      SCOPED_TRACE(StrCat("rank ", rank, " ring ", RingName(ring)));
      auto comm = (*world)->Get(ring);
      ASSERT_TRUE(comm.ok()) << comm.status();
      const std::vector<int64_t> want = ExpectedMembers(layout, rank, ring);
      ASSERT_EQ((*comm)->size(), static_cast<int>(want.size()));
      ASSERT_EQ(want[(*comm)->rank()], rank);
      // Every member contributes its global rank.
      Tensor me(TensorMeta{proto::INT64, {1}});
      me.data<int64_t>()[0] = rank;
      Tensor all;
      Status s = (*comm)->AllGather(me, &all);
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_EQ(all.ToInt64Vector(), want);
      if (ring == kPpRing) {
        EXPECT_EQ((*comm)->rank(), layout.Coords(rank).pp);
      }
    }
  });
}

TEST(CommWorldTest, RingsOfOneAreLocal) {
  const ParallelLayout layout{1, 1, 1};
  auto world = CommWorld::Create(layout, 0, CommWorldOptions());
  ASSERT_TRUE(world.ok()) << world.status();
  auto shared = (*world)->Get(kSharedParamRing);
  EXPECT_EQ(shared.status().code(), StatusCode::kNotFound);
  EXPECT_NE(shared.status().message().find("pp=1"), std::string::npos)
      << shared.status();
  for (RingId ring : {kMpRing, kDpRing, kPpRing}) {
    auto comm = (*world)->Get(ring);
    ASSERT_TRUE(comm.ok()) << comm.status();
    Communicator* c = *comm;
    EXPECT_EQ(c->size(), 1);
    Tensor x = Filled(5, [](int64_t i) { return i / 3.0f; });
    Tensor x0 = x;
    x0.CopyFrom(x);
    ASSERT_TRUE(c->AllReduce({&x}, ReduceOp::kAvg).ok());
    EXPECT_TRUE(SameBits(x, x0));
    Tensor out;
    ASSERT_TRUE(c->AllGather(x, &out).ok());
    EXPECT_TRUE(SameBits(out, x0));
    Tensor part;
    ASSERT_TRUE(c->ReduceScatter(x, &part, ReduceOp::kSum).ok());
    EXPECT_TRUE(SameBits(part, x0));
    ASSERT_TRUE(c->Broadcast(&x, 0).ok());
    EXPECT_EQ(c->Send(x, 0).code(), StatusCode::kInvalidArgument);
  }
  // A middle stage has no shared-parameter ring either.
  EXPECT_TRUE(
      RingMembers(ParallelLayout{1, 1, 3}, 1, kSharedParamRing).empty());
  EXPECT_EQ(RingMembers(ParallelLayout{1, 1, 3}, 2, kSharedParamRing),
            (std::vector<int>{0, 2}));
  // Hybrid sharding, dp=4 in groups of 2 (mp=2: dp ranks are 2 apart):
  // rank 6 (dp 3) shares with dp 2 and is replicated at dp 1.
  const ParallelLayout hybrid{4, 2, 1, /*sharding=*/2};
  EXPECT_EQ(RingMembers(hybrid, 6, kShardingRing), (std::vector<int>{4, 6}));
  EXPECT_EQ(RingMembers(hybrid, 6, kDpReplicaRing), (std::vector<int>{2, 6}));
  EXPECT_EQ(RingMembers(hybrid, 6, kDpRing), (std::vector<int>{0, 2, 4, 6}));
  // Without it, neither ring exists.
  EXPECT_TRUE(RingMembers(ParallelLayout{4, 2, 1}, 6, kShardingRing).empty());
  EXPECT_TRUE(RingMembers(ParallelLayout{4, 2, 1}, 6, kDpReplicaRing).empty());
}

TEST(CommWorldTest, FileStoreInATempDir) {
  const std::string dir = MakeTempDir("loom_comm_");
  const ParallelLayout layout{/*dp=*/3, 1, 1};
  CommWorldOptions options;
  options.file_store_dir = dir;
  options.timeout = seconds(10);
  RunRanks(3, [&](int rank) {
    // Each rank its own FileStore, as separate processes would have.
    auto world = CommWorld::Create(layout, rank, options);
    ASSERT_TRUE(world.ok()) << world.status();
    auto dp = (*world)->Get(kDpRing);
    ASSERT_TRUE(dp.ok()) << dp.status();
    Tensor x = Filled(10, [&](int64_t i) { return rank * 10.0f + i; });
    ASSERT_TRUE((*dp)->AllReduce({&x}, ReduceOp::kSum).ok());
    for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(x.data<float>()[i], 30 + 3 * i);
  });
}

// --- Faults: errors name the peer, within the timeout ------------------------

TEST(FaultTest, RecvFromSilentPeerTimesOutNamingIt) {
  Group comms = MakeGroup({5, 7}, seconds(1));
  ASSERT_EQ(comms.size(), 2u);
  Latch recv_done(1);
  RunRanks(2, [&](int r) {
    if (r == 1) {  // never sends
      recv_done.Wait();
      // Rank 5's timeout closed the group, and rank 7 hears of it.
      Status s = comms[1]->Send(Filled(4, [](int64_t) { return 0; }), 0);
      EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
      EXPECT_NE(s.message().find("send on group g[5,7]"), std::string::npos)
          << s;
      EXPECT_NE(s.message().find("rank 5"), std::string::npos) << s;
      return;
    }
    Tensor t(TensorMeta{proto::FP32, {16}});
    auto start = Clock::now();
    Status s = comms[0]->Recv(&t, 1);
    const double took = SecondsSince(start);
    recv_done.CountDown();
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
    EXPECT_NE(
        s.message().find(
            "recv on group g[5,7]: timed out after 1 s waiting for rank 7"),
        std::string::npos)
        << s;
    EXPECT_GE(took, 0.9);
    EXPECT_LT(took, 3.0);
    // Broken from now on, at once.
    start = Clock::now();
    s = comms[0]->Recv(&t, 1);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
    EXPECT_NE(s.message().find("unusable after an earlier error: recv on group "
                               "g[5,7]: timed out"),
              std::string::npos)
        << s;
    EXPECT_LT(SecondsSince(start), 0.1);
  });
}

TEST(FaultTest, PeerThatExitsFailsAllReduceNamingIt) {
  // Timeout 10 s: the survivors must notice long before.
  Group comms = MakeGroup({10, 11, 12, 13}, seconds(10));
  ASSERT_EQ(comms.size(), 4u);
  RunRanks(4, [&](int r) {
    if (r == 3) {
      comms[3].reset();  // exits: closes its connections
      return;
    }
    Tensor x = Filled(100000, [](int64_t i) { return 1; });
    auto start = Clock::now();
    Status s = comms[r]->AllReduce({&x}, ReduceOp::kSum);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
    EXPECT_NE(s.message().find("allreduce on group g[10,11,12,13]: lost the "
                               "connection to rank 13"),
              std::string::npos)
        << "rank " << r << ": " << s;
    EXPECT_LT(SecondsSince(start), 5.0);
  });
}

TEST(FaultTest, SetupTimesOutNamingTheMissingMember) {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  const std::vector<int> members = {0, 1, 2};
  RunRanks(2, [&](int r) {  // rank 2 never comes
    auto device = CreateGlooTcpDevice();
    ASSERT_TRUE(device.ok()) << device.status();
    auto start = Clock::now();
    auto comm = GlooCommunicator::Create("dp[0,1,2]", members, r, store.get(),
                                         "job/dp[0,1,2]", *device,
                                         CommOptions{seconds(1)});
    EXPECT_EQ(comm.status().code(), StatusCode::kDeadlineExceeded)
        << comm.status();
    EXPECT_NE(comm.status().message().find(
                  "setup on group dp[0,1,2]: timed out after 1 s waiting for "
                  "rank 2 to join"),
              std::string::npos)
        << comm.status();
    EXPECT_LT(SecondsSince(start), 3.0);
  });
}

TEST(FaultTest, MemberLeavingRightAfterSetupDoesNotFailTheOthers) {
  // Setup returns only once every member is connected, so a member that
  // leaves at once cannot break a slower member's setup.
  for (int iter = 0; iter < 30; ++iter) {
    auto store = std::make_shared<gloo::rendezvous::HashStore>();
    const std::vector<int> members = {0, 1, 2};
    RunRanks(3, [&](int r) {
      auto device = CreateGlooTcpDevice();
      ASSERT_TRUE(device.ok()) << device.status();
      auto comm =
          GlooCommunicator::Create("g[0,1,2]", members, r, store.get(), "job",
                                   *device, CommOptions{seconds(5)});
      EXPECT_TRUE(comm.ok()) << "iteration " << iter << ": " << comm.status();
    });
  }
}

TEST(FaultTest, AWorldReusingAJobNameIsRefused) {
  // Stores never overwrite a key, so a second world under the same job in
  // one process is refused rather than wired to the first one's sockets.
  const ParallelLayout layout{/*dp=*/2, 1, 1};
  CommWorldOptions options;
  options.job = "comm-world-reused";
  options.timeout = seconds(5);
  for (int round = 0; round < 2; ++round) {
    RunRanks(2, [&](int rank) {
      auto world = CommWorld::Create(layout, rank, options);
      if (round == 0) {
        EXPECT_TRUE(world.ok()) << world.status();
        return;
      }
      EXPECT_EQ(world.status().code(), StatusCode::kAlreadyExists)
          << world.status();
      EXPECT_NE(world.status().message().find(
                    "already holds keys under 'comm-world-reused/dp[0,1]'"),
                std::string::npos)
          << world.status();
    });
  }
}

TEST(FaultTest, SizeMismatchTimesOutInsteadOfOverrunning) {
  Group comms = MakeGroup({0, 1}, milliseconds(500));
  ASSERT_EQ(comms.size(), 2u);
  RunRanks(2, [&](int r) {
    Status s = r == 0 ? comms[0]->Send(Filled(10, [](int64_t) { return 1; }), 1)
                      : [&] {
                          Tensor t(TensorMeta{proto::FP32, {20}});
                          return comms[1]->Recv(&t, 0);
                        }();
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find(r == 0 ? "rank 1" : "rank 0"), std::string::npos)
        << s;
  });
}


}  // namespace
}  // namespace loom
