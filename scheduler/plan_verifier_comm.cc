// Checks 5 and 6 of the plan verifier, across ranks: each send pairs with
// its recv, and each group issues the same collectives.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "framework/op_registry.h"
#include "framework/shape_inference.h"
#include "scheduler/plan_verifier_internal.h"

namespace loom {
namespace plan_verifier_internal {
namespace {

// An int or string attribute as text, "" when absent; for comparing the
// collective attributes that must agree across a group.
std::string AttrText(const Op& op, const std::string& name) {
  const proto::Attr* a = FindAttrOrDefault(op.desc(), name);
  if (a == nullptr) return "";
  switch (a->type()) {
    case proto::INT:
      return StrCat(a->i());
    case proto::LONG:
      return StrCat(a->l());
    case proto::STRING:
      return a->s();
    default:
      return StrCat("<", proto::AttrType_Name(a->type()), ">");
  }
}

// What a collective call must agree on across its group.
struct CollectiveCall {
  std::string type;
  int micro_batch = 0;
  std::vector<TensorMeta> inputs;
  std::string reduce_op, root, nranks, axis;

  bool operator==(const CollectiveCall& o) const {
    return type == o.type && micro_batch == o.micro_batch &&
           inputs == o.inputs && reduce_op == o.reduce_op && root == o.root &&
           nranks == o.nranks && axis == o.axis;
  }
  std::string ToString() const {
    std::string s = StrCat(type, ", micro-batch ", micro_batch, ", inputs [");
    for (size_t i = 0; i < inputs.size(); ++i) {
      s += StrCat(i ? ", " : "", MetaToString(inputs[i]));
    }
    s += "]";
    if (!reduce_op.empty()) s += StrCat(", reduce_op ", reduce_op);
    if (!root.empty()) s += StrCat(", root ", root);
    if (!nranks.empty()) s += StrCat(", nranks ", nranks);
    if (!axis.empty()) s += StrCat(", axis ", axis);
    return s;
  }
};

TensorMeta SendMeta(const OpInfo& send) {
  return MetaOf(*send.op->block()->FindVar(*send.var));
}

TensorMeta RecvMeta(const OpInfo& recv) {
  const Op& o = *recv.op;
  return TensorMeta{static_cast<DataType>(o.GetAttr<int32_t>("dtype")),
                    o.GetAttr<std::vector<int64_t>>("out_shape")};
}

CollectiveCall Call(const Op& o, int micro_batch) {
  CollectiveCall call;
  call.type = o.type();
  call.micro_batch = micro_batch;
  for (const auto& slot : o.desc().inputs()) {
    for (const std::string& v : slot.vars()) {
      if (!v.empty()) call.inputs.push_back(MetaOf(*o.block()->FindVar(v)));
    }
  }
  call.reduce_op = AttrText(o, "reduce_op");
  call.root = AttrText(o, "root");
  call.nranks = AttrText(o, "nranks");
  call.axis = AttrText(o, "axis");
  return call;
}

}  // namespace

// ---- Sends, recvs and collectives, in execution order -----------------------
void PlanVerifier::CollectCommunication() {
  sends_.assign(static_cast<size_t>(world()) * layout_.pp * 2, {});
  recvs_.assign(sends_.size(), {});
  sequences_.assign(static_cast<size_t>(world()) * kNumRings, {});
  groups_.clear();
  group_of_.assign(static_cast<size_t>(world()) * kNumRings, -1);
  std::map<std::vector<int>, int> group_index;
  for (int r = 0; r < world(); ++r) {
    const RankCoords& c = rank(r).coords;
    const RankInfo& info = ranks_[r];
    for (int j = 0; j < static_cast<int>(info.jobs.size()); ++j) {
      const std::vector<OpInfo>& ops = info.jobs[j]->ops;
      const auto [begin, end] = OpsOf(r, j);
      for (int k = begin; k < end; ++k) {
        const OpInfo& oi = ops[k];
        switch (oi.kind) {
          case OpKind::kSend:
            sends_[Channel(layout_.RankAtStage(c, oi.peer), c.pp, oi.ring)].push_back(
                {r, j, k});
            break;
          case OpKind::kRecv:
            recvs_[Channel(r, oi.peer, oi.ring)].push_back({r, j, k});
            break;
          case OpKind::kCollective:
            Sequence(r, oi.ring).push_back({r, j, k});
            break;
          case OpKind::kCompute:
            break;
        }
      }
    }
    for (RingId ring : kAllRings) {
      std::vector<int> members = RingMembers(layout_, r, ring);
      if (members.empty()) continue;
      auto [it, fresh] = group_index.emplace(members, static_cast<int>(groups_.size()));
      if (fresh) groups_.push_back(std::move(members));
      group_of_[r * kNumRings + ring - 1] = it->second;
    }
  }
}

// ---- 5. Transfers -----------------------------------------------------------
Status PlanVerifier::CheckTransfers() {
  // Counts first: an unmatched transfer also shifts every later pairing.
  for (size_t ch = 0; ch < sends_.size(); ++ch) {
    const std::vector<OpRef>& sends = sends_[ch];
    const std::vector<OpRef>& recvs = recvs_[ch];
    if (sends.size() == recvs.size()) continue;
    const int dst = static_cast<int>(ch) / 2 / layout_.pp;
    const int src = layout_.RankAtStage(rank(dst).coords,
                                        static_cast<int>(ch) / 2 % layout_.pp);
    const std::string counts =
        StrCat("rank ", src, " sends ", sends.size(), " tensors to rank ",
               dst, ", which receives ", recvs.size(), " from it",
               ch % 2 ? " (gradients, on the pp_grad ring)" : "");
    if (sends.size() > recvs.size()) {
      const OpRef& s = sends[recvs.size()];
      return InvalidArgument(Where(s), ": sends var '", *op(s).var, "' to ",
                             RankName(dst),
                             ", which never receives it: ", counts);
    }
    const OpRef& rv = recvs[sends.size()];
    return InvalidArgument(Where(rv), ": receives var '", *op(rv).var,
                           "' from ", RankName(src),
                           ", which never sends it: ", counts);
  }
  for (size_t ch = 0; ch < sends_.size(); ++ch) {
    for (size_t i = 0; i < sends_[ch].size(); ++i) {
      const OpRef& s = sends_[ch][i];
      const OpRef& rv = recvs_[ch][i];
      const std::string& var = *op(s).var;
      const int mb = job(s.rank, s.job).micro_batch;
      const TensorMeta meta = SendMeta(op(s));
      const std::string& rvar = *op(rv).var;
      const int rmb = job(rv.rank, rv.job).micro_batch;
      const TensorMeta rmeta = RecvMeta(op(rv));
      if (var == rvar && mb == rmb && meta == rmeta) continue;
      std::vector<std::string> differ;
      if (var != rvar) differ.push_back("var");
      if (mb != rmb) differ.push_back("micro-batch");
      if (meta.dtype != rmeta.dtype) differ.push_back("dtype");
      if (meta.shape != rmeta.shape) differ.push_back("shape");
      std::string what;
      for (const std::string& d : differ)
        what += (what.empty() ? "" : ", ") + d;
      return InvalidArgument(
          Where(s), ": sends var '", var, "' (micro-batch ", mb, ", ",
          MetaToString(meta), "), but its matching recv (transfer ", i,
          " of ", sends_[ch].size(), " between them), ", Where(rv),
          ", receives '", rvar, "' (micro-batch ", rmb, ", ",
          MetaToString(rmeta), "); they differ in ", what);
    }
    stats_.transfers += static_cast<int64_t>(sends_[ch].size());
  }
  return Status::OK();
}

// ---- 6. Collectives ---------------------------------------------------------
Status PlanVerifier::CheckCollectives() {
  auto call = [&](const OpRef& ref) {
    return Call(*op(ref).op, job(ref.rank, ref.job).micro_batch);
  };
  // A rank that issues collectives on a ring it has no group on.
  for (int r = 0; r < world(); ++r) {
    for (RingId ring : kAllRings) {
      if (Group(r, ring) < 0 && !Sequence(r, ring).empty()) {
        return InvalidArgument(Where(Sequence(r, ring).front()), ": a collective on ring ",
                               RingName(ring), ", but ", RankName(r), " has no ",
                               RingName(ring), " group");
      }
    }
  }
  for (RingId ring : kAllRings) {
    std::vector<char> checked(groups_.size(), 0);
    for (int r = 0; r < world(); ++r) {
      const int g = Group(r, ring);
      if (g < 0 || checked[g]) continue;
      checked[g] = 1;
      const std::vector<int>& members = groups_[g];
      const int size = static_cast<int>(members.size());
      // nranks, where an op has it, is the group's size.
      for (int m : members) {
        for (const OpRef& ref : Sequence(m, ring)) {
          const proto::Attr* n =
              FindAttrOrDefault(op(ref).op->desc(), "nranks");
          if (n != nullptr && n->type() == proto::INT && n->i() != size) {
            return InvalidArgument(Where(ref), ": attribute nranks is ",
                                   n->i(), " but its ", RingName(ring),
                                   " group has ", size, " ranks");
          }
        }
      }
      const int a = members[0];
      const std::vector<OpRef>& first = Sequence(a, ring);
      stats_.collectives += static_cast<int64_t>(first.size());
      for (int i = 1; i < size; ++i) {
        const int b = members[i];
        const std::vector<OpRef>& other = Sequence(b, ring);
        const size_t n = std::min(first.size(), other.size());
        for (size_t k = 0; k < n; ++k) {
          const CollectiveCall ca = call(first[k]);
          const CollectiveCall cb = call(other[k]);
          if (ca == cb) continue;
          return InvalidArgument(Where(first[k]), ": collective ", k,
                                 " on ring ", RingName(ring), " (",
                                 ca.ToString(), ") does not match ",
                                 Where(other[k]), " (", cb.ToString(), ")");
        }
        if (first.size() != other.size()) {
          const bool a_longer = first.size() > other.size();
          const OpRef& extra = a_longer ? first[n] : other[n];
          return InvalidArgument(
              Where(extra), ": collective ", n, " on ring ", RingName(ring),
              " has no counterpart on ", RankName(a_longer ? b : a), ": ",
              RankName(a), " issues ", first.size(), " collectives on ring ",
              RingName(ring), " but ", RankName(b), " issues ", other.size());
        }
      }
    }
  }
  return Status::OK();
}

}  // namespace plan_verifier_internal
}  // namespace loom
