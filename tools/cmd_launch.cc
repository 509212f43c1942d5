// loom launch: starts N processes on this node, one rank each, in the
// manner of torchrun and paddle.distributed.launch. Each child gets the
// environment of runtime/launch_env.h (its rank, the world size and a fresh
// directory where the ranks meet); when a child fails, the others are
// stopped and the failing rank is named. Under --nnodes each node runs its
// own launch, and the ranks of all of them meet in one redis-server. With
// --net_rate each rank runs in
// a network namespace of its own behind a shaped link
// (runtime/emulated_network.h), so that communication takes wall time
// without taking CPU. SIGINT, SIGTERM and SIGHUP stop the ranks and remove
// the network before launch exits.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>

#include "runtime/emulated_network.h"
#include "runtime/launch_env.h"
#include "runtime/launch_generations.h"
#include "tools/command.h"
#include "tools/common_flags.h"

DEFINE_int32(nproc, 1, "processes (ranks) to start on this node");
DEFINE_int32(nproc_per_node, 0, "--nproc by torchrun's name");
DEFINE_int32(nnodes, 1,
             "nodes of the job, each running its own loom launch with the same --nproc, "
             "--rdzv_endpoint and --job_id; ranks are numbered node by node");
DEFINE_int32(node_rank, 0, "this node's place among the --nnodes, from 0");
DEFINE_string(net_rate, "",
              "emulate a network: each rank in a network namespace of its own with a link "
              "of this rate each way, in tc syntax (200mbit, 1gbit); needs root, ip and tc");
DEFINE_string(net_burst, "",
              "with --net_rate: tbf bucket of each link, tc size syntax (empty: 1 ms of "
              "traffic, at least 16kb)");
DEFINE_double(heartbeat_timeout, 10,
              "seconds a launched loom rank may go without renewing its heartbeat before it is "
              "named as stopped or hung and the launch stopped (0: never)");
DEFINE_string(rdzv_backend, "file",
              "where the ranks meet: file (a fresh directory on this machine) or redis (a "
              "redis-server at --rdzv_endpoint that every rank reaches; Gloo's RedisStore)");
DEFINE_string(rdzv_endpoint, "", "with --rdzv_backend redis: the redis-server's HOST:PORT");
DEFINE_string(job_id, "",
              "the launch's id, prefixing every key its ranks put in the store, so that jobs "
              "sharing a redis store never collide (empty: made from this host's name, "
              "launch's pid and the time)");
DEFINE_string(local_addr, "",
              "with --nnodes: the address of this node that the other nodes' ranks connect "
              "to (empty: this machine's address on its route to --rdzv_endpoint)");
DEFINE_int32(max_restarts, 0,
             "times to start every rank again when one fails, stops or hangs (torchrun's "
             "--max-restarts); a restarted 'loom run' resumes from the newest complete "
             "checkpoint of its --save_dir. Not after a signal to launch itself");
DEFINE_string(net_queue, "100ms",
              "with --net_rate: longest a packet queues at a link before it is dropped");

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};
volatile sig_atomic_t g_signal = 0;

void OnSignal(int sig) { g_signal = sig; }

// Catches SIGINT, SIGTERM and SIGHUP while alive, so that launch cleans up
// instead of dying; the previous handlers come back afterwards.
class SignalCatcher {
 public:
  SignalCatcher() {
    struct sigaction action = {};
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    for (int i = 0; i < kCount; ++i) sigaction(kStopSignals[i], &action, &previous_[i]);
  }
  ~SignalCatcher() {
    for (int i = 0; i < kCount; ++i) sigaction(kStopSignals[i], &previous_[i], nullptr);
  }

 private:
  static constexpr int kCount = sizeof(kStopSignals) / sizeof(kStopSignals[0]);
  struct sigaction previous_[kCount];
};

Status Interrupted(int sig) {
  return Internal("interrupted by signal ", sig, " (", strsignal(sig), "); stopping the ranks");
}

