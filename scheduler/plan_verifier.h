// The plan verifier: checks a whole Plan, all ranks together, before it is
// lowered or run. Running a job means running its program's block-0 ops in
// order for the job's micro-batch; a rank runs its jobs in order, so each
// rank is one sequential stream of ops. The checks, in the order they run
// (the first error found is returned):
//
//  1. Shape of the plan: one RankPlan per rank of the layout, in rank order,
//     with the layout's coordinates.
//  2. Per rank: the job list passes ValidateJobList (stage = pp coordinate,
//     micro-batches = largest micro-batch + 1, chunks = num_chunks); every
//     job has a program; send / recv / collective ops have well-formed
//     attributes (peer a stage other than the rank's own, a known ring_id)
//     and declared vars.
//  3. Events, per rank: each name in an op's wait_events is in the
//     record_events of some op of the same rank. Names are scoped per
//     micro-batch: a wait in a job of micro-batch m is satisfied by a record
//     in any job of micro-batch m or in the optimizer job; a wait in the
//     optimizer job by a record in any job. Order is not checked (the
//     recording op may be on another stream, later in the list).
//  4. Data flow, per rank: every var an op reads was written earlier in the
//     same program, is persistable or is_data there, or was written by an
//     earlier job of the rank with the same micro-batch (a recv counts as a
//     writer). The optimizer job may also read what any backward-type job
//     (backward, backward_b, backward_w) of any micro-batch wrote: gradients
//     accumulate into it. And a collective that runs (last_micro_batch_only
//     ones only in the last micro-batch) over a persistable var comes after
//     every other write to that var in the rank's step: an all-reduce of an
//     accumulator that is still being added to reduces a partial sum.
//  5. Transfers: the k-th send from rank a to rank b (in a's execution
//     order) pairs with the k-th recv on b from a. Per pair of ranks the
//     counts must be equal, and each pair must agree on the var name, the
//     micro-batch of their jobs, and dtype and shape (the send's X var vs the
//     recv's out_shape and dtype).
//  6. Collectives (ops whose schema's comm kind is kCollective: allreduce,
//     allgather, reduce_scatter, broadcast, c_softmax_with_cross_entropy): every member of a
//     group issues the same sequence on that ring: same op type, micro-batch,
//     number, dtypes and shapes of inputs, reduce_op, root, nranks and axis; nranks
//     must equal the group's size. Groups are RingMembers (scheduler/layout.h); a
//     collective on a ring where the rank has no group is an error.
//  7. Deadlock freedom: the plan is lowered to its ExecutionGraph and the
//     simulator (scheduler/simulator.h) runs it at zero cost under the
//     executor's rules: streams in issue order, dependencies, collectives
//     that start when every member arrives, sends that wait for their
//     recv. A stall names what the blocked ranks wait on, following the
//     chain of waits from the lowest blocked rank. The plan that is proven
//     is the plan that runs.
//
// Errors are located "rank R (dp=.. mp=.. pp=..), job J (F3): op K (type): "
// wherever a location applies.
#ifndef LOOM_SCHEDULER_PLAN_VERIFIER_H_
#define LOOM_SCHEDULER_PLAN_VERIFIER_H_

#include <cstdint>

#include "framework/status.h"
#include "scheduler/plan.h"

namespace loom {

// What a successful verification saw; for tests and logs.
struct PlanVerifyStats {
  int64_t ops = 0;          // op executions, over all ranks and jobs
  int64_t transfers = 0;    // matched send/recv pairs
  int64_t collectives = 0;  // collective instances (one per group and call)
};

// Runs every check above. `stats`, if given, is filled when the plan passes.
Status VerifyPlan(const Plan& plan, PlanVerifyStats* stats = nullptr);

}  // namespace loom

#endif  // LOOM_SCHEDULER_PLAN_VERIFIER_H_
