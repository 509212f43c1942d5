// The α-β communication model: a call costs latency_steps * α + byte_factor
// * bytes / β, where the collective and its algorithm give the two factors
// and the link level (intra- or inter-node) of the group gives α and β.
//
// Formulas, for n members, `bytes` as OpWork counts them (what one member
// contributes: an allreduce's or reduce-scatter's whole input, one
// all-gather part, the broadcast tensor, the message), L = ceil(log2 n):
//
//   collective      ring                                   tree
//   allreduce       2(n-1) α + 2(n-1)/n · bytes/β          2L α + 2L · bytes/β
//   allgather       (n-1) α + (n-1) · bytes/β              L α + (n-1) · bytes/β
//   reduce_scatter  (n-1) α + (n-1)/n · bytes/β            L α + (n-1)/n · bytes/β
//   broadcast       (L + n-1) α + 2(n-1)/n · bytes/β       L α + L · bytes/β
//   send / recv     α + bytes/β                            (same)
//
// Ring allreduce is reduce-scatter then all-gather around the ring. Tree
// allreduce is a binomial-tree reduce then broadcast, unpipelined; tree
// allgather and reduce-scatter are recursive doubling and halving; ring
// broadcast is a scatter then a ring all-gather (van de Geijn). These are
// the textbook costs of Thakur, Rabenseifner and Gropp, "Optimization of
// Collective Communication Operations in MPICH" (IJHPCA 2005).
//
// kDirect is what Loom's Gloo communicator runs (executor/comm/
// gloo_communicator.h): every message of a phase posted at once, so
//   allreduce       2 α + 2(n-1)/n · bytes/β
//   allgather       α + (n-1) · bytes/β
//   reduce_scatter  α + (n-1)/n · bytes/β
//   broadcast       α + (n-1) · bytes/β   (the root sends every copy)
//
// α and β are the link's, or a collective's own where the link lists one
// (Link.collective). A group of one member costs nothing. A group whose ranks span nodes pays
// the inter-node link for every step: a ring is as slow as its slowest
// link. On a half-duplex link (Link.half_duplex) the byte term doubles for
// the collectives whose steps send and receive at once: every ring and
// direct allreduce, allgather and reduce-scatter, and tree allgather and
// reduce-scatter; not tree allreduce, broadcast or send/recv, whose steps
// go one way.
//
// A shaped link (Link.burst_bytes, an emulated network's tc tbf) bounds
// the byte term by tbf's as well: the wire bytes less the bucket's credit,
// over the shaper's rate (Link.sustained_bandwidth); the larger of that and
// the fit's byte term counts. Without it a link with a
// sustained_bandwidth costs at least its wire bytes over that rate.
#ifndef LOOM_COST_MODEL_COMM_MODEL_H_
#define LOOM_COST_MODEL_COMM_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cost_model/cluster.pb.h"
#include "framework/op_registry.h"
#include "framework/op_work.h"
#include "framework/status.h"

namespace loom {

enum class CommAlgorithm { kRing, kTree, kDirect };
enum class LinkLevel { kIntraNode, kInterNode };

// What a collective moves is the op schema's CommCall (framework/
// op_registry.h), named by CommCallName; the algorithms are "ring", "tree"
// and "direct".
const char* CommAlgorithmName(CommAlgorithm algorithm);
StatusOr<CommAlgorithm> ParseCommAlgorithm(const std::string& name);

// The call an op type makes, from its schema: allreduce, allgather,
// reduce_scatter, broadcast, send and recv are themselves;
// c_softmax_with_cross_entropy makes allreduces (three per step, OpWork's
// comm_calls, of one float per row each). Other types are not
// communication: NotFound naming the type.
StatusOr<CommCall> CollectiveCallOf(const std::string& op_type);

// The factors of the formulas above.
struct CommTerms {
  double latency_steps = 0;  // multiplies α
  double byte_factor = 0;    // multiplies bytes / β
  // Every member sends and receives at once in each step.
  bool exchange = false;
};
CommTerms TermsOf(CommCall kind, CommAlgorithm algorithm, int members);
// byte_factor, doubled for an exchange over a half-duplex link.
double LinkByteFactor(const CommTerms& terms, bool half_duplex);

// A call over a link shaped by a token bucket (Link.burst_bytes, refilled
// at Link.sustained_bandwidth): how long it takes, and the credit (bytes)
// its bucket holds when it ends.
struct ShapedCall {
  double seconds = 0;
  double credit_bytes = 0;
};
// `latency_steps` steps of `alpha` each, moving `wire_bytes` at `beta`,
// starting with `credit_bytes` in the bucket.
ShapedCall ShapeCall(const proto::Link& link, double latency_steps, double alpha, double beta,
                     double wire_bytes, double credit_bytes);
// The credit a shaped link's bucket holds as a call starts: what the call
// before left (`carried_credit_seconds`, as seconds of refill) and the
// link's `idle_seconds` since refilled, at most the bucket.
double ShaperCreditAtStart(const proto::Link& link, double idle_seconds,
                           double carried_credit_seconds);

// What a call costs over its link's α-β after the link idled for
// `idle_seconds` (Link.after_idle, interpolated; 0 where absent).
double AfterIdleSeconds(const proto::Link& link, double idle_seconds);

// Which of a link's measured costs price a call (HostLinkCosts: the
// regimes of a CPU host's shared cores).
enum class CallRegime {
  kTogether,     // the parties arrive together: the link's own costs
  kAfterWait,    // a party waited for the last and slept: after_wait
  kAwake,        // the parties' cores stay awake: awake
  kSharedCores,  // beside another rank's call on shared cores: shared_cores
};

class CommModel {
 public:
  // `cluster` must be valid (ValidateCluster).
  explicit CommModel(proto::Cluster cluster);

