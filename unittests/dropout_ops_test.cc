// dropout: the seeded mask, fresh each step and the same for any split of
// the tensor placed by its global position (rows, heads), upscaling,
// is_test, the gradient and attribute errors.
#include <cmath>

#include <gtest/gtest.h>

#include "executor/serial_executor.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "unittests/grad_check.h"

namespace loom {
namespace {

using testing::CheckGrad;
using testing::GradCheckCase;
using testing::RandomTensor;

struct DropoutResult {
  std::vector<float> out;
  std::vector<bool> mask;
};

// Where the tensor lies in the full one: the run's step and row offset, and
// the shard attributes (empty: whole).
struct Placement {
  RunInfo run;
  std::vector<int64_t> full_shape = {};
  std::vector<int64_t> shard_offsets = {};
};

DropoutResult RunDropout(const Tensor& x, float p, int64_t seed,
                         bool is_test = false, const Placement& at = {}) {
  RegisterAllCpuKernels();
  Program prog;
  Block& b = prog.global_block();
  SetMeta(x.meta(), b.AddVar("x"));
  b.FindVar("x")->set_is_data(true);
  OpDescBuilder desc = OpDescBuilder("dropout")
                           .Input("X", "x")
                           .Output("Out", "out")
                           .Output("Mask", "mask")
                           .Attr("dropout_prob", p)
                           .Attr("seed", seed)
                           .Attr("is_test", is_test);
  if (!at.full_shape.empty()) desc.Attr("full_shape", at.full_shape);
  if (!at.shard_offsets.empty()) desc.Attr("shard_offsets", at.shard_offsets);
  auto op = AppendOpInferShapes(b, desc);
  CHECK(op.ok()) << op.status();
  EXPECT_EQ(MetaOf(*b.FindVar("mask")), (TensorMeta{proto::BOOL, x.shape()}));
  Scope scope;
  scope.Var("x")->CopyFrom(x);
  auto exec = SerialExecutor::Create(prog, &scope, {{"out", "mask"}});
  CHECK(exec.ok()) << exec.status();
  Status s = (*exec)->Run(at.run);
  CHECK(s.ok()) << s;
  DropoutResult r;
  r.out = scope.Find("out")->ToFloatVector();
  const bool* m = scope.Find("mask")->data<bool>();
  r.mask.assign(m, m + x.numel());
  return r;
}

// `v` (of `shape`) restricted to [start, start + len) along `axis`.
std::vector<bool> SliceOf(const std::vector<bool>& v, const Shape& shape, int axis,
                          int64_t start, int64_t len) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<bool> out;
  for (int64_t o = 0; o < outer; ++o) {
    const auto first = v.begin() + (o * shape[axis] + start) * inner;
    out.insert(out.end(), first, first + len * inner);
  }
  return out;
}

int Agreeing(const std::vector<bool>& a, const std::vector<bool>& b) {
  int same = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) same += a[i] == b[i];
  return same;
}

TEST(DropoutForward, SeedDeterminesMask) {
  Tensor x = RandomTensor({1000}, 1);
  DropoutResult a = RunDropout(x, 0.5f, 7);
  DropoutResult b = RunDropout(x, 0.5f, 7);
  DropoutResult c = RunDropout(x, 0.5f, 8);
  EXPECT_EQ(a.mask, b.mask);
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.mask, c.mask);
  // Different seeds should agree about as often as chance says (1/2).
  int same = 0;
  for (size_t i = 0; i < a.mask.size(); ++i) same += a.mask[i] == c.mask[i];
  EXPECT_NEAR(same / 1000.0, 0.5, 0.06);
}

// Each training step draws a fresh mask, as independent of the last as
// two seeds' masks are; the same step draws the same one again.
TEST(DropoutForward, StepDeterminesMask) {
  Tensor x = RandomTensor({10, 100}, 1);
  DropoutResult step0 = RunDropout(x, 0.5f, 7);
  DropoutResult step1 = RunDropout(x, 0.5f, 7, false, {{1, 0}});
  DropoutResult step1_again = RunDropout(x, 0.5f, 7, false, {{1, 0}});
  DropoutResult step2 = RunDropout(x, 0.5f, 7, false, {{2, 0}});
  EXPECT_EQ(step1.mask, step1_again.mask);
  EXPECT_NEAR(Agreeing(step0.mask, step1.mask) / 1000.0, 0.5, 0.06);
  EXPECT_NEAR(Agreeing(step1.mask, step2.mask) / 1000.0, 0.5, 0.06);
}

