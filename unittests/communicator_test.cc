// Gloo communicators and CommWorld: one thread per rank in one process, an
// in-memory store, inputs whose results have closed forms (as in Gloo's
// base_test). Every multi-rank test is bounded: ranks still running after
// the limit abort the binary instead of hanging it.
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gloo/rendezvous/hash_store.h>
#include <gtest/gtest.h>

#include "executor/comm/comm_world.h"
#include "executor/comm/gloo_communicator.h"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Runs fn(r) for r in 0..n-1, one thread each, and joins them. Ranks still
// running after `limit` abort the binary: a hang is a failure, loudly.
void RunRanks(int n, const std::function<void(int)>& fn,
              seconds limit = seconds(20)) {
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      fn(r);
      std::lock_guard<std::mutex> lock(mu);
      ++done;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, limit, [&] { return done == n; })) {
      std::fprintf(stderr, "%d of %d ranks still running after %lld s\n",
                   n - done, n, static_cast<long long>(limit.count()));
      std::abort();
    }
  }
  for (auto& t : threads) t.join();
}

// A one-shot latch for ranks that must wait for each other in a test.
class Latch {
 public:
  explicit Latch(int count) : count_(count) {}
  void CountDown() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--count_ <= 0) cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return count_ <= 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_;
};

using Group = std::vector<std::unique_ptr<GlooCommunicator>>;

// Connects the group `members` (global ranks) through a fresh HashStore,
// one thread per member.
Group MakeGroup(const std::vector<int>& members,
                milliseconds timeout = seconds(10)) {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  const int n = static_cast<int>(members.size());
  const std::string name = GroupName("g", members);
  Group comms(n);
  RunRanks(n, [&](int r) {
    auto device = CreateGlooTcpDevice();
    ASSERT_TRUE(device.ok()) << device.status();
    auto comm =
        GlooCommunicator::Create(name, members, members[r], store.get(),
                                 "test/" + name, *device, CommOptions{timeout});
    ASSERT_TRUE(comm.ok()) << comm.status();
    comms[r] = std::move(comm).value();
  });
  for (const auto& c : comms) EXPECT_NE(c, nullptr);
  return comms;
}

std::vector<int> Iota(int n, int first = 0) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = first + i;
  return v;
}

Tensor Filled(int64_t n, const std::function<float(int64_t)>& f) {
  Tensor t(TensorMeta{proto::FP32, {n}});
  float* p = t.data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = f(i);
  return t;
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.bytes() == b.bytes() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.bytes()) == 0;
}

// Integer-valued inputs: sums of four stay exact, so results have closed
// forms. Rank r's tensor t, element i.
float IntInput(int r, int t, int64_t i) {
  return static_cast<float>((i * 7 + t * 13) % 1001 + r);
}

// Inputs spread over many magnitudes and both signs, so that the order of
// the additions shows in the last bits.
float RoughInput(int r, int t, int64_t i) {
  uint32_t h = static_cast<uint32_t>(i * 2654435761u) ^
               static_cast<uint32_t>((r * 31 + t + 1) * 40503u);
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  float mantissa = 1.0f + static_cast<float>(h & 0x7fffff) / 8388608.0f;
  float value = std::ldexp(mantissa, static_cast<int>((h >> 23) % 24) - 12);
  return (h >> 31) ? -value : value;
}

constexpr int kBucket[] = {5, 1023, 1 << 20};  // 5 and 1023 don't split in 4

// --- AllReduce ----------------------------------------------------------

TEST(AllReduceTest, BucketSumAvgMaxHaveClosedForms) {
  Group comms = MakeGroup(Iota(4));
  ASSERT_EQ(comms.size(), 4u);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    SCOPED_TRACE(ReduceOpName(op));
    RunRanks(4, [&](int r) {
      std::vector<Tensor> bucket;
      for (int t = 0; t < 3; ++t) {
        bucket.push_back(
            Filled(kBucket[t], [&](int64_t i) { return IntInput(r, t, i); }));
      }
      std::vector<Tensor*> ptrs = {&bucket[0], &bucket[1], &bucket[2]};
      Status s = comms[r]->AllReduce(ptrs, op);
      ASSERT_TRUE(s.ok()) << s;
      for (int t = 0; t < 3; ++t) {
        const float* got = bucket[t].data<float>();
        int64_t wrong = 0;
        for (int64_t i = 0; i < kBucket[t]; ++i) {
          const float base = IntInput(0, t, i);
          // Ranks add 0, 1, 2, 3 to the base.
          const float want = op == ReduceOp::kSum   ? 4 * base + 6
                             : op == ReduceOp::kAvg ? base + 1.5f
                                                    : base + 3;
          if (got[i] != want && wrong++ < 3) {
            ADD_FAILURE() << "rank " << r << " tensor " << t << "[" << i
                          << "] = " << got[i] << ", want " << want;
          }
        }
        EXPECT_EQ(wrong, 0) << "rank " << r << " tensor " << t;
      }
    });
  }
}

