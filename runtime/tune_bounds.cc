#include "runtime/tune_bounds.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "framework/op_work.h"
#include "passes/amp.h"
#include "passes/parallel_passes.h"
#include "passes/pipeline_partition.h"
#include "scheduler/layout.h"

namespace loom {
namespace {

using InFlight = TuneBounds::InFlight;

// Bytes a parameter costs the rank holding it at least, through the whole
// step: its fp32 copy (the parameter, or the master weight under O2), a
// bf16 copy under O2, and the optimizer's moments, each divided over dp as
// far as the plans' ZeRO stage shards it. Stages 1 and 2 update a shard of
// each fp32 bucket and gather the bucket whole again, so the fp32 weights
// are whole until stage 3, under O2 too (Megatron's distributed optimizer
// shards the master weights with the moments; the plans do not yet).
// Under O2, below stage 3, a whole bf16 copy lasts the step (the one
// low-precision-weights makes, or each micro-batch's casts, kept until its
// backward); stage 3 casts what it gathers where it is read, forward and
// backward alike, so none lasts.
double BytesPerParameter(const proto::Strategy& s, const OptimizerConfig& optimizer) {
  const int stage = s.sharding().stage();
  const double dp = std::max(1, s.dp().degree());
  const bool o2 = s.amp().level() == "O2";
  const double moments = optimizer.type == "adamw" ? 8 : 0;
  double bytes = moments / (stage >= 1 ? dp : 1);
  bytes += 4 / (stage >= 3 ? dp : 1);  // fp32 weights
  if (o2 && stage < 3) bytes += 2;  // the bf16 copy
  return bytes;
}

// Gradient bytes a parameter costs: a gradient takes the dtype of its
// parameter, which stays fp32 at every AMP level, and from ZeRO stage 2 on
// the rank keeps 1/dp of it. Over several micro-batches the gradients add
// into accumulators that last the whole step; over one, they exist only
// once the backward has made them.
double GradientBytesPerParameter(const proto::Strategy& s) {
  return 4.0 / (s.sharding().stage() >= 2 ? std::max(1, s.dp().degree()) : 1);
}

// What one layer of one micro-batch keeps for its backward at least, on a
// rank, counting only tensors its backward reads whatever the dropout
// (Korthikanti et al. 2022's sbh(34 + 5as/h) less the dropout masks):
//  - under full recomputation, its input (split along the sequence under
//    sequence parallelism);
//  - under selective, also the two layer norms' outputs (the QKV and first
//    MLP GEMMs' weight gradients read them) and the second's input, split
//    likewise; and of the tensor-parallel part, Q, K, V, the attention's
//    context (the output projection reads it) and the MLP's two wide
//    activations;
//  - with no recomputation, also the attention's probabilities
//    (b x heads x s x s), which its context GEMM's gradient reads.
// Each at 2 bytes an element unless the strategy computes in fp32.
double KeptActivationBytes(const GptConfig& c, const proto::Strategy& s) {
  const double mp = s.mp().degree();
  const double bytes = s.amp().level() == "O0" ? 4 : 2;
  const double b = static_cast<double>(c.batch_size) / s.dp().degree() /
                   s.pipeline().micro_batches();
  const double tokens = b * static_cast<double>(c.seq_len);
  const std::string& rc = s.recompute().granularity();
  const double along_sequence = s.mp().sequence_parallel() ? mp : 1;
  double elements = tokens * c.hidden / along_sequence;
  if (rc != "full") {
    elements += 3 * tokens * c.hidden / along_sequence;
    elements += tokens * (4.0 * c.hidden + 2.0 * c.ffn_hidden) / mp;
  }
  if (rc == "none") elements += b * c.num_heads / mp * c.seq_len * c.seq_len;
  return elements * bytes;
}

// What one layer of one micro-batch keeps between its B and its W under
// the zero-bubble schedules, at least: each weight GEMM's input and output
// gradient, which its weight gradient reads. The QKV GEMM's input (the
// first layer norm's output) and output gradient (3h/mp); the output
// projection's input (the context, h/mp) and output gradient; the first
// MLP GEMM's input (the second layer norm's output) and output gradient
// (ffn/mp); the second's input (ffn/mp) and output gradient. Those h wide
// are whole even under sequence parallelism: the column-parallel GEMMs
// read the gathered sequence, and the row-parallel ones' output gradients
// are gathered before their GEMMs read them.
double KeptForWeightGradientBytes(const GptConfig& c, const proto::Strategy& s) {
  const double mp = s.mp().degree();
  const double bytes = s.amp().level() == "O0" ? 4 : 2;
  const double b =
      static_cast<double>(c.batch_size) / s.dp().degree() / s.pipeline().micro_batches();
  const double tokens = b * static_cast<double>(c.seq_len);
  const double elements = tokens * (4.0 * c.hidden + (4.0 * c.hidden + 2.0 * c.ffn_hidden) / mp);
  return elements * bytes;
}

// The (micro-batch, chunk) jobs stage `stage` holds at once over its job
// list, as (forward run, B not yet; B run, W not yet) pairs: every pair a
// fullest moment can take (the ones no other pair dominates). Without a
// zero-bubble schedule the second is always 0. {1, 0} where the schedule
// cannot be listed without its cuts.
std::vector<InFlight> MostInFlight(const ScheduleInfo& schedule, int stage,
                                   const proto::Strategy& s) {
  ScheduleParams params;
  params.stage = stage;
  params.num_stages = s.pipeline().degree();
  params.micro_batches = s.pipeline().micro_batches();
  params.chunks = std::max(1, s.pipeline().vpp_degree());
  params.max_in_flight = static_cast<int>(s.pipeline().max_in_flight());
  const StatusOr<std::vector<Job>> jobs = schedule.fn(params);
  if (!jobs.ok()) return {{1, 0}};
  // Listed without its cuts, an overlap schedule's jobs run whole; planned,
  // a forward's parts run beside the previous backward's, which frees its
  // activations as it goes. Count one micro-batch fewer.
  const int fewer = schedule.splits_jobs ? 1 : 0;
  std::vector<InFlight> seen;
  InFlight now;
  for (const Job& job : *jobs) {
    if (job.part != 0) continue;
    switch (job.type) {
      case JobType::kForward:
        ++now.before_b;
        seen.push_back({std::max(1, now.before_b - fewer), now.before_w});
        break;
      case JobType::kBackward:
        --now.before_b;
        break;
      case JobType::kBackwardB:
        --now.before_b;
        ++now.before_w;
        seen.push_back(now);
        break;
      case JobType::kBackwardW:
        --now.before_w;
        break;
      case JobType::kOptimizer:
        break;
    }
  }
  // Keep the pairs no other pair holds as much of both as: by B-pending
  // count, most first, each that holds more W-pending than all before it.
  std::sort(seen.begin(), seen.end(), [](const InFlight& x, const InFlight& y) {
    return x.before_b != y.before_b ? x.before_b > y.before_b : x.before_w > y.before_w;
  });
  std::vector<InFlight> frontier;
  for (const InFlight& x : seen) {
    if (frontier.empty() || x.before_w > frontier.back().before_w) frontier.push_back(x);
  }
  if (frontier.empty()) frontier.push_back({1, 0});
  return frontier;
}

}  // namespace

const std::vector<std::vector<InFlight>>& TuneBounds::InFlightTable::Of(
    const ScheduleInfo& schedule, const proto::Strategy& s) {
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

namespace {

using InFlightTable = TuneBounds::InFlightTable;

// The most stage s holds at once of the activations of a layer and
// micro-batch, in units of one whose B has not run: one whose B ran and W
// has not counts `after_b` of it.
double Fullest(const std::vector<InFlight>& frontier, double after_b) {
  double most = 0;
  for (const InFlight& x : frontier) most = std::max(most, x.before_b + after_b * x.before_w);
  return most;
}

// Layer-micro-batches the fullest rank keeps at once, at least, in units of
// one whose B has not run (`after_b`: what one between its B and W keeps of
// that). Each stage s keeps f_s of a layer's micro-batches at its fullest
// (both chunks counted). Under VPP every chunk holds layers / (stages x
// chunks) layers, so the fullest keeps f_s chunks' worth. Otherwise the cut
// gives stage s some l_s layers (the end stages may take fewer); whatever
// they are, max_s f_s l_s is at least layers / sum_s (1 / f_s), the l_s
// that even the stages out. Under a V (VShapedPartition) the chunks differ
// in size, and what holds whatever the layer costs is: a stage past the
// first splits its k_s layers between its chunks as evenly as whole layers
// allow, so each micro-batch it holds keeps at least (k_s - 1) / 2 of
// them, and stage 0 takes at most one layer more than any other stage.
// Then M >= f_s (k_s - 1) / 2 for s >= 1 and k_0 <= 2M / max f + 2 give
// M >= (layers - stages - 1) / (2 (1 / max f + sum_{s>=1} 1 / f_s)); and
// as every chunk keeps a layer, M >= f_s for every s.
double KeptLayerMicroBatches(const GptConfig& config, const proto::Strategy& s, double after_b,
                             InFlightTable& in_flight) {
  const int pp = s.pipeline().degree();
  const int vpp = std::max(1, s.pipeline().vpp_degree());
  const StatusOr<const ScheduleInfo*> schedule = FindSchedule(s.pipeline().schedule_mode());
  const double layers = static_cast<double>(config.num_layers);
  if (!schedule.ok()) return std::floor(layers / pp);
  std::vector<double> most;
  for (const std::vector<InFlight>& stage : in_flight.Of(**schedule, s)) {
    most.push_back(Fullest(stage, after_b));
  }
  if ((*schedule)->v_shape) {
    if (pp < 2) return std::floor(layers / pp);
    const double fullest = *std::max_element(most.begin() + 1, most.end());
    double inverse_sum = 1.0 / fullest;
    for (int stage = 1; stage < pp; ++stage) inverse_sum += 1.0 / most[stage];
    return std::max({most.front(), fullest, (layers - pp - 1) / (2 * inverse_sum)});
  }
  if ((*schedule)->uses_chunks) {
    return *std::max_element(most.begin(), most.end()) *
           std::floor(layers / (static_cast<double>(pp) * vpp));
  }
  double inverse_sum = 0;
  for (double f : most) inverse_sum += 1.0 / f;
  return layers / inverse_sum;
}

// Layer-micro-batches a stage holds at its fullest over its `jobs`, as
// KeptLayerMicroBatches counts them, knowing the layers of each of its
// chunks (`chunk_layers`): each (micro-batch, chunk) keeps its chunk's
// layers from its forward to its B, and `after_b` of them from its B to
// its W. Under an overlap schedule a forward counts one micro-batch fewer
// (MostInFlight).
double HeldAtFullest(const std::vector<Job>& jobs, const std::vector<int>& chunk_layers,
                     double after_b, bool splits_jobs) {
  double held = 0, most = 0;
  for (const Job& job : jobs) {
    if (job.part != 0) continue;
    const double layers = chunk_layers[job.chunk];
    switch (job.type) {
      case JobType::kForward:
        held += layers;
        most = std::max(most, splits_jobs ? std::max(layers, held - layers) : held);
        break;
      case JobType::kBackward:
        held -= layers;
        break;
      case JobType::kBackwardB:
        held -= layers * (1 - after_b);
        most = std::max(most, held);
        break;
      case JobType::kBackwardW:
        held -= layers * after_b;
        break;
      case JobType::kOptimizer:
        break;
    }
  }
  return most;
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

// The least a call of `kind` among `group` costs per byte of it, over
// every algorithm and regime: each call costs at least this times its
// bytes, so the calls of one stream, which run one at a time, take at
// least this times their sum. 0 behind a shaper, which lends a call made
// after idle a burst that a sum of calls does not bound.
double LeastSecondsPerByte(const CommModel& comm, CommCall kind, const std::vector<int>& group) {
  if (group.size() <= 1 || comm.LinkAt(comm.LevelOf(group)).has_burst_bytes()) return 0;
  // Every price is a latency plus bytes over a bandwidth (at most a
  // sustained one), so the slope between two sizes is its per-byte part.
  constexpr int64_t kBytes = int64_t{1} << 30;
  double least = std::numeric_limits<double>::infinity();
  for (CommAlgorithm algorithm :
       {CommAlgorithm::kRing, CommAlgorithm::kTree, CommAlgorithm::kDirect}) {
    for (CallRegime regime : {CallRegime::kTogether, CallRegime::kAfterWait,
                              CallRegime::kAwake, CallRegime::kSharedCores}) {
      auto seconds = [&](int64_t bytes) {
        return comm.CommSeconds(kind, algorithm, bytes, group, regime, /*idle_seconds=*/0,
                                /*charge_after_idle=*/false);
      };
      least = std::min(least, (seconds(2 * kBytes) - seconds(kBytes)) / kBytes);
    }
  }
  return std::max(0.0, least);
}

// What a rank's data-parallel stream (the dp stream, or under ZeRO the
// sharding stream) carries in a step, at its least, counting only the
// transformer layers' parameters (an average rank's share; the fullest
// holds at least as many):
//  - their gradients' reduction: one all-reduce a step without ZeRO, one
//    reduce-scatter a step at stage 1, and one each micro-batch from
//    stage 2 on, where the accumulated gradients are sharded;
//  - from stage 1 on, their fetch as all-gathers of the shards (or
//    all-reduces of whole buffers, whichever is cheaper): once a step, of
//    the fp32 weights, at stages 1 and 2; at stage 3 in the compute dtype,
//    once a step for buckets kept whole and otherwise in each
//    micro-batch's forward (the backward's gathers left out: the bucket
//    the forward reads last is not gathered again).
// Gradients count in the dtype they are reduced in.
double DataParallelStreamSeconds(const GptConfig& c, const proto::Strategy& s,
                                 const CommModel& comm) {
  const int dp = s.dp().degree();
  if (dp <= 1) return 0;
  const int stage = s.sharding().stage();
  const int m = s.pipeline().micro_batches();
  const double params = static_cast<double>(c.num_layers) * c.ParametersPerLayer() /
                        (static_cast<double>(s.mp().degree()) * s.pipeline().degree());
  const bool amp = s.amp().level() != "O0";
  const double gradient_bytes = amp && s.amp().grad_reduce_dtype() != "fp32" ? 2 : 4;
  const std::vector<int> group = RingMembers(LayoutOf(s), 0, kDpRing);
  if (stage == 0) {
    return params * gradient_bytes * LeastSecondsPerByte(comm, CommCall::kAllReduce, group);
  }
  const int reductions = stage >= 2 ? m : 1;
  const bool gathered_each_micro_batch = stage == 3 && s.sharding().keep_gathered_bytes() == 0;
  const int fetches = gathered_each_micro_batch ? m : 1;
  const double weight_bytes = stage == 3 && amp ? 2 : 4;
  const double fetch =
      std::min(LeastSecondsPerByte(comm, CommCall::kAllGather, group) / dp,
               LeastSecondsPerByte(comm, CommCall::kAllReduce, group));
  return reductions * params * gradient_bytes *
             LeastSecondsPerByte(comm, CommCall::kReduceScatter, group) +
         fetches * params * weight_bytes * fetch;
}

// The tensor-parallel calls of one layer's forward that its next op waits
// for, at their least, where a job's ops run in order (every schedule but
// the overlap ones, whose jobs' parts interleave): the all-reduce after the
// attention's and the MLP's row-parallel GEMM, or under sequence
// parallelism the reduce-scatter there and the all-gather before each
// column-parallel GEMM. Op-split cuts such a GEMM into parts whose calls
// run beside the other parts' compute, but the last part's reduction (the
// first part's gather) still waits, so a call counts at 1/k of its bytes,
// k the most parts op-split cuts into.
double ExposedForwardMpCallsPerLayer(const GptConfig& config, const proto::Strategy& s,
                                     const CommModel& comm) {
  const int mp = s.mp().degree();
  if (mp <= 1) return 0;
  const std::vector<int> group = RingMembers(LayoutOf(s), 0, kMpRing);
  const int64_t b = config.batch_size / s.dp().degree() / s.pipeline().micro_batches();
  const int64_t parts = !s.passes().op_split()            ? 1
                        : s.passes().op_split_parts() > 0 ? s.passes().op_split_parts()
                                                          : kOpSplitMaxParts;
  const int64_t bytes =
      b * config.seq_len * config.hidden * (s.amp().level() == "O0" ? 4 : 2) / parts;
  const double call = s.mp().sequence_parallel()
                          ? LeastCallSeconds(comm, CommCall::kReduceScatter, bytes, group) +
                                LeastCallSeconds(comm, CommCall::kAllGather, bytes / mp, group)
                          : LeastCallSeconds(comm, CommCall::kAllReduce, bytes, group);
  return 2 * call;
}

StatusOr<SerialCost> PriceProgram(const GptConfig& config, const OptimizerConfig& optimizer,
                                  const proto::Strategy& strategy, int64_t micro_batch,
                                  const OpCostEstimator& ops, double launch) {
  GptConfig c = config;
  c.batch_size = micro_batch;
  LOOM_ASSIGN_OR_RETURN(TrainingProgram tp, BuildGptTrainingProgram(c, optimizer));
  LOOM_ASSIGN_OR_RETURN(AmpConfig amp, AmpConfigOf(strategy));
  if (amp.level > 0) LOOM_RETURN_IF_ERROR(ApplyAmp(tp.main, amp, &tp.startup));
  SerialCost cost;
  const Block& block = tp.main.global_block();
  for (const Op* op : block.ops()) {
    // AMP casts each parameter where it is read, once a micro-batch, but
    // the plans do not: low-precision-weights casts once a step, and ZeRO
    // stage 3 casts each rank's shard before it gathers. Where weights
    // are wide against the micro-batch's tokens, those casts would put
    // the bound over a plan's compute
    // (Tuner.TimeBoundLeavesOutTheCastsThePlansDoNotMake).
    if (op->type() == "cast") {
      const proto::VarDesc* x = block.FindVar(op->Input("X"));
      if (x != nullptr && x->is_parameter()) continue;
    }
    LOOM_ASSIGN_OR_RETURN(OpCost priced, ops.EstimateOp(*op));
    if (op->HasRole(role::kOptimize)) {
      cost.optimizer.Add(priced.seconds, launch);
    } else if (op->HasRole(role::kBackward)) {
      cost.backward.Add(priced.seconds, launch);
      // A backward op belongs to the layer of the forward op it
      // differentiates.
      const Op* forward = block.FindOpById(op->desc().forward_id());
      if (forward != nullptr && forward->desc().layer() >= 0) {
        cost.layers_backward.Add(priced.seconds, launch);
      }
    } else {
      cost.forward.Add(priced.seconds, launch);
      if (op->desc().layer() >= 0) cost.layers_forward.Add(priced.seconds, launch);
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
  out.layers_forward = phase(a.layers_forward, b.layers_forward);
  out.layers_backward = phase(a.layers_backward, b.layers_backward);
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

// The forward costs pipeline-split cuts `config` by, under each pricing
// it may use (the cost model's times, or FLOPs: PlanOptions::cut_by_flops):
// the program as the planner gets it (the whole batch, after AMP), of two
// layers, each layer's cost repeated for all. Empty where the two layers'
// costs differ, as then the model's layers need not cost alike.
StatusOr<std::vector<ForwardCosts>> CutCosts(const GptConfig& config,
                                             const OptimizerConfig& optimizer,
                                             const proto::Strategy& strategy,
                                             const OpCostEstimator& ops) {
  GptConfig c = config;
  c.num_layers = 2;
  LOOM_ASSIGN_OR_RETURN(TrainingProgram tp, BuildGptTrainingProgram(c, optimizer));
  LOOM_ASSIGN_OR_RETURN(AmpConfig amp, AmpConfigOf(strategy));
  if (amp.level > 0) LOOM_RETURN_IF_ERROR(ApplyAmp(tp.main, amp, &tp.startup));
  const std::vector<Op*> program = tp.main.global_block().OpVector();
  const OpCostFn by_time = [&](const Op& op) -> StatusOr<double> {
    LOOM_ASSIGN_OR_RETURN(OpCost priced, ops.EstimateOp(op));
    return priced.seconds;
  };
  const OpCostFn by_flops = [](const Op& op) -> StatusOr<double> { return WorkOf(op).flops; };
  std::vector<ForwardCosts> out;
  for (const OpCostFn* cost_of : {&by_time, &by_flops}) {
    LOOM_ASSIGN_OR_RETURN(ForwardCosts two, ForwardCostsByLayer(program, *cost_of));
    if (two.layers.size() != 2 || two.layers[0] != two.layers[1]) {
      return std::vector<ForwardCosts>{};
    }
    two.layers.assign(config.num_layers, two.layers[0]);
    out.push_back(std::move(two));
  }
  return out;
}

// The cores every rank shares when the cluster runs them all on one host
// (a CPU cluster's ranks_per_device 0, or emulated nodes' host_cores); 0
// when each rank has a device of its own.
int SharedCores(const proto::Cluster& cluster) {
  if (cluster.shared_host().host_cores() > 0) return cluster.shared_host().host_cores();
  if (cluster.ranks_per_device() == 0) return std::max(1, cluster.device().cores());
  return 0;
}

// TuneCandidate's bounds. Time, the largest of:
//  - the average rank: its share of every micro-batch's forward and
//    backward (the forward again under full recomputation), then its share
//    of the update (1/dp of it from ZeRO stage 1 on), and the forward's
//    tensor-parallel calls its calc stream waits for
//    (ExposedForwardMpCallsPerLayer); and, with all its layers'
//    tensor-parallel calls, half the sum: the calc and mp streams can at
//    best share them evenly;
//  - the last stage (each layer's forward with the calls it waits for):
//    it cannot start before the first micro-batch's forward has crossed
//    the stages before it, each chunk of them holding at least layers /
//    (stages x chunks) layers, and then runs every forward and backward of
//    its own fewest layers, each op's launch whole and its work over mp
//    (the forward's work again under full recomputation). This bounds any schedule's bubble, ZB's and ZBV's too
//    (every job of the last stage waits for that first forward). Where the
//    backward is not split (every schedule but ZBH1 and ZBV), the last
//    micro-batch's backward then crosses the stages back to the first, a
//    chunk's backward on each (a recomputed forward, not all of whose ops
//    run again, left out): the stage's last backward is its last job, after
//    all its forwards and backwards. Split, that crossing is B's alone,
//    whose share of the backward the serial price does not give;
//  - on one host's shared cores, all ranks' work over the cores;
//  - the calls the data-parallel stream carries (DataParallelStreamSeconds).
CandidateBounds BoundsOf(const GptConfig& config, const OptimizerConfig& optimizer,
                         const proto::Strategy& s, const SerialCost& serial, int shared_cores,
                         const CommModel& comm, InFlightTable& in_flight,
                         const std::function<double(double after_b)>& held_by_cut) {
  const int dp = s.dp().degree(), mp = s.mp().degree(), pp = s.pipeline().degree();
  const int vpp = std::max(1, s.pipeline().vpp_degree());
  const int m = s.pipeline().micro_batches();
  const bool full = s.recompute().granularity() == "full";
  const int update_shards = s.sharding().stage() >= 1 ? dp : 1;
  const StatusOr<const ScheduleInfo*> schedule = FindSchedule(s.pipeline().schedule_mode());
  // What the calc stream waits for in each layer's forward (again in its
  // recomputation under full).
  const double exposed =
      schedule.ok() && !(*schedule)->splits_jobs ? ExposedForwardMpCallsPerLayer(config, s, comm)
                                                  : 0;
  const double per_micro_batch =
      serial.forward.Share(mp, pp) * (full ? 2 : 1) + serial.backward.Share(mp, pp);
  const double compute = m * per_micro_batch + serial.optimizer.Share(mp, pp * update_shards);
  const double average = compute + m * exposed * (full ? 2 : 1) * config.num_layers / pp;
  const int64_t fewest_layers = config.num_layers / pp;
  const int64_t fewest_in_chunk = config.num_layers / (static_cast<int64_t>(pp) * vpp);
  const bool whole_backward = schedule.ok() && !(*schedule)->splits_backward;
  const double layer_forward = serial.layer_forward.Share(mp, 1) + exposed;
  const double layer_backward = serial.layer_backward.Share(mp, 1);
  const double recomputed = full ? serial.layer_forward.work / mp + exposed : 0;
  const double crossing_back =
      whole_backward ? (pp - 1) * fewest_in_chunk * layer_backward : 0;
  const double last_stage = (pp - 1) * fewest_in_chunk * layer_forward +
                            m * fewest_layers * (layer_forward + recomputed + layer_backward) +
                            crossing_back;
  // The tensor-parallel calls of the average rank's layers, which run on
  // its calc stream or its mp stream: the two at best share the sum evenly.
  const double mp_calls = m * MpCallsPerLayer(config, s, comm) * config.num_layers / pp;
  const double with_calls = std::max(average, (compute + mp_calls) / 2);
  double host = 0;
  if (shared_cores > 0) {
    const double all_ranks =
        static_cast<double>(dp) * m *
            (serial.forward.Total(mp) * (full ? 2 : 1) + serial.backward.Total(mp)) +
        static_cast<double>(dp) / update_shards * serial.optimizer.Total(mp);
    host = all_ranks / shared_cores;
  }
  CandidateBounds b;
  b.compute_s = std::max({with_calls, last_stage, host});
  b.time_s = std::max(b.compute_s, DataParallelStreamSeconds(config, s, comm));
  const double params_on_rank = static_cast<double>(config.NumParameters()) / (mp * pp);
  const double kept = KeptActivationBytes(config, s);
  const double after_b = KeptForWeightGradientBytes(config, s) / kept;
  const double activations =
      kept * std::max(KeptLayerMicroBatches(config, s, after_b, in_flight), held_by_cut(after_b));
  const double gradients = params_on_rank * GradientBytesPerParameter(s);
  // Accumulators sit beside the activations; one micro-batch's gradients
  // appear as its activations are freed, so either may be the peak.
  const double transient = m > 1 ? activations + gradients : std::max(activations, gradients);
  b.memory_bytes =
      static_cast<int64_t>(params_on_rank * BytesPerParameter(s, optimizer) + transient);
  return b;
}

}  // namespace

TuneBounds::TuneBounds(const GptConfig& config, const OptimizerConfig& optimizer,
                       const proto::Strategy& base, const CostContext& costs)
    : config_(config), optimizer_(optimizer), base_(base), costs_(costs) {}

StatusOr<CandidateBounds> TuneBounds::Of(const proto::Strategy& s) {
  const int64_t micro_batch =
      config_.batch_size / s.dp().degree() / s.pipeline().micro_batches();
  auto priced = serial_costs_.find(micro_batch);
  if (priced == serial_costs_.end()) {
    StatusOr<SerialCost> cost = PriceSerial(config_, optimizer_, base_, micro_batch, costs_.ops(),
                                            costs_.cluster().device().kernel_launch_seconds());
    if (!cost.ok()) {
      return cost.status().WithContext(
          StrCat("pricing a micro-batch of ", micro_batch, " sequences"));
    }
    priced = serial_costs_.emplace(micro_batch, *cost).first;
  }
  LOOM_ASSIGN_OR_RETURN(const std::vector<std::vector<int>>* cuts, VirtualStageLayers(s));
  auto held_by_cut = [&](double after_b) { return HeldByCut(s, *cuts, after_b); };
  return BoundsOf(config_, optimizer_, s, priced->second, SharedCores(costs_.cluster()),
                  costs_.comm(), in_flight_, held_by_cut);
}

StatusOr<const std::vector<std::vector<int>>*> TuneBounds::VirtualStageLayers(
    const proto::Strategy& s) {
  static const std::vector<std::vector<int>> kNone;
  const StatusOr<const ScheduleInfo*> schedule = FindSchedule(s.pipeline().schedule_mode());
  const int pp = s.pipeline().degree();
  const int chunks = std::max(1, s.pipeline().vpp_degree());
  if (!schedule.ok() || pp * chunks > config_.num_layers) return &kNone;
  const bool v_shape = (*schedule)->v_shape;
  if (!cut_costs_) {
    StatusOr<std::vector<ForwardCosts>> costs = CutCosts(config_, optimizer_, base_, costs_.ops());
    if (!costs.ok()) return costs.status().WithContext("pricing the layers pipeline-split cuts");
    cut_costs_ = std::move(*costs);
  }
  auto [it, fresh] = virtual_stage_layers_.try_emplace(std::make_tuple(pp, chunks, v_shape));
  if (fresh) {
    const int v = pp * chunks;
    for (const ForwardCosts& costs : *cut_costs_) {
      const std::vector<int> starts = VirtualStageStarts(costs, pp, chunks, v_shape);
      std::vector<int> layers(v);
      for (int g = 0; g < v; ++g) {
        layers[g] = (g + 1 < v ? starts[g + 1] : config_.num_layers) - starts[g];
      }
      it->second.push_back(std::move(layers));
    }
  }
  return &it->second;
}

double TuneBounds::HeldByCut(const proto::Strategy& s, const std::vector<std::vector<int>>& cuts,
                             double after_b) {
  if (cuts.empty()) return 0;
  const ScheduleInfo& schedule = *FindSchedule(s.pipeline().schedule_mode()).value();
  const proto::PipelineStrategy& p = s.pipeline();
  const HeldKey key{schedule.name, p.degree(), p.micro_batches(), p.vpp_degree(),
                    p.max_in_flight(), after_b};
  auto [it, fresh] = held_.try_emplace(key);
  if (!fresh) return it->second;
  ScheduleParams params;
  params.num_stages = p.degree();
  params.micro_batches = p.micro_batches();
  params.chunks = std::max(1, p.vpp_degree());
  params.max_in_flight = static_cast<int>(p.max_in_flight());
  double least = std::numeric_limits<double>::infinity();
  std::vector<std::vector<Job>> jobs(params.num_stages);
  for (int stage = 0; stage < params.num_stages; ++stage) {
    params.stage = stage;
    StatusOr<std::vector<Job>> listed = schedule.fn(params);
    if (!listed.ok()) return it->second = 0;
    jobs[stage] = std::move(*listed);
  }
  // The pricing that leaves the fullest stage least.
  for (const std::vector<int>& layers : cuts) {
    double fullest = 0;
    for (int stage = 0; stage < params.num_stages; ++stage) {
      std::vector<int> chunk_layers(params.chunks);
      for (int chunk = 0; chunk < params.chunks; ++chunk) {
        chunk_layers[chunk] =
            layers[VirtualStageOf(stage, chunk, params.num_stages, schedule.v_shape)];
      }
      fullest = std::max(fullest, HeldAtFullest(jobs[stage], chunk_layers, after_b,
                                                schedule.splits_jobs));
    }
    least = std::min(least, fullest);
  }
  return it->second = least;
}

}  // namespace loom
