// Ranks that meet in a redis-server (Gloo's RedisStore), as launches across
// machines do: a real redis-server (runtime/redis_server.h), started by the
// test on a free port of loopback and stopped after it; skipped loudly where
// it is not installed.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "executor/comm/comm_world.h"
#include "framework/status.h"
#include "runtime/redis_server.h"
#include "unittests/comm_test_util.h"
#include "unittests/loom_cli.h"

namespace loom {
namespace {

using testing::Clock;
using testing::RunRanks;
using testing::SecondsSince;
using std::chrono::seconds;

#define SKIP_WITHOUT_REDIS()                                                                 \
  if (!HaveRedisServer()) {                                                                  \
    GTEST_SKIP() << "SKIPPED LOUDLY: redis-server is not installed (scripts/setup.sh installs " \
                    "it)";                                                                   \
  }

// Two jobs on one redis-server at once: every key is under its job, so
// neither sees the other's, and each all-reduces its own ranks' values.
TEST(RedisRendezvous, TwoJobsShareOneStoreWithoutColliding) {
  SKIP_WITHOUT_REDIS();
  auto redis = RedisServer::Start({});
  ASSERT_TRUE(redis.ok()) << redis.status();
  const ParallelLayout layout{/*dp=*/2, 1, 1};
  RunRanks(4, [&](int thread) {
    const int job = thread / 2, rank = thread % 2;
    CommWorldOptions options;
    options.redis_endpoint = (*redis)->endpoint();
    options.job = "job" + std::to_string(job);
    options.timeout = seconds(10);
    auto world = CommWorld::Create(layout, rank, options);
    ASSERT_TRUE(world.ok()) << world.status();
    auto dp = (*world)->Get(kDpRing);
    ASSERT_TRUE(dp.ok()) << dp.status();
    Tensor x = testing::Filled(4, [&](int64_t i) { return 100.0f * job + rank + i; });
    ASSERT_TRUE((*dp)->AllReduce({&x}, ReduceOp::kSum).ok());
    for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(x.data<float>()[i], 200.0f * job + 1 + 2 * i);
  });
  // The same job again finds its keys taken, and says so.
  RunRanks(1, [&](int) {
    CommWorldOptions options;
    options.redis_endpoint = (*redis)->endpoint();
    options.job = "job0";
    options.timeout = seconds(5);
    auto world = CommWorld::Create(layout, 0, options);
    ASSERT_FALSE(world.ok());
    EXPECT_NE(world.status().message().find("the store already holds keys under 'job0/dp[0,1]'"),
              std::string::npos)
        << world.status();
  });
}

// A member that never joins is named within the timeout, not waited for.
TEST(RedisRendezvous, AMemberThatNeverJoinsIsNamed) {
  SKIP_WITHOUT_REDIS();
  auto redis = RedisServer::Start({});
  ASSERT_TRUE(redis.ok()) << redis.status();
  CommWorldOptions options;
  options.redis_endpoint = (*redis)->endpoint();
  options.job = "lonely";
  options.timeout = seconds(2);
  const auto start = Clock::now();
  auto world = CommWorld::Create(ParallelLayout{2, 1, 1}, 0, options);
  ASSERT_FALSE(world.ok());
  EXPECT_EQ(world.status().code(), StatusCode::kDeadlineExceeded) << world.status();
  EXPECT_NE(world.status().message().find("waiting for rank 1 to join"), std::string::npos)
      << world.status();
  EXPECT_LT(SecondsSince(start), 6.0);
}

// A redis-server that goes away during rendezvous is an error naming the
// failed connection, well before the timeout: never a hang.
TEST(RedisRendezvous, AStoreThatGoesAwayIsAnErrorNotAHang) {
  SKIP_WITHOUT_REDIS();
  auto redis = RedisServer::Start({});
  ASSERT_TRUE(redis.ok()) << redis.status();
  CommWorldOptions options;
  options.redis_endpoint = (*redis)->endpoint();
  options.job = "orphan";
  options.timeout = seconds(30);
  std::thread stopper([&] {
    usleep(500000);
    (*redis)->Stop();
  });
  const auto start = Clock::now();
  auto world = CommWorld::Create(ParallelLayout{2, 1, 1}, 0, options);
  stopper.join();
  ASSERT_FALSE(world.ok());
  EXPECT_LT(SecondsSince(start), 10.0) << world.status();
  EXPECT_EQ(world.status().code(), StatusCode::kUnavailable) << world.status();
  EXPECT_NE(world.status().message().find(
                "setup on group dp[0,1]: the store failed while waiting for rank 1 to join"),
            std::string::npos)
      << world.status();
}

// A peer's entry that is not an address (a corrupt store, or a program
// other than Loom's writing under the job's keys) is an error naming the
// world, never a crash.
TEST(RedisRendezvous, ACorruptEntryIsNamed) {
  SKIP_WITHOUT_REDIS();
  auto redis = RedisServer::Start({});
  ASSERT_TRUE(redis.ok()) << redis.status();
  const CliResult set = Shell(StrCat("redis-cli -p ", (*redis)->port(),
                                     " set 'corrupt/dp[0,1]/1' 'not an address'"));
  ASSERT_EQ(set.out, "OK\n") << set.out;
  CommWorldOptions options;
  options.redis_endpoint = (*redis)->endpoint();
  options.job = "corrupt";
  options.timeout = seconds(5);
  auto world = CommWorld::Create(ParallelLayout{2, 1, 1}, 0, options);
  ASSERT_FALSE(world.ok());
  EXPECT_EQ(world.status().code(), StatusCode::kDataLoss) << world.status();
  EXPECT_NE(world.status().message().find(
                "setup on group dp[0,1]: the store's entry for rank 1 under 'corrupt/dp[0,1]' is "
                "not an address a rank wrote (a corrupt store, or another program's key): "),
            std::string::npos)
      << world.status();
}

TEST(RedisRendezvous, AnUnreachableOrMalformedEndpointIsNamed) {
  const int port = FreeLoopbackPort();  // nobody listens there
  const std::string endpoint = "127.0.0.1:" + std::to_string(port);
  auto none = ConnectRedisStore(endpoint);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(none.status().message().find("cannot reach the redis store at " + endpoint),
            std::string::npos)
      << none.status();
  for (const char* bad : {"localhost", ":6379", "host:0", "host:70000", "host:6379x"}) {
    auto malformed = ConnectRedisStore(bad);
    ASSERT_FALSE(malformed.ok()) << bad;
    EXPECT_EQ(malformed.status().message(),
              std::string("redis store endpoint '") + bad + "' is not HOST:PORT");
  }
}

// Under Slurm, rank 0 starts the store as its peers connect: a connect
// that may wait finds a server started a second after it began; one that
// may not fails at once.
TEST(RedisRendezvous, AStoreStartedLateIsWaitedFor) {
  SKIP_WITHOUT_REDIS();
  RedisServerOptions late;
  late.port = FreeLoopbackPort();
  const std::string endpoint = "127.0.0.1:" + std::to_string(late.port);
  EXPECT_FALSE(ConnectRedisStore(endpoint).ok());
  // Started from this thread, which it dies with (redis_server.h).
  StatusOr<std::shared_ptr<gloo::rendezvous::Store>> waited = Internal("not connected");
  const auto start = Clock::now();
  std::thread connecter([&] { waited = ConnectRedisStore(endpoint, std::chrono::seconds(20)); });
  usleep(1000000);
  auto server = RedisServer::Start(late);
  connecter.join();
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE(waited.ok()) << waited.status();
  EXPECT_GT(SecondsSince(start), 0.9);
  // A second server on its port is named, not taken for the first.
  auto second = RedisServer::Start(late);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message(),
            StrCat("cannot start a redis-server on 127.0.0.1:", late.port, ": the port is taken"));
  // And one that never comes is named with the wait.
  (*server)->Stop();
  auto gone = ConnectRedisStore(endpoint, std::chrono::milliseconds(300));
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("(waited 300 ms)"), std::string::npos) << gone.status();
}