struct Rank {
  pid_t pid = -1;
  bool running = false;
  Clock::time_point started;
  double cpu_seconds = 0;  // user + system, once it has exited
};

double Seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; }

// The job's rank of this node's `local`th process: nodes hold consecutive
// ranks, --nproc each.
int GlobalRank(int local) { return FLAGS_node_rank * FLAGS_nproc + local; }

// Forks rank `r` and runs `args` in it; never returns in the child.
pid_t StartRank(int r, const std::vector<std::string>& args, const std::string& store_dir,
                const EmulatedNetwork* net) {
  // The stop signals stay blocked across fork until the child has dropped
  // launch's handlers: a SIGTERM that reached it before exec would
  // otherwise only set the child's copy of the flag, and the rank would
  // run on.
  sigset_t stop_signals, previous;
  sigemptyset(&stop_signals);
  for (int sig : kStopSignals) sigaddset(&stop_signals, sig);
  sigprocmask(SIG_BLOCK, &stop_signals, &previous);
  const pid_t launcher = getpid();
  const pid_t pid = fork();
  if (pid != 0) {
    // Set here as well as in the child, so that it holds before either
    // side goes on.
    if (pid > 0) setpgid(pid, pid);
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    return pid;
  }
  for (int sig : kStopSignals) signal(sig, SIG_DFL);
  sigprocmask(SIG_SETMASK, &previous, nullptr);
  // Each rank leads its own process group, so that stopping it stops
  // whatever it started too.
  setpgid(0, 0);
  // A launch killed outright (SIGKILL) cannot stop its ranks: they die
  // with it instead of running on, waiting for peers that are gone.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != launcher) _exit(1);
  if (net != nullptr) {
    if (!net->Enter(r)) {
      std::fprintf(stderr, "loom launch: rank %d: cannot enter network namespace %s: %s\n", r,
                   net->RankNamespace(r).c_str(), std::strerror(errno));
      _exit(127);
    }
    setenv(kHostEnv, net->Address(r).c_str(), 1);
    setenv(kNetBurstEnv, std::to_string(net->burst_bytes()).c_str(), 1);
  } else {
    // Set across nodes (SetRendezvousEnv); else loopback.
    unsetenv(kNetBurstEnv);
  }
  setenv(kRankEnv, std::to_string(GlobalRank(r)).c_str(), 1);
  setenv(kWorldSizeEnv, std::to_string(FLAGS_nnodes * FLAGS_nproc).c_str(), 1);
  setenv(kLocalRankEnv, std::to_string(r).c_str(), 1);
  setenv(kNodeRankEnv, std::to_string(FLAGS_node_rank).c_str(), 1);
  setenv(kNodesEnv, std::to_string(FLAGS_nnodes).c_str(), 1);
  setenv(kStoreDirEnv, store_dir.c_str(), 1);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  std::fprintf(stderr, "loom launch: rank %d: cannot run %s\n", r, argv[0]);
  _exit(127);
}

// A running rank that has gone silent for --heartbeat_timeout, and how.
struct SilentRank {
  int rank;
  std::string why;
};

