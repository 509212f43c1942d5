#include "runtime/tune_space.h"

#include <algorithm>
#include <numeric>

#include "runtime/tune_bounds.h"
#include "scheduler/schedule.h"

namespace loom {
namespace {

std::vector<int> Divisors(int64_t n) {
  std::vector<int> out;
  for (int64_t d = 1; d <= n && d <= kMaxWorldSize; ++d) {
    if (n % d == 0) out.push_back(static_cast<int>(d));
  }
  return out;
}


std::vector<std::string> RecomputeChoices(const TuneSpace& space, const proto::Strategy& base) {
  if (!space.recompute) return {base.recompute().granularity()};
  return {"none", "selective", "full"};
}

std::vector<bool> OnOff(bool search, bool base_value, bool applies) {
  if (!applies) return {false};
  if (!search) return {base_value};
  return {false, true};
}

// The knobs within a layout and schedule: ZeRO stage, recomputation,
// sequence parallelism and op-split, as `space` turns them.
std::vector<proto::Strategy> MemoryAndOverlapVariants(const GptConfig& config,
                                                      const TuneSpace& space,
                                                      const proto::Strategy& layout) {
  const int dp = layout.dp().degree(), mp = layout.mp().degree();
  std::vector<int> stages = {dp > 1 ? layout.sharding().stage() : 0};
  if (space.sharding && dp > 1) stages = {0, 1, 2, 3};
  std::vector<proto::Strategy> out;
  for (int stage : stages) {
    for (const std::string& rc : RecomputeChoices(space, layout)) {
      for (bool sp : OnOff(space.sequence_parallel, layout.mp().sequence_parallel(),
                           mp > 1 && config.seq_len % mp == 0)) {
        for (bool split : OnOff(space.op_split, layout.passes().op_split(), mp > 1)) {
          proto::Strategy s = layout;
          s.mutable_sharding()->set_stage(stage);
          s.mutable_recompute()->set_granularity(rc);
          s.mutable_mp()->set_sequence_parallel(sp);
          s.mutable_passes()->set_op_split(split);
          if (!split) s.mutable_passes()->clear_op_split_parts();
          out.push_back(std::move(s));
        }
      }
    }
  }
  return out;
}

// Bytes in a candidate's name, to three digits or more: exact below 100
// kB, where the refinement's halvings of a small model's buckets differ by
// a few hundred bytes.
std::string ShortBytes(int64_t bytes) {
  if (bytes < 100000) return StrCat(bytes, "B");
  if (bytes < 100000000) return StrCat((bytes + 500) / 1000, "kB");
  return StrCat((bytes + 500000) / 1000000, "MB");
}

}  // namespace

std::vector<size_t> CheapestBoundFirst(const std::vector<TuneCandidate>& candidates) {
  std::vector<size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return candidates[a].time_bound_s < candidates[b].time_bound_s;
  });
  return order;
}

std::string TuneCandidateName(const proto::Strategy& s) {
  std::string name = StrCat("dp", s.dp().degree(), " mp", s.mp().degree(), " pp",
                            s.pipeline().degree(), " m", s.pipeline().micro_batches(), " ",
                            s.pipeline().schedule_mode());
  if (s.pipeline().vpp_degree() > 1) name += StrCat("x", s.pipeline().vpp_degree());
  if (s.sharding().stage() > 0) name += StrCat(" zero", s.sharding().stage());
  if (s.recompute().granularity() != "none") {
    name += " rc=" + s.recompute().granularity();
    // The first this many layers of each chunk (tune_refine.h).
    if (s.recompute().num_layers() > 0) name += StrCat(":", s.recompute().num_layers());
  }
  if (s.mp().sequence_parallel()) name += " sp";
  if (s.passes().op_split()) name += " op-split";
  // The refinement's knobs, where they are not the defaults.
  if (s.dp().bucket_size_bytes() > 0) {
    name += " bucket=" + ShortBytes(s.dp().bucket_size_bytes());
  }
  if (s.sharding().stage() > 0 && s.sharding().fetch_mode() != "all_gather") {
    name += " fetch=" + s.sharding().fetch_mode();
  }
  if (s.sharding().stage() == 3) {
    if (s.sharding().prefetch_depth() != 1) {
      name += StrCat(" prefetch=", s.sharding().prefetch_depth());
    }
    const int64_t keep = s.sharding().keep_gathered_bytes();
    if (keep < 0) name += " keep=all";
    if (keep > 0) name += " keep=" + ShortBytes(keep);
  }
  return name;
}

