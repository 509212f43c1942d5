// sgd and adamw against straightforward double-precision reference loops,
// in place (outputs aliasing inputs, as the optimizer pass emits them) and
// out of place.
#include <gtest/gtest.h>

#include <cmath>

#include "executor/serial_executor.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"
#include "unittests/grad_check.h"

namespace loom {
namespace {

using testing::RandomTensor;

constexpr int kSteps = 3;
const Shape kParamShape = {3, 4};

std::vector<double> ToDouble(const Tensor& t) {
  std::vector<float> f = t.ToFloatVector();
  return std::vector<double>(f.begin(), f.end());
}

// Float kernel against a double reference: the error is float rounding.
void ExpectClose(const Tensor& actual, const std::vector<double>& expected,
                 const std::string& what) {
  std::vector<float> a = actual.ToFloatVector();
  ASSERT_EQ(a.size(), expected.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], expected[i], 1e-6 + 1e-5 * std::fabs(expected[i]))
        << what << "[" << i << "]";
  }
}

// A program holding one update op whose state vars are persistable. With
// `in_place` every output is its input var; otherwise each output is
// "<input>_out" and the test copies it back after each step.
struct UpdateProgram {
  Program program;
  Scope scope;
  std::unique_ptr<SerialExecutor> exec;
  std::vector<std::pair<std::string, std::string>> in_out;  // state vars

  void Build(const std::string& type,
             const std::map<std::string, Tensor>& state,
             const std::vector<std::pair<std::string, std::string>>& slots,
             const std::map<std::string, float>& attrs, bool in_place) {
    RegisterAllCpuKernels();
    Block& b = program.global_block();
    OpDescBuilder op(type);
    op.Input("Grad", "grad").Input("LearningRate", "lr");
    auto* grad = b.AddVar("grad");
    SetMeta(TensorMeta{proto::FP32, kParamShape}, grad);
    grad->set_is_data(true);
    auto* lr = b.AddVar("lr");
    SetMeta(TensorMeta{proto::FP32, {1}}, lr);
    lr->set_persistable(true);
    for (const auto& [in_slot, var] : slots) {
      auto* v = b.AddVar(var);
      SetMeta(state.at(var).meta(), v);
      v->set_persistable(true);
      const std::string out = in_place ? var : var + "_out";
      op.Input(in_slot, var)
          .Output(in_slot == "Param" ? "ParamOut" : in_slot + "Out", out);
      in_out.emplace_back(var, out);
      scope.Var(var)->CopyFrom(state.at(var));
    }
    for (const auto& [name, value] : attrs) op.Attr(name, value);
    auto appended = AppendOpInferShapes(b, op);
    ASSERT_TRUE(appended.ok()) << appended.status();
    SerialExecutorOptions options;
    options.free_temporaries = false;  // the "_out" vars are read back
    auto e = SerialExecutor::Create(program, &scope, options);
    ASSERT_TRUE(e.ok()) << e.status();
    exec = std::move(*e);
  }

  void Step(const Tensor& grad, float lr) {
    scope.Var("grad")->CopyFrom(grad);
    scope.Var("lr")->CopyFrom(MakeTensor({1}, std::vector<float>{lr}));
    Status s = exec->Run();
    ASSERT_TRUE(s.ok()) << s;
    for (const auto& [in, out] : in_out) {
      if (in != out) scope.Var(in)->CopyFrom(*scope.Find(out));
    }
  }
};

TEST(SgdUpdate, ThreeStepsMatchReference) {
  for (bool in_place : {true, false}) {
    SCOPED_TRACE(in_place ? "in place" : "out of place");
    Tensor p0 = RandomTensor(kParamShape, 1);
    UpdateProgram prog;
    prog.Build("sgd", {{"param", p0}}, {{"Param", "param"}}, {}, in_place);
    std::vector<double> p = ToDouble(p0);
    for (int step = 0; step < kSteps; ++step) {
      const float lr = 0.1f * (step + 1);
      Tensor g = RandomTensor(kParamShape, 10 + step);
      prog.Step(g, lr);
      std::vector<double> gd = ToDouble(g);
      for (size_t i = 0; i < p.size(); ++i) p[i] -= double{lr} * gd[i];
      ExpectClose(*prog.scope.Find("param"), p, "param");
    }
  }
}

