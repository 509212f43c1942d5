#include "runtime/tune_space.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "cost_model/comm_model.h"
#include "passes/amp.h"
#include "scheduler/layout.h"
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

// The most (micro-batch, chunk) forwards stage `stage` has run whose
// backward (or B) has not started, over its job list: what it keeps at
// once. 1 where the schedule cannot be listed without its cuts.
int MostInFlight(const ScheduleInfo& schedule, int stage, const proto::Strategy& s) {
  ScheduleParams params;
  params.stage = stage;
  params.num_stages = s.pipeline().degree();
  params.micro_batches = s.pipeline().micro_batches();
  params.chunks = std::max(1, s.pipeline().vpp_degree());
  params.max_in_flight = static_cast<int>(s.pipeline().max_in_flight());
  const StatusOr<std::vector<Job>> jobs = schedule.fn(params);
  if (!jobs.ok()) return 1;
  int in_flight = 0, most = 1;
  for (const Job& job : *jobs) {
    if (job.part != 0) continue;
    if (job.type == JobType::kForward) most = std::max(most, ++in_flight);
    if (job.type == JobType::kBackward || job.type == JobType::kBackwardB) --in_flight;
  }
  return most;
}

// MostInFlight of every stage, listed once per pipeline shape: the
// candidates of a shape differ only in knobs the job lists ignore.
class InFlightTable {
 public:
  const std::vector<int>& Of(const ScheduleInfo& schedule, const proto::Strategy& s) {
    const Key key{schedule.name, s.pipeline().degree(), s.pipeline().micro_batches(),
                  s.pipeline().vpp_degree(), s.pipeline().max_in_flight()};
    auto [it, fresh] = table_.try_emplace(key);
    if (fresh) {
      for (int stage = 0; stage < s.pipeline().degree(); ++stage) {
        it->second.push_back(MostInFlight(schedule, stage, s));
      }
    }
    return it->second;
  }

 private:
  using Key = std::tuple<std::string, int, int, int, int64_t>;
  std::map<Key, std::vector<int>> table_;
};

// Layer-micro-batches the fullest rank keeps at once, at least. Each stage
// s keeps f_s micro-batches in flight at its fullest. Under VPP every
// chunk holds layers / (stages x chunks) layers, so the fullest keeps f_s
// chunks' worth. Otherwise the cut gives stage s some l_s layers (the end
// stages may take fewer); whatever they are, max_s f_s l_s is at least
// layers / sum_s (1 / f_s), the l_s that even the stages out. Under a V,
// whose chunks differ in size, one micro-batch of the fewest layers.
double KeptLayerMicroBatches(const GptConfig& config, const proto::Strategy& s,
                             InFlightTable& in_flight) {
  const int pp = s.pipeline().degree();
  const int vpp = std::max(1, s.pipeline().vpp_degree());
  const StatusOr<const ScheduleInfo*> schedule = FindSchedule(s.pipeline().schedule_mode());
  const double layers = static_cast<double>(config.num_layers);
  if (!schedule.ok() || (*schedule)->v_shape) return std::floor(layers / pp);
  const std::vector<int>& most = in_flight.Of(**schedule, s);
  if ((*schedule)->uses_chunks) {
    return *std::max_element(most.begin(), most.end()) *
           std::floor(layers / (static_cast<double>(pp) * vpp));
  }
  double inverse_sum = 0;
  for (int f : most) inverse_sum += 1.0 / f;
  return layers / inverse_sum;
}

// The least a call of `kind` moving `bytes` among `group` can cost: the
// cheapest algorithm and regime, after the longest idle, with no extra
// for it. The simulator prices each call as one of these.
double LeastCallSeconds(const CommModel& comm, CommCall kind, int64_t bytes,
                        const std::vector<int>& group) {
  double least = std::numeric_limits<double>::infinity();
  for (CommAlgorithm algorithm :
       {CommAlgorithm::kRing, CommAlgorithm::kTree, CommAlgorithm::kDirect}) {
    for (CallRegime regime : {CallRegime::kTogether, CallRegime::kAfterWait,
                              CallRegime::kAwake, CallRegime::kSharedCores}) {
      for (double idle : {0.0, 1e9}) {
        least = std::min(least, comm.CommSeconds(kind, algorithm, bytes, group, regime, idle,
                                                 /*charge_after_idle=*/false));
      }
    }
  }
  return least;
}

