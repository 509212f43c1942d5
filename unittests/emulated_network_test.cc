// The emulated network (runtime/emulated_network.h) and `loom launch
// --net_rate`: the shaping is real and costs no CPU, training computes the
// same numbers over it, and nothing is left behind, whatever ends the
// launch. Building a network needs root and iproute2; without them these
// tests skip, loudly, except the ones about the error itself.
#include "runtime/emulated_network.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "cost_model/cluster.h"
#include "executor/cpu/host_threads.h"
#include "unittests/emulated_network_util.h"
#include "unittests/loom_cli.h"

namespace loom {
namespace {

using Result = CliResult;


// "loom-4242" from launch's progress line.
std::string NetworkPrefix(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("per-rank namespaces (loom-[0-9]+)-r0"))) return "";
  return m[1];
}

// The number after `key` on the first line starting with `line_start`.
double Field(const std::string& out, const std::string& line_start, const std::string& key) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(line_start, 0) != 0) continue;
    const size_t at = line.find(" " + key + " ");
    if (at == std::string::npos) return -1;
    return std::atof(line.c_str() + at + key.size() + 2);
  }
  return -1;
}

TEST(EmulatedNetwork, ParsesRatesAsTcDoes) {
  EXPECT_DOUBLE_EQ(ParseTcRate("200mbit").value(), 2e8);
  EXPECT_DOUBLE_EQ(ParseTcRate("1Gbit").value(), 1e9);
  EXPECT_DOUBLE_EQ(ParseTcRate("1.5gbit").value(), 1.5e9);
  EXPECT_DOUBLE_EQ(ParseTcRate("25mbps").value(), 2e8);  // tc's bps is bytes
  EXPECT_DOUBLE_EQ(ParseTcRate("1000000").value(), 1e6);  // bare: bits
  for (const char* bad : {"", "fast", "200 mbit", "-1mbit", "mbit", "200mbits", "0mbit"}) {
    StatusOr<double> r = ParseTcRate(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(),
              StrCat("rate '", bad, "' is not in tc syntax (e.g. 200mbit or 1gbit)"));
  }
  EXPECT_EQ(DefaultBurstBytes(1e8), 16384);  // the floor
  EXPECT_EQ(DefaultBurstBytes(1e10), 1250000);  // 1 ms
}

TEST(EmulatedNetwork, MissingToolsAreNamedInOneLine) {
  Status s = CheckEmulatedNetworkSupport();
  const char* path = std::getenv("PATH");
  const std::string saved = path ? path : "";
  setenv("PATH", "/nonexistent", 1);
  Status without_tools = CheckEmulatedNetworkSupport();
  setenv("PATH", saved.c_str(), 1);
  ASSERT_FALSE(without_tools.ok());
  const std::string tools = "the 'ip' and 'tc' commands of iproute2 (not in PATH)";
  if (geteuid() == 0) {
    EXPECT_EQ(without_tools.message(), "emulated network: needs " + tools);
  } else {
    EXPECT_EQ(without_tools.message(), StrCat("emulated network: needs root (running as uid ",
                                              geteuid(), ") and ", tools));
  }
  // The same line from the command, and nothing built.
  Result r = Shell(StrCat("PATH=/nonexistent ", LOOM_BIN, " launch --nproc 2 --net_rate 100mbit "
                          "-- /bin/true"));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "loom launch: " + without_tools.message() + "\n");
}

TEST(EmulatedNetwork, NetcheckNeedsALaunchOfTwoRanks) {
  const std::string error =
      "loom netcheck: measures the network between ranks: run it under loom launch with at least "
      "2 ranks, e.g. 'loom launch --nproc 2 --net_rate 200mbit -- loom netcheck'\n";
  Result alone = Loom("netcheck");
  EXPECT_EQ(alone.code, 1);
  EXPECT_EQ(alone.out, error);
  Result one = Loom(StrCat("launch --nproc 1 -- ", LOOM_BIN, " netcheck"));
  EXPECT_EQ(one.code, 1);
  EXPECT_EQ(one.out.rfind(error, 0), 0u) << one.out;
}