TEST(AllReduceTest, BitIdenticalOnEveryRankAcrossRunsAndBucketings) {
  constexpr int kRanks = 4;
  Group comms = MakeGroup(Iota(kRanks));
  ASSERT_EQ(comms.size(), 4u);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    SCOPED_TRACE(ReduceOpName(op));
    // The documented order: (((x0 + x1) + x2) + x3), then / 4 for avg.
    std::vector<Tensor> want(3), reversed(3);
    for (int t = 0; t < 3; ++t) {
      want[t] = Filled(kBucket[t], [&](int64_t i) {
        float acc = RoughInput(0, t, i);
        for (int r = 1; r < kRanks; ++r) acc = acc + RoughInput(r, t, i);
        return op == ReduceOp::kAvg ? acc / kRanks : acc;
      });
      reversed[t] = Filled(kBucket[t], [&](int64_t i) {
        float acc = RoughInput(kRanks - 1, t, i);
        for (int r = kRanks - 2; r >= 0; --r) acc = acc + RoughInput(r, t, i);
        return op == ReduceOp::kAvg ? acc / kRanks : acc;
      });
    }
    // The inputs are rough enough for the order to matter, so matching
    // `want` bit for bit means something.
    EXPECT_FALSE(SameBits(want[2], reversed[2]));

    // results[way][rank][tensor]
    constexpr int kWays = 4;
    std::vector<std::vector<std::vector<Tensor>>> results(
        kWays, std::vector<std::vector<Tensor>>(kRanks));
    RunRanks(kRanks, [&](int r) {
      auto inputs = [&] {
        std::vector<Tensor> b;
        for (int t = 0; t < 3; ++t) {
          b.push_back(Filled(kBucket[t],
                             [&](int64_t i) { return RoughInput(r, t, i); }));
        }
        return b;
      };
      // Ways 0 and 1: the same packed bucket, twice.
      for (int way = 0; way < 2; ++way) {
        std::vector<Tensor> b = inputs();
        Status s = comms[r]->AllReduce({&b[0], &b[1], &b[2]}, op);
        ASSERT_TRUE(s.ok()) << s;
        results[way][r] = b;
      }
      // Way 2: views of one flat buffer, reduced in place.
      {
        std::vector<Tensor> b = inputs();
        Tensor flat(
            TensorMeta{proto::FP32, {kBucket[0] + kBucket[1] + kBucket[2]}});
        std::vector<Tensor> views;
        int64_t at = 0;
        for (int t = 0; t < 3; ++t) {
          views.push_back(flat.View(at, {kBucket[t]}));
          std::memcpy(views[t].raw_data(), b[t].raw_data(), b[t].bytes());
          at += kBucket[t];
        }
        Status s = comms[r]->AllReduce({&views[0], &views[1], &views[2]}, op);
        ASSERT_TRUE(s.ok()) << s;
        results[2][r] = views;
      }
      // Way 3: each tensor on its own.
      {
        std::vector<Tensor> b = inputs();
        for (int t = 0; t < 3; ++t) {
          Status s = comms[r]->AllReduce({&b[t]}, op);
          ASSERT_TRUE(s.ok()) << s;
        }
        results[3][r] = b;
      }
    });
    for (int way = 0; way < kWays; ++way) {
      for (int r = 0; r < kRanks; ++r) {
        ASSERT_EQ(results[way][r].size(), 3u) << "way " << way << " rank " << r;
        for (int t = 0; t < 3; ++t) {
          EXPECT_TRUE(SameBits(results[way][r][t], want[t]))
              << "way " << way << " rank " << r << " tensor " << t;
        }
      }
    }
  }
}

