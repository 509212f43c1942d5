#include "runtime/training_state.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "executor/serial_executor.h"
#include "runtime/safetensors.h"


namespace loom {
namespace {

// The parameters whose only copy is a ZeRO-3 bucket's shards.
std::set<std::string> ParametersHeldInShards(const std::vector<ShardedBucket>& buckets) {
  std::set<std::string> out;
  for (const ShardedBucket& b : buckets) {
    if (!HoldsParameters(b)) continue;
    for (const ShardedBucket::Member& m : b.members) out.insert(m.param);
  }
  return out;
}

// A state var's map in TrainingState, or null for a var that is not state.
template <typename State>
auto* MapFor(State& state, const StateHolder& holder, const proto::VarDesc& var) {
  using Map = decltype(&state.parameters);
  if (var.is_parameter()) return &state.parameters;
  return holder.optimizer_state.count(var.name()) ? &state.optimizer : Map{nullptr};
}

// Copies between a shard and its place in the full tensor: the shard is
// rows [mp_rank * part, (mp_rank + 1) * part) of dim `axis`.
void CopyShard(const Tensor& from, Tensor* to, int axis, int mp_rank, bool into_full) {
  const Tensor& shard = into_full ? from : *to;
  const Tensor& full = into_full ? *to : from;
  int64_t outer = 1, inner = SizeOf(shard.dtype());
  for (int d = 0; d < axis; ++d) outer *= shard.dim(d);
  for (int d = axis + 1; d < shard.rank(); ++d) inner *= shard.dim(d);
  const int64_t part = shard.dim(axis) * inner;
  const int64_t row = full.dim(axis) * inner;
  auto* full_bytes = static_cast<uint8_t*>(const_cast<void*>(full.raw_data()));
  auto* shard_bytes = static_cast<uint8_t*>(const_cast<void*>(shard.raw_data()));
  for (int64_t o = 0; o < outer; ++o) {
    uint8_t* f = full_bytes + o * row + mp_rank * part;
    uint8_t* s = shard_bytes + o * part;
    into_full ? std::memcpy(f, s, part) : std::memcpy(s, f, part);
  }
}

// The full shape of `shard` when split `mp` ways along `axis`.
Shape FullShape(const Tensor& shard, int axis, int mp) {
  Shape shape = shard.shape();
  if (axis >= 0) shape.at(axis) *= mp;
  return shape;
}

int AxisOf(const StateHolder& holder, const std::string& name) {
  if (holder.mp <= 1) return -1;
  auto it = holder.sharded.find(name);
  return it == holder.sharded.end() ? -1 : it->second;
}

}  // namespace

StatusOr<RankShards> ShardsOf(const StateHolder& h) {
  RankShards out;
  out.mp = h.mp;
  out.mp_rank = h.mp_rank;
  out.buckets = h.buckets;
  out.dp = h.dp;
  out.dp_rank = h.dp_rank;
  out.pp_rank = h.pp_rank;
  const std::set<std::string> in_shards = ParametersHeldInShards(h.buckets);
  for (const auto& [name, var] : h.startup->global_block().vars()) {
    auto* map = MapFor(out.tensors, h, var);
    if (map == nullptr) continue;
    if (in_shards.count(name)) {
      const int axis = AxisOf(h, name);
      if (axis >= 0) out.sharded[name] = axis;
      continue;
    }
    const Tensor* t = h.scope->FindLocal(name);
    if (t == nullptr || !t->initialized()) {
      return Internal("state var ", name, " has no tensor on mp rank ", h.mp_rank);
    }
    (*map)[name] = *t;
    const int axis = AxisOf(h, name);
    if (axis >= 0) out.sharded[name] = axis;
  }
  // A ZeRO-3 shard, which the startup program does not declare.
  for (const ShardedBucket& b : h.buckets) {
    for (const auto& [var, sv] : b.state) {
      if (!sv.parameter) continue;
      const Tensor* t = h.scope->FindLocal(var);
      if (t == nullptr || !t->initialized()) {
        return Internal("parameter shard ", var, " has no tensor on dp rank ", h.dp_rank);
      }
      out.tensors.optimizer[var] = *t;
    }
  }
  return out;
}

namespace {

// Ranks holding ZeRO buckets joined, per (pp, mp) position, into one rank
// holding per-parameter state, as an unsharded run holds it; other ranks
// as they are.
StatusOr<std::vector<RankShards>> JoinBuckets(const std::vector<RankShards>& ranks) {
  std::vector<RankShards> out;
  std::map<std::pair<int, int>, std::vector<const RankShards*>> by_position;
  for (const RankShards& r : ranks) {
    if (r.buckets.empty()) {
      out.push_back(r);
    } else {
      by_position[{r.pp_rank, r.mp_rank}].push_back(&r);
    }
  }
  for (auto& [position, group] : by_position) {
    std::sort(group.begin(), group.end(),
              [](const RankShards* a, const RankShards* b) { return a->dp_rank < b->dp_rank; });
    const int dp = group[0]->dp;
    // Each dp rank once (a rank's shards may be handed over twice).
    group.erase(std::unique(group.begin(), group.end(),
                            [](const RankShards* a, const RankShards* b) {
                              return a->dp_rank == b->dp_rank;
                            }),
                group.end());
    for (int d = 0; d < dp; ++d) {
      if (d >= static_cast<int>(group.size()) || group[d]->dp_rank != d) {
        return Internal("sharded optimizer state of stage ", position.first, ", mp rank ",
                        position.second, ": dp rank ", d, "'s part was not gathered");
      }
    }
    RankShards joined = *group[0];
    for (const ShardedBucket& b : joined.buckets) {
      std::map<std::string, std::vector<const Tensor*>> parts;
      for (const auto& [var, sv] : b.state) {
        for (const RankShards* r : group) {
          auto it = r->tensors.optimizer.find(var);
          parts[var].push_back(it == r->tensors.optimizer.end() ? nullptr : &it->second);
        }
      }
      LOOM_RETURN_IF_ERROR(
          UnshardBucket(b, parts, &joined.tensors.optimizer, &joined.tensors.parameters));
      for (const auto& [var, sv] : b.state) {
        joined.tensors.optimizer.erase(var);
        if (!sv.split || sv.parameter) continue;
        for (const ShardedBucket::Member& m : b.members) {
          auto axis = joined.sharded.find(m.param);
          if (axis != joined.sharded.end()) joined.sharded[m.param + sv.suffix] = axis->second;
        }
      }
    }
    joined.buckets.clear();
    out.push_back(std::move(joined));
  }
  return out;
}

}  // namespace

StatusOr<TrainingState> MergeShards(const std::vector<RankShards>& sharded_ranks) {
  LOOM_ASSIGN_OR_RETURN(const std::vector<RankShards> ranks, JoinBuckets(sharded_ranks));
  TrainingState state;
  // The mp ranks whose shard of each sharded var arrived: all must.
  std::map<std::string, std::set<int>> shards_seen;
  std::map<std::string, int> degree;
  for (const RankShards& r : ranks) {
    for (auto [from, to] : {std::pair{&r.tensors.parameters, &state.parameters},
                            std::pair{&r.tensors.optimizer, &state.optimizer}}) {
      for (const auto& [name, t] : *from) {
        auto [it, made] = to->try_emplace(name);
        auto axis = r.sharded.find(name);
        if (axis != r.sharded.end() && (r.mp_rank < 0 || r.mp_rank >= r.mp ||
                                        axis->second < 0 || axis->second >= t.rank())) {
          return Internal("state var ", name, ": shard ", r.mp_rank, " of ", r.mp,
                          " along dim ", axis->second, " of ", MetaToString(t.meta()));
        }
        if (axis == r.sharded.end() || r.mp <= 1) {
          if (made) it->second.CopyFrom(t);
          continue;
        }
        if (made) it->second.Resize(TensorMeta{t.dtype(), FullShape(t, axis->second, r.mp)});
        if (it->second.shape() != FullShape(t, axis->second, r.mp)) {
          return Internal("state var ", name, ": mp rank ", r.mp_rank, "'s shard ",
                          MetaToString(t.meta()), " does not fit ",
                          MetaToString(it->second.meta()));
        }
        degree[name] = r.mp;
        // Once per mp rank: dp replicas hold equal copies.
        if (!shards_seen[name].insert(r.mp_rank).second) continue;
        CopyShard(t, &it->second, axis->second, r.mp_rank, /*into_full=*/true);
      }
    }
  }
  for (const auto& [name, seen] : shards_seen) {
    if (static_cast<int>(seen.size()) != degree[name]) {
      return Internal("state var ", name, ": ", seen.size(), " of its ", degree[name],
                      " tensor-parallel shards were gathered");
    }
  }
  return state;
}

StatusOr<TrainingState> GatherState(const std::vector<StateHolder>& holders) {
  std::vector<RankShards> ranks;
  for (const StateHolder& h : holders) {
    LOOM_ASSIGN_OR_RETURN(RankShards r, ShardsOf(h));
    ranks.push_back(std::move(r));
  }
  return MergeShards(ranks);
}

std::string EncodeRankShards(const RankShards& shards) {
  SafetensorsContents c;
  nlohmann::json sharded = shards.sharded;
  nlohmann::json parameters = nlohmann::json::array();
  for (const auto& [name, t] : shards.tensors.parameters) {
    c.tensors[name] = t;
    parameters.push_back(name);
  }
  for (const auto& [name, t] : shards.tensors.optimizer) c.tensors[name] = t;
  c.metadata = {{"mp", std::to_string(shards.mp)},
                {"mp_rank", std::to_string(shards.mp_rank)},
                {"sharded", sharded.dump()},
                {"parameters", parameters.dump()}};
  return EncodeSafetensors(c);
}

StatusOr<RankShards> DecodeRankShards(const std::string& bytes, const std::string& origin) {
  LOOM_ASSIGN_OR_RETURN(SafetensorsContents c, DecodeSafetensors(bytes, origin));
  RankShards out;
  const auto sharded = nlohmann::json::parse(c.metadata["sharded"], nullptr, false);
  const auto parameters = nlohmann::json::parse(c.metadata["parameters"], nullptr, false);
  if (!sharded.is_object() || !parameters.is_array()) {
    return DataLoss(origin, ": not a rank's shards (no 'sharded' and 'parameters' metadata)");
  }
  // Written by Loom, but read as any file is: a damaged one is refused,
  // never trusted to index memory.
  auto count = [&](const char* key, long lo, long hi) -> StatusOr<int> {
    const std::string& text = c.metadata[key];
    char* end = nullptr;
    const long v = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || v < lo || v > hi) {
      return DataLoss(origin, ": metadata ", key, " '", text, "' is not in [", lo, ", ", hi, "]");
    }
    return static_cast<int>(v);
  };
  LOOM_ASSIGN_OR_RETURN(out.mp, count("mp", 1, 1 << 20));
  LOOM_ASSIGN_OR_RETURN(out.mp_rank, count("mp_rank", 0, out.mp - 1));
  for (const auto& [name, axis] : sharded.items()) {
    auto t = c.tensors.find(name);
    if (!axis.is_number_integer() || axis.get<int64_t>() < 0 ||
        (t != c.tensors.end() && axis.get<int64_t>() >= t->second.rank())) {
      return DataLoss(origin, ": ", name, " is split along dim ", axis.dump(),
                      ", which it does not have");
    }
    out.sharded[name] = axis.get<int>();
  }
  std::set<std::string> is_parameter;
  for (const auto& name : parameters) {
    if (name.is_string()) is_parameter.insert(name.get<std::string>());
  }
  for (auto& [name, t] : c.tensors) {
    (is_parameter.count(name) ? out.tensors.parameters : out.tensors.optimizer)[name] =
        std::move(t);
  }
  return out;
}

