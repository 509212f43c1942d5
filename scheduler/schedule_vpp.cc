#include <algorithm>

#include "scheduler/schedules_impl.h"

namespace loom {

using schedule_internal::Backward;
using schedule_internal::Forward;
using schedule_internal::Optimizer;

// VPP, interleaved 1F1B (Megatron-LM megatron/core/pipeline_parallel/
// schedules.py: forward_backward_pipelining_with_interleaving,
// get_pp_rank_microbatches, get_schedule_table; Paddle
// pipeline_scheduler_pass/pipeline_vpp.py). Each of the p stages holds c
// model chunks; chunk k of stage s is virtual stage k * p + s, so a
// micro-batch crosses every stage c times.
//
// Each stage walks m * c "virtual micro-batches" in a fixed order:
// micro-batches go in groups of p, and each group runs chunk 0, chunk 1,
// ..., chunk c - 1 (Megatron's schedule table with its default
// microbatch_group_size_per_vp_stage = p). Backwards walk the same order
// with chunks reversed (c - 1 first). With w = min(2 * (p - s - 1) +
// (c - 1) * p, m * c):
//   warm-up       the first w forwards: (c - 1) * p on every stage, so that
//                 the first group reaches the last chunk, and 2 per stage
//                 of distance from the last stage;
//   steady state  m * c - w pairs: forward number i + w, then backward
//                 number i;
//   cool-down     the last w backwards; then O.
// With per-chunk times tF and tB the step takes (m * c + p - 1) * (tF + tB):
// the 1F1B bubble divided by c.
//
// Paddle special-cases m == p as all forwards, then all backwards; Megatron
// today only caps w at m * c, and Loom follows Megatron (same makespan in
// the unit-cost simulation, different order).
//
// Needs: pipeline.vpp_degree >= 2 (with one chunk this is 1F1B), and
// pipeline.micro_batches a multiple of pipeline.degree (Megatron with the
// default group size rejects a partial last group; Paddle asserts the same).
//
// Worked example, 2 stages x 4 micro-batches x 2 chunks (then O):
//
//   phase          | stage 0             | stage 1
//   ---------------+---------------------+--------------------
//   warm-up        | F0.0 F1.0 F0.1 F1.1 | F0.0 F1.0
//   steady (F, B)  | F2.0 B0.1 F3.0 B1.1 | F0.1 B0.1 F1.1 B1.1
//                  | F2.1 B0.0 F3.1 B1.0 | F2.0 B0.0 F3.0 B1.0
//                  |                     | F2.1 B2.1 F3.1 B3.1
//   cool-down      | B2.1 B3.1 B2.0 B3.0 | B2.0 B3.0
StatusOr<std::vector<Job>> ScheduleVPP(const ScheduleParams& p) {
  LOOM_RETURN_IF_ERROR(
      schedule_internal::CheckCommonParams(p, "VPP", /*uses_chunks=*/true));
  if (p.chunks < 2) {
    return InvalidArgument("pipeline.vpp_degree (", p.chunks,
                           ") must be at least 2 for VPP");
  }
  if (p.micro_batches % p.num_stages != 0) {
    return InvalidArgument("pipeline.micro_batches (", p.micro_batches,
                           ") must be a multiple of pipeline.degree (",
                           p.num_stages, ") for VPP");
  }
  const int n = p.num_stages;
  const int c = p.chunks;
  const int total = p.micro_batches * c;
  // Virtual micro-batch i: group i / (n * c); within it, chunk
  // (i % (n * c)) / n and micro-batch i % n of the group.
  auto micro_batch = [&](int i) { return i / (n * c) * n + i % n; };
  auto chunk = [&](int i) { return i % (n * c) / n; };
  auto forward = [&](int i) { return Forward(micro_batch(i), chunk(i)); };
  auto backward = [&](int i) {
    return Backward(micro_batch(i), c - 1 - chunk(i));
  };

  const int warmup = std::min(2 * (n - p.stage - 1) + (c - 1) * n, total);
  std::vector<Job> jobs;
  // Warm-up.
  for (int i = 0; i < warmup; ++i) jobs.push_back(forward(i));
  // Steady state.
  for (int i = 0; i + warmup < total; ++i) {
    jobs.push_back(forward(i + warmup));
    jobs.push_back(backward(i));
  }
  // Cool-down.
  for (int i = total - warmup; i < total; ++i) jobs.push_back(backward(i));
  jobs.push_back(Optimizer());
  return jobs;
}

}  // namespace loom
