// The op cost model's lookup order over a small hand-written table, and the
// table file itself: parse and validation errors, merging, atomic saves,
// the per-user default location.
#include "cost_model/op_cost_model.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

#include "cost_model/cluster.h"
#include "cost_model/cost_table.h"
#include "framework/file_util.h"
#include "framework/op_builder.h"
#include "framework/op_work.h"
#include "framework/shape_inference.h"
#include "unittests/loom_cli.h"

namespace loom {
namespace {

// Two matmuls and a gelu profiled on "local", and one entry of another
// device that must never be used for "local".
constexpr char kTable[] = R"pb(
entry {
  signature: "matmul fp32[256, 64] fp32[64, 192] -> fp32[256, 192]"
  op_type: "matmul" flops: 6291456 bytes: 311296
  median_seconds: 100e-6 samples: 7 device: "local"
}
entry {
  signature: "matmul fp32[256, 64] fp32[64, 256] -> fp32[256, 256]"
  op_type: "matmul" flops: 8388608 bytes: 393216
  median_seconds: 150e-6 samples: 7 device: "local"
}
entry {
  signature: "gelu fp32[128, 256] -> fp32[128, 256]"
  op_type: "gelu" flops: 32768 bytes: 262144
  median_seconds: 30e-6 samples: 7 device: "local"
}
entry {
  signature: "matmul fp32[512, 64] fp32[64, 192] -> fp32[512, 192]"
  op_type: "matmul" flops: 12582912 bytes: 573440
  median_seconds: 1 samples: 1 device: "a100"
}
entry {
  signature: "scale fp32[1] -> fp32[1]"
  op_type: "scale" flops: 1 bytes: 8
  median_seconds: 1.5e-6 samples: 7 device: "local"
}
)pb";

// One stream of this cluster: 100 GFLOP/s, 10 GB/s (a ridge of 10 FLOP per
// byte), 1 us per launch.
proto::Cluster TestCluster() {
  proto::Cluster c = LoadCluster("local").value();
  c.mutable_device()->set_cores(2);
  c.mutable_device()->set_peak_fp32_flops(200e9);
  c.mutable_device()->set_memory_bandwidth(20e9);
  c.mutable_device()->set_kernel_launch_seconds(1e-6);
  return c;
}

CostTable ParseTable(const std::string& text) {
  proto::CostTable t;
  EXPECT_TRUE(ParseTextProto(text, "test", &t).ok());
  return CostTable::FromProto(t, "test").value();
}

class OpCostModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterAllOps();
    Var("x", {256, 64});
    Var("x2", {512, 64});
    Var("w1", {64, 192});
    Var("w2", {64, 256});
    Var("h", {256, 256});
  }
  void Var(const char* name, const Shape& shape) {
    proto::VarDesc* v = program_.global_block().AddVar(name);
    SetMeta(TensorMeta{proto::FP32, shape}, v);
    v->set_is_data(true);
  }
  Op* Matmul(const char* x, const char* w, const char* out) {
    return AppendOpInferShapes(program_.global_block(),
                               OpDescBuilder("matmul").Input("X", x).Input("Y", w).Output("Out", out))
        .value();
  }
  Op* Unary(const char* type, const char* x, const char* out) {
    return AppendOpInferShapes(program_.global_block(),
                               OpDescBuilder(type).Input("X", x).Output("Out", out))
        .value();
  }
  Program program_;
  OpCostModel model_{TestCluster(), ParseTable(kTable)};
};

TEST_F(OpCostModelTest, ExactSignatureIsProfiled) {
  Op* op = Matmul("x", "w1", "o1");
  ASSERT_EQ(OpSignature(*op), "matmul fp32[256, 64] fp32[64, 192] -> fp32[256, 192]");
  OpCost c = model_.EstimateOp(*op).value();
  EXPECT_EQ(c.rule, CostRule::kProfiled);
  EXPECT_DOUBLE_EQ(c.seconds, 100e-6);
}