Status ScatterState(const TrainingState& state, const StateHolder& holder,
                    const std::string& source, std::set<std::string>* used) {
  std::set<std::string> bucket_state;
  for (const ShardedBucket& b : holder.buckets) {
    for (const auto& [var, sv] : b.state) bucket_state.insert(var);
  }
  const std::set<std::string> in_shards = ParametersHeldInShards(holder.buckets);
  for (const auto& [name, var] : holder.startup->global_block().vars()) {
    const auto* map = MapFor(state, holder, var);
    if (map == nullptr || bucket_state.count(name) || in_shards.count(name)) continue;
    Tensor* t = holder.scope->FindLocal(name);
    if (t == nullptr || !t->initialized()) {
      return Internal("state var ", name, " has no tensor on mp rank ", holder.mp_rank);
    }
    auto it = map->find(name);
    if (it == map->end()) {
      return InvalidArgument(source, " has no ", var.is_parameter() ? "parameter " : "optimizer state ",
                             name);
    }
    const Tensor& full = it->second;
    const int axis = AxisOf(holder, name);
    const Shape want = FullShape(*t, axis, holder.mp);
    if (full.dtype() != t->dtype() || full.shape() != want) {
      return InvalidArgument(source, ": ", name, " is ", MetaToString(full.meta()),
                             " but this model's is ", MetaToString(TensorMeta{t->dtype(), want}));
    }
    used->insert(name);
    if (axis < 0) {
      std::memcpy(t->raw_data(), full.raw_data(), t->bytes());
    } else {
      CopyShard(full, t, axis, holder.mp_rank, /*into_full=*/false);
    }
  }
  // ZeRO buckets: this rank's part of each, from per-parameter state.
  auto mp_shard = [&](const std::string& param, const Tensor& full) -> StatusOr<Tensor> {
    const int axis = AxisOf(holder, param);
    if (axis < 0) return full;
    Shape shape = full.shape();
    if (axis >= full.rank() || shape[axis] % holder.mp != 0) {
      return InvalidArgument(source, ": state of ", param, " is ", MetaToString(full.meta()),
                             ", which does not split ", holder.mp, " ways along dim ", axis);
    }
    shape[axis] /= holder.mp;
    Tensor shard(TensorMeta{full.dtype(), shape});
    CopyShard(full, &shard, axis, holder.mp_rank, /*into_full=*/false);
    return shard;
  };
  for (const ShardedBucket& b : holder.buckets) {
    std::map<std::string, Tensor*> held;
    for (const auto& [var, sv] : b.state) held[var] = holder.scope->FindLocal(var);
    LOOM_RETURN_IF_ERROR(
        ShardIntoBucket(b, holder.dp_rank, state.optimizer, state.parameters, mp_shard, held,
                        source, used));
  }
  return Status::OK();
}

Status CheckAllUsed(const TrainingState& state, const std::set<std::string>& used,
                    const std::string& source) {
  for (const auto* map : {&state.parameters, &state.optimizer}) {
    for (const auto& [name, tensor] : *map) {
      if (!used.count(name)) {
        return InvalidArgument(source, " holds ", map == &state.parameters ? "parameter " : "optimizer state ",
                               name, ", which this run does not have (another model or optimizer)");
      }
    }
  }
  return Status::OK();
}

Status RemakeWeightCopies(const Program& startup, Scope* scope) {
  Program remake = startup.Clone();
  Block& block = remake.global_block();
  bool any = false;
  for (Op* op : block.OpVector()) {
    bool makes_copy = false;
    for (const std::string& out : op->OutputVars()) {
      const proto::VarDesc* var = block.FindVar(out);
      makes_copy |= var != nullptr && var->has_cast_of();
    }
    if (makes_copy) {
      any = true;
    } else {
      block.EraseOp(op);
    }
  }
  if (!any) return Status::OK();
  LOOM_ASSIGN_OR_RETURN(auto executor, SerialExecutor::Create(remake, scope));
  return executor->Run().WithContext("making the low-precision weight copies again");
}

}  // namespace loom
