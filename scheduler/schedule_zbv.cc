#include "scheduler/schedules_impl.h"

namespace loom {

using schedule_internal::BackwardB;
using schedule_internal::BackwardW;
using schedule_internal::Forward;
using schedule_internal::Optimizer;

// ZBV, the V-shaped zero-bubble schedule (ZB-V) of Qi, Wan, Huang, Lin,
// "Zero Bubble Pipeline Parallelism" (ICLR 2024) and its authors'
// repository (sail-sg/zero-bubble-pipeline-parallelism, scheduler/zbv.py,
// which builds the order greedily from measured costs). This is the fixed
// order that schedule takes when F, B and W cost the same, in the phases
// PyTorch's ScheduleZBVZeroBubble writes it out.
//
// Each of the p stages holds two chunks placed in a V (PlaceVirtualStage):
// chunk 0 of stage s is virtual stage s, chunk 1 is 2p - 1 - s. A
// micro-batch runs down the stages on chunk 0, turns on stage p - 1 without
// a transfer, and comes back up on chunk 1, so stage 0 holds both the first
// and the last layers. Backwards are split into B and W, as in ZBH1. With
// stage s, counting each chunk's jobs apart:
//   warm-up 1   2(p - s) - 1 chunk-0 forwards: the first micro-batch's trip
//               down and back up to this stage's chunk 1;
//   warm-up 2   s pairs: a chunk-1 forward, then a chunk-0 forward;
//   warm-up 3   p - s chunk-1 (F, b, w) triples;
//   steady      the next chunk-0 forward (while any is left), b and w of
//               chunk 0, then a chunk-1 (F, b, w), until every forward ran;
//   cool-down   s pairs of bs (chunk 0, then chunk 1), their Ws held back;
//               p - s chunk-0 (b, w) pairs;
//   late W      the chunk-1 Ws held back, then the chunk-0 ones; then O.
//
// Time: with F = b = w = 1 per chunk and free communication, stage s runs
// without a gap from its first job at step s to its last at 6m + s: the
// paper's "zero bubble" is this parallelogram (its bubble is the idle time
// after a stage's first job). One step, with every stage waiting for the
// last, takes 6m + p - 1, against ZBH1's 6m + 2(p - 1) and 1F1B's
// 6m + 6(p - 1) in the same chunk units.
//
// Memory: every stage holds at most 2p chunk activations in flight (forward
// done, W not), p micro-batches of the whole stage: the activation memory of
// 1F1B's first stage.
//
// Needs: pipeline.vpp_degree 2, and pipeline.micro_batches at least
// 2 * pipeline.degree - 1 (the first stage's warm-up; with fewer the
// order deadlocks, and PyTorch pads to that count).
//
// Worked example, 2 stages x 4 micro-batches (each list then ends with O):
//
//   phase      | stage 0                       | stage 1
//   -----------+-------------------------------+------------------------------
//   warm-up 1  | F0.0 F1.0 F2.0                | F0.0
//   warm-up 2  |                               | F0.1 F1.0
//   warm-up 3  | F0.1 b0.1 w0.1 F1.1 b1.1 w1.1 | F1.1 b0.1 w0.1
//   steady     | F3.0 b0.0 w0.0 F2.1 b2.1 w2.1 | F2.0 b0.0 w0.0 F2.1 b1.1 w1.1
//              | b1.0 w1.0 F3.1 b3.1 w3.1      | F3.0 b1.0 w1.0 F3.1 b2.1 w2.1
//   cool-down  | b2.0 w2.0 b3.0 w3.0           | b2.0 b3.1 b3.0 w2.0
//   late W     |                               | w3.1 w3.0
StatusOr<std::vector<Job>> ScheduleZBV(const ScheduleParams& p) {
  LOOM_RETURN_IF_ERROR(
      schedule_internal::CheckCommonParams(p, "ZBV", /*uses_chunks=*/true));
  if (p.chunks != 2) {
    return InvalidArgument("pipeline.vpp_degree (", p.chunks,
                           ") must be 2 for ZBV: its V places two chunks on each stage");
  }
  if (p.micro_batches < 2 * p.num_stages - 1) {
    return InvalidArgument("pipeline.micro_batches (", p.micro_batches,
                           ") must be at least 2 x pipeline.degree - 1 (",
                           2 * p.num_stages - 1, ") for ZBV");
  }
  const int m = p.micro_batches;
  const int n = p.num_stages;
  const int s = p.stage;
  // Per chunk: the next forward, B and W.
  int f[2] = {0, 0}, b[2] = {0, 0}, w[2] = {0, 0};
  std::vector<Job> jobs;
  auto forward = [&](int c) { jobs.push_back(Forward(f[c]++, c)); };
  auto input_grad = [&](int c) { jobs.push_back(BackwardB(b[c]++, c)); };
  auto weight_grad = [&](int c) { jobs.push_back(BackwardW(w[c]++, c)); };
  auto triple = [&](int c) {
    forward(c);
    input_grad(c);
    weight_grad(c);
  };
  // Warm-up.
  for (int i = 0; i < 2 * (n - s) - 1; ++i) forward(0);
  for (int i = 0; i < s; ++i) {
    forward(1);
    forward(0);
  }
  for (int i = 0; i < n - s; ++i) triple(1);
  // Steady state.
  while (f[1] < m) {
    if (f[0] < m) forward(0);
    input_grad(0);
    weight_grad(0);
    triple(1);
  }
  // Cool-down.
  for (int i = 0; i < s; ++i) {
    input_grad(0);
    input_grad(1);
  }
  for (int i = 0; i < n - s; ++i) {
    input_grad(0);
    weight_grad(0);
  }
  // Late W.
  while (w[1] < m) weight_grad(1);
  while (w[0] < m) weight_grad(0);
  jobs.push_back(Optimizer());
  return jobs;
}

}  // namespace loom
