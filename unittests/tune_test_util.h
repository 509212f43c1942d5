// The models and spaces loom tune's bound tests (tune_bounds_test.cc,
// tune_memory_bound_test.cc) compare with the simulator.
#ifndef LOOM_UNITTESTS_TUNE_TEST_UTIL_H_
#define LOOM_UNITTESTS_TUNE_TEST_UTIL_H_

#include "cost_model/cost_context.h"
#include "framework/optimizer.h"
#include "models/gpt.h"
#include "runtime/tune_space.h"

namespace loom {

// gpt-small at `layers`, `batch`, `seq` and `vocab`.
inline GptConfig GptSmallAt(int layers, int batch, int seq, int vocab) {
  GptConfig c = GptPreset("gpt-small").value();
  c.num_layers = layers;
  c.batch_size = batch;
  c.seq_len = seq;
  c.vocab_size = vocab;
  return c;
}

// gpt-small made `hidden` wide with `heads` heads (the MLP four times as
// wide), over a vocabulary of 8,192: layers wide for their sequences.
inline GptConfig WideGptSmall(int layers, int batch, int seq, int hidden, int heads) {
  GptConfig c = GptSmallAt(layers, batch, seq, 8192);
  c.hidden = hidden;
  c.num_heads = heads;
  c.ffn_hidden = 4 * hidden;
  return c;
}

// gpt-small over sequences of 1,024, where activations weigh most.
inline GptConfig LongSequences(int layers, int batch) {
  return GptSmallAt(layers, batch, 1024, 8192);
}

inline proto::Strategy Bf16O2() {
  proto::Strategy s;
  s.mutable_amp()->set_level("O2");
  return s;
}

// The 1F1B candidates without op-split of `c` on `devices`, in bf16 O2:
// the space the bound tests compare with the simulator.
inline StatusOr<TuneSpaceResult> Bf16OneF1BCandidates(const GptConfig& c, const CostContext& costs,
                                                      int devices) {
  TuneSpace space;
  space.devices = devices;
  space.op_split = false;
  space.schedules = {"1F1B"};
  return EnumerateTuneSpace(c, OptimizerConfig(), Bf16O2(), costs, space, 0);
}

}  // namespace loom

#endif  // LOOM_UNITTESTS_TUNE_TEST_UTIL_H_
