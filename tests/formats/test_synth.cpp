// Synthetic models: random weights are deterministic; what synth writes (HF directory, GGUF)
// reads back as the same tensors and the same layer structure, for every family it can write.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <algorithm>
#include <map>
#include <tuple>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/quant.h"
#include "formats/gguf_writer.h"
#include "formats/hf_config.h"
#include "formats/random_weights.h"
#include "formats/synth.h"
#include "formats/weights.h"
#include "../scratch_dir.h"

namespace ptn {
namespace {

using json = nlohmann::json;

std::string tmp(const std::string& name) {
  static const testing::ScratchDir dir("ptn_synth_");
  return dir.path() + "/" + name;
}

// Small configs of each family (same structure as the real ones, tiny dimensions).
json small(const std::string& family) {
  json base = {{"vocab_size", 300}, {"hidden_size", 64}, {"intermediate_size", 96}, {"num_hidden_layers", 6},
               {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
               {"max_position_embeddings", 256}, {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}};
  if (family == "qwen2") { base["architectures"] = {"Qwen2ForCausalLM"}; base["tie_word_embeddings"] = false; }
  if (family == "qwen3") { base["architectures"] = {"Qwen3ForCausalLM"}; base["tie_word_embeddings"] = true; }
  if (family == "gemma2") {
    base["architectures"] = {"Gemma2ForCausalLM"};
    base["sliding_window"] = 32;
    base["query_pre_attn_scalar"] = 16;
    base["attn_logit_softcapping"] = 50.0;
    base["final_logit_softcapping"] = 30.0;
    base["hidden_activation"] = "gelu_pytorch_tanh";
  }
  if (family == "gemma3") {
    base["architectures"] = {"Gemma3ForCausalLM"};
    base["sliding_window"] = 32;
    base["query_pre_attn_scalar"] = 16;
    base["rope_local_base_freq"] = 10000.0;
    base["rope_theta"] = 1000000.0;
    base["hidden_activation"] = "gelu_pytorch_tanh";
  }
  if (family == "phi3") { base["architectures"] = {"Phi3ForCausalLM"}; base["sliding_window"] = 47; base.erase("head_dim"); base["num_key_value_heads"] = 4; }
  if (family == "llama4") {
    base["architectures"] = {"Llama4ForCausalLM"};
    base["intermediate_size_mlp"] = 80;
    base["attention_chunk_size"] = 16;
    base["moe_layers"] = json::array();
  }
  if (family == "llama-bias") {  // LlamaAttention's o_proj bias and LlamaMLP's biases
    base["architectures"] = {"LlamaForCausalLM"};
    base["attention_bias"] = true;
    base["mlp_bias"] = true;
  }
  if (family == "smollm3") { base["architectures"] = {"SmolLM3ForCausalLM"}; base["no_rope_layer_interval"] = 4; }  // layer 3 NoPE
  if (family == "smollm3-every3") { base["architectures"] = {"SmolLM3ForCausalLM"}; base["no_rope_layer_interval"] = 3; }
  if (family == "smollm3-bias") { base["architectures"] = {"SmolLM3ForCausalLM"}; base["attention_bias"] = true; }
  if (family == "mixtral") {
    base["architectures"] = {"MixtralForCausalLM"};
    base["num_local_experts"] = 4;
    base["num_experts_per_tok"] = 2;
  }
  if (family == "olmo2") base["architectures"] = {"Olmo2ForCausalLM"};  // post-norms only, q/k norms over all heads
  if (family == "granite") {
    base["architectures"] = {"GraniteForCausalLM"};
    base["embedding_multiplier"] = 12.0;
    base["attention_multiplier"] = 0.0078125;
    base["residual_multiplier"] = 0.22;
    base["logits_scaling"] = 8.0;
  }
  if (family.rfind("stablelm", 0) == 0 || family.rfind("phi2", 0) == 0 || family.rfind("starcoder2", 0) == 0 ||
      family.rfind("cohere", 0) == 0 || family.rfind("gptneox", 0) == 0) {
    base.erase("rms_norm_eps");
    base["layer_norm_eps"] = 1e-4;
    base["norm_epsilon"] = 1e-4;
  }
  if (family == "stablelm") { base["architectures"] = {"StableLmForCausalLM"}; base["use_qkv_bias"] = true; }
  if (family == "stablelm-parallel") { base["architectures"] = {"StableLmForCausalLM"}; base["use_parallel_residual"] = true; }
  if (family == "stablelm-tied") { base["architectures"] = {"StableLmForCausalLM"}; base["tie_word_embeddings"] = true; }
  if (family == "phi2") base["architectures"] = {"PhiForCausalLM"};
  if (family == "starcoder2") base["architectures"] = {"Starcoder2ForCausalLM"};
  if (family == "starcoder2-window") { base["architectures"] = {"Starcoder2ForCausalLM"}; base["sliding_window"] = 32; }
  if (family == "cohere") base["architectures"] = {"CohereForCausalLM"};
  if (family == "cohere-bias") { base["architectures"] = {"CohereForCausalLM"}; base["attention_bias"] = true; }
  if (family == "cohere-untied") { base["architectures"] = {"CohereForCausalLM"}; base["tie_word_embeddings"] = false; }
  if (family == "glm") base["architectures"] = {"GlmForCausalLM"};  // q/k/v biases, gate|up fused, half rotated in pairs
  if (family == "glm4") base["architectures"] = {"Glm4ForCausalLM"};  // ... and norms on the sublayers' outputs
  if (family == "granitemoe") {  // stacked experts in the HF files, merged in the GGUF
    base["architectures"] = {"GraniteMoeForCausalLM"};
    base["num_local_experts"] = 4;
    base["num_experts_per_tok"] = 2;
    base["residual_multiplier"] = 0.5;
  }
  if (family == "ministral3") {  // YaRN with an attention factor of 1, the temperature on every layer
    base["architectures"] = {"Ministral3ForCausalLM"};
    base["rope_parameters"] = {{"type", "yarn"}, {"rope_theta", 1000000.0}, {"factor", 4.0}, {"original_max_position_embeddings", 64},
                               {"mscale", 1.0}, {"mscale_all_dim", 1.0}, {"llama_4_scaling_beta", 0.1}};
  }
  if (family == "granitemoeshared") {  // ... and an ungated shared MLP: shared_mlp.* in HF, ffn_*_shexp in the GGUF
    base["architectures"] = {"GraniteMoeSharedForCausalLM"};
    base["num_local_experts"] = 4;
    base["num_experts_per_tok"] = 2;
    base["shared_intermediate_size"] = 24;
  }
  if (family.rfind("gptneox", 0) == 0) {  // no GQA; the tanh GELU llama.cpp's gptneox runs
    base["architectures"] = {"GPTNeoXForCausalLM"};
    base.erase("num_key_value_heads");
    base["hidden_act"] = "gelu_new";
  }
  if (family == "gptneox-seq") base["use_parallel_residual"] = false;
  if (family == "gptneox-erf") base["hidden_act"] = "gelu";
  if (family == "qwen3_moe") {  // as its GGUF architecture expresses it: experts on every layer, renormalised
    base["architectures"] = {"Qwen3MoeForCausalLM"};
    base["num_experts"] = 6;
    base["num_experts_per_tok"] = 2;
    base["moe_intermediate_size"] = 32;
    base["norm_topk_prob"] = true;
  }
  return base;
}

void expect_same_layers(const ModelSpec& a, const ModelSpec& b) {
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    EXPECT_EQ(a.layers[i].kind, b.layers[i].kind) << "layer " << i;
    EXPECT_EQ(a.layers[i].span, b.layers[i].span) << "layer " << i;
    EXPECT_EQ(a.layers[i].use_rope, b.layers[i].use_rope) << "layer " << i;
    EXPECT_EQ(a.layers[i].moe, b.layers[i].moe) << "layer " << i;
    EXPECT_FLOAT_EQ(a.layers[i].rope_theta, b.layers[i].rope_theta) << "layer " << i;
  }
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

TEST(RandomWeights, DeterministicWithTheRightStatistics) {
  ModelSpec s = model_spec_from_hf_config(small("qwen2"), "qwen2");
  auto a = random_weights(s, 7), b = random_weights(s, 7), c = random_weights(s, 8);
  EXPECT_TRUE(same_bytes(a->get("blk.2.ffn_up.weight"), b->get("blk.2.ffn_up.weight")));
  EXPECT_FALSE(same_bytes(a->get("blk.2.ffn_up.weight"), c->get("blk.2.ffn_up.weight")));
  EXPECT_FALSE(same_bytes(a->get("blk.2.ffn_up.weight"), a->get("blk.3.ffn_up.weight")));
  Tensor e = a->get("token_embd.weight");
  double sum = 0, sq = 0;
  const float* p = e.data_as<float>();
  for (int64_t i = 0; i < e.numel(); ++i) { sum += p[i]; sq += p[i] * p[i]; }
  const double mean = sum / e.numel(), sd = std::sqrt(sq / e.numel() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(sd, 0.02, 0.001);
  Tensor n = a->get("blk.0.attn_norm.weight");
  for (int64_t i = 0; i < n.numel(); ++i) ASSERT_EQ(n.data_as<float>()[i], 1.0f);
  Tensor bias = a->get("blk.0.attn_q.bias");
  for (int64_t i = 0; i < bias.numel(); ++i) ASSERT_EQ(bias.data_as<float>()[i], 0.0f);
  ModelSpec g = model_spec_from_hf_config(small("gemma2"), "gemma2");
  EXPECT_EQ(random_weights(g, 1)->get("blk.0.post_ffw_norm.weight").data_as<float>()[0], 0.0f);  // (1 + w) = 1
}

// `ptn synth --varied`: every norm weight and bias a value of its own, wider matrices; still
// deterministic per seed and name.
TEST(RandomWeights, VariedSpreadsNormsBiasesAndMatrices) {
  ModelSpec s = model_spec_from_hf_config(small("qwen2"), "qwen2");
  const RandomWeightSpread v = RandomWeightSpread::varied();
  auto a = random_weights(s, 7, v), b = random_weights(s, 7, v);
  EXPECT_TRUE(same_bytes(a->get("blk.1.attn_k.bias"), b->get("blk.1.attn_k.bias")));
  auto stats = [](const Tensor& t, double* lo, double* hi) {
    const float* p = t.data_as<float>();
    double sum = 0, sq = 0;
    *lo = *hi = p[0];
    for (int64_t i = 0; i < t.numel(); ++i) {
      sum += p[i];
      sq += p[i] * p[i];
      *lo = std::min<double>(*lo, p[i]);
      *hi = std::max<double>(*hi, p[i]);
    }
    const double mean = sum / t.numel();
    return std::make_pair(mean, std::sqrt(sq / t.numel() - mean * mean));
  };
  double lo, hi;
  auto [m, sd] = stats(a->get("token_embd.weight"), &lo, &hi);
  EXPECT_NEAR(m, 0.0, 0.01);
  EXPECT_NEAR(sd, 0.1, 0.005);
  std::tie(m, sd) = stats(a->get("blk.0.attn_norm.weight"), &lo, &hi);
  EXPECT_GE(lo, 0.5);
  EXPECT_LE(hi, 1.5);
  EXPECT_GT(sd, 0.2);  // U(-0.5, 0.5) has sd 0.29
  std::tie(m, sd) = stats(a->get("blk.0.attn_q.bias"), &lo, &hi);
  EXPECT_GT(sd, 0.1);
  EXPECT_LT(sd, 0.3);
  EXPECT_THROW(random_weights(s, 7, {0.0, 0.5, 0.2}), Error);
}

class SynthFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(SynthFamily, HfDirectoryRoundTripsBitIdentically) {
  const std::string fam = GetParam();
  json cfg = small(fam);
  ModelSpec s = model_spec_from_hf_config(cfg, fam);
  auto src = random_weights(s, 11);
  const std::string dir = tmp("hf_" + fam);
  write_hf_directory(*src, cfg, dir, DType::F32);
  auto back = open_weights(dir);
  EXPECT_EQ(back->names(), src->names());
  for (const auto& n : src->names()) EXPECT_TRUE(same_bytes(src->get(n), back->get(n))) << fam << " " << n;
  expect_same_layers(s, back->spec());
  EXPECT_EQ(back->spec().family, s.family);
}

TEST_P(SynthFamily, GgufRoundTripsAndKeepsTheLayerStructure) {
  const std::string fam = GetParam();
  json cfg = small(fam);
  ModelSpec s = model_spec_from_hf_config(cfg, fam);
  auto src = random_weights(s, 12);
  const std::string path = tmp("gguf_" + fam + ".gguf");
  // llama.cpp's graphs fix what these would need written: a dense Llama 4 (its llama4 needs
  // experts), SmolLM3 NoPE on other than every 4th layer, SmolLM3's o_proj bias (q/k/v only).
  const std::map<std::string, std::string> refused = {
      {"llama4", "a Llama 4 without experts"},
      {"smollm3-every3", "layer 2: NoPE on this layer cannot be expressed in the 'smollm3' GGUF architecture (llama.cpp skips RoPE on every 4th layer exactly)"},
      {"smollm3-bias", "an o_proj bias cannot be expressed in the 'smollm3' GGUF architecture"},
      // stablelm requires output.weight; starcoder2 has no window; command-r no o_proj bias.
      {"stablelm-tied", "a tied embedding cannot be expressed in the 'stablelm' GGUF architecture"},
      {"starcoder2-window", "layer 0: a window layer cannot be expressed in the 'starcoder2' GGUF architecture"},
      {"cohere-bias", "an o_proj bias cannot be expressed in the 'command-r' GGUF architecture"},
      // command-r's classifier is always token_embd.
      {"cohere-untied", "an output matrix of its own cannot be expressed in the 'command-r' GGUF architecture"},
      // llama.cpp's gptneox runs the tanh GELU (Pythia's exact one is not written).
      {"gptneox-erf", "activation 'gelu' cannot be expressed: the 'gptneox' GGUF architecture runs 'gelu_tanh'"}};
  if (auto r = refused.find(fam); r != refused.end()) {
    try {
      write_model_gguf(*src, path, {});
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(r->second), std::string::npos) << e.what();
    }
    return;
  }
  write_model_gguf(*src, path, {});
  auto back = open_weights(path);
  const ModelSpec& g = back->spec();
  expect_same_layers(s, g);
  // Granite MoE Shared is llama.cpp's granitemoe with a shared expert: it reads back as that.
  EXPECT_EQ(g.family, fam == "granitemoeshared" ? std::string("granitemoe") : s.family);
  EXPECT_EQ(g.shared_expert_ffn_size, s.shared_expert_ffn_size);
  EXPECT_EQ(g.shared_expert_gate, s.shared_expert_gate);
  EXPECT_FLOAT_EQ(g.rope_scaling.attn_factor, s.rope_scaling.attn_factor);
  EXPECT_FLOAT_EQ(g.attn_temperature_scale, s.attn_temperature_scale);
  EXPECT_EQ(g.attn_temperature_floor, s.attn_temperature_floor);
  EXPECT_EQ(g.attn_temperature_all_layers, s.attn_temperature_all_layers);
  EXPECT_EQ(g.n_experts, s.n_experts);
  EXPECT_EQ(g.n_experts_used, s.n_experts_used);
  EXPECT_EQ(g.expert_ffn_size, s.expert_ffn_size);
  EXPECT_EQ(g.n_kv_heads, s.n_kv_heads);
  EXPECT_EQ(g.head_dim, s.head_dim);
  EXPECT_EQ(g.attn_bias, s.attn_bias);
  EXPECT_EQ(g.attn_output_bias, s.attn_output_bias);
  EXPECT_EQ(g.mlp_bias, s.mlp_bias);
  EXPECT_EQ(g.qk_norm, s.qk_norm);
  EXPECT_EQ(g.tie_word_embeddings, s.tie_word_embeddings);
  EXPECT_FLOAT_EQ(g.attn_logit_softcap, s.attn_logit_softcap);
  EXPECT_FLOAT_EQ(g.final_logit_softcap, s.final_logit_softcap);
  EXPECT_EQ(g.pre_norms, s.pre_norms);
  EXPECT_EQ(g.sandwich_norms, s.sandwich_norms);
  EXPECT_EQ(g.qk_norm_full, s.qk_norm_full);
  EXPECT_FLOAT_EQ(g.embed_scale, s.embed_scale);
  EXPECT_FLOAT_EQ(g.residual_scale, s.residual_scale);
  EXPECT_FLOAT_EQ(g.logit_scale, s.logit_scale);
  EXPECT_FLOAT_EQ(g.norm_eps, s.norm_eps);
  EXPECT_EQ(g.rope_dim, s.rope_dim);
  EXPECT_EQ(g.layer_norm, s.layer_norm);
  EXPECT_EQ(g.norm_bias, s.norm_bias);
  EXPECT_EQ(g.parallel_residual, s.parallel_residual);
  EXPECT_EQ(g.plain_mlp, s.plain_mlp);
  EXPECT_EQ(g.rope_interleaved, s.rope_interleaved);
  EXPECT_EQ(g.output_bias, s.output_bias);
  EXPECT_NEAR(g.attn_scale == 0 ? 1 / std::sqrt(16.0f) : g.attn_scale, s.attn_scale == 0 ? 1 / std::sqrt(16.0f) : s.attn_scale, 1e-7);
  const bool gemma = fam == "gemma2" || fam == "gemma3";
  EXPECT_FALSE(g.norm_weight_plus_one);  // GGUF Gemma norms carry the +1
  for (const auto& n : src->names()) {
    Tensor a = src->get(n), b = back->get(n);
    if (gemma && n.find("norm.weight") != std::string::npos) {
      ASSERT_EQ(a.shape(), b.shape());
      for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(b.data_as<float>()[i], a.data_as<float>()[i] + 1.0f) << n;
    } else {
      EXPECT_TRUE(same_bytes(a, b)) << fam << " " << n;
    }
  }
  // HF config + the GGUF's weights: the HF spec with the GGUF's tensors.
  const std::string dir = tmp("hfg_" + fam);
  write_hf_directory(*src, cfg, dir, DType::F32);
  auto mixed = open_weights(dir, path);
  EXPECT_TRUE(same_bytes(mixed->get("blk.1.attn_k.weight"), back->get("blk.1.attn_k.weight")));
  EXPECT_EQ(mixed->spec().norm_weight_plus_one, false);
}

INSTANTIATE_TEST_SUITE_P(Families, SynthFamily,
                         ::testing::Values("qwen2", "qwen3", "gemma2", "gemma3", "phi3", "llama4", "smollm3", "smollm3-every3", "smollm3-bias", "llama-bias", "mixtral",
                                           "qwen3_moe", "olmo2", "granite", "stablelm", "stablelm-parallel", "stablelm-tied", "phi2",
                                           "starcoder2", "starcoder2-window", "cohere", "cohere-bias", "cohere-untied", "gptneox", "gptneox-seq", "gptneox-erf",
                                           "glm", "glm4", "granitemoe", "granitemoeshared", "ministral3"));

TEST(Synth, PresetsHaveTheRealShapes) {
  for (const auto& name : synth_preset_names()) {
    ModelSpec s = model_spec_from_hf_config(synth_preset(name), name);
    EXPECT_EQ(static_cast<int64_t>(s.layers.size()), s.n_layers) << name;
  }
  ModelSpec l = model_spec_from_hf_config(synth_preset("llama-3.2-1b"), "p");
  EXPECT_EQ(l.vocab_size, 128256);
  EXPECT_EQ(l.n_layers, 16);
  EXPECT_EQ(l.rope_scaling.type, RopeScalingType::Llama3);
  ModelSpec q = model_spec_from_hf_config(synth_preset("qwen3-0.6b"), "p");
  EXPECT_EQ(q.head_dim, 128);
  EXPECT_EQ(q.n_layers, 28);
  ModelSpec g = model_spec_from_hf_config(synth_preset("gemma-3-1b"), "p");
  EXPECT_EQ(g.layers[5].kind, AttnKind::Full);
  EXPECT_EQ(g.layers[4].kind, AttnKind::Window);
  EXPECT_EQ(g.layers[4].span, 512);
  ModelSpec sm = model_spec_from_hf_config(synth_preset("smollm2-135m"), "p");
  EXPECT_EQ(sm.hidden_size, 576);
  EXPECT_EQ(sm.n_kv_heads, 3);
  EXPECT_THROW(synth_preset("nope"), Error);
}

TEST(Synth, TinyPresetQ4KMAndBf16StayCloseToTheWeights) {
  json cfg = synth_preset("tiny");
  ModelSpec s = model_spec_from_hf_config(cfg, "tiny");
  auto src = random_weights(s, 5);
  const std::string path = tmp("tiny_q4km.gguf");
  GgufModelOptions opt;
  opt.type = GgufFileType::Q4_K_M;
  write_model_gguf(*src, path, opt);
  auto back = open_weights(path);
  EXPECT_EQ(back->get("blk.0.ffn_up.weight").dtype(), DType::Q4_K);
  EXPECT_EQ(back->get("blk.1.ffn_down.weight").dtype(), DType::Q6_K);
  EXPECT_EQ(back->get("output.weight").dtype(), DType::Q6_K);
  for (const auto& n : src->names()) {
    Tensor a = src->get(n), b = back->get(n);
    ASSERT_EQ(a.shape(), b.shape()) << n;
    std::vector<float> row(b.row_size());
    double err = 0, ref = 0;
    const int64_t rows = b.ndim() < 2 ? 1 : b.rows();
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(b.dtype(), b.row_ptr(r), row.data(), b.row_size());
      const float* x = reinterpret_cast<const float*>(a.row_ptr(r));
      for (int64_t c = 0; c < b.row_size(); ++c) { err += (row[c] - x[c]) * (row[c] - x[c]); ref += x[c] * x[c]; }
    }
    EXPECT_LT(err / ref, b.dtype() == DType::Q6_K ? 2e-3 : b.dtype() == DType::F32 ? 1e-30 : 1e-2) << n;
  }
  const std::string dir = tmp("tiny_bf16");
  write_hf_directory(*src, cfg, dir, DType::BF16);
  auto bf = open_weights(dir);
  Tensor a = src->get("blk.1.attn_v.weight"), b = bf->get("blk.1.attn_v.weight");
  ASSERT_EQ(b.dtype(), DType::BF16);
  std::vector<float> row(b.row_size());
  for (int64_t r = 0; r < b.rows(); ++r) {
    dequantize_row(DType::BF16, b.row_ptr(r), row.data(), b.row_size());
    const float* x = reinterpret_cast<const float*>(a.row_ptr(r));
    for (int64_t c = 0; c < b.row_size(); ++c) ASSERT_LE(std::fabs(row[c] - x[c]), std::fabs(x[c]) / 256 + 1e-30) << r << "," << c;
  }
}

}  // namespace
}  // namespace ptn

namespace ptn {
namespace {

TEST(Synth, HfConfigWithAnotherFamilysGgufIsRefused) {
  json q2 = small("qwen2"), q3 = small("qwen3");
  auto a = random_weights(model_spec_from_hf_config(q2, "q2"), 1);
  auto b = random_weights(model_spec_from_hf_config(q3, "q3"), 1);
  const std::string dir = tmp("mismatch_dir"), gguf = tmp("mismatch.gguf");
  write_hf_directory(*a, q2, dir, DType::F32);
  write_model_gguf(*b, gguf, {});
  try {
    open_weights(dir, gguf);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'qwen3'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ptn
