#include "runtime/redis_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>
#include <vector>

#include "executor/comm/comm_world.h"

namespace loom {
namespace {

// Where a server bound to `bind` is reached from this machine.
std::string EndpointOf(const std::string& bind, int port) {
  const bool everywhere = bind == "0.0.0.0" || bind == "*";
  return StrCat(everywhere ? "127.0.0.1" : bind, ":", port);
}

}  // namespace

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  return ok ? ntohs(addr.sin_port) : 0;
}

bool HaveRedisServer() { return std::system("command -v redis-server > /dev/null 2>&1") == 0; }

StatusOr<std::unique_ptr<RedisServer>> RedisServer::Start(const RedisServerOptions& options) {
  if (!HaveRedisServer()) {
    return Status(StatusCode::kUnavailable,
                  "redis-server is not installed (Debian's redis-server "
                  "package; scripts/setup.sh installs it)");
  }
  const int port = options.port != 0 ? options.port : FreeLoopbackPort();
  if (port < 1 || port > 65535)
    return InvalidArgument("redis-server port ", port, " is not 1..65535");
  const bool loopback = options.bind.rfind("127.", 0) == 0 || options.bind == "::1";
  // Whatever answers there would pass for the new server below.
  if (ConnectRedisStore(EndpointOf(options.bind, port)).ok()) {
    return Status(StatusCode::kUnavailable, StrCat("cannot start a redis-server on ", options.bind,
                                                   ":", port, ": the port is taken"));
  }
  // Made before fork: the child of a threaded process only execs.
  const std::string port_text = std::to_string(port);
  const std::vector<const char*> argv = {"redis-server",
                                         "--port",
                                         port_text.c_str(),
                                         "--bind",
                                         options.bind.c_str(),
                                         "--protected-mode",
                                         loopback ? "yes" : "no",
                                         "--save",
                                         "",
                                         "--appendonly",
                                         "no",
                                         "--loglevel",
                                         "warning",
                                         nullptr};
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return Internal("cannot fork a redis-server");
  if (pid == 0) {
    // It dies with the process that started it, however that ends.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    // Its start-up warnings (memory overcommit) are not the caller's output.
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execvp(argv[0], const_cast<char* const*>(argv.data()));
    _exit(127);
  }
  std::unique_ptr<RedisServer> server(new RedisServer(options.bind, port, pid));
  const auto deadline = std::chrono::steady_clock::now() + options.start_timeout;
  while (!ConnectRedisStore(server->endpoint()).ok()) {
    int wstatus = 0;
    if (waitpid(pid, &wstatus, WNOHANG) == pid) {
      server->pid_ = -1;
      return Status(StatusCode::kUnavailable,
                    StrCat("redis-server on ", options.bind, ":", port, " exited at start (exit ",
                           WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus),
                           "): is the port taken?"));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status(StatusCode::kDeadlineExceeded,
                    StrCat("redis-server on ", options.bind, ":", port, " did not answer within ",
                           options.start_timeout.count(), " ms"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return server;
}

RedisServer::~RedisServer() { Stop(); }

void RedisServer::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string RedisServer::endpoint() const { return EndpointOf(bind_, port_); }

}  // namespace loom
