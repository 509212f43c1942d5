#include "models/gpt.h"

#include <algorithm>
#include <cmath>

#include "framework/op_builder.h"
#include "framework/shape_inference.h"

namespace loom {
namespace {

// The vocabulary of the GPT-2/3 tokenizer (50257), padded to a multiple of
// 128 as Megatron does, so that it splits evenly across tensor-parallel ranks.
constexpr int64_t kGptVocab = 50304;
// The vocabulary Megatron-LM's published runs use (Narayanan et al. 2021,
// Korthikanti et al. 2022).
constexpr int64_t kMegatronVocab = 51200;

GptConfig Preset(const char* name, int64_t vocab, int64_t seq, int64_t hidden,
                 int64_t layers, int64_t heads, int64_t batch) {
  GptConfig c;
  c.name = name;
  c.vocab_size = vocab;
  c.seq_len = seq;
  c.hidden = hidden;
  c.num_layers = layers;
  c.num_heads = heads;
  c.ffn_hidden = 4 * hidden;
  c.batch_size = batch;
  return c;
}

const std::vector<GptConfig>& Presets() {
  static const std::vector<GptConfig>* const presets = new std::vector<GptConfig>{
      // Small enough that a training step takes milliseconds on one core.
      Preset("gpt-tiny", 128, 32, 64, 2, 4, 8),
      // GPT-3 Small (125M) at a 1024-token context, 0.5M tokens per batch.
      Preset("gpt-small", kGptVocab, 1024, 768, 12, 12, 512),
      // The GPT-3 paper's sizes and global batches (Brown et al. 2020,
      // table 2.1: 1M, 2M, 2M and 3.2M tokens). For 13B the paper's d_model
      // of 5140 is not 40 heads of 128; 5120 is, as in Megatron's configs.
      Preset("gpt3-1.3b", kGptVocab, 2048, 2048, 24, 16, 512),
      Preset("gpt3-6.7b", kGptVocab, 2048, 4096, 32, 32, 1024),
      Preset("gpt3-13b", kGptVocab, 2048, 5120, 40, 40, 1024),
      Preset("gpt3-175b", kGptVocab, 2048, 12288, 96, 96, 1536),
      // Korthikanti et al. 2022 (sequence parallelism and selective
      // recomputation), Table 3: heads, hidden size, layers and the global
      // batch of their runs, at Megatron's vocabulary of 51200 and 2048
      // tokens. (Their 175B is gpt3-175b at their batch of 64.)
      Preset("gpt-22b", kMegatronVocab, 2048, 6144, 48, 64, 4),
      Preset("gpt-530b", kMegatronVocab, 2048, 20480, 105, 128, 280),
      Preset("gpt-1t", kMegatronVocab, 2048, 25600, 128, 160, 512),
  };
  return *presets;
}

// Appends ops to the main program and initializers to the startup program.
// Errors are sticky: after the first, every call is a no-op, and Finish()
// returns it. This keeps the model code a straight list of layers.
class GptBuilder {
 public:
  GptBuilder(const GptConfig& c, Program& main, Program& startup)
      : c_(c), main_(main.global_block()), startup_(startup.global_block()) {}

  Status Build();

 private:
  enum class Init { kNormal, kScaledNormal, kZeros, kOnes };

  // `mp_axis`: the dim tensor parallelism splits (-1: replicated).
  std::string Param(const std::string& name, const Shape& shape, Init init,
                    int mp_axis = -1);
  std::string Data(const std::string& name, const Shape& shape);
  // Appends `desc` and returns the first var of its first output slot.
  std::string Append(proto::OpDesc desc);
  // Megatron's split of a linear layer across tensor-parallel ranks.
  enum class Split { kColumn, kRow };
  std::string Linear(const std::string& prefix, const std::string& x,
                     int64_t in, int64_t out, Init init, Split split);
  std::string LayerNorm(const std::string& prefix, const std::string& x);
  std::string Dropout(const std::string& name, const std::string& x);
  std::string Attention(const std::string& prefix, const std::string& x);
  std::string Mlp(const std::string& prefix, const std::string& x);

