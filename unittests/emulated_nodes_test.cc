// Several nodes on one host: network namespaces as nodes, each holding its
// ranks, joined over a bridge by links shaped slower than each node's own
// loopback (runtime/emulated_network.h with ranks_per_node). Each node runs
// its own `loom launch --nnodes`, inside its namespace, and they meet in a
// redis-server on node 0, as machines of a cluster do. Needs root, iproute2
// and redis-server; skipped loudly without them.
#include <signal.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "runtime/emulated_network.h"
#include "runtime/redis_server.h"
#include "unittests/emulated_network_util.h"
#include "unittests/loom_cli.h"

namespace loom {
namespace {

// A redis-server in namespace `ns`, on `address`; stopped with the object.
class RedisInNamespace {
 public:
  RedisInNamespace(const std::string& ns, const std::string& address)
      : ns_(ns), endpoint_(StrCat(address, ":", FreeLoopbackPort())),
        pid_file_(MakeTempDir("loom_nodes_redis_") + "/pid") {
    const std::string port = endpoint_.substr(endpoint_.rfind(':') + 1);
    started_ = Shell(StrCat("ip netns exec ", ns_, " redis-server --port ", port, " --bind ",
                            address, " --protected-mode no --save '' --appendonly no --daemonize yes --pidfile ",
                            pid_file_, " --loglevel warning"));
    for (int i = 0; i < 100 && !up_; ++i) {
      const CliResult ping =
          Shell(StrCat("ip netns exec ", ns_, " redis-cli -h ", address, " -p ", port, " ping"));
      up_ = ping.out == "PONG\n";
      if (!up_) started_.out += ping.out;
      usleep(50000);
    }
  }
  ~RedisInNamespace() {
    const int pid = std::atoi(ReadWholeFile(pid_file_).c_str());
    if (pid > 0) kill(pid, SIGKILL);
  }
  bool up() const { return up_; }
  const std::string& endpoint() const { return endpoint_; }
  const CliResult& started() const { return started_; }

