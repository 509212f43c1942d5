#include "runtime/emulated_network.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <glog/logging.h>

extern char** environ;

namespace loom {
namespace {

// Where `ip netns` keeps its namespaces (bind mounts, one file each).
constexpr const char* kNetnsDir = "/var/run/netns";
// Ranks are hosts 1.. of this /16; a /16 leaves room for any launch.
constexpr const char* kSubnet = "10.77";
constexpr int kMaxRanks = 65534;

struct Unit {
  const char* name;
  double scale;
};

// tc's rate suffixes (tc-man "PARAMETERS"), as bits per second. Note that
// tc's "bps" is bytes per second.
constexpr Unit kRateUnits[] = {
    {"bit", 1},         {"kbit", 1e3},          {"mbit", 1e6},
    {"gbit", 1e9},      {"tbit", 1e12},         {"kibit", 1024.0},
    {"mibit", 1048576.0}, {"gibit", 1073741824.0}, {"bps", 8},
    {"kbps", 8e3},      {"mbps", 8e6},          {"gbps", 8e9},
    {"kibps", 8192.0},  {"mibps", 8388608.0},   {"gibps", 8589934592.0},
};
// tc's size suffixes, as bytes ("kb" is 1024 bytes in tc).
constexpr Unit kSizeUnits[] = {
    {"b", 1},       {"k", 1024.0},       {"kb", 1024.0},       {"m", 1048576.0},
    {"mb", 1048576.0}, {"g", 1073741824.0}, {"gb", 1073741824.0}, {"kbit", 128.0},
    {"mbit", 131072.0}, {"gbit", 134217728.0},
};
// tc's time suffixes, as seconds.
constexpr Unit kTimeUnits[] = {
    {"s", 1},     {"sec", 1},     {"secs", 1},     {"ms", 1e-3},   {"msec", 1e-3},
    {"msecs", 1e-3}, {"us", 1e-6}, {"usec", 1e-6}, {"usecs", 1e-6},
};

// A positive number with one of `units` (case-insensitive, as tc takes
// them); a bare number is scaled by `bare`.
template <size_t N>
StatusOr<double> ParseWithUnit(const std::string& text, const Unit (&units)[N], double bare,
                               const char* field, const char* example) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const double number = std::strtod(begin, &end);
  const std::string suffix(end);
  double scale = suffix.empty() ? bare : 0;
  for (const Unit& unit : units) {
    if (strcasecmp(suffix.c_str(), unit.name) == 0) scale = unit.scale;
  }
  if (end == begin || errno != 0 || !std::isfinite(number) || number <= 0 || scale == 0 ||
      !std::isdigit(static_cast<unsigned char>(text[0]))) {
    return InvalidArgument(field, " '", text, "' is not in tc syntax (e.g. ", example, ")");
  }
  return number * scale;
}

bool InPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string dirs = path;
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    if (access((dir + "/" + name).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

std::string JoinArgs(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

// Runs a tool to completion and fails with its command line and the first
// line it printed. The tool leads a process group of its own, so that a
// Ctrl-C meant for loom does not kill it half-way through a change.
Status RunTool(const std::vector<std::string>& argv) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return Internal("cannot make a pipe for '", JoinArgs(argv), "': ", std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawn_error = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(pipe_fds[1]);
  if (spawn_error != 0) {
    close(pipe_fds[0]);
    return FailedPrecondition("cannot run '", JoinArgs(argv), "': ", std::strerror(spawn_error));
  }
  std::string output;
  char buf[1024];
  ssize_t n;
  while ((n = read(pipe_fds[0], buf, sizeof(buf))) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    output.append(buf, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::OK();
  std::string first_line = output.substr(0, output.find('\n'));
  if (first_line.empty()) first_line = "no output";
  return Internal("'", JoinArgs(argv), "' failed (",
                  WIFEXITED(status) ? StrCat("exit status ", WEXITSTATUS(status))
                                    : StrCat("signal ", WTERMSIG(status)),
                  "): ", first_line);
}

// Removes namespaces named "loom-<pid>-..." whose launch no longer runs: a
// launch killed by SIGKILL leaves its network behind.
void RemoveStaleNamespaces() {
  DIR* dir = opendir(kNetnsDir);
  if (dir == nullptr) return;
  std::vector<std::string> stale;
  while (const dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.rfind("loom-", 0) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + 5, &end, 10);
    if (end == name.c_str() + 5 || *end != '-' || pid <= 0 || pid == getpid()) continue;
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) stale.push_back(name);
  }
  closedir(dir);
  for (const std::string& name : stale) {
    Status s = RunTool({"ip", "netns", "del", name});
    if (s.ok()) {
      LOG(WARNING) << "removed network namespace " << name
                   << ", left by a launch that no longer runs";
    }
  }
}

std::string FormatRate(double bits_per_second) {
  const char* units[] = {"bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"};
  int u = 0;
  while (u < 4 && bits_per_second >= 1000) {
    bits_per_second /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g %s", bits_per_second, units[u]);
  return buf;
}

}  // namespace

StatusOr<double> ParseTcRate(const std::string& rate) {
  return ParseWithUnit(rate, kRateUnits, 1.0, "rate", "200mbit or 1gbit");
}

int64_t DefaultBurstBytes(double bits_per_second) {
  // Short enough that a message of a few kilobytes already waits for the
  // rate; at least a few frames, which tbf needs at low rates.
  return std::max<int64_t>(16 * 1024, static_cast<int64_t>(bits_per_second / 8 / 1000));
}

Status CheckEmulatedNetworkSupport() {
  std::vector<std::string> missing;
  if (geteuid() != 0) missing.push_back(StrCat("root (running as uid ", geteuid(), ")"));
  std::vector<std::string> tools;
  for (const char* tool : {"ip", "tc"}) {
    if (!InPath(tool)) tools.push_back(StrCat("'", tool, "'"));
  }
  if (!tools.empty()) {
    missing.push_back(StrCat("the ", tools.size() == 1 ? tools[0] : tools[0] + " and " + tools[1],
                             tools.size() == 1 ? " command" : " commands",
                             " of iproute2 (not in PATH)"));
  }
  if (!missing.empty()) {
    return FailedPrecondition("emulated network: needs ",
                              missing.size() == 1 ? missing[0] : missing[0] + " and " + missing[1]);
  }
  // Root in a container may still lack the capability to make namespaces:
  // try one, so that the caller hears it before anything is built.
  const std::string probe = StrCat("loom-", getpid(), "-probe");
  Status made = RunTool({"ip", "netns", "add", probe});
  if (!made.ok()) {
    return FailedPrecondition("emulated network: cannot create a network namespace here (",
                              made.message(), ")");
  }
  return RunTool({"ip", "netns", "delete", probe}).WithContext("emulated network");
}

StatusOr<std::unique_ptr<EmulatedNetwork>> EmulatedNetwork::Create(
    const EmulatedNetworkOptions& options) {
  if (options.ranks < 1 || options.ranks > kMaxRanks) {
    return InvalidArgument("emulated network: ", options.ranks, " ranks; it holds 1 to ",
                           kMaxRanks);
  }
  if (options.ranks_per_node < 1 || options.ranks % options.ranks_per_node != 0) {
    return InvalidArgument("emulated network: ", options.ranks, " ranks do not make nodes of ",
                           options.ranks_per_node);
  }
  const std::string where = "emulated network";
  double intra_bits = 0;
  if (!options.intra_node_rate.empty()) {
    if (options.ranks_per_node == 1) {
      return InvalidArgument("emulated network: an intra-node rate needs nodes of more than one "
                             "rank");
    }
    StatusOr<double> intra = ParseTcRate(options.intra_node_rate);
    if (!intra.ok()) return intra.status().WithContext(where + ", intra-node");
    intra_bits = *intra;
  }
  StatusOr<double> bits_or = ParseTcRate(options.rate);
  if (!bits_or.ok()) return bits_or.status().WithContext(where);
  const double bits = *bits_or;
  if (bits < 1e6) {
    return InvalidArgument("emulated network: rate '", options.rate,
                           "' is below 1mbit, too slow for any communication timeout");
  }
  int64_t burst = DefaultBurstBytes(bits);
  if (!options.burst.empty()) {
    StatusOr<double> b = ParseWithUnit(options.burst, kSizeUnits, 1.0, "burst", "32kb or 64000");
    if (!b.ok()) return b.status().WithContext(where);
    // tbf drops any frame larger than the bucket.
    if (*b < 1600) {
      return InvalidArgument("emulated network: burst '", options.burst,
                             "' is smaller than one frame (1600 bytes)");
    }
    burst = static_cast<int64_t>(*b);
  }
  Status queue = ParseWithUnit(options.queue, kTimeUnits, 1e-6, "queue", "100ms").status();
  if (!queue.ok()) return queue.WithContext(where);
  LOOM_RETURN_IF_ERROR(CheckEmulatedNetworkSupport());

  std::unique_ptr<EmulatedNetwork> net(new EmulatedNetwork());
  net->prefix_ = options.name_prefix.empty() ? StrCat("loom-", getpid()) : options.name_prefix;
  net->bridge_namespace_ = net->prefix_ + "-br";
  net->ranks_ = options.ranks;
  const int nodes = options.ranks / options.ranks_per_node;
  for (int n = 0; n < nodes; ++n) {
    net->node_namespaces_.push_back(
        StrCat(net->prefix_, options.ranks_per_node == 1 ? "-r" : "-n", n));
  }
  net->bits_per_second_ = bits;
  net->intra_node_bits_per_second_ = intra_bits;
  net->burst_bytes_ = burst;
  net->queue_ = options.queue;
  RemoveStaleNamespaces();

  // tbf cuts a segmentation-offload packet larger than its bucket into
  // frames, and the receiver then wakes once per frame: capping these
  // packets below the bucket keeps them whole and the CPU cost per byte
  // several times lower (4% of the wall time instead of 15-20% at 200mbit).
  const std::string gso_max = StrCat(std::min<int64_t>(65536, burst - burst / 4));
  // Both directions of a link get the same shaper.
  const auto shape = [&](const std::string& ns, const std::string& dev, double rate) {
    const int64_t bucket = rate == bits ? burst : DefaultBurstBytes(rate);
    return RunTool({"tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate",
                    StrCat(static_cast<int64_t>(rate), "bit"), "burst", StrCat(bucket, "b"),
                    "latency", options.queue});
  };
  const auto build = [&]() -> Status {
    const std::string& br = net->bridge_namespace_;
    LOOM_RETURN_IF_ERROR(RunTool({"ip", "netns", "add", br}));
    net->created_.push_back(br);
    LOOM_RETURN_IF_ERROR(RunTool({"ip", "-n", br, "link", "add", "br0", "type", "bridge"}));
    LOOM_RETURN_IF_ERROR(RunTool({"ip", "-n", br, "link", "set", "br0", "up"}));
    for (int n = 0; n < nodes; ++n) {
      const std::string& ns = net->node_namespaces_[n];
      const std::string port = StrCat(options.ranks_per_node == 1 ? "rank" : "node", n);
      LOOM_RETURN_IF_ERROR(RunTool({"ip", "netns", "add", ns}));
      net->created_.push_back(ns);
      // Created with its peer already in the rank's namespace: no
      // interface of ours ever appears in the caller's namespace.
      LOOM_RETURN_IF_ERROR(RunTool({"ip", "-n", br, "link", "add", port, "type", "veth", "peer",
                                    "name", "eth0", "netns", ns}));
      LOOM_RETURN_IF_ERROR(RunTool({"ip", "-n", br, "link", "set", port, "master", "br0",
                                    "gso_max_size", gso_max, "up"}));
      LOOM_RETURN_IF_ERROR(shape(br, port, bits));
      LOOM_RETURN_IF_ERROR(RunTool({"ip", "-n", ns, "link", "set", "lo", "up"}));
      // Ranks of one node reach each other's address over loopback.
      if (intra_bits > 0) LOOM_RETURN_IF_ERROR(shape(ns, "lo", intra_bits));
      LOOM_RETURN_IF_ERROR(RunTool({"ip", "-n", ns, "addr", "add",
                                    net->Address(n * options.ranks_per_node) + "/16", "dev",
                                    "eth0"}));
      LOOM_RETURN_IF_ERROR(
          RunTool({"ip", "-n", ns, "link", "set", "eth0", "gso_max_size", gso_max, "up"}));
      LOOM_RETURN_IF_ERROR(shape(ns, "eth0", bits));
      const std::string path = StrCat(kNetnsDir, "/", ns);
      const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return Internal("cannot open ", path, ": ", std::strerror(errno));
      net->node_fds_.push_back(fd);
    }
    return Status::OK();
  };
  Status built = build();
  if (!built.ok()) {
    // Never leave half a network behind.
    Status removed = net->Destroy();
    return Status(built.code(),
                  StrCat(where, ": ", built.message(),
                         removed.ok() ? "; removed what was built"
                                      : StrCat("; removing what was built failed too: ",
                                               removed.message())));
  }
  return net;
}

EmulatedNetwork::~EmulatedNetwork() {
  Status s = Destroy();
  if (!s.ok()) LOG(ERROR) << "emulated network " << prefix_ << ": " << s;
}

std::string EmulatedNetwork::Address(int rank) const {
  const int host = rank / ranks_per_node() + 1;
  return StrCat(kSubnet, ".", host / 256, ".", host % 256);
}

bool EmulatedNetwork::Enter(int rank) const {
  if (rank < 0 || rank >= ranks_ || node_fds_.empty()) {
    errno = EINVAL;
    return false;
  }
  return setns(node_fds_[rank / ranks_per_node()], CLONE_NEWNET) == 0;
}

std::string EmulatedNetwork::Describe() const {
  const int n = nodes();
  const int k = ranks_per_node();
  const std::string intra =
      k == 1 ? ""
             : StrCat(", ", k, " ranks each over loopback ",
                      intra_node_bits_per_second_ > 0 ? "at " + FormatRate(intra_node_bits_per_second_)
                                                      : "(not shaped)");
  return StrCat("emulated network: ", k == 1 ? "per-rank namespaces " : "node namespaces ",
                n > 1 ? StrCat(node_namespaces_.front(), "..", n - 1) : node_namespaces_.front(),
                intra, ", each with its own ", FormatRate(bits_per_second_),
                " link each way (tbf, burst ", burst_bytes_, " bytes, queue ", queue_,
                ") to a bridge in ", bridge_namespace_, "; addresses ", Address(0),
                n > 1 ? StrCat(" to ", Address(ranks_ - 1)) : "");
}

Status EmulatedNetwork::Destroy() {
  for (int fd : node_fds_) close(fd);
  node_fds_.clear();
  Status first;
  // The rank namespaces first, the bridge's last: each veth pair goes with
  // whichever of its two namespaces is freed first.
  for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
    Status s = RunTool({"ip", "netns", "del", *it});
    if (!s.ok() && first.ok()) first = s;
  }
  created_.clear();
  return first;
}

}  // namespace loom