// loom launch over redis trains as over the file store: the same losses.
TEST(RedisRendezvous, LaunchOverRedisTrainsAsOverTheFileStore) {
  SKIP_WITHOUT_REDIS();
  auto redis = RedisServer::Start({});
  ASSERT_TRUE(redis.ok()) << redis.status();
  const std::string run =
      std::string(" -- ") + LOOM_BIN + " run --preset gpt-tiny --dp 2 --mp 2 --steps 3";
  const CliResult file = Loom("launch --nproc 4" + run);
  ASSERT_EQ(file.code, 0) << file.out;
  const CliResult over_redis = Loom("launch --nproc 4 --rdzv_backend redis --rdzv_endpoint " +
                                    (*redis)->endpoint() + " --job_id cli" + run);
  ASSERT_EQ(over_redis.code, 0) << over_redis.out;
  ASSERT_EQ(LossLines(file.out).size(), 3u) << file.out;
  EXPECT_EQ(LossLines(over_redis.out), LossLines(file.out)) << over_redis.out;
  // Bad rendezvous flags are one line each, before any rank starts.
  const CliResult no_endpoint = Loom("launch --nproc 2 --rdzv_backend redis" + run);
  EXPECT_EQ(no_endpoint.code, 1);
  EXPECT_EQ(no_endpoint.out,
            "loom launch: --rdzv_backend redis needs --rdzv_endpoint HOST:PORT\n");
  const CliResult unknown = Loom("launch --nproc 2 --rdzv_backend etcd" + run);
  EXPECT_EQ(unknown.out, "loom launch: --rdzv_backend 'etcd' is not file or redis\n");
}

