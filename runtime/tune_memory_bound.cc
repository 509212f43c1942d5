#include "runtime/tune_memory_bound.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "framework/op_work.h"
#include "passes/amp.h"

namespace loom {
namespace {

using InFlight = MemoryBound::InFlight;

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

const std::vector<std::vector<InFlight>>& MemoryBound::InFlightTable::Of(
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

using InFlightTable = MemoryBound::InFlightTable;

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

}  // namespace

MemoryBound::MemoryBound(const GptConfig& config, const OptimizerConfig& optimizer,
                         const proto::Strategy& base, const CostContext& costs)
    : config_(config), optimizer_(optimizer), base_(base), costs_(costs) {}

StatusOr<int64_t> MemoryBound::Of(const proto::Strategy& s) {
  const int mp = s.mp().degree(), pp = s.pipeline().degree();
  const int m = s.pipeline().micro_batches();
  LOOM_ASSIGN_OR_RETURN(const std::vector<std::vector<int>>* cuts, VirtualStageLayers(s));
  const double params_on_rank = static_cast<double>(config_.NumParameters()) / (mp * pp);
  const double kept = KeptActivationBytes(config_, s);
  const double after_b = KeptForWeightGradientBytes(config_, s) / kept;
  const double activations =
      kept * std::max(KeptLayerMicroBatches(config_, s, after_b, in_flight_),
                      HeldByCut(s, *cuts, after_b));
  const double gradients = params_on_rank * GradientBytesPerParameter(s);
  // Accumulators sit beside the activations; one micro-batch's gradients
  // appear as its activations are freed, so either may be the peak.
  const double transient = m > 1 ? activations + gradients : std::max(activations, gradients);
  return static_cast<int64_t>(params_on_rank * BytesPerParameter(s, optimizer_) + transient);
}

StatusOr<int> MemoryBound::FirstChunkLayers(const proto::Strategy& s) {
  LOOM_ASSIGN_OR_RETURN(const std::vector<std::vector<int>>* cuts, VirtualStageLayers(s));
  int fewest = 0;
  for (size_t i = 0; i < cuts->size(); ++i) {
    fewest = i == 0 ? (*cuts)[i][0] : std::min(fewest, (*cuts)[i][0]);
  }
  return fewest;
}

StatusOr<const std::vector<std::vector<int>>*> MemoryBound::VirtualStageLayers(
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

double MemoryBound::HeldByCut(const proto::Strategy& s, const std::vector<std::vector<int>>& cuts,
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
