// Several nodes on one host: network namespaces as nodes, each holding its
// ranks, joined over a bridge by links shaped slower than each node's own
// loopback (runtime/emulated_network.h with ranks_per_node). Each node runs
// its own `loom launch --nnodes`, inside its namespace, and they meet in a
// redis-server on node 0, as machines of a cluster do. Needs root, iproute2
// and redis-server; skipped loudly without them.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cost_model/cluster.h"
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

// Two nodes of two ranks: a link of `rate` each, `intra_node_rate` inside
// one; namespaces named after this process and `name`.
EmulatedNetworkOptions TwoNodesOfTwoRanks(const std::string& rate,
                                          const std::string& intra_node_rate,
                                          const std::string& name) {
  EmulatedNetworkOptions options;
  options.ranks = 4;
  options.ranks_per_node = 2;
  options.rate = rate;
  options.intra_node_rate = intra_node_rate;
  options.name_prefix = StrCat("loom-", getpid(), "-", name);
  return options;
}

// 2 nodes x 2 ranks, a 100 Mbit/s link per node and 2 Gbit/s inside one:
// with dp 2 and mp 2 (ranks mp-fastest, so mp inside a node and dp across
// the two), the two launches train to the losses, parameters and optimizer
// state of one process; node 1's
// ranks bind to node 1's address, which the launch found on its route to
// the store; the link between nodes is the slower, and loom profile --comm
// fits both levels into a cluster file; and nothing is left.
TEST(EmulatedNodes, TwoNodesOfTwoRanksTrainAsOneProcess) {
  SKIP_WITHOUT_NETWORK();
  if (!HaveRedisServer()) GTEST_SKIP() << "SKIPPED LOUDLY: redis-server is not installed";
  std::string prefix;
  {
    auto net = EmulatedNetwork::Create(TwoNodesOfTwoRanks("100mbit", "2gbit", "nodes"));
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

    // loom profile --comm fits both levels: node 0's ranks the link inside
    // a node, the first rank of each node the link between them.
    const std::string cluster_file = MakeTempDir("loom_nodes_profile_") + "/cluster.pbtxt";
    const CliResult profile =
        launches("profile", "profile --comm --cluster emulated --comm_rounds 9 "
                            "--comm_max_bytes 1048576 --comm_long_bytes 1048576 "
                            "--interference_seconds 0.2 --cluster_out " + cluster_file);
    ASSERT_EQ(profile.code, 0) << profile.out;
    EXPECT_NE(profile.out.find("2 nodes of 2 ranks (recorded as the cluster's): the link inside "
                               "node 0, then the link between nodes"),
              std::string::npos)
        << profile.out;
    auto cluster = LoadCluster(cluster_file);
    ASSERT_TRUE(cluster.ok()) << cluster.status() << profile.out;
    EXPECT_EQ(cluster->devices_per_node() * cluster->ranks_per_device(), 2);
    ASSERT_TRUE(cluster->intra_node().measured()) << profile.out;
    ASSERT_TRUE(cluster->inter_node().measured()) << profile.out;
    EXPECT_NE(cluster->inter_node().source().find(", 2 ranks, "), std::string::npos)
        << cluster->inter_node().source();
    // 100 Mbit/s between nodes is 12.5 MB/s of wire (the fit is rough:
    // its order of magnitude; with other tests' load, calls the shaper's
    // bucket covers fitted 56 MB/s once); the 2 Gbit/s inside one, several
    // times more.
    EXPECT_GT(cluster->inter_node().bandwidth(), 4e6) << profile.out;
    EXPECT_LT(cluster->inter_node().bandwidth(), 100e6) << profile.out;
    EXPECT_GT(cluster->intra_node().bandwidth(), 3 * cluster->inter_node().bandwidth())
        << profile.out;
    // The layout trained above, simulated on the fitted cluster, against
    // its measured steps (the first, which warms up, left out).
    const CliResult simulated = Loom("simulate --preset gpt-tiny --dp 2 --mp 2 --cluster " +
                                     cluster_file);
    ASSERT_EQ(simulated.code, 0) << simulated.out;
    std::vector<double> measured;
    for (size_t at = two.out.find("time_ms "); at != std::string::npos;
         at = two.out.find("time_ms ", at + 1)) {
      measured.push_back(std::atof(two.out.c_str() + at + 8));
    }
    ASSERT_EQ(measured.size(), 3u) << two.out;
    std::sort(measured.begin(), measured.end());
    EXPECT_GT(FieldAfter(simulated.out, "step time"), 0) << simulated.out;
    std::printf("2 nodes x 2 ranks, gpt-tiny dp 2 mp 2: simulated %.1f ms a step on the fitted "
                "cluster (ops by roofline: no cost table in a test), measured %.1f ms (median "
                "of 3)\n",
                FieldAfter(simulated.out, "step time"), measured[1]);
    std::printf("fitted: inside a node %.1f MB/s, between nodes %.1f MB/s (sustained %.1f)\n",
                cluster->intra_node().bandwidth() / 1e6, cluster->inter_node().bandwidth() / 1e6,
                cluster->inter_node().sustained_bandwidth() / 1e6);
  }
  EXPECT_EQ(Leftovers(prefix), "");
}

