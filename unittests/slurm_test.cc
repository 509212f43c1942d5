// Ranks started by Slurm (runtime/slurm_env.h): what a task makes of
// Slurm's variables, and a real single-node Slurm (Debian's slurm-wlm:
// slurmctld and slurmd, authenticated by munge) whose `srun -n 4 loom run`
// trains as `loom launch --nproc 4` does. The cluster is the test's own:
// its daemons in a temporary directory on free ports, stopped after it;
// skipped loudly without root or the packages.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "framework/status.h"
#include "runtime/launch_env.h"
#include "runtime/redis_server.h"
#include "runtime/slurm_env.h"
#include "unittests/loom_cli.h"

namespace loom {
namespace {

TEST(SlurmEnv, FirstHostOfNodeLists) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"localhost", "localhost"},   {"node[07-09,12],gpu3", "node07"}, {"gpu3,node[07-09]", "gpu3"},
      {"node[12,07-09]", "node12"}, {"rack[2-3]-n[1-4]", "rack2-n1"},  {"n[001-128]", "n001"},
  };
  for (const auto& [list, first] : cases) {
    StatusOr<std::string> host = FirstHostOfSlurmNodeList(list);
    ASSERT_TRUE(host.ok()) << list << ": " << host.status();
    EXPECT_EQ(*host, first) << list;
  }
  for (const char* bad : {"", "node[1-2", "node1-2]", "[1-2]x[", ","}) {
    StatusOr<std::string> host = FirstHostOfSlurmNodeList(bad);
    ASSERT_FALSE(host.ok()) << bad << " gave " << *host;
    EXPECT_EQ(host.status().message(),
              std::string("Slurm node list '") + bad + "' is not a hostlist");
  }
}

// The variables srun gives task 5 of a step of 8 tasks on 2 nodes.
std::map<std::string, std::string> StepVariables() {
  return {{"SLURM_STEP_ID", "3"},        {"SLURM_JOB_ID", "4711"},
          {"SLURM_PROCID", "5"},         {"SLURM_STEP_NUM_TASKS", "8"},
          {"SLURM_LOCALID", "1"},        {"SLURM_NODEID", "1"},
          {"SLURM_STEP_NUM_NODES", "2"}, {"SLURM_STEP_NODELIST", "localhost,n[2-3]"}};
}

StatusOr<std::optional<LaunchEnv>> EnvOf(const std::map<std::string, std::string>& vars) {
  return SlurmLaunchEnv([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(SlurmEnv, AStepsVariablesPlaceTheRank) {
  auto env = EnvOf(StepVariables());
  ASSERT_TRUE(env.ok()) << env.status();
  ASSERT_TRUE(env->has_value());
  const LaunchEnv& e = **env;
  EXPECT_EQ(e.launcher, Launcher::kSlurm);
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.node_rank, 1);
  EXPECT_EQ(e.nodes, 2);
  EXPECT_EQ(e.job_id, "slurm-4711.3");
  EXPECT_TRUE(e.store_dir.empty());
  // The store is on the first node, on the step's port; rank 0 starts it.
  EXPECT_EQ(e.redis_endpoint, "localhost:" + std::to_string(SlurmStorePort(4711, 3)));
  EXPECT_FALSE(e.starts_store);
  // Across nodes a rank binds to its address towards the first node
  // (here the first node is this machine, so loopback).
  EXPECT_EQ(e.host.rfind("127.", 0), 0u) << e.host;
  EXPECT_EQ(LaunchCommOptions(e, "loom").job, "slurm-4711.3/loom");
  EXPECT_GT(LaunchCommOptions(e, "loom").redis_wait.count(), 0);

  auto vars = StepVariables();
  vars["SLURM_PROCID"] = "0";
  vars["SLURM_LOCALID"] = "0";
  vars["SLURM_NODEID"] = "0";
  EXPECT_TRUE((*EnvOf(vars))->starts_store);
  // A store of the user's own: nobody starts one, every rank connects to it.
  vars["LOOM_RDZV_ENDPOINT"] = "redis.example:6379";
  vars["LOOM_HOST"] = "10.0.0.5";
  auto own = EnvOf(vars);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_FALSE((*own)->starts_store);
  EXPECT_EQ((*own)->redis_endpoint, "redis.example:6379");
  EXPECT_EQ((*own)->host, "10.0.0.5");
  // On one node the store is on loopback.
  vars = StepVariables();
  vars["SLURM_STEP_NUM_NODES"] = "1";
  vars["SLURM_NODEID"] = "0";
  auto one = EnvOf(vars);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ((*one)->redis_endpoint, "127.0.0.1:" + std::to_string(SlurmStorePort(4711, 3)));
  EXPECT_EQ((*one)->host, "127.0.0.1");
}

TEST(SlurmEnv, OutsideAStepOrAloneItIsNoLaunch) {
  auto vars = StepVariables();
  vars.erase("SLURM_STEP_ID");  // a batch script, not an srun step
  EXPECT_FALSE(EnvOf(vars)->has_value());
  vars = StepVariables();
  vars["SLURM_STEP_NUM_TASKS"] = "1";
  vars["SLURM_PROCID"] = "0";
  EXPECT_FALSE(EnvOf(vars)->has_value());
  EXPECT_FALSE(EnvOf({})->has_value());
}

TEST(SlurmEnv, MalformedVariablesAreNamed) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"SLURM_LOCALID", "", "in a Slurm step (SLURM_STEP_ID is set), SLURM_LOCALID is unset"},
      {"SLURM_NODEID", "x1",
       "in a Slurm step (SLURM_STEP_ID is set), SLURM_NODEID='x1' is not a whole number"},
      {"SLURM_PROCID", "8",
       "Slurm step: SLURM_PROCID=8 SLURM_LOCALID=1 SLURM_NODEID=1 of SLURM_STEP_NUM_TASKS=8 "
       "SLURM_STEP_NUM_NODES=2 do not describe a task"},
      {"SLURM_STEP_NODELIST", "n[1-", "Slurm node list 'n[1-' is not a hostlist"},
  };
  for (const auto& [name, value, error] : cases) {
    auto vars = StepVariables();
    if (value.empty()) {
      vars.erase(name);
    } else {
      vars[name] = value;
    }
    auto env = EnvOf(vars);
    ASSERT_FALSE(env.ok()) << name;
    EXPECT_EQ(env.status().message(), error);
  }
}

