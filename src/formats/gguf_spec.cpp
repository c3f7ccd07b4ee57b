#include "formats/gguf_spec.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "formats/families.h"
#include "formats/weights.h"

namespace ptn {

namespace {

// A per-model integer that some files store per layer (an array): all layers must agree.
int64_t uniform_int(const GgufFile& g, const std::string& key) {
  const GgufValue& v = g.get(key);
  if (v.type != GgufType::Array) return g.get_i64(key);
  std::vector<int64_t> xs = g.get_int_array(key);
  if (xs.empty()) fail(ErrorKind::Corrupt, g.where_key(key), "empty array");
  for (int64_t x : xs)
    if (x != xs[0]) fail(ErrorKind::Unsupported, g.where_key(key), "differs between layers; ptn needs one value for all layers");
  return xs[0];
}

int64_t positive(const GgufFile& g, const std::string& key, int64_t v, int64_t max = int64_t{1} << 40) {
  if (v <= 0 || v > max) fail(ErrorKind::Corrupt, g.where_key(key), "value " + std::to_string(v) + " is out of range (1.." + std::to_string(max) + ")");
  return v;
}

// Fits llama3 rope scaling parameters to the precomputed per-frequency factors that llama.cpp's
// converter stores in rope_freqs.weight ([rope_dim/2] f32: 1 for high frequencies, `factor` for
// low ones, a smooth blend between). Llama 3.1/3.2 use low 1, high 4, original context 8192.
void llama3_from_rope_freqs(const GgufFile& g, ModelSpec& s) {
  Tensor t = g.tensor("rope_freqs.weight");
  if (t.dtype() != DType::F32 || t.ndim() != 1 || t.dim(0) != s.rope_dim / 2)
    fail(ErrorKind::Corrupt, g.path() + ": tensor 'rope_freqs.weight'", "expected f32[" + std::to_string(s.rope_dim / 2) + "], found " + t.describe());
  const float* f = t.data_as<float>();
  float factor = 1;
  for (int64_t k = 0; k < t.dim(0); ++k) factor = std::max(factor, f[k]);
  RopeScaling rs;
  rs.type = RopeScalingType::Llama3;
  rs.factor = factor;
  rs.low_freq_factor = 1;
  rs.high_freq_factor = 4;
  rs.original_max_position = 8192;
  const double pi = 3.14159265358979323846;
  const double low_wavelen = rs.original_max_position / rs.low_freq_factor;
  const double high_wavelen = rs.original_max_position / rs.high_freq_factor;
  for (int64_t k = 0; k < t.dim(0); ++k) {
    double freq = 1.0 / std::pow(static_cast<double>(s.rope_theta), 2.0 * k / s.rope_dim);
    double wavelen = 2 * pi / freq;
    double expect;
    if (wavelen < high_wavelen) expect = 1;
    else if (wavelen > low_wavelen) expect = factor;
    else {
      double smooth = (rs.original_max_position / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
      expect = 1 / ((1 - smooth) / factor + smooth);
    }
    if (std::fabs(expect - f[k]) > 1e-3 * expect) {
      // Other llama3 parameters (a short original context, Llama 4's equal low and high
      // factors): llama.cpp divides each pair's frequency by its factor, and so does ptn's
      // per-pair divisor scaling (the one longrope uses, with attention factor 1).
      RopeScaling fr;
      fr.type = RopeScalingType::LongRope;
      for (int64_t j = 0; j < t.dim(0); ++j) {
        if (!std::isfinite(f[j]) || !(f[j] > 0))
          fail(ErrorKind::Corrupt, g.path() + ": tensor 'rope_freqs.weight'", "element " + std::to_string(j) + " = " + std::to_string(f[j]) + " is not a positive factor");
        fr.freq_divisors.push_back(f[j]);
      }
      s.rope_scaling = fr;
      s.source_notes.push_back("rope_freqs.weight applied as per-pair frequency divisors (it is not llama3 scaling with low 1, high 4, original context 8192)");
      return;
    }
  }
  s.rope_scaling = rs;
  s.source_notes.push_back("rope_freqs.weight matched llama3 rope scaling with factor " + std::to_string(factor));
}

void read_dimensions(const GgufFile& g, const std::string& arch, bool mla, ModelSpec& s) {
  auto key = [&](const char* k) { return arch + "." + k; };
  s.hidden_size = positive(g, key("embedding_length"), g.get_i64(key("embedding_length")));
  s.n_layers = positive(g, key("block_count"), g.get_i64(key("block_count")), 4096);
  if (g.has(key("expert_count")) && g.get_i64(key("expert_count")) > 0) {
    s.n_experts = positive(g, key("expert_count"), g.get_i64(key("expert_count")), 1024);
    s.n_experts_used = positive(g, key("expert_used_count"), g.get_i64(key("expert_used_count")), s.n_experts);
  }
  if (s.n_experts > 0 && !g.has(key("feed_forward_length")))
    s.intermediate_size = positive(g, key("expert_feed_forward_length"), g.get_i64(key("expert_feed_forward_length")), int64_t{1} << 24);
  else
    s.intermediate_size = positive(g, key("feed_forward_length"), uniform_int(g, key("feed_forward_length")));
  if (s.n_experts > 0) {
    // llama.cpp's llama (Mixtral) and qwen3moe graphs: experts on every layer, softmax over all,
    // top-k renormalised; the experts' width is expert_feed_forward_length (Mixtral: the FFN's).
    s.expert_ffn_size = g.has(key("expert_feed_forward_length"))
                            ? positive(g, key("expert_feed_forward_length"), g.get_i64(key("expert_feed_forward_length")), int64_t{1} << 24)
                            : s.intermediate_size;
    s.norm_topk_prob = true;
  }
  s.n_heads = positive(g, key("attention.head_count"), uniform_int(g, key("attention.head_count")), 1 << 16);
  s.n_kv_heads = g.has(key("attention.head_count_kv")) ? positive(g, key("attention.head_count_kv"), uniform_int(g, key("attention.head_count_kv")), 1 << 16) : s.n_heads;
  if (s.n_heads % s.n_kv_heads != 0)
    fail(ErrorKind::Corrupt, g.where_key(key("attention.head_count_kv")), std::to_string(s.n_kv_heads) + " kv heads do not divide " + std::to_string(s.n_heads) + " heads");
  s.head_dim = g.has(key("attention.key_length")) ? positive(g, key("attention.key_length"), g.get_i64(key("attention.key_length")), 1 << 16) : s.hidden_size / s.n_heads;
  if (!mla && g.has(key("attention.value_length")) && g.get_i64(key("attention.value_length")) != s.head_dim)
    fail(ErrorKind::Unsupported, g.where_key(key("attention.value_length")), "value head size differs from the key head size");
  s.max_position_embeddings = g.has(key("context_length")) ? positive(g, key("context_length"), g.get_i64(key("context_length"))) : 0;
  s.norm_eps = g.opt_f32(key("attention.layer_norm_rms_epsilon")).value_or(1e-5f);
  s.rope_theta = g.opt_f32(key("rope.freq_base")).value_or(10000.0f);
  s.rope_dim = g.has(key("rope.dimension_count")) ? positive(g, key("rope.dimension_count"), g.get_i64(key("rope.dimension_count")), s.head_dim) : s.head_dim;
  if (s.rope_dim % 2 != 0) fail(ErrorKind::Corrupt, g.where_key(key("rope.dimension_count")), "odd rotary dimension " + std::to_string(s.rope_dim));

  // Vocabulary: the embedding's rows are authoritative.
  const GgufTensorInfo* emb = g.find_tensor("token_embd.weight");
  if (!emb) fail(ErrorKind::Corrupt, g.path() + ": tensor 'token_embd.weight'", "missing");
  if (emb->shape.size() != 2 || emb->shape[1] != s.hidden_size)
    fail(ErrorKind::Corrupt, g.path() + ": tensor 'token_embd.weight'", "shape " + shape_str(emb->shape) + " is not [vocab, " + std::to_string(s.hidden_size) + "]");
  s.vocab_size = emb->shape[0];
  s.tie_word_embeddings = g.find_tensor("output.weight") == nullptr;
}

void read_rope_scaling(const GgufFile& g, const FamilyInfo& fam, ModelSpec& s) {
  auto key = [&](const char* k) { return std::string(fam.gguf_arch) + "." + k; };
  if (auto type = g.opt_string(key("rope.scaling.type"))) {
    const float factor = g.opt_f32(key("rope.scaling.factor")).value_or(1.0f);
    if (*type == "linear") {
      s.rope_scaling.type = RopeScalingType::Linear;
      s.rope_scaling.factor = factor;
    } else if (*type == "yarn") {
      s.rope_scaling.type = RopeScalingType::Yarn;
      s.rope_scaling.factor = factor;
      s.rope_scaling.original_max_position = g.opt_u64(key("rope.scaling.original_context_length")).value_or(0);
      s.rope_scaling.beta_fast = g.opt_f32(key("rope.scaling.yarn_beta_fast")).value_or(32.0f);
      s.rope_scaling.beta_slow = g.opt_f32(key("rope.scaling.yarn_beta_slow")).value_or(1.0f);
      // llama.cpp's mscale for yarn: mscale(factor, 1) = 0.1 * ln(factor) + 1, or with
      // yarn_log_multiplier m (transformers' mscale_all_dim, mscale taken as 1)
      // mscale(factor, 1) / mscale(factor, m).
      auto mscale = [&](double m) { return factor > 1 ? 0.1 * m * std::log(factor) + 1.0 : 1.0; };
      const std::string lm = key("rope.scaling.yarn_log_multiplier");
      const float log_mul = g.opt_f32(lm).value_or(0.0f);
      if (!std::isfinite(log_mul) || log_mul < 0 || log_mul > 100) fail(ErrorKind::Corrupt, g.where_key(lm), "must be in [0, 100]");
      s.rope_scaling.attn_factor = static_cast<float>(log_mul != 0 ? mscale(1.0) / mscale(log_mul) : mscale(1.0));
    } else if (*type != "none") {
      fail(ErrorKind::Unsupported, g.where_key(key("rope.scaling.type")), "rope scaling '" + *type + "' is not supported");
    }
  }
  // rope.scaling.attn_factor multiplies llama.cpp's rotation (cos and sin) whatever the scaling:
  // ptn carries it for yarn only.
  if (const std::string af = key("rope.scaling.attn_factor"); g.has(af)) {
    const float f = g.opt_f32(af).value_or(1.0f);
    if (!std::isfinite(f) || !(f > 0) || f > 100) fail(ErrorKind::Corrupt, g.where_key(af), "must be in (0, 100]");
    if (f != 1.0f && s.rope_scaling.type != RopeScalingType::Yarn)
      fail(ErrorKind::Unsupported, g.where_key(af), "an attention factor without yarn rope scaling is not supported");
    s.rope_scaling.attn_factor *= f;
  }
  if (g.find_tensor("rope_factors_long.weight") || g.find_tensor("rope_factors_short.weight"))
    fail(ErrorKind::Unsupported, g.path() + ": tensor 'rope_factors_long.weight'", "longrope (Phi-3 128k) is not supported");
  if (fam.gguf_rope_freqs && g.find_tensor("rope_freqs.weight")) llama3_from_rope_freqs(g, s);
}

// Norms, scales and soft-caps: the family's facts and the keys the architecture has for them.
void read_features(const GgufFile& g, const FamilyInfo& fam, ModelSpec& s) {
  auto key = [&](const char* k) { return std::string(fam.gguf_arch) + "." + k; };
  s.attn_bias = g.find_tensor("blk.0.attn_q.bias") != nullptr || g.find_tensor("blk.0.attn_qkv.bias") != nullptr;
  s.attn_output_bias = g.find_tensor("blk.0.attn_output.bias") != nullptr;
  s.mlp_bias = g.find_tensor("blk.0.ffn_down.bias") != nullptr;
  s.qk_norm = g.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  // One norm over all heads (OLMoE) when the weight spans them.
  if (const GgufTensorInfo* qn = g.find_tensor("blk.0.attn_q_norm.weight"))
    s.qk_norm_full = s.n_heads > 1 && qn->shape.size() == 1 && qn->shape[0] == s.n_heads * s.head_dim;
  s.activation = fam.gguf_activation;
  if (fam.layer_norm) {
    // LayerNorm architectures (stablelm, phi2, starcoder2, command-r): their own epsilon key,
    // norm biases when the file has them, the parallel residual as llama.cpp's graph runs it.
    const std::string eps_key = key("attention.layer_norm_epsilon");
    s.norm_eps = g.get_f32(eps_key);
    if (!(s.norm_eps >= 0) || s.norm_eps > 1) fail(ErrorKind::Corrupt, g.where_key(eps_key), "epsilon " + std::to_string(s.norm_eps) + " is outside [0, 1]");
    s.layer_norm = true;
    s.norm_bias = g.find_tensor("output_norm.bias") != nullptr;
    // stablelm: a layer without ffn_norm is parallel (StableLM 2 12B); phi2 and command-r always are.
    // gptneox: use_parallel_residual (required by llama.cpp), the MLP on ffn_norm of the layer input.
    if (fam.parallel_ffn_norm) {
      s.parallel_residual = g.get_bool(key("use_parallel_residual"));
      s.parallel_ffn_norm = s.parallel_residual;
    } else {
      s.parallel_residual = fam.parallel_residual || (*fam.hf_parallel_key && !g.find_tensor("blk.0.ffn_norm.weight"));
    }
    s.plain_mlp = fam.plain_mlp;
    s.output_bias = g.find_tensor("output.bias") != nullptr;
    if (s.qk_norm)
      fail(ErrorKind::Unsupported, g.path() + ": tensor 'blk.0.attn_q_norm.weight'",
           std::string("per-head q/k LayerNorms (") + fam.display + ") are not supported");
  }
  s.rope_interleaved = fam.rope_interleaved;
  if (fam.hf_logit_scale_mul) {  // command-r: logits times logit_scale (absent or 0: none)
    const float v = g.opt_f32(key("logit_scale")).value_or(0.0f);
    if (!(v >= 0) || !std::isfinite(v)) fail(ErrorKind::Corrupt, g.where_key(key("logit_scale")), "scale " + std::to_string(v) + " is not a finite number >= 0");
    if (v > 0) s.logit_scale = 1.0f / v;
  }
  s.sandwich_norms = fam.sandwich_norms;
  s.pre_norms = !fam.no_pre_norms;
  if (fam.embed_scale == EmbedScale::SqrtHidden) s.embed_scale = std::sqrt(static_cast<float>(s.hidden_size));
  if (fam.norm_weight_plus_one) {
    s.norm_weight_plus_one = false;
    s.source_notes.push_back("GGUF Gemma norm weights already include +1 (added by llama.cpp's converter)");
  }
  if (fam.rope_temperature) {
    // mistral3: q *= 1 + scale * log(1 + floor(pos / original_context_length)) on every layer.
    const std::string tk = key("attention.temperature_scale");
    const float t = g.opt_f32(tk).value_or(0.0f);
    if (!std::isfinite(t) || t < 0 || t > 100) fail(ErrorKind::Corrupt, g.where_key(tk), "must be in [0, 100]");
    if (t > 0) {
      const std::string ok = key("rope.scaling.original_context_length");
      if (!g.has(ok)) fail(ErrorKind::Corrupt, g.where_key(tk), "needs " + ok + " (the temperature's period)");
      s.attn_temperature_scale = t;
      s.attn_temperature_floor = positive(g, ok, g.get_i64(ok), int64_t{1} << 40);
      s.attn_temperature_all_layers = true;
    }
  }
  if (fam.logit_softcaps) {
    s.attn_logit_softcap = g.opt_f32(key("attn_logit_softcapping")).value_or(0.0f);
    s.final_logit_softcap = g.opt_f32(key("final_logit_softcapping")).value_or(0.0f);
  }
  if (fam.query_pre_attn_scalar) s.attn_scale = g.opt_f32(key("attention.scale")).value_or(gguf_default_query_scale(fam, s));
  if (fam.granite_multipliers) {
    // llama.cpp's granite: logit_scale required; the other three optional, 0 or absent meaning none.
    auto scale = [&](const char* k, bool required) {
      const std::optional<float> v = required ? std::optional<float>(g.get_f32(key(k))) : g.opt_f32(key(k));
      if (v && (!(*v >= 0) || !std::isfinite(*v) || (required && *v == 0)))
        fail(ErrorKind::Corrupt, g.where_key(key(k)), "scale " + std::to_string(*v) + " is not a finite positive number");
      return v.value_or(0.0f);
    };
    const float e = scale("embedding_scale", false), r = scale("residual_scale", false), a = scale("attention.scale", false);
    s.embed_scale = e > 0 ? e : 1.0f;
    s.residual_scale = r > 0 ? r : 1.0f;
    s.attn_scale = a;  // 0: 1/sqrt(head_dim)
    s.logit_scale = scale("logit_scale", true);
  }
}

// Which layers are windowed (or chunked): attention.sliding_window_pattern as llama.cpp reads
// it, one flag per layer or a period (every period-th layer global; `period` when absent).
std::vector<bool> windowed_layers(const GgufFile& g, const FamilyInfo& fam, const ModelSpec& s, int64_t period) {
  const std::string key = std::string(fam.gguf_arch) + ".attention.sliding_window_pattern";
  std::vector<bool> out(static_cast<size_t>(s.n_layers));
  if (const GgufValue* p = g.find(key); p && p->type == GgufType::Array) {
    const std::vector<int64_t> per_layer = g.get_int_array(key);
    if (static_cast<int64_t>(per_layer.size()) != s.n_layers)
      fail(ErrorKind::Corrupt, g.where_key(key), "has " + std::to_string(per_layer.size()) + " entries for " + std::to_string(s.n_layers) + " layers");
    for (size_t i = 0; i < out.size(); ++i) out[i] = per_layer[i] != 0;
    return out;
  } else if (p) {
    period = positive(g, key, g.get_i64(key), 1 << 16);
  }
  for (int64_t i = 0; i < s.n_layers; ++i) out[static_cast<size_t>(i)] = (i + 1) % period != 0;
  return out;
}

// llama.cpp's llama4 graph: a fixed 8192-token chunk on the layers sliding_window_pattern
// marks (default: 3 of every 4), RoPE skipped on every 4th layer, whose queries get the
// attention temperature (scale 0.1, floor 8192); all of that is in its code, not in the file.
// A file with sliding_window 0 (llama.cpp's form for MobileLLM) is refused: llama.cpp then still
// skips RoPE on the last layer, which no checkpoint asks for.
constexpr int64_t kLlama4Chunk = 8192, kLlama4NopeStep = 4;
constexpr float kLlama4TempScale = 0.1f;

void llama4_layers(const GgufFile& g, const FamilyInfo& fam, ModelSpec& s, int64_t window) {
  auto key = [&](const char* k) { return std::string(fam.gguf_arch) + "." + k; };
  if (g.has(key("attention.sliding_window")) && window == 0)
    fail(ErrorKind::Unsupported, g.where_key(key("attention.sliding_window")),
         "a llama4 file without chunked attention (sliding_window 0, llama.cpp's MobileLLM form) is not supported");
  const std::vector<bool> chunked_layer = windowed_layers(g, fam, s, 4);
  const float chunk_theta = g.opt_f32(key("rope.freq_base_swa")).value_or(s.rope_theta);
  for (int64_t i = 0; i < s.n_layers; ++i) {
    LayerAttention& l = s.layers[static_cast<size_t>(i)];
    l.use_rope = (i + 1) % kLlama4NopeStep != 0;
    if (chunked_layer[static_cast<size_t>(i)]) {
      l.kind = AttnKind::Chunk;
      l.span = kLlama4Chunk;
      l.rope_theta = chunk_theta;
    }
  }
  s.attn_temperature_scale = kLlama4TempScale;
  s.attn_temperature_floor = kLlama4Chunk;
  s.source_notes.push_back("llama4: chunks of 8192, RoPE skipped on every 4th layer, attention temperature 0.1 / 8192 (fixed by llama.cpp's graph)");
}

// Every layer's attention policy and RoPE base, as llama.cpp runs the architecture.
void read_layers(const GgufFile& g, const FamilyInfo& fam, ModelSpec& s) {
  auto key = [&](const char* k) { return std::string(fam.gguf_arch) + "." + k; };
  int64_t window = 0;
  if (g.has(key("attention.sliding_window"))) window = g.get_i64(key("attention.sliding_window"));
  if (window < 0) fail(ErrorKind::Corrupt, g.where_key(key("attention.sliding_window")), "negative window");
  s.layers.assign(static_cast<size_t>(s.n_layers), LayerAttention{});
  for (auto& l : s.layers) l.rope_theta = s.rope_theta;
  if (fam.gguf_nope_step > 0) {  // fixed by llama.cpp's graph, not in the file (smollm3)
    for (int64_t i = 0; i < s.n_layers; ++i) s.layers[static_cast<size_t>(i)].use_rope = (i + 1) % fam.gguf_nope_step != 0;
    s.source_notes.push_back(std::string(fam.gguf_arch) + ": RoPE skipped on every " + std::to_string(fam.gguf_nope_step) +
                             "th layer (fixed by llama.cpp's graph)");
  }
  if (fam.gguf_window == WindowRule::AllLayers) {
    if (window > 0)
      for (auto& l : s.layers) { l.kind = AttnKind::Window; l.span = window; }
    return;
  }
  if (fam.gguf_window == WindowRule::ChunkOnRopeLayers) return llama4_layers(g, fam, s, window);
  if (fam.gguf_window != WindowRule::EveryNthGlobal) return;  // every layer full
  if (fam.sliding_rope_unscaled && window == 0) return;  // olmo2 without a window: OLMo 2, every layer full
  if (fam.sliding_rope_unscaled && g.has(key("rope.freq_base_swa")) && g.opt_f32(key("rope.freq_base_swa")).value_or(0) != s.rope_theta)
    fail(ErrorKind::Unsupported, g.where_key(key("rope.freq_base_swa")),
         "a RoPE base of the windowed layers' own (llama.cpp's " + std::string(fam.gguf_arch) + " graph uses rope.freq_base on every layer)");
  if (window == 0) fail(ErrorKind::Corrupt, g.where_key(key("attention.sliding_window")), std::string("missing (") + fam.display + " interleaves windowed layers)");
  const std::vector<bool> local_layer = windowed_layers(g, fam, s, fam.window_pattern);
  const float local_theta = fam.local_rope_base ? g.opt_f32(key("rope.freq_base_swa")).value_or(10000.0f) : s.rope_theta;
  for (int64_t i = 0; i < s.n_layers; ++i) {
    if (local_layer[static_cast<size_t>(i)]) {
      s.layers[i].kind = AttnKind::Window;
      s.layers[i].span = window;
      s.layers[i].rope_theta = local_theta;
      // a local base is unscaled (Gemma 3 scales the global layers only); so are OLMo 3's windowed layers
      s.layers[i].rope_scaling = !fam.local_rope_base && !fam.sliding_rope_unscaled;
    }
  }
}

// llama.cpp's deepseek2 (DeepSeek V2, V2-Lite, V3): latent attention stored as one key/value
// head of key_length = kv_lora_rank + rope and value_length = kv_lora_rank, with each head's
// key_length_mla / value_length_mla; attn_q (or attn_q_a, attn_q_a_norm, attn_q_b), attn_kv_a_mqa,
// attn_kv_a_norm, attn_k_b [H, kv_lora, nope], attn_v_b [H, v, kv_lora]; the first
// leading_dense_block_count layers dense, then experts with expert_shared_count ungated shared
// experts, gated by softmax or sigmoid (expert_gating_func 1 / 2), with exp_probs_b.bias for
// choosing, groups scored by their two best, renormalised with expert_weights_norm and scaled by
// expert_weights_scale. Files from before llama.cpp split attn_kv_b are refused by name.
void read_deepseek2(const GgufFile& g, const std::string& arch, ModelSpec& s) {
  auto key = [&](const char* k) { return arch + "." + k; };
  auto count = [&](const char* k, int64_t lo, int64_t hi) {
    const std::string kk = key(k);
    const int64_t v = g.get_i64(kk);
    if (v < lo || v > hi) fail(ErrorKind::Corrupt, g.where_key(kk), "value " + std::to_string(v) + " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
    return v;
  };
  if (!g.has(key("attention.key_length_mla")) || !g.has(key("attention.value_length_mla")) || g.find_tensor("blk.0.attn_kv_b.weight"))
    fail(ErrorKind::Unsupported, g.where_key(key("attention.key_length_mla")),
         "a deepseek2 file with attn_kv_b and no key_length_mla (converted before llama.cpp split attn_kv_b into attn_k_b and "
         "attn_v_b) is not supported: convert the model again");
  s.kv_lora_rank = count("attention.kv_lora_rank", 1, 1 << 16);
  const int64_t key_mla = count("attention.key_length_mla", 3, 1 << 16), value_mla = count("attention.value_length_mla", 1, 1 << 16);
  if (key_mla <= s.rope_dim) fail(ErrorKind::Corrupt, g.where_key(key("attention.key_length_mla")), "not wider than the rotary part " + std::to_string(s.rope_dim));
  const int64_t kv_heads = g.has(key("attention.head_count_kv")) ? uniform_int(g, key("attention.head_count_kv")) : s.n_heads;
  const int64_t value_length = g.has(key("attention.value_length")) ? g.get_i64(key("attention.value_length")) : -1;
  if (kv_heads != 1 || s.head_dim != s.kv_lora_rank + s.rope_dim || value_length != s.kv_lora_rank)
    fail(ErrorKind::Corrupt, g.where_key(key("attention.key_length")),
         "latent attention needs head_count_kv 1, key_length kv_lora_rank + rope (" + std::to_string(s.kv_lora_rank + s.rope_dim) +
             ") and value_length kv_lora_rank; found " + std::to_string(kv_heads) + ", " + std::to_string(s.head_dim) + ", " + std::to_string(value_length));
  s.qk_nope_dim = key_mla - s.rope_dim;
  s.v_head_dim = value_mla;
  s.head_dim = key_mla;
  s.n_kv_heads = s.n_heads;
  s.q_lora_rank = g.find_tensor("blk.0.attn_q_a.weight") ? count("attention.q_lora_rank", 1, 1 << 16) : 0;
  // The query scale, and the RoPE's attention factor, as llama.cpp's deepseek2 graph computes them.
  const double f = s.rope_scaling.type == RopeScalingType::Yarn ? s.rope_scaling.factor : 1.0;
  auto mscale = [&](double m) { return f > 1 ? 0.1 * m * std::log(f) + 1.0 : 1.0; };
  double ms = 1.0;
  if (g.has(key("rope.scaling.attn_factor")) && g.opt_f32(key("rope.scaling.attn_factor")).value_or(1.0f) != 1.0f)
    fail(ErrorKind::Unsupported, g.where_key(key("rope.scaling.attn_factor")), "an attention factor in a deepseek2 file is not supported");
  if (s.rope_scaling.type == RopeScalingType::Yarn) {
    const float log_mul = g.opt_f32(key("rope.scaling.yarn_log_multiplier")).value_or(0.0f);  // 0.1 x mscale_all_dim
    s.attn_mscale_all_dim = log_mul / 0.1f;
    ms = log_mul != 0 ? mscale(s.attn_mscale_all_dim) : mscale(1.0);
    s.rope_scaling.attn_factor = static_cast<float>(log_mul != 0 ? 1.0 : mscale(1.0));  // llama.cpp takes mscale = mscale_all_dim
  } else if (s.rope_scaling.type != RopeScalingType::None) {
    fail(ErrorKind::Unsupported, g.where_key(key("rope.scaling.type")), "rope scaling other than yarn in a deepseek2 file is not supported");
  }
  s.attn_scale = static_cast<float>(ms * ms / std::sqrt(static_cast<double>(key_mla)));
  if (s.n_experts == 0) return;
  const int64_t lead = g.has(key("leading_dense_block_count")) ? count("leading_dense_block_count", 0, s.n_layers) : 0;
  for (int64_t i = 0; i < s.n_layers; ++i) s.layers[static_cast<size_t>(i)].moe = i >= lead;
  s.shared_expert_ffn_size = count("expert_shared_count", 0, 64) * s.expert_ffn_size;
  s.shared_expert_gate = false;
  s.norm_topk_prob = g.opt_bool(key("expert_weights_norm")).value_or(false);
  const float scale = g.opt_f32(key("expert_weights_scale")).value_or(0.0f);
  if (!std::isfinite(scale) || scale < 0) fail(ErrorKind::Corrupt, g.where_key(key("expert_weights_scale")), "must be finite and >= 0");
  s.expert_routed_scale = scale == 0 ? 1.0f : scale;  // llama.cpp: 0 (absent) scales by 1
  const int64_t gating = g.has(key("expert_gating_func")) ? g.get_i64(key("expert_gating_func")) : 0;
  if (gating != 0 && gating != 1 && gating != 2)
    fail(ErrorKind::Unsupported, g.where_key(key("expert_gating_func")), "gating " + std::to_string(gating) + " is not supported (1 softmax, 2 sigmoid are)");
  s.expert_sigmoid = gating == 2;
  if (s.expert_sigmoid) s.family = "deepseek_v3";
  s.expert_selection_bias = g.find_tensor("blk." + std::to_string(lead) + ".exp_probs_b.bias") != nullptr;
  const int64_t groups = g.has(key("expert_group_count")) ? count("expert_group_count", 0, s.n_experts) : 0;
  if (groups > 1) {
    s.expert_groups = groups;
    s.expert_groups_used = count("expert_group_used_count", 1, groups);
    s.expert_group_top2 = true;
    if (s.n_experts % groups != 0 || s.expert_groups_used * (s.n_experts / groups) < s.n_experts_used)
      fail(ErrorKind::Corrupt, g.where_key(key("expert_group_count")), "groups that do not divide the experts or hold fewer than the experts used");
  }
}

// Canonical name -> GGUF tensor: fused tensors split, interleaved q/k rows noted.
void map_tensors(const GgufFile& g, const FamilyInfo& fam, ModelSpec& s) {
  const bool fused = fam.gguf_fused_qkv_gate_up || fam.gguf_fused_gate_up, interleaved = fam.gguf_qk_interleaved;
  for (const GgufTensorInfo& t : g.tensors()) {
    const std::string& n = t.name;
    if (n == "rope_freqs.weight") continue;
    // Merged experts [E, rows, cols] (and gpt-oss's merged biases [E, rows]): one canonical
    // matrix (vector) per expert.
    bool merged = false;
    for (const char* what : {"ffn_gate", "ffn_up", "ffn_down"})
      for (const char* kind : {"weight", "bias"}) {
        const std::string suffix = std::string(".") + what + "_exps." + kind;
        if (s.n_experts > 0 && n.rfind("blk.", 0) == 0 && n.size() > suffix.size() &&
            n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
          const std::string blk = n.substr(0, n.size() - suffix.size());
          for (int64_t e = 0; e < s.n_experts; ++e) {
            TensorSourceRef r{n};
            r.expert = e;
            s.tensor_sources[blk + "." + what + "." + std::to_string(e) + "." + kind] = format_tensor_source(r);
          }
          merged = true;
        }
      }
    if (merged) continue;
    auto ends = [&](const std::string& suffix) { return n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0; };
    const bool in_layer = n.rfind("blk.", 0) == 0;
    const std::string blk = n.substr(0, n.find('.', 4));  // "blk.N"
    if (in_layer && std::string_view(fam.gguf_ffn_norm) != "ffn_norm" && ends(std::string(".") + fam.gguf_ffn_norm + ".weight")) {
      s.tensor_sources[blk + ".ffn_norm.weight"] = n;  // gpt-oss's pre-FFN norm
      continue;
    }
    // q|k|v in one tensor: Phi-3's layout, and what llama.cpp accepts from any architecture
    // that loads q/k/v (older phi2 conversions have it).
    // (Not for interleaved q/k rows: that split would need the permutation too; such a tensor
    // stays unused and is reported.)
    if (in_layer && !interleaved && (ends(".attn_qkv.weight") || ends(".attn_qkv.bias"))) {
      const std::string suffix = ends(".bias") ? "bias" : "weight";
      const int64_t q = s.n_heads * s.head_dim, kv = s.n_kv_heads * s.head_dim;
      s.tensor_sources[blk + ".attn_q." + suffix] = format_tensor_source({n, 0, q, 0});
      s.tensor_sources[blk + ".attn_k." + suffix] = format_tensor_source({n, q, q + kv, 0});
      s.tensor_sources[blk + ".attn_v." + suffix] = format_tensor_source({n, q + kv, q + 2 * kv, 0});
      continue;
    }
    if (fused && in_layer && ends(".ffn_up.weight") && !t.shape.empty() && t.shape[0] == 2 * s.intermediate_size) {
      s.tensor_sources[blk + ".ffn_gate.weight"] = format_tensor_source({n, 0, s.intermediate_size, 0});
      s.tensor_sources[blk + ".ffn_up.weight"] = format_tensor_source({n, s.intermediate_size, 2 * s.intermediate_size, 0});
      continue;
    }
    if (interleaved && in_layer && (ends(".attn_q.weight") || ends(".attn_q.bias"))) {
      s.tensor_sources[n] = format_tensor_source({n, -1, -1, s.n_heads});
      continue;
    }
    if (interleaved && in_layer && (ends(".attn_k.weight") || ends(".attn_k.bias"))) {
      s.tensor_sources[n] = format_tensor_source({n, -1, -1, s.n_kv_heads});
      continue;
    }
    s.tensor_sources[n] = n;
  }
  if (interleaved) s.source_notes.push_back("attn_q/attn_k rows stored interleaved (llama.cpp layout); permuted back to half-split order on load");
  if (fam.gguf_fused_qkv_gate_up) s.source_notes.push_back("fused attn_qkv and ffn_up (gate|up) split on load");
  else if (!interleaved && g.find_tensor("blk.0.attn_qkv.weight")) s.source_notes.push_back("fused attn_qkv split into attn_q, attn_k and attn_v on load");
  if (fam.gguf_fused_gate_up) s.source_notes.push_back("fused ffn_up (gate|up) split into ffn_gate and ffn_up on load");
}

}  // namespace

float gguf_default_query_scale(const FamilyInfo& fam, const ModelSpec& s) {
  const bool wide = fam.gguf_wide_query_layers > 0 && s.n_layers == fam.gguf_wide_query_layers;
  return 1.0f / std::sqrt(static_cast<float>(wide ? s.hidden_size / s.n_heads : s.head_dim));
}

ModelSpec model_spec_from_gguf(const GgufFile& g) {
  ModelSpec s;
  const std::string arch = g.get_string("general.architecture");
  const FamilyInfo* fam = find_family_by_gguf_arch(arch);
  if (!fam)
    fail(ErrorKind::Unsupported, g.where_key("general.architecture"),
         "architecture '" + arch + "' is not supported (ptn reads " + gguf_readable_arch_list() + ")");
  s.architecture = arch;
  s.family = fam->name;
  read_dimensions(g, arch, fam->hf_mla, s);
  // Parts llama.cpp's glm4 graph has that ptn does not run: multi-token-prediction layers counted
  // in block_count (GLM-OCR) and M-RoPE sections (the vision-language GLM-4V).
  if (const std::string k = arch + ".nextn_predict_layers"; g.has(k) && g.get_i64(k) != 0)
    fail(ErrorKind::Unsupported, g.where_key(k), "multi-token-prediction layers are not supported");
  if (const std::string k = arch + ".rope.dimension_sections"; g.has(k)) {
    const GgufValue* v = g.find(k);
    bool any = v->type != GgufType::Array;
    if (!any)
      for (int64_t x : g.get_int_array(k)) any = any || x != 0;
    if (any) fail(ErrorKind::Unsupported, g.where_key(k), "M-RoPE (rotary sections per position axis, vision-language models) is not supported");
  }
  int64_t moe_step = 1;  // experts on layer i when (i + 1) % moe_step == 0
  if (fam->hf_moe == HfMoe::Llama4 && s.n_experts == 0)
    fail(ErrorKind::Unsupported, g.where_key(arch + ".expert_count"), "a llama4 file without experts (llama.cpp's llama4 architecture requires them)");
  if (s.n_experts > 0) {
    // A llama file with experts is Mixtral; the layout facts stay those of the row that reads the architecture.
    const FamilyInfo* moe = std::string(fam->name) == "llama" ? &family_info(Family::Mixtral) : fam;
    if (moe->block != Block::Moe)
      fail(ErrorKind::Unsupported, g.where_key(arch + ".expert_count"), std::string("mixture-of-experts ") + fam->display + " files are not supported");
    s.family = moe->name;
    s.norm_topk_prob = moe->gguf_moe_norm_topk;
    if (moe->hf_moe == HfMoe::GptOss) {
      // llama.cpp's gpt-oss graph: biased router and experts, softmax over the selected
      // logits, swiglu_oai with alpha 1.702 and limit 7 fixed in its code.
      s.expert_bias = true;
      s.expert_swiglu_limit = 7.0f;
    }
    if (moe->hf_moe == HfMoe::Llama4) {
      // llama.cpp's llama4 graph: sigmoid scores that scale the expert's input, an ungated shared
      // expert as wide as the experts, experts on every interleave_moe_layer_step-th layer, and the
      // weightless q/k norm unless the model has 128 experts (Maverick's config turns it off).
      s.expert_sigmoid = s.expert_weight_input = true;
      s.shared_expert_gate = false;
      s.shared_expert_ffn_size = s.expert_ffn_size;
      const std::string key = arch + ".interleave_moe_layer_step";
      moe_step = positive(g, key, g.get_i64(key), s.n_layers);
      s.qk_l2_norm = s.n_experts != 128;
    } else if (const std::string shk = arch + ".expert_shared_feed_forward_length";
               moe->gguf_shared_expert_ungated && g.has(shk) && g.get_i64(shk) > 0) {
      // llama.cpp's granitemoe with a shared expert (Granite MoE Shared): ungated, added to the experts' output.
      s.shared_expert_ffn_size = positive(g, shk, g.get_i64(shk), int64_t{1} << 24);
      s.shared_expert_gate = false;
    } else if (!moe->gguf_shared_expert && g.has(shk) && g.get_i64(shk) > 0) {
      fail(ErrorKind::Unsupported, g.where_key(shk), std::string("a shared expert in a ") + fam->display + " file is not supported");
    } else if (moe->gguf_shared_expert) {
      const std::string key = arch + ".expert_shared_feed_forward_length";
      if (g.has(key)) {
        s.shared_expert_ffn_size = positive(g, key, g.get_i64(key), int64_t{1} << 24);
      } else if (const GgufTensorInfo* t = g.find_tensor("blk.0.ffn_up_shexp.weight"); t && t->shape.size() == 2) {
        s.shared_expert_ffn_size = positive(g, g.path() + ": tensor 'blk.0.ffn_up_shexp.weight'", t->shape[0], int64_t{1} << 24);
      } else {
        fail(ErrorKind::Corrupt, g.where_key(key), "missing, and no blk.0.ffn_up_shexp.weight to read the shared expert's width from");
      }
    }
  }
  read_rope_scaling(g, *fam, s);
  read_features(g, *fam, s);
  read_layers(g, *fam, s);
  s.attn_sinks = fam->attn_sinks;
  for (int64_t i = 0; i < s.n_layers; ++i) s.layers[static_cast<size_t>(i)].moe = s.n_experts > 0 && (i + 1) % moe_step == 0;
  if (fam->hf_mla) read_deepseek2(g, arch, s);
  if (s.n_kv_heads * s.head_dim <= 0 || s.rope_dim > s.head_dim)
    fail(ErrorKind::Corrupt, g.path(), "inconsistent head sizes");
  map_tensors(g, *fam, s);
  return s;
}

bool gguf_has_tokenizer(const GgufFile& g) { return g.has("tokenizer.ggml.model") && g.has("tokenizer.ggml.tokens"); }

TokenizerSpec tokenizer_spec_from_gguf(const GgufFile& g) {
  TokenizerSpec t;
  const std::string model = g.get_string("tokenizer.ggml.model");
  if (model == "llama") t.kind = TokenizerKind::SentencePiece;
  else if (model == "gpt2") t.kind = TokenizerKind::ByteLevelBPE;
  else fail(ErrorKind::Unsupported, g.where_key("tokenizer.ggml.model"), "tokenizer model '" + model + "' is not supported (llama and gpt2 are)");
  t.tokens = g.get_string_array("tokenizer.ggml.tokens");
  const size_t n = t.tokens.size();
  if (n == 0) fail(ErrorKind::Corrupt, g.where_key("tokenizer.ggml.tokens"), "empty vocabulary");
  if (g.has("tokenizer.ggml.scores")) {
    t.scores = g.get_f32_array("tokenizer.ggml.scores");
    if (t.scores.size() != n) fail(ErrorKind::Corrupt, g.where_key("tokenizer.ggml.scores"), std::to_string(t.scores.size()) + " scores for " + std::to_string(n) + " tokens");
  }
  if (g.has("tokenizer.ggml.token_type")) {
    std::vector<int64_t> types = g.get_int_array("tokenizer.ggml.token_type");
    if (types.size() != n) fail(ErrorKind::Corrupt, g.where_key("tokenizer.ggml.token_type"), std::to_string(types.size()) + " types for " + std::to_string(n) + " tokens");
    t.token_types.reserve(n);
    for (size_t k = 0; k < n; ++k) {
      if (types[k] < 1 || types[k] > 6) fail(ErrorKind::Corrupt, g.where_key("tokenizer.ggml.token_type"), "token " + std::to_string(k) + " has unknown type " + std::to_string(types[k]));
      t.token_types.push_back(static_cast<TokenType>(types[k]));
    }
  }
  if (g.has("tokenizer.ggml.merges")) t.merges = g.get_string_array("tokenizer.ggml.merges");
  if (t.kind == TokenizerKind::ByteLevelBPE && t.merges.empty())
    fail(ErrorKind::Corrupt, g.where_key("tokenizer.ggml.merges"), "a gpt2 (BPE) tokenizer needs merges");
  t.pre_tokenizer = g.opt_string("tokenizer.ggml.pre").value_or("");
  auto id = [&](const char* k) -> std::optional<int32_t> {
    if (!g.has(k)) return std::nullopt;
    int64_t v = g.get_i64(k);
    if (v == -1 || v == 0xffffffffLL) return std::nullopt;  // "none" as written by some converters
    if (v < 0 || static_cast<uint64_t>(v) >= n) fail(ErrorKind::Corrupt, g.where_key(k), "token id " + std::to_string(v) + " is outside the vocabulary of " + std::to_string(n));
    return static_cast<int32_t>(v);
  };
  t.bos_id = id("tokenizer.ggml.bos_token_id");
  t.eos_id = id("tokenizer.ggml.eos_token_id");
  t.unk_id = id("tokenizer.ggml.unknown_token_id");
  t.pad_id = id("tokenizer.ggml.padding_token_id");
  t.eot_id = id("tokenizer.ggml.eot_token_id");
  if (auto eom = id("tokenizer.ggml.eom_token_id")) t.extra_eos_ids.push_back(*eom);
  if (t.eot_id && t.eot_id != t.eos_id) t.extra_eos_ids.push_back(*t.eot_id);
  const bool spm = t.kind == TokenizerKind::SentencePiece;
  t.add_bos = g.opt_bool("tokenizer.ggml.add_bos_token").value_or(spm);
  t.add_eos = g.opt_bool("tokenizer.ggml.add_eos_token").value_or(false);
  t.add_space_prefix = g.opt_bool("tokenizer.ggml.add_space_prefix").value_or(spm);
  t.byte_fallback = spm;
  t.ignore_merges = t.pre_tokenizer == "llama-bpe";
  t.chat_template = g.opt_string("tokenizer.chat_template").value_or("");
  if (t.bos_id) t.bos_token = t.tokens[*t.bos_id];
  if (t.eos_id) t.eos_token = t.tokens[*t.eos_id];
  return t;
}

}  // namespace ptn