TEST(AllReduceTest, FewerElementsThanRanksAndFp64) {
  Group comms = MakeGroup(Iota(4));
  ASSERT_EQ(comms.size(), 4u);
  RunRanks(4, [&](int r) {
    // 3 elements over 4 ranks: rank 3 owns an empty chunk.
    Tensor small = Filled(3, [&](int64_t i) { return r * 10.0f + i; });
    Tensor empty(TensorMeta{proto::FP32, {0}});
    ASSERT_TRUE(comms[r]->AllReduce({&small, &empty}, ReduceOp::kMax).ok());
    EXPECT_EQ(small.ToFloatVector(), (std::vector<float>{30, 31, 32}));

    Tensor d(TensorMeta{proto::FP64, {7}});
    for (int i = 0; i < 7; ++i) d.data<double>()[i] = r + 0.25 * i;
    ASSERT_TRUE(comms[r]->AllReduce({&d}, ReduceOp::kSum).ok());
    for (int i = 0; i < 7; ++i) EXPECT_EQ(d.data<double>()[i], 6 + i);
  });
}

TEST(AllReduceTest, BadBucketsAreRejectedWithoutBreakingTheGroup) {
  Group comms = MakeGroup(Iota(2));
  ASSERT_EQ(comms.size(), 2u);
  RunRanks(2, [&](int r) {
    Tensor f = Filled(4, [](int64_t) { return 1.0f; });
    Tensor d(TensorMeta{proto::FP64, {4}});
    Tensor i(TensorMeta{proto::INT64, {4}});
    Tensor unallocated;
    Status s = comms[r]->AllReduce({&f, &d}, ReduceOp::kSum);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("allreduce on group g[0,1]: tensor 1"),
              std::string::npos)
        << s;
    EXPECT_EQ(comms[r]->AllReduce({&i}, ReduceOp::kSum).code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(comms[r]->AllReduce({&unallocated}, ReduceOp::kSum).code(),
              StatusCode::kInvalidArgument);
    // Still usable.
    ASSERT_TRUE(comms[r]->AllReduce({&f}, ReduceOp::kSum).ok());
    EXPECT_EQ(f.ToFloatVector(), (std::vector<float>{2, 2, 2, 2}));
  });
}

// --- AllGather, ReduceScatter, Broadcast ---------------------------------

TEST(AllGatherReduceScatterTest, RoundTrip) {
  constexpr int kRanks = 4;
  Group comms = MakeGroup(Iota(kRanks));
  ASSERT_EQ(comms.size(), 4u);
  RunRanks(kRanks, [&](int r) {
    auto value = [](int rank, int64_t j) { return rank * 100.0f + j; };
    Tensor in(TensorMeta{proto::FP32, {3, 5}});
    for (int64_t j = 0; j < 15; ++j) in.data<float>()[j] = value(r, j);

    Tensor gathered;  // no storage: allocated
    ASSERT_TRUE(comms[r]->AllGather(in, &gathered).ok());
    ASSERT_EQ(gathered.shape(), (Shape{12, 5}));
    for (int q = 0; q < kRanks; ++q) {
      for (int64_t j = 0; j < 15; ++j) {
        ASSERT_EQ(gathered.data<float>()[q * 15 + j], value(q, j));
      }
    }
    // Averaging four equal copies gives each rank its own part back.
    Tensor back(TensorMeta{proto::FP32, {3, 5}});
    ASSERT_TRUE(comms[r]->ReduceScatter(gathered, &back, ReduceOp::kAvg).ok());
    EXPECT_TRUE(SameBits(back, in));

    // Distinct inputs: rank r gets sum_q in_q[part r].
    Tensor distinct(TensorMeta{proto::FP32, {8, 2}});
    for (int64_t j = 0; j < 16; ++j)
      distinct.data<float>()[j] = r * 1000.0f + j;
    Tensor part;
    ASSERT_TRUE(comms[r]->ReduceScatter(distinct, &part, ReduceOp::kSum).ok());
    ASSERT_EQ(part.shape(), (Shape{2, 2}));
    for (int64_t j = 0; j < 4; ++j) {
      EXPECT_EQ(part.data<float>()[j], 6000.0f + 4 * (r * 4 + j));
    }

    // In place: the input is this rank's part of the output.
    Tensor flat(TensorMeta{proto::FP32, {8}});
    Tensor mine = flat.View(r * 2, {2});
    mine.data<float>()[0] = r;
    mine.data<float>()[1] = -r;
    ASSERT_TRUE(comms[r]->AllGather(mine, &flat).ok());
    EXPECT_EQ(flat.ToFloatVector(),
              (std::vector<float>{0, 0, 1, -1, 2, -2, 3, -3}));

    // Shapes that cannot work.
    Tensor wrong(TensorMeta{proto::FP32, {3, 5}});
    Status s = comms[r]->AllGather(in, &wrong);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("expected fp32[12, 5]"), std::string::npos) << s;
    Tensor odd(TensorMeta{proto::FP32, {6, 1}});
    s = comms[r]->ReduceScatter(odd, &part, ReduceOp::kSum);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  });
}

