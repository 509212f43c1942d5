#include "runtime/node_launch.h"

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
#include <iterator>
#include <optional>

#include "runtime/launch_env.h"

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};
volatile sig_atomic_t g_signal = 0;

void OnSignal(int sig) { g_signal = sig; }

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
// ranks, nproc each.
int GlobalRank(const NodeLaunchOptions& o, int local) { return o.node_rank * o.nproc + local; }

// Forks rank `r` and runs `args` in it; never returns in the child.
pid_t StartRank(const NodeLaunchOptions& o, int r, const std::vector<std::string>& args,
                const std::string& store_dir) {
  const EmulatedNetwork* net = o.net;
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
  setenv(kRankEnv, std::to_string(GlobalRank(o, r)).c_str(), 1);
  setenv(kWorldSizeEnv, std::to_string(o.nnodes * o.nproc).c_str(), 1);
  setenv(kLocalRankEnv, std::to_string(r).c_str(), 1);
  setenv(kNodeRankEnv, std::to_string(o.node_rank).c_str(), 1);
  setenv(kNodesEnv, std::to_string(o.nnodes).c_str(), 1);
  setenv(kStoreDirEnv, store_dir.c_str(), 1);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  std::fprintf(stderr, "loom launch: rank %d: cannot run %s\n", r, argv[0]);
  _exit(127);
}

// A running rank that has gone silent for the heartbeat timeout, and how.
struct SilentRank {
  int rank;
  std::string why;
};

// The first running rank whose heartbeat is older than the timeout.
// Loom commands beat; other commands have none, so a rank with no
// heartbeat file is silent only where the launch's command is a loom one:
// `loom` itself, or any command once some rank has beaten (every rank runs
// the same). Such a rank, stopped or hung before its first beat, is named
// the timeout after it started.
std::optional<SilentRank> FindSilentRank(const NodeLaunchOptions& o, const std::vector<Rank>& ranks,
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
    if (::stat(HeartbeatPath(store_dir, GlobalRank(o, static_cast<int>(r))).c_str(), &st) != 0) {
      continue;
    }
    beat[r] = true;
    any_beat = true;
    const double age = static_cast<double>(now.tv_sec - st.st_mtim.tv_sec) +
                       (now.tv_nsec - st.st_mtim.tv_nsec) * 1e-9;
    if (ranks[r].running && age > o.heartbeat_timeout) {
      return SilentRank{static_cast<int>(r),
                        StrCat("renewed no heartbeat for ", o.heartbeat_timeout, " s")};
    }
  }
  if (!any_beat) return std::nullopt;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (!ranks[r].running || beat[r]) continue;
    const double since_start =
        std::chrono::duration<double>(Clock::now() - ranks[r].started).count();
    if (since_start > o.heartbeat_timeout) {
      return SilentRank{static_cast<int>(r), StrCat("wrote no heartbeat in the ",
                                                    o.heartbeat_timeout, " s since it started")};
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
Status RunRanks(const NodeLaunchOptions& o, const std::vector<std::string>& args,
                const std::string& store_dir, std::vector<Rank>& ranks,
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
  for (int r = 0; r < o.nproc && result.ok(); ++r) {
    if (g_signal != 0) {
      interrupted();
      break;
    }
    const pid_t pid = StartRank(o, r, args, store_dir);
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
    if (!stopping && o.heartbeat_timeout > 0 && Clock::now() >= next_beat_check) {
      next_beat_check = Clock::now() + std::chrono::milliseconds(250);
      if (std::optional<SilentRank> silent = FindSilentRank(o, ranks, store_dir, loom_command)) {
        stop(Internal("rank ", GlobalRank(o, silent->rank), " (pid ", ranks[silent->rank].pid, ") ",
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
    while (r < o.nproc && ranks[r].pid != pid) ++r;
    if (r == o.nproc) continue;  // not a rank
    --running;
    ranks[r].running = false;
    ranks[r].cpu_seconds = Seconds(usage.ru_utime) + Seconds(usage.ru_stime);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      stop(Internal("rank ", GlobalRank(o, r),
                    WIFSIGNALED(status) ? StrCat(" was killed by signal ", WTERMSIG(status))
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

void Note(const NodeLaunchOptions& o, const std::string& line) {
  if (o.note) o.note(line);
}

std::string JobId() {
  const char* job = getenv(kJobIdEnv);
  return job == nullptr ? "" : job;
}

}  // namespace

StopSignalCatcher::StopSignalCatcher() {
  static_assert(sizeof(previous_) / sizeof(previous_[0]) == std::size(kStopSignals));
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  g_signal = 0;
  for (size_t i = 0; i < std::size(kStopSignals); ++i) {
    sigaction(kStopSignals[i], &action, &previous_[i]);
  }
}

StopSignalCatcher::~StopSignalCatcher() {
  for (size_t i = 0; i < std::size(kStopSignals); ++i) {
    sigaction(kStopSignals[i], &previous_[i], nullptr);
  }
}

Status RunNodeLaunch(const NodeLaunchOptions& options, const std::vector<std::string>& command,
                     LaunchGenerations& generations, NodeLaunchReport* report) {
  // A job that a node's launch stopped (its user interrupted it) is not
  // started again; Stopped() says why, empty while none has.
  LOOM_ASSIGN_OR_RETURN(const std::string stopped_before, generations.Stopped());
  if (!stopped_before.empty()) {
    return Aborted("job ", JobId(), " was stopped (", stopped_before,
                   "); give a new --job_id to run it again");
  }
  RemoveStaleRendezvousDirs();
  std::vector<Rank> ranks(options.nproc);
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
      Note(options,
           StrCat("joining start ", *next, " of job ", JobId(), " (start ", *next - 1, " failed)"));
    }
    generation = *next;
    std::string dir_template = StrCat(kRendezvousPrefix, getpid(), "-XXXXXX");
    const char* dir = mkdtemp(dir_template.data());
    if (dir == nullptr) return Internal("cannot make a rendezvous directory in /tmp");
    setenv(kRestartEnv, std::to_string(generation).c_str(), 1);
    ranks.assign(options.nproc, Rank());
    // The other nodes' launches end instead of restarting: marked before
    // this node's ranks stop and theirs lose their peers.
    auto mark_stopped = [&](int sig) {
      Status marked = generations.MarkStopped(
          StrCat("node ", options.node_rank, "'s launch was interrupted by signal ", sig));
      if (!marked.ok()) Note(options, marked.message());
    };
    result = RunRanks(options, command, dir, ranks, mark_stopped);
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    if (result.ok() || g_signal != 0) break;
    if (Status marked = generations.MarkFailed(generation); !marked.ok()) {
      result = Status(marked.code(), StrCat(result.message(), "; then ", marked.message()));
      break;
    }
    ++generation;
    if (restart == options.max_restarts) break;
    if (StatusOr<std::string> why = generations.Stopped(); !why.ok() || !why->empty()) {
      result =
          Aborted(result.message(), "; not restarted: ", why.ok() ? *why : why.status().message());
      break;
    }
    Note(options, StrCat("restart ", restart + 1, " of ", options.max_restarts,
                         ", after: ", result.message()));
  }
  report->restarts = restart;
  report->cpu_seconds.clear();
  for (const Rank& rank : ranks) report->cpu_seconds.push_back(rank.cpu_seconds);
  return result;
}

}  // namespace loom