// A tensor cut into row halves, each run with its first row's global
// index (a dp replica's or micro-batch's share of the batch), draws the
// whole tensor's mask; without the offset, the second half would draw the
// first's.
TEST(DropoutForward, RowSplitWithRowOffsetsDrawsTheFullMask) {
  const Shape full{6, 4, 5};
  for (int64_t base : {0, 10}) {
    SCOPED_TRACE(StrCat("whole tensor at row ", base));
    const RunInfo at{3, base};
    DropoutResult whole = RunDropout(RandomTensor(full, 2), 0.4f, 11, false, {at});
    std::vector<bool> halves;
    for (int64_t first : {0, 3}) {
      DropoutResult half = RunDropout(RandomTensor({3, 4, 5}, 3), 0.4f, 11, false,
                                      {{at.step, base + first}});
      EXPECT_EQ(half.mask, SliceOf(whole.mask, full, 0, first, 3)) << "rows " << first;
      halves.insert(halves.end(), half.mask.begin(), half.mask.end());
    }
    EXPECT_EQ(halves, whole.mask);
  }
  // The offset is what places the rows: the second half run at row 0 draws
  // the first half's mask.
  DropoutResult top = RunDropout(RandomTensor({3, 4, 5}, 3), 0.4f, 11, false, {{3, 0}});
  DropoutResult whole = RunDropout(RandomTensor(full, 2), 0.4f, 11, false, {{3, 0}});
  EXPECT_NE(top.mask, SliceOf(whole.mask, full, 0, 3, 3));
}

// Attention probs [b, heads, s, s] split by head across tensor-parallel
// ranks: each rank's heads, placed by shard_offsets in full_shape, draw the
// full tensor's mask there; rows and heads split together too.
TEST(DropoutForward, HeadSplitWithShardOffsetsDrawsTheFullMaskSlice) {
  const Shape full{2, 4, 3, 3};
  const RunInfo at{5, 0};
  DropoutResult whole = RunDropout(RandomTensor(full, 4), 0.3f, 13, false, {at});
  for (int64_t rank : {0, 1}) {
    SCOPED_TRACE(StrCat("mp rank ", rank));
    DropoutResult shard = RunDropout(RandomTensor({2, 2, 3, 3}, 5), 0.3f, 13, false,
                                     {at, {4, 3, 3}, {2 * rank, 0, 0}});
    EXPECT_EQ(shard.mask, SliceOf(whole.mask, full, 1, 2 * rank, 2));
    // Row 1 alone, as a micro-batch of one row holds it.
    DropoutResult row = RunDropout(RandomTensor({1, 2, 3, 3}, 6), 0.3f, 13, false,
                                   {{at.step, 1}, {4, 3, 3}, {2 * rank, 0, 0}});
    EXPECT_EQ(row.mask, SliceOf(SliceOf(whole.mask, full, 1, 2 * rank, 2), {2, 2, 3, 3}, 0,
                                1, 1));
  }
  // Splitting a middle dim (one query position of every head) places it
  // too: the odometer carries the offset across the dims after it.
  DropoutResult query = RunDropout(RandomTensor({2, 4, 1, 3}, 7), 0.3f, 13, false,
                                   {at, {4, 3, 3}, {0, 2, 0}});
  EXPECT_EQ(query.mask, SliceOf(whole.mask, full, 2, 2, 1));
  // Rank 1's heads without their offset draw rank 0's mask, not theirs.
  DropoutResult unplaced = RunDropout(RandomTensor({2, 2, 3, 3}, 5), 0.3f, 13, false, {at});
  EXPECT_NE(unplaced.mask, SliceOf(whole.mask, full, 1, 2, 2));
}

TEST(DropoutForward, KeptFractionAndUpscale) {
  const float p = 0.3f;
  Tensor x = RandomTensor({100, 100}, 2);
  DropoutResult r = RunDropout(x, p, 1234);
  std::vector<float> xv = x.ToFloatVector();
  int kept = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    if (r.mask[i]) {
      ++kept;
      EXPECT_FLOAT_EQ(r.out[i], xv[i] / (1.0f - p)) << i;
    } else {
      EXPECT_EQ(r.out[i], 0.0f) << i;
    }
  }
  EXPECT_NEAR(kept / 10000.0, 1.0 - p, 0.02);
}

