// What the simulator asks of a cost model: how long an instruction takes
// once it starts (the latency side, as XLA's LatencyEstimator). How ranks
// sharing a CPU host's cores slow each other is a separate, optional model
// (shared_core_model.h, as XLA's AsyncTracker is beside its estimator).
#ifndef LOOM_SCHEDULER_INSTRUCTION_TIMER_H_
#define LOOM_SCHEDULER_INSTRUCTION_TIMER_H_

#include <limits>

#include "scheduler/execution_graph.h"

namespace loom {

class SharedCoreModel;

// What the simulator knows of a communication as it starts.
struct CallStart {
  // How long its first party waited for the last.
  double waited = 0;
  // How long its parties' links had carried nothing, the least over them:
  // 0 when a party communicates on another stream or a call of its just
  // ended; infinite when none has communicated yet this step.
  double link_idle = 0;
  // What the parties' links carried over from their last calls, in a
  // timer's own unit (LinkCreditAfter: a shaper's credit left unspent, as
  // seconds of refill), the least over them; 0 while a party communicates.
  double link_credit = 0;
  // The fields below come from the simulator's core pools
  // (SharedCoreModel), and keep these values where there are none.
  // Where every party's core computes as the call starts, how long that
  // compute goes on at its present rates (the longest op on each core, the
  // most over the parties); -1 when a party's core idles.
  double cores_busy_for = -1;
  // Whether another rank's communication runs in a party's core pool as
  // the call starts, and how long the longest of those goes on at its
  // present rate (infinite: a caller that does not say is taken to mean
  // all along).
  bool beside_other_calls = false;
  double other_calls_for = std::numeric_limits<double>::infinity();
};

// Prices instructions for the simulator. Implemented by the cost model
// (runtime/cost_model_timer.h); tests use simple timers with named
// constants.
class InstructionTimer {
 public:
  virtual ~InstructionTimer() = default;
  // Seconds `ins` of `rank` runs once it starts (a collective or a
  // transfer: once every party has arrived), alone on its device.
  virtual double Seconds(const RankGraph& rank, const Instruction& ins) const = 0;
  // The same for a collective or transfer as it starts: a timer may price
  // the wake-up of parties that slept, or a link's shaper whose bucket
  // refilled while it idled. By default neither changes anything.
  virtual double CommSeconds(const RankGraph& rank, const Instruction& ins,
                             const CallStart& call) const {
    return Seconds(rank, ins);
  }
  // What `ins`, starting as `call` says, leaves its link to carry over to
  // the link's next call (CallStart::link_credit) once it ends and the
  // link is quiet: a shaper's credit, say. By default nothing.
  virtual double LinkCreditAfter(const RankGraph& rank, const Instruction& ins,
                                 const CallStart& call) const {
    return 0;
  }
  // A send that returns once its recv is posted and its bytes are in the
  // transport's buffers (Gloo over TCP: the receiver says it is ready, the
  // sender writes into its socket): the seconds its stream takes from the
  // rendezvous, while the recv takes the transfer. < 0: the send takes the
  // transfer too, its buffer held until the bytes arrive (NCCL's).
  virtual double SendHandOverSeconds(const RankGraph& rank, const Instruction& send) const {
    return -1;
  }
  // Whether the bytes of a send that returned once handed over
  // (SendHandOverSeconds) still queue on its rank's link until its recv
  // ends, so that the link's next calls wait behind them and its calls in
  // flight take that much longer: a shaped link's (tc tbf's) queue. By
  // default a link carries each call as if alone.
  virtual bool LinkQueuesHandedOverBytes(const RankGraph& rank, const Instruction& send) const {
    return false;
  }
  // The model of shared cores that comes with this timer's cluster, or
  // null (a GPU cluster, a test's timer): what the simulator uses unless
  // it is given one (SimulationOptions::shared_cores).
  virtual const SharedCoreModel* shared_cores() const { return nullptr; }
};

// Every instruction takes no time: the deadlock proof.
class ZeroTimer : public InstructionTimer {
 public:
  double Seconds(const RankGraph&, const Instruction&) const override { return 0; }
};

}  // namespace loom

#endif  // LOOM_SCHEDULER_INSTRUCTION_TIMER_H_
