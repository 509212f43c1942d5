// Strategy files and the checks that run before any pass.
#include <dirent.h>

#include <gtest/gtest.h>

#include "passes/strategy.h"

namespace loom {
namespace {

TEST(Strategy, EveryConfigFileLoadsAndValidates) {
  int files = 0;
  DIR* d = opendir("configs");
  ASSERT_NE(d, nullptr);
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 6 || name.substr(name.size() - 6) != ".pbtxt") continue;
    ++files;
    auto s = LoadStrategy("configs/" + name);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_TRUE(ValidateStrategy(*s).ok()) << name << ": " << ValidateStrategy(*s);
  }
  closedir(d);
  EXPECT_GE(files, 4);
}

TEST(Strategy, ParseErrorsNameLineAndField) {
  EXPECT_EQ(ParseStrategy("pipeline { degre: 2 }").status().message(),
            "strategy does not parse: line 1: Message type \"loom.proto.PipelineStrategy\" "
            "has no field named \"degre\".");
  EXPECT_EQ(LoadStrategy("configs/none.pbtxt").status().message(),
            "configs/none.pbtxt: cannot open");
}

TEST(Strategy, ValidationNamesTheField) {
  auto check = [](const std::string& text) {
    return ValidateStrategy(ParseStrategy(text).value()).message();
  };
  EXPECT_EQ(check("mp { degree: 0 }"), "mp.degree must be at least 1, got 0");
  EXPECT_EQ(check("pipeline { schedule_mode: \"GPipe\" }"),
            "unknown schedule 'GPipe' (known: FThenB, 1F1B, Eager1F1B, VPP, ZBH1, 1F1B-overlap, ZBV)");
  EXPECT_EQ(check("pipeline { vpp_degree: 2 }"),
            "pipeline.vpp_degree is 2 but pipeline.schedule_mode 1F1B has no "
            "chunks (use VPP or ZBV)");
  EXPECT_EQ(check("pipeline { enable: true degree: 4 micro_batches: 8 schedule_mode: "
                  "\"VPP\" vpp_degree: 2 } "),
            "");
  EXPECT_EQ(check("pipeline { enable: true degree: 4 micro_batches: 6 schedule_mode: "
                  "\"VPP\" vpp_degree: 2 }"),
            "pipeline.micro_batches (6) must be a multiple of pipeline.degree (4) for VPP");
  // ZBV: a V of exactly two chunks, across stages, with the first stage's
  // warm-up of 2p - 1 forwards.
  EXPECT_EQ(check("pipeline { enable: true degree: 4 micro_batches: 7 schedule_mode: "
                  "\"ZBV\" vpp_degree: 2 }"),
            "");
  EXPECT_EQ(check("pipeline { enable: true degree: 4 micro_batches: 8 schedule_mode: "
                  "\"ZBV\" }"),
            "pipeline.vpp_degree (1) must be 2 for ZBV: its V places two chunks on each stage");
  EXPECT_EQ(check("pipeline { enable: true degree: 4 micro_batches: 6 schedule_mode: "
                  "\"ZBV\" vpp_degree: 2 }"),
            "pipeline.micro_batches (6) must be at least 2 x pipeline.degree - 1 (7) for ZBV");
  EXPECT_EQ(check("pipeline { micro_batches: 4 schedule_mode: \"ZBV\" vpp_degree: 2 }"),
            "pipeline.vpp_degree is 2 but pipeline.degree is 1: ZBV places chunks across "
            "stages (use ZBH1)");
  EXPECT_EQ(check("sharding { stage: 3 }"),
            "sharding.stage 3 shards over the data-parallel group, but dp.degree is 1");
  EXPECT_EQ(check("dp { degree: 2 } sharding { stage: 3 }"), "");
  EXPECT_EQ(check("dp { degree: 2 } sharding { stage: 4 }"),
            "sharding.stage must be 0, 1, 2 or 3, got 4");
  EXPECT_EQ(check("dp { degree: 4 } sharding { stage: 1 degree: 2 }"), "");
  EXPECT_EQ(check("dp { degree: 6 } sharding { stage: 1 degree: 4 }"),
            "sharding.degree 4 must divide dp.degree (6) and be at least 2");
  EXPECT_EQ(check("dp { degree: 4 } sharding { stage: 1 degree: 1 }"),
            "sharding.degree 1 must divide dp.degree (4) and be at least 2");
  EXPECT_EQ(check("sharding { degree: 2 }"), "sharding.degree is 2 but sharding.stage is 0");
  EXPECT_EQ(check("dp { degree: 2 } sharding { stage: 1 fetch_mode: 'scatter' }"),
            "sharding.fetch_mode must be all_gather, all_reduce or auto, got 'scatter'");
}

}  // namespace
}  // namespace loom