  const proto::Cluster& cluster() const { return cluster_; }

  // Intra-node when every rank of the group is on one node.
  LinkLevel LevelOf(const std::vector<int>& group_ranks) const;
  const proto::Link& LinkAt(LinkLevel level) const;
  // The link's costs at `level` where the ranks share a CPU host's cores
  // (Cluster.shared_host; empty where it has none).
  const proto::HostLinkCosts& HostCostsAt(LinkLevel level) const;

  // One call among `group_ranks` (global ranks; for send and recv the two
  // ends), in `regime` (the link's costs for it where it has them, else its
  // own). `idle_seconds`: how long the members' links had carried nothing
  // before the call (the least over them); on a shaped link
  // (Link.burst_bytes) the bucket refilled meanwhile, and a link that
  // measured it (Link.after_idle) charges the extra of calls after idle.
  // 0: an empty bucket and a busy link. `charge_after_idle` false: the
  // after_idle extra does not apply (the bucket still refills).
  // `carried_credit_seconds`: the credit the members' last calls left in
  // their buckets (ShaperCreditAfter), added to the idle time's refill.
  double CommSeconds(CommCall kind, CommAlgorithm algorithm, int64_t bytes,
                     const std::vector<int>& group_ranks, CallRegime regime = CallRegime::kTogether,
                     double idle_seconds = 0, bool charge_after_idle = true,
                     double carried_credit_seconds = 0) const;
  // On a shaped link, the credit that call leaves in its bucket, as the
  // seconds of refill it equals; 0 on other links.
  double ShaperCreditAfter(CommCall kind, CommAlgorithm algorithm, int64_t bytes,
                           const std::vector<int>& group_ranks, CallRegime regime,
                           double idle_seconds, double carried_credit_seconds) const;

  // The bytes one member moves in one direction for that call on its
  // link (what the link's bandwidth and sustained_bandwidth divide).
  double WireBytes(CommCall kind, CommAlgorithm algorithm, int64_t bytes,
                   const std::vector<int>& group_ranks) const;

  // Every call an op makes: comm_calls x CommSeconds(its collective,
  // comm_bytes). An error names the op type if it does not communicate.
  StatusOr<double> OpCommSeconds(const std::string& op_type, const OpWork& work,
                                 CommAlgorithm algorithm,
                                 const std::vector<int>& group_ranks) const;

 private:
  // What prices one call: its link, steps, the regime's α and β (the
  // collective's own where measured), and the bytes on the wire.
  struct CallTerms {
    const proto::Link* link = nullptr;
    double latency_steps = 0;
    double alpha = 0;
    double beta = 0;
    double wire_bytes = 0;
  };
  CallTerms TermsFor(CommCall kind, CommAlgorithm algorithm, int64_t bytes,
                     const std::vector<int>& group_ranks, CallRegime regime) const;

  proto::Cluster cluster_;
};

}  // namespace loom

#endif  // LOOM_COST_MODEL_COMM_MODEL_H_
