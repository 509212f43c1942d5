// The IR classes: editing, the use-def index, serialization and the verifier.
#include <fstream>

#include <gtest/gtest.h>

#include "framework/op_builder.h"
#include "framework/serialization.h"
#include "framework/shape_inference.h"
#include "framework/verifier.h"

namespace loom {
namespace {

proto::OpDesc Scale(const std::string& in, const std::string& out) {
  return OpDescBuilder("scale").Input("X", in).Output("Out", out).Attr("scale", 2.0f);
}

// x -> a -> b -> c, each a scale op.
Program Chain() {
  RegisterAllOps();
  Program p;
  Block& b = p.global_block();
  auto* x = b.AddVar("x");
  x->add_shape(4);
  x->set_is_data(true);
  CHECK(AppendOpInferShapes(b, Scale("x", "a")).ok());
  CHECK(AppendOpInferShapes(b, Scale("a", "b")).ok());
  CHECK(AppendOpInferShapes(b, Scale("b", "c")).ok());
  return p;
}

std::vector<std::string> Types(const Block& b) {
  std::vector<std::string> out;
  for (Op* op : b.ops()) out.push_back(op->Output("Out"));
  return out;
}

TEST(Block, UseDefIndexFollowsEdits) {
  Program p = Chain();
  Block& b = p.global_block();
  ASSERT_EQ(b.Producers("a").size(), 1u);
  EXPECT_EQ(b.Producers("a")[0]->index(), 0);
  EXPECT_EQ(b.Consumers("a")[0]->index(), 1);

  Op* second = b.Consumers("a")[0];
  Op* inserted = b.InsertOpBefore(second, Scale("a", "a2"));
  EXPECT_EQ(inserted->index(), 1);
  EXPECT_EQ(second->index(), 2);
  EXPECT_EQ(b.Consumers("a").size(), 2u);

  b.RenameInput(second, "a", "a2");
  EXPECT_EQ(b.Consumers("a").size(), 1u);
  EXPECT_EQ(b.Consumers("a2")[0], second);

  b.EraseOp(inserted);
  EXPECT_TRUE(b.Producers("a2").empty());
  EXPECT_EQ(second->index(), 1);
  EXPECT_EQ(Types(b), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(Block, RenameVarMovesDescAndEveryUse) {
  Program p = Chain();
  Block& b = p.global_block();
  ASSERT_TRUE(b.RenameVar("b", "bee").ok());
  EXPECT_FALSE(b.HasVar("b"));
  ASSERT_TRUE(b.HasVar("bee"));
  EXPECT_EQ(b.FindVar("bee")->name(), "bee");
  EXPECT_EQ(b.Producers("bee")[0]->index(), 1);
  EXPECT_EQ(b.Consumers("bee")[0]->index(), 2);
  EXPECT_EQ(b.Consumers("bee")[0]->Input("X"), "bee");
  EXPECT_TRUE(b.Consumers("b").empty());
  Status clash = b.RenameVar("a", "c");
  EXPECT_EQ(clash.code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(VerifyProgram(p).ok());
}

TEST(Block, FirstProducerAndLastConsumerByPosition) {
  Program p = Chain();
  Block& b = p.global_block();
  b.InsertOpBefore(b.front(), Scale("x", "c"));  // c written twice
  EXPECT_EQ(b.FirstProducer("c")->index(), 0);
  b.AppendOp(Scale("x", "d"));
  EXPECT_EQ(b.LastConsumer("x")->index(), 4);
}

TEST(Serialization, BinaryAndTextRoundTrip) {
  Program p = Chain();
  p.global_block().front()->annotations().set_stream("mp");
  for (const char* path : {"/tmp/loom_rt.pb", "/tmp/loom_rt.pbtxt"}) {
    ASSERT_TRUE(SaveProgram(p, path).ok());
    auto q = LoadProgram(path);
    ASSERT_TRUE(q.ok()) << q.status();
    EXPECT_EQ(q->ToProto().SerializeAsString(), p.ToProto().SerializeAsString());
  }
}

TEST(Serialization, TruncatedAndCorruptedFilesAreNamed) {
  std::string bytes = SerializeProgramBinary(Chain());
  auto truncated = ParseProgram(bytes.substr(0, bytes.size() - 5), false);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("truncated program"), std::string::npos);
  std::string flipped = bytes;
  flipped[flipped.size() - 3] ^= 0x5a;
  auto corrupted = ParseProgram(flipped, false);
  ASSERT_FALSE(corrupted.ok());
  EXPECT_EQ(corrupted.status().message(), "corrupted program: checksum mismatch");
  auto garbage = ParseProgram("blocks { idx: 0 ops { type: ", true);
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find("not a text-format program: line 1"),
            std::string::npos);
}

Status VerifyText(const std::string& text) {
  auto p = ParseProgram(text, true);
  return p.status();
}

constexpr char kVars[] = R"(
  vars { name: "x" shape: 4 is_data: true }
  vars { name: "a" shape: 4 }
  vars { name: "b" shape: 4 }
)";

// A binary program missing a required field is named as such, in Loom's
// one line, without protobuf's own log line ahead of it (issue 10).
TEST(Serialization, MissingRequiredFieldsAreNamedWithoutProtobufsLog) {
  RegisterAllOps();
  proto::ProgramDesc desc;
  desc.add_blocks()->set_idx(0);
  desc.mutable_blocks(0)->add_ops()->set_role(1);  // no type
  std::string payload;
  ASSERT_TRUE(desc.SerializePartialToString(&payload));
  ::testing::internal::CaptureStderr();
  auto program = ParseProgram(FrameBytes("LOOMPROG", payload), /*text_format=*/false);
  const std::string logged = ::testing::internal::GetCapturedStderr();
  ASSERT_FALSE(program.ok());
  EXPECT_EQ(program.status().message(),
            "corrupted program: missing required fields: blocks[0].ops[0].type");
  EXPECT_EQ(logged, "");
}

TEST(Verifier, UnknownOpNamesTypeAndIndex) {
  Status s = VerifyText(std::string("blocks { idx: 0 ") + kVars + R"(
    ops { type: "scale" inputs { name: "X" vars: "x" } outputs { name: "Out" vars: "a" } }
    ops { type: "frobnicate" inputs { name: "X" vars: "a" } outputs { name: "Out" vars: "b" } } })");
  EXPECT_EQ(s.message(), "block 0, op 1 (frobnicate): unknown op type 'frobnicate'");
}

TEST(Verifier, UseBeforeDefinition) {
  Status s = VerifyText(std::string("blocks { idx: 0 ") + kVars + R"(
    ops { type: "scale" inputs { name: "X" vars: "b" } outputs { name: "Out" vars: "a" } }
    ops { type: "scale" inputs { name: "X" vars: "x" } outputs { name: "Out" vars: "b" } } })");
  EXPECT_EQ(s.message(),
            "block 0, op 0 (scale): input X reads var 'b' before its first "
            "writer, op 1 (scale)");
}