// The first running rank whose heartbeat is older than --heartbeat_timeout.
// Loom commands beat; other commands have none, so a rank with no
// heartbeat file is silent only where the launch's command is a loom one:
// `loom` itself, or any command once some rank has beaten (every rank runs
// the same). Such a rank, stopped or hung before its first beat, is named
// --heartbeat_timeout after it started.
std::optional<SilentRank> FindSilentRank(const std::vector<Rank>& ranks,
                                         const std::string& store_dir, bool loom_command) {
  const timespec now = [] {
    timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t;
  }();
  std::vector<bool> beat(ranks.size());
  bool any_beat = loom_command;
  for (size_t r = 0; r < ranks.size(); ++r) {
    struct stat st;
    if (::stat(HeartbeatPath(store_dir, GlobalRank(static_cast<int>(r))).c_str(), &st) != 0) {
      continue;
    }
    beat[r] = true;
    any_beat = true;
    const double age = static_cast<double>(now.tv_sec - st.st_mtim.tv_sec) +
                       (now.tv_nsec - st.st_mtim.tv_nsec) * 1e-9;
    if (ranks[r].running && age > FLAGS_heartbeat_timeout) {
      return SilentRank{static_cast<int>(r),
                        StrCat("renewed no heartbeat for ", FLAGS_heartbeat_timeout, " s")};
    }
  }
  if (!any_beat) return std::nullopt;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (!ranks[r].running || beat[r]) continue;
    const double since_start =
        std::chrono::duration<double>(Clock::now() - ranks[r].started).count();
    if (since_start > FLAGS_heartbeat_timeout) {
      return SilentRank{static_cast<int>(r), StrCat("wrote no heartbeat in the ",
                                                    FLAGS_heartbeat_timeout,
                                                    " s since it started")};
    }
  }
  return std::nullopt;
}

void SignalRunning(const std::vector<Rank>& ranks, int sig) {
  for (const Rank& rank : ranks) {
    if (rank.running) kill(-rank.pid, sig);
  }
}

// Starts every rank and waits for all of them. The first failure (a rank
// that fails, or a signal to launch) is returned; the other ranks then get
// SIGTERM, and SIGKILL if still running 5 s later. A signal to launch is
// told to `on_signal` first, once.
Status RunRanks(const std::vector<std::string>& args, const std::string& store_dir,
                const EmulatedNetwork* net, std::vector<Rank>& ranks,
                const std::function<void(int)>& on_signal) {
  const bool loom_command = std::filesystem::path(args.front()).filename() == "loom";
  Status result;
  bool stopping = false, signal_told = false;
  Clock::time_point stop_deadline;
  const auto stop = [&](Status why, pid_t spare) {
    if (result.ok()) result = std::move(why);
    if (stopping) return;
    for (const Rank& rank : ranks) {
      if (!rank.running || rank.pid == spare) continue;
      kill(-rank.pid, SIGTERM);
      kill(-rank.pid, SIGCONT);  // a stopped process acts on SIGTERM only once continued
    }
    stopping = true;
    stop_deadline = Clock::now() + std::chrono::seconds(5);
  };
  const auto interrupted = [&] {
    if (!signal_told) on_signal(g_signal);
    signal_told = true;
    stop(Interrupted(g_signal), -1);
  };
  for (int r = 0; r < FLAGS_nproc && result.ok(); ++r) {
    if (g_signal != 0) {
      interrupted();
      break;
    }
    const pid_t pid = StartRank(r, args, store_dir, net);
    if (pid < 0) {
      stop(Internal("fork failed for rank ", r, ": ", std::strerror(errno)), -1);
      break;
    }
    ranks[r].pid = pid;
    ranks[r].running = true;
    ranks[r].started = Clock::now();
  }
  int running = 0;
  for (const Rank& rank : ranks) running += rank.running ? 1 : 0;
  Clock::time_point next_beat_check = Clock::now();
  while (running > 0) {
    if (g_signal != 0 && !signal_told) interrupted();
    if (!stopping && FLAGS_heartbeat_timeout > 0 && Clock::now() >= next_beat_check) {
      next_beat_check = Clock::now() + std::chrono::milliseconds(250);
      if (std::optional<SilentRank> silent = FindSilentRank(ranks, store_dir, loom_command)) {
        stop(Internal("rank ", GlobalRank(silent->rank), " (pid ", ranks[silent->rank].pid, ") ",
                      silent->why, ": stopped or hung; stopping every rank"),
             -1);
      }
    }
    int status = 0;
    rusage usage = {};
    const pid_t pid = wait4(-1, &status, WNOHANG, &usage);
    if (pid == 0 || (pid < 0 && errno == EINTR)) {
      if (stopping && Clock::now() > stop_deadline) {
        SignalRunning(ranks, SIGKILL);
        stop_deadline = Clock::time_point::max();
      }
      usleep(10000);
      continue;
    }
    if (pid < 0) break;
    int r = 0;
    while (r < FLAGS_nproc && ranks[r].pid != pid) ++r;
    if (r == FLAGS_nproc) continue;  // not a rank
    --running;
    ranks[r].running = false;
    ranks[r].cpu_seconds = Seconds(usage.ru_utime) + Seconds(usage.ru_stime);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      stop(Internal("rank ", GlobalRank(r), WIFSIGNALED(status)
                                    ? StrCat(" was killed by signal ", WTERMSIG(status))
                                    : StrCat(" exited with status ", WEXITSTATUS(status)),
                    "; stopping the other ranks"),
           pid);
    }
  }
  return result;
}