// A shell loop that waits (up to 60 s) until `file` holds a line matching
// `pattern`.
std::string AwaitLine(const std::string& file, const std::string& pattern) {
  return StrCat("for i in $(seq 3000); do grep -q '", pattern, "' ", file,
                " 2>/dev/null && break; sleep 0.02; done; ");
}

// Milliseconds since the epoch, in a shell variable `name`.
std::string Stamp(const std::string& name) { return name + "=$(date +%s%N); "; }

// Two nodes of two ranks under --max_restarts 2 train 8 steps with a
// checkpoint every 2, and node 1 fails once step 4's is saved: `fail` is
// shell run then, with $NS1 node 1's namespace. Once node 0's launch says
// it restarts, `recover` runs, and with `replace`, a new launch takes node
// 1's place, as a scheduler would start one on a spare machine. out_ holds
// node 0's output, node 1's, the replacement's, then a line of exit codes
// and times in ms: from the failure to node 0's restart (named_ms), and
// from there to the end (finish_ms); differs_ what of step 8's checkpoint
// differs from a run never interrupted; leftovers_ what the network left.
class LostNode : public ::testing::Test {
 protected:
  void Run(const std::string& fail, const std::string& recover, bool replace) {
    std::string prefix;
    {
      auto net = EmulatedNetwork::Create(TwoNodesOfTwoRanks("1gbit", "4gbit", "lost"));
      ASSERT_TRUE(net.ok()) << net.status();
      const EmulatedNetwork& n = **net;
      prefix = n.prefix();
      RedisInNamespace redis(n.RankNamespace(0), n.Address(0));
      ASSERT_TRUE(redis.up()) << redis.started().out;
      const std::string run =
          " run --preset gpt-tiny --dp 2 --mp 2 --steps 8 --save_every 2 --comm_timeout 8 "
          "--save_dir ";
      const std::string whole = MakeTempDir("loom_whole_"), dir = MakeTempDir("loom_lost_");
      const CliResult one = Loom(run + whole);
      ASSERT_EQ(one.code, 0) << one.out;
      auto node = [&](int k, const std::string& out) {
        return StrCat("ip netns exec ", n.RankNamespace(2 * k), " ", LOOM_BIN,
                      " launch --nnodes 2 --node_rank ", k,
                      " --nproc_per_node 2 --max_restarts 2 --heartbeat_timeout 4 "
                      "--rdzv_backend redis --rdzv_endpoint ", redis.endpoint(),
                      " --job_id lost-node -- ", LOOM_BIN, run, dir, " > ", out, " 2>&1");
      };
      const std::string out0 = dir + ".node0", out1 = dir + ".node1", out2 = dir + ".node1b";
      const CliResult r = Shell(StrCat(
          "NS1=", n.RankNamespace(2), "; ", node(0, out0), " & p0=$!; ", node(1, out1),
          " & p1=$!; ", AwaitLine(out0, "saved .*step-00000004"), Stamp("t0"), fail,
          AwaitLine(out0, "loom launch: restart 1 of 2"), Stamp("t1"), recover,
          replace ? node(1, out2) + " & p1=$!; " : "", "wait $p0; c0=$?; wait $p1; c1=$?; ",
          Stamp("t2"),
          "echo codes $c0 $c1 named_ms $(( (t1 - t0) / 1000000 )) finish_ms "
          "$(( (t2 - t1) / 1000000 ))"));
      out_ = StrCat(ReadWholeFile(out0), "\n--- node 1:\n", ReadWholeFile(out1),
                    "\n--- node 1's replacement:\n", ReadWholeFile(out2), "\n", r.out);
      for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
        const std::string saved = ReadWholeFile(StrCat(dir, "/step-00000008/", file));
        if (saved.empty() || saved != ReadWholeFile(StrCat(whole, "/step-00000008/", file))) {
          differs_ += file;
        }
      }
    }
    leftovers_ = Leftovers(prefix);
  }
  std::string out_, differs_, leftovers_;
};