// Two launches on this host as the two nodes of one job (--nnodes 2), each
// starting its two ranks, meet in one redis-server and train as one launch
// of four: the same losses. Nodes hold consecutive ranks, so node 1's are
// ranks 2 and 3.
TEST(RedisRendezvous, TwoNodesTrainAsOneLaunch) {
  SKIP_WITHOUT_REDIS();
  auto redis = RedisServer::Start({});
  ASSERT_TRUE(redis.ok()) << redis.status();
  const std::string run =
      std::string(" -- ") + LOOM_BIN + " run --preset gpt-tiny --dp 2 --mp 2 --steps 3";
  const CliResult one = Loom("launch --nproc 4" + run);
  ASSERT_EQ(one.code, 0) << one.out;
  auto node = [&](int rank) {
    return StrCat(LOOM_BIN, " launch --nnodes 2 --node_rank ", rank,
                  " --nproc_per_node 2 --rdzv_backend redis --rdzv_endpoint ", (*redis)->endpoint(),
                  " --job_id two-nodes", run);
  };
  const std::string node1_out = ::testing::TempDir() + "/loom_node1." + std::to_string(getpid());
  const CliResult both = Shell("(" + node(1) + " > " + node1_out + " 2>&1; echo node1 $? >> " +
                               node1_out + ") & " + node(0) + "; wait");
  ASSERT_EQ(both.code, 0) << both.out;
  const std::string node1 = ReadWholeFile(node1_out);
  std::remove(node1_out.c_str());
  EXPECT_NE(node1.find("node1 0"), std::string::npos) << node1;
  EXPECT_NE(node1.find("rank 2 "), std::string::npos) << node1;
  EXPECT_NE(node1.find("rank 3 "), std::string::npos) << node1;
  ASSERT_EQ(LossLines(one.out).size(), 3u) << one.out;
  EXPECT_EQ(LossLines(both.out), LossLines(one.out)) << both.out;
  EXPECT_EQ(both.out.find("spans nodes"), std::string::npos) << both.out;
  // mp 4 over nodes of 2: each mp group crosses the link between them,
  // and rank 0 says so.
  const std::string wide = StrCat(
      LOOM_BIN, " launch --nnodes 2 --node_rank 1 --nproc_per_node 2 --rdzv_backend redis "
      "--rdzv_endpoint ", (*redis)->endpoint(), " --job_id wide -- ", LOOM_BIN,
      " run --preset gpt-tiny --mp 4 --steps 1 > /dev/null 2>&1 & ", LOOM_BIN,
      " launch --nnodes 2 --node_rank 0 --nproc_per_node 2 --rdzv_backend redis "
      "--rdzv_endpoint ", (*redis)->endpoint(), " --job_id wide -- ", LOOM_BIN,
      " run --preset gpt-tiny --mp 4 --steps 1; wait");
  const CliResult across = Shell(wide);
  ASSERT_EQ(across.code, 0) << across.out;
  EXPECT_NE(across.out.find("mp group of ranks 0 and 2 spans nodes (2 ranks each): its "
                            "all-reduces cross the link between nodes"),
            std::string::npos)
      << across.out;
}

// Node 1 never starts: node 0's ranks name the first rank of it that they
// waited for, within the timeout.
TEST(RedisRendezvous, ANodeThatNeverJoinsIsNamed) {
  SKIP_WITHOUT_REDIS();
  auto redis = RedisServer::Start({});
  ASSERT_TRUE(redis.ok()) << redis.status();
  const auto start = Clock::now();
  const CliResult alone =
      Loom(StrCat("launch --nnodes 2 --node_rank 0 --nproc_per_node 2 --rdzv_backend redis "
                  "--rdzv_endpoint ",
                  (*redis)->endpoint(), " --job_id lonely-node -- ", LOOM_BIN,
                  " run --preset gpt-tiny --dp 2 --mp 2 --steps 3 --comm_timeout 3"));
  EXPECT_EQ(alone.code, 1) << alone.out;
  EXPECT_NE(alone.out.find("timed out after 3 s waiting for rank 2 to join"), std::string::npos)
      << alone.out;
  EXPECT_LT(SecondsSince(start), 30.0) << alone.out;
}