// Rendezvous directories are /tmp/loom-launch-<launch's pid>-XXXXXX.
constexpr char kRendezvousPrefix[] = "/tmp/loom-launch-";

// A launch killed outright (SIGKILL) cannot remove its directory; the next
// launch removes those whose launch is gone.
void RemoveStaleRendezvousDirs() {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/tmp", error)) {
    const std::string name = entry.path().string();
    if (name.rfind(kRendezvousPrefix, 0) != 0) continue;
    const std::string rest = name.substr(sizeof(kRendezvousPrefix) - 1);
    const size_t dash = rest.find('-');
    if (dash == std::string::npos || dash == 0) continue;  // not one of ours
    char* end = nullptr;
    const long pid = std::strtol(rest.c_str(), &end, 10);
    if (end != rest.c_str() + dash || pid <= 0) continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // still there
    std::error_code ignored;
    std::filesystem::remove_all(entry.path(), ignored);
  }
}

// "0.031 s of CPU (rank 0 0.012 s, rank 1 0.019 s)"; beyond 8 ranks, the
// least and the most a rank used.
std::string CpuSummary(const std::vector<Rank>& ranks) {
  double total = 0, least = 1e300, most = 0;
  std::string each;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const double cpu = ranks[r].cpu_seconds;
    total += cpu;
    least = std::min(least, cpu);
    most = std::max(most, cpu);
    char buf[48];
    std::snprintf(buf, sizeof(buf), "%srank %zu %.3f s", r == 0 ? "" : ", ", r, cpu);
    each += buf;
  }
  if (ranks.size() > 8) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.3f s to %.3f s per rank", least, most);
    each = buf;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f s", total);
  return StrCat(buf, " of CPU (", each, ")");
}

// --nnodes and --node_rank, and what a job across nodes needs: a store
// every node reaches, and one job id that every node's launch names.
Status CheckNodes() {
  if (FLAGS_nnodes < 1 || int64_t{FLAGS_nnodes} * FLAGS_nproc > (1 << 20)) {
    return InvalidArgument("--nnodes (", FLAGS_nnodes, ") x --nproc (", FLAGS_nproc,
                           ") must be 1 to 1048576 ranks");
  }
  if (FLAGS_node_rank < 0 || FLAGS_node_rank >= FLAGS_nnodes) {
    return InvalidArgument("--node_rank ", FLAGS_node_rank, " is outside 0..", FLAGS_nnodes - 1);
  }
  if (FLAGS_nnodes == 1) return Status::OK();
  if (FLAGS_rdzv_backend != "redis") {
    return InvalidArgument("--nnodes ", FLAGS_nnodes,
                           " needs a store every node reaches: --rdzv_backend redis "
                           "--rdzv_endpoint HOST:PORT");
  }
  if (FLAGS_job_id.empty()) {
    return InvalidArgument("--nnodes ", FLAGS_nnodes,
                           " needs --job_id: every node's launch must name the same job");
  }
  if (!FLAGS_net_rate.empty()) {
    return InvalidArgument("--net_rate emulates one machine's network; not with --nnodes");
  }
  return Status::OK();
}