TEST_F(OpCostModelTest, ComputeBoundNeighbourScalesByFlops) {
  // [512,64] x [64,192]: 12.6 MFLOP over 573 KB, compute-bound. In log
  // (FLOPs, bytes) the [256,64] x [64,256] entry (x1.5, x1.46) is nearer
  // than the [256,64] x [64,192] one (x2, x1.84). Only its time above the
  // launch scales: 1 us + (150 - 1) us x 1.5. The a100 entry with this
  // very signature belongs to another device.
  OpCost c = model_.EstimateOp(*Matmul("x2", "w1", "o2")).value();
  EXPECT_EQ(c.rule, CostRule::kScaled);
  EXPECT_DOUBLE_EQ(c.seconds, 1e-6 + 149e-6 * 1.5);
  EXPECT_EQ(c.basis,
            "FLOPs x1.5 of 'matmul fp32[256, 64] fp32[64, 256] -> fp32[256, 256]'");
}

// A neighbour that measured mostly the launch, or one far away, is not
// scaled: the roofline prices the op.
TEST_F(OpCostModelTest, NoScalingFromOverheadOrFarNeighbours) {
  OpCost c = model_.EstimateOp(*Unary("scale", "h", "s")).value();
  EXPECT_EQ(c.rule, CostRule::kRoofline) << c.basis;
  // [256,256] fp32 in and out: 512 KB at 10 GB/s, plus the launch.
  EXPECT_NEAR(c.seconds, 1e-6 + 524288 / 10e9, 1e-12);
}

TEST_F(OpCostModelTest, MemoryBoundNeighbourScalesByBytes) {
  // gelu of [256,256]: 0.125 FLOP per byte, memory-bound; twice the bytes
  // of the [128,256] entry.
  OpCost c = model_.EstimateOp(*Unary("gelu", "h", "g")).value();
  EXPECT_EQ(c.rule, CostRule::kScaled);
  EXPECT_DOUBLE_EQ(c.seconds, 1e-6 + 29e-6 * 2);
}

TEST_F(OpCostModelTest, NoEntryOfTheTypeFallsToTheRoofline) {
  // softmax of [256,256]: 512 KiB at 10 GB/s, plus the launch.
  OpCost c = model_.EstimateOp(*Unary("softmax", "h", "s")).value();
  EXPECT_EQ(c.rule, CostRule::kRoofline);
  EXPECT_DOUBLE_EQ(c.seconds, 1e-6 + 524288 / 10e9);
  EXPECT_EQ(c.basis, "memory-bound: 5.24e+05 bytes");
  // A compute-bound matmul on a cluster without entries: 2*256*256*64 FLOP
  // at 100 GFLOP/s.
  proto::Cluster other = TestCluster();
  other.set_name("elsewhere");
  OpCostModel empty(other, ParseTable(kTable));
  OpCost m = empty.EstimateOp(*Matmul("x", "w2", "o3")).value();
  EXPECT_EQ(m.rule, CostRule::kRoofline);
  EXPECT_DOUBLE_EQ(m.seconds, 1e-6 + 8388608 / 100e9);
  // A device whose kernels sustain 80% of its peak: the matmul at 80
  // GFLOP/s; the memory-bound softmax as before.
  other.mutable_device()->set_flops_efficiency(0.8);
  OpCostModel sustained(other, ParseTable(kTable));
  EXPECT_DOUBLE_EQ(sustained.EstimateOp(*Matmul("x", "w2", "o4")).value().seconds,
                   1e-6 + 8388608 / 80e9);
  EXPECT_DOUBLE_EQ(sustained.EstimateOp(*Unary("softmax", "h", "s2")).value().seconds,
                   1e-6 + 524288 / 10e9);
}

// A GPU computes a product's output in tiles, one per multiprocessor at a
// time (cluster.proto, multiprocessors): the a100 preset's 256 x 128 over
// 108 SMs.
TEST(GemmWaves, AProductPaysForWholeWavesOfTiles) {
  const proto::Device a100 = LoadCluster("a100").value().device();
  ASSERT_EQ(a100.multiprocessors(), 108);
  EXPECT_DOUBLE_EQ(ProductWaveFraction(a100, 1, 256 * 9, 128 * 12), 1.0);  // one wave
  // A tile more runs a second wave for it alone.
  EXPECT_DOUBLE_EQ(ProductWaveFraction(a100, 1, 256 * 109, 128), 109.0 / 216);
  // Either way round, whichever fills more; a batch's products add tiles.
  EXPECT_DOUBLE_EQ(ProductWaveFraction(a100, 1, 128, 256 * 108), 1.0);
  EXPECT_DOUBLE_EQ(ProductWaveFraction(a100, 108, 256, 128), 1.0);
  // A tile half used costs a whole one.
  EXPECT_DOUBLE_EQ(ProductWaveFraction(a100, 108, 128, 128), 0.5);
  // A device that does not say how it tiles: every FLOP at the rate.
  EXPECT_EQ(ProductWaveFraction(LoadCluster("local").value().device(), 1, 256 * 109, 128), 1.0);
}

