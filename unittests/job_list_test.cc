// Schedule parameter errors, and ValidateJobList's own errors: whole and
// split backwards, parts of jobs, broken lists.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "scheduler/schedule.h"
#include "unittests/schedule_test_util.h"

namespace loom {
namespace {

using schedule_test::Get;
using schedule_test::Jobs;
using schedule_test::Parse;

// ---------------------------------------------------------------------------
// Parameter errors.

std::string Error(const std::string& name, ScheduleParams p) {
  auto jobs = Get(name).fn(p);
  if (jobs.ok()) return "OK";
  EXPECT_EQ(jobs.status().code(), StatusCode::kInvalidArgument);
  return jobs.status().message();
}

TEST(ScheduleErrors, NameTheField) {
  EXPECT_EQ(Error("1F1B", {0, 4, 3, 1}),
            "pipeline.micro_batches (3) must be at least pipeline.degree (4) "
            "for 1F1B");
  EXPECT_EQ(Error("ZBH1", {2, 4, 3, 1}),
            "pipeline.micro_batches (3) must be at least pipeline.degree (4) "
            "for ZBH1");
  // Validation does not depend on the stage: stage 3 alone would fit 6.
  EXPECT_EQ(Error("Eager1F1B", {3, 4, 6, 1}),
            "pipeline.micro_batches (6) must be at least 2 * pipeline.degree "
            "- 1 (7) for Eager1F1B");
  EXPECT_EQ(Error("VPP", {0, 4, 8, 1}),
            "pipeline.vpp_degree (1) must be at least 2 for VPP");
  EXPECT_EQ(Error("VPP", {0, 4, 6, 2}),
            "pipeline.micro_batches (6) must be a multiple of pipeline.degree "
            "(4) for VPP");
  EXPECT_EQ(Error("FThenB", {0, 4, 0, 1}),
            "pipeline.micro_batches (0) must be at least 1 for FThenB");
  EXPECT_EQ(Error("1F1B", {0, 4, 8, 2}),
            "pipeline.vpp_degree (2) must be 1 for 1F1B; only VPP and ZBV run model "
            "chunks");
  EXPECT_EQ(Error("ZBH1", {4, 4, 8, 1}),
            "stage 4 is out of range for pipeline.degree (4) in ZBH1");
  EXPECT_EQ(Error("Eager1F1B", {-1, 4, 8, 1}),
            "stage -1 is out of range for pipeline.degree (4) in Eager1F1B");
  EXPECT_EQ(Error("VPP", {0, 0, 8, 2}),
            "pipeline.degree (0) must be at least 1 for VPP");
  // The boundaries themselves are accepted.
  EXPECT_EQ(Error("1F1B", {0, 4, 4, 1}), "OK");
  EXPECT_EQ(Error("Eager1F1B", {0, 4, 7, 1}), "OK");
  EXPECT_EQ(Error("VPP", {0, 4, 4, 2}), "OK");
}

// ---------------------------------------------------------------------------
// ValidateJobList on hand-broken lists.

std::string Validate(const std::string& jobs, int m = 2, int chunks = 1) {
  Status s = ValidateJobList(ScheduleParams{1, 4, m, chunks}, Parse(jobs));
  if (s.ok()) return "OK";
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  return s.message();
}

TEST(ValidateJobList, AcceptsWholeAndSplitBackwards) {
  EXPECT_EQ(Validate("F0 F1 B0 b1 w1 O"), "OK");
  EXPECT_EQ(Validate("F0.0 F0.1 B0.1 B0.0 O", 1, 2), "OK");
}

TEST(ValidateJobList, RejectsBrokenLists) {
  EXPECT_EQ(Validate("F0 F1 B0 F1 B1 O"), "stage 1, job 3 (F1): appears twice");
  EXPECT_EQ(Validate("F0 B1 F1 B0 O"),
            "stage 1, job 1 (B1): runs before its forward");
  EXPECT_EQ(Validate("F0 F1 B0 w1 b1 O"),
            "stage 1, job 3 (w1): runs before its B half");
  EXPECT_EQ(Validate("F0 F1 B0 B1"), "stage 1: no optimizer job");
  EXPECT_EQ(Validate("F0 F1 B0 O B1"),
            "stage 1, job 4 (B1): comes after the optimizer job");
  EXPECT_EQ(Validate("F0 F1 B0 B1 O O"),
            "stage 1, job 5 (O): comes after the optimizer job");
  EXPECT_EQ(Validate("F0 F1 B0 O"),
            "stage 1: micro-batch 1, chunk 0 lacks a forward and exactly one "
            "backward (whole, or B and W), each with all its parts");
  EXPECT_EQ(Validate("F0 F1 B0 b1 O"),
            "stage 1: micro-batch 1, chunk 0 lacks a forward and exactly one "
            "backward (whole, or B and W), each with all its parts");
  EXPECT_EQ(Validate("F0 F1 B0 B1 b1 w1 O"),
            "stage 1: micro-batch 1, chunk 0 lacks a forward and exactly one "
            "backward (whole, or B and W), each with all its parts");
  EXPECT_EQ(Validate("F0 F2 B0 B2 O"),
            "stage 1, job 1 (F2): micro-batch or chunk out of range (2 "
            "micro-batches, 1 chunks)");
  EXPECT_EQ(Validate("F0.0 F0.2 B0.0 O", 1, 2),
            "stage 1, job 1 (F0.2): micro-batch or chunk out of range (1 "
            "micro-batches, 2 chunks)");
}

// Parts of a job come in order, each from where the last ended, and the
// job is complete only with its last part.
TEST(ValidateJobList, ChecksParts) {
  const ScheduleParams p{0, 1, 1, 1};
  auto check = [&](std::vector<Job> jobs) {
    Status s = ValidateJobList(p, jobs);
    return s.ok() ? std::string("OK") : s.message();
  };
  const Job f{JobType::kForward, 0, 0};
  const Job b{JobType::kBackward, 0, 0};
  const Job o{JobType::kOptimizer, 0, 0};
  const std::vector<Job> fp = SplitJob(f, {3, 7});
  EXPECT_EQ(check({fp[0], fp[1], fp[2], b, o}), "OK");
  EXPECT_EQ(check({fp[0], fp[2], b, o}),
            "stage 0, job 1 (F0#2): does not continue part 0 (ops 0-3): expected part 1 from "
            "op 3");
  EXPECT_EQ(check({fp[1], fp[2], b, o}),
            "stage 0, job 0 (F0#1): the job's first part must be part 0 from op 0");
  EXPECT_EQ(check({fp[0], fp[1], b, fp[2], o}),
            "stage 0, job 2 (B0): runs before its forward");
  EXPECT_EQ(check({fp[0], fp[1], fp[2], fp[2], b, o}), "stage 0, job 3 (F0#2): appears twice");
  EXPECT_EQ(check({fp[0], fp[1], b, o}).substr(0, 40), "stage 0, job 2 (B0): runs before its for");
}

// Breaking a real schedule's list is caught too.
TEST(ValidateJobList, RejectsBrokenScheduleOutput) {
  const ScheduleParams p{3, 4, 8, 1};
  std::vector<Job> jobs = Jobs("ZBH1", 3, 4, 8);
  ASSERT_TRUE(ValidateJobList(p, jobs).ok());
  // Drop the last late W, w7.
  std::vector<Job> no_w(jobs.begin(), jobs.end());
  no_w.erase(no_w.end() - 2);
  EXPECT_EQ(ValidateJobList(p, no_w).message(),
            "stage 3: micro-batch 7, chunk 0 lacks a forward and exactly one "
            "backward (whole, or B and W), each with all its parts");
  // Move the first forward behind its B half.
  std::vector<Job> late_f(jobs.begin(), jobs.end());
  std::swap(late_f[0], late_f[1]);
  EXPECT_EQ(ValidateJobList(p, late_f).message(),
            "stage 3, job 0 (b0): runs before its forward");
}

}  // namespace
}  // namespace loom