// A Slurm cluster of one node, this machine, named localhost: munged,
// slurmctld and slurmd of the test's own, their state and logs in `dir`.
class SlurmCluster {
 public:
  explicit SlurmCluster(std::string dir) : dir_(std::move(dir)) {}
  ~SlurmCluster() {
    for (auto it = pids_.rbegin(); it != pids_.rend(); ++it) {
      kill(*it, SIGTERM);
      waitpid(*it, nullptr, 0);
    }
  }

  // The daemons started, and the node idle; else what went wrong.
  Status Start() {
    std::filesystem::create_directories(dir_ + "/munge");
    for (const char* sub : {"/state", "/spool", "/log"})
      std::filesystem::create_directories(dir_ + sub);
    chmod((dir_ + "/munge").c_str(), 0711);
    WriteWholeFile(dir_ + "/munge/munge.key", std::string(1024, 'k'));
    chmod((dir_ + "/munge/munge.key").c_str(), 0400);
    const std::string socket = dir_ + "/munge/socket";
    Spawn({"munged", "-F", "-f", "-S", socket, "--key-file=" + dir_ + "/munge/munge.key",
           "--log-file=" + dir_ + "/log/munged.log", "--pid-file=" + dir_ + "/munge/pid",
           "--seed-file=" + dir_ + "/munge/seed"});
    for (int i = 0; i < 100 && access(socket.c_str(), F_OK) != 0; ++i) usleep(50000);
    if (access(socket.c_str(), F_OK) != 0) return Internal("munged did not start: ", Log("munged"));
    WriteWholeFile(conf(), Conf(socket));
    Spawn({"slurmctld", "-D", "-f", conf()});
    Spawn({"slurmd", "-D", "-f", conf(), "-N", "localhost"});
    for (int i = 0; i < 300; ++i) {
      if (Shell(env() + " sinfo -h -o %T").out == "idle\n") return Status::OK();
      usleep(100000);
    }
    return Internal("the node is not idle after 30 s: ", Shell(env() + " sinfo").out,
                    Log("slurmctld"), Log("slurmd"));
  }

  // What commands of this cluster need set.
  std::string env() const { return "SLURM_CONF=" + conf(); }

 private:
  std::string conf() const { return dir_ + "/slurm.conf"; }
  std::string Log(const std::string& daemon) const {
    return "\n" + daemon + ": " + ReadWholeFile(dir_ + "/log/" + daemon + ".log");
  }

  // Four CPUs are configured whatever the machine has, so that four tasks
  // fit (config_overrides); the ports are free ones of this machine.
  std::string Conf(const std::string& munge_socket) const {
    return StrCat("ClusterName=loomtest\nSlurmctldHost=localhost\n",
                  "SlurmctldPort=", FreeLoopbackPort(), "\nSlurmdPort=", FreeLoopbackPort(),
                  "\nAuthType=auth/munge\nAuthInfo=socket=", munge_socket,
                  "\nCredType=cred/munge\nSlurmUser=root\nSlurmdUser=root\n",
                  "StateSaveLocation=", dir_, "/state\nSlurmdSpoolDir=", dir_, "/spool\n",
                  "SlurmctldPidFile=", dir_, "/slurmctld.pid\nSlurmdPidFile=", dir_,
                  "/slurmd.pid\nSlurmctldLogFile=", dir_, "/log/slurmctld.log\n",
                  "SlurmdLogFile=", dir_, "/log/slurmd.log\n",
                  "ProctrackType=proctrack/pgid\nTaskPlugin=task/none\nSwitchType=switch/none\n"
                  "MpiDefault=none\nSchedulerType=sched/builtin\nSelectType=select/cons_tres\n"
                  "SelectTypeParameters=CR_Core\nReturnToService=2\nJobCompType=jobcomp/none\n"
                  "AccountingStorageType=accounting_storage/none\n"
                  "JobAcctGatherType=jobacct_gather/none\nSlurmdParameters=config_overrides\n"
                  "NodeName=localhost CPUs=4 RealMemory=1000 State=UNKNOWN\n"
                  "PartitionName=loom Nodes=localhost Default=YES MaxTime=INFINITE State=UP "
                  "OverSubscribe=YES\n");
  }

