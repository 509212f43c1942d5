// Between a trainer's scopes and a TrainingState of full tensors by name:
// the vars a checkpoint holds (parameters and optimizer state), gathered from the ranks that
// hold their tensor-parallel shards and sliced back out for any layout.
#ifndef LOOM_RUNTIME_TRAINING_STATE_H_
#define LOOM_RUNTIME_TRAINING_STATE_H_

#include <set>
#include <string>
#include <vector>

#include "executor/scope.h"
#include "framework/program.h"
#include "runtime/checkpoint.h"
#include "runtime/sharded_state.h"

namespace loom {

// One rank's view of the state: the program declaring its persistable
// vars, which of them are optimizer state (OptimizerStateVars of its
// programs), the vars tensor parallelism splits (MpShardedVars) across
// `mp` ranks, its place among them, and the scope holding the tensors.
struct StateHolder {
  const Program* startup = nullptr;
  std::set<std::string> optimizer_state;
  std::map<std::string, int> sharded;
  int mp = 1;
  int mp_rank = 0;
  Scope* scope = nullptr;
  // ZeRO: the buckets whose state this rank holds 1/dp of
  // (runtime/sharded_state.h), and its place among the `dp` ranks sharing
  // them (the dp group, or under hybrid sharding the rank's block of it)
  // and among the pipeline stages.
  std::vector<ShardedBucket> buckets;
  int dp = 1;
  int dp_rank = 0;
  int pp_rank = 0;
};

// One rank's state as it holds it: tensor-parallel shards, with what it
// takes to place them in the full tensors.
struct RankShards {
  int mp = 1;
  int mp_rank = 0;
  // Sharded buckets (StateHolder): MergeShards joins every dp rank's part
  // of them into per-parameter state.
  std::vector<ShardedBucket> buckets;
  int dp = 1;
  int dp_rank = 0;
  int pp_rank = 0;
  std::map<std::string, int> sharded;  // var -> the dim split across mp
  TrainingState tensors;               // as the rank holds them
};

// `holder`'s state vars (the tensors share the scope's storage).
StatusOr<RankShards> ShardsOf(const StateHolder& holder);

// Full tensors of every state var the ranks hold between them (dp replicas
// and tied copies taken once). Each sharded var must arrive from all `mp`
// of its shards, and each ZeRO bucket from all its dp ranks; an error names
// the first that does not.
StatusOr<TrainingState> MergeShards(const std::vector<RankShards>& ranks);

// MergeShards of the holders' ShardsOf.
StatusOr<TrainingState> GatherState(const std::vector<StateHolder>& holders);

// A rank's shards as a safetensors file and back, for ranks in other
// processes to hand theirs to the one that writes the checkpoint.
std::string EncodeRankShards(const RankShards& shards);
StatusOr<RankShards> DecodeRankShards(const std::string& bytes, const std::string& origin);

// Sets every state var of `holder` from `state`, slicing its shard out of
// the full tensor, and adds the names it set to `used`. An error names the
// var `source` lacks or holds with another shape or dtype.
Status ScatterState(const TrainingState& state, const StateHolder& holder,
                    const std::string& source, std::set<std::string>* used);

// Makes the low-precision weight copies (VarDesc.cast_of) that `startup`
// declares again from their parameters in `scope`: checkpoints leave them
// out, so a restore makes them from the parameters it set.
Status RemakeWeightCopies(const Program& startup, Scope* scope);

// Fails, naming one, if `state` holds a tensor not in `used`: a checkpoint
// of another model or optimizer, whose state would be silently dropped.
Status CheckAllUsed(const TrainingState& state, const std::set<std::string>& used,
                    const std::string& source);

}  // namespace loom

#endif  // LOOM_RUNTIME_TRAINING_STATE_H_
