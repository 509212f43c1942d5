// Typed pass options: each kind parses, checks and prints from the one
// declaration; errors name the pass and option; every pipeline prints all
// its options and parses back to the same text.
#include <gtest/gtest.h>

#include "passes/pass_registry.h"
#include "passes/planner.h"

namespace loom {
namespace {

enum class Color { kRed, kGreen };

// A pass declared as a new pass would be: a struct with defaults, a table.
struct ExampleOptions {
  int64_t count = 2;
  bool enabled = true;
  std::string label = "none";
  std::string mode = "fast";
  Color color = Color::kRed;
};

class ExamplePass : public Pass {
 public:
  explicit ExamplePass(const ExampleOptions& options) : options_(options) {}
  StatusOr<bool> Run(PassContext& ctx) override {
    ctx.Explain("test-example", StrCat("count ", options_.count));
    return false;
  }

 private:
  ExampleOptions options_;
};

PassInfo ExamplePassInfo() {
  using O = ExampleOptions;
  PassInfo info = PassInfoOf<ExamplePass, O>("test-example", "exercises every option kind");
  info.options = {
      IntOption(&O::count, "count", "how many", 1, 8),
      BoolOption(&O::enabled, "enabled", "on or off"),
      StringOption(&O::label, "label", "any text"),
      ChoiceOption(&O::mode, "mode", "how", {"fast", "slow"}),
      EnumOption(&O::color, "color", "a typed choice",
                 std::vector<std::pair<std::string, Color>>{{"red", Color::kRed},
                                                            {"green", Color::kGreen}})};
  info.check = OptionsCheck<O>([](const O& o) -> Status {
    if (o.mode == "slow" && o.count > 4) {
      return InvalidArgument("option count: at most 4 when mode is slow, got ", o.count);
    }
    return Status::OK();
  });
  return info;
}

class PassOptionsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    RegisterAllPasses();
    if (PassRegistry::Global().Find("test-example") == nullptr) {
      LOOM_REGISTER_PASS(ExamplePassInfo);
    }
  }
  static std::string Error(const std::string& pipeline) {
    return PassPipeline::Parse(pipeline).status().message();
  }
  static std::string Printed(const std::string& pipeline) {
    auto parsed = PassPipeline::Parse(pipeline);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    return parsed.ok() ? parsed->ToString() : "";
  }
};

TEST_F(PassOptionsTest, ParsesEveryKindIntoTheStruct) {
  auto parsed =
      PassPipeline::Parse("test-example{color=green,count=3,enabled=false,label=a b,mode=slow}");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& o = std::any_cast<const ExampleOptions&>(parsed->entries()[0].options);
  EXPECT_EQ(o.count, 3);
  EXPECT_FALSE(o.enabled);
  EXPECT_EQ(o.label, "a b");
  EXPECT_EQ(o.mode, "slow");
  EXPECT_EQ(o.color, Color::kGreen);
}

// Defaults print too, in the normal form (options sorted).
TEST_F(PassOptionsTest, PrintsEveryOption) {
  EXPECT_EQ(Printed("test-example"),
            "test-example{color=red,count=2,enabled=true,label=none,mode=fast}");
  EXPECT_EQ(Printed("test-example{color=green},job-split"),
            "test-example{color=green,count=2,enabled=true,label=none,mode=fast},job-split");
}

TEST_F(PassOptionsTest, ErrorsNameThePassAndOption) {
  EXPECT_EQ(Error("test-example{count=x}"),
            "test-example: option count: expected an integer in [1, 8], got 'x'");
  EXPECT_EQ(Error("test-example{count=9}"),
            "test-example: option count: expected an integer in [1, 8], got 9");
  EXPECT_EQ(Error("test-example{count=2.5}"),
            "test-example: option count: expected an integer in [1, 8], got '2.5'");
  EXPECT_EQ(Error("test-example{enabled=yes}"),
            "test-example: option enabled: expected true or false, got 'yes'");
  EXPECT_EQ(Error("test-example{mode=medium}"),
            "test-example: option mode: expected one of fast, slow, got 'medium'");
  EXPECT_EQ(Error("test-example{color=blue}"),
            "test-example: option color: expected one of red, green, got 'blue'");
  EXPECT_EQ(Error("test-example{mode=slow,count=5}"),
            "test-example: option count: at most 4 when mode is slow, got 5");
  EXPECT_EQ(Error("test-example{colour=red}"),
            "pass test-example has no option 'colour' (options: count, enabled, label, mode, "
            "color)");
  EXPECT_EQ(Error("tensor-parallel{degree=x}"),
            "tensor-parallel: option degree: expected an integer in [1, 1048576], got 'x'");
  EXPECT_EQ(Error("op-split{parts=1}"),
            "op-split: option parts: expected 0 (by cost) or 2..1024, got 1");
  EXPECT_EQ(Error("schedule{mode=2F2B}"),
            "schedule: option mode: expected one of FThenB, 1F1B, Eager1F1B, VPP, ZBH1, "
            "1F1B-overlap, ZBV, got '2F2B'");
  EXPECT_EQ(Error("sharding{stage=2,keep-gathered-bytes=5}"),
            "sharding: option keep-gathered-bytes is 5 but stage is 2 (only stage 3 gathers "
            "parameters before use)");
}

// Each registered pass alone, and the planner's pipelines, print every
// option and parse back to the same text.
TEST_F(PassOptionsTest, PipelinesRoundTrip) {
  for (const PassInfo* info : PassRegistry::Global().All()) {
    const std::string printed = Printed(info->name);
    EXPECT_EQ(Printed(printed), printed);
    EXPECT_EQ(printed.find('{') != std::string::npos, !info->options.empty()) << printed;
  }
  proto::Strategy sharded = MakeStrategy(4, 2, 2, 4, "1F1B-overlap");
  sharded.mutable_sharding()->set_stage(2);
  sharded.mutable_sharding()->set_degree(2);
  sharded.mutable_passes()->set_op_split(true);
  sharded.mutable_passes()->set_dp_bucketing(false);
  for (const proto::Strategy& s : {MakeStrategy(2, 2, 2, 4, "ZBH1"),
                                   MakeStrategy(1, 1, 2, 4, "VPP", 2), sharded}) {
    const std::string pipeline = DefaultPipeline(s).value();
    EXPECT_EQ(Printed(pipeline), Printed(Printed(pipeline)));
  }
  EXPECT_NE(DefaultPipeline(sharded).value().find("bucket-bytes=1,"), std::string::npos);
}

}  // namespace
}  // namespace loom
