// loom model, show, ops, passes: programs written, printed and refused.
#include <string>

#include <gtest/gtest.h>

#include "unittests/loom_cli.h"

namespace {

using loom::Lines;
using loom::Loom;
using loom::ReadWholeFile;
using loom::WriteWholeFile;
using Result = loom::CliResult;

TEST(Cli, ModelThenShow) {
  Result m = Loom("model --preset gpt-tiny -o /tmp/loom_cli_tiny.pb");
  ASSERT_EQ(m.code, 0) << m.out;
  Result s = Loom("show /tmp/loom_cli_tiny.pb");
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find("program: 1 block(s)"), std::string::npos);
  EXPECT_NE(s.out.find("forward        lookup_table"), std::string::npos) << s.out.substr(0, 600);
  EXPECT_NE(s.out.find("backward|loss  fill_constant"), std::string::npos);
  EXPECT_NE(s.out.find("optimize       adamw"), std::string::npos);
}

// loom ops shows each attribute's default and the range the verifier holds
// it to, a list's range holding for each entry.
TEST(Cli, OpsShowAttributeRanges) {
  Result r = Loom("ops dropout");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("attrs: dropout_prob=0.5 (in [0, 1)) seed=0 is_test=false "
                       "full_shape=[] (each in [1, max]) shard_offsets=[] (each in [0, max])"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("index in the full row"), std::string::npos) << r.out;
}

// loom ops says which devices have a kernel for each op, and that a
// collective alone is the communicators'.
TEST(Cli, OpsShowTheDevicesWithAKernel) {
  Result r = Loom("ops gelu allreduce");
  ASSERT_EQ(r.code, 0) << r.out;
#ifdef LOOM_WITH_CUDA
  EXPECT_NE(r.out.find("kernels: cpu cuda\n"), std::string::npos) << r.out;
#else
  EXPECT_NE(r.out.find("kernels: cpu\n"), std::string::npos) << r.out;
#endif
  EXPECT_NE(r.out.find("kernels: none (the communicators run it)\n"), std::string::npos) << r.out;
}

// The same program written as binary and as text lists the same, every
// op and var (with --vars), and text written back from the text reads the
// same again.
TEST(Cli, TextFormatRoundTrips) {
  ASSERT_EQ(Loom("model --preset gpt-tiny --layers 1 -o /tmp/loom_cli_rt.pb").code, 0);
  ASSERT_EQ(Loom("model --preset gpt-tiny --layers 1 -o /tmp/loom_cli_rt.pbtxt").code, 0);
  Result binary = Loom("show /tmp/loom_cli_rt.pb --vars");
  Result text = Loom("show /tmp/loom_cli_rt.pbtxt --vars");
  ASSERT_EQ(binary.code, 0) << binary.out;
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_GT(Lines(text.out), 100) << text.out;
  EXPECT_EQ(text.out, binary.out);
  // Through a pass that changes nothing, written back as text.
  ASSERT_EQ(Loom("opt /tmp/loom_cli_rt.pbtxt --test_passes --passes no-op -o "
                 "/tmp/loom_cli_rt2.pbtxt").code, 0);
  Result again = Loom("show /tmp/loom_cli_rt2.pbtxt --vars");
  EXPECT_EQ(again.out, text.out);
}

// `loom passes` prints each option with its default and the values it
// takes, from the registry's one table; the passes that test the pass
// manager are not the product's and are not listed.
TEST(Cli, PassesListsTheProductsPassesWithTheirOptions) {
  Result r = Loom("passes");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("    degree=1  mp ranks; an integer in [1, 1048576]"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("    fetch-mode=all_gather  "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("no-op"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("test-fail"), std::string::npos) << r.out;
}

TEST(Cli, TruncatedAndCorruptedFilesGiveOneLineErrors) {
  ASSERT_EQ(Loom("model --preset gpt-tiny -o /tmp/loom_cli_good.pb").code, 0);
  std::string bytes = ReadWholeFile("/tmp/loom_cli_good.pb");
  for (size_t keep : {size_t{0}, size_t{7}, size_t{30}, bytes.size() / 2, bytes.size() - 1}) {
    WriteWholeFile("/tmp/loom_cli_bad.pb", bytes.substr(0, keep));
    Result r = Loom("show /tmp/loom_cli_bad.pb");
    EXPECT_EQ(r.code, 1) << keep << ": " << r.out;
    EXPECT_EQ(Lines(r.out), 1) << keep << ": " << r.out;
    EXPECT_EQ(r.out.rfind("loom show: /tmp/loom_cli_bad.pb: ", 0), 0u) << r.out;
  }
  std::string flipped = bytes;
  for (size_t i = 40; i < flipped.size(); i += 997) flipped[i] ^= 0x21;
  WriteWholeFile("/tmp/loom_cli_bad.pb", flipped);
  Result r = Loom("show /tmp/loom_cli_bad.pb");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "loom show: /tmp/loom_cli_bad.pb: corrupted program: checksum mismatch\n");
  WriteWholeFile("/tmp/loom_cli_bad.pbtxt", "blocks { idx: 0 ops { type: \"scale\" ");
  r = Loom("show /tmp/loom_cli_bad.pbtxt");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(Lines(r.out), 1) << r.out;
  Result missing = Loom("show /tmp/loom_no_such_file.pb");
  EXPECT_EQ(missing.out, "loom show: /tmp/loom_no_such_file.pb: cannot open\n");
}

}  // namespace