TEST(AdamWUpdate, ThreeStepsMatchReference) {
  const double b1 = 0.8, b2 = 0.95, eps = 1e-6, wd = 0.1;
  for (bool in_place : {true, false}) {
    SCOPED_TRACE(in_place ? "in place" : "out of place");
    Tensor p0 = RandomTensor(kParamShape, 2);
    std::map<std::string, Tensor> state = {
        {"param", p0},
        {"m1", RandomTensor(kParamShape, 3, -0.1f, 0.1f)},
        {"m2", RandomTensor(kParamShape, 4, 0.0f, 0.01f)},
        // beta^1: the first step is t = 1.
        {"b1p", MakeTensor({1}, std::vector<float>{static_cast<float>(b1)})},
        {"b2p", MakeTensor({1}, std::vector<float>{static_cast<float>(b2)})}};
    UpdateProgram prog;
    prog.Build("adamw", state,
               {{"Param", "param"},
                {"Moment1", "m1"},
                {"Moment2", "m2"},
                {"Beta1Pow", "b1p"},
                {"Beta2Pow", "b2p"}},
               {{"beta1", static_cast<float>(b1)},
                {"beta2", static_cast<float>(b2)},
                {"epsilon", static_cast<float>(eps)},
                {"weight_decay", static_cast<float>(wd)}},
               in_place);
    std::vector<double> p = ToDouble(p0), m = ToDouble(state["m1"]),
                        v = ToDouble(state["m2"]);
    double b1p = b1, b2p = b2;
    for (int step = 0; step < kSteps; ++step) {
      const float lr = 0.01f * (step + 1);
      Tensor g = RandomTensor(kParamShape, 20 + step);
      prog.Step(g, lr);
      std::vector<double> gd = ToDouble(g);
      for (size_t i = 0; i < p.size(); ++i) {
        p[i] -= lr * wd * p[i];
        m[i] = b1 * m[i] + (1 - b1) * gd[i];
        v[i] = b2 * v[i] + (1 - b2) * gd[i] * gd[i];
        p[i] -= lr * (m[i] / (1 - b1p)) / (std::sqrt(v[i] / (1 - b2p)) + eps);
      }
      b1p *= b1;
      b2p *= b2;
      ExpectClose(*prog.scope.Find("param"), p, "param");
      ExpectClose(*prog.scope.Find("m1"), m, "m1");
      ExpectClose(*prog.scope.Find("m2"), v, "m2");
      ExpectClose(*prog.scope.Find("b1p"), {b1p}, "b1p");
      ExpectClose(*prog.scope.Find("b2p"), {b2p}, "b2p");
    }
    EXPECT_NEAR(prog.scope.Find("b1p")->data<float>()[0],
                std::pow(b1, kSteps + 1), 1e-6);
  }
}

TEST(OptimizerErrors, ShapesNameTheSlot) {
  RegisterAllOps();
  Program prog;
  Block& b = prog.global_block();
  for (auto [name, shape] : {std::pair<const char*, Shape>{"p", {2, 2}},
                             {"g", {2, 2}},
                             {"lr", {1}},
                             {"m1", {2, 2}},
                             {"m2", {4}},
                             {"b1p", {1}},
                             {"b2p", {1}},
                             {"bad_g", {2, 3}}}) {
    SetMeta(TensorMeta{proto::FP32, shape}, b.AddVar(name));
  }
  auto adamw = [](const std::string& grad, const std::string& m2) {
    return OpDescBuilder("adamw")
        .Input("Param", "p")
        .Input("Grad", grad)
        .Input("LearningRate", "lr")
        .Input("Moment1", "m1")
        .Input("Moment2", m2)
        .Input("Beta1Pow", "b1p")
        .Input("Beta2Pow", "b2p")
        .Output("ParamOut", "p")
        .Output("Moment1Out", "m1")
        .Output("Moment2Out", m2)
        .Output("Beta1PowOut", "b1p")
        .Output("Beta2PowOut", "b2p")
        .Build();
  };
  auto op = AppendOpInferShapes(b, adamw("g", "m2"));
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().message(),
            "op 0 (adamw): Moment2 is fp32[4] but Param is fp32[2, 2]");
  op = AppendOpInferShapes(b, OpDescBuilder("sgd")
                                  .Input("Param", "p")
                                  .Input("Grad", "bad_g")
                                  .Input("LearningRate", "lr")
                                  .Output("ParamOut", "p"));
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().message(),
            "op 0 (sgd): Grad is fp32[2, 3] but Param is fp32[2, 2]");
  op = AppendOpInferShapes(b, OpDescBuilder("sgd")
                                  .Input("Param", "p")
                                  .Input("Grad", "g")
                                  .Input("LearningRate", "m2")
                                  .Output("ParamOut", "p"));
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.status().message(),
            "op 0 (sgd): LearningRate must be fp32[1] but is fp32[4]");
}

TEST(OptimizerSchema, NotDifferentiable) {
  RegisterAllOps();
  EXPECT_FALSE(OpRegistry::Global().Find("sgd")->differentiable());
  EXPECT_FALSE(OpRegistry::Global().Find("adamw")->differentiable());
}

}  // namespace
}  // namespace loom