TEST(Verifier, CycleIsReportedWithItsPath) {
  Status s = VerifyText(std::string("blocks { idx: 0 ") + kVars + R"(
    ops { type: "scale" inputs { name: "X" vars: "b" } outputs { name: "Out" vars: "a" } }
    ops { type: "scale" inputs { name: "X" vars: "a" } outputs { name: "Out" vars: "b" } } })");
  EXPECT_EQ(s.message(),
            "block 0, op 0 (scale): cycle: input X reads 'b', written by op 1 "
            "(scale), which depends on this op: op 0 (scale) -> 'a' -> op 1 (scale)");
}

TEST(Verifier, ShapeMismatchAndBadAttribute) {
  Status shape = VerifyText(R"(blocks { idx: 0
    vars { name: "x" shape: 4 is_data: true }
    vars { name: "a" shape: 5 }
    ops { type: "scale" inputs { name: "X" vars: "x" } outputs { name: "Out" vars: "a" } } })");
  EXPECT_EQ(shape.message(),
            "block 0, op 0 (scale): output var 'a' is declared fp32[5] but "
            "shape inference gives fp32[4]");
  Status attr = VerifyText(std::string("blocks { idx: 0 ") + kVars + R"(
    ops { type: "scale" inputs { name: "X" vars: "x" } outputs { name: "Out" vars: "a" }
          attrs { name: "scale" type: INT i: 3 } } })");
  EXPECT_EQ(attr.message(),
            "block 0, op 0 (scale): attribute 'scale' has type INT, expected FLOAT");
  Status missing = VerifyText(std::string("blocks { idx: 0 ") + kVars + R"(
    ops { type: "scale" outputs { name: "Out" vars: "a" } } })");
  EXPECT_EQ(missing.message(), "block 0, op 0 (scale): missing input 'X'");
}