// The ops: a matmul of 120 tiles (two waves, the second mostly idle) takes
// twice as long as one of 108 with 9/10 of its FLOPs; a gradient's two
// products are priced each by its own output's tiles.
TEST(GemmWaves, MatmulsArePricedByTheirOutputsTiles) {
  RegisterAllOps();
  Program program;
  Block& block = program.global_block();
  auto var = [&](const char* name, const Shape& shape) {
    proto::VarDesc* v = block.AddVar(name);
    SetMeta(TensorMeta{proto::BF16, shape}, v);
    v->set_is_data(true);
  };
  constexpr int64_t kK = 8192;  // deep enough to be compute-bound
  var("x_wave", {256 * 9, kK});
  var("x_more", {256 * 10, kK});
  var("w", {kK, 128 * 12});
  auto matmul = [&](const char* x, const char* out) {
    return AppendOpInferShapes(
               block, OpDescBuilder("matmul").Input("X", x).Input("Y", "w").Output("Out", out))
        .value();
  };
  const Op* wave = matmul("x_wave", "o_wave");
  const Op* more = matmul("x_more", "o_more");
  ASSERT_EQ(WorkOf(*more).num_products, 1);
  EXPECT_EQ(WorkOf(*more).products[0].rows, 256 * 10);
  EXPECT_EQ(WorkOf(*more).products[0].cols, 128 * 12);

  const proto::Cluster a100 = LoadCluster("a100").value();
  const proto::Device& d = a100.device();
  OpCostModel model(a100, CostTable());
  const double launch = d.kernel_launch_seconds();
  const double rate = StreamSustainedFlops(d, proto::BF16);
  const double t_wave = model.EstimateOp(*wave).value().seconds - launch;
  const double t_more = model.EstimateOp(*more).value().seconds - launch;
  EXPECT_NEAR(t_wave, WorkOf(*wave).flops / rate, 1e-15);
  EXPECT_NEAR(t_more / t_wave, 2.0, 1e-12);

  // Its gradient: X's product a [2560, 8192] output (640 tiles in 6
  // waves), W's a [8192, 1536] one (384 in 4); each half the FLOPs.
  const Op* grad = AppendOpInferShapes(block, OpDescBuilder("matmul_grad")
                                                  .Input("X", "x_more")
                                                  .Input("Y", "w")
                                                  .Input("Out@GRAD", "o_more")
                                                  .Output("X@GRAD", "x_more@GRAD")
                                                  .Output("Y@GRAD", "w@GRAD"))
                       .value();
  const OpWork g = WorkOf(*grad);
  ASSERT_EQ(g.num_products, 2);
  EXPECT_DOUBLE_EQ(ProductWaveFraction(d, 1, 256 * 10, kK), 640.0 / 648);
  EXPECT_DOUBLE_EQ(ProductWaveFraction(d, 1, kK, 128 * 12), 384.0 / 432);
  const double half = g.flops / 2 / rate;
  EXPECT_NEAR(model.ComputeSeconds(g, proto::BF16), half * 648 / 640 + half * 432 / 384, 1e-15);
  EXPECT_NEAR(model.EstimateOp(*grad).value().seconds - launch,
              model.ComputeSeconds(g, proto::BF16), 1e-15);
}

