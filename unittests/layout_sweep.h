// The layouts the pass sweeps train on (recompute_test, sequence_parallel_test):
// a tiny model with dropout, and each layout as a strategy; gpt-tiny's
// program for the planner's tests.
#ifndef LOOM_UNITTESTS_LAYOUT_SWEEP_H_
#define LOOM_UNITTESTS_LAYOUT_SWEEP_H_

#include <string>

#include "framework/status.h"
#include "models/gpt.h"
#include "passes/strategy.h"

namespace loom {

// gpt-tiny's training program at `layers` layers.
inline TrainingProgram TinyProgram(int layers) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = layers;
  return BuildGptTrainingProgram(c).value();
}

// gpt-tiny with `layers` layers, `batch` sequences and dropout 0.1, so that
// a pass that moves or splits a dropout must draw the unsplit masks.
inline GptConfig TinyWithDropout(int layers, int batch) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = layers;
  c.batch_size = batch;
  c.dropout = 0.1f;
  return c;
}

struct Layout {
  int dp, mp, pp;
  const char* schedule;
  int sharding = 0;
  const char* amp = "O0";
  bool op_split = false;  // forced to 2 parts, so that the split happens

  proto::Strategy ToStrategy(int micro_batches) const {
    proto::Strategy s = MakeStrategy(dp, mp, pp, micro_batches, schedule);
    s.mutable_sharding()->set_stage(sharding);
    s.mutable_amp()->set_level(amp);
    s.mutable_passes()->set_op_split(op_split);
    s.mutable_passes()->set_op_split_parts(op_split ? 2 : 0);
    return s;
  }
  std::string Name() const {
    return StrCat(schedule, " dp=", dp, " mp=", mp, " pp=", pp, " sharding ", sharding, " ",
                  amp, op_split ? " op-split" : "");
  }
};

}  // namespace loom

#endif  // LOOM_UNITTESTS_LAYOUT_SWEEP_H_
