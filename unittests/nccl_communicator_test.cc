// The NCCL communicator (executor/comm/nccl_communicator.h). What runs
// without a GPU: asking for NCCL fails in one clear line, arguments are
// checked, the algorithm is pinned. With two or more devices (one rank
// thread per device): every operation matches Gloo's result within 1e-6
// (the summation order differs), is bit-identical on every member and on a
// rerun, and a member that is missing gives a named error within the
// timeout. Without devices those tests skip, saying so.
#include <stdlib.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "executor/comm/comm_world.h"
#include "unittests/comm_test_util.h"

#ifdef LOOM_WITH_CUDA
#include <gloo/rendezvous/hash_store.h>

#include "executor/comm/nccl_communicator.h"
#include "executor/cuda/cuda_device.h"
#include "executor/cuda/cuda_probe.h"
#endif

namespace loom {
namespace {

using std::chrono::seconds;
using testing::RunRanks;
using testing::SameBits;

#ifndef LOOM_WITH_CUDA
TEST(NcclCommunicatorTest, NotBuiltIsUnimplemented) {
  CommWorldOptions options;
  options.backend = CommBackend::kNccl;
  auto world = CommWorld::Create(ParallelLayout{1, 1, 1}, 0, options);
  ASSERT_FALSE(world.ok());
  EXPECT_EQ(world.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(world.status().message().find("this build has no NCCL"),
            std::string::npos)
      << world.status();
  GTEST_SKIP() << "built without the CUDA backend: only the refusal is tested";
}
#else

using testing::Iota;

int DeviceCount() { return ProbeCuda().devices; }

std::string NoDevices(int need) {
  const CudaProbe probe = ProbeCuda();
  return probe.devices == 0
             ? StrCat("no CUDA device (", probe.why_none, "): NCCL compiled "
                      "and linked but did not run")
             : StrCat("needs ", need, " CUDA devices, this machine has ",
                      probe.devices);
}

// --- Without a device ------------------------------------------------------

TEST(NcclCommunicatorTest, CommWorldWithoutADeviceFailsInOneLine) {
  if (DeviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  CommWorldOptions options;
  options.backend = CommBackend::kNccl;
  options.job = "nccl-no-device";
  options.timeout = seconds(30);
  const auto start = testing::Clock::now();
  // Rank 0 of two, alone: it must fail before it waits for anybody.
  auto world = CommWorld::Create(ParallelLayout{2, 1, 1}, 0, options);
  EXPECT_LT(testing::SecondsSince(start), 5.0);
  ASSERT_FALSE(world.ok());
  EXPECT_EQ(world.status().code(), StatusCode::kUnavailable) << world.status();
  const std::string& msg = world.status().message();
  EXPECT_NE(msg.find("no CUDA device"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 0"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  std::printf("  %s\n", world.status().ToString().c_str());  // for the reader
}

TEST(NcclCommunicatorTest, CreateWithoutADeviceIsUnavailable) {
  if (DeviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  auto comm = NcclCommunicator::Create("dp[0]", {0}, 0, nullptr, "t/dp[0]",
                                       /*cuda_device=*/0, 0, CommOptions{});
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(comm.status().message().find("setup on group dp[0] (NCCL): no CUDA device"),
            std::string::npos)
      << comm.status();
}

TEST(NcclCommunicatorTest, ChecksItsArgumentsFirst) {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  auto not_member = NcclCommunicator::Create("g[0,1]", {0, 1}, 2, store, "t",
                                             0, 0, CommOptions{});
  EXPECT_EQ(not_member.status().code(), StatusCode::kInvalidArgument);
  auto twice = NcclCommunicator::Create("g[0,0]", {0, 0}, 0, store, "t", 0, 0,
                                        CommOptions{});
  EXPECT_EQ(twice.status().code(), StatusCode::kInvalidArgument);
}

TEST(NcclCommunicatorTest, PinsRingAndSimpleUnlessTheUserChose) {
  const char* algo = getenv("NCCL_ALGO");
  const char* proto = getenv("NCCL_PROTO");
  const std::string saved_algo = algo ? algo : "", saved_proto = proto ? proto : "";
  unsetenv("NCCL_ALGO");
  setenv("NCCL_PROTO", "LL", 1);
  PinNcclAlgorithm();
  EXPECT_STREQ(getenv("NCCL_ALGO"), "Ring");
  EXPECT_STREQ(getenv("NCCL_PROTO"), "LL");
  algo ? setenv("NCCL_ALGO", saved_algo.c_str(), 1) : unsetenv("NCCL_ALGO");
  proto ? setenv("NCCL_PROTO", saved_proto.c_str(), 1) : unsetenv("NCCL_PROTO");
}

TEST(NcclCommunicatorTest, FormatsBytesForMessages) {
  EXPECT_EQ(FormatBytes(64), "64 bytes");
  EXPECT_EQ(FormatBytes(1536), "1.5 KB");
  EXPECT_EQ(FormatBytes(1258291), "1.2 MB");
}

// --- With devices: rank r on device r, one thread each ----------------------

// One rank's device, a stream for copies, and its communicator.
struct GpuRank {
  std::unique_ptr<CudaDevice> device;
  std::unique_ptr<Stream> stream;
  std::unique_ptr<NcclCommunicator> comm;

  Tensor Upload(const Tensor& host) {
    Tensor t;
    EXPECT_TRUE(t.Resize(host.meta(), device.get(), stream.get()).ok());
    EXPECT_TRUE(device->CopyFromHost(t.raw_data(), host.raw_data(),
                                     host.bytes(), stream.get()).ok());
    // The communicator does not wait for other streams (see its header).
    EXPECT_TRUE(stream->Synchronize().ok());
    return t;
  }
  Tensor Empty(const TensorMeta& meta) {
    Tensor t;
    EXPECT_TRUE(t.Resize(meta, device.get(), stream.get()).ok());
    return t;
  }
  Tensor Download(const Tensor& t) {
    Tensor host(t.meta());
    EXPECT_TRUE(device->CopyToHost(host.raw_data(), t.raw_data(), t.bytes(),
                                   stream.get()).ok());
    return host;
  }
};

// Joins `members` (group rank r on device r) through a fresh store.
std::vector<GpuRank> MakeGpuGroup(int n, seconds timeout = seconds(30)) {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  const std::vector<int> members = Iota(n);
  const std::string name = GroupName("g", members);
  std::vector<GpuRank> ranks(n);
  RunRanks(n, [&](int r) {
    auto device = CudaDevice::Create(r);
    ASSERT_TRUE(device.ok()) << device.status();
    ranks[r].device = std::move(device).value();
    auto stream = ranks[r].device->CreateStream(StreamOptions{});
    ASSERT_TRUE(stream.ok()) << stream.status();
    ranks[r].stream = std::move(stream).value();
    auto comm = NcclCommunicator::Create(name, members, r, store, "t/" + name,
                                         r, 0, CommOptions{timeout});
    ASSERT_TRUE(comm.ok()) << comm.status();
    ranks[r].comm = std::move(comm).value();
  }, seconds(120));
  return ranks;
}

// Member r's input: not integers, so that the summation order shows.
Tensor Input(int r, int64_t n, int salt) {
  return testing::Filled(n, [&](int64_t i) {
    return static_cast<float>(std::sin(0.37 * i + 1.3 * r + salt) * 3.1);
  });
}

void ExpectNear(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.meta(), want.meta()) << what;
  const std::vector<float> g = got.ToFloatVector(), w = want.ToFloatVector();
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_NEAR(g[i], w[i], 1e-6 * std::max(1.0f, std::fabs(w[i])))
        << what << ", element " << i;
  }
}

int GroupSize() { return std::min(DeviceCount(), 4); }

TEST(NcclCommunicatorTest, AllReduceMatchesGlooAndRepeatsBitForBit) {
  if (DeviceCount() < 2) GTEST_SKIP() << NoDevices(2);
  const int n = GroupSize();
  auto gpus = MakeGpuGroup(n);
  auto gloo = testing::MakeGroup(Iota(n));
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    SCOPED_TRACE(ReduceOpName(op));
    std::vector<Tensor> want(n);
    RunRanks(n, [&](int r) {
      want[r] = Input(r, 1000, 0);
      ASSERT_TRUE(gloo[r]->AllReduce({&want[r]}, op).ok());
    });
    std::vector<std::vector<Tensor>> runs(2, std::vector<Tensor>(n));
    for (int run = 0; run < 2; ++run) {
      RunRanks(n, [&](int r) {
        // A bucket of two: the second tensor is the first's tail.
        Tensor a = gpus[r].Upload(Input(r, 1000, 0));
        Tensor tail = a.View(600, {400});
        Tensor head = a.View(0, {600});
        Status s = gpus[r].comm->AllReduce({&head, &tail}, op);
        ASSERT_TRUE(s.ok()) << s;
        runs[run][r] = gpus[r].Download(a);
      }, seconds(120));
    }
    for (int r = 0; r < n; ++r) {
      ExpectNear(runs[0][r], want[r], StrCat("rank ", r));
      EXPECT_TRUE(SameBits(runs[0][r], runs[0][0])) << "rank " << r;
      EXPECT_TRUE(SameBits(runs[1][r], runs[0][r])) << "rerun, rank " << r;
    }
  }
}

TEST(NcclCommunicatorTest, AllGatherReduceScatterBroadcastMatchGloo) {
  if (DeviceCount() < 2) GTEST_SKIP() << NoDevices(2);
  const int n = GroupSize();
  auto gpus = MakeGpuGroup(n);
  auto gloo = testing::MakeGroup(Iota(n));
  RunRanks(n, [&](int r) {
    Tensor in = Input(r, 4 * n, 1);
    in.Reshape({2 * n, 2});
    // all_gather: exact, nothing is summed.
    Tensor want_gather;
    ASSERT_TRUE(gloo[r]->AllGather(in, &want_gather).ok());
    Tensor dev_in = gpus[r].Upload(in);
    Tensor unsized;
    EXPECT_EQ(gpus[r].comm->AllGather(dev_in, &unsized).code(),
              StatusCode::kFailedPrecondition);
    Tensor gathered = gpus[r].Empty(want_gather.meta());
    ASSERT_TRUE(gpus[r].comm->AllGather(dev_in, &gathered).ok());
    EXPECT_TRUE(SameBits(gpus[r].Download(gathered), want_gather));
    // reduce_scatter
    Tensor want_part;
    ASSERT_TRUE(gloo[r]->ReduceScatter(in, &want_part, ReduceOp::kSum).ok());
    Tensor part = gpus[r].Empty(want_part.meta());
    ASSERT_TRUE(gpus[r].comm->ReduceScatter(dev_in, &part, ReduceOp::kSum).ok());
    ExpectNear(gpus[r].Download(part), want_part, StrCat("rank ", r));
    // broadcast from group rank 1
    Tensor dev_b = gpus[r].Upload(in);
    ASSERT_TRUE(gpus[r].comm->Broadcast(&dev_b, 1).ok());
    EXPECT_TRUE(SameBits(gpus[r].Download(dev_b), Input(1, 4 * n, 1)));
  }, seconds(120));
}

TEST(NcclCommunicatorTest, SendRecvAreFifoPerPair) {
  if (DeviceCount() < 2) GTEST_SKIP() << NoDevices(2);
  auto gpus = MakeGpuGroup(2);
  RunRanks(2, [&](int r) {
    const int peer = 1 - r;
    for (int round = 0; round < 3; ++round) {
      // Rank 0 sends first, rank 1 receives first: no circular wait.
      for (int step = 0; step < 2; ++step) {
        if ((step == 0) == (r == 0)) {
          Tensor t = gpus[r].Upload(Input(r, 257, round));
          Status s = gpus[r].comm->Send(t, peer);
          ASSERT_TRUE(s.ok()) << s;
        } else {
          Tensor t = gpus[r].Empty(TensorMeta{proto::FP32, {257}});
          Status s = gpus[r].comm->Recv(&t, peer);
          ASSERT_TRUE(s.ok()) << s;
          EXPECT_TRUE(SameBits(gpus[r].Download(t), Input(peer, 257, round)));
        }
      }
    }
  }, seconds(120));
}

TEST(NcclCommunicatorTest, AnAbsentMemberGivesANamedErrorWithinTheTimeout) {
  if (DeviceCount() < 2) GTEST_SKIP() << NoDevices(2);
  auto gpus = MakeGpuGroup(2, seconds(2));
  Tensor t = gpus[0].Upload(Input(0, 100, 0));
  const auto start = testing::Clock::now();
  Status s = gpus[0].comm->AllReduce({&t}, ReduceOp::kSum);  // rank 1 never comes
  EXPECT_LT(testing::SecondsSince(start), 10.0);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("g[0,1]: all_reduce"), std::string::npos) << s;
  Status again = gpus[0].comm->Broadcast(&t, 0);
  EXPECT_EQ(again.code(), StatusCode::kUnavailable) << again;
  EXPECT_NE(again.message().find("earlier error"), std::string::npos) << again;
  // A send to a rank that does not receive names it.
  Tensor u = gpus[1].Upload(Input(1, 100, 0));
  s = gpus[1].comm->Send(u, 0);
  EXPECT_NE(s.code(), StatusCode::kOk);
  EXPECT_NE(s.message().find("rank 0"), std::string::npos) << s;
}

TEST(NcclCommunicatorTest, SetupNamesTheMemberThatNeverJoins) {
  if (DeviceCount() < 1) GTEST_SKIP() << NoDevices(1);
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  const CommOptions options{std::chrono::milliseconds(1500)};
  auto first = NcclCommunicator::Create("g[4,9]", {4, 9}, 4, store, "a", 0, 0,
                                        options);
  EXPECT_EQ(first.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(first.status().message().find("waiting for rank 9 to join"),
            std::string::npos)
      << first.status();
  auto second = NcclCommunicator::Create("g[4,9]", {4, 9}, 9, store, "b", 0, 0,
                                         options);
  EXPECT_EQ(second.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(second.status().message().find("waiting for rank 4 to publish"),
            std::string::npos)
      << second.status();
}

TEST(NcclCommunicatorTest, CommWorldBuildsNcclRings) {
  if (DeviceCount() < 2) GTEST_SKIP() << NoDevices(2);
  CommWorldOptions options;
  options.backend = CommBackend::kNccl;
  options.job = "nccl-world";
  RunRanks(2, [&](int rank) {
    CommWorldOptions mine = options;
    mine.cuda_device = rank;
    auto world = CommWorld::Create(ParallelLayout{2, 1, 1}, rank, mine);
    ASSERT_TRUE(world.ok()) << world.status();
    auto dp = (*world)->Get(kDpRing);
    ASSERT_TRUE(dp.ok()) << dp.status();
    EXPECT_EQ((*dp)->name(), "dp[0,1]");
    EXPECT_NE(dynamic_cast<NcclCommunicator*>(*dp), nullptr);
  }, seconds(120));
}
#endif

}  // namespace
}  // namespace loom