// profile --comm under a launch measures the link between the launch's
// ranks the way steps use it and writes the cluster (here over loopback,
// which needs no root: two one-rank nodes of the emulated cluster, so the
// inter-node link is the one measured).
TEST(EmulatedNetwork, ProfileCommUnderLaunchWritesTheMeasuredLink) {
  const std::string out = ::testing::TempDir() + "/launch_comm_cluster.pbtxt";
  std::remove(out.c_str());
  Result r = Loom(StrCat("launch --nproc 2 -- ", LOOM_BIN, " profile --comm --cluster emulated ",
                         "--cluster_out ", out, " --comm_rounds 15 --comm_max_bytes 4194304 "
                         "--interference_seconds 0.3 --comm_idle_ms 2 --comm_core_wait_calls 60"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("parties arriving apart"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wrote " + out), std::string::npos) << r.out;
  auto c = LoadCluster(out);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->inter_node().measured());
  EXPECT_NE(c->inter_node().source().find("between processes on loopback"), std::string::npos)
      << c->inter_node().source();
  // (Unless a loaded host made the few samples unfit, which it says.)
  EXPECT_TRUE(c->shared_host().inter_node().has_after_wait() ||
              r.out.find("no after_wait costs recorded") != std::string::npos)
      << r.out;
  EXPECT_EQ(c->cost_table_device(), "local");
  // The interference between the launched processes, measured over their
  // link and recorded for the simulator.
  EXPECT_NE(r.out.find("interference: matmul on "), std::string::npos) << r.out;
  EXPECT_TRUE(c->shared_host().has_compute_comm_slowdown()) << r.out;
  EXPECT_GE(c->shared_host().compute_comm_slowdown(), 1.0);
  // What calls after 2 ms of compute add over those after 0.1-1 ms (mean
  // 0.55 ms, the point of no extra).
  EXPECT_NE(r.out.find("  after 2.000 ms   extra "), std::string::npos) << r.out;
  ASSERT_EQ(c->inter_node().after_idle_size(), 2) << r.out;
  EXPECT_DOUBLE_EQ(c->inter_node().after_idle(0).idle_seconds(), 0.55e-3);
  EXPECT_EQ(c->inter_node().after_idle(0).extra_seconds(), 0);
  EXPECT_DOUBLE_EQ(c->inter_node().after_idle(1).idle_seconds(), 2e-3);
  EXPECT_GE(c->inter_node().after_idle(1).extra_seconds(), 0);
  EXPECT_NE(c->inter_node().source().find("; after idle: "), std::string::npos)
      << c->inter_node().source();
  // How long the launched ranks' calls wait for cores that compute: each
  // rank pinned to a core of its own, where the host has them.
  if (CoresOfThisProcess().size() < 2) {
    std::printf("SKIPPED the launch's core-wait and shared-cores parts: this process may use "
                "fewer than 2 cores\n");
    EXPECT_NE(r.out.find("core wait: not measured"), std::string::npos) << r.out;
    return;
  }
  EXPECT_NE(r.out.find("core wait: allreduce of 16384 B on 2 pinned ranks"), std::string::npos)
      << r.out;
  EXPECT_NE(c->shared_host().has_core_wait(),
            r.out.find("core wait: not recorded") != std::string::npos)
      << r.out;
  if (c->shared_host().has_core_wait()) {
    EXPECT_NE(c->shared_host().core_wait().source().find("pinned ranks of a launch"),
              std::string::npos);
  }

  // Halves of a launch that cannot split in two groups: one line, naming it.
  Result odd = Loom(StrCat("launch --nproc 3 -- ", LOOM_BIN, " profile --comm_shared_only ",
                           "--cluster emulated --cluster_out ", out));
  EXPECT_NE(odd.code, 0);
  EXPECT_NE(odd.out.find("loom profile: calls on shared cores under loom launch need an even "
                         "number of ranks, 4 or more (two groups calling at once), got 3"),
            std::string::npos) << odd.out;

  // Then the two halves of a launch of 4 on the same cores, both calling:
  // the link's shared_cores costs, the rest of the file kept.
  Result shared = Loom(StrCat("launch --nproc 4 -- ", LOOM_BIN, " profile --comm_shared_only ",
                              "--cluster emulated --cluster_out ", out,
                              " --comm_rounds 11 --comm_max_bytes 1048576"));
  ASSERT_EQ(shared.code, 0) << shared.out;
  EXPECT_NE(shared.out.find("two groups of 2 ranks on the same cores, both calling (a launch's "
                            "halves)"),
            std::string::npos) << shared.out;
  auto again = LoadCluster(out);
  ASSERT_TRUE(again.ok()) << again.status();
  if (shared.out.find("no shared cores (--comm_shared_only") != std::string::npos) {
    std::printf("SKIPPED the rest: the shared-core samples did not determine a fit\n");
    return;
  }
  ASSERT_TRUE(again->shared_host().inter_node().has_shared_cores()) << shared.out;
  EXPECT_GT(again->shared_host().inter_node().shared_cores().bandwidth(), 0);
  EXPECT_EQ(again->inter_node().bandwidth(), c->inter_node().bandwidth());
  EXPECT_EQ(again->shared_host().compute_comm_slowdown(), c->shared_host().compute_comm_slowdown());
}

TEST(EmulatedNetwork, WithoutRootTheErrorIsOneLine) {
  // A real unprivileged process: this one if it is, else root dropped to
  // nobody.
  std::string as_user;
  uid_t uid = geteuid();
  if (uid == 0) {
    if (access("/usr/bin/setpriv", X_OK) != 0) {
      GTEST_SKIP() << "SKIPPED LOUDLY: setpriv (util-linux) is missing, so the test cannot drop "
                      "root to check the error";
    }
    as_user = "/usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups ";
    uid = 65534;
  }
  Result r = Shell(StrCat(as_user, LOOM_BIN, " launch --nproc 2 --net_rate 100mbit -- /bin/true"));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out.rfind(StrCat("loom launch: emulated network: needs root (running as uid ", uid,
                               ")"), 0),
            0u) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  if (WhyNoNetwork().find("iproute2") == std::string::npos) {
    EXPECT_EQ(r.out, StrCat("loom launch: emulated network: needs root (running as uid ", uid,
                            ")\n"));
  }
}

TEST(EmulatedNetwork, BuildsPerRankLinksAndRemovesThem) {
  SKIP_WITHOUT_NETWORK();
  EmulatedNetworkOptions options;
  options.ranks = 3;
  options.rate = "100mbit";
  auto net = EmulatedNetwork::Create(options);
  ASSERT_TRUE(net.ok()) << net.status();
  const std::string prefix = (*net)->prefix();
  EXPECT_EQ(prefix, StrCat("loom-", getpid()));
  EXPECT_EQ((*net)->Address(0), "10.77.0.1");
  EXPECT_EQ((*net)->Address(254), "10.77.0.255");  // a host address in a /16
  EXPECT_EQ((*net)->Address(255), "10.77.1.0");
  const std::string netns = Shell("ip netns list").out;
  for (const char* suffix : {"-br", "-r0", "-r1", "-r2"}) {
    EXPECT_NE(netns.find(prefix + suffix), std::string::npos) << netns;
  }
  // Rank 1: its address on eth0 and a tbf at the rate.
  const std::string r1 = prefix + "-r1";
  EXPECT_NE(Shell("ip -n " + r1 + " -o -4 addr show dev eth0").out.find("inet 10.77.0.2/16"),
            std::string::npos);
  const std::string qdisc = Shell("tc -n " + r1 + " qdisc show dev eth0").out;
  EXPECT_NE(qdisc.find("tbf"), std::string::npos) << qdisc;
  EXPECT_NE(qdisc.find("rate 100Mbit"), std::string::npos) << qdisc;
  // Its other end: a port of the bridge, shaped the same way.
  const std::string br = prefix + "-br";
  EXPECT_NE(Shell("ip -n " + br + " -o link show rank1").out.find("master br0"),
            std::string::npos);
  EXPECT_NE(Shell("tc -n " + br + " qdisc show dev rank1").out.find("rate 100Mbit"),
            std::string::npos);
  EXPECT_EQ(OurLinksHere(), "");
  ASSERT_TRUE((*net)->Destroy().ok());
  EXPECT_EQ(Leftovers(prefix), "");
  EXPECT_TRUE((*net)->Destroy().ok());  // idempotent
}

TEST(EmulatedNetwork, AFailedBuildLeavesNothing) {
  SKIP_WITHOUT_NETWORK();
  // A tc that refuses everything: the build fails after the namespaces and
  // links exist, and must take them down again.
  const std::string dir = testing::TempDir() + "/emulated_network_fake_tc";
  ASSERT_EQ(Shell("mkdir -p " + dir).code, 0);
  std::ofstream(dir + "/tc") << "#!/bin/sh\necho \"fake tc refuses\" >&2\nexit 2\n";
  ASSERT_EQ(Shell("chmod +x " + dir + "/tc").code, 0);
  const std::string saved = std::getenv("PATH");
  setenv("PATH", (dir + ":" + saved).c_str(), 1);
  EmulatedNetworkOptions options;
  options.ranks = 2;
  options.rate = "100mbit";
  auto net = EmulatedNetwork::Create(options);
  setenv("PATH", saved.c_str(), 1);
  ASSERT_FALSE(net.ok());
  const std::string prefix = StrCat("loom-", getpid());
  EXPECT_EQ(net.status().message(),
            StrCat("emulated network: 'tc -n ", prefix, "-br qdisc add dev rank0 root tbf rate "
                   "100000000bit burst 16384b latency 100ms' failed (exit status 2): fake tc "
                   "refuses; removed what was built"));
  EXPECT_EQ(Leftovers(prefix), "");
}

TEST(EmulatedNetwork, TrainingOverItComputesTheSameLosses) {
  SKIP_WITHOUT_NETWORK();
  const std::string run = std::string(LOOM_BIN) + " run --preset gpt-tiny --mp 2 --steps 3";
  Result plain = Loom("launch --nproc 2 -- " + run);
  Result shaped = Loom("launch --nproc 2 --net_rate 200mbit -- " + run);
  ASSERT_EQ(plain.code, 0) << plain.out;
  ASSERT_EQ(shaped.code, 0) << shaped.out;
  ASSERT_EQ(LossLines(plain.out).size(), 3u) << plain.out;
  EXPECT_EQ(LossLines(shaped.out), LossLines(plain.out)) << shaped.out;
  const std::string prefix = NetworkPrefix(shaped.out);
  ASSERT_NE(prefix, "") << shaped.out;
  EXPECT_NE(shaped.out.find("loom launch: emulated network: per-rank namespaces " + prefix +
                            "-r0..1, each with its own 200 Mbit/s link each way"),
            std::string::npos) << shaped.out;
  EXPECT_NE(shaped.out.find("network " + prefix + " removed"), std::string::npos);
  EXPECT_EQ(Leftovers(prefix), "");
}

// `loom profile --comm` under a launch measures the link between the
// ranks: on the emulated cluster, whose nodes hold one rank each, that is
// the inter-node link. Shaped, its calls are fitted only where the bucket
// covers them (the hosts' speed), and the tbf rate is the link's sustained
// one.
TEST(EmulatedNetwork, ProfileCommFitsTheEmulatedLink) {
  SKIP_WITHOUT_NETWORK();
  const std::string out = testing::TempDir() + "/loom_emulated.cluster.pbtxt";
  std::remove(out.c_str());
  Result r = Loom("launch --nproc 2 --net_rate 200mbit -- " + std::string(LOOM_BIN) +
                  " profile --comm --cluster emulated --comm_max_bytes 1048576 "
                  "--comm_rounds 9 --cluster_out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  auto cluster = LoadCluster(out);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(cluster->inter_node().measured()) << r.out;
  EXPECT_NE(cluster->inter_node().source().find("between launched ranks"), std::string::npos);
  // A 25 kB bucket covers the calls of 4 and 16 kB, not those of 64 kB and
  // more, which would have drained it for the calls after them.
  EXPECT_NE(cluster->inter_node().source().find("calls of at most 25000 B on the wire"),
            std::string::npos)
      << cluster->inter_node().source();
  EXPECT_NE(r.out.find("allreduce n=2 16384 B"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("allreduce n=2 65536 B"), std::string::npos) << r.out;
  // The shaper's rate, as its long allreduces ran, and loom launch's
  // bucket for it; each rank's egress shaped on its own.
  EXPECT_NE(r.out.find("its bucket of 25000 B (loom launch's) recorded"), std::string::npos)
      << r.out;
  EXPECT_EQ(cluster->inter_node().burst_bytes(), 25000) << r.out;
  // Below the wire rate by TCP's overhead and the reduction's CPU time, which
  // a sanitizer build multiplies; still well above half of it, where the two
  // directions would share one link.
  EXPECT_GT(cluster->inter_node().sustained_bandwidth(), 17.5e6) << r.out;
  EXPECT_LT(cluster->inter_node().sustained_bandwidth(), 25e6) << r.out;
  // 200 Mbit/s is 25e6 bytes/s of wire; the hosts move what the bucket
  // holds faster (where the times grow with the bytes at all).
  EXPECT_GT(cluster->inter_node().bandwidth(), cluster->inter_node().sustained_bandwidth())
      << r.out;
  EXPECT_FALSE(cluster->inter_node().half_duplex()) << r.out;
}

TEST(EmulatedNetwork, EachRankBindsToItsOwnAddress) {
  SKIP_WITHOUT_NETWORK();
  Result r = Loom("launch --nproc 2 --net_rate 100mbit -- sh -c "
                  "'echo rank $LOOM_RANK host $LOOM_HOST $(ip -o -4 addr show dev eth0)'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("rank 0 host 10.77.0.1 2: eth0 inet 10.77.0.1/16"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("rank 1 host 10.77.0.2 2: eth0 inet 10.77.0.2/16"), std::string::npos)
      << r.out;
}

// The point of it all: a transfer takes the time the rate says, and the
// ranks spend that time waiting, not computing.
TEST(EmulatedNetwork, ShapingIsRealAndCostsLittleCpu) {
  SKIP_WITHOUT_NETWORK();
  const double bytes = 4e6;
  const double rate = 100e6;  // bits per second
  Result r = Loom(StrCat("launch --nproc 2 --net_rate 100mbit -- ", LOOM_BIN,
                         " netcheck --bytes 4000000 --repeats 1"));
  ASSERT_EQ(r.code, 0) << r.out;
  const double seconds = Field(r.out, "send 0->1", "seconds");
  const double mbps = Field(r.out, "send 0->1", "MB/s");
  EXPECT_GE(seconds, bytes * 8 / rate) << r.out;  // 0.32 s at least
  // Close to the rate: TCP over 1500-byte frames carries at most 95.6% of it.
  EXPECT_GT(mbps, 0.85 * rate / 8 / 1e6) << r.out;
  EXPECT_LT(mbps, rate / 8 / 1e6) << r.out;
  // The all-reduce reduces between its transfers, so the load of other
  // tests (2 cores) slows it: 8-9 MB/s seen under ctest -j 2, 11.5 alone.
  EXPECT_GT(Field(r.out, "allreduce", "bus_MB/s"), 0.5 * rate / 8 / 1e6) << r.out;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string line = StrCat("rank ", rank, " ");
    const double cpu = Field(r.out, line, "cpu_seconds");
    const double wall = Field(r.out, line, "wall_seconds");
    ASSERT_GT(wall, 0) << r.out;
    EXPECT_LT(cpu, 0.5 * wall) << r.out;
  }
  // The whole lives of the ranks, from launch's getrusage of its children.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m,
                                std::regex("ranks used ([0-9.]+) s of CPU \\(rank 0 ([0-9.]+) s, "
                                           "rank 1 ([0-9.]+) s\\) in ([0-9.]+) s wall")))
      << r.out;
  const double wall = std::stod(m[4]);
  EXPECT_LT(std::stod(m[2]), 0.5 * wall) << r.out;
  EXPECT_LT(std::stod(m[3]), 0.5 * wall) << r.out;
}

TEST(EmulatedNetwork, NothingLeftWhenARankIsKilled) {
  SKIP_WITHOUT_NETWORK();
  const auto start = std::chrono::steady_clock::now();
  Result r = Loom("launch --nproc 3 --net_rate 100mbit -- sh -c "
                  "'if [ $LOOM_RANK = 1 ]; then kill -9 $$; else sleep 30; fi'");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("loom launch: rank 1 was killed by signal 9; stopping the other ranks"),
            std::string::npos) << r.out;
  EXPECT_LT(seconds, 4.0) << "the other ranks were waited for, not stopped";
  const std::string prefix = NetworkPrefix(r.out);
  ASSERT_NE(prefix, "") << r.out;
  EXPECT_EQ(Leftovers(prefix), "");
}

