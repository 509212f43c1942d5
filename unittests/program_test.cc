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

}  // namespace
}  // namespace loom
