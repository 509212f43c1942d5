#include "cost_model/comm_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "cost_model/cluster.h"
#include "framework/op_registry.h"

namespace loom {
namespace {

// ceil(log2 n): rounds of a binomial tree or of recursive doubling.
double TreeRounds(int n) {
  int rounds = 0;
  for (int span = 1; span < n; span *= 2) ++rounds;
  return rounds;
}

}  // namespace

ShapedCall ShapeCall(const proto::Link& link, double latency_steps, double alpha, double beta,
                     double wire_bytes, double credit_bytes) {
  // A token bucket (tc tbf): bytes leave at the fitted speed while its
  // credit lasts and at the bucket's rate beyond it; the fit is what calls
  // took on the same link (the hosts' share included, slower where ranks
  // share cores), so both bound a step, and the slower decides. The credit
  // grows at the rate all the while, up to the bucket, the call's own
  // latencies included: each step sends its share of the bytes after a
  // latency, so that a call whose steps the refill covers pays its
  // latencies, not the rate.
  const double rate = link.sustained_bandwidth();
  const double bucket = static_cast<double>(link.burst_bytes());
  const int steps = std::max(1, static_cast<int>(std::lround(latency_steps)));
  const double step_alpha = latency_steps * alpha / steps;
  const double step_bytes = wire_bytes / steps;
  ShapedCall call{0, std::clamp(credit_bytes, 0.0, bucket)};
  for (int i = 0; i < steps; ++i) {
    const double step = step_alpha + std::max(step_bytes / beta,
                                              std::max(0.0, step_bytes - call.credit_bytes) / rate);
    call.credit_bytes = std::clamp(call.credit_bytes - step_bytes + step * rate, 0.0, bucket);
    call.seconds += step;
  }
  return call;
}

double ShaperCreditAtStart(const proto::Link& link, double idle_seconds,
                           double carried_credit_seconds) {
  return std::min(static_cast<double>(link.burst_bytes()),
                  (std::max(0.0, idle_seconds) + std::max(0.0, carried_credit_seconds)) *
                      link.sustained_bandwidth());
}

const char* CommAlgorithmName(CommAlgorithm algorithm) {
  switch (algorithm) {
    case CommAlgorithm::kRing: return "ring";
    case CommAlgorithm::kTree: return "tree";
    case CommAlgorithm::kDirect: return "direct";
  }
  return "?";
}

StatusOr<CommAlgorithm> ParseCommAlgorithm(const std::string& name) {
  for (CommAlgorithm a :
       {CommAlgorithm::kRing, CommAlgorithm::kTree, CommAlgorithm::kDirect}) {
    if (name == CommAlgorithmName(a)) return a;
  }
  return InvalidArgument("unknown communication algorithm '", name,
                         "' (known: ring, tree, direct)");
}

StatusOr<CommCall> CollectiveCallOf(const std::string& op_type) {
  // The op's schema says what its call moves (and a price may be asked for
  // before anything else needed the schemas).
  RegisterAllOps();
  const CommCall call = CommCallOf(op_type);
  if (call != CommCall::kNone) return call;
  return NotFound("op type '", op_type, "' does not communicate");
}

CommTerms TermsOf(CommCall kind, CommAlgorithm algorithm, int members) {
  const double n = members;
  if (members <= 1) return {};
  if (kind == CommCall::kSend || kind == CommCall::kRecv) {
    return {1, 1, false};
  }
  const double rounds = TreeRounds(members);
  switch (algorithm) {
    case CommAlgorithm::kRing:
      switch (kind) {
        case CommCall::kAllReduce: return {2 * (n - 1), 2 * (n - 1) / n, true};
        case CommCall::kAllGather: return {n - 1, n - 1, true};
        case CommCall::kReduceScatter: return {n - 1, (n - 1) / n, true};
        case CommCall::kBroadcast: return {rounds + n - 1, 2 * (n - 1) / n, false};
        default: break;
      }
      break;
    case CommAlgorithm::kTree:
      switch (kind) {
        case CommCall::kAllReduce: return {2 * rounds, 2 * rounds, false};
        case CommCall::kAllGather: return {rounds, n - 1, true};
        case CommCall::kReduceScatter: return {rounds, (n - 1) / n, true};
        case CommCall::kBroadcast: return {rounds, rounds, false};
        default: break;
      }
      break;
    case CommAlgorithm::kDirect:
      switch (kind) {
        case CommCall::kAllReduce: return {2, 2 * (n - 1) / n, true};
        case CommCall::kAllGather: return {1, n - 1, true};
        case CommCall::kReduceScatter: return {1, (n - 1) / n, true};
        case CommCall::kBroadcast: return {1, n - 1, false};
        default: break;
      }
      break;
  }
  LOG(FATAL) << "no terms for " << CommCallName(kind) << " / "
             << CommAlgorithmName(algorithm);
  return {};
}

double LinkByteFactor(const CommTerms& terms, bool half_duplex) {
  return terms.byte_factor * (half_duplex && terms.exchange ? 2 : 1);
}

CommModel::CommModel(proto::Cluster cluster) : cluster_(std::move(cluster)) {
  Status valid = ValidateCluster(cluster_);
  CHECK(valid.ok()) << "CommModel over an invalid cluster '" << cluster_.name()
                    << "': " << valid.message();
}

LinkLevel CommModel::LevelOf(const std::vector<int>& group_ranks) const {
  if (group_ranks.empty()) return LinkLevel::kIntraNode;
  const int node = NodeOf(cluster_, group_ranks.front());
  for (int r : group_ranks) {
    if (NodeOf(cluster_, r) != node) return LinkLevel::kInterNode;
  }
  return LinkLevel::kIntraNode;
}

const proto::Link& CommModel::LinkAt(LinkLevel level) const {
  return level == LinkLevel::kIntraNode ? cluster_.intra_node()
                                        : cluster_.inter_node();
}

const proto::HostLinkCosts& CommModel::HostCostsAt(LinkLevel level) const {
  const proto::SharedHost& host = cluster_.shared_host();
  return level == LinkLevel::kIntraNode ? host.intra_node() : host.inter_node();
}

CommModel::CallTerms CommModel::TermsFor(CommCall kind, CommAlgorithm algorithm, int64_t bytes,
                                         const std::vector<int>& group_ranks,
                                         CallRegime regime) const {
  const CommTerms t = TermsOf(kind, algorithm, static_cast<int>(group_ranks.size()));
  const LinkLevel level = LevelOf(group_ranks);
  const proto::Link& link = LinkAt(level);
  const proto::HostLinkCosts& host = HostCostsAt(level);
  const proto::WaitedCosts* costs = nullptr;
  if (regime == CallRegime::kAfterWait && host.has_after_wait()) costs = &host.after_wait();
  if (regime == CallRegime::kAwake && host.has_awake()) costs = &host.awake();
  if (regime == CallRegime::kSharedCores && host.has_shared_cores()) costs = &host.shared_cores();
  CallTerms call{&link, t.latency_steps,
                 costs != nullptr ? costs->latency_seconds() : link.latency_seconds(),
                 costs != nullptr ? costs->bandwidth() : link.bandwidth(),
                 WireBytes(kind, algorithm, bytes, group_ranks)};
  // A recv is its send's other end.
  const char* name =
      CommCallName(kind == CommCall::kRecv ? CommCall::kSend : kind);
  const auto& collectives = costs != nullptr ? costs->collective() : link.collective();
  for (const proto::CollectiveCost& c : collectives) {
    if (c.kind() == name) {
      call.alpha = c.latency_seconds();
      call.beta = c.bandwidth();
    }
  }
  return call;
}

double CommModel::CommSeconds(CommCall kind, CommAlgorithm algorithm, int64_t bytes,
                              const std::vector<int>& group_ranks, CallRegime regime,
                              double idle_seconds, bool charge_after_idle,
                              double carried_credit_seconds) const {
  if (group_ranks.size() <= 1) return 0;
  const CallTerms t = TermsFor(kind, algorithm, bytes, group_ranks, regime);
  const proto::Link& link = *t.link;
  const double after_idle = charge_after_idle ? AfterIdleSeconds(link, idle_seconds) : 0;
  if (link.has_burst_bytes()) {
    return ShapeCall(link, t.latency_steps, t.alpha, t.beta, t.wire_bytes,
                     ShaperCreditAtStart(link, idle_seconds, carried_credit_seconds))
               .seconds +
           after_idle;
  }
  const double seconds = t.latency_steps * t.alpha + t.wire_bytes / t.beta;
  if (!link.has_sustained_bandwidth()) return seconds + after_idle;
  return std::max(seconds, t.wire_bytes / link.sustained_bandwidth()) + after_idle;
}

double CommModel::ShaperCreditAfter(CommCall kind, CommAlgorithm algorithm, int64_t bytes,
                                    const std::vector<int>& group_ranks, CallRegime regime,
                                    double idle_seconds, double carried_credit_seconds) const {
  if (group_ranks.size() <= 1) return carried_credit_seconds;
  const CallTerms t = TermsFor(kind, algorithm, bytes, group_ranks, regime);
  const proto::Link& link = *t.link;
  if (!link.has_burst_bytes()) return 0;
  const ShapedCall call =
      ShapeCall(link, t.latency_steps, t.alpha, t.beta, t.wire_bytes,
                ShaperCreditAtStart(link, idle_seconds, carried_credit_seconds));
  return call.credit_bytes / link.sustained_bandwidth();
}

double AfterIdleSeconds(const proto::Link& link, double idle_seconds) {
  const auto& points = link.after_idle();
  if (points.empty()) return 0;
  if (idle_seconds <= points[0].idle_seconds()) return points[0].extra_seconds();
  for (int i = 1; i < points.size(); ++i) {
    const proto::IdleCost& a = points[i - 1];
    const proto::IdleCost& b = points[i];
    if (idle_seconds <= b.idle_seconds()) {
      const double f = (idle_seconds - a.idle_seconds()) / (b.idle_seconds() - a.idle_seconds());
      return a.extra_seconds() + f * (b.extra_seconds() - a.extra_seconds());
    }
  }
  return points[points.size() - 1].extra_seconds();
}

double CommModel::WireBytes(CommCall kind, CommAlgorithm algorithm, int64_t bytes,
                            const std::vector<int>& group_ranks) const {
  const int n = static_cast<int>(group_ranks.size());
  if (n <= 1) return 0;
  return LinkByteFactor(TermsOf(kind, algorithm, n), LinkAt(LevelOf(group_ranks)).half_duplex()) *
         static_cast<double>(bytes);
}

StatusOr<double> CommModel::OpCommSeconds(
    const std::string& op_type, const OpWork& work, CommAlgorithm algorithm,
    const std::vector<int>& group_ranks) const {
  LOOM_ASSIGN_OR_RETURN(CommCall kind, CollectiveCallOf(op_type));
  if (work.comm_calls <= 0) {
    return InvalidArgument("op type '", op_type,
                           "' communicates but its work counts no calls");
  }
  return work.comm_calls *
         CommSeconds(kind, algorithm, work.comm_bytes, group_ranks);
}

}  // namespace loom
