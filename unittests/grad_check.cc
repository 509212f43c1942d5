#include "unittests/grad_check.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "executor/serial_executor.h"
#include "framework/autodiff.h"
#include "framework/op_builder.h"
#include "framework/shape_inference.h"

namespace loom {
namespace testing {

Tensor RandomTensor(const Shape& shape, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(NumElements(shape));
  for (auto& x : v) x = dist(rng);
  return MakeTensor(shape, v);
}

Tensor RandomTensorAwayFromZero(const Shape& shape, uint64_t seed, float gap) {
  Tensor t = RandomTensor(shape, seed, -1.0f, 1.0f);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    float mag = gap + std::fabs(p[i]);
    p[i] = p[i] < 0 ? -mag : mag;
  }
  return t;
}

void CheckGrad(const GradCheckCase& c) {
  RegisterAllCpuKernels();
  Program program;
  Block& block = program.global_block();
  for (const auto& [name, value] : c.inputs) {
    proto::VarDesc* var = block.AddVar(name);
    SetMeta(value.meta(), var);
    bool checked =
        std::find(c.check.begin(), c.check.end(), name) != c.check.end();
    // Checked inputs are parameters so that autodiff differentiates them;
    // persistable, so that perturbing them in the scope sticks.
    var->set_persistable(checked);
    var->set_is_parameter(checked);
    var->set_is_data(!checked);
  }
  auto op = AppendOpInferShapes(block, c.op);
  ASSERT_TRUE(op.ok()) << op.status();

  std::vector<std::string> outputs = c.outputs;
  if (outputs.empty()) {
    for (const std::string& out : (*op)->OutputVars()) {
      if (IsFloating(block.FindVar(out)->dtype())) outputs.push_back(out);
    }
  }
  std::map<std::string, Tensor> weights;
  std::vector<std::string> partial_losses;
  uint64_t seed = 1000;
  for (const std::string& out : outputs) {
    const std::string w = out + "_weight";
    weights[w] = RandomTensor(MetaOf(*block.FindVar(out)).shape, seed++);
    proto::VarDesc* wv = block.AddVar(w);
    SetMeta(weights[w].meta(), wv);
    wv->set_is_data(true);
    auto weighted = AppendOpInferShapes(block, OpDescBuilder("elementwise_mul")
                                                   .Input("X", out)
                                                   .Input("Y", w)
                                                   .Output("Out", out + "_w"));
    ASSERT_TRUE(weighted.ok()) << weighted.status();
    auto reduced = AppendOpInferShapes(block, OpDescBuilder("reduce_sum")
                                                  .Input("X", out + "_w")
                                                  .Output("Out", out + "_loss")
                                                  .Attr("reduce_all", true));
    ASSERT_TRUE(reduced.ok()) << reduced.status();
    partial_losses.push_back(out + "_loss");
  }
  // A name no op under test will use for its own outputs.
  const std::string loss = "grad_check.loss";
  auto sum = AppendOpInferShapes(
      block, OpDescBuilder("sum").Input("X", partial_losses).Output("Out", loss));
  ASSERT_TRUE(sum.ok()) << sum.status();
  auto pairs = AppendBackward(program, loss);
  ASSERT_TRUE(pairs.ok()) << pairs.status();

  Scope scope;
  for (const auto& [name, value] : c.inputs) scope.Var(name)->CopyFrom(value);
  for (const auto& [name, value] : weights) scope.Var(name)->CopyFrom(value);
  SerialExecutorOptions options;
  options.free_temporaries = false;
  auto exec = SerialExecutor::Create(program, &scope, options);
  ASSERT_TRUE(exec.ok()) << exec.status();
  ASSERT_TRUE((*exec)->Run().ok());

  // Every analytic gradient is read before any input is perturbed.
  std::map<std::string, std::vector<float>> analytic_grads;
  for (const std::string& name : c.check) {
    Tensor* grad = scope.Find(GradVarName(name));
    ASSERT_TRUE(grad != nullptr && grad->initialized())
        << "no gradient computed for " << name;
    analytic_grads[name] = grad->ToFloatVector();
  }
  for (const std::string& name : c.check) {
    const std::vector<float>& analytic = analytic_grads[name];
    Tensor* x = scope.Find(name);
    const int64_t n = x->numel();
    const int64_t step = std::max<int64_t>(1, n / c.max_elements);
    for (int64_t i = 0; i < n; i += step) {
      float* p = x->data<float>() + i;
      const float saved = *p;
      *p = saved + c.eps;
      ASSERT_TRUE((*exec)->Run().ok());
      const double plus = scope.Find(loss)->data<float>()[0];
      *p = saved - c.eps;
      ASSERT_TRUE((*exec)->Run().ok());
      const double minus = scope.Find(loss)->data<float>()[0];
      *p = saved;
      const double numeric = (plus - minus) / (2.0 * c.eps);
      const double tol =
          c.atol + c.rtol * std::max(std::fabs(numeric),
                                     std::fabs(double{analytic[i]}));
      EXPECT_NEAR(analytic[i], numeric, tol)
          << c.op.type() << ": d(loss)/d(" << name << ")[" << i << "]";
    }
  }
}

}  // namespace testing
}  // namespace loom
