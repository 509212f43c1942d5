#include "runtime/text_sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "framework/counter_rng.h"

namespace loom {
namespace {

constexpr char kLogitsVar[] = "lm_head.logits";

}  // namespace

StatusOr<std::unique_ptr<TextSampler>> TextSampler::Create(const GptConfig& config) {
  std::unique_ptr<TextSampler> s(new TextSampler);
  s->config_ = config;
  s->config_.batch_size = 1;
  s->config_.dropout = 0;
  LOOM_RETURN_IF_ERROR(BuildGptForward(s->config_, s->main_, s->startup_));
  LOOM_ASSIGN_OR_RETURN(auto startup, SerialExecutor::Create(s->startup_, &s->scope_));
  LOOM_RETURN_IF_ERROR(startup->Run().WithContext("sampler startup"));
  SerialExecutorOptions options;
  options.fetch = {kLogitsVar};
  LOOM_ASSIGN_OR_RETURN(s->forward_, SerialExecutor::Create(s->main_, &s->scope_, options));
  return s;
}

Status TextSampler::SetParameters(const std::map<std::string, Tensor>& parameters) {
  for (const auto& [name, var] : startup_.global_block().vars()) {
    if (!var.is_parameter()) continue;
    auto it = parameters.find(name);
    Tensor* t = scope_.FindLocal(name);
    if (it == parameters.end() || t == nullptr) return InvalidArgument("no parameter ", name);
    if (it->second.meta() != t->meta()) {
      return InvalidArgument(name, " is ", MetaToString(it->second.meta()), ", not ",
                             MetaToString(t->meta()));
    }
    std::memcpy(t->raw_data(), it->second.raw_data(), t->bytes());
  }
  return Status::OK();
}

StatusOr<std::vector<int64_t>> TextSampler::Continue(const std::vector<int64_t>& prompt,
                                                     int count, float temperature,
                                                     uint64_t seed) {
  const int64_t window = config_.seq_len;
  const int64_t vocab = config_.vocab_size;
  std::vector<int64_t> text = prompt;
  if (text.empty()) text.push_back(0);
  for (int64_t t : text) {
    if (t < 0 || t >= vocab) return InvalidArgument("prompt token ", t, " is outside 0..", vocab - 1);
  }
  const TensorMeta meta{proto::INT64, {1, window}};
  for (int n = 0; n < count; ++n) {
    // The last `window` tokens, zero-padded at the end: causal attention
    // keeps the padding from reaching the position read.
    const int64_t first = std::max<int64_t>(0, static_cast<int64_t>(text.size()) - window);
    const int64_t used = static_cast<int64_t>(text.size()) - first;
    for (const char* name : {kTokensVar, kLabelsVar}) {
      Tensor* t = scope_.Var(name);
      t->Resize(meta);
      std::fill(t->data<int64_t>(), t->data<int64_t>() + window, 0);
    }
    std::copy(text.begin() + first, text.end(), scope_.Var(kTokensVar)->data<int64_t>());
    LOOM_RETURN_IF_ERROR(forward_->Run());
    const float* logits = scope_.Find(kLogitsVar)->data<float>() + (used - 1) * vocab;
    int64_t next = std::max_element(logits, logits + vocab) - logits;
    if (temperature > 0) {
      // Inverse-CDF sampling with one counter-based uniform draw.
      std::vector<double> p(vocab);
      double total = 0;
      for (int64_t v = 0; v < vocab; ++v) {
        p[v] = std::exp((logits[v] - logits[next]) / temperature);
        total += p[v];
      }
      double u = ToUnit(SplitMix64(seed ^ SplitMix64(text.size()))) * total;
      for (next = 0; next + 1 < vocab && u >= p[next]; ++next) u -= p[next];
    }
    text.push_back(next);
  }
  return std::vector<int64_t>(text.begin() + prompt.size(), text.end());
}

std::string PrintableBytes(const std::vector<int64_t>& tokens) {
  std::string out;
  for (int64_t t : tokens) {
    out += (t == '\n' || (t >= 32 && t < 127)) ? static_cast<char>(t) : '.';
  }
  return out;
}

}  // namespace loom