// What the verifier let through (issue 10): an empty name in a required
// slot (shape inference then aborted), a required output left empty, an
// attribute set twice, an attribute out of its range, role 0, and a
// gradient op retyped so that its incoming gradient no longer fits.
TEST(Verifier, InvalidIrIsRefusedNotCrashedOn) {
  auto one_op = [](const std::string& op) {
    return VerifyText(std::string("blocks { idx: 0 ") + kVars + op + " }").message();
  };
  EXPECT_EQ(one_op(R"(ops { type: "scale" inputs { name: "X" vars: "" }
                         outputs { name: "Out" vars: "a" } })"),
            "block 0, op 0 (scale): input slot 'X' holds an empty var name but is required");
  EXPECT_EQ(one_op(R"(ops { type: "scale" inputs { name: "X" vars: "x" }
                         outputs { name: "Out" vars: "" } })"),
            "block 0, op 0 (scale): output slot 'Out' holds an empty var name but is required");
  EXPECT_EQ(one_op(R"(ops { type: "scale" inputs { name: "X" vars: "x" }
                         outputs { name: "Out" vars: "a" }
                         attrs { name: "scale" type: FLOAT f: 2 }
                         attrs { name: "scale" type: FLOAT f: 3 } })"),
            "block 0, op 0 (scale): attribute 'scale' is set twice");
  EXPECT_EQ(one_op(R"(ops { type: "scale" inputs { name: "X" vars: "x" }
                         outputs { name: "Out" vars: "a" } role: 0 })"),
            "block 0, op 0 (scale): has role 0 (no phase)");
  Status epsilon = VerifyText(R"(blocks { idx: 0
    vars { name: "x" shape: [2, 4] is_data: true }
    vars { name: "s" shape: 4 persistable: true is_parameter: true }
    vars { name: "y" shape: [2, 4] } vars { name: "m" shape: 2 } vars { name: "v" shape: 2 }
    ops { type: "layer_norm" inputs { name: "X" vars: "x" } inputs { name: "Scale" vars: "s" }
          inputs { name: "Bias" vars: "s" } outputs { name: "Y" vars: "y" }
          outputs { name: "Mean" vars: "m" } outputs { name: "Variance" vars: "v" }
          attrs { name: "epsilon" type: FLOAT f: -7 } } })");
  EXPECT_EQ(epsilon.message(),
            "block 0, op 0 (layer_norm): attribute 'epsilon' is -7, outside (0, 3.40282e+38]");
  // elementwise_add_grad retyped to matmul_grad: [2,4] + [4] is no product.
  Status retyped = VerifyText(R"(blocks { idx: 0
    vars { name: "x" shape: [2, 4] is_data: true }
    vars { name: "b" shape: 4 is_data: true }
    vars { name: "dout" shape: [2, 4] is_data: true }
    vars { name: "dx" shape: [2, 4] } vars { name: "db" shape: 4 }
    ops { type: "matmul_grad" inputs { name: "X" vars: "x" } inputs { name: "Y" vars: "b" }
          inputs { name: "Out@GRAD" vars: "dout" } outputs { name: "X@GRAD" vars: "dx" }
          outputs { name: "Y@GRAD" vars: "db" } } })");
  EXPECT_EQ(retyped.message(),
            "block 0, op 0 (matmul_grad): Y must have rank >= 2, but has shape [4]");
}

}  // namespace
}  // namespace loom