  const GptConfig& c_;
  Block& main_;
  Block& startup_;
  Status status_;
  int64_t next_seed_ = 0;
  int32_t layer_ = -1;  // the block being built, stamped on its ops
};

std::string GptBuilder::Param(const std::string& name, const Shape& shape,
                              Init init, int mp_axis) {
  if (!status_.ok()) return name;
  for (Block* b : {&main_, &startup_}) {
    proto::VarDesc* v = b->AddVar(name);
    SetMeta(TensorMeta{proto::FP32, shape}, v);
    v->set_persistable(true);
    v->set_is_parameter(true);
    v->set_mp_axis(mp_axis);
  }
  proto::OpDesc desc;
  switch (init) {
    case Init::kNormal:
    case Init::kScaledNormal: {
      // GPT-2 scales the projections that write into the residual stream by
      // 1/sqrt(2 * layers) so the stream's variance does not grow with depth.
      float std = c_.init_std;
      if (init == Init::kScaledNormal) std /= std::sqrt(2.0f * c_.num_layers);
      desc = OpDescBuilder("gaussian_random")
                 .Output("Out", name)
                 .Attr("shape", shape)
                 .Attr("std", std)
                 .Attr("seed", c_.seed * 1000003 + next_seed_++);
      break;
    }
    case Init::kZeros:
    case Init::kOnes:
      desc = OpDescBuilder("fill_constant")
                 .Output("Out", name)
                 .Attr("shape", shape)
                 .Attr("value", init == Init::kOnes ? 1.0f : 0.0f);
      break;
  }
  status_ = AppendOpInferShapes(startup_, desc).status();
  return name;
}

std::string GptBuilder::Data(const std::string& name, const Shape& shape) {
  proto::VarDesc* v = main_.AddVar(name);
  SetMeta(TensorMeta{proto::INT64, shape}, v);
  v->set_is_data(true);
  v->set_stop_gradient(true);
  return name;
}

std::string GptBuilder::Append(proto::OpDesc desc) {
  if (!status_.ok()) return "";
  desc.set_layer(layer_);
  std::string out = desc.outputs(0).vars(0);
  status_ = AppendOpInferShapes(main_, std::move(desc)).status();
  return out;
}

std::string GptBuilder::Linear(const std::string& prefix, const std::string& x,
                               int64_t in, int64_t out, Init init, Split split) {
  // Column-parallel: each rank owns some output columns, and their bias.
  // Row-parallel: each rank owns some input rows; the bias is added after
  // the partial products are summed, so it stays whole.
  const bool column = split == Split::kColumn;
  std::string w = Param(prefix + ".weight", {in, out}, init, column ? 1 : 0);
  std::string b = Param(prefix + ".bias", {out}, Init::kZeros, column ? 0 : -1);
  std::string y = Append(OpDescBuilder("matmul")
                             .Input("X", x)
                             .Input("Y", w)
                             .Output("Out", prefix + ".matmul"));
  return Append(OpDescBuilder("elementwise_add")
                    .Input("X", y)
                    .Input("Y", b)
                    .Output("Out", prefix + ".out"));
}

std::string GptBuilder::LayerNorm(const std::string& prefix,
                                  const std::string& x) {
  std::string scale = Param(prefix + ".scale", {c_.hidden}, Init::kOnes);
  std::string bias = Param(prefix + ".bias", {c_.hidden}, Init::kZeros);
  return Append(OpDescBuilder("layer_norm")
                    .Input("X", x)
                    .Input("Scale", scale)
                    .Input("Bias", bias)
                    .Output("Y", prefix + ".out")
                    .Output("Mean", prefix + ".mean")
                    .Output("Variance", prefix + ".variance")
                    .Attr("epsilon", 1e-5f));
}

std::string GptBuilder::Dropout(const std::string& name, const std::string& x) {
  if (c_.dropout <= 0.0f) return x;
  return Append(OpDescBuilder("dropout")
                    .Input("X", x)
                    .Output("Out", name)
                    .Output("Mask", name + ".mask")
                    .Attr("dropout_prob", c_.dropout)
                    .Attr("seed", c_.seed * 7919 + next_seed_++));
}

std::string GptBuilder::Attention(const std::string& p, const std::string& x) {
  const int64_t h = c_.hidden, hd = c_.head_dim();
  // Fused QKV laid out head by head ([H, heads * 3 * hd]), so that a
  // column split across tensor-parallel ranks gives each rank whole heads.
  std::string qkv = Linear(p + ".qkv", x, h, 3 * h, Init::kNormal, Split::kColumn);
  std::string heads = Append(OpDescBuilder("reshape")
                                 .Input("X", qkv)
                                 .Output("Out", p + ".qkv_heads")
                                 .Attr("shape", Shape{0, 0, -1, 3 * hd}));
  Append(OpDescBuilder("split")
             .Input("X", heads)
             .Output("Out", std::vector<std::string>{p + ".q", p + ".k", p + ".v"})
             .Attr("axis", int32_t{3})
             .Attr("num", int32_t{3}));
  auto to_bhsd = [&](const std::string& t) {  // [B,S,n,d] -> [B,n,S,d]
    return Append(OpDescBuilder("transpose")
                      .Input("X", t)
                      .Output("Out", t + "_t")
                      .Attr("perm", std::vector<int32_t>{0, 2, 1, 3}));
  };
  std::string q = to_bhsd(p + ".q"), k = to_bhsd(p + ".k"), v = to_bhsd(p + ".v");
  std::string scores = Append(OpDescBuilder("matmul")
                                  .Input("X", q)
                                  .Input("Y", k)
                                  .Output("Out", p + ".scores")
                                  .Attr("transpose_y", true)
                                  .Attr("alpha", 1.0f / std::sqrt(float(hd))));
  std::string probs = Append(OpDescBuilder("softmax")
                                 .Input("X", scores)
                                 .Output("Out", p + ".probs")
                                 .Attr("causal", true));
  probs = Dropout(p + ".probs_dropout", probs);
  std::string ctx = Append(OpDescBuilder("matmul")
                               .Input("X", probs)
                               .Input("Y", v)
                               .Output("Out", p + ".context"));
  std::string ctx_t = Append(OpDescBuilder("transpose")
                                 .Input("X", ctx)
                                 .Output("Out", p + ".context_t")
                                 .Attr("perm", std::vector<int32_t>{0, 2, 1, 3}));
  std::string merged = Append(OpDescBuilder("reshape")
                                  .Input("X", ctx_t)
                                  .Output("Out", p + ".context_merged")
                                  .Attr("shape", Shape{0, 0, -1}));
  std::string out =
      Linear(p + ".proj", merged, h, h, Init::kScaledNormal, Split::kRow);
  return Dropout(p + ".proj_dropout", out);
}

std::string GptBuilder::Mlp(const std::string& p, const std::string& x) {
  std::string up = Linear(p + ".up", x, c_.hidden, c_.ffn_hidden,
                         Init::kNormal, Split::kColumn);
  std::string act = Append(
      OpDescBuilder("gelu").Input("X", up).Output("Out", p + ".gelu"));
  std::string down = Linear(p + ".down", act, c_.ffn_hidden, c_.hidden,
                            Init::kScaledNormal, Split::kRow);
  return Dropout(p + ".down_dropout", down);
}

Status GptBuilder::Build() {
  const int64_t b = c_.batch_size, s = c_.seq_len, h = c_.hidden;
  std::string tokens = Data(kTokensVar, {b, s});
  std::string labels = Data(kLabelsVar, {b, s});
  // Vocabulary-parallel: each tensor-parallel rank owns a range of rows.
  std::string wte =
      Param("embed.tokens.weight", {c_.vocab_size, h}, Init::kNormal, 0);
  std::string wpe = Param("embed.positions.weight", {s, h}, Init::kNormal);
  std::string tok = Append(OpDescBuilder("lookup_table")
                               .Input("W", wte)
                               .Input("Ids", tokens)
                               .Output("Out", "embed.tokens.out"));
  // [B, S, H] + [S, H]: positions broadcast over the batch.
  std::string x = Append(OpDescBuilder("elementwise_add")
                             .Input("X", tok)
                             .Input("Y", wpe)
                             .Output("Out", "embed.out"));
  x = Dropout("embed.dropout", x);
  for (int64_t i = 0; i < c_.num_layers; ++i) {
    layer_ = static_cast<int32_t>(i);
    const std::string p = StrCat("layers.", i);
    std::string attn = Attention(p + ".attn", LayerNorm(p + ".ln1", x));
    x = Append(OpDescBuilder("elementwise_add")
                   .Input("X", x)
                   .Input("Y", attn)
                   .Output("Out", p + ".attn_residual"));
    std::string mlp = Mlp(p + ".mlp", LayerNorm(p + ".ln2", x));
    x = Append(OpDescBuilder("elementwise_add")
                   .Input("X", x)
                   .Input("Y", mlp)
                   .Output("Out", p + ".mlp_residual"));
  }
  layer_ = -1;
  x = LayerNorm("final_ln", x);
  std::string head = wte;
  bool transpose_head = true;
  if (!c_.tie_embeddings) {
    head = Param("lm_head.weight", {h, c_.vocab_size}, Init::kNormal, 1);
    transpose_head = false;
  }
  std::string logits = Append(OpDescBuilder("matmul")
                                  .Input("X", x)
                                  .Input("Y", head)
                                  .Output("Out", "lm_head.logits")
                                  .Attr("transpose_y", transpose_head));
  const std::string token_loss = "lm_head.token_loss";
  Append(OpDescBuilder("softmax_with_cross_entropy")
             .Input("Logits", logits)
             .Input("Label", labels)
             .Output("Softmax", "lm_head.softmax")
             .Output("Loss", token_loss));
  Append(OpDescBuilder("reduce_mean")
             .Input("X", token_loss)
             .Output("Out", kLossVar)
             .Attr("reduce_all", true));
  return status_;
}

}  // namespace

int64_t GptConfig::ParametersPerLayer() const {
  const int64_t h = hidden, f = ffn_hidden;
  return 2 * (2 * h)             // two layer norms
         + h * 3 * h + 3 * h     // qkv
         + h * h + h             // projection
         + h * f + f + f * h + h;  // mlp
}

int64_t GptConfig::NumParameters() const {
  const int64_t h = hidden;
  int64_t total = vocab_size * h + seq_len * h + num_layers * ParametersPerLayer() + 2 * h;
  if (!tie_embeddings) total += h * vocab_size;
  return total;
}

double GptConfig::TrainingFlopsPerStep() const {
  const double h = static_cast<double>(hidden), f = static_cast<double>(ffn_hidden);
  const double s = static_cast<double>(seq_len);
  // Per token, forward: QKV, projection and MLP GEMMs, QK^T and attention
  // times V (2 s h each), and the head. Backward is twice the forward.
  const double per_layer = 2 * (3 * h * h + h * h + 2 * h * f) + 4 * s * h;
  const double forward = num_layers * per_layer + 2 * h * static_cast<double>(vocab_size);
  return 3 * forward * static_cast<double>(batch_size) * s;
}

std::vector<std::string> GptPresetNames() {
  std::vector<std::string> names;
  for (const auto& p : Presets()) names.push_back(p.name);
  return names;
}

StatusOr<GptConfig> GptPreset(const std::string& name) {
  for (const auto& p : Presets()) {
    if (p.name == name) return p;
  }
  std::string known;
  for (const auto& n : GptPresetNames()) known += (known.empty() ? "" : ", ") + n;
  return NotFound("unknown preset '", name, "' (known: ", known, ")");
}

std::string ModelSizeFields(const GptConfig& c) {
  return StrCat("batch_size (", c.batch_size, "), seq_len (", c.seq_len, ") or num_layers (",
                c.num_layers, ")");
}

Status ValidateGptConfig(const GptConfig& c) {
  auto positive = [](const char* field, int64_t v) -> Status {
    if (v > 0) return Status::OK();
    return InvalidArgument("model.", field, " must be positive, got ", v);
  };
  LOOM_RETURN_IF_ERROR(positive("vocab_size", c.vocab_size));
  LOOM_RETURN_IF_ERROR(positive("seq_len", c.seq_len));
  LOOM_RETURN_IF_ERROR(positive("hidden", c.hidden));
  LOOM_RETURN_IF_ERROR(positive("num_layers", c.num_layers));
  LOOM_RETURN_IF_ERROR(positive("num_heads", c.num_heads));
  LOOM_RETURN_IF_ERROR(positive("ffn_hidden", c.ffn_hidden));
  LOOM_RETURN_IF_ERROR(positive("batch_size", c.batch_size));
  // The largest tensors, the logits and the attention scores, must count
  // their elements in an int64 (and every byte of them in one too) with
  // room to spare.
  const int64_t widest = std::max({c.vocab_size, c.ffn_hidden, 3 * c.hidden});
  const double rows = static_cast<double>(c.batch_size) * c.seq_len;
  if (rows * widest > kMaxTensorElements) {
    return InvalidArgument("model.batch_size x model.seq_len x the widest layer = ",
                           c.batch_size, " x ", c.seq_len, " x ", widest, " = ", rows * widest,
                           " elements in one tensor, beyond what Loom allocates (",
                           kMaxTensorElements, ")");
  }
  if (rows * c.seq_len * c.num_heads > kMaxTensorElements) {
    return InvalidArgument("the attention scores, model.batch_size x model.num_heads x "
                           "model.seq_len^2 = ", c.batch_size, " x ", c.num_heads, " x ",
                           c.seq_len, "^2 = ", rows * c.seq_len * c.num_heads,
                           " elements, beyond what Loom allocates (", kMaxTensorElements, ")");
  }
  if (c.hidden % c.num_heads != 0) {
    return InvalidArgument("model.num_heads (", c.num_heads,
                           ") must divide model.hidden (", c.hidden, ")");
  }
  if (c.dropout < 0.0f || c.dropout >= 1.0f) {
    return InvalidArgument("model.dropout must be in [0, 1), got ", c.dropout);
  }
  return Status::OK();
}

Status BuildGptForward(const GptConfig& config, Program& main,
                       Program& startup) {
  RegisterAllOps();
  LOOM_RETURN_IF_ERROR(ValidateGptConfig(config));
  GptBuilder builder(config, main, startup);
  return builder.Build().WithContext(StrCat("building ", config.name));
}

StatusOr<TrainingProgram> BuildGptTrainingProgram(
    const GptConfig& config, const OptimizerConfig& optimizer) {
  TrainingProgram tp;
  tp.config = config;
  LOOM_RETURN_IF_ERROR(BuildGptForward(config, tp.main, tp.startup));
  LOOM_ASSIGN_OR_RETURN(tp.param_grads, AppendBackward(tp.main, kLossVar));
  LOOM_RETURN_IF_ERROR(
      AppendOptimizer(tp.main, tp.startup, tp.param_grads, optimizer));
  return tp;
}

}  // namespace loom