TEST_F(OpCostModelTest, NeighboursMustShareTheComputeDtype) {
  EXPECT_EQ(ComputeDtypeOf("matmul bf16[8, 4] bf16[4, 2] -> bf16[8, 2]"), proto::BF16);
  EXPECT_EQ(ComputeDtypeOf("lookup_table fp32[128, 64] int64[8, 32] -> fp32[8, 32, 64]"),
            proto::FP32);
  EXPECT_EQ(ComputeDtypeOf("fill_constant -> int64[4]"), proto::FP32);
  OpWork w;
  w.flops = 8388608;
  w.bytes = 196608;
  OpCost c = model_.Estimate("matmul", "matmul bf16[256, 64] bf16[64, 256] -> bf16[256, 256]", w)
                 .value();
  EXPECT_EQ(c.rule, CostRule::kRoofline);
}

TEST_F(OpCostModelTest, NeverASilentZero) {
  EXPECT_EQ(model_.Estimate("mystery", "mystery ->", OpWork{}).status().message(),
            "no cost for 'mystery ->': no entry on device 'local' and no work "
            "to price (0 FLOPs, 0 bytes)");
  OpWork comm;
  comm.bytes = 1024;
  comm.comm_bytes = 512;
  comm.comm_calls = 1;
  EXPECT_EQ(model_.Estimate("allreduce", "allreduce fp32[128] -> fp32[128]", comm)
                .status().code(),
            StatusCode::kFailedPrecondition);
  // Errors through EstimateOp carry the op's location.
  Op* op = AppendOpInferShapes(
      program_.global_block(),
      OpDescBuilder("allreduce").Input("X", "h").Output("Out", "h")).value();
  EXPECT_EQ(model_.EstimateOp(*op).status().message().rfind("op 0 (allreduce): '", 0), 0u)
      << model_.EstimateOp(*op).status();
}

TEST(CostTable, ParseAndValidationErrorsNameTheEntry) {
  const std::string dir = MakeTempDir("loom_table_errors");
  auto load = [&](const std::string& text) {
    std::ofstream(dir + "/t.pbtxt") << text;
    return CostTable::Load(dir + "/t.pbtxt").status().message();
  };
  EXPECT_EQ(load("entry {\n  signatur: \"x\"\n}\n"),
            dir + "/t.pbtxt: line 2, column 11: Message type "
                  "\"loom.proto.CostEntry\" has no field named \"signatur\"");
  EXPECT_EQ(load("entry { signature: \"gelu fp32[4] -> fp32[4]\" op_type: \"gelu\" "
                 "device: \"local\" samples: 1 }"),
            dir + "/t.pbtxt: entry 0 (gelu fp32[4] -> fp32[4]): median_seconds "
                  "must be positive, got 0");
  EXPECT_EQ(load("entry { signature: \"gelu fp32[4] -> fp32[4]\" op_type: \"relu\" "
                 "device: \"local\" samples: 1 median_seconds: 1 }"),
            dir + "/t.pbtxt: entry 0 (gelu fp32[4] -> fp32[4]): op_type 'relu' "
                  "does not begin the signature");
  EXPECT_EQ(load("entry { signature: \"gelu fp32[4] -> fp32[4]\" op_type: \"gelu\" "
                 "device: \"local\" samples: 1 median_seconds: 1 cold_input_bytes: -2 }"),
            dir +
                "/t.pbtxt: entry 0 (gelu fp32[4] -> fp32[4]): cold_input_bytes must not be "
                "negative, got -2");
  const std::string e = "entry { signature: \"gelu fp32[4] -> fp32[4]\" op_type: \"gelu\" "
                        "device: \"local\" samples: 1 median_seconds: 1 }\n";
  EXPECT_EQ(load(e + e), dir + "/t.pbtxt: entry 1 (gelu fp32[4] -> fp32[4]): device "
                               "'local' already has this signature at entry 0");
  EXPECT_EQ(CostTable::Load(dir + "/none.pbtxt").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(CostTable::LoadOrEmpty(dir + "/none.pbtxt").value().size(), 0);
}

proto::CostEntry Entry(const std::string& signature, const std::string& device,
                       double seconds) {
  proto::CostEntry e;
  e.set_signature(signature);
  e.set_op_type(signature.substr(0, signature.find(' ')));
  e.set_device(device);
  e.set_median_seconds(seconds);
  e.set_samples(3);
  return e;
}

TEST(CostTable, MergeReplacesTheSameSignatureAndDevice) {
  CostTable t;
  auto first = t.Merge({Entry("gelu fp32[4] -> fp32[4]", "local", 1),
                        Entry("relu fp32[4] -> fp32[4]", "local", 2)});
  EXPECT_EQ(first.added, 2);
  auto second = t.Merge({Entry("gelu fp32[4] -> fp32[4]", "local", 5),
                         Entry("gelu fp32[4] -> fp32[4]", "a100", 7)});
  EXPECT_EQ(second.added, 1);
  EXPECT_EQ(second.replaced, 1);
  EXPECT_EQ(t.size(), 3);
  EXPECT_EQ(t.Find("gelu fp32[4] -> fp32[4]", "local")->median_seconds(), 5);
  EXPECT_EQ(t.Find("gelu fp32[4] -> fp32[4]", "a100")->median_seconds(), 7);
  EXPECT_EQ(t.proto().entry(0).median_seconds(), 5);  // replaced in place
  EXPECT_EQ(t.OfType("gelu", "local").size(), 1u);
  EXPECT_EQ(t.Find("gelu fp32[8] -> fp32[8]", "local"), nullptr);
}

TEST(CostTable, SavesAtomicallyAndReadsBack) {
  const std::string dir = MakeTempDir("loom_table_save");
  const std::string path = dir + "/sub/dir/table.pbtxt";  // made on the way
  CostTable t;
  t.Merge({Entry("gelu fp32[4] -> fp32[4]", "local", 1.5e-6)});
  ASSERT_TRUE(t.Save(path).ok());
  t.Merge({Entry("relu fp32[4] -> fp32[4]", "local", 2e-6)});
  ASSERT_TRUE(t.Save(path).ok());
  CostTable back = CostTable::Load(path).value();
  EXPECT_EQ(back.size(), 2);
  EXPECT_EQ(back.Find("gelu fp32[4] -> fp32[4]", "local")->median_seconds(), 1.5e-6);
  // Only the table is left: no temporary files.
  DIR* d = opendir((dir + "/sub/dir").c_str());
  ASSERT_NE(d, nullptr);
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  }
  closedir(d);
  EXPECT_EQ(names, std::vector<std::string>{"table.pbtxt"});
  // The file is text a user can read.
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "entry {");
}

