// Input a user can write gets a one-line error naming what is wrong, never
// a crash, a silent default or a run that looks healthy (issue 10's
// findings, one regression test each).
#include <gtest/gtest.h>

#include "unittests/loom_cli.h"

namespace loom {
namespace {

// The error is one line, from loom, and names `what`.
void ExpectOneLineError(const CliResult& r, const std::string& what) {
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(Lines(r.out), 1) << r.out;
  EXPECT_EQ(r.out.rfind("loom ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(what), std::string::npos) << r.out;
}

// 65536 x 65536 ranks overflowed the layout's int arithmetic: `loom plan`
// segfaulted and `loom run` exited 0 having done nothing.
TEST(BadInput, AbsurdDegreesAreRefused) {
  ExpectOneLineError(Loom("plan --preset gpt-tiny --dp 65536 --mp 65536"),
                     "= 4294967296 ranks, more than Loom plans (1048576)");
  ExpectOneLineError(Loom("run --preset gpt-tiny --dp 65536 --mp 65536 --steps 1"),
                     "more than Loom plans");
  ExpectOneLineError(Loom("plan --preset gpt-tiny --micro_batches 2000000000"),
                     "pipeline.micro_batches x pipeline.vpp_degree = 2000000000 x 1");
}

// Negative degrees and counts ran as the config's value.
TEST(BadInput, NegativeFlagsAreRefused) {
  ExpectOneLineError(Loom("plan --preset gpt-tiny --dp -2"),
                     "--dp must be positive (0: the config's), got -2");
  ExpectOneLineError(Loom("plan --preset gpt-tiny --micro_batches -1"), "--micro_batches");
}

// FLAGS_dp=abc in the environment was ignored.
TEST(BadInput, EnvironmentFlagsThatDoNotParseAreRefused) {
  ExpectOneLineError(Loom("plan --preset gpt-tiny", "FLAGS_dp=abc"),
                     "environment variable FLAGS_dp='abc' is not a valid int32 for --dp");
}

// --config naming a directory read as an empty config.
TEST(BadInput, ConfigThatIsADirectoryIsRefused) {
  ExpectOneLineError(Loom("plan --preset gpt-tiny --config /tmp"),
                     "/tmp: not a regular file (a directory)");
}

// VPP on one stage passed validation and aborted in the executor.
TEST(BadInput, VppOnOneStageIsRefused) {
  ExpectOneLineError(Loom("run --preset gpt-tiny --schedule VPP --vpp 2 --steps 1"),
                     "pipeline.vpp_degree is 2 but pipeline.degree is 1");
}

// --lr inf was accepted, and a diverged run printed step 0 and exited 0.
TEST(BadInput, ADivergedRunStopsNamingTheStep) {
  ExpectOneLineError(Loom("run --preset gpt-tiny --lr inf --steps 2"),
                     "--lr must be positive and finite, got inf");
  // A finite rate that blows up: SGD at 1e30 overflows in step 1.
  CliResult run = Loom("run --preset gpt-tiny --optimizer sgd --lr 1e30 --steps 5");
  EXPECT_EQ(run.code, 1) << run.out;
  EXPECT_NE(run.out.find("step 0 loss "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("loom run: step 1: the loss is "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("training diverged"), std::string::npos) << run.out;
  CliResult train = Loom("train --preset gpt-tiny --optimizer sgd --lr 1e30 --steps 5");
  EXPECT_EQ(train.code, 1) << train.out;
  EXPECT_NE(train.out.find("step 1: the loss is "), std::string::npos) << train.out;
}

// --trace to a path that cannot be written failed only after training.
TEST(BadInput, AnUnwritableTraceFailsBeforeTraining) {
  const CliResult r = Loom("run --preset gpt-tiny --steps 2 --trace /proc/nope/t.json");
  ExpectOneLineError(r, "loom run: --trace: /proc/nope/t.json: cannot create directory");
  EXPECT_EQ(r.out.find("step 0"), std::string::npos) << r.out;
}

// Huge batches and sequences ended in bad_alloc, a length_error or a CHECK.
// A tensor too large to count is refused when the model is built; a run
// too large for the host (here 4 GB of address space) before it allocates.
TEST(BadInput, SizesBeyondTheHostAreRefusedBeforeAllocating) {
  ExpectOneLineError(Loom("plan --preset gpt-tiny --batch_size 4000000000000"),
                     "model.batch_size x model.seq_len x the widest layer = 4000000000000 x 32");
  ExpectOneLineError(Loom("train --preset gpt-tiny --seq_len 1000000000 --steps 1"),
                     "the attention scores, model.batch_size x model.num_heads x model.seq_len^2");
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space: ulimit -v cannot apply";
#endif
#endif
  const std::string limited = "ulimit -v 4000000 && " + std::string(LOOM_BIN) + " ";
  ExpectOneLineError(Shell(limited + "train --preset gpt-tiny --batch_size 100000000 --steps 1"),
                     "lower batch_size (100000000), seq_len (32) or num_layers (2)");
  ExpectOneLineError(
      Shell(limited + "run --preset gpt-tiny --mp 2 --batch_size 10000000 --steps 1"),
      "(2 rank(s) in this process) needs ");
  // What fits still runs under the same limit.
  CliResult small = Shell(limited + "run --preset gpt-tiny --mp 2 --steps 1");
  EXPECT_EQ(small.code, 0) << small.out;
}

}  // namespace
}  // namespace loom
