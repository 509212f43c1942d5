// A redis-server run as a child of this process: the rendezvous store that
// the first rank of a Slurm step starts for its peers (slurm_env.h), and
// the tests' own store. Debian's redis-server, without persistence.
#ifndef LOOM_RUNTIME_REDIS_SERVER_H_
#define LOOM_RUNTIME_REDIS_SERVER_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>

#include "framework/status.h"

namespace loom {

struct RedisServerOptions {
  // The address it listens on. Any other than loopback turns redis's
  // protected mode off, so that other machines' ranks may connect.
  std::string bind = "127.0.0.1";
  // 0: a port of loopback that is free now.
  int port = 0;
  // How long it may take to answer before Start gives up.
  std::chrono::milliseconds start_timeout = std::chrono::seconds(10);
};

class RedisServer {
 public:
  // Starts it and waits until it answers; an error naming the port when
  // it exits first (the port is taken) or does not answer in time, or when
  // redis-server is not installed. It dies with the thread that started
  // it (PR_SET_PDEATHSIG), so start it from one that outlives its use: a
  // process's main thread.
  static StatusOr<std::unique_ptr<RedisServer>> Start(const RedisServerOptions& options);

  // Stops it (SIGKILL: it keeps nothing).
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  void Stop();
  bool running() const { return pid_ > 0; }
  int port() const { return port_; }
  // HOST:PORT to connect to: the bound address, or loopback when it is
  // bound to every address.
  std::string endpoint() const;

 private:
  RedisServer(std::string bind, int port, pid_t pid)
      : bind_(std::move(bind)), port_(port), pid_(pid) {}

  std::string bind_;
  int port_;
  pid_t pid_;
};

// Whether `redis-server` is on the PATH.
bool HaveRedisServer();

// A TCP port of loopback that nothing listens on now (the kernel's pick,
// released at once; another process may take it before it is used).
int FreeLoopbackPort();

}  // namespace loom

#endif  // LOOM_RUNTIME_REDIS_SERVER_H_
