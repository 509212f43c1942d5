#include "runtime/tune_space.h"

#include <algorithm>
#include <cmath>

#include "passes/amp.h"
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

// Bytes a parameter costs the rank holding it at least, whatever the plan:
// its fp32 copy (the parameter, or the master weight under O2), a gradient
// of at least 2 bytes, a bf16 copy under O2, and the optimizer's moments,
// each divided over dp as far as the ZeRO stage shards it.
double BytesPerParameter(const proto::Strategy& s, const OptimizerConfig& optimizer) {
  const int stage = s.sharding().stage();
  const double dp = std::max(1, s.dp().degree());
  const bool o2 = s.amp().level() == "O2";
  const double moments = optimizer.type == "adamw" ? 8 : 0;
  double bytes = moments / (stage >= 1 ? dp : 1);
  bytes += 4 / ((o2 ? stage >= 1 : stage >= 3) ? dp : 1);  // fp32 weights
  if (o2) bytes += 2 / (stage >= 3 ? dp : 1);              // the bf16 copy
  bytes += 2 / (stage >= 2 ? dp : 1);                      // gradients
  return bytes;
}

// What one layer of one micro-batch keeps for its backward at least, on a
// rank: under full recomputation its input (split along the sequence
// under sequence parallelism); under selective, also the QKV product and
// the MLP's two wide activations, which recomputing the attention core
// reads or leaves alone; with no recomputation, also the attention's
// probabilities (b x heads x s x s), which its context GEMM's gradient
// reads. A micro-batch of the stage's fewest layers is always in flight.
double KeptActivationBytes(const GptConfig& c, const proto::Strategy& s) {
  const double mp = s.mp().degree();
  const double bytes = s.amp().level() == "O0" ? 4 : 2;
  const double b = static_cast<double>(c.batch_size) / s.dp().degree() /
                   s.pipeline().micro_batches();
  const double tokens = b * static_cast<double>(c.seq_len);
  const std::string& rc = s.recompute().granularity();
  double elements = tokens * c.hidden / (s.mp().sequence_parallel() ? mp : 1);
  if (rc != "full") elements += tokens * (3.0 * c.hidden + 2.0 * c.ffn_hidden) / mp;
  if (rc == "none") elements += b * c.num_heads / mp * c.seq_len * c.seq_len;
  return elements * bytes;
}

struct Bounds {
  double time_s;
  int64_t memory_bytes;
};

// One micro-batch of the serial program, priced op by op on the cluster's
// cost model in the strategy's precision. Each op's price is its fixed
// cost (the kernel launch, which every rank holding a part of the op pays
// whole) and its work (which tensor parallelism divides): a rank's share
// is bounded below as long as the model prices a 1/k part of an op's work
// at no less than 1/k of it, as the roofline does.
struct PhaseCost {
  double fixed = 0, work = 0;
  void Add(double seconds, double launch) {
    const double f = std::min(seconds, launch);
    fixed += f;
    work += seconds - f;
  }
  // One rank's share where `mp` ranks split each op and `stages` split the ops.
  double Share(int mp, int stages) const { return (fixed + work / mp) / stages; }
  // What all `mp` ranks of the op spend on it together.
  double Total(int mp) const { return fixed * mp + work; }
};
struct SerialCost {
  PhaseCost forward, backward, optimizer;
  // One transformer layer's forward and backward, work only.
  double layer_forward = 0, layer_backward = 0;
};

StatusOr<SerialCost> PriceSerial(const GptConfig& config, const OptimizerConfig& optimizer,
                                 const proto::Strategy& strategy, int64_t micro_batch,
                                 const OpCostEstimator& ops, double launch) {
  GptConfig c = config;
  c.batch_size = micro_batch;
  LOOM_ASSIGN_OR_RETURN(TrainingProgram tp, BuildGptTrainingProgram(c, optimizer));
  LOOM_ASSIGN_OR_RETURN(AmpConfig amp, AmpConfigOf(strategy));
  if (amp.level > 0) LOOM_RETURN_IF_ERROR(ApplyAmp(tp.main, amp, &tp.startup));
  SerialCost cost;
  double layers_forward = 0, layers_backward = 0;
  const Block& block = tp.main.global_block();
  for (const Op* op : block.ops()) {
    LOOM_ASSIGN_OR_RETURN(OpCost priced, ops.EstimateOp(*op));
    const double work = std::max(0.0, priced.seconds - launch);
    if (op->HasRole(role::kOptimize)) {
      cost.optimizer.Add(priced.seconds, launch);
    } else if (op->HasRole(role::kBackward)) {
      cost.backward.Add(priced.seconds, launch);
      // A backward op belongs to the layer of the forward op it
      // differentiates.
      const Op* forward = block.FindOpById(op->desc().forward_id());
      if (forward != nullptr && forward->desc().layer() >= 0) layers_backward += work;
    } else {
      cost.forward.Add(priced.seconds, launch);
      if (op->desc().layer() >= 0) layers_forward += work;
    }
  }
  const int64_t layers = std::max<int64_t>(1, config.num_layers);
  cost.layer_forward = layers_forward / layers;
  cost.layer_backward = layers_backward / layers;
  return cost;
}

