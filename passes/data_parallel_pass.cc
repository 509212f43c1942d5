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
// The bucket size is dp.bucket_size_bytes (or the pass's bucket-bytes
// option) where given; else the cost model's (cost_model/bucket_size.h):
// the smallest size at which the dp group's all-reduce reaches 90% of its
// link's bandwidth, at most a quarter of the rank's gradients.
#include "cost_model/bucket_size.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "passes/comm_ops.h"
#include "passes/parallel_passes.h"

namespace loom {
namespace {

constexpr const char* kPassName = "data-parallel";

class DataParallelPass : public Pass {
 public:
  DataParallelPass(int64_t degree, int64_t bucket_bytes)
      : degree_(degree), bucket_bytes_(bucket_bytes) {}
  StatusOr<bool> Run(PassContext& ctx) override;

 private:
  int64_t degree_, bucket_bytes_;
};

StatusOr<bool> DataParallelPass::Run(PassContext& ctx) {
  if (degree_ <= 0) degree_ = ctx.dp_degree();
  if (bucket_bytes_ <= 0) bucket_bytes_ = ctx.dp_bucket_bytes();
  if (!ctx.strategy().passes().dp_bucketing()) bucket_bytes_ = 1;
  ctx.resolved().set_dp_degree(static_cast<int32_t>(degree_));
  if (degree_ == 1) {
    ctx.resolved().set_dp_bucket_bytes(bucket_bytes_);
    return false;
  }
  Block& block = ctx.program().global_block();
  if (bucket_bytes_ <= 0) {
    LOOM_ASSIGN_OR_RETURN(const CommModel* comm, ctx.CommModelOrLocal());
    int64_t total = 0;
    for (const Op* op : block.ops()) {
      for (const proto::ParamGrad& pg : op->desc().param_grads()) {
        const proto::VarDesc* g = block.FindVar(pg.grad());
        total += NumElements(MetaOf(*g).shape) * SizeOf(g->dtype());
      }
    }
    LOOM_ASSIGN_OR_RETURN(
        BucketSizeChoice choice,
        ChooseBucketBytes(*comm, CollectiveKind::kAllReduce, CommAlgorithm::kDirect,
                          RingMembers(ctx.layout(), ctx.rank(), kDpRing), total));
    bucket_bytes_ = choice.bytes;
    ctx.Explain(kPassName, choice.Explain());
  }
  ctx.resolved().set_dp_bucket_bytes(bucket_bytes_);
  LOOM_RETURN_IF_ERROR(ShardBatchDim(block, degree_, "dp.degree"));
  const bool accumulating = ctx.micro_batches() > 1;

  std::vector<std::string> bucket;
  int64_t bytes = 0;
  int buckets = 0;
  // Issues the bucket's all-reduce right after `last`, the op that
  // completed its last gradient. The gradients of a bucket of several are
  // placed back to back in one flat buffer (VarDesc.flat), so that the
  // all-reduce, which still names each of them, moves them as one tensor
  // in place, with no packing or unpacking copy.
  auto flush = [&](Op* last) -> StatusOr<Op*> {
    if (bucket.size() > 1) {
      const std::string buffer = StrCat("dp.bucket", buckets, "@GRAD");
      int64_t offset = 0;
      for (const std::string& g : bucket) {
        proto::VarDesc* var = block.FindVar(g);
        var->set_persistable(true);
        var->mutable_flat()->set_buffer(buffer);
        var->mutable_flat()->set_offset(offset);
        offset += NumElements(MetaOf(*var).shape);
      }
      proto::VarDesc* b = block.AddVar(buffer);
      SetMeta(TensorMeta{block.FindVar(bucket[0])->dtype(), {offset}}, b);
      b->set_persistable(true);
    }
    proto::OpDesc reduce = CollectiveOp("allreduce", bucket, bucket, kDpRing,
                                        stream::kDp, role::kBackward);
    *reduce.add_attrs() = MakeAttr("reduce_op", std::string("avg"));
    reduce.set_pipeline_stage(last->desc().pipeline_stage());
    reduce.set_chunk(last->desc().chunk());
    reduce.set_last_micro_batch_only(accumulating);
    LOOM_ASSIGN_OR_RETURN(Op* inserted, InsertOpAfterInferShapes(block, last, reduce));
    ++buckets;
    bucket.clear();
    bytes = 0;
    return inserted;
  };
  Op* last = nullptr;
  for (Op* op : block.OpVector()) {
    if (op->desc().param_grads_size() == 0) continue;
    // A bucket never spans model chunks: each chunk's backward is its own
    // job, and a bucket's all-reduce must run in the job that completes it.
    if (!bucket.empty() && op->desc().chunk() != last->desc().chunk()) {
      LOOM_RETURN_IF_ERROR(flush(last).status());
    }
    // Buckets this op completes go right after it, in order.
    Op* after = op;
    for (const proto::ParamGrad& pg : op->desc().param_grads()) {
      const proto::VarDesc* g = block.FindVar(pg.grad());
      // A buffer holds one dtype.
      if (!bucket.empty() && g->dtype() != block.FindVar(bucket[0])->dtype()) {
        if (last == op) {
          LOOM_ASSIGN_OR_RETURN(after, flush(after));
        } else {
          LOOM_RETURN_IF_ERROR(flush(last).status());
        }
      }
      bucket.push_back(pg.grad());
      bytes += NumElements(MetaOf(*g).shape) * SizeOf(g->dtype());
      last = op;
      if (bytes >= bucket_bytes_) {
        LOOM_ASSIGN_OR_RETURN(after, flush(after));
      }
    }
  }
  if (!bucket.empty()) LOOM_RETURN_IF_ERROR(flush(last).status());
  ctx.Explain(kPassName, StrCat(buckets, " gradient buckets of up to ",
                                bucket_bytes_, " bytes over ", degree_, " dp ranks"));
  return true;
}

}  // namespace

PassInfo DataParallelPassInfo() {
  PassInfo info;
  info.name = kPassName;
  info.summary =
      "shards the batch over dp ranks and averages gradients with bucketed "
      "all-reduces issued as soon as each bucket is complete";
  info.options = {{"degree", "", "dp ranks (default: dp.degree)"},
                  {"bucket-bytes", "", "bucket size (default: dp.bucket_size_bytes, else the cost model's)"}};
  info.create = [](const PassOptions& o) -> StatusOr<std::unique_ptr<Pass>> {
    int64_t degree = 0, bytes = 0;
    if (o.Has("degree")) {
      LOOM_ASSIGN_OR_RETURN(degree, o.GetInt("degree"));
    }
    if (o.Has("bucket-bytes")) {
      LOOM_ASSIGN_OR_RETURN(bytes, o.GetInt("bucket-bytes"));
    }
    if (o.Has("degree") && degree < 1) {
      return InvalidArgument("pass data-parallel: degree must be at least 1");
    }
    return std::unique_ptr<Pass>(new DataParallelPass(degree, bytes));
  };
  return info;
}

}  // namespace loom
