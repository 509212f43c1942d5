// How ranks that share a CPU host's cores take them from each other: the
// simulator's optional resource model, beside the InstructionTimer's
// prices (as XLA's AsyncTracker is beside its LatencyEstimator). The local
// and emulated clusters have one; a GPU cluster never does, and there each
// stream computes side by side with the others at full rate.
#ifndef LOOM_SCHEDULER_SHARED_CORE_MODEL_H_
#define LOOM_SCHEDULER_SHARED_CORE_MODEL_H_

#include "scheduler/execution_graph.h"
#include "scheduler/instruction_timer.h"

namespace loom {

class SharedCoreModel {
 public:
  virtual ~SharedCoreModel() = default;
  // Ranks whose compute draws on one pool of cores (ranks emulated on one
  // CPU host) name the same pool; -1: the rank's streams compute side by
  // side at full rate.
  virtual int CorePool(const RankGraph& rank) const = 0;
  virtual double PoolCores(int pool) const { return 1; }
  // While communication of the pool's ranks runs, its compute runs up to
  // this many times slower (>= 1): on a CPU host the communication threads
  // take cycles from the kernels.
  virtual double CommSlowdown(int pool) const { return 1; }
  // The other way: while every core of the pool computes, its ranks'
  // communication runs up to this many times slower (>= 1): its threads
  // wait for a core.
  virtual double ComputeCommSlowdown(int pool) const { return 1; }
  // Compute of a rank that shares the pool's cores with another rank's
  // compute (more tasks than cores, of two ranks or more) runs this many
  // times slower again: the OS runs them a slice at a time, so each
  // reaches its next meeting early or late, and its peer waits for the
  // later one.
  virtual double SharedCoreSlowdown(int pool) const { return 1; }
  // The part of a call's time (0 to 1) its threads spend moving bytes on
  // the pool's cores, as it starts (`call`); the rest is latency (wakeups,
  // the wire), which takes no core. Both slowdowns scale with it: a call
  // that copies for a fifth of its time slows compute by a fifth of
  // CommSlowdown's excess, and is slowed by a fifth of
  // ComputeCommSlowdown's.
  virtual double CommCpuShare(const RankGraph& rank, const Instruction& ins,
                              const CallStart& call) const {
    return 1;
  }
  // The CPU seconds each party's threads spend on its core over a call
  // (the calling thread, the transport's, the kernel's on their behalf).
  // Where a pool's ranks outnumber its cores, a call takes that much of its
  // party's core, evenly over its time, from the pool's compute (in place
  // of CommSlowdown); 0: unknown or not charged (CostModelTimer charges it
  // only where two of the call's parties share a core), CommSlowdown
  // prices it.
  virtual double CommCpuSeconds(const RankGraph& rank, const Instruction& ins) const { return 0; }
  // How far past the op in flight CallStart::cores_busy_for follows a
  // core's compute stream (its next ops, until one waits for another
  // stream): 0, the op in flight only.
  virtual double CoreRunHorizon() const { return 0; }
  // How many times longer `ins` takes beside another rank's call on its
  // shared cores than apart (>= 1), as it starts (`call`): a call already
  // running is slowed so for as long as a later one overlaps it.
  virtual double BesideCallsSlowdown(const RankGraph& rank, const Instruction& ins,
                                     const CallStart& call) const {
    return 1;
  }
};

}  // namespace loom

#endif  // LOOM_SCHEDULER_SHARED_CORE_MODEL_H_