  void Spawn(const std::vector<std::string>& args) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      dup2(null, 2);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    pids_.push_back(pid);
  }

  std::string dir_;
  std::vector<pid_t> pids_;
};

// The redis-servers running now whose parent has gone (their parent is
// init): a store its rank 0 left behind. (A count of every redis-server
// changes when another test's store starts or stops meanwhile; the stores
// of running tests have their parents.)
std::vector<std::string> OrphanedStores() {
  std::vector<std::string> pids;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string pid = entry.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (ReadWholeFile(entry.path() / "comm") != "redis-server\n") continue;
    // stat: "pid (comm) state ppid ...".
    const std::string stat = ReadWholeFile(entry.path() / "stat");
    const size_t after_comm = stat.rfind(')');
    if (after_comm == std::string::npos) continue;
    std::istringstream fields(stat.substr(after_comm + 1));
    std::string state;
    int ppid = -1;
    fields >> state >> ppid;
    if (ppid == 1) pids.push_back(pid);
  }
  return pids;
}

bool HaveSlurm() {
  return Shell(
             "command -v srun && command -v slurmctld && command -v slurmd && "
             "command -v munged")
             .code == 0;
}

// `srun -n 4 loom run` needs no other flag: the four tasks place themselves
// from Slurm's variables, meet in the store rank 0 starts, and train as
// `loom launch --nproc 4` does, to the same losses. A step of one task runs
// all ranks in its one process. Nothing of the step's is left afterwards.
TEST(SlurmLaunch, SrunTrainsAsLoomLaunch) {
  if (geteuid() != 0) GTEST_SKIP() << "SKIPPED LOUDLY: Slurm's daemons need root";
  if (!HaveSlurm()) {
    GTEST_SKIP() << "SKIPPED LOUDLY: slurm-wlm or munge is not installed (scripts/setup.sh "
                    "installs them)";
  }
  if (!HaveRedisServer()) GTEST_SKIP() << "SKIPPED LOUDLY: redis-server is not installed";
  SlurmCluster cluster(MakeTempDir("loom_slurm_"));
  const Status started = cluster.Start();
  ASSERT_TRUE(started.ok()) << started;

  const std::string run =
      std::string(LOOM_BIN) + " run --preset gpt-tiny --dp 2 --mp 2 --steps 3 --comm_timeout 60";
  const CliResult launched = Loom("launch --nproc 4 -- " + run);
  ASSERT_EQ(launched.code, 0) << launched.out;
  ASSERT_EQ(LossLines(launched.out).size(), 3u) << launched.out;

  const std::vector<std::string> orphans_before = OrphanedStores();
  const CliResult srun = Shell(cluster.env() + " srun -n 4 " + run);
  ASSERT_EQ(srun.code, 0) << srun.out;
  EXPECT_EQ(LossLines(srun.out), LossLines(launched.out)) << srun.out;
  // Every task trained: each reports its rank's device memory.
  for (int r = 0; r < 4; ++r) {
    EXPECT_NE(srun.out.find(StrCat("rank ", r, " ")), std::string::npos) << srun.out;
  }
  const CliResult alone = Shell(cluster.env() + " srun -n 1 " + run);
  ASSERT_EQ(alone.code, 0) << alone.out;
  EXPECT_EQ(LossLines(alone.out), LossLines(launched.out)) << alone.out;

  // A checkpoint's shards are handed over in --save_dir: byte for byte
  // the checkpoint of the run in one process.
  const std::string steps = MakeTempDir("loom_slurm_save_"), one = MakeTempDir("loom_one_save_");
  const CliResult save = Shell(cluster.env() + " srun -n 4 " + run + " --save_dir " + steps);
  ASSERT_EQ(save.code, 0) << save.out;
  ASSERT_EQ(Loom(run.substr(run.find(" run ") + 1) + " --save_dir " + one).code, 0);
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    const std::string a = ReadWholeFile(StrCat(steps, "/step-00000003/", file));
    EXPECT_FALSE(a.empty()) << file << save.out;
    EXPECT_TRUE(a == ReadWholeFile(StrCat(one, "/step-00000003/", file))) << file;
  }
  EXPECT_EQ(Shell("ls -A " + steps).out, "step-00000003\n");
  // Rank 0's store went with each step.
  std::vector<std::string> new_orphans;
  for (const std::string& pid : OrphanedStores()) {
    if (std::find(orphans_before.begin(), orphans_before.end(), pid) == orphans_before.end()) {
      new_orphans.push_back(pid);
    }
  }
  EXPECT_EQ(new_orphans, std::vector<std::string>{});
}

}  // namespace
}  // namespace loom
