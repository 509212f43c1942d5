// data-parallel: each dp rank takes 1/degree of the batch; gradients are
// averaged over the dp group by all-reduces grouped into buckets.
//
// Buckets follow the order gradients are produced (the param_grads
// annotations autodiff leaves, in program order), and each bucket's
// all-reduce is issued right after the op that completes its last
// gradient, on the dp stream: the first bucket's communication starts while
// the rest of the backward still runs, instead of all of it waiting for the
// end. With gradient accumulation the all-reduce runs only in the last
// micro-batch, on the accumulated sum. With VPP, buckets stay within one
// model chunk.
//
// The bucket size is the bucket-bytes option where given (the planner
// writes dp.bucket_size_bytes, or 1 with dp_bucketing off: one all-reduce
// per gradient); else the cost model's (cost_model/bucket_size.h): the
// smallest size at which the dp group's all-reduce reaches 90% of its
// link's bandwidth, at most a quarter of the rank's gradients.
//
// The reduce-dtype option reduces fp32 gradients in bf16 or fp16
// (framework/wire_dtype.h): half the bytes, each member's gradient rounded
// once. The sharding pass keeps it on the reduce-scatters it makes of the
// buckets.
#include <map>
#include <set>

#include "cost_model/bucket_size.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "framework/wire_dtype.h"
#include "passes/comm_ops.h"
#include "passes/parallel_passes.h"

namespace loom {
namespace {

constexpr const char* kPassName = "data-parallel";

// Each parameter's kind of update: its optimize op's type and attributes.
std::map<std::string, std::string> UpdateClasses(const Block& block) {
  std::map<std::string, std::string> cls;
  for (const Op* op : block.ops()) {
    if (!op->HasRole(role::kOptimize) || !op->HasInput("Param")) continue;
    std::string key = op->type();
    for (const proto::Attr& a : op->desc().attrs()) key += "|" + a.ShortDebugString();
    cls[op->Input("Param")] = key;
  }
  return cls;
}

struct DataParallelOptions {
  int64_t degree = 1;
  int64_t bucket_bytes = 0;  // 0: the cost model's
  // The sharding pass runs next: every bucket a flat buffer of one kind of
  // update.
  bool for_sharding = false;
  // The dtype fp32 gradients are reduced in (the all-reduce's wire dtype).
  DataType reduce_dtype = proto::FP32;
};

class DataParallelPass : public Pass {
 public:
  explicit DataParallelPass(const DataParallelOptions& options)
      : degree_(options.degree),
        bucket_bytes_(options.bucket_bytes),
        for_sharding_(options.for_sharding),
        reduce_dtype_(options.reduce_dtype) {}
  StatusOr<bool> Run(PassContext& ctx) override;

