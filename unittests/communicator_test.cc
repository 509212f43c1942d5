// Gloo communicators: collectives and point-to-point transfers, one thread
// per rank in one process, an in-memory store, inputs whose results have
// closed forms (as in Gloo's base_test). Every multi-rank test is bounded:
// ranks still running after the limit abort the binary instead of hanging it.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "executor/comm/comm_world.h"
#include "executor/comm/gloo_communicator.h"
#include "unittests/comm_test_util.h"

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

TEST(AllReduceTest, LowPrecisionSumsInFloatAndRoundsOnce) {
  // bf16 and fp16 travel in 16 bits; each member's part is summed in float
  // in group-rank order and rounded once, so the result is exactly that,
  // on every rank. Rounding after each addition would differ on these
  // inputs of many magnitudes.
  constexpr int kRanks = 4;
  constexpr int64_t kRows = 256, kCols = 3;  // rows split in 4 for reduce-scatter
  constexpr int64_t kN = kRows * kCols;
  Group comms = MakeGroup(Iota(kRanks));
  ASSERT_EQ(comms.size(), static_cast<size_t>(kRanks));
  for (DataType dtype : {proto::BF16, proto::FP16}) {
    SCOPED_TRACE(DataTypeName(dtype));
    auto input = [&](int r) {
      std::vector<float> v(kN);
      for (int64_t i = 0; i < kN; ++i) v[i] = RoughInput(r, 0, i) / 64;
      return MakeTensor(dtype, {kRows, kCols}, v);
    };
    std::vector<float> sum(kN, 0.0f), rounded_each_step(kN, 0.0f);
    for (int r = 0; r < kRanks; ++r) {
      const std::vector<float> v = input(r).ToFloatVector();
      for (int64_t i = 0; i < kN; ++i) {
        sum[i] += v[i];
        rounded_each_step[i] =
            MakeTensor(dtype, {1}, {rounded_each_step[i] + v[i]}).ToFloatVector()[0];
      }
    }
    const Tensor want = MakeTensor(dtype, {kRows, kCols}, sum);
    ASSERT_NE(want.ToFloatVector(), rounded_each_step) << "the inputs do not tell the two apart";
    std::vector<Tensor> reduced(kRanks), scattered(kRanks);
    RunRanks(kRanks, [&](int r) {
      reduced[r] = input(r);
      ASSERT_TRUE(comms[r]->AllReduce({&reduced[r]}, ReduceOp::kSum).ok());
      ASSERT_TRUE(comms[r]->ReduceScatter(input(r), &scattered[r], ReduceOp::kSum).ok());
    });
    const int64_t part = kN / kRanks;
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_EQ(reduced[r].dtype(), dtype);
      EXPECT_EQ(std::memcmp(reduced[r].raw_data(), want.raw_data(), want.bytes()), 0) << r;
      ASSERT_EQ(scattered[r].numel(), part);
      EXPECT_EQ(std::memcmp(scattered[r].raw_data(),
                            static_cast<const uint8_t*>(want.raw_data()) + r * part * 2,
                            part * 2),
                0)
          << r;
    }
  }
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

}  // namespace
}  // namespace loom