TEST(BroadcastTest, FromNonZeroRoot) {
  Group comms = MakeGroup(Iota(4));
  ASSERT_EQ(comms.size(), 4u);
  RunRanks(4, [&](int r) {
    Tensor t = Filled(1000, [&](int64_t i) { return r == 2 ? i * 0.5f : -1; });
    ASSERT_TRUE(comms[r]->Broadcast(&t, 2).ok());
    for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(t.data<float>()[i], i * 0.5f);
    // Any dtype: bytes travel as they are.
    Tensor ids(TensorMeta{proto::INT64, {3}});
    for (int i = 0; i < 3; ++i)
      ids.data<int64_t>()[i] = r == 1 ? (1LL << 40) + i : 0;
    ASSERT_TRUE(comms[r]->Broadcast(&ids, 1).ok());
    EXPECT_EQ(
        ids.ToInt64Vector(),
        (std::vector<int64_t>{1LL << 40, (1LL << 40) + 1, (1LL << 40) + 2}));
    EXPECT_EQ(comms[r]->Broadcast(&t, 4).code(), StatusCode::kInvalidArgument);
  });
}

// --- Send / Recv -----------------------------------------------------------

TEST(SendRecvTest, MessagesArriveInOrderBothWays) {
  // Global ranks 3 and 6: group ranks 0 and 1.
  Group comms = MakeGroup({3, 6});
  ASSERT_EQ(comms.size(), 2u);
  constexpr int kMessages = 20;
  RunRanks(2, [&](int r) {
    const int peer = 1 - r;
    // Rank 0 sends first, then rank 1 answers. Same-size messages, so only
    // the order tells them apart; every fifth is longer.
    for (int pass = 0; pass < 2; ++pass) {
      const bool sending = (pass == 0) == (r == 0);
      for (int k = 0; k < kMessages; ++k) {
        const int64_t n = k % 5 == 4 ? 4096 : 64;
        if (sending) {
          Tensor t = Filled(n, [&](int64_t i) { return k * 1000.0f + i; });
          Status s = comms[r]->Send(t, peer);
          ASSERT_TRUE(s.ok()) << s;
        } else {
          Tensor t(TensorMeta{proto::FP32, {n}});
          Status s = comms[r]->Recv(&t, peer);
          ASSERT_TRUE(s.ok()) << s;
          ASSERT_EQ(t.data<float>()[0], k * 1000.0f) << "message " << k;
          ASSERT_EQ(t.data<float>()[n - 1], k * 1000.0f + n - 1);
        }
      }
    }
    EXPECT_EQ(comms[r]->Send(Tensor(TensorMeta{proto::FP32, {1}}), r).code(),
              StatusCode::kInvalidArgument);
  });
}

TEST(SendRecvTest, ConcurrentTrafficBothDirectionsAndCollectives) {
  Group comms = MakeGroup({0, 1});
  ASSERT_EQ(comms.size(), 2u);
  constexpr int kMessages = 200;
  RunRanks(2, [&](int r) {
    const int peer = 1 - r;
    std::thread sender([&] {
      for (int k = 0; k < kMessages; ++k) {
        Tensor t =
            Filled(1000, [&](int64_t i) { return r * 1e6f + k * 1000 + i; });
        Status s = comms[r]->Send(t, peer);
        ASSERT_TRUE(s.ok()) << s;
      }
    });
    std::thread receiver([&] {
      for (int k = 0; k < kMessages; ++k) {
        Tensor t(TensorMeta{proto::FP32, {1000}});
        Status s = comms[r]->Recv(&t, peer);
        ASSERT_TRUE(s.ok()) << s;
        ASSERT_EQ(t.data<float>()[0], peer * 1e6f + k * 1000)
            << "message " << k;
        ASSERT_EQ(t.data<float>()[999], peer * 1e6f + k * 1000 + 999);
      }
    });
    // Collectives on the same communicator meanwhile.
    for (int k = 0; k < 20; ++k) {
      Tensor x = Filled(5000, [&](int64_t i) { return r + k + i % 7; });
      Status s = comms[r]->AllReduce({&x}, ReduceOp::kSum);
      ASSERT_TRUE(s.ok()) << s;
      ASSERT_EQ(x.data<float>()[4999], 1 + 2 * (k + 4999 % 7));
    }
    sender.join();
    receiver.join();
  });
}

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
}

TEST(CommWorldTest, FileStoreInATempDir) {
  std::string dir = ::testing::TempDir() + "/loom_comm_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
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