// SIGTERM to one node's launch stops the whole job: that node's ranks by
// the signal, the other node's when their peers are gone. Both launches end
// within seconds, the signalled one naming the signal, and the other,
// though it may restart, does not: the job was stopped, not lost.
TEST(RedisRendezvous, StoppingOneNodeStopsTheJob) {
  SKIP_WITHOUT_REDIS();
  auto redis = RedisServer::Start({});
  ASSERT_TRUE(redis.ok()) << redis.status();
  const std::string dir = MakeTempDir("loom_two_nodes_");
  auto node = [&](int rank) {
    return StrCat(LOOM_BIN, " launch --nnodes 2 --node_rank ", rank,
                  " --nproc_per_node 2 --max_restarts 2 --rdzv_backend redis --rdzv_endpoint ",
                  (*redis)->endpoint(), " --job_id stopped-job -- ", LOOM_BIN,
                  " run --preset gpt-tiny --dp 2 --mp 2 --steps 1000000 --comm_timeout 31 > ", dir,
                  "/node", rank, ".out 2>&1");
  };
  // Node 1's launch gets SIGTERM once the job has trained a step (node 0
  // prints the losses); then the time until both launches have ended.
  const CliResult r = Shell(
      node(0) + " & p0=$!; " + node(1) + " & p1=$!; for i in $(seq 600); do grep -q 'step 1 loss' " +
      dir + "/node0.out && break; sleep 0.1; done; t0=$(date +%s%N); kill -TERM $p1; wait $p0; "
      "c0=$?; wait $p1; c1=$?; t1=$(date +%s%N); echo codes $c0 $c1 stopped_ms "
      "$(( (t1 - t0) / 1000000 ))");
  EXPECT_GT(FieldAfter(r.out, "stopped_ms "), 0) << r.out;
  EXPECT_LT(FieldAfter(r.out, "stopped_ms "), 15000) << r.out;
  const std::string out0 = ReadWholeFile(dir + "/node0.out");
  const std::string out1 = ReadWholeFile(dir + "/node1.out");
  EXPECT_NE(r.out.find("codes 1 1"), std::string::npos) << r.out << out0 << out1;
  EXPECT_NE(out1.find("loom launch: interrupted by signal 15"), std::string::npos) << out1;
  // Node 0 trained before it lost its peers, then stopped naming a failed rank.
  EXPECT_NE(out0.find("step 1 loss"), std::string::npos) << out0;
  EXPECT_NE(out0.find("loom launch: rank "), std::string::npos) << out0;
  EXPECT_NE(out0.find("; not restarted: node 1's launch was interrupted by signal 15"),
            std::string::npos)
      << out0;
  EXPECT_EQ(out0.find("restart 1 of 2"), std::string::npos) << out0;
  // Nor does a launch that comes later.
  const CliResult again = Shell(node(0));
  EXPECT_EQ(again.code, 1);
  EXPECT_EQ(ReadWholeFile(dir + "/node0.out"),
            "loom launch: job stopped-job was stopped (node 1's launch was interrupted by "
            "signal 15); give a new --job_id to run it again\n");
  // No rank of the job is left ("3[1]" keeps this shell's own command line
  // from matching).
  EXPECT_NE(Shell("pgrep -f 'steps 1000000 --comm_timeout 3[1]'").code, 0);
}

TEST(RedisRendezvous, NodeFlagsThatCannotWorkAreOneLineErrors) {
  const std::string run = std::string(" -- ") + LOOM_BIN + " run --preset gpt-tiny --steps 1";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--nnodes 2 --job_id j",
       "--nnodes 2 needs a store every node reaches: --rdzv_backend redis --rdzv_endpoint "
       "HOST:PORT"},
      {"--nnodes 2 --rdzv_backend redis --rdzv_endpoint 127.0.0.1:1",
       "--nnodes 2 needs --job_id: every node's launch must name the same job"},
      {"--nnodes 2 --node_rank 2", "--node_rank 2 is outside 0..1"},
      {"--nnodes 0", "--nnodes (0) x --nproc (1) must be 1 to 1048576 ranks"},
      {"--nproc 2 --nproc_per_node 2", "--nproc and --nproc_per_node: give one"},
  };
  for (const auto& [flags, error] : cases) {
    const CliResult r = Loom("launch " + flags + run);
    EXPECT_EQ(r.code, 1) << flags;
    EXPECT_EQ(r.out, "loom launch: " + error + "\n") << flags;
  }
}

}  // namespace
}  // namespace loom
