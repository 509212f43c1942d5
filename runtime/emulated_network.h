// An emulated cluster network on one host, so that communication takes
// wall time the way an interconnect does without taking CPU time.
//
// Topology: each node gets a network namespace of its own holding one
// interface, eth0, with address 10.77.x.y/16; eth0 is one end of a veth
// pair whose other end ("node<k>") is a port of a bridge that lives in a
// namespace of its own ("loom-<pid>-br"). Both ends of every pair are
// shaped with a tbf qdisc at the given rate, so each node has a
// full-duplex link of its own: its sends and its receives each run at the
// rate, and several senders to one node share that node's downlink.
//
// By default every rank is a node of its own ("loom-<pid>-r<k>"): a NIC
// per GPU. With ranks_per_node K, ranks K*j..K*j+K-1 share node j's
// namespace ("loom-<pid>-n<j>") and its link, and reach each other over
// its loopback, shaped to intra_node_rate if one is given: a faster link
// inside a node than between nodes, as NVLink is beside the network.
// Latency is the real stack's (tens of microseconds); the kernel here has
// no netem, so none is added.
//
// Nothing is created in the caller's namespace: the veth pairs are created
// with both ends already inside our namespaces, so deleting the namespaces
// deletes every interface. The names carry the creating process's id, so
// concurrent launches do not collide, and Create() first removes
// namespaces of launches that no longer exist (a launch killed by SIGKILL
// cannot clean up after itself).
//
// Built with the `ip` and `tc` commands of iproute2; needs root.
#ifndef LOOM_RUNTIME_EMULATED_NETWORK_H_
#define LOOM_RUNTIME_EMULATED_NETWORK_H_

#include <memory>
#include <string>
#include <vector>

#include "framework/status.h"

namespace loom {

struct EmulatedNetworkOptions {
  int ranks = 1;
  // Ranks per node namespace; ranks must be a multiple of it.
  int ranks_per_node = 1;
  // The rate of each node's link, each direction, in tc syntax: "200mbit",
  // "1gbit", "25MBps" (bytes). A bare number is bits per second, as in tc.
  std::string rate;
  // With ranks_per_node above 1: the rate of each node's loopback, over
  // which its ranks talk to each other; empty: not shaped.
  std::string intra_node_rate;
  // tbf bucket size in tc syntax ("32kb"); empty: the default below.
  std::string burst;
  // Longest a packet may queue at a link before it is dropped (tbf
  // latency), tc time syntax.
  std::string queue = "100ms";
  // Namespace names start with this; empty: "loom-<pid>", so one network
  // per process unless each gets a prefix of its own.
  std::string name_prefix;
};

// Bits per second of a tc rate ("200mbit" -> 2e8); an error naming `rate`
// otherwise.
StatusOr<double> ParseTcRate(const std::string& rate);

// The default tbf bucket for `bits_per_second`: one millisecond of traffic,
// and never less than a few full-size frames.
int64_t DefaultBurstBytes(double bits_per_second);

// OK if this process can build a network: it runs as root and `ip` and
// `tc` are in PATH. Otherwise one FailedPrecondition naming everything
// that is missing, e.g. "emulated network: needs root (running as uid
// 1000) and the 'tc' command of iproute2 (not in PATH)".
Status CheckEmulatedNetworkSupport();

class EmulatedNetwork {
 public:
  // Builds the whole network or nothing: on any failure what was made is
  // removed again, and the error names the command that failed and what
  // it printed.
  static StatusOr<std::unique_ptr<EmulatedNetwork>> Create(const EmulatedNetworkOptions& options);
  // Destroys the network (errors are logged).
  ~EmulatedNetwork();

  int ranks() const { return ranks_; }
  int nodes() const { return static_cast<int>(node_namespaces_.size()); }
  int ranks_per_node() const { return ranks_ / nodes(); }
  // "10.77.0.1" for rank 0: where rank `rank`'s sockets bind (its node's
  // address).
  std::string Address(int rank) const;
  // "loom-4242-r0", or "loom-4242-n0" for ranks that share a node.
  const std::string& RankNamespace(int rank) const {
    return node_namespaces_.at(rank / ranks_per_node());
  }
  const std::string& BridgeNamespace() const { return bridge_namespace_; }
  const std::string& prefix() const { return prefix_; }
  double bits_per_second() const { return bits_per_second_; }
  // The tbf bucket of each link.
  int64_t burst_bytes() const { return burst_bytes_; }

  // Moves the calling process into rank `rank`'s namespace. Only a system
  // call on a descriptor opened by Create(), so a child may call it between
  // fork and exec. False on failure (errno set).
  bool Enter(int rank) const;

  // One line for the log: topology, rate, names and addresses.
  std::string Describe() const;

  // Removes every namespace (and so every interface) of this network.
  // Idempotent; the first error is returned, but every removal is tried.
  Status Destroy();

 private:
  EmulatedNetwork() = default;

  std::string prefix_;
  std::string bridge_namespace_;
  int ranks_ = 0;
  std::vector<std::string> node_namespaces_;
  // Open descriptors of the node namespaces, for Enter(); closed before the
  // namespaces are removed, since an open descriptor keeps one alive.
  std::vector<int> node_fds_;
  // The namespaces made so far, removed by Destroy().
  std::vector<std::string> created_;
  double bits_per_second_ = 0;
  // Of each node's loopback; 0: not shaped.
  double intra_node_bits_per_second_ = 0;
  int64_t burst_bytes_ = 0;
  std::string queue_;
};

}  // namespace loom

#endif  // LOOM_RUNTIME_EMULATED_NETWORK_H_