// The store the ranks meet in, handed to them as LOOM_RDZV_ENDPOINT and
// LOOM_JOB_ID (launch_env.h). A redis-server that does not answer is named
// before any rank starts.
Status SetRendezvousEnv() {
  std::string job = FLAGS_job_id;
  if (job.empty()) {
    char host[256] = "host";
    gethostname(host, sizeof(host) - 1);
    job = StrCat("loom-", host, "-", getpid(), "-",
                 std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count());
  }
  if (job.find_first_of(" \t\n") != std::string::npos) {
    return InvalidArgument("--job_id '", job, "' holds white space");
  }
  setenv(kJobIdEnv, job.c_str(), 1);
  unsetenv(kHostEnv);
  if (!FLAGS_local_addr.empty() && FLAGS_nnodes == 1) {
    return InvalidArgument("--local_addr is for --nnodes above 1");
  }
  if (FLAGS_rdzv_backend == "file") {
    if (!FLAGS_rdzv_endpoint.empty()) {
      return InvalidArgument("--rdzv_endpoint is for --rdzv_backend redis");
    }
    unsetenv(kRdzvEndpointEnv);
    return Status::OK();
  }
  if (FLAGS_rdzv_backend != "redis") {
    return InvalidArgument("--rdzv_backend '", FLAGS_rdzv_backend, "' is not file or redis");
  }
  if (FLAGS_rdzv_endpoint.empty()) {
    return InvalidArgument("--rdzv_backend redis needs --rdzv_endpoint HOST:PORT");
  }
  LOOM_RETURN_IF_ERROR(ConnectRedisStore(FLAGS_rdzv_endpoint).status());
  setenv(kRdzvEndpointEnv, FLAGS_rdzv_endpoint.c_str(), 1);
  // Ranks on other nodes connect to this one's at an address they reach,
  // which loopback is not.
  if (FLAGS_nnodes > 1) {
    std::string host = FLAGS_local_addr;
    if (host.empty()) {
      StatusOr<std::string> routed = LocalAddressTowards(FLAGS_rdzv_endpoint);
      if (!routed.ok()) return routed.status().WithContext("--local_addr (give it)");
      host = std::move(routed).value();
    }
    setenv(kHostEnv, host.c_str(), 1);
  }
  return Status::OK();
}

}  // namespace