// Test processes have a directory of their own (unittests/hermetic_env.cc):
// a `loom profile` in the user's ~/.cache/loom changes no test's result,
// and what tests write in temporary directories goes when they exit.
TEST(CostTable, TestsNeverSeeTheUsersCache) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  ASSERT_NE(xdg, nullptr);
  const std::string cache = xdg;
  ASSERT_GT(cache.size(), std::string("/cache").size());
  EXPECT_EQ(cache.substr(cache.size() - 6), "/cache") << cache;
  const std::string own = cache.substr(0, cache.size() - 6);
  EXPECT_NE(own.find("/loom-test-"), std::string::npos) << own;
  EXPECT_EQ(std::getenv("LOOM_COST_TABLE"), nullptr);
  EXPECT_EQ(DefaultCostTablePath(), cache + "/loom/cost_table.pbtxt");
  EXPECT_EQ(::testing::TempDir(), own + "/tmp/");
  EXPECT_EQ(std::string(std::getenv("TMPDIR")), own + "/tmp");
}

TEST(CostTable, DefaultLocationPerUser) {
  // The test process's own (unittests/hermetic_env.cc), restored after.
  auto env = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value != nullptr ? value : "");
  };
  const std::string saved_xdg = env("XDG_CACHE_HOME"), saved_home = env("HOME");
  setenv("LOOM_COST_TABLE", "/x/table.pbtxt", 1);
  EXPECT_EQ(DefaultCostTablePath(), "/x/table.pbtxt");
  EXPECT_EQ(CostTablePath("/flag.pbtxt"), "/flag.pbtxt");
  unsetenv("LOOM_COST_TABLE");
  setenv("XDG_CACHE_HOME", "/cache", 1);
  EXPECT_EQ(DefaultCostTablePath(), "/cache/loom/cost_table.pbtxt");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(DefaultCostTablePath(), "/home/u/.cache/loom/cost_table.pbtxt");
  EXPECT_EQ(CostTablePath(""), "/home/u/.cache/loom/cost_table.pbtxt");
  setenv("HOME", saved_home.c_str(), 1);
  setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
}

}  // namespace
}  // namespace loom
