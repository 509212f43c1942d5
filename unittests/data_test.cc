// Real data (issue 10): token files as nanoGPT writes them and texts read
// as bytes, drawn the same way under every layout; and text sampled from
// what a model learned.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "models/token_file_dataset.h"
#include "runtime/parallel_trainer.h"
#include "runtime/serial_trainer.h"
#include "runtime/text_sampler.h"
#include "unittests/loom_cli.h"

namespace loom {
namespace {

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  const std::string path =
      (std::filesystem::temp_directory_path() / StrCat("loom-data-", getpid(), "-", name)).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// Little-endian ids, as numpy's tofile writes them on x86.
std::string Ids(const std::vector<uint32_t>& ids, int width) {
  std::string out;
  for (uint32_t id : ids) {
    for (int b = 0; b < width; ++b) out += static_cast<char>((id >> (8 * b)) & 0xff);
  }
  return out;
}

TEST(TokenFileDataset, WindowsAndTheirNextTokens) {
  std::vector<uint32_t> ids;
  for (uint32_t i = 0; i < 1000; ++i) ids.push_back(i % 997 + 40000);
  for (auto [width, w] : {std::pair{TokenFileDataset::Width::kUint16, 2},
                          std::pair{TokenFileDataset::Width::kUint32, 4}}) {
    const std::string path = WriteTemp(StrCat("ids", w), Ids(ids, w));
    auto d = TokenFileDataset::Open(path, width, 16, 50304, 3);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ((*d)->num_tokens(), 1000);
    std::vector<int64_t> tokens, labels, again, unused;
    (*d)->Batch(5, 4, &tokens, &labels);
    for (int r = 0; r < 4; ++r) {
      // Each row is a contiguous window of the file; labels are shifted by one.
      const int64_t start = tokens[r * 16] - 40000;
      for (int i = 0; i < 16; ++i) {
        EXPECT_EQ(tokens[r * 16 + i], ids[start + i]) << "row " << r;
        EXPECT_EQ(labels[r * 16 + i], ids[start + i + 1]) << "row " << r;
      }
    }
    (*d)->Batch(5, 4, &again, &unused);
    EXPECT_EQ(tokens, again);  // a function of (seed, step, row)
    (*d)->Batch(6, 4, &again, &unused);
    EXPECT_NE(tokens, again);
    std::remove(path.c_str());
  }
}

TEST(TokenFileDataset, BadFilesAreNamed) {
  const std::string odd = WriteTemp("odd", "abc");
  auto error = [](StatusOr<std::unique_ptr<TokenFileDataset>> d) {
    return d.ok() ? std::string("OK") : d.status().message();
  };
  EXPECT_NE(error(TokenFileDataset::Open(odd, TokenFileDataset::Width::kUint16, 2, 256, 1))
                .find(odd + ": 3 bytes is not a whole number of 2-byte token ids"),
            std::string::npos);
  EXPECT_NE(error(TokenFileDataset::Open(odd, TokenFileDataset::Width::kByte, 3, 256, 1))
                .find(odd + ": 3 tokens, but a row of seq_len 3 needs 4"),
            std::string::npos);
  const std::string big = WriteTemp("big", Ids({1, 2, 300, 4, 5}, 2));
  EXPECT_NE(error(TokenFileDataset::Open(big, TokenFileDataset::Width::kUint16, 2, 256, 1))
                .find(big + ": token 2 (byte offset 4) is 300, outside the model's vocabulary "
                            "of 256"),
            std::string::npos);
  EXPECT_NE(error(TokenFileDataset::Open("/nonexistent", TokenFileDataset::Width::kByte, 2, 256, 1))
                .find("/nonexistent: cannot open"),
            std::string::npos);
  std::remove(odd.c_str());
  std::remove(big.c_str());
}

// A text trained on under dp2 x mp2 x pp2 gives serial training's losses
// and parameters: the rows a replica and micro-batch take are serial's.
TEST(TokenFileDataset, EveryLayoutTrainsOnSerialsRows) {
  GptConfig c = GptPreset("gpt-tiny").value();
  c.vocab_size = 256;
  auto text = TokenFileDataset::Open("/usr/share/common-licenses/GPL-3",
                                     TokenFileDataset::Width::kByte, c.seq_len, 256, c.seed);
  if (!text.ok()) GTEST_SKIP() << "SKIPPED: no GPL-3 text here: " << text.status();
  std::shared_ptr<const Dataset> data = std::move(*text);
  OptimizerConfig sgd;
  sgd.type = "sgd";
  sgd.learning_rate = 0.5f;
  auto serial = SerialTrainer::Create(c, sgd, data).value();
  ParallelTrainer::Options options;
  options.data = data;
  auto parallel =
      ParallelTrainer::Create(c, sgd, MakeStrategy(2, 2, 2, 2, "1F1B"), options).value();
  for (int s = 0; s < 3; ++s) {
    const float a = serial->Step(s).value(), b = parallel->Step(s).value();
    EXPECT_NEAR(a, b, 2e-5) << "step " << s;
  }
  const TrainingState want = serial->State().value(), got = parallel->State().value();
  ASSERT_EQ(want.parameters.size(), got.parameters.size());
  for (const auto& [name, t] : want.parameters) {
    const std::vector<float> p = t.ToFloatVector(), q = got.parameters.at(name).ToFloatVector();
    double worst = 0;
    for (size_t i = 0; i < p.size(); ++i) worst = std::max(worst, double(std::fabs(p[i] - q[i])));
    EXPECT_LT(worst, 2e-5) << name;
  }
}

// A model trained on a repeating text writes it back: the sampler reads
// the trained parameters and continues a prompt greedily.
TEST(TextSampler, ContinuesWhatTheModelLearned) {
  std::string pattern;
  for (int i = 0; i < 400; ++i) pattern += "loom weaves ";
  const std::string path = WriteTemp("pattern", pattern);
  GptConfig c = GptPreset("gpt-tiny").value();
  c.vocab_size = 256;
  std::shared_ptr<const Dataset> data =
      TokenFileDataset::Open(path, TokenFileDataset::Width::kByte, c.seq_len, 256, 1).value();
  OptimizerConfig adamw;
  adamw.learning_rate = 3e-3f;
  auto trainer = SerialTrainer::Create(c, adamw, data).value();
  auto sampler = TextSampler::Create(c).value();
  const std::string prompt = "loom we";
  const std::vector<int64_t> ids(prompt.begin(), prompt.end());
  ASSERT_TRUE(sampler->SetParameters(trainer->State().value().parameters).ok());
  const std::string before = PrintableBytes(sampler->Continue(ids, 20, 0, 1).value());
  // (150 steps learn the bigrams only: "es lom wes lom weeee".)
  for (int s = 0; s < 400; ++s) ASSERT_TRUE(trainer->Step(s).ok());
  ASSERT_TRUE(sampler->SetParameters(trainer->State().value().parameters).ok());
  const std::string after = PrintableBytes(sampler->Continue(ids, 20, 0, 1).value());
  EXPECT_EQ(after, "aves loom weaves loo") << "before training: " << before;
  EXPECT_NE(before, after);
  // Sampling with a temperature is repeatable by seed.
  EXPECT_EQ(sampler->Continue(ids, 30, 1.0f, 7).value(), sampler->Continue(ids, 30, 1.0f, 7).value());
  std::remove(path.c_str());
}

TEST(DataCli, TextAndTokenFlags) {
  const std::string ids = WriteTemp("cli", Ids({1, 2, 3, 200, 5, 6, 7, 8}, 2));
  CliResult r = Loom(StrCat("train --steps 1 --seq_len 4 --data ", ids));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(Lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("--data: " + ids + ": token 3 (byte offset 6) is 200, outside the "
                       "model's vocabulary of 128 (raise --vocab_size"),
            std::string::npos)
      << r.out;
  r = Loom(StrCat("train --steps 1 --seq_len 4 --vocab_size 256 --data ", ids));
  EXPECT_EQ(r.code, 0) << r.out;
  r = Loom(StrCat("train --steps 1 --data ", ids, " --text ", ids));
  EXPECT_NE(r.out.find("--data and --text name two datasets"), std::string::npos) << r.out;
  r = Loom(StrCat("train --steps 1 --data ", ids, " --data_dtype int8"));
  EXPECT_NE(r.out.find("--data_dtype must be uint16 or uint32, got 'int8'"), std::string::npos)
      << r.out;
  std::remove(ids.c_str());
}

}  // namespace
}  // namespace loom
