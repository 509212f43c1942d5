#include "passes/strategy.h"

#include <sstream>

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include "framework/file_util.h"
#include "passes/amp.h"
#include "scheduler/schedule.h"

namespace loom {
namespace {

class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (first.empty()) first = StrCat("line ", line + 1, ": ", message);
  }
  std::string first;
};

}  // namespace

StatusOr<proto::Strategy> ParseStrategy(const std::string& text) {
  proto::Strategy s;
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &s)) {
    return InvalidArgument("strategy does not parse: ", errors.first);
  }
  return s;
}

StatusOr<proto::Strategy> LoadStrategy(const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  auto s = ParseStrategy(text);
  if (!s.ok()) return s.status().WithContext(path);
  return s;
}

ParallelLayout LayoutOf(const proto::Strategy& s) {
  const int sharding = s.sharding().stage() > 0 && s.sharding().degree() > 0 &&
                               s.sharding().degree() < s.dp().degree()
                           ? s.sharding().degree()
                           : 0;
  ParallelLayout layout{s.dp().degree(), s.mp().degree(), s.pipeline().degree(), sharding};
  const StatusOr<const ScheduleInfo*> schedule = FindSchedule(s.pipeline().schedule_mode());
  layout.v_shape = schedule.ok() && (*schedule)->v_shape;
  return layout;
}

namespace {

// Sharding is over the data-parallel group; what is not built yet says so.
Status ValidateSharding(const proto::Strategy& s) {
  const proto::ShardingStrategy& sh = s.sharding();
  if (sh.degree() < 0) {
    return InvalidArgument("sharding.degree must be positive (0: dp.degree), got ", sh.degree());
  }
  if (sh.fetch_mode() != "all_gather" && sh.fetch_mode() != "all_reduce" &&
      sh.fetch_mode() != "auto") {
    return InvalidArgument("sharding.fetch_mode must be all_gather, all_reduce or auto, got '",
                           sh.fetch_mode(), "'");
  }
  if (sh.prefetch_depth() < 0) {
    return InvalidArgument("sharding.prefetch_depth must not be negative, got ",
                           sh.prefetch_depth());
  }
  if (sh.keep_gathered_bytes() < -1) {
    return InvalidArgument("sharding.keep_gathered_bytes must be -1 (all), 0 (none) or a size, "
                           "got ", sh.keep_gathered_bytes());
  }
  if (sh.keep_gathered_bytes() != 0 && sh.stage() != 3) {
    return InvalidArgument("sharding.keep_gathered_bytes is ", sh.keep_gathered_bytes(),
                           " but sharding.stage is ", sh.stage(), " (only stage 3 gathers "
                           "parameters before use)");
  }
  if (sh.stage() == 0) {
    if (sh.degree() > 1) {
      return InvalidArgument("sharding.degree is ", sh.degree(), " but sharding.stage is 0");
    }
    return Status::OK();
  }
  if (s.dp().degree() < 2) {
    return InvalidArgument("sharding.stage ", sh.stage(), " shards over the data-parallel "
                           "group, but dp.degree is ", s.dp().degree());
  }
  if (sh.degree() != 0 && (sh.degree() < 2 || s.dp().degree() % sh.degree() != 0)) {
    return InvalidArgument("sharding.degree ", sh.degree(), " must divide dp.degree (",
                           s.dp().degree(), ") and be at least 2");
  }
  return Status::OK();
}

}  // namespace

Status ValidateStrategy(const proto::Strategy& s, int world_size) {
  return CheckStrategy(s, world_size).status();
}

