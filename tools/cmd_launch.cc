// loom launch: starts N processes on this host, one rank each, in the
// manner of torchrun and paddle.distributed.launch. Each child gets
// LOOM_RANK, LOOM_WORLD_SIZE and LOOM_STORE_DIR (a fresh directory where
// the ranks meet); when a child fails, the others are stopped and the
// failing rank is named.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "tools/command.h"

DEFINE_int32(nproc, 1, "processes (ranks) to start");

namespace loom {

Status RunLaunch(const std::vector<std::string>& args) {
  if (args.empty()) return InvalidArgument("expects '-- COMMAND ARGS...' to start");
  if (FLAGS_nproc < 1) return InvalidArgument("--nproc must be at least 1");
  char dir_template[] = "/tmp/loom-launch-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return Internal("cannot make a rendezvous directory in /tmp");
  std::vector<pid_t> children;
  for (int r = 0; r < FLAGS_nproc; ++r) {
    pid_t pid = fork();
    if (pid < 0) return Internal("fork failed for rank ", r);
    if (pid == 0) {
      // Each rank leads its own process group, so that stopping it stops
      // whatever it started too.
      setpgid(0, 0);
      setenv("LOOM_RANK", std::to_string(r).c_str(), 1);
      setenv("LOOM_WORLD_SIZE", std::to_string(FLAGS_nproc).c_str(), 1);
      setenv("LOOM_STORE_DIR", dir, 1);
      std::vector<char*> argv;
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      std::fprintf(stderr, "loom launch: rank %d: cannot run %s\n", r, argv[0]);
      _exit(127);
    }
    setpgid(pid, pid);
    children.push_back(pid);
  }
  Status result;
  int running = FLAGS_nproc;
  // Once a rank failed, ranks still running at this deadline are killed.
  bool stopping = false;
  std::chrono::steady_clock::time_point stop_deadline;
  while (running > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid == 0) {
      if (stopping && std::chrono::steady_clock::now() > stop_deadline) {
        for (pid_t other : children) kill(-other, SIGKILL);
        stopping = false;
      }
      usleep(10000);
      continue;
    }
    if (pid < 0) break;
    --running;
    int rank = 0;
    while (rank < FLAGS_nproc && children[rank] != pid) ++rank;
    const bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    if (failed && result.ok()) {
      result = Internal("rank ", rank, WIFSIGNALED(status)
                                           ? StrCat(" was killed by signal ", WTERMSIG(status))
                                           : StrCat(" exited with status ", WEXITSTATUS(status)),
                        "; stopping the other ranks");
      for (pid_t other : children) {
        if (other != pid) kill(-other, SIGTERM);
      }
      stopping = true;
      stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return result;
}

}  // namespace loom
