// The plans the CUDA kernels walk (executor/kernels/cuda/), checked on the
// host: without a device, the index arithmetic of the kernels (copied from
// the .cu files, element by element) runs over the plans the host side
// builds, against the CPU kernels' own walks. Built wherever the build has
// CUDA; no device is needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <vector>

#include "executor/kernel.h"

#ifdef LOOM_WITH_CUDA
#include "executor/kernels/cpu/cpu_helpers.h"
#include "executor/kernels/cuda/cuda_kernel_helpers.h"
#include "framework/counter_rng.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "unittests/grad_check.h"
#endif

namespace loom {
namespace {

#ifndef LOOM_WITH_CUDA
TEST(CudaKernelPlans, NotBuilt) {
  GTEST_SKIP() << "built without the CUDA backend (LOOM_CUDA=OFF, or configure found no "
                  "nvcc, CUDA toolkit and NCCL): no CUDA kernel plans to check";
}
#else

using testing::RandomTensor;

// ReduceSerialKernel's walk for target t, in float.
float SerialReduce(const cuda::ReducePlan& p, const float* g, const float* f, int64_t t) {
  int64_t og = 0, of = 0;
  for (int d = p.kept_rank - 1; d >= 0; --d) {
    const int64_t c = t % p.kept_shape[d];
    t /= p.kept_shape[d];
    og += c * p.kept_g[d];
    of += c * p.kept_f[d];
  }
  int64_t idx[cuda::kMaxDims] = {0};
  float acc = 0;
  for (int64_t r = 0; r < p.red_count; ++r) {
    acc += f ? g[og] * f[of] : g[og];
    for (int d = p.red_rank - 1; d >= 0; --d) {
      og += p.red_g[d];
      of += p.red_f[d];
      if (++idx[d] < p.red_shape[d]) break;
      og -= p.red_g[d] * p.red_shape[d];
      of -= p.red_f[d] * p.red_shape[d];
      idx[d] = 0;
    }
  }
  return acc;
}

// ReduceTreeKernel's decode of summand r of target t: offsets into g, f.
std::pair<int64_t, int64_t> TreeSummand(const cuda::ReducePlan& p, int64_t t, int64_t r) {
  int64_t og = 0, of = 0;
  for (int d = p.kept_rank - 1; d >= 0; --d) {
    const int64_t c = t % p.kept_shape[d];
    t /= p.kept_shape[d];
    og += c * p.kept_g[d];
    of += c * p.kept_f[d];
  }
  for (int d = p.red_rank - 1; d >= 0; --d) {
    const int64_t c = r % p.red_shape[d];
    r /= p.red_shape[d];
    og += c * p.red_g[d];
    of += c * p.red_f[d];
  }
  return {og, of};
}

TEST(CudaKernelPlans, ReductionsSumWhatTheCpuSums) {
  const std::vector<std::pair<Shape, Shape>> cases = {{{4, 3, 5}, {5}},
                                                      {{4, 3, 5}, {3, 1}},
                                                      {{4, 3, 5}, {4, 1, 1}},
                                                      {{4, 3, 5}, {4, 3, 5}},
                                                      {{300, 40}, {40}},
                                                      {{2, 3, 4, 5}, {3, 1, 5}},
                                                      {{7}, {1}},
                                                      {{6, 1, 4}, {6, 1, 1}},
                                                      {{5, 300}, {5, 1}}};
  uint64_t seed = 1;
  std::set<int> modes;
  for (const auto& [full, target] : cases) {
    SCOPED_TRACE(ShapeToString(full) + " onto " + ShapeToString(target));
    const Tensor g = RandomTensor(full, seed++);
    // Without a factor: the CPU's ReduceToShape, bit for bit.
    std::vector<float> expected(NumElements(target));
    ReduceToShape(g.data<float>(), full, target, expected.data());
    auto plan = ReducePlanFor(full, target, nullptr);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->kept_count, NumElements(target));
    for (int64_t t = 0; t < plan->kept_count; ++t) {
      EXPECT_EQ(SerialReduce(*plan, g.data<float>(), nullptr, t), expected[t]) << t;
      // The summands in the order the plan's kernel adds them.
      float sum = 0;
      switch (cuda::ReduceModeOf(*plan)) {
        case cuda::ReduceMode::kSerial:
          sum = SerialReduce(*plan, g.data<float>(), nullptr, t);
          break;
        case cuda::ReduceMode::kTree: {
          std::vector<float> part(cuda::kBlock, 0.0f);
          for (int64_t r = 0; r < plan->red_count; ++r) {
            part[r % cuda::kBlock] += g.data<float>()[TreeSummand(*plan, t, r).first];
          }
          for (int w = cuda::kBlock / 2; w > 0; w /= 2) {
            for (int i = 0; i < w; ++i) part[i] += part[i + w];
          }
          sum = part[0];
          break;
        }
        case cuda::ReduceMode::kChunked:
          for (int64_t c = 0; c * cuda::kReduceChunk < plan->red_count; ++c) {
            float chunk = 0;
            for (int64_t r = c * cuda::kReduceChunk;
                 r < std::min(plan->red_count, (c + 1) * cuda::kReduceChunk); ++r) {
              chunk += g.data<float>()[TreeSummand(*plan, t, r).first];
            }
            sum += chunk;
          }
          break;
      }
      EXPECT_NEAR(sum, expected[t], 1e-5 * (1 + std::fabs(expected[t]))) << t;
    }
    modes.insert(static_cast<int>(cuda::ReduceModeOf(*plan)));
    // With a factor broadcast from the full shape (mul_grad's dX with Y
    // = the full shape), against the CPU's walk.
    const Tensor f = RandomTensor(full, seed++);
    std::vector<float> with_f(NumElements(target), 0.0f);
    ForEachBroadcast(full, BroadcastStrides(target, full), BroadcastStrides(full, full),
                     [&](int64_t i, int64_t a, int64_t b) {
                       with_f[a] += g.data<float>()[i] * f.data<float>()[b];
                     });
    auto fplan = ReducePlanFor(full, target, &full);
    ASSERT_TRUE(fplan.ok()) << fplan.status();
    for (int64_t t = 0; t < fplan->kept_count; ++t) {
      EXPECT_EQ(SerialReduce(*fplan, g.data<float>(), f.data<float>(), t), with_f[t]) << t;
    }
  }
  EXPECT_EQ(modes.size(), 3u) << "the cases take every kind of reduction kernel";
}

TEST(CudaKernelPlans, BroadcastAndCopyIndicesAreTheCpus) {
  const std::vector<std::pair<Shape, Shape>> pairs = {
      {{4, 3, 5}, {5}}, {{4, 1, 5}, {3, 1}}, {{2, 3, 4, 5}, {3, 1, 5}}, {{6, 6}, {6, 6}}};
  for (const auto& [x, y] : pairs) {
    Shape out(std::max(x.size(), y.size()));
    for (size_t k = 0; k < out.size(); ++k) {
      const int64_t dx = k < x.size() ? x[x.size() - 1 - k] : 1;
      const int64_t dy = k < y.size() ? y[y.size() - 1 - k] : 1;
      out[out.size() - 1 - k] = std::max(dx, dy);
    }
    auto index = BroadcastIndexFor(out, x, y);
    ASSERT_TRUE(index.ok()) << index.status();
    ForEachBroadcast(out, BroadcastStrides(x, out), BroadcastStrides(y, out),
                     [&](int64_t i, int64_t ea, int64_t eb) {
                       int64_t rest = i, a = 0, b = 0;  // BroadcastKernel's decode
                       for (int d = index->rank - 1; d >= 0; --d) {
                         const int64_t c = rest % index->shape[d];
                         rest /= index->shape[d];
                         a += c * index->sx[d];
                         b += c * index->sy[d];
                       }
                       EXPECT_EQ(a, ea) << i;
                       EXPECT_EQ(b, eb) << i;
                     });
  }
  // A transpose's plan against the definition out[i, j, k] = x[j, k, i].
  const Shape x{4, 6, 5};
  const std::vector<int64_t> xs = ContiguousStrides(x);
  const Shape out{5, 4, 6};
  auto plan = CopyPlanFor(out, {xs[2], xs[0], xs[1]}, ContiguousStrides(out), 0, 0);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (int64_t e = 0; e < NumElements(out); ++e) {
    int64_t rest = e, so = plan->src_offset, dof = plan->dst_offset;  // StridedCopyKernel's
    for (int d = plan->rank - 1; d >= 0; --d) {
      const int64_t c = rest % plan->shape[d];
      rest /= plan->shape[d];
      so += c * plan->src_stride[d];
      dof += c * plan->dst_stride[d];
    }
    const int64_t i = e / 24, j = e / 6 % 4, k = e % 6;
    EXPECT_EQ(dof, e);
    EXPECT_EQ(so, j * 30 + k * 5 + i) << e;
  }
}

TEST(CudaKernelPlans, DropoutDrawsTheCpuMask) {
  RegisterAllCpuKernels();
  struct Config {
    Shape x;
    std::vector<int64_t> full, offsets;
    RunInfo run;
  };
  const std::vector<Config> configs = {{{6, 5, 9}, {}, {}, {0, 0}},
                                       {{6, 5, 9}, {}, {}, {7, 3}},
                                       {{3, 4, 6}, {8, 12}, {2, 4}, {2, 5}},
                                       {{2, 3, 1, 4}, {6, 2, 9}, {1, 1, 5}, {1, 0}},
                                       {{5}, {}, {}, {4, 2}}};
  for (const Config& cfg : configs) {
    SCOPED_TRACE(ShapeToString(cfg.x));
    OpDescBuilder b = OpDescBuilder("dropout")
                          .Input("X", "x")
                          .Output("Out", "out")
                          .Output("Mask", "mask")
                          .Attr("dropout_prob", 0.35f)
                          .Attr("seed", int64_t{11});
    if (!cfg.full.empty()) b.Attr("full_shape", cfg.full).Attr("shard_offsets", cfg.offsets);
    const proto::OpDesc desc = b;
    Tensor x = RandomTensor(cfg.x, 3);
    Tensor out(TensorMeta{proto::FP32, cfg.x});
    Tensor mask(TensorMeta{proto::BOOL, cfg.x});
    const std::vector<BoundSlot> ins = {{"X", {&x}}};
    const std::vector<BoundSlot> outs = {{"Out", {&out}}, {"Mask", {&mask}}};
    const KernelContext ctx(desc, ins, outs, cfg.run);
    ASSERT_TRUE(KernelRegistry::Cpu().Find("dropout")(ctx).ok());
    auto plan = DropoutPlanFor(ctx, x);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const bool* m = mask.data<bool>();
    int kept = 0;
    for (int64_t e = 0; e < plan->rows * plan->row_len; ++e) {
      // DropoutKernel's draw.
      const int64_t r = e / plan->row_len;
      int64_t rest = e - r * plan->row_len, j = plan->first;
      for (int d = plan->dims - 1; d >= 0; --d) {
        const int64_t c = rest % plan->local[d];
        rest /= plan->local[d];
        j += c * plan->full_stride[d];
      }
      const uint64_t row_key =
          StreamAt(plan->step_key, static_cast<uint64_t>(plan->row_offset + r));
      const bool keep = ToUnit(StreamAt(row_key, static_cast<uint64_t>(j))) >= plan->p;
      ASSERT_EQ(keep, m[e]) << e;
      EXPECT_EQ(keep ? x.data<float>()[e] * plan->scale : 0.0f, out.data<float>()[e]) << e;
      kept += keep;
    }
    EXPECT_GT(kept, 0);
  }
}

#endif  // LOOM_WITH_CUDA

}  // namespace
}  // namespace loom