 private:
  int64_t degree_, bucket_bytes_;
  bool for_sharding_;
  DataType reduce_dtype_;
};

StatusOr<bool> DataParallelPass::Run(PassContext& ctx) {
  ctx.ResolveDpDegree(static_cast<int>(degree_));
  if (degree_ == 1) {
    ctx.resolved().set_dp_bucket_bytes(bucket_bytes_);
    return false;
  }
  Block& block = ctx.program().global_block();
  // What a gradient's element moves as: bucket sizes count wire bytes.
  auto wire = [&](DataType held) {
    return held == proto::FP32 ? reduce_dtype_ : held;
  };
  if (bucket_bytes_ <= 0) {
    LOOM_ASSIGN_OR_RETURN(const CostContext* costs,
                          ctx.CostsFor("sizing the gradient buckets (dp.bucket_size_bytes unset)"));
    int64_t total = 0;
    for (const Op* op : block.ops()) {
      for (const proto::ParamGrad& pg : op->desc().param_grads()) {
        const proto::VarDesc* g = block.FindVar(pg.grad());
        total += NumElements(MetaOf(*g).shape) * SizeOf(wire(g->dtype()));
      }
    }
    LOOM_ASSIGN_OR_RETURN(
        BucketSizeChoice choice,
        ChooseBucketBytes(costs->comm(), CommCall::kAllReduce, CommAlgorithm::kDirect,
                          RingMembers(ctx.layout(), ctx.rank(), kDpRing), total));
    bucket_bytes_ = choice.bytes;
    ctx.Explain(kPassName, choice.Explain());
  }
  ctx.resolved().set_dp_bucket_bytes(bucket_bytes_);
  LOOM_RETURN_IF_ERROR(ShardBatchDim(block, degree_, "dp.degree"));
  const bool accumulating = ctx.micro_batches() > 1;

  // Open buckets by class: a flat buffer holds one dtype, and under
  // sharding one kind of update (type and attributes: AdamW decays
  // matrices, not vectors), since each rank updates its shard of a bucket
  // with one op.
  const std::map<std::string, std::string> update_class =
      for_sharding_ ? UpdateClasses(block) : std::map<std::string, std::string>();
  std::set<std::string> shared;  // gradients all-reduced across stages
  for (const Op* op : block.ops()) {
    if (op->type() == "allreduce" && op->GetAttr<int32_t>("ring_id") == kSharedParamRing) {
      for (const std::string& g : op->InputVars()) shared.insert(g);
    }
  }
  struct Bucket {
    std::vector<std::string> grads;
    int64_t bytes = 0;
    Op* last = nullptr;  // the op that completed its latest gradient
  };
  std::map<std::string, Bucket> open;
  std::map<Op*, Op*> tail;  // anchor -> the last all-reduce inserted after it
  int buckets = 0;
  // Issues the bucket's all-reduce right after the op that completed its
  // last gradient (after the all-reduces already there). The gradients of
  // a bucket of several (or any, under sharding) are placed back to back
  // in one flat buffer (VarDesc.flat), so that the all-reduce, which still
  // names each of them, moves them as one tensor in place, with no packing
  // or unpacking copy.
  auto flush = [&](Bucket& bucket) -> Status {
    const std::vector<std::string>& grads = bucket.grads;
    if (grads.size() > 1 || for_sharding_) {
      const std::string buffer = StrCat("dp.bucket", buckets, "@GRAD");
      int64_t offset = 0;
      for (const std::string& g : grads) {
        proto::VarDesc* var = block.FindVar(g);
        var->set_persistable(true);
        var->mutable_flat()->set_buffer(buffer);
        var->mutable_flat()->set_offset(offset);
        offset += NumElements(MetaOf(*var).shape);
      }
      proto::VarDesc* b = block.AddVar(buffer);
      SetMeta(TensorMeta{block.FindVar(grads[0])->dtype(), {offset}}, b);
      b->set_persistable(true);
    }
    proto::OpDesc reduce = CollectiveOp("allreduce", grads, grads, kDpRing,
                                        stream::kDp, role::kBackward);
    *reduce.add_attrs() = MakeAttr("reduce_op", std::string("avg"));
    const DataType held = block.FindVar(grads[0])->dtype();
    if (wire(held) != held) {
      *reduce.add_attrs() = MakeAttr(kWireDtypeAttr, std::string(DataTypeName(wire(held))));
    }
    reduce.set_pipeline_stage(bucket.last->desc().pipeline_stage());
    reduce.set_chunk(bucket.last->desc().chunk());
    reduce.set_last_micro_batch_only(accumulating);
    auto [at, fresh] = tail.emplace(bucket.last, bucket.last);
    LOOM_ASSIGN_OR_RETURN(at->second, InsertOpAfterInferShapes(block, at->second, reduce));
    ++buckets;
    bucket = Bucket();
    return Status::OK();
  };
  auto flush_all = [&]() -> Status {
    for (auto& [key, bucket] : open) {
      if (!bucket.grads.empty()) LOOM_RETURN_IF_ERROR(flush(bucket));
    }
    return Status::OK();
  };
  int chunk = -1;
  for (Op* op : block.OpVector()) {
    if (op->desc().param_grads_size() == 0) continue;
    // A bucket never spans model chunks: each chunk's backward is its own
    // job, and a bucket's all-reduce must run in the job that completes it.
    if (chunk != op->desc().chunk()) LOOM_RETURN_IF_ERROR(flush_all());
    chunk = op->desc().chunk();
    for (const proto::ParamGrad& pg : op->desc().param_grads()) {
      const proto::VarDesc* g = block.FindVar(pg.grad());
      auto cls = update_class.find(pg.param());
      // Under sharding a gradient that stages also all-reduce among them
      // (a tied parameter's) has a bucket of its own, laid out alike on
      // every stage that holds it, so that each rank's shard of it is the
      // same elements there.
      const bool alone = for_sharding_ && shared.count(pg.grad()) > 0;
      Bucket& bucket = open[StrCat(DataTypeName(g->dtype()), "|",
                                   cls == update_class.end() ? "" : cls->second,
                                   alone ? "|" + pg.grad() : "")];
      bucket.grads.push_back(pg.grad());
      bucket.bytes += NumElements(MetaOf(*g).shape) * SizeOf(wire(g->dtype()));
      bucket.last = op;
      if (bucket.bytes >= bucket_bytes_) LOOM_RETURN_IF_ERROR(flush(bucket));
    }
  }
  LOOM_RETURN_IF_ERROR(flush_all());
  ctx.Explain(kPassName, StrCat(buckets, " gradient buckets of up to ",
                                bucket_bytes_, " bytes over ", degree_, " dp ranks",
                                reduce_dtype_ == proto::FP32
                                    ? ""
                                    : StrCat(", fp32 gradients reduced in ",
                                             DataTypeName(reduce_dtype_))));
  return true;
}

}  // namespace

PassInfo DataParallelPassInfo() {
  using O = DataParallelOptions;
  PassInfo info = PassInfoOf<DataParallelPass, O>(
      kPassName,
      "shards the batch over dp ranks and averages gradients with bucketed all-reduces issued as "
      "soon as each bucket is complete");
  info.options = {
      IntOption(&O::degree, "degree", "dp ranks", 1, kMaxPassDegree),
      IntOption(&O::bucket_bytes, "bucket-bytes",
                "bucket size (0: the cost model's; 1: one all-reduce per gradient)", 0),
      BoolOption(&O::for_sharding, "for-sharding",
                 "lay buckets out for the sharding pass: each a flat buffer of one kind of "
                 "update"),
      EnumOption(&O::reduce_dtype, "reduce-dtype",
                 "the dtype fp32 gradients are all-reduced in (bf16/fp16: half the bytes)",
                 std::vector<std::pair<std::string, DataType>>{
                     {"fp32", proto::FP32}, {"bf16", proto::BF16}, {"fp16", proto::FP16}})};
  return info;
}

}  // namespace loom
