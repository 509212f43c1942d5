// AppendBackward: which ops it emits, how it accumulates, and its errors.
#include <gtest/gtest.h>

#include "framework/autodiff.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "framework/verifier.h"

namespace loom {
namespace {

class AutodiffTest : public ::testing::Test {
 protected:
  void SetUp() override { RegisterAllOps(); }

  void Param(const std::string& name, const Shape& shape) {
    auto* v = block().AddVar(name);
    SetMeta(TensorMeta{proto::FP32, shape}, v);
    v->set_persistable(true);
    v->set_is_parameter(true);
  }
  void Data(const std::string& name, const Shape& shape) {
    auto* v = block().AddVar(name);
    SetMeta(TensorMeta{proto::FP32, shape}, v);
    v->set_is_data(true);
  }
  void Add(proto::OpDesc desc) {
    auto op = AppendOpInferShapes(block(), std::move(desc));
    ASSERT_TRUE(op.ok()) << op.status();
  }
  std::vector<std::string> Types(uint32_t role_bit) {
    std::vector<std::string> out;
    for (Op* op : block().ops()) {
      if (op->HasRole(role_bit)) out.push_back(op->type());
    }
    return out;
  }
  Block& block() { return program_.global_block(); }
  Program program_;
};

TEST_F(AutodiffTest, PairsComeInProductionOrder) {
  // loss = sum(w2 * (w1 * x)): w2's gradient completes before w1's.
  Data("x", {3});
  Param("w1", {3});
  Param("w2", {3});
  Add(OpDescBuilder("elementwise_mul").Input("X", "x").Input("Y", "w1").Output("Out", "h"));
  Add(OpDescBuilder("elementwise_mul").Input("X", "h").Input("Y", "w2").Output("Out", "y"));
  Add(OpDescBuilder("reduce_sum").Input("X", "y").Output("Out", "loss").Attr("reduce_all", true));
  auto pairs = AppendBackward(program_, "loss");
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  ASSERT_EQ(pairs->size(), 2u);
  EXPECT_EQ((*pairs)[0].param, "w2");
  EXPECT_EQ((*pairs)[0].grad, "w2@GRAD");
  EXPECT_EQ((*pairs)[1].param, "w1");
  EXPECT_EQ(Types(role::kBackward),
            (std::vector<std::string>{"fill_constant", "reduce_sum_grad",
                                      "elementwise_mul_grad", "elementwise_mul_grad"}));
  // x is data: its gradient is pruned from the last grad op.
  Op* last = block().back();
  EXPECT_EQ(last->Outputs("X@GRAD").Get(0), "");
  EXPECT_EQ(last->Output("Y@GRAD"), "w1@GRAD");
  ASSERT_EQ(last->desc().param_grads_size(), 1);
  EXPECT_EQ(last->desc().param_grads(0).param(), "w1");
  EXPECT_TRUE(block().front()->HasRole(role::kForward));
  EXPECT_TRUE(VerifyProgram(program_).ok());
}

TEST_F(AutodiffTest, SharedVarGetsOneSumInFixedOrder) {
  // w feeds three ops; its gradient is the sum of three contributions.
  Param("w", {2});
  Add(OpDescBuilder("scale").Input("X", "w").Output("Out", "a").Attr("scale", 2.0f));
  Add(OpDescBuilder("scale").Input("X", "w").Output("Out", "b").Attr("scale", 3.0f));
  Add(OpDescBuilder("elementwise_mul").Input("X", "a").Input("Y", "w").Output("Out", "c"));
  Add(OpDescBuilder("sum").Input("X", std::vector<std::string>{"b", "c"}).Output("Out", "d"));
  Add(OpDescBuilder("reduce_mean").Input("X", "d").Output("Out", "loss").Attr("reduce_all", true));
  auto pairs = AppendBackward(program_, "loss");
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  Op* sum = block().FirstProducer("w@GRAD");
  ASSERT_NE(sum, nullptr);
  EXPECT_EQ(sum->type(), "sum");
  EXPECT_EQ(block().Producers("w@GRAD").size(), 1u);
  // Contributions in the order their grad ops ran (reverse program order).
  std::vector<std::string> parts(sum->Inputs("X").begin(), sum->Inputs("X").end());
  EXPECT_EQ(parts, (std::vector<std::string>{"w@GRAD@RENAME@0", "w@GRAD@RENAME@1",
                                             "w@GRAD@RENAME@2"}));
  EXPECT_TRUE(VerifyProgram(program_).ok());
}

TEST_F(AutodiffTest, OpsAfterTheLossAreIgnored) {
  Param("w", {2});
  Add(OpDescBuilder("scale").Input("X", "w").Output("Out", "a"));
  Add(OpDescBuilder("reduce_sum").Input("X", "a").Output("Out", "loss").Attr("reduce_all", true));
  Add(OpDescBuilder("scale").Input("X", "a").Output("Out", "unused"));
  auto pairs = AppendBackward(program_, "loss");
  ASSERT_TRUE(pairs.ok());
  EXPECT_EQ(Types(role::kBackward),
            (std::vector<std::string>{"fill_constant", "reduce_sum_grad", "scale"}));
  EXPECT_FALSE(block().HasVar("unused@GRAD"));
}

TEST_F(AutodiffTest, ErrorsNameTheCulprit) {
  Param("w", {2, 2});
  Add(OpDescBuilder("scale").Input("X", "w").Output("Out", "a"));
  auto not_scalar = AppendBackward(program_, "a");
  ASSERT_FALSE(not_scalar.ok());
  EXPECT_EQ(not_scalar.status().message(),
            "loss var 'a' must be a floating scalar, but is fp32[2, 2]");
  EXPECT_EQ(AppendBackward(program_, "nope").status().message(),
            "loss var 'nope' is not declared");
  Add(OpDescBuilder("reduce_sum").Input("X", "a").Output("Out", "loss").Attr("reduce_all", true));
  ASSERT_TRUE(AppendBackward(program_, "loss").ok());
  EXPECT_EQ(AppendBackward(program_, "loss").status().message(),
            "the program already has a backward pass (loss@GRAD exists)");
}

}  // namespace
}  // namespace loom