 private:
  std::string ns_, endpoint_, pid_file_;
  CliResult started_;
  bool up_ = false;
};

// 2 nodes x 2 ranks, a 100 Mbit/s link per node and 2 Gbit/s inside one:
// with dp 2 and mp 2 (ranks mp-fastest, so mp inside a node and dp across
// the two), the two launches train to the losses, parameters and optimizer
// state of one process; node 1's
// ranks bind to node 1's address, which the launch found on its route to
// the store; the link between nodes is the slower; and nothing is left.
TEST(EmulatedNodes, TwoNodesOfTwoRanksTrainAsOneProcess) {
  SKIP_WITHOUT_NETWORK();
  if (!HaveRedisServer()) GTEST_SKIP() << "SKIPPED LOUDLY: redis-server is not installed";
  EmulatedNetworkOptions options;
  options.ranks = 4;
  options.ranks_per_node = 2;
  options.rate = "100mbit";
  options.intra_node_rate = "2gbit";
  options.name_prefix = StrCat("loom-", getpid(), "-nodes");
  std::string prefix;
  {
    auto net = EmulatedNetwork::Create(options);
    ASSERT_TRUE(net.ok()) << net.status();
    const EmulatedNetwork& n = **net;
    prefix = n.prefix();
    ASSERT_EQ(n.nodes(), 2);
    EXPECT_EQ(n.RankNamespace(1), n.RankNamespace(0));
    EXPECT_NE(n.RankNamespace(2), n.RankNamespace(0));
    EXPECT_EQ(n.Address(1), "10.77.0.1");
    EXPECT_EQ(n.Address(2), "10.77.0.2");
    EXPECT_NE(n.Describe().find("node namespaces " + prefix + "-n0..1, 2 ranks each over "
                                "loopback at 2 Gbit/s, each with its own 100 Mbit/s link"),
              std::string::npos)
        << n.Describe();
    RedisInNamespace redis(n.RankNamespace(0), n.Address(0));
    ASSERT_TRUE(redis.up()) << redis.started().out;

    auto launches = [&](const std::string& job, const std::string& command) {
      auto node = [&](int k) {
        return StrCat("ip netns exec ", n.RankNamespace(2 * k), " ", LOOM_BIN,
                      " launch --nnodes 2 --node_rank ", k,
                      " --nproc_per_node 2 --rdzv_backend redis --rdzv_endpoint ",
                      redis.endpoint(), " --job_id ", job, " -- ", LOOM_BIN, " ", command);
      };
      const std::string node1_out = MakeTempDir("loom_nodes_") + "/node1.out";
      CliResult r = Shell("(" + node(1) + " > " + node1_out + " 2>&1; echo node1 exit $? >> " +
                          node1_out + ") & " + node(0) + "; wait");
      r.out += "\n--- node 1:\n" + ReadWholeFile(node1_out);
      return r;
    };

    // The checkpoint's shards are handed over in --save_dir, which both
    // nodes see (one host's /tmp, as a cluster's shared file system).
    const std::string run = "run --preset gpt-tiny --dp 2 --mp 2 --steps 3 --save_dir ";
    const std::string one_dir = MakeTempDir("loom_one_"), two_dir = MakeTempDir("loom_two_");
    const CliResult one = Loom(run + one_dir);
    ASSERT_EQ(one.code, 0) << one.out;
    ASSERT_EQ(LossLines(one.out).size(), 3u) << one.out;
    const CliResult two = launches("train", run + two_dir);
    ASSERT_EQ(two.code, 0) << two.out;
    EXPECT_NE(two.out.find("node1 exit 0"), std::string::npos) << two.out;
    EXPECT_EQ(LossLines(two.out), LossLines(one.out)) << two.out;
    // Parameters and Adam's moments byte for byte.
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      const std::string saved = ReadWholeFile(StrCat(two_dir, "/step-00000003/", file));
      EXPECT_FALSE(saved.empty()) << file << two.out;
      EXPECT_TRUE(saved == ReadWholeFile(StrCat(one_dir, "/step-00000003/", file))) << file;
    }

    // Rank 0 sends to rank 1 inside node 0; the all-reduce of all four
    // crosses the 100 Mbit/s links between nodes (12.5 MB/s of wire).
    const CliResult check = launches("netcheck", "netcheck --bytes 4194304 --repeats 2");
    ASSERT_EQ(check.code, 0) << check.out;
    EXPECT_NE(check.out.find("host 10.77.0.1"), std::string::npos) << check.out;
    const double intra = FieldAfter(check.out, "MB/s ");
    const double inter = FieldAfter(check.out, "bus_MB/s ");
    EXPECT_GT(inter, 2) << check.out;
    EXPECT_LT(inter, 13) << check.out;
    EXPECT_GT(intra, 3 * inter) << check.out;
  }
  EXPECT_EQ(Leftovers(prefix), "");
}

TEST(EmulatedNodes, NodesThatCannotBeMadeAreOneLineErrors) {
  EmulatedNetworkOptions uneven;
  uneven.ranks = 3;
  uneven.ranks_per_node = 2;
  uneven.rate = "100mbit";
  EXPECT_EQ(EmulatedNetwork::Create(uneven).status().message(),
            "emulated network: 3 ranks do not make nodes of 2");
  EmulatedNetworkOptions alone = uneven;
  alone.ranks_per_node = 1;
  alone.intra_node_rate = "1gbit";
  EXPECT_EQ(EmulatedNetwork::Create(alone).status().message(),
            "emulated network: an intra-node rate needs nodes of more than one rank");
  EmulatedNetworkOptions bad_rate = uneven;
  bad_rate.ranks = 4;
  bad_rate.intra_node_rate = "fast";
  EXPECT_EQ(EmulatedNetwork::Create(bad_rate).status().message(),
            "emulated network, intra-node: rate 'fast' is not in tc syntax (e.g. 200mbit or "
            "1gbit)");
}

}  // namespace
}  // namespace loom
