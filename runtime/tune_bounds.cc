#include "runtime/tune_bounds.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "passes/amp.h"
#include "passes/parallel_passes.h"
#include "scheduler/layout.h"
#include "scheduler/schedule.h"

namespace loom {
namespace {

// The least `price(algorithm, regime)` comes to over every algorithm and
// regime the simulator may price a call with.
template <typename Price>
double LeastOverPricings(const Price& price) {
  double least = std::numeric_limits<double>::infinity();
  for (CommAlgorithm algorithm :
       {CommAlgorithm::kRing, CommAlgorithm::kTree, CommAlgorithm::kDirect}) {
    for (CallRegime regime : {CallRegime::kTogether, CallRegime::kAfterWait,
                              CallRegime::kAwake, CallRegime::kSharedCores}) {
      least = std::min(least, price(algorithm, regime));
    }
  }
  return least;
}

// The least a call of `kind` moving `bytes` among `group` can cost: the
// cheapest algorithm and regime, after the longest idle, with no extra
// for it. The simulator prices each call as one of these.
double LeastCallSeconds(const CommModel& comm, CommCall kind, int64_t bytes,
                        const std::vector<int>& group) {
  return LeastOverPricings([&](CommAlgorithm algorithm, CallRegime regime) {
    double least = std::numeric_limits<double>::infinity();
    for (double idle : {0.0, 1e9}) {
      least = std::min(least, comm.CommSeconds(kind, algorithm, bytes, group, regime, idle,
                                               /*charge_after_idle=*/false));
    }
    return least;
  });
}

// One micro-batch's activation between layers on a rank, [b, s, h], in
// the compute dtype: what each tensor-parallel call of a layer moves whole.
int64_t MicroBatchActivationBytes(const GptConfig& config, const proto::Strategy& s) {
  const int64_t b = config.batch_size / s.dp().degree() / s.pipeline().micro_batches();
  return b * config.seq_len * config.hidden * (s.amp().level() == "O0" ? 4 : 2);
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
  const int64_t bytes = MicroBatchActivationBytes(config, s);
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
  const double least = LeastOverPricings([&](CommAlgorithm algorithm, CallRegime regime) {
    auto seconds = [&](int64_t bytes) {
      return comm.CommSeconds(kind, algorithm, bytes, group, regime, /*idle_seconds=*/0,
                              /*charge_after_idle=*/false);
    };
    return (seconds(2 * kBytes) - seconds(kBytes)) / kBytes;
  });
  return std::max(0.0, least);
}

// One reduction and one fetch of `layers` transformer layers' weight
// matrices on the data-parallel stream (the dp stream, or under ZeRO the
// sharding stream), at their least, each byte at LeastSecondsPerByte.
struct MatrixCalls {
  // Their gradients' all-reduce without ZeRO, reduce-scatter with it, in
  // the dtype they are reduced in.
  double reduction = 0;
  // From stage 1 on, the weights' all-gather of the shards or all-reduce
  // of whole buffers, whichever is cheaper: fp32 at stages 1 and 2, at
  // stage 3 at least the compute dtype.
  double fetch = 0;
};
MatrixCalls DataParallelMatrixCalls(const GptConfig& c, const proto::Strategy& s,
                                    const CommModel& comm, double layers) {
  MatrixCalls calls;
  const int dp = s.dp().degree();
  if (dp <= 1) return calls;
  const int stage = s.sharding().stage();
  const double h = static_cast<double>(c.hidden);
  const double matrices =
      layers * (4 * h * h + 2 * h * static_cast<double>(c.ffn_hidden)) / s.mp().degree();
  const bool amp = s.amp().level() != "O0";
  const double gradient_bytes = amp && s.amp().grad_reduce_dtype() != "fp32" ? 2 : 4;
  const std::vector<int> group = RingMembers(LayoutOf(s), 0, kDpRing);
  if (stage == 0) {
    calls.reduction =
        matrices * gradient_bytes * LeastSecondsPerByte(comm, CommCall::kAllReduce, group);
    return calls;
  }
  calls.reduction =
      matrices * gradient_bytes * LeastSecondsPerByte(comm, CommCall::kReduceScatter, group);
  const double weight_bytes = stage == 3 && amp ? 2 : 4;
  calls.fetch = matrices * weight_bytes *
                std::min(LeastSecondsPerByte(comm, CommCall::kAllGather, group) / dp,
                         LeastSecondsPerByte(comm, CommCall::kAllReduce, group));
  return calls;
}

// What the data-parallel stream of a rank holding `layers` transformer
// layers carries in a step, at its least, counting only those layers'
// weight matrices (DataParallelMatrixCalls):
//  - once a step, their reduction and, from stage 1 on, their fetch;
//  - with `every_micro_batch`, the reduce-scatter again in each later
//    micro-batch from stage 2 on, where the accumulated gradients are
//    sharded, and at stage 3, unless buckets are kept whole, the fetch in
//    each later micro-batch's forward (the backward's gathers left out: the
//    bucket the forward reads last is not gathered again).
double DataParallelStreamSeconds(const GptConfig& c, const proto::Strategy& s,
                                 const CommModel& comm, double layers, bool every_micro_batch) {
  const int stage = s.sharding().stage();
  const MatrixCalls calls = DataParallelMatrixCalls(c, s, comm, layers);
  const int later = every_micro_batch ? s.pipeline().micro_batches() - 1 : 0;
  const int reductions = 1 + (stage >= 2 ? later : 0);
  const int fetches = 1 + (stage == 3 && s.sharding().keep_gathered_bytes() == 0 ? later : 0);
  return reductions * calls.reduction + fetches * calls.fetch;
}

// The largest divisor of `dim` no greater than `most`.
int64_t LargestDivisorUpTo(int64_t dim, int64_t most) {
  for (int64_t k = std::min(dim, most); k > 1; --k) {
    if (dim % k == 0) return k;
  }
  return 1;
}

// The most parts op-split can cut a tensor-parallel GEMM of `s` into: its
// parts option, or the largest part count dividing a row dim of the
// GEMM's input, up to kOpSplitMaxParts (op_split_pass.cc, Choose). Under
// sequence parallelism the sequence is the collective's own dim, so only
// the micro-batch's sequences are cut: a micro-batch of one is not split.
int64_t MostOpSplitParts(const GptConfig& config, const proto::Strategy& s) {
  if (!s.passes().op_split()) return 1;
  if (s.passes().op_split_parts() > 0) return s.passes().op_split_parts();
  const int64_t b = config.batch_size / s.dp().degree() / s.pipeline().micro_batches();
  const int64_t by_batch = LargestDivisorUpTo(b, kOpSplitMaxParts);
  if (s.mp().sequence_parallel()) return by_batch;
  return std::max(by_batch, LargestDivisorUpTo(config.seq_len, kOpSplitMaxParts));
}

// The tensor-parallel calls of one layer's forward that its next op waits
// for, at their least, where a job's ops run in order (every schedule but
// the overlap ones, whose jobs' parts interleave): the all-reduce after the
// attention's and the MLP's row-parallel GEMM, or under sequence
// parallelism the reduce-scatter there and the all-gather before each
// column-parallel GEMM. Op-split cuts such a GEMM into parts whose calls
// run beside the other parts' compute, but the last part's reduction (the
// first part's gather) still waits, so a call counts at 1/k of its bytes,
// k the most parts op-split can cut it into (MostOpSplitParts).
double ExposedForwardMpCallsPerLayer(const GptConfig& config, const proto::Strategy& s,
                                     const CommModel& comm) {
  const int mp = s.mp().degree();
  if (mp <= 1) return 0;
  const std::vector<int> group = RingMembers(LayoutOf(s), 0, kMpRing);
  const int64_t bytes = MicroBatchActivationBytes(config, s) / MostOpSplitParts(config, s);
  const double call = s.mp().sequence_parallel()
                          ? LeastCallSeconds(comm, CommCall::kReduceScatter, bytes, group) +
                                LeastCallSeconds(comm, CommCall::kAllGather, bytes / mp, group)
                          : LeastCallSeconds(comm, CommCall::kAllReduce, bytes, group);
  return 2 * call;
}

// The tensor-parallel calls of one layer's backward that its next op waits
// for, at their least, where a job's ops run in order. Op-split cuts only
// forward GEMMs, so each waits for the whole call:
//  - under sequence parallelism, the all-gather of the output gradient
//    before each row-parallel GEMM's gradient (the attention's projection
//    and the MLP's second GEMM), which reads it whole
//    (sequence_parallel_pass.cc);
//  - where the backward is split (`split_backward`: ZBH1, ZBV), the
//    reduction of each column-parallel GEMM's input gradient (the QKV's and
//    the MLP's first), which the layer norm's gradient reads next. Whole,
//    the backward runs it beside the weight gradient's GEMM; B has none.
// (The column-parallel inputs' gathers again may be issued early: they do
// not count.)
double ExposedBackwardMpCallsPerLayer(const GptConfig& config, const proto::Strategy& s,
                                      const CommModel& comm, bool split_backward) {
  const int mp = s.mp().degree();
  if (mp <= 1) return 0;
  const std::vector<int> group = RingMembers(LayoutOf(s), 0, kMpRing);
  const int64_t bytes = MicroBatchActivationBytes(config, s);
  const bool sp = s.mp().sequence_parallel();
  double exposed = sp ? 2 * LeastCallSeconds(comm, CommCall::kAllGather, bytes / mp, group) : 0;
  if (split_backward) {
    exposed += 2 * LeastCallSeconds(comm, sp ? CommCall::kReduceScatter : CommCall::kAllReduce,
                                    bytes, group);
  }
  return exposed;
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
  // The first and the last forward op of a layer, by index: the forward
  // ops outside the layers before the one are the embedding's, after the
  // other the head's (ForwardCostsByLayer cuts them alike).
  int first_layered = -1, last_layered = -1;
  for (const Op* op : block.ops()) {
    if (!op->HasRole(role::kForward) || op->desc().layer() < 0) continue;
    if (first_layered < 0) first_layered = op->index();
    last_layered = op->index();
  }
  // The embedding's or the head's part for a forward op outside the layers.
  auto ends = [&](const Op& forward) -> PhaseCost* {
    if (forward.desc().layer() >= 0 || first_layered < 0) return nullptr;
    if (forward.index() < first_layered) return &cost.pre;
    if (forward.index() > last_layered) return &cost.post;
    return nullptr;
  };
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
      if (PhaseCost* end = forward != nullptr ? ends(*forward) : nullptr) {
        end->Add(priced.seconds, launch);
      }
    } else {
      cost.forward.Add(priced.seconds, launch);
      if (op->desc().layer() >= 0) cost.layers_forward.Add(priced.seconds, launch);
      if (PhaseCost* end = ends(*op)) end->Add(priced.seconds, launch);
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
  out.pre = phase(a.pre, b.pre);
  out.post = phase(a.post, b.post);
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
  if (cluster.shared_host().host_cores() > 0) return cluster.shared_host().host_cores();
  if (cluster.ranks_per_device() == 0) return std::max(1, cluster.device().cores());
  return 0;
}

// A candidate's time bound (and its compute part), the largest of:
//  - the average rank: its share of every micro-batch's forward and
//    backward (the forward again under full recomputation), then its share
//    of the update (1/dp of it from ZeRO stage 1 on), and the
//    tensor-parallel calls its calc stream waits for
//    (ExposedForwardMpCallsPerLayer, ExposedBackwardMpCallsPerLayer);
//    and, with all its layers' tensor-parallel calls, half the sum: the
//    calc and mp streams can at best share them evenly;
//  - the last stage (each layer's forward and backward with the calls
//    they wait for): it cannot start before the first micro-batch's
//    forward has crossed the stages before it, each chunk of them holding
//    at least layers / (stages x chunks) layers, and then runs every
//    forward and backward of its own fewest layers, each op's launch
//    whole and its work over mp (the forward's work again under full
//    recomputation). This bounds any schedule's bubble, ZB's and ZBV's
//    too (every job of the last stage waits for that first forward). Where the
//    backward is not split (every schedule but ZBH1 and ZBV), the last
//    micro-batch's backward then crosses the stages back to the first, a
//    chunk's backward on each (a recomputed forward, not all of whose ops
//    run again, left out): the stage's last backward is its last job, after
//    all its forwards and backwards. Split, that crossing is B's alone,
//    whose share of the backward the serial price does not give;
//  - on one host's shared cores, all ranks' work over the cores;
//  - the busiest stage, as pipeline-split cuts the layers (`cuts`, each
//    virtual stage's layers under each pricing it may cut by; the fewer
//    the layers, the less is counted): every micro-batch's forward and
//    backward of its layers, with the calls they wait for, and of the
//    embedding on the first virtual stage and the head and loss on the
//    last. A stage runs its jobs one at a time, whatever the schedule; the
//    last stage's term above counts its own layers so too, and the head's
//    jobs where it holds them (every schedule but ZBV, which puts the head
//    on stage 0);
// and TuneBounds::DataParallelStream adds what the data-parallel stream
// carries. Where the backward is not split, `*first_stage_last_backward_s`
// is when the first stage's last backward starts at the earliest (the
// last stage's bound less that chunk's backward in the crossing back),
// else 0.
CandidateBounds TimeBoundsOf(const GptConfig& config, const proto::Strategy& s,
                             const SerialCost& serial, const RankLayerPrice& rank_layer,
                             const std::vector<std::vector<int>>& cuts,
                             int shared_cores, const CommModel& comm,
                             double* first_stage_last_backward_s) {
  const int dp = s.dp().degree(), mp = s.mp().degree(), pp = s.pipeline().degree();
  const int vpp = std::max(1, s.pipeline().vpp_degree());
  const int m = s.pipeline().micro_batches();
  const bool full = s.recompute().granularity() == "full";
  const int update_shards = s.sharding().stage() >= 1 ? dp : 1;
  const StatusOr<const ScheduleInfo*> schedule = FindSchedule(s.pipeline().schedule_mode());
  // What the calc stream waits for in each layer's forward (again in its
  // recomputation under full).
  const bool in_order = schedule.ok() && !(*schedule)->splits_jobs;
  const bool whole_backward = schedule.ok() && !(*schedule)->splits_backward;
  const double exposed = in_order ? ExposedForwardMpCallsPerLayer(config, s, comm) : 0;
  // And in each layer's backward.
  const double exposed_backward =
      in_order ? ExposedBackwardMpCallsPerLayer(config, s, comm, !whole_backward) : 0;
  // Each layer as a rank of the group runs it (RankLayerPrices), at least,
  // with the sums of its weight gradients into the step's where a plan
  // accumulates them whole.
  const double accumulate = m > 1 && s.sharding().stage() < 2 ? rank_layer.accumulate : 0;
  const double rank_layers =
      config.num_layers * (rank_layer.forward + rank_layer.backward + accumulate) +
      serial.pre.Share(mp, 1) + serial.post.Share(mp, 1);
  const double per_micro_batch =
      std::max(serial.forward.Share(mp, pp) * (full ? 2 : 1) + serial.backward.Share(mp, pp),
               rank_layers / pp);
  const double compute = m * per_micro_batch + serial.optimizer.Share(mp, pp * update_shards);
  const double average = compute + m * (exposed * (full ? 2 : 1) + exposed_backward) *
                                       config.num_layers / pp;
  const int64_t fewest_layers = config.num_layers / pp;
  const int64_t fewest_in_chunk = config.num_layers / (static_cast<int64_t>(pp) * vpp);
  const double layer_forward =
      std::max(serial.layer_forward.Share(mp, 1), rank_layer.forward) + exposed;
  // A layer's backward without what it recomputes, which need not wait for
  // the gradient (the crossing back).
  const double layer_backward =
      std::max(serial.layer_backward.Share(mp, 1), rank_layer.unrecomputed_backward) +
      exposed_backward;
  // And with it, on its stage's calc stream.
  const double recomputed = full ? serial.layer_forward.work / mp : 0;
  const double per_layer =
      layer_forward +
      std::max(serial.layer_backward.Share(mp, 1) + recomputed, rank_layer.backward + accumulate) +
      exposed_backward + (full ? exposed : 0);
  // A micro-batch's jobs on each stage, under the cut that makes the
  // busiest one least, and under the one that makes the last one least.
  double busiest_stage = 0;
  double last_stage_jobs = fewest_layers * per_layer;
  const bool v_shape = schedule.ok() && (*schedule)->v_shape;
  for (size_t i = 0; i < cuts.size(); ++i) {
    std::vector<double> stage(pp, 0);
    const int v = static_cast<int>(cuts[i].size());
    for (int g = 0; g < v; ++g) {
      stage[PlaceVirtualStage(g, pp, v_shape).stage] +=
          cuts[i][g] * per_layer + (g == 0 ? serial.pre.Share(mp, 1) : 0) +
          (g == v - 1 ? serial.post.Share(mp, 1) : 0);
    }
    const double busiest = *std::max_element(stage.begin(), stage.end());
    busiest_stage = i == 0 ? busiest : std::min(busiest_stage, busiest);
    last_stage_jobs = i == 0 ? stage[pp - 1] : std::min(last_stage_jobs, stage[pp - 1]);
  }
  const double crossing_back =
      whole_backward ? (pp - 1) * fewest_in_chunk * layer_backward : 0;
  const double last_stage =
      (pp - 1) * fewest_in_chunk * layer_forward + m * last_stage_jobs + crossing_back;
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
  // Where the backward is not split, the first stage's last job is its
  // first chunk's backward of the last micro-batch, which starts once the
  // crossing back has reached it.
  *first_stage_last_backward_s =
      whole_backward ? last_stage - fewest_in_chunk * layer_backward : 0;
  CandidateBounds b;
  b.compute_s = std::max({with_calls, last_stage, host, m * busiest_stage});
  b.time_s = b.compute_s;
  return b;
}

}  // namespace

TuneBounds::TuneBounds(const GptConfig& config, const OptimizerConfig& optimizer,
                       const proto::Strategy& base, const CostContext& costs)
    : config_(config),
      optimizer_(optimizer),
      base_(base),
      costs_(costs),
      layer_prices_(config, optimizer, base, costs),
      memory_(config, optimizer, base, costs) {}

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
  LOOM_ASSIGN_OR_RETURN(const std::vector<std::vector<int>>* cuts,
                        memory_.VirtualStageLayers(s));
  const RankLayerPrice rank_layer = layer_prices_.Of(s);
  double last_backward = 0;
  CandidateBounds b = TimeBoundsOf(config_, s, priced->second, rank_layer, *cuts,
                                   SharedCores(costs_.cluster()), costs_.comm(), &last_backward);
  b.time_s = std::max(b.time_s, DataParallelStream(s));
  if (last_backward > 0) {
    // Only in that backward are its chunk's gradients final: their
    // reduction, and at stages 1 and 2 their fetch after the update, run
    // after it starts.
    LOOM_ASSIGN_OR_RETURN(const int layers, memory_.FirstChunkLayers(s));
    const MatrixCalls calls = DataParallelMatrixCalls(config_, s, costs_.comm(), layers);
    b.time_s = std::max(b.time_s, last_backward + calls.reduction +
                                      (s.sharding().stage() < 3 ? calls.fetch : 0));
  }
  LOOM_ASSIGN_OR_RETURN(b.memory_bytes, memory_.Of(s));
  return b;
}

double TuneBounds::DataParallelStream(const proto::Strategy& s) const {
  const double average = static_cast<double>(config_.num_layers) / s.pipeline().degree();
  // A bucket whose gradients are all-reduced again before the update is
  // reduced and fetched once a step at every stage (sharding_pass.cc,
  // TiedBucket). Under sequence parallelism the layer norms' and the
  // row-parallel biases' gradients are, and a bucket of matrices keeps
  // apart from them only where their updates differ (AdamW decays the
  // matrices alone). (The tied embedding's gradient, which the first and
  // last stage sum, has a bucket of its own under ZeRO: data_parallel_pass.cc.)
  const bool matrices_apart = optimizer_.type == "adamw" && optimizer_.weight_decay != 0;
  const bool tied_matrices = s.mp().degree() > 1 && s.mp().sequence_parallel() && !matrices_apart;
  return DataParallelStreamSeconds(config_, s, costs_.comm(), average,
                                   /*every_micro_batch=*/!tied_matrices);
}

}  // namespace loom