Status RunLaunch(const std::vector<std::string>& args) {
  if (args.empty()) return InvalidArgument("expects '-- COMMAND ARGS...' to start");
  if (FlagGiven("nproc_per_node")) {
    if (FlagGiven("nproc")) return InvalidArgument("--nproc and --nproc_per_node: give one");
    FLAGS_nproc = FLAGS_nproc_per_node;
  }
  if (FLAGS_nproc < 1) return InvalidArgument("--nproc must be at least 1");
  if (FLAGS_max_restarts < 0 || FLAGS_max_restarts > 1000) {
    return InvalidArgument("--max_restarts ", FLAGS_max_restarts, " is outside 0..1000");
  }
  LOOM_RETURN_IF_ERROR(CheckNodes());
  if (FLAGS_net_rate.empty() && (FlagGiven("net_burst") || FlagGiven("net_queue"))) {
    return InvalidArgument("--net_burst and --net_queue shape an emulated network: give "
                           "--net_rate too");
  }
  LOOM_RETURN_IF_ERROR(SetRendezvousEnv());
  // Which start of the job this launch's ranks join: agreed with the other
  // nodes' launches in a redis store, so that one replacing a lost node
  // joins the survivors' restart.
  LaunchGenerations generations;
  if (FLAGS_rdzv_backend == "redis") {
    LOOM_ASSIGN_OR_RETURN(generations,
                          LaunchGenerations::InRedis(FLAGS_rdzv_endpoint, getenv(kJobIdEnv)));
  }
  // Caught from here on: the network and the ranks are removed on the way
  // out whatever stops launch.
  SignalCatcher catcher;
  g_signal = 0;
  std::unique_ptr<EmulatedNetwork> net;
  if (!FLAGS_net_rate.empty()) {
    EmulatedNetworkOptions options;
    options.ranks = FLAGS_nproc;
    options.rate = FLAGS_net_rate;
    options.burst = FLAGS_net_burst;
    options.queue = FLAGS_net_queue;
    StatusOr<std::unique_ptr<EmulatedNetwork>> made = EmulatedNetwork::Create(options);
    if (!made.ok()) return made.status();
    net = std::move(made).value();
    std::fprintf(stderr, "loom launch: %s\n", net->Describe().c_str());
  }
  RemoveStaleRendezvousDirs();
  const Clock::time_point start = Clock::now();
  std::vector<Rank> ranks(FLAGS_nproc);
  // A job that a node's launch stopped (its user interrupted it) is not
  // started again; Stopped() says why, empty while none has.
  LOOM_ASSIGN_OR_RETURN(const std::string stopped_before, generations.Stopped());
  if (!stopped_before.empty()) {
    return Aborted("job ", getenv(kJobIdEnv), " was stopped (", stopped_before,
                   "); give a new --job_id to run it again");
  }
  Status result;
  int restart = 0, generation = 0;
  for (;; ++restart) {
    // Each start meets afresh: a directory of its own, and keys of its own
    // in a shared store (LaunchCommOptions).
    StatusOr<int> next = generations.Next(generation);
    if (!next.ok()) {
      result = next.status();
      break;
    }
    if (restart == 0 && *next > 0) {
      std::fprintf(stderr, "loom launch: joining start %d of job %s (start %d failed)\n", *next,
                   getenv(kJobIdEnv), *next - 1);
    }
    generation = *next;
    std::string dir_template = StrCat(kRendezvousPrefix, getpid(), "-XXXXXX");
    const char* dir = mkdtemp(dir_template.data());
    if (dir == nullptr) return Internal("cannot make a rendezvous directory in /tmp");
    setenv(kRestartEnv, std::to_string(generation).c_str(), 1);
    ranks.assign(FLAGS_nproc, Rank());
    // The other nodes' launches end instead of restarting: marked before
    // this node's ranks stop and theirs lose their peers.
    auto mark_stopped = [&](int sig) {
      Status marked = generations.MarkStopped(
          StrCat("node ", FLAGS_node_rank, "'s launch was interrupted by signal ", sig));
      if (!marked.ok()) std::fprintf(stderr, "loom launch: %s\n", marked.message().c_str());
    };
    result = RunRanks(args, dir, net.get(), ranks, mark_stopped);
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    if (result.ok() || g_signal != 0) break;
    if (Status marked = generations.MarkFailed(generation); !marked.ok()) {
      result = Status(marked.code(), StrCat(result.message(), "; then ", marked.message()));
      break;
    }
    ++generation;
    if (restart == FLAGS_max_restarts) break;
    if (StatusOr<std::string> why = generations.Stopped(); !why.ok() || !why->empty()) {
      result = Aborted(result.message(), "; not restarted: ",
                       why.ok() ? *why : why.status().message());
      break;
    }
    std::fprintf(stderr, "loom launch: restart %d of %d, after: %s\n", restart + 1,
                 FLAGS_max_restarts, result.message().c_str());
  }
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  if (restart > 0) {
    std::fprintf(stderr, "loom launch: %s after %d restart(s)\n",
                 result.ok() ? "finished" : "failed", restart);
  }
  if (net != nullptr) {
    Status removed = net->Destroy();
    if (!removed.ok() && result.ok()) result = removed;
    std::fprintf(stderr, "loom launch: ranks used %s in %.3f s wall; network %s %s\n",
                 CpuSummary(ranks).c_str(), wall, net->prefix().c_str(),
                 removed.ok() ? "removed" : "NOT fully removed");
  }
  return result;
}

}  // namespace loom