// `loom launch ARGS` started in the background with its output in a log;
// stopped (SIGTERM, so that it cleans up) if a test ends early.
class Background {
 public:
  Background(const std::string& args, const std::string& log) : log_(log) {
    // A stale log would be read before the shell truncates it.
    unlink(log.c_str());
    pid_ = fork();
    if (pid_ == 0) {
      const std::string command = StrCat("exec ", LOOM_BIN, " launch ", args, " >", log, " 2>&1");
      execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~Background() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  // Signals it and waits for it to end; its wait status.
  int Stop(int sig) {
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Waits up to 10 s for launch's progress line; the prefix it names.
std::string WaitForNetwork(const std::string& log) {
  for (int i = 0; i < 1000; ++i) {
    const std::string prefix = NetworkPrefix(ReadAll(log));
    if (!prefix.empty()) return prefix;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "";
}

TEST(EmulatedNetwork, NothingLeftWhenLaunchIsInterrupted) {
  SKIP_WITHOUT_NETWORK();
  for (int sig : {SIGINT, SIGTERM}) {
    const std::string log = StrCat(testing::TempDir(), "/emulated_network_launch_", sig, ".log");
    Background launch("--nproc 2 --net_rate 100mbit -- sleep 30", log);
    const std::string prefix = WaitForNetwork(log);
    ASSERT_NE(prefix, "") << ReadAll(log);
    ASSERT_NE(Shell("ip netns list").out.find(prefix + "-r1"), std::string::npos);
    const int status = launch.Stop(sig);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
    const std::string out = ReadAll(log);
    EXPECT_NE(out.find(StrCat("loom launch: interrupted by signal ", sig, " (")),
              std::string::npos) << out;
    EXPECT_NE(out.find("network " + prefix + " removed"), std::string::npos) << out;
    EXPECT_EQ(Leftovers(prefix), "");
  }
}

// SIGKILL cannot be caught: the ranks die with launch, and the next launch
// removes the network it left.
TEST(EmulatedNetwork, ANetworkLeftBySigkillIsRemovedByTheNextLaunch) {
  SKIP_WITHOUT_NETWORK();
  const std::string log = testing::TempDir() + "/emulated_network_launch_kill.log";
  // An unusual duration, so that these ranks can be told from any other
  // sleep on the host.
  Background launch("--nproc 2 --net_rate 100mbit -- sleep 29.875", log);
  const std::string prefix = WaitForNetwork(log);
  ASSERT_NE(prefix, "") << ReadAll(log);
  ASSERT_NE(Shell("pgrep -f 'slee[p] 29.875'").out, "");
  launch.Stop(SIGKILL);
  EXPECT_NE(Leftovers(prefix), "");
  Result next = Loom("launch --nproc 1 --net_rate 100mbit -- /bin/true");
  ASSERT_EQ(next.code, 0) << next.out;
  EXPECT_EQ(Leftovers(prefix), "") << next.out;
  EXPECT_EQ(Shell("pgrep -f 'slee[p] 29.875'").out, "") << "the ranks outlived launch";
}

}  // namespace
}  // namespace loom