// Every process of node 1 killed, its launch too: node 0's ranks lose their
// peers and stop, its launch restarts them, and a new launch for node 1
// joins that restart, the job's start 1 (agreed in the store,
// launch_generations.h). Both resume from the newest checkpoint.
TEST_F(LostNode, AKilledNodeIsReplacedAndTheJobEndsAsIfNeverStopped) {
  SKIP_WITHOUT_NETWORK();
  if (!HaveRedisServer()) GTEST_SKIP() << "SKIPPED LOUDLY: redis-server is not installed";
  Run("ip netns pids $NS1 | xargs -r kill -KILL; ", "", /*replace=*/true);
  EXPECT_NE(out_.find("codes 0 0 "), std::string::npos) << out_;
  EXPECT_NE(out_.find("loom launch: restart 1 of 2, after: rank "), std::string::npos) << out_;
  EXPECT_NE(out_.find("loom launch: joining start 1 of job lost-node (start 0 failed)"),
            std::string::npos)
      << out_;
  EXPECT_NE(out_.find("resumed from "), std::string::npos) << out_;
  EXPECT_NE(out_.find("loom launch: finished after 1 restart(s)"), std::string::npos) << out_;
  EXPECT_EQ(differs_, "") << out_;
  EXPECT_EQ(leftovers_, "");
  std::printf("killed node: %s\n", out_.substr(out_.rfind("codes")).c_str());
}

// Every process of node 1 stopped (SIGSTOP), as a hung machine: node 0's
// ranks wait for it no longer than --comm_timeout, then its launch
// restarts. Node 1, continued, finds its ranks' peers gone and restarts
// into the same start.
TEST_F(LostNode, AHungNodeIsNamedWithinTheTimeoutAndTheJobEndsAsIfNeverStopped) {
  SKIP_WITHOUT_NETWORK();
  if (!HaveRedisServer()) GTEST_SKIP() << "SKIPPED LOUDLY: redis-server is not installed";
  Run("ip netns pids $NS1 | xargs -r kill -STOP; ", "ip netns pids $NS1 | xargs -r kill -CONT; ",
      /*replace=*/false);
  EXPECT_NE(out_.find("codes 0 0 "), std::string::npos) << out_;
  EXPECT_NE(out_.find("loom launch: restart 1 of 2, after: rank "), std::string::npos) << out_;
  EXPECT_NE(out_.find(": timed out after 8 s waiting for rank "), std::string::npos) << out_;
  EXPECT_NE(out_.find("resumed from "), std::string::npos) << out_;
  // Named after the 8 s timeout, not long after.
  EXPECT_GT(FieldAfter(out_, "named_ms "), 7000) << out_;
  EXPECT_LT(FieldAfter(out_, "named_ms "), 30000) << out_;
  EXPECT_EQ(differs_, "") << out_;
  EXPECT_EQ(leftovers_, "");
  std::printf("hung node: %s\n", out_.substr(out_.rfind("codes")).c_str());
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
