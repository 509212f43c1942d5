// Global-norm gradient clipping (framework/grad_clip.h): the ops, the
// serial section, and the grad-clip pass on every layout, whose clipped
// parameters must equal serial clipping's within 1e-6.
#include "framework/grad_clip.h"

#include <cmath>

#include <gtest/gtest.h>

#include "framework/op_builder.h"
#include "passes/pass_options.h"
#include "passes/planner.h"
#include "unittests/op_runner.h"
#include "unittests/parameter_compare.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {

using testing::TryRunOp;

Tensor Values(const std::vector<float>& v) {
  Tensor t(TensorMeta{proto::FP32, {static_cast<int64_t>(v.size())}});
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

float ScalarOf(const std::map<std::string, Tensor>& out, const std::string& var) {
  return out.at(var).ToFloatVector().at(0);
}

TEST(GradClipOps, SquaredNormSumsTheNamedSegmentsInDouble) {
  const Tensor a = Values({1, 2, 3, 4});
  const Tensor b = Values({10, 20});
  auto whole = TryRunOp(OpDescBuilder("squared_l2_norm").Input("X", std::vector<std::string>{"a", "b"}).Output("Out", "s"),
                        {{"a", a}, {"b", b}}, {"s"});
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(ScalarOf(*whole, "s"), 1 + 4 + 9 + 16 + 100 + 400);
  // a[1, 3) and b[1, end).
  auto parts = TryRunOp(OpDescBuilder("squared_l2_norm")
                            .Input("X", std::vector<std::string>{"a", "b"})
                            .Output("Out", "s")
                            .Attr("segments", std::vector<int64_t>{0, 1, 3, 1, 1, -1}),
                        {{"a", a}, {"b", b}}, {"s"});
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(ScalarOf(*parts, "s"), 4 + 9 + 400);
  auto past = TryRunOp(OpDescBuilder("squared_l2_norm")
                           .Input("X", std::vector<std::string>{"a"})
                           .Output("Out", "s")
                           .Attr("segments", std::vector<int64_t>{0, 2, 5}),
                       {{"a", a}}, {"s"});
  EXPECT_EQ(past.status().message().find("segment 0 ends at 5 past X[0]'s 4 elements") !=
                std::string::npos,
            true)
      << past.status();
}

TEST(GradClipOps, APartCountsOnlyWhereItsRankHoldsTheRange) {
  // X is this rank's part (4 elements) of an 8-element buffer split over
  // ring 2: rank place 1 holds buffer elements [4, 8).
  const std::vector<int> places = {-1, -1, 1};
  proto::OpDesc op = OpDescBuilder("squared_l2_norm")
                         .Input("X", std::vector<std::string>{"g"})
                         .Output("Out", "s")
                         .Attr("segments", std::vector<int64_t>{0, 2, 5, 0, 7, 8})
                         .Attr("part_rings", std::vector<int32_t>{2})
                         .Build();
  auto ranges = LocalNormRanges(op, {4}, &places);
  ASSERT_TRUE(ranges.ok()) << ranges.status();
  ASSERT_EQ(ranges->size(), 2u);
  EXPECT_EQ((*ranges)[0].begin, 0);  // buffer [4, 5)
  EXPECT_EQ((*ranges)[0].end, 1);
  EXPECT_EQ((*ranges)[1].begin, 3);  // buffer [7, 8)
  EXPECT_EQ((*ranges)[1].end, 4);
  const std::vector<int> nowhere = {-1, -1, -1};
  auto off_ring = LocalNormRanges(op, {4}, &nowhere);
  EXPECT_EQ(off_ring.status().message(), "X[0] is a part over ring 2, which this rank is not on");
}

TEST(GradClipOps, GradScaleClipsUndoesTheLossScaleAndFlagsOverflow) {
  auto run = [](float squared, float loss_scale, float max_norm) {
    proto::OpDesc op = OpDescBuilder("grad_scale")
                           .Input("SquaredNorm", "sq")
                           .Input("LossScale", "ls")
                           .Output("Scale", "scale")
                           .Output("Norm", "norm")
                           .Attr("max_norm", max_norm)
                           .Build();
    return TryRunOp(op, {{"sq", Values({squared})}, {"ls", Values({loss_scale})}},
                    {"scale", "norm"})
        .value();
  };
  auto clipped = run(25, 1, 1);  // norm 5 > 1
  EXPECT_FLOAT_EQ(ScalarOf(clipped, "norm"), 5);
  EXPECT_FLOAT_EQ(ScalarOf(clipped, "scale"), 1 / (5 + 1e-6f));
  auto unclipped = run(0.25f, 1, 1);
  EXPECT_EQ(ScalarOf(unclipped, "scale"), 1);
  // Gradients 1024 times the true ones, norm 5 after unscaling.
  auto scaled = run(25 * 1024.0f * 1024.0f, 1024, 1);
  EXPECT_FLOAT_EQ(ScalarOf(scaled, "norm"), 5);
  EXPECT_FLOAT_EQ(ScalarOf(scaled, "scale"), 1 / (5 + 1e-6f) / 1024);
  EXPECT_TRUE(std::isnan(ScalarOf(run(INFINITY, 1, 1), "scale")));
  EXPECT_TRUE(std::isnan(ScalarOf(run(NAN, 1024, 0), "scale")));
}

TEST(GradClipOps, UpdatesScaleTheGradientAndSkipOnANonFiniteScale) {
  const Tensor p = Values({1, 2}), g = Values({0.5f, -1}), m = Values({0.1f, 0.2f}),
               v = Values({0.3f, 0.4f}), b1 = Values({0.9f}), b2 = Values({0.999f});
  auto adamw = [&](const Tensor* scale, const Tensor& grad) {
    OpDescBuilder b("adamw");
    b.Input("Param", "p").Input("Grad", "g").Input("LearningRate", "lr").Input("Moment1", "m")
        .Input("Moment2", "v").Input("Beta1Pow", "b1").Input("Beta2Pow", "b2")
        .Output("ParamOut", "p2").Output("Moment1Out", "m2").Output("Moment2Out", "v2")
        .Output("Beta1PowOut", "b12").Output("Beta2PowOut", "b22");
    std::map<std::string, Tensor> in = {{"p", p},   {"g", grad}, {"lr", Values({0.1f})},
                                        {"m", m},   {"v", v},    {"b1", b1},
                                        {"b2", b2}};
    if (scale != nullptr) {
      b.Input("GradScale", "s");
      in["s"] = *scale;
    }
    return TryRunOp(b.Build(), in, {"p2", "m2", "v2", "b12", "b22"}).value();
  };
  const Tensor half = Values({0.5f});
  const auto scaled = adamw(&half, g);
  const auto by_hand = adamw(nullptr, Values({0.25f, -0.5f}));
  for (const char* out : {"p2", "m2", "v2", "b12", "b22"}) {
    EXPECT_EQ(scaled.at(out).ToFloatVector(), by_hand.at(out).ToFloatVector()) << out;
  }
  const Tensor nan = Values({NAN});
  const auto skipped = adamw(&nan, g);
  EXPECT_EQ(skipped.at("p2").ToFloatVector(), p.ToFloatVector());
  EXPECT_EQ(skipped.at("m2").ToFloatVector(), m.ToFloatVector());
  EXPECT_EQ(skipped.at("v2").ToFloatVector(), v.ToFloatVector());
  EXPECT_EQ(skipped.at("b12").ToFloatVector(), b1.ToFloatVector());
  EXPECT_EQ(skipped.at("b22").ToFloatVector(), b2.ToFloatVector());
}

GptConfig SmallGpt() {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 4;
  c.batch_size = 16;
  return c;
}

OptimizerConfig Sgd(float lr, float clip) {
  OptimizerConfig o;
  o.type = "sgd";
  o.learning_rate = lr;
  o.clip_grad_norm = clip;
  return o;
}

// Serial clipping against the definition: SGD at rate 1 moves a parameter
// by its gradient, so an unclipped step gives the gradients (P0 - P1) and
// their norm, and a clipped step must move each by c times as far, with c
// = max_norm / (norm + 1e-6).
TEST(GradClip, SerialClippingScalesEveryGradientByTheGlobalCoefficient) {
  const GptConfig c = SmallGpt();
  auto plain = SerialTrainer::Create(c, Sgd(1, 0)).value();
  const TrainingState before = plain->State().value();
  ASSERT_TRUE(plain->Step(0).ok());
  EXPECT_TRUE(std::isnan(plain->LastGradNorm()));
  const TrainingState after = plain->State().value();
  double squares = 0;
  for (const auto& [name, t] : before.parameters) {
    const auto p0 = t.ToFloatVector(), p1 = after.parameters.at(name).ToFloatVector();
    for (size_t i = 0; i < p0.size(); ++i) squares += double{p0[i] - p1[i]} * (p0[i] - p1[i]);
  }
  const double norm = std::sqrt(squares);
  const float max_norm = static_cast<float>(norm / 4);
  auto clipped = SerialTrainer::Create(c, Sgd(1, max_norm)).value();
  ASSERT_TRUE(clipped->Step(0).ok());
  EXPECT_NEAR(clipped->LastGradNorm(), norm, 1e-5 * norm);
  const double coef = max_norm / (norm + 1e-6);
  const TrainingState got = clipped->State().value();
  double worst = 0, moved = 0;
  for (const auto& [name, t] : before.parameters) {
    const auto p0 = t.ToFloatVector(), p1 = after.parameters.at(name).ToFloatVector();
    const auto q = got.parameters.at(name).ToFloatVector();
    for (size_t i = 0; i < p0.size(); ++i) {
      worst = std::max(worst, std::fabs(q[i] - (p0[i] - coef * (p0[i] - p1[i]))));
      moved = std::max(moved, static_cast<double>(std::fabs(q[i] - p1[i])));
    }
  }
  EXPECT_LT(worst, 1e-6);
  EXPECT_GT(moved, 1e-3) << "clipping did not change the step";
  // A bound above the norm leaves the step as it was, bit for bit.
  auto loose = SerialTrainer::Create(c, Sgd(1, static_cast<float>(norm * 2))).value();
  ASSERT_TRUE(loose->Step(0).ok());
  const TrainingState same = loose->State().value();
  for (const auto& [name, t] : after.parameters) {
    EXPECT_EQ(same.parameters.at(name).ToFloatVector(), t.ToFloatVector()) << name;
  }
}

struct Layout {
  int dp, mp, pp;
  const char* schedule;
  int vpp = 1;
  bool op_split = false;
  int sharding = 0;
};

std::string Describe(const Layout& k) {
  return StrCat(k.schedule, " dp=", k.dp, " mp=", k.mp, " pp=", k.pp, " vpp=", k.vpp,
                k.op_split ? " op-split" : "",
                k.sharding > 0 ? StrCat(" sharding stage ", k.sharding) : "");
}

// Every layout's clipped steps against serial clipping, and the norm each
// reports against serial training's. The clip is tight (a quarter of the
// norm). The layouts' own summation orders leave parameters within 1.3e-8
// of serial ones (measured); the bound is the 1e-6. Counting a
// layer norm's gradient on every mp rank moved some by 8e-6 to 1e-4, and
// counting the tied embedding on both its stages by more: both fail here.
TEST(GradClip, EveryLayoutClipsAsSerialTrainingDoes) {
  const GptConfig c = SmallGpt();
  auto probe = SerialTrainer::Create(c, Sgd(0.5f, 1e30f)).value();
  ASSERT_TRUE(probe->Step(0).ok());
  const float norm = probe->LastGradNorm();
  ASSERT_TRUE(std::isfinite(norm) && norm > 0) << norm;
  const OptimizerConfig sgd = Sgd(0.5f, norm / 4);
  for (const Layout& k :
       {Layout{2, 1, 1, "1F1B"}, Layout{1, 2, 1, "1F1B"}, Layout{1, 1, 2, "1F1B"},
        Layout{2, 2, 2, "1F1B"}, Layout{1, 2, 2, "VPP", 2}, Layout{1, 2, 2, "ZBH1"},
        Layout{1, 2, 2, "1F1B-overlap"}, Layout{1, 2, 1, "FThenB", 1, true},
        Layout{2, 2, 2, "1F1B", 1, false, 1}, Layout{2, 2, 2, "1F1B", 1, false, 2},
        Layout{2, 2, 2, "1F1B", 1, false, 3}}) {
    SCOPED_TRACE(Describe(k));
    auto serial = SerialTrainer::Create(c, sgd).value();
    proto::Strategy strategy = MakeStrategy(k.dp, k.mp, k.pp, 4, k.schedule, k.vpp);
    if (k.op_split) {
      strategy.mutable_passes()->set_op_split(true);
      strategy.mutable_passes()->set_op_split_parts(2);
    }
    if (k.sharding > 0) strategy.mutable_sharding()->set_stage(k.sharding);
    ParallelTrainer::Options options;
    options.comm.timeout = std::chrono::seconds(30);
    auto t = ParallelTrainer::Create(c, sgd, strategy, options);
    ASSERT_TRUE(t.ok()) << t.status();
    const std::string& pipeline = (*t)->plan().resolved.pipeline();
    EXPECT_NE(pipeline.find(StrCat("max-norm=", pass_options_internal::PrintFloat(sgd.clip_grad_norm))),
              std::string::npos)
        << pipeline;
    for (int s = 0; s < 2; ++s) {
      ASSERT_TRUE(serial->Step(s).ok());
      auto loss = (*t)->Step(s);
      ASSERT_TRUE(loss.ok()) << loss.status();
      EXPECT_NEAR((*t)->LastGradNorm(), serial->LastGradNorm(), 1e-5 * serial->LastGradNorm())
          << "step " << s;
    }
    EXPECT_GE(ExpectEveryParameterMatches(**t, *serial, 1e-6), 4 * 12 + 4);
  }
}

// What the pass writes on an mp rank other than 0: a layer norm's
// gradient, which every mp rank holds whole, is left out of its sum; a
// column-parallel weight's shard is in; the sums meet over the mp ring.
TEST(GradClip, ReplicatedGradientsCountOnMpRankZeroOnly) {
  const GptConfig c = SmallGpt();
  TrainingProgram tp = BuildGptTrainingProgram(c, Sgd(0.5f, 1)).value();
  const proto::Strategy strategy = MakeStrategy(1, 2, 1, 1, "1F1B");
  auto count_terms = [&](int rank) {
    RankPlan rp = PlanRank(tp.main, tp.startup, strategy, rank, LocalPlanOptions()).value();
    std::set<std::string> summed;
    int mp_reductions = 0, scaled_updates = 0, updates = 0;
    for (const auto& [key, program] : rp.programs()) {
      for (const Op* op : program.global_block().ops()) {
        if (op->type() == "squared_l2_norm") {
          for (const std::string& x : op->Inputs("X")) summed.insert(x);
        }
        if (op->type() == "allreduce" && op->Input("X") == kGradSquaredNormVar) {
          mp_reductions += op->GetAttr<int32_t>("ring_id") == kMpRing;
        }
        if (IsParameterUpdate(*op)) {
          ++updates;
          scaled_updates += op->HasInput("GradScale");
        }
      }
    }
    EXPECT_EQ(mp_reductions, 1);
    EXPECT_EQ(scaled_updates, updates);
    return summed;
  };
  const std::set<std::string> rank0 = count_terms(0), rank1 = count_terms(1);
  const std::string ln = GradVarName("layers.0.ln1.scale");
  const std::string qkv = GradVarName("layers.0.attn.qkv.weight");
  EXPECT_EQ(rank0.count(ln), 1u);
  EXPECT_EQ(rank1.count(ln), 0u);
  EXPECT_EQ(rank0.count(qkv), 1u);
  EXPECT_EQ(rank1.count(qkv), 1u);
}

}  // namespace
}  // namespace loom