TEST(DropoutForward, IsTestAndZeroProbPassThrough) {
  Tensor x = RandomTensor({50}, 3);
  for (auto [p, is_test] :
       {std::pair<float, bool>{0.5f, true}, {0.0f, false}}) {
    DropoutResult r = RunDropout(x, p, 5, is_test);
    EXPECT_EQ(r.out, x.ToFloatVector());
    EXPECT_EQ(r.mask, std::vector<bool>(50, true));
  }
}

TEST(DropoutGrad, MatchesFiniteDifferences) {
  // The mask is a function of the seed, so it is the same in every run.
  GradCheckCase c;
  c.op = OpDescBuilder("dropout")
             .Input("X", "x")
             .Output("Out", "out")
             .Output("Mask", "mask")
             .Attr("dropout_prob", 0.3f)
             .Attr("seed", int64_t{42});
  c.inputs["x"] = RandomTensor({6, 8}, 4);
  c.check = {"x"};
  CheckGrad(c);
}

TEST(DropoutErrors, ProbabilityOutOfRange) {
  RegisterAllOps();
  for (float p : {1.0f, -0.1f, std::nanf("")}) {
    Program prog;
    SetMeta(TensorMeta{proto::FP32, {4}}, prog.global_block().AddVar("x"));
    auto op =
        AppendOpInferShapes(prog.global_block(), OpDescBuilder("dropout")
                                                     .Input("X", "x")
                                                     .Output("Out", "out")
                                                     .Output("Mask", "mask")
                                                     .Attr("dropout_prob", p));
    ASSERT_FALSE(op.ok());
    EXPECT_EQ(op.status().message(),
              StrCat("op 0 (dropout): attribute 'dropout_prob' is ", p, ", outside [0, 1)"));
  }
}

// The shard attributes must describe a shard of X's own rank that fits in
// the full tensor; each error names the attribute.
TEST(DropoutErrors, ShardAttributesMustFitX) {
  RegisterAllOps();
  struct Bad {
    std::vector<int64_t> full, offsets;
    std::string message;
  };
  for (const Bad& bad : std::vector<Bad>{
           {{4, 3}, {}, "full_shape [4, 3] has 2 entries but X fp32[2, 2, 3, 3] has 3 dims "
                        "past its batch dim"},
           {{4, 3, 3}, {2, 0}, "shard_offsets [2, 0] has 2 entries but X fp32[2, 2, 3, 3] "
                               "has 3 dims past its batch dim"},
           {{}, {2, 0, 0}, "shard_offsets [2, 0, 0] is set without full_shape"},
           {{4, 3, 3}, {3, 0, 0}, "X fp32[2, 2, 3, 3] at shard_offsets [3, 0, 0] reaches past "
                                  "full_shape [4, 3, 3] in dim 1"},
           {{4, 3, 3}, {-2, 0, 0}, "attribute 'shard_offsets' holds -2 at 0, outside [0, "},
           {{4, 0, 3}, {}, "attribute 'full_shape' holds 0 at 1, outside [1, "},
           {{4, int64_t{1} << 31, int64_t{1} << 31}, {},
            "full_shape [4, 2147483648, 2147483648] holds 1.84467e+19 elements a row, more "
            "than an int64 index counts"}}) {
    SCOPED_TRACE(bad.message);
    Program prog;
    SetMeta(TensorMeta{proto::FP32, {2, 2, 3, 3}}, prog.global_block().AddVar("x"));
    OpDescBuilder desc =
        OpDescBuilder("dropout").Input("X", "x").Output("Out", "out").Output("Mask", "mask");
    if (!bad.full.empty()) desc.Attr("full_shape", bad.full);
    if (!bad.offsets.empty()) desc.Attr("shard_offsets", bad.offsets);
    auto op = AppendOpInferShapes(prog.global_block(), desc);
    ASSERT_FALSE(op.ok());
    EXPECT_NE(op.status().message().find(StrCat("op 0 (dropout): ", bad.message)),
              std::string::npos)
        << op.status();
  }
}

}  // namespace
}  // namespace loom