StatusOr<TuneSpaceResult> EnumerateTuneSpace(const GptConfig& config,
                                             const OptimizerConfig& optimizer,
                                             const proto::Strategy& base, const CostContext& costs,
                                             const TuneSpace& space, int64_t memory_limit_bytes) {
  if (space.devices < 1 || space.devices > kMaxWorldSize) {
    return InvalidArgument("devices must be 1..", kMaxWorldSize, ", got ", space.devices);
  }
  if (space.max_vpp < 1) return InvalidArgument("max_vpp must be at least 1, got ", space.max_vpp);
  std::vector<const ScheduleInfo*> pipelined;
  if (space.schedules.empty()) {
    for (const ScheduleInfo& s : Schedules()) pipelined.push_back(&s);
  }
  for (const std::string& name : space.schedules) {
    LOOM_ASSIGN_OR_RETURN(const ScheduleInfo* s, FindSchedule(name));
    pipelined.push_back(s);
  }
  TuneSpaceResult out;
  TuneBounds bounds_of(config, optimizer, base, costs);
  auto prune = [&](const std::string& rule) {
    ++out.considered;
    ++out.pruned[rule];
  };
  for (int mp : Divisors(space.devices)) {
    for (int pp : Divisors(space.devices / mp)) {
      const int dp = space.devices / mp / pp;
      // Whole layouts that cannot hold the model: one candidate each.
      if (config.num_heads % mp != 0 || config.hidden % mp != 0 || config.ffn_hidden % mp != 0 ||
          config.vocab_size % mp != 0) {
        prune("mp does not divide the heads, hidden, ffn_hidden or vocabulary");
        continue;
      }
      if (pp > config.num_layers) {
        prune("more pipeline stages than layers");
        continue;
      }
      if (config.batch_size % dp != 0) {
        prune("dp does not divide the batch");
        continue;
      }
      for (int m : Divisors(config.batch_size / dp)) {
        std::vector<const ScheduleInfo*> schedules;
        for (const ScheduleInfo* s : pipelined) {
          // One stage: only tensor-parallel overlap changes anything.
          const bool one_stage_choice =
              s->name == std::string("1F1B") || (mp > 1 && s->name == std::string("1F1B-overlap"));
          if (pp > 1 || one_stage_choice) schedules.push_back(s);
        }
        for (const ScheduleInfo* schedule : schedules) {
          std::vector<int> vpps = {1};
          if (schedule->v_shape) {
            vpps = {2};  // a V has two arms
          } else if (schedule->uses_chunks) {
            vpps.clear();
            for (int v = 2; v <= space.max_vpp; ++v) vpps.push_back(v);
          }
          for (int vpp : vpps) {
            // VPP splits the layers evenly; a V balances them and needs a
            // layer a chunk.
            if (schedule->v_shape ? config.num_layers < 2 * pp
                                  : config.num_layers % (static_cast<int64_t>(pp) * vpp) != 0) {
              prune(schedule->v_shape ? "fewer layers than virtual stages"
                                      : "layers not divisible by stages x chunks");
              continue;
            }
            // MakeStrategy sets every layout field, so it overrides base's.
            proto::Strategy layout = base;
            layout.MergeFrom(MakeStrategy(dp, mp, pp, m, schedule->name, vpp));
            for (const proto::Strategy& s : MemoryAndOverlapVariants(config, space, layout)) {
              const Status valid = ValidateStrategy(s, space.devices);
              if (!valid.ok()) {
                // The field at fault names the rule.
                const std::string& message = valid.message();
                prune("invalid " + message.substr(0, message.find(' ')));
                continue;
              }
              LOOM_ASSIGN_OR_RETURN(const CandidateBounds bounds, bounds_of.Of(s));
              if (memory_limit_bytes > 0 && bounds.memory_bytes > memory_limit_bytes) {
                prune("its memory bound exceeds the limit");
                continue;
              }
              ++out.considered;
              out.candidates.push_back(
                  {s, TuneCandidateName(s), bounds.time_s, bounds.memory_bytes});
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace loom