// One layer's tensor-parallel calls for one micro-batch, at their least:
// the forward's two (after the attention's and the MLP's row-parallel
// GEMM), the backward's two (the input gradients of the column-parallel
// GEMMs), and the forward's again under full recomputation. Each is an
// all-reduce of the layer's activation, or under sequence parallelism a
// reduce-scatter of it and an all-gather of its shard.
double MpCallsPerLayer(const GptConfig& config, const proto::Strategy& s,
                       const CommModel& comm) {
  const int mp = s.mp().degree();
  if (mp <= 1) return 0;
  const std::vector<int> group = RingMembers(LayoutOf(s), 0, kMpRing);
  const int64_t b = config.batch_size / s.dp().degree() / s.pipeline().micro_batches();
  const int64_t bytes = b * config.seq_len * config.hidden * (s.amp().level() == "O0" ? 4 : 2);
  const double call = s.mp().sequence_parallel()
                          ? LeastCallSeconds(comm, CommCall::kReduceScatter, bytes, group) +
                                LeastCallSeconds(comm, CommCall::kAllGather, bytes / mp, group)
                          : LeastCallSeconds(comm, CommCall::kAllReduce, bytes, group);
  const int calls = s.recompute().granularity() == "full" ? 6 : 4;
  return calls * call;
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
  // The transformer layers' forward and backward, work only, all layers.
  double layers_forward = 0, layers_backward = 0;
  // Those of an average layer.
  double layer_forward = 0, layer_backward = 0;
  void Average(int64_t layers) {
    layer_forward = layers_forward / std::max<int64_t>(1, layers);
    layer_backward = layers_backward / std::max<int64_t>(1, layers);
  }
};

StatusOr<SerialCost> PriceProgram(const GptConfig& config, const OptimizerConfig& optimizer,
                                  const proto::Strategy& strategy, int64_t micro_batch,
                                  const OpCostEstimator& ops, double launch) {
  GptConfig c = config;
  c.batch_size = micro_batch;
  LOOM_ASSIGN_OR_RETURN(TrainingProgram tp, BuildGptTrainingProgram(c, optimizer));
  LOOM_ASSIGN_OR_RETURN(AmpConfig amp, AmpConfigOf(strategy));
  if (amp.level > 0) LOOM_RETURN_IF_ERROR(ApplyAmp(tp.main, amp, &tp.startup));
  SerialCost cost;
  double& layers_forward = cost.layers_forward;
  double& layers_backward = cost.layers_backward;
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
  cost.Average(config.num_layers);
  return cost;
}

// `a` + `times` x (`b` - `a`), field by field.
SerialCost Extrapolate(const SerialCost& a, const SerialCost& b, double times) {
  auto line = [times](double x, double y) { return x + times * (y - x); };
  auto phase = [&](const PhaseCost& x, const PhaseCost& y) {
    PhaseCost p;
    p.fixed = line(x.fixed, y.fixed);
    p.work = line(x.work, y.work);
    return p;
  };
  SerialCost out;
  out.forward = phase(a.forward, b.forward);
  out.backward = phase(a.backward, b.backward);
  out.optimizer = phase(a.optimizer, b.optimizer);
  out.layers_forward = line(a.layers_forward, b.layers_forward);
  out.layers_backward = line(a.layers_backward, b.layers_backward);
  return out;
}

// PriceProgram of the whole model, from models of one and two layers: a
// GPT's layers are alike in ops and shapes, so each adds what the second
// added (building a 96-layer program for each micro-batch size took most
// of a 175B search's enumeration).
StatusOr<SerialCost> PriceSerial(const GptConfig& config, const OptimizerConfig& optimizer,
                                 const proto::Strategy& strategy, int64_t micro_batch,
                                 const OpCostEstimator& ops, double launch) {
  if (config.num_layers <= 2) {
    return PriceProgram(config, optimizer, strategy, micro_batch, ops, launch);
  }
  GptConfig c = config;
  c.num_layers = 1;
  LOOM_ASSIGN_OR_RETURN(SerialCost one,
                        PriceProgram(c, optimizer, strategy, micro_batch, ops, launch));
  c.num_layers = 2;
  LOOM_ASSIGN_OR_RETURN(SerialCost two,
                        PriceProgram(c, optimizer, strategy, micro_batch, ops, launch));
  SerialCost all = Extrapolate(one, two, static_cast<double>(config.num_layers - 1));
  all.Average(config.num_layers);
  return all;
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
                const proto::Strategy& s, const SerialCost& serial, int shared_cores,
                const CommModel& comm, InFlightTable& in_flight) {
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
  // The tensor-parallel calls of the average rank's layers, which run on
  // its calc stream or its mp stream: if they outlast the compute, the two
  // streams at best share the sum evenly.
  const double mp_calls = m * MpCallsPerLayer(config, s, comm) * config.num_layers / pp;
  const double with_calls = mp_calls > average ? (average + mp_calls) / 2 : average;
  double host = 0;
  if (shared_cores > 0) {
    const double all_ranks =
        static_cast<double>(dp) * m *
            (serial.forward.Total(mp) * (full ? 2 : 1) + serial.backward.Total(mp)) +
        static_cast<double>(dp) / update_shards * serial.optimizer.Total(mp);
    host = all_ranks / shared_cores;
  }
  Bounds b;
  b.time_s = std::max({with_calls, last_stage, host});
  const double params_on_rank = static_cast<double>(config.NumParameters()) / (mp * pp);
  b.memory_bytes = static_cast<int64_t>(params_on_rank * BytesPerParameter(s, optimizer) +
                                        KeptActivationBytes(config, s) *
                                            KeptLayerMicroBatches(config, s, in_flight));
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
  const CommModel comm(cluster);
  InFlightTable in_flight;
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
                  BoundsOf(config, optimizer, s, priced->second, SharedCores(cluster), comm, in_flight);
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
