#include <algorithm>
#include <limits>

#include "scheduler/schedules_impl.h"

namespace loom {

using schedule_internal::Backward;
using schedule_internal::Forward;
using schedule_internal::Optimizer;

// 1F1B with backward-forward overlap (after the idea of Paddle's PR 57446,
// in Loom's own form). Every backward B_i is interleaved, part by part,
// with a forward: F#0 B#0 F#1 B#1 ..., where each part ends at a
// tensor-parallel all-reduce (ScheduleParams::forward_cuts, backward_cuts),
// so that the all-reduce ending one job's part runs on the mp stream while
// the other job's next part computes. With p stages, m micro-batches,
// stage s, and w = min(m, 2(p - s - 1) + 1) (see max_in_flight below):
//   warm-up       w forwards;
//   steady state  B_i interleaved with F_{i+w}, for i = 0, 1, ...;
//   cool-down     the backwards still in flight; then O.
//
// Why w, and not 1F1B's p - s - 1 plus one: an interleaved pair on stage s
// needs B_i's gradient from stage s + 1 near its start, and sends F_{i+w}'s
// activation near its end. Were adjacent stages' warm-ups one apart, stage
// s + 1's pair i would need the activation stage s sends at the end of its
// pair i - 1, and stage s's pair i the gradient stage s + 1 sends at the end
// of its pair i: each stage would idle a whole pair of its neighbour's
// (with uniform costs and free communication the bubble grows from 1F1B's
// (p-1)/(m+p-1) to about half the step). Two apart, stage s + 1's pair i
// runs beside stage s's pair i - 1, and the bubble is exactly 1F1B's
// (unittests/simulator_test.cc). The price is activations: stage s keeps up
// to w + 1 micro-batches live, 2p on stage 0 against 1F1B's p. With p = 1
// (gradient accumulation) w is 1: each backward overlaps the next forward.
//
// pipeline.max_in_flight c caps the warm-ups at c - 1, stage by stage
// from the first, but never below p - s: adjacent stages' warm-ups must
// stay at least one apart, or a pair waits on its neighbour's pair that
// waits on it. So stage s holds at most max(c, p - s + 1) micro-batches;
// the bubble grows as the cap bites.
//
// Needs: pipeline.micro_batches >= pipeline.degree, and the cuts (the
// schedule pass makes them; tensor-parallel degree above 1).
//
// Worked example, 2 stages x 4 micro-batches, forward and backward each cut
// once (two parts):
//
//   stage | warm-up  | steady state                            | cool-down
//   ------+----------+-----------------------------------------+----------
//   0     | F0 F1 F2 | F3#0 B0#0 F3#1 B0#1                     | B1 B2 B3
//   1     | F0       | F1#0 B0#0 F1#1 B0#1 F2#0 B1#0 F2#1 B1#1 |
//         |          |   F3#0 B2#0 F3#1 B2#1                   | B3
StatusOr<std::vector<Job>> Schedule1F1BOverlap(const ScheduleParams& p) {
  LOOM_RETURN_IF_ERROR(
      schedule_internal::CheckCommonParams(p, "1F1B-overlap", /*uses_chunks=*/false));
  if (p.micro_batches < p.num_stages) {
    return InvalidArgument("pipeline.micro_batches (", p.micro_batches,
                           ") must be at least pipeline.degree (", p.num_stages,
                           ") for 1F1B-overlap");
  }
  if (p.max_in_flight != 0 && p.max_in_flight < 2) {
    return InvalidArgument("pipeline.max_in_flight (", p.max_in_flight,
                           ") must be at least 2 for 1F1B-overlap (a backward and the forward "
                           "beside it), or 0");
  }
  const int m = p.micro_batches;
  // Stage by stage from the first: the full warm-up 2(p - s - 1) + 1, or
  // under max_in_flight at most the cap less one and at most one below
  // the previous stage's, but never below p - s (each stage's warm-up
  // must exceed the next one's, or a pair waits on its neighbour's pair
  // that waits on it).
  const int cap = p.max_in_flight > 0 ? p.max_in_flight - 1 : std::numeric_limits<int>::max();
  int warmup = std::min(2 * p.num_stages - 1, std::max(p.num_stages, cap));
  for (int s = 1; s <= p.stage; ++s) {
    warmup = std::max(p.num_stages - s, std::min(2 * (p.num_stages - s - 1) + 1, warmup - 1));
  }
  warmup = std::min(m, warmup);
  std::vector<Job> jobs;
  for (int mb = 0; mb < warmup; ++mb) jobs.push_back(Forward(mb));
  for (int mb = warmup; mb < m; ++mb) {
    const std::vector<Job> f = SplitJob(Forward(mb), p.forward_cuts);
    const std::vector<Job> b = SplitJob(Backward(mb - warmup), p.backward_cuts);
    for (size_t k = 0; k < std::max(f.size(), b.size()); ++k) {
      if (k < f.size()) jobs.push_back(f[k]);
      if (k < b.size()) jobs.push_back(b[k]);
    }
  }
  for (int mb = m - warmup; mb < m; ++mb) jobs.push_back(Backward(mb));
  jobs.push_back(Optimizer());
  return jobs;
}

}  // namespace loom
