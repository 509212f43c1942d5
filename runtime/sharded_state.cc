#include "runtime/sharded_state.h"

#include <algorithm>
#include <cstring>

#include "framework/shape_inference.h"

namespace loom {
namespace {

// Where the bucket's elements [lo, hi) meet member `m`'s: the member's
// first element there and how many.
struct Overlap {
  int64_t begin = 0, count = 0;
};
Overlap Meet(const ShardedBucket::Member& m, int64_t lo, int64_t hi) {
  const int64_t n = NumElements(m.shape);
  const int64_t b = std::max(lo, m.offset), e = std::min(hi, m.offset + n);
  return e > b ? Overlap{b - m.offset, e - b} : Overlap{};
}

}  // namespace

std::vector<ShardedBucket> ShardedBucketsOf(const std::vector<const Block*>& blocks) {
  std::map<std::string, std::vector<ShardedBucket::Member>> members;  // buffer -> members
  for (const Block* block : blocks) {
    for (const auto& entry : block->vars()) {
      const std::string& name = entry.first;
      const proto::VarDesc& var = entry.second;
      if (!var.has_flat() || var.flat().shard_ring() >= 0 || !var.is_parameter()) continue;
      auto& list = members[var.flat().buffer()];
      if (std::none_of(list.begin(), list.end(), [&](const auto& m) { return m.param == name; })) {
        list.push_back({name, var.flat().offset(), MetaOf(var).shape});
      }
    }
  }
  std::vector<ShardedBucket> out;
  for (const Block* block : blocks) {
    for (const Op* op : block->ops()) {
      if (!op->HasRole(role::kOptimize) || !op->HasInput("Param")) continue;
      const proto::VarDesc* p = block->FindVar(op->Input("Param"));
      if (p == nullptr || !p->has_flat() || p->flat().shard_ring() < 0) continue;
      const std::string& buffer = p->flat().buffer();
      const proto::VarDesc* whole = block->FindVar(buffer);
      ShardedBucket b;
      b.shard = NumElements(MetaOf(*p).shape);
      b.members = members[buffer];
      std::sort(b.members.begin(), b.members.end(),
                [](const auto& x, const auto& y) { return x.offset < y.offset; });
      for (const auto& slot : op->desc().inputs()) {
        if (slot.name() == "Param" || slot.vars_size() != 1 ||
            !op->HasOutput(slot.name() + "Out") || op->Output(slot.name() + "Out") != slot.vars(0)) {
          continue;
        }
        const std::string& v = slot.vars(0);
        const proto::VarDesc* var = block->FindVar(v);
        ShardedBucket::StateVar sv;
        sv.suffix = v.compare(0, buffer.size(), buffer) == 0 ? v.substr(buffer.size()) : "." + v;
        sv.split = var != nullptr && MetaOf(*var).shape == MetaOf(*p).shape;
        b.state[v] = sv;
      }
      // ZeRO-3: the whole is a temporary, so the shard is the parameters'
      // only copy.
      if (whole != nullptr && !whole->persistable()) {
        ShardedBucket::StateVar params;
        params.split = true;
        params.parameter = true;
        b.state[op->Input("Param")] = params;
      }
      out.push_back(std::move(b));
    }
  }
  return out;
}

bool HoldsParameters(const ShardedBucket& bucket) {
  return std::any_of(bucket.state.begin(), bucket.state.end(),
                     [](const auto& entry) { return entry.second.parameter; });
}

Status UnshardBucket(const ShardedBucket& bucket,
                     const std::map<std::string, std::vector<const Tensor*>>& parts,
                     std::map<std::string, Tensor>* out, std::map<std::string, Tensor>* params) {
  for (const auto& [var, sv] : bucket.state) {
    auto it = parts.find(var);
    if (it == parts.end() || it->second.empty()) {
      return Internal("sharded state ", var, ": no rank's part of it was gathered");
    }
    const std::vector<const Tensor*>& by_dp = it->second;
    for (size_t d = 0; d < by_dp.size(); ++d) {
      if (by_dp[d] == nullptr || by_dp[d]->dtype() != proto::FP32 ||
          by_dp[d]->numel() != (sv.split ? bucket.shard : by_dp[0]->numel())) {
        return Internal("sharded state ", var, ": dp rank ", d, "'s part is missing or ",
                        "not the bucket's shard of ", bucket.shard, " elements");
      }
    }
    for (const ShardedBucket::Member& m : bucket.members) {
      Tensor t(TensorMeta{proto::FP32, sv.split ? m.shape : by_dp[0]->shape()});
      float* dst = t.data<float>();
      if (!sv.split) {
        std::memcpy(dst, by_dp[0]->raw_data(), t.bytes());
      } else {
        for (size_t d = 0; d < by_dp.size(); ++d) {
          const int64_t lo = static_cast<int64_t>(d) * bucket.shard;
          const Overlap o = Meet(m, lo, lo + bucket.shard);
          if (o.count == 0) continue;
          std::memcpy(dst + o.begin, by_dp[d]->data<float>() + (m.offset + o.begin - lo),
                      o.count * sizeof(float));
        }
      }
      (*(sv.parameter ? params : out))[m.param + sv.suffix] = std::move(t);
    }
  }
  return Status::OK();
}

Status ShardIntoBucket(const ShardedBucket& bucket, int dp_rank,
                       const std::map<std::string, Tensor>& state,
                       const std::map<std::string, Tensor>& params,
                       const std::function<StatusOr<Tensor>(const std::string& name,
                                                            const Tensor& full)>& mp_shard,
                       const std::map<std::string, Tensor*>& held, const std::string& source,
                       std::set<std::string>* used) {
  const int64_t lo = static_cast<int64_t>(dp_rank) * bucket.shard;
  for (const auto& [var, sv] : bucket.state) {
    auto h = held.find(var);
    if (h == held.end() || h->second == nullptr || !h->second->initialized()) {
      return Internal("sharded state ", var, " has no tensor on dp rank ", dp_rank);
    }
    Tensor* t = h->second;
    if (sv.split) std::memset(t->raw_data(), 0, t->bytes());  // the padding stays zero
    for (const ShardedBucket::Member& m : bucket.members) {
      const std::string name = m.param + sv.suffix;
      const std::map<std::string, Tensor>& from = sv.parameter ? params : state;
      auto it = from.find(name);
      if (it == from.end()) {
        return InvalidArgument(source, " has no ", sv.parameter ? "parameter " : "optimizer state ",
                               name);
      }
      used->insert(name);
      // The rank's tensor-parallel shard of parameter-shaped state.
      Tensor mine = it->second;
      if (sv.split) {
        LOOM_ASSIGN_OR_RETURN(mine, mp_shard(m.param, it->second));
      }
      if (mine.dtype() != proto::FP32 ||
          (sv.split ? mine.shape() != m.shape : mine.numel() != t->numel())) {
        return InvalidArgument(source, ": ", name, " is ", MetaToString(mine.meta()),
                               " but this model's is ",
                               MetaToString(TensorMeta{proto::FP32, sv.split ? m.shape : t->shape()}));
      }
      if (!sv.split) {
        std::memcpy(t->raw_data(), mine.raw_data(), t->bytes());
        continue;
      }
      const Overlap o = Meet(m, lo, lo + bucket.shard);
      if (o.count == 0) continue;
      std::memcpy(t->data<float>() + (m.offset + o.begin - lo), mine.data<float>() + o.begin,
                  o.count * sizeof(float));
    }
  }
  return Status::OK();
}

}  // namespace loom