// The cores every rank shares when the cluster runs them all on one host
// (a CPU cluster's ranks_per_device 0, or emulated nodes' host_cores); 0
// when each rank has a device of its own.
int SharedCores(const proto::Cluster& cluster) {
  if (cluster.host_cores() > 0) return cluster.host_cores();
  if (cluster.ranks_per_device() == 0) return std::max(1, cluster.device().cores());
  return 0;
}

// TuneCandidate's bounds. Time, the largest of:
//  - the average rank: its share of every micro-batch's forward and
//    backward (the forward again under full recomputation), then its share
//    of the update (1/dp of it from ZeRO stage 1 on);
//  - the last stage: it cannot start before the first micro-batch's
//    forward has crossed the stages before it, each chunk of them holding
//    at least layers / (stages x chunks) layers, and then runs every
//    forward (twice under full recomputation) and backward of its own
//    fewest layers. This bounds any schedule's bubble, ZB's and ZBV's too
//    (every job of the last stage waits for that first forward);
//  - on one host's shared cores, all ranks' work over the cores.
Bounds BoundsOf(const GptConfig& config, const OptimizerConfig& optimizer,
                const proto::Strategy& s, const SerialCost& serial, int shared_cores) {
  const int dp = s.dp().degree(), mp = s.mp().degree(), pp = s.pipeline().degree();
  const int vpp = std::max(1, s.pipeline().vpp_degree());
  const int m = s.pipeline().micro_batches();
  const bool full = s.recompute().granularity() == "full";
  const int update_shards = s.sharding().stage() >= 1 ? dp : 1;
  const double per_micro_batch =
      serial.forward.Share(mp, pp) * (full ? 2 : 1) + serial.backward.Share(mp, pp);
  const double average =
      m * per_micro_batch + serial.optimizer.Share(mp, pp * update_shards);
  const int64_t fewest_layers = config.num_layers / pp;
  const int64_t fewest_in_chunk = config.num_layers / (static_cast<int64_t>(pp) * vpp);
  const double last_stage =
      (pp - 1) * fewest_in_chunk * serial.layer_forward / mp +
      m * fewest_layers * (serial.layer_forward * (full ? 2 : 1) + serial.layer_backward) / mp;
  double host = 0;
  if (shared_cores > 0) {
    const double all_ranks =
        static_cast<double>(dp) * m *
            (serial.forward.Total(mp) * (full ? 2 : 1) + serial.backward.Total(mp)) +
        static_cast<double>(dp) / update_shards * serial.optimizer.Total(mp);
    host = all_ranks / shared_cores;
  }
  Bounds b;
  b.time_s = std::max({average, last_stage, host});
  const double params_on_rank = static_cast<double>(config.NumParameters()) / (mp * pp);
  b.memory_bytes = static_cast<int64_t>(params_on_rank * BytesPerParameter(s, optimizer) +
                                        KeptActivationBytes(config, s) * fewest_layers);
  return b;
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

}  // namespace

std::string TuneCandidateName(const proto::Strategy& s) {
  std::string name = StrCat("dp", s.dp().degree(), " mp", s.mp().degree(), " pp",
                            s.pipeline().degree(), " m", s.pipeline().micro_batches(), " ",
                            s.pipeline().schedule_mode());
  if (s.pipeline().vpp_degree() > 1) name += StrCat("x", s.pipeline().vpp_degree());
  if (s.sharding().stage() > 0) name += StrCat(" zero", s.sharding().stage());
  if (s.recompute().granularity() != "none") name += " rc=" + s.recompute().granularity();
  if (s.mp().sequence_parallel()) name += " sp";
  if (s.passes().op_split()) name += " op-split";
  return name;
}

StatusOr<TuneSpaceResult> EnumerateTuneSpace(const GptConfig& config,
                                             const OptimizerConfig& optimizer,
                                             const proto::Strategy& base,
                                             const proto::Cluster& cluster,
                                             const OpCostEstimator& ops,
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
  std::map<int64_t, SerialCost> serial_costs;  // by micro-batch size
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
        const int64_t micro_batch = config.batch_size / dp / m;
        auto priced = serial_costs.find(micro_batch);
        if (priced == serial_costs.end()) {
          StatusOr<SerialCost> cost = PriceSerial(config, optimizer, base, micro_batch, ops,
                                                  cluster.device().kernel_launch_seconds());
          if (!cost.ok()) {
            return cost.status().WithContext(
                StrCat("pricing a micro-batch of ", micro_batch, " sequences"));
          }
          priced = serial_costs.emplace(micro_batch, *cost).first;
        }
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
              const Bounds bounds =
                  BoundsOf(config, optimizer, s, priced->second, SharedCores(cluster));
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
