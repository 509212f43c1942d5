// Pipeline transfers run off calc: sends on p2p_send, receives on
// p2p_recv, and a receive waits for nothing but the receive before it on
// its stream. It is posted as soon as that one completes, however far calc
// is behind, so that a forward's input has arrived (or is arriving) when
// calc reaches it.
#include <gtest/gtest.h>

#include "models/gpt.h"
#include "passes/planner.h"
#include "scheduler/execution_graph.h"
#include "scheduler/schedule.h"
#include "unittests/test_plan_options.h"

namespace loom {
namespace {

TEST(PipelineTransfers, ReceivesArePostedIndependentlyOfCalc) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.num_layers = 4;
  const TrainingProgram tp = BuildGptTrainingProgram(c).value();
  for (const char* schedule : {"1F1B", "1F1B-overlap"}) {
    for (int pp : {2, 4}) {
      SCOPED_TRACE(StrCat(schedule, " pp=", pp));
      auto plan = PlanRanks(tp.main, tp.startup, MakeStrategy(1, 2, pp, 8, schedule), {},
                            LocalPlanOptions());
      ASSERT_TRUE(plan.ok()) << plan.status();
      auto graph = LowerPlan(*plan);
      ASSERT_TRUE(graph.ok()) << graph.status();
      int receives = 0;
      for (const RankGraph& g : graph->ranks) {
        const auto& ins = g.instructions();
        for (const Instruction& i : ins) {
          const std::string& stream = g.streams()[i.stream].name;
          if (i.kind == InstructionKind::kSend) {
            EXPECT_EQ(stream, stream::kP2pSend);
          }
          if (i.kind != InstructionKind::kRecv) continue;
          EXPECT_EQ(stream, stream::kP2pRecv) << InstructionLocation(g, i);
          for (int d : i.deps) {
            EXPECT_EQ(ins[d].stream, i.stream)
                << InstructionLocation(g, i) << " waits for " << InstructionLocation(g, ins[d]);
          }
          ++receives;
        }
      }
      // Every stage but the first receives each forward's input; every
      // stage but the last each backward's.
      EXPECT_EQ(receives, 2 * (pp - 1) * 8 * 2);  // x2: both mp ranks
    }
  }
}

}  // namespace
}  // namespace loom