StatusOr<CheckedStrategy> CheckStrategy(const proto::Strategy& s, int world_size) {
  auto positive = [](const char* field, int64_t v) -> Status {
    if (v >= 1) return Status::OK();
    return InvalidArgument(field, " must be at least 1, got ", v);
  };
  LOOM_RETURN_IF_ERROR(positive("dp.degree", s.dp().degree()));
  LOOM_RETURN_IF_ERROR(positive("mp.degree", s.mp().degree()));
  LOOM_RETURN_IF_ERROR(positive("pipeline.degree", s.pipeline().degree()));
  LOOM_RETURN_IF_ERROR(
      positive("pipeline.micro_batches", s.pipeline().micro_batches()));
  LOOM_RETURN_IF_ERROR(positive("pipeline.vpp_degree", s.pipeline().vpp_degree()));
  if (s.dp().bucket_size_bytes() < 0) {
    return InvalidArgument("dp.bucket_size_bytes must be positive, or 0 for the cost model's "
                           "size, got ", s.dp().bucket_size_bytes());
  }
  // Degrees multiply into a rank count that must fit the layout's int
  // arithmetic, with room: beyond this no plan is meant.
  const int64_t ranks = int64_t{s.dp().degree()} * s.mp().degree() * s.pipeline().degree();
  if (ranks > kMaxWorldSize) {
    return InvalidArgument("dp.degree x mp.degree x pipeline.degree = ", s.dp().degree(), " x ",
                           s.mp().degree(), " x ", s.pipeline().degree(), " = ", ranks,
                           " ranks, more than Loom plans (", kMaxWorldSize, ")");
  }
  if (int64_t{s.pipeline().micro_batches()} * s.pipeline().vpp_degree() > kMaxWorldSize) {
    return InvalidArgument("pipeline.micro_batches x pipeline.vpp_degree = ",
                           s.pipeline().micro_batches(), " x ", s.pipeline().vpp_degree(),
                           " jobs a stage, more than Loom schedules (", kMaxWorldSize, ")");
  }
  const ParallelLayout layout = LayoutOf(s);
  if (world_size > 0 && layout.world_size() != world_size) {
    return InvalidArgument("dp.degree x mp.degree x pipeline.degree = ",
                           s.dp().degree(), " x ", s.mp().degree(), " x ",
                           s.pipeline().degree(), " = ", layout.world_size(),
                           ", but the world has ", world_size, " ranks");
  }
  if (s.sharding().stage() < 0 || s.sharding().stage() > 3) {
    return InvalidArgument("sharding.stage must be 0, 1, 2 or 3, got ",
                           s.sharding().stage());
  }
  LOOM_RETURN_IF_ERROR(ValidateSharding(s));
  LOOM_ASSIGN_OR_RETURN(const AmpConfig amp, AmpConfigOf(s));
  const auto& pp = s.pipeline();
  if (pp.degree() > 1 && !pp.enable()) {
    return InvalidArgument("pipeline.degree is ", pp.degree(),
                           " but pipeline.enable is false");
  }
  LOOM_ASSIGN_OR_RETURN(const ScheduleInfo* schedule,
                        FindSchedule(pp.schedule_mode()));
  if (!schedule->uses_chunks && pp.vpp_degree() > 1) {
    return InvalidArgument("pipeline.vpp_degree is ", pp.vpp_degree(),
                           " but pipeline.schedule_mode ", pp.schedule_mode(),
                           " has no chunks (use VPP or ZBV)");
  }
  if (schedule->uses_chunks && pp.vpp_degree() > 1 && pp.degree() <= 1) {
    return InvalidArgument("pipeline.vpp_degree is ", pp.vpp_degree(),
                           " but pipeline.degree is ", pp.degree(), ": ", pp.schedule_mode(),
                           " places chunks across stages (use ",
                           schedule->splits_backward ? "ZBH1" : "1F1B", ")");
  }
  if (schedule->splits_jobs && s.mp().degree() <= 1) {
    return InvalidArgument("pipeline.schedule_mode ", pp.schedule_mode(),
                           " overlaps tensor-parallel all-reduces with compute, but mp.degree is ",
                           s.mp().degree(), " (there are none; use 1F1B)");
  }
  if (pp.max_in_flight() != 0 && !schedule->splits_jobs) {
    return InvalidArgument("pipeline.max_in_flight is ", pp.max_in_flight(),
                           " but pipeline.schedule_mode ", pp.schedule_mode(),
                           " does not take it (1F1B-overlap does)");
  }
  if (s.mp().sequence_parallel() && s.mp().degree() <= 1) {
    return InvalidArgument("mp.sequence_parallel splits the sequence over the tensor-parallel "
                           "ranks, but mp.degree is ", s.mp().degree());
  }
  const proto::PassSwitches& passes = s.passes();
  if (passes.op_split() && s.mp().degree() <= 1) {
    return InvalidArgument("passes.op_split hides tensor-parallel all-reduces under GEMMs, but "
                           "mp.degree is ", s.mp().degree(), " (there are none)");
  }
  if (passes.op_split_parts() < 0 || passes.op_split_parts() == 1) {
    return InvalidArgument("passes.op_split_parts must be 0 (the cost model chooses) or at least "
                           "2, got ", passes.op_split_parts());
  }
  if (passes.op_split_parts() > 0 && !passes.op_split()) {
    return InvalidArgument("passes.op_split_parts is ", passes.op_split_parts(),
                           " but passes.op_split is off");
  }
  const proto::RecomputeStrategy& recompute = s.recompute();
  if (recompute.granularity() != "none" && recompute.granularity() != "full" &&
      recompute.granularity() != "selective") {
    return InvalidArgument("recompute.granularity must be none, full or selective, got '",
                           recompute.granularity(), "'");
  }
  if (recompute.num_layers() < 0) {
    return InvalidArgument("recompute.num_layers must be >= 0 (0: every layer), got ",
                           recompute.num_layers());
  }
  if (recompute.num_layers() > 0 && recompute.granularity() == "none") {
    return InvalidArgument("recompute.num_layers is ", recompute.num_layers(),
                           " but recompute.granularity is none");
  }
  // The schedule checks its own needs (micro-batches per stage, chunks).
  ScheduleParams params{0, pp.degree(), pp.micro_batches(), pp.vpp_degree()};
  params.max_in_flight = pp.max_in_flight();
  auto jobs = schedule->fn(params);
  if (!jobs.ok()) return jobs.status();
  return CheckedStrategy{s, schedule, layout, amp};
}

proto::Strategy MakeStrategy(int dp, int mp, int pp, int micro_batches,
                             const std::string& schedule, int vpp_degree) {
  proto::Strategy s;
  s.mutable_dp()->set_degree(dp);
  s.mutable_mp()->set_degree(mp);
  auto* pipeline = s.mutable_pipeline();
  pipeline->set_enable(pp > 1);
  pipeline->set_degree(pp);
  pipeline->set_micro_batches(micro_batches);
  pipeline->set_schedule_mode(schedule);
  pipeline->set_vpp_degree(vpp_degree);
  return s;
}

}  // namespace loom
