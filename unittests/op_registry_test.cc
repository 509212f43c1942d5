// Registry-wide invariants: every op can be inferred and run on the CPU,
// and every grad op a grad maker emits exists too.
#include <gtest/gtest.h>

#include "executor/kernel.h"
#include "framework/op_builder.h"

namespace loom {
namespace {

// A forward desc with one var in every slot of the schema and a (zero)
// value for every required attribute.
proto::OpDesc DescFromSchema(const OpSchema& s) {
  OpDescBuilder b(s.type());
  for (const auto& in : s.inputs()) b.Input(in.name, "in_" + in.name);
  for (const auto& out : s.outputs()) b.Output(out.name, "out_" + out.name);
  for (const auto& attr : s.attrs()) {
    if (attr.has_default) continue;
    proto::Attr a;
    a.set_name(attr.name);
    a.set_type(attr.type);
    b.RawAttr(a);
  }
  return b.Build();
}

TEST(OpRegistry, EveryOpHasInferenceAndACpuKernel) {
  RegisterAllCpuKernels();
  const auto types = OpRegistry::Global().Types();
  EXPECT_GE(types.size(), 40u);
  for (const std::string& type : types) {
    const OpSchema* s = OpRegistry::Global().Find(type);
    EXPECT_TRUE(static_cast<bool>(s->infer_shape())) << type;
    EXPECT_FALSE(s->doc().empty()) << type << " has no doc";
    // Communication ops run on communicators (a later executor); identity is
    // the one that also means something on a single rank.
    if (s->communication() && type != "identity") continue;
    EXPECT_NE(KernelRegistry::Cpu().Find(type), nullptr) << type << " has no CPU kernel";
  }
}

TEST(OpRegistry, GradMakersEmitRegisteredOpsWithKernels) {
  RegisterAllCpuKernels();
  int differentiable = 0;
  for (const std::string& type : OpRegistry::Global().Types()) {
    const OpSchema* s = OpRegistry::Global().Find(type);
    if (!s->differentiable()) continue;
    ++differentiable;
    for (const proto::OpDesc& grad : s->grad_maker()(DescFromSchema(*s))) {
      const OpSchema* g = OpRegistry::Global().Find(grad.type());
      ASSERT_NE(g, nullptr) << type << " emits unknown " << grad.type();
      Status schema = CheckOpSchema(grad);
      EXPECT_TRUE(schema.ok()) << type << " -> " << grad.type() << ": " << schema;
      if (!g->communication()) {
        EXPECT_NE(KernelRegistry::Cpu().Find(grad.type()), nullptr) << grad.type();
      }
    }
  }
  // Everything a GPT step differentiates, at least.
  EXPECT_GE(differentiable, 20);
}

TEST(OpRegistry, CheckOpSchemaNamesTheSlot) {
  RegisterAllOps();
  proto::OpDesc d = OpDescBuilder("matmul").Input("X", "a").Input("Z", "b").Output("Out", "c");
  EXPECT_EQ(CheckOpSchema(d).message(),
            "unknown input slot 'Z' (matmul has no such input)");
  d = OpDescBuilder("scale").Input("X", std::vector<std::string>{"a", "b"}).Output("Out", "c");
  EXPECT_EQ(CheckOpSchema(d).message(), "input slot 'X' holds 2 vars but takes one");
  d = OpDescBuilder("fill_constant").Output("Out", "c");
  EXPECT_EQ(CheckOpSchema(d).message(), "missing required attribute 'shape'");
  // A slot named twice (an empty first, a full second) used to pass, and
  // shape inference then read the empty one and aborted.
  d = OpDescBuilder("scale").Input("X", std::vector<std::string>{}).Input("X", "a").Output("Out", "c");
  EXPECT_EQ(CheckOpSchema(d).message(), "input slot 'X' appears twice");
}

}  // namespace
}  // namespace loom
