// config.json -> ModelSpec for every family: dimensions, family features, and the attention
// type of every layer (transformers' rules, see hf_config.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/file.h"
#include "formats/hf_config.h"
#include "formats/weights.h"

namespace ptn {
namespace {

ModelSpec load(const std::string& name) {
  return model_spec_from_hf_config_file(std::string(PTN_TEST_DATA) + "/formats/configs/" + name);
}

// "F" full, "W" window, "C" chunk per layer; lower case when the layer has no RoPE.
std::string kinds(const ModelSpec& s) {
  std::string out;
  for (const auto& l : s.layers) {
    char c = l.kind == AttnKind::Full ? 'F' : l.kind == AttnKind::Window ? 'W' : 'C';
    out += l.use_rope ? c : static_cast<char>(std::tolower(c));
  }
  return out;
}

TEST(HfConfig, Llama32WithLlama3RopeScaling) {
  ModelSpec s = load("llama3.2-1b.json");
  EXPECT_EQ(s.family, "llama");
  EXPECT_EQ(s.architecture, "LlamaForCausalLM");
  EXPECT_EQ(s.vocab_size, 128256);
  EXPECT_EQ(s.n_layers, 16);
  EXPECT_EQ(s.n_heads, 32);
  EXPECT_EQ(s.n_kv_heads, 8);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_EQ(s.rope_dim, 64);
  EXPECT_FLOAT_EQ(s.rope_theta, 500000.0f);
  EXPECT_EQ(s.rope_scaling.type, RopeScalingType::Llama3);
  EXPECT_FLOAT_EQ(s.rope_scaling.factor, 32.0f);
  EXPECT_FLOAT_EQ(s.rope_scaling.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(s.rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(s.rope_scaling.original_max_position, 8192);
  EXPECT_TRUE(s.tie_word_embeddings);
  EXPECT_EQ(kinds(s), std::string(16, 'F'));
  EXPECT_EQ(s.tensor_sources.count("output.weight"), 0u);
  EXPECT_EQ(s.tensor_sources.at("blk.3.attn_q.weight"), "model.layers.3.self_attn.q_proj.weight");
  EXPECT_EQ(s.tensor_sources.at("blk.3.ffn_norm.weight"), "model.layers.3.post_attention_layernorm.weight");
  EXPECT_EQ(s.tensor_sources.at("blk.15.ffn_down.weight"), "model.layers.15.mlp.down_proj.weight");
}

TEST(HfConfig, MistralWindowsEveryLayer) {
  ModelSpec s = load("mistral-7b.json");
  EXPECT_EQ(s.family, "mistral");
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(kinds(s), std::string(32, 'W'));
  EXPECT_EQ(s.layers[0].span, 4096);
  EXPECT_TRUE(s.tensor_sources.count("output.weight"));
}

TEST(HfConfig, Qwen2WindowsFromMaxWindowLayersOnlyWithUseSlidingWindow) {
  ModelSpec s = load("qwen2-window.json");
  EXPECT_EQ(kinds(s), "FFWW");
  EXPECT_EQ(s.layers[2].span, 256);
  EXPECT_TRUE(s.attn_bias);
  EXPECT_EQ(s.tensor_sources.at("blk.1.attn_k.bias"), "model.layers.1.self_attn.k_proj.bias");
  ModelSpec q = load("qwen2.5-0.5b.json");  // sliding_window set, use_sliding_window false
  EXPECT_EQ(kinds(q), std::string(24, 'F'));
  EXPECT_EQ(q.head_dim, 64);
}

TEST(HfConfig, Qwen3UnusedWindowAndQkNorm) {
  ModelSpec s = load("qwen3-0.6b.json");
  EXPECT_EQ(s.family, "qwen3");
  EXPECT_EQ(kinds(s), std::string(28, 'F'));
  EXPECT_TRUE(s.qk_norm);
  EXPECT_FALSE(s.attn_bias);
  EXPECT_EQ(s.head_dim, 128);  // explicit, not hidden / heads (64)
  EXPECT_EQ(s.tensor_sources.at("blk.0.attn_q_norm.weight"), "model.layers.0.self_attn.q_norm.weight");
}

TEST(HfConfig, Gemma2AlternatesStartingWithALocalLayer) {
  ModelSpec s = load("gemma2-2b.json");
  std::string expect;
  for (int i = 0; i < 26; ++i) expect += i % 2 == 0 ? 'W' : 'F';
  EXPECT_EQ(kinds(s), expect);
  EXPECT_EQ(s.layers[0].span, 4096);
  EXPECT_TRUE(s.norm_weight_plus_one);
  EXPECT_TRUE(s.sandwich_norms);
  EXPECT_TRUE(s.tie_word_embeddings);  // Gemma's default
  EXPECT_EQ(s.activation, Activation::GeLUTanh);
  EXPECT_FLOAT_EQ(s.attn_logit_softcap, 50.0f);
  EXPECT_FLOAT_EQ(s.final_logit_softcap, 30.0f);
  EXPECT_FLOAT_EQ(s.attn_scale, 1.0f / 16.0f);  // 256^-0.5
  EXPECT_NEAR(s.embed_scale, 48.0f, 1e-4);      // sqrt(2304)
  EXPECT_EQ(s.tensor_sources.at("blk.2.post_ffw_norm.weight"), "model.layers.2.post_feedforward_layernorm.weight");
  EXPECT_EQ(s.tensor_sources.at("blk.2.ffn_norm.weight"), "model.layers.2.pre_feedforward_layernorm.weight");
  EXPECT_EQ(s.tensor_sources.at("blk.2.post_attention_norm.weight"), "model.layers.2.post_attention_layernorm.weight");
}

TEST(HfConfig, Gemma3FiveLocalOneGlobalWithLocalRopeBase) {
  ModelSpec s = load("gemma3-1b.json");
  EXPECT_EQ(s.family, "gemma3");
  EXPECT_EQ(kinds(s), "WWWWWFWWWWWFWWWWWFWWWWWFWW");
  EXPECT_TRUE(s.qk_norm);
  EXPECT_EQ(s.n_kv_heads, 1);
  EXPECT_FLOAT_EQ(s.attn_logit_softcap, 0.0f);
  EXPECT_FLOAT_EQ(s.final_logit_softcap, 0.0f);
  EXPECT_FLOAT_EQ(s.layers[0].rope_theta, 10000.0f);
  EXPECT_FLOAT_EQ(s.layers[5].rope_theta, 1000000.0f);
  EXPECT_FALSE(s.layers[0].rope_scaling);
  EXPECT_TRUE(s.layers[5].rope_scaling);
  EXPECT_EQ(s.layers[0].span, 512);
}

TEST(HfConfig, Gemma3LayerTypesAreAuthoritativeAndTextConfigIsUsed) {
  ModelSpec s = load("gemma3-4b-layer-types.json");
  EXPECT_EQ(kinds(s), "WFWW");
  EXPECT_EQ(s.hidden_size, 2560);
  EXPECT_EQ(s.vocab_size, 262208);  // Gemma3TextConfig default
  EXPECT_EQ(s.head_dim, 256);
  EXPECT_EQ(s.rope_scaling.type, RopeScalingType::Linear);
  EXPECT_FLOAT_EQ(s.rope_scaling.factor, 8.0f);
  EXPECT_EQ(s.layers[0].span, 1024);
}

TEST(HfConfig, Phi3SplitsFusedTensorsAndWindowsEveryLayer) {
  ModelSpec s = load("phi3-mini-4k.json");
  EXPECT_EQ(kinds(s), std::string(32, 'W'));
  EXPECT_EQ(s.layers[7].span, 2047);
  EXPECT_EQ(s.head_dim, 96);
  EXPECT_EQ(s.tensor_sources.at("blk.0.attn_q.weight"), "model.layers.0.self_attn.qkv_proj.weight[rows 0:3072]");
  EXPECT_EQ(s.tensor_sources.at("blk.0.attn_v.weight"), "model.layers.0.self_attn.qkv_proj.weight[rows 6144:9216]");
  EXPECT_EQ(s.tensor_sources.at("blk.0.ffn_up.weight"), "model.layers.0.mlp.gate_up_proj.weight[rows 8192:16384]");
  TensorSourceRef r = parse_tensor_source(s.tensor_sources.at("blk.0.attn_k.weight"));
  EXPECT_EQ(r.name, "model.layers.0.self_attn.qkv_proj.weight");
  EXPECT_EQ(r.row_begin, 3072);
  EXPECT_EQ(r.row_end, 6144);
}

// DeepSeek-V2-Lite: latent attention (q_proj, no q_lora), YaRN whose mscale_all_dim grows the
// softmax scale, layer 0 dense, 64 experts (top 6, softmax, not renormalised) and 2 shared ones.
TEST(HfConfig, DeepSeekV2LiteLatentAttentionAndExperts) {
  ModelSpec s = load("deepseek-v2-lite.json");
  EXPECT_EQ(s.family, "deepseek_v2");
  EXPECT_EQ(s.kv_lora_rank, 512);
  EXPECT_EQ(s.q_lora_rank, 0);
  EXPECT_EQ(s.qk_nope_dim, 128);
  EXPECT_EQ(s.rope_dim, 64);
  EXPECT_EQ(s.v_head_dim, 128);
  EXPECT_EQ(s.head_dim, 192);
  EXPECT_TRUE(s.rope_interleaved);
  const double m = 0.1 * 0.707 * std::log(40.0) + 1.0;
  EXPECT_NEAR(s.attn_scale, m * m / std::sqrt(192.0), 1e-7);
  EXPECT_EQ(s.rope_scaling.type, RopeScalingType::Yarn);
  EXPECT_FLOAT_EQ(s.rope_scaling.attn_factor, 1.0f);  // mscale == mscale_all_dim
  EXPECT_FALSE(s.layers[0].moe);
  for (int i = 1; i < 27; ++i) EXPECT_TRUE(s.layers[static_cast<size_t>(i)].moe) << i;
  EXPECT_EQ(s.n_experts, 64);
  EXPECT_EQ(s.n_experts_used, 6);
  EXPECT_EQ(s.expert_ffn_size, 1408);
  EXPECT_EQ(s.shared_expert_ffn_size, 2 * 1408);
  EXPECT_FALSE(s.shared_expert_gate);
  EXPECT_FALSE(s.norm_topk_prob);
  EXPECT_EQ(s.expert_groups, 0);  // n_group 1: no restriction
  EXPECT_FLOAT_EQ(s.expert_routed_scale, 1.0f);
  EXPECT_EQ(s.tensor_sources.at("blk.3.attn_q.weight"), "model.layers.3.self_attn.q_proj.weight");
  EXPECT_EQ(s.tensor_sources.at("blk.3.attn_k_b.weight"),
            "model.layers.3.self_attn.kv_b_proj.weight[head rows 0:128 of 256] (transposed in 16 blocks)");
  EXPECT_EQ(s.tensor_sources.at("blk.3.attn_v_b.weight"), "model.layers.3.self_attn.kv_b_proj.weight[head rows 128:256 of 256]");
  EXPECT_EQ(s.tensor_sources.at("blk.3.ffn_up_shexp.weight"), "model.layers.3.mlp.shared_experts.up_proj.weight");
  EXPECT_EQ(canonical_tensor_shape(s, "blk.3.attn_k_b.weight"), (std::vector<int64_t>{16 * 512, 128}));
  EXPECT_EQ(canonical_tensor_shape(s, "blk.3.attn_v_b.weight"), (std::vector<int64_t>{16 * 128, 512}));
  EXPECT_EQ(canonical_tensor_shape(s, "blk.3.attn_kv_a_mqa.weight"), (std::vector<int64_t>{512 + 64, 2048}));
  EXPECT_EQ(canonical_tensor_shape(s, "blk.3.attn_output.weight"), (std::vector<int64_t>{2048, 16 * 128}));
  // The new source forms read back as written.
  const TensorSourceRef r = parse_tensor_source(s.tensor_sources.at("blk.3.attn_k_b.weight"));
  EXPECT_EQ(r.head_begin, 0);
  EXPECT_EQ(r.head_end, 128);
  EXPECT_EQ(r.head_period, 256);
  EXPECT_EQ(r.transposed_blocks, 16);
  EXPECT_EQ(format_tensor_source(r), s.tensor_sources.at("blk.3.attn_k_b.weight"));
  for (const char* bad : {"w[head rows 3:2 of 8]", "w[head rows 0:9 of 8]", "w (transposed in 0 blocks)", "w[head rows 0:2 8]"})
    EXPECT_THROW(parse_tensor_source(bad), Error) << bad;
  EXPECT_NE(describe_model_spec(s).find("latent attention (kv rank 512, nope 128 + rope 64, v 128)"), std::string::npos)
      << describe_model_spec(s);
}

TEST(HfConfig, SmolLM3NoRopeEveryFourthLayerAndUnusedWindow) {
  ModelSpec s = load("smollm3-3b.json");
  std::string expect;
  for (int i = 0; i < 36; ++i) expect += (i + 1) % 4 == 0 ? 'f' : 'F';
  EXPECT_EQ(kinds(s), expect);
  EXPECT_TRUE(s.tie_word_embeddings);
}

TEST(HfConfig, Llama4ChunkedRopeLayersAndFullNoPeLayers) {
  ModelSpec s = load("llama4-tiny-dense.json");
  EXPECT_EQ(kinds(s), "CCCf");
  EXPECT_EQ(s.layers[0].span, 32);
  EXPECT_EQ(s.intermediate_size, 192);  // intermediate_size_mlp for dense layers
  EXPECT_TRUE(s.qk_l2_norm);
  EXPECT_FLOAT_EQ(s.attn_temperature_scale, 0.1f);
  EXPECT_EQ(s.attn_temperature_floor, 8192);
  EXPECT_EQ(s.tensor_sources.at("blk.1.attn_q.weight"), "model.layers.1.self_attn.q_proj.weight (interleaved, 4 heads)");
  EXPECT_EQ(s.tensor_sources.at("blk.1.attn_k.weight"), "model.layers.1.self_attn.k_proj.weight (interleaved, 2 heads)");
  EXPECT_EQ(s.tensor_sources.at("blk.1.ffn_gate.weight"), "model.layers.1.feed_forward.gate_proj.weight");
}

// Llama 4's experts: the layers moe_layers lists, or without it every interleave_moe_layer_step-th
// (transformers' default 1: all); 16 experts and one per token unless the config says otherwise;
// sigmoid scores on the experts' input, an ungated shared expert of the experts' width.
TEST(HfConfig, Llama4MixtureOfExpertsLayers) {
  nlohmann::json c = nlohmann::json::parse(read_text_file(std::string(PTN_TEST_DATA) + "/formats/configs/llama4-tiny-dense.json"));
  c.erase("moe_layers");
  c.erase("num_local_experts");
  ModelSpec s = model_spec_from_hf_config(c, "cfg.json");
  EXPECT_EQ(s.n_experts, 16);
  EXPECT_EQ(s.n_experts_used, 1);
  EXPECT_EQ(s.expert_ffn_size, 128);         // intermediate_size
  EXPECT_EQ(s.shared_expert_ffn_size, 128);
  EXPECT_EQ(s.intermediate_size, 192);       // intermediate_size_mlp, for dense layers
  EXPECT_TRUE(s.expert_sigmoid && s.expert_weight_input && !s.shared_expert_gate && !s.norm_topk_prob);
  for (const LayerAttention& l : s.layers) EXPECT_TRUE(l.moe);
  c["interleave_moe_layer_step"] = 2;
  c["num_local_experts"] = 4;
  c["num_experts_per_tok"] = 2;
  s = model_spec_from_hf_config(c, "cfg.json");
  EXPECT_EQ(s.n_experts, 4);
  EXPECT_EQ(s.n_experts_used, 2);
  EXPECT_FALSE(s.layers[0].moe);
  EXPECT_TRUE(s.layers[1].moe);
  EXPECT_FALSE(s.layers[2].moe);
  EXPECT_TRUE(s.layers[3].moe);
  EXPECT_EQ(s.tensor_sources.at("blk.1.ffn_gate_inp.weight"), "model.layers.1.feed_forward.router.weight");
  EXPECT_EQ(s.tensor_sources.at("blk.1.ffn_gate.2.weight"), "model.layers.1.feed_forward.experts.gate_up_proj[rows 0:128][expert 2] (transposed)");
  EXPECT_EQ(s.tensor_sources.at("blk.1.ffn_up.2.weight"), "model.layers.1.feed_forward.experts.gate_up_proj[rows 128:256][expert 2] (transposed)");
  EXPECT_EQ(s.tensor_sources.at("blk.3.ffn_down.0.weight"), "model.layers.3.feed_forward.experts.down_proj[expert 0] (transposed)");
  EXPECT_EQ(s.tensor_sources.at("blk.3.ffn_up_shexp.weight"), "model.layers.3.feed_forward.shared_expert.up_proj.weight");
  EXPECT_EQ(s.tensor_sources.count("blk.3.ffn_gate_inp_shexp.weight"), 0u);
  EXPECT_EQ(s.tensor_sources.at("blk.2.ffn_gate.weight"), "model.layers.2.feed_forward.gate_proj.weight");
  c["moe_layers"] = {0};
  s = model_spec_from_hf_config(c, "cfg.json");
  EXPECT_TRUE(s.layers[0].moe);
  EXPECT_FALSE(s.layers[1].moe || s.layers[2].moe || s.layers[3].moe);
  c["moe_layers"] = nlohmann::json::array();
  s = model_spec_from_hf_config(c, "cfg.json");
  EXPECT_EQ(s.n_experts, 0);
}

TEST(HfConfig, YarnAndLinearRopeScaling) {
  nlohmann::json c = nlohmann::json::parse(read_text_file(std::string(PTN_TEST_DATA) + "/formats/configs/qwen2.5-0.5b.json"));
  c["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  ModelSpec s = model_spec_from_hf_config(c, "cfg.json");
  EXPECT_EQ(s.rope_scaling.type, RopeScalingType::Yarn);
  EXPECT_FLOAT_EQ(s.rope_scaling.factor, 4.0f);
  EXPECT_EQ(s.rope_scaling.original_max_position, 32768);
  EXPECT_FLOAT_EQ(s.rope_scaling.beta_fast, 32.0f);
  EXPECT_FLOAT_EQ(s.rope_scaling.beta_slow, 1.0f);
  EXPECT_NEAR(s.rope_scaling.attn_factor, 0.1 * std::log(4.0) + 1.0, 1e-6);
  c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  s = model_spec_from_hf_config(c, "cfg.json");
  EXPECT_EQ(s.rope_scaling.type, RopeScalingType::Linear);
  EXPECT_FLOAT_EQ(s.rope_scaling.factor, 2.0f);
  c["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(model_spec_from_hf_config(c, "cfg.json").rope_scaling.type, RopeScalingType::None);
  c["rope_scaling"] = nullptr;
  c["partial_rotary_factor"] = 0.5;
  EXPECT_EQ(model_spec_from_hf_config(c, "cfg.json").rope_dim, 32);
}

void expect_error(const nlohmann::json& j, ErrorKind kind, const std::string& needle) {
  try {
    model_spec_from_hf_config(j, "cfg.json");
    FAIL() << "no error for " << j.dump();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cfg.json"), std::string::npos) << e.what();
  }
}

nlohmann::json fixture(const std::string& name) {
  return nlohmann::json::parse(read_text_file(std::string(PTN_TEST_DATA) + "/formats/configs/" + name));
}

// Every field of the spec that the graph or the cache reads, per layer too.
// A spec of `family` with E experts, k per token, of width F, the top-k renormalised, no shared expert.
void expect_routed_experts(const ModelSpec& s, const char* family, int64_t E, int64_t k, int64_t F) {
  EXPECT_EQ(s.family, family);
  EXPECT_EQ(s.n_experts, E);
  EXPECT_EQ(s.n_experts_used, k);
  EXPECT_EQ(s.expert_ffn_size, F);
  EXPECT_TRUE(s.norm_topk_prob);
  EXPECT_EQ(s.shared_expert_ffn_size, 0);
}

void expect_same_spec(const ModelSpec& a, const ModelSpec& b) {
  EXPECT_EQ(describe_model_spec(a), describe_model_spec(b));
  EXPECT_EQ(a.rope_dim, b.rope_dim);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  const RopeScaling &x = a.rope_scaling, &y = b.rope_scaling;
  EXPECT_EQ(x.type, y.type);
  EXPECT_EQ(x.factor, y.factor);
  EXPECT_EQ(x.low_freq_factor, y.low_freq_factor);
  EXPECT_EQ(x.high_freq_factor, y.high_freq_factor);
  EXPECT_EQ(x.original_max_position, y.original_max_position);
  EXPECT_EQ(x.beta_fast, y.beta_fast);
  EXPECT_EQ(x.beta_slow, y.beta_slow);
  EXPECT_EQ(x.attn_factor, y.attn_factor);
  EXPECT_EQ(x.yarn_truncate, y.yarn_truncate);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    EXPECT_EQ(a.layers[i].kind, b.layers[i].kind) << i;
    EXPECT_EQ(a.layers[i].span, b.layers[i].span) << i;
    EXPECT_EQ(a.layers[i].use_rope, b.layers[i].use_rope) << i;
    EXPECT_EQ(a.layers[i].rope_theta, b.layers[i].rope_theta) << i;
    EXPECT_EQ(a.layers[i].rope_scaling, b.layers[i].rope_scaling) << i;
  }
  EXPECT_EQ(a.tensor_sources, b.tensor_sources);
}

// transformers 5 writes rope_parameters (theta inside) instead of rope_theta + rope_scaling.
TEST(HfConfig, V5FlatRopeParametersGiveTheV4Spec) {
  nlohmann::json v4 = fixture("llama3.2-1b.json");
  nlohmann::json v5 = v4;
  v5.erase("rope_theta");
  v5.erase("rope_scaling");
  v5["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 32.0}, {"low_freq_factor", 1.0},
                           {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  const ModelSpec a = model_spec_from_hf_config(v4, "v4.json"), b = model_spec_from_hf_config(v5, "v5.json");
  EXPECT_EQ(b.rope_scaling.type, RopeScalingType::Llama3);
  EXPECT_EQ(b.rope_scaling.original_max_position, 8192);
  expect_same_spec(a, b);
  // original_max_position_embeddings may stay outside (standardize_rope_params moves it in).
  v5["rope_parameters"].erase("original_max_position_embeddings");
  v5["original_max_position_embeddings"] = 8192;
  expect_same_spec(a, model_spec_from_hf_config(v5, "v5.json"));
  // partial_rotary_factor inside rope_parameters.
  nlohmann::json p4 = v4, p5 = v5;
  p4["partial_rotary_factor"] = 0.5;
  p5["rope_parameters"]["partial_rotary_factor"] = 0.5;
  EXPECT_EQ(model_spec_from_hf_config(p5, "v5.json").rope_dim, 32);
  expect_same_spec(model_spec_from_hf_config(p4, "v4.json"), model_spec_from_hf_config(p5, "v5.json"));
  // A default-type rope_parameters only moves the base.
  nlohmann::json q = fixture("qwen3-0.6b.json");
  nlohmann::json q5 = q;
  q5.erase("rope_theta");
  q5["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", q["rope_theta"]}};
  expect_same_spec(model_spec_from_hf_config(q, "v4.json"), model_spec_from_hf_config(q5, "v5.json"));
}

// Gemma 3 in transformers 5: one entry per layer type, the linear x8 on the global layers only.
TEST(HfConfig, V5NestedGemma3RopeParametersGiveTheV4Spec) {
  nlohmann::json v4 = fixture("gemma3-4b-layer-types.json");
  nlohmann::json v5 = v4;
  v5["text_config"].erase("rope_scaling");
  v5["text_config"]["rope_parameters"] = {
      {"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1000000.0}}},
      {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
  const ModelSpec a = model_spec_from_hf_config(v4, "v4.json"), b = model_spec_from_hf_config(v5, "v5.json");
  EXPECT_EQ(b.rope_scaling.type, RopeScalingType::Linear);
  EXPECT_FLOAT_EQ(b.rope_scaling.factor, 8.0f);
  EXPECT_FLOAT_EQ(b.layers[0].rope_theta, 10000.0f);  // sliding: local base, unscaled
  EXPECT_FALSE(b.layers[0].rope_scaling);
  EXPECT_FLOAT_EQ(b.layers[1].rope_theta, 1000000.0f);  // global: scaled
  EXPECT_TRUE(b.layers[1].rope_scaling);
  expect_same_spec(a, b);
  // Bases left out of the entries come from rope_theta / rope_local_base_freq (or the defaults).
  v5["text_config"]["rope_parameters"]["full_attention"].erase("rope_theta");
  v5["text_config"]["rope_parameters"]["sliding_attention"].erase("rope_theta");
  expect_same_spec(a, model_spec_from_hf_config(v5, "v5.json"));
  v5["text_config"]["rope_parameters"]["sliding_attention"] = nullptr;  // null entry: the default at the local base
  expect_same_spec(a, model_spec_from_hf_config(v5, "v5.json"));
  v5["text_config"]["rope_local_base_freq"] = 20000.0;
  nlohmann::json v4b = v4;
  v4b["text_config"]["rope_local_base_freq"] = 20000.0;
  expect_same_spec(model_spec_from_hf_config(v4b, "v4.json"), model_spec_from_hf_config(v5, "v5.json"));
  // The 1B (no scaling): v4 and v5 agree too.
  nlohmann::json g = fixture("gemma3-1b.json");
  nlohmann::json g5 = g;
  g5.erase("rope_theta");
  g5.erase("rope_local_base_freq");
  g5.erase("rope_scaling");
  g5["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", g.value("rope_theta", 1000000.0)}}},
                           {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", g.value("rope_local_base_freq", 10000.0)}}}};
  expect_same_spec(model_spec_from_hf_config(g, "v4.json"), model_spec_from_hf_config(g5, "v5.json"));
}

TEST(HfConfig, YarnWithMscaleAndTruncate) {
  nlohmann::json c = fixture("qwen2.5-0.5b.json");
  c.erase("rope_scaling");
  c["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1000000.0}, {"factor", 40.0}, {"mscale", 1.0},
                          {"mscale_all_dim", 0.707}, {"original_max_position_embeddings", 4096}, {"beta_fast", 16}};
  ModelSpec s = model_spec_from_hf_config(c, "cfg.json");
  EXPECT_EQ(s.rope_scaling.type, RopeScalingType::Yarn);
  // (0.1 * 1 * ln 40 + 1) / (0.1 * 0.707 * ln 40 + 1)
  EXPECT_NEAR(s.rope_scaling.attn_factor, (0.1 * std::log(40.0) + 1) / (0.1 * 0.707 * std::log(40.0) + 1), 1e-6);
  EXPECT_FLOAT_EQ(s.rope_scaling.beta_fast, 16.0f);
  EXPECT_TRUE(s.rope_scaling.yarn_truncate);
  c["rope_parameters"]["truncate"] = false;
  c["rope_parameters"]["attention_factor"] = 1.25;
  s = model_spec_from_hf_config(c, "cfg.json");
  EXPECT_FALSE(s.rope_scaling.yarn_truncate);
  EXPECT_FLOAT_EQ(s.rope_scaling.attn_factor, 1.25f);
}

// Phi-3.5 mini's longrope: short_factor divides the frequencies, the attention factor comes from
// max_position_embeddings / original_max_position_embeddings, and positions stop at the original
// context (past it transformers switches whole steps to long_factor).
TEST(HfConfig, LongRopeUsesShortFactorsWithinTheOriginalContext) {
  nlohmann::json v4 = fixture("phi3-mini-4k.json");  // head_dim 96: 48 pairs
  std::vector<double> shorts, longs;
  for (int i = 0; i < 48; ++i) { shorts.push_back(1.0 + 0.01 * i); longs.push_back(1.5 + 0.5 * i); }
  v4["max_position_embeddings"] = 131072;
  v4["original_max_position_embeddings"] = 4096;
  v4["rope_scaling"] = {{"type", "longrope"}, {"short_factor", shorts}, {"long_factor", longs}};
  ModelSpec s = model_spec_from_hf_config(v4, "cfg.json");
  EXPECT_EQ(s.rope_scaling.type, RopeScalingType::LongRope);
  EXPECT_EQ(s.rope_scaling.freq_divisors, shorts);
  EXPECT_NEAR(s.rope_scaling.attn_factor, std::sqrt(1 + std::log(32.0) / std::log(4096.0)), 1e-6);
  EXPECT_EQ(s.max_position_embeddings, 4096);
  bool noted = false;
  for (const auto& n : s.source_notes) noted = noted || n.find("positions limited to original_max_position_embeddings 4096") != std::string::npos;
  EXPECT_TRUE(noted);
  // The v5 form gives the same spec.
  nlohmann::json v5 = v4;
  v5.erase("rope_scaling");
  v5.erase("rope_theta");
  v5["rope_parameters"] = {{"rope_type", "longrope"}, {"rope_theta", v4.value("rope_theta", 10000.0)}, {"short_factor", shorts},
                           {"long_factor", longs}, {"original_max_position_embeddings", 4096}};
  expect_same_spec(s, model_spec_from_hf_config(v5, "v5.json"));
  // Phi-4-mini: partial rotary 0.75 of 128 -> 48 pairs as well.
  nlohmann::json p4 = v4;
  p4["hidden_size"] = 3072;
  p4["num_attention_heads"] = 24;
  p4["num_key_value_heads"] = 8;
  p4["partial_rotary_factor"] = 0.75;
  EXPECT_EQ(model_spec_from_hf_config(p4, "cfg.json").rope_dim, 96);
  p4["partial_rotary_factor"] = 0.5;
  expect_error(p4, ErrorKind::Corrupt, "field 'rope_scaling.short_factor'");
  nlohmann::json bad = v4;
  bad["rope_scaling"]["long_factor"] = {1.0};
  expect_error(bad, ErrorKind::Corrupt, "long_factor");
  bad["rope_scaling"].erase("long_factor");
  expect_error(bad, ErrorKind::Corrupt, "long_factor");
  bad = v4;
  bad["rope_scaling"]["short_factor"][3] = -1.0;
  expect_error(bad, ErrorKind::Corrupt, "short_factor");
}

TEST(HfConfig, BiasesFollowEachFamilysModeling) {
  nlohmann::json l = fixture("llama3.2-1b.json");
  l["attention_bias"] = true;
  ModelSpec s = model_spec_from_hf_config(l, "cfg.json");
  EXPECT_TRUE(s.attn_bias);
  EXPECT_TRUE(s.attn_output_bias);  // LlamaAttention: o_proj too
  EXPECT_EQ(s.tensor_sources.at("blk.2.attn_output.bias"), "model.layers.2.self_attn.o_proj.bias");
  EXPECT_FALSE(s.mlp_bias);
  l["mlp_bias"] = true;
  s = model_spec_from_hf_config(l, "cfg.json");
  EXPECT_TRUE(s.mlp_bias);
  EXPECT_EQ(s.tensor_sources.at("blk.0.ffn_gate.bias"), "model.layers.0.mlp.gate_proj.bias");
  EXPECT_EQ(s.tensor_sources.at("blk.0.ffn_down.bias"), "model.layers.0.mlp.down_proj.bias");
  EXPECT_EQ(canonical_tensor_shape(s, "blk.0.ffn_up.bias"), (std::vector<int64_t>{8192}));
  EXPECT_EQ(canonical_tensor_shape(s, "blk.0.attn_output.bias"), (std::vector<int64_t>{2048}));
  ModelSpec q = load("qwen2-window.json");  // Qwen2: q/k/v always, o_proj never
  EXPECT_TRUE(q.attn_bias);
  EXPECT_FALSE(q.attn_output_bias);
  EXPECT_EQ(q.tensor_sources.count("blk.0.attn_output.bias"), 0u);
  nlohmann::json m = fixture("mistral-7b.json");  // MistralAttention has no biases at all
  m["attention_bias"] = true;
  s = model_spec_from_hf_config(m, "cfg.json");
  EXPECT_FALSE(s.attn_bias);
  EXPECT_FALSE(s.attn_output_bias);
  nlohmann::json g = fixture("gemma2-2b.json");
  g["attention_bias"] = true;
  s = model_spec_from_hf_config(g, "cfg.json");
  EXPECT_TRUE(s.attn_output_bias);
}

TEST(HfConfig, RefusedRopeAndBiasFormsNameTheField) {
  nlohmann::json base = fixture("qwen2-window.json");
  auto with = [&](const char* key, nlohmann::json v) { nlohmann::json c = base; c[key] = std::move(v); return c; };
  expect_error(with("rope_scaling", {{"rope_type", "su"}}), ErrorKind::Unsupported, "field 'rope_scaling.rope_type'");
  expect_error(with("rope_parameters", {{"rope_type", "dynamic"}, {"rope_theta", 10000.0}}), ErrorKind::Unsupported,
               "field 'rope_parameters.rope_type'");
  expect_error(with("rope_parameters", {{"rope_type", "dynamic"}, {"factor", 2.0}}), ErrorKind::Unsupported, "'dynamic'");
  expect_error(with("rope_parameters", {{"type", "ntk-by-parts"}}), ErrorKind::Unsupported, "'ntk-by-parts'");
  nlohmann::json g = fixture("gemma3-4b-layer-types.json");
  g["text_config"].erase("rope_scaling");
  g["text_config"]["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}}},
                                         {"sliding_attention", {{"rope_type", "linear"}, {"factor", 2.0}}}};
  expect_error(g, ErrorKind::Unsupported, "scales RoPE differently");
  g["text_config"]["rope_parameters"] = {{"full_attention", {{"rope_type", "dynamic"}, {"factor", 2.0}}},
                                         {"sliding_attention", {{"rope_type", "default"}}}};
  expect_error(g, ErrorKind::Unsupported, "field 'rope_parameters.full_attention.rope_type'");
  g["text_config"]["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}}}};
  expect_error(g, ErrorKind::Corrupt, "no entry for 'sliding_attention'");
  g["text_config"]["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"partial_rotary_factor", 0.5}}},
                                         {"sliding_attention", {{"rope_type", "default"}}}};
  g["text_config"]["partial_rotary_factor"] = 1.0;
  expect_error(g, ErrorKind::Corrupt, "partial_rotary_factor");
  expect_error(with("mlp_bias", true), ErrorKind::Unsupported, "field 'mlp_bias'");
}

// Absent keys take the defaults of the family's transformers config class; null is None.
TEST(HfConfig, DefaultsAreTheConfigClasses) {
  nlohmann::json g = fixture("gemma2-2b.json");
  for (const char* k : {"sliding_window", "attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar"}) g.erase(k);
  ModelSpec s = model_spec_from_hf_config(g, "cfg.json");
  EXPECT_EQ(s.layers[0].kind, AttnKind::Window);
  EXPECT_EQ(s.layers[0].span, 4096);
  EXPECT_FLOAT_EQ(s.attn_logit_softcap, 50.0f);
  EXPECT_FLOAT_EQ(s.final_logit_softcap, 30.0f);
  EXPECT_FLOAT_EQ(s.attn_scale, 1.0f / 16.0f);
  g["final_logit_softcapping"] = nullptr;
  EXPECT_FLOAT_EQ(model_spec_from_hf_config(g, "cfg.json").final_logit_softcap, 0.0f);
  nlohmann::json m = fixture("mistral-7b.json");
  m.erase("sliding_window");
  EXPECT_EQ(model_spec_from_hf_config(m, "cfg.json").layers[5].span, 4096);
  m["sliding_window"] = nullptr;
  EXPECT_EQ(kinds(model_spec_from_hf_config(m, "cfg.json")), std::string(32, 'F'));
  nlohmann::json q = fixture("qwen2.5-0.5b.json");  // 24 layers
  q["use_sliding_window"] = true;
  q["num_hidden_layers"] = 30;
  q.erase("max_window_layers");
  EXPECT_EQ(kinds(model_spec_from_hf_config(q, "cfg.json")), std::string(28, 'F') + "WW");
  nlohmann::json p = fixture("phi3-mini-4k.json");
  p.erase("rms_norm_eps");
  EXPECT_FLOAT_EQ(model_spec_from_hf_config(p, "cfg.json").norm_eps, 1e-5f);
}

// The LayerNorm families: what each class's modeling reads, from small configs and the config
// classes' defaults; what ptn cannot run as written is refused by name.
TEST(HfConfig, LayerNormFamilies) {
  auto names_of = [](const ModelSpec& s) {
    const auto v = canonical_tensor_names(s);
    return std::set<std::string>(v.begin(), v.end());
  };
  // StableLM: LayerNorms with biases, a quarter of each head rotated (the default), sequential.
  nlohmann::json st = {{"architectures", {"StableLmForCausalLM"}}, {"hidden_size", 2048}, {"num_hidden_layers", 24},
                       {"num_attention_heads", 32}, {"intermediate_size", 5632}, {"vocab_size", 100352},
                       {"use_qkv_bias", true}};
  ModelSpec s = model_spec_from_hf_config(st, "cfg.json");
  EXPECT_EQ(s.family, "stablelm");
  EXPECT_TRUE(s.layer_norm && s.norm_bias && s.attn_bias);
  EXPECT_FALSE(s.attn_output_bias || s.mlp_bias || s.parallel_residual || s.plain_mlp || s.tie_word_embeddings);
  EXPECT_EQ(s.rope_dim, 16);  // 64 * 0.25
  EXPECT_FLOAT_EQ(s.norm_eps, 1e-5f);
  auto n = names_of(s);
  EXPECT_TRUE(n.count("blk.0.attn_norm.bias") && n.count("blk.0.ffn_norm.bias") && n.count("output_norm.bias"));
  st["use_parallel_residual"] = true;
  n = names_of(model_spec_from_hf_config(st, "cfg.json"));
  EXPECT_FALSE(n.count("blk.0.ffn_norm.weight") || n.count("blk.0.ffn_norm.bias"));
  st["qk_layernorm"] = true;
  expect_error(st, ErrorKind::Unsupported, "field 'qk_layernorm'");
  // Phi-2: parallel, no gate, biases everywhere and on lm_head; phi-2's own sizes.
  const nlohmann::json phi = {{"architectures", {"PhiForCausalLM"}}, {"hidden_size", 2560}, {"num_hidden_layers", 32},
                              {"num_attention_heads", 32}, {"intermediate_size", 10240}, {"vocab_size", 51200},
                              {"partial_rotary_factor", 0.4}};
  s = model_spec_from_hf_config(phi, "cfg.json");
  EXPECT_TRUE(s.layer_norm && s.norm_bias && s.parallel_residual && s.plain_mlp && s.output_bias);
  EXPECT_TRUE(s.attn_bias && s.attn_output_bias && s.mlp_bias);
  EXPECT_EQ(s.activation, Activation::GeLUTanh);  // gelu_new, PhiConfig's default
  EXPECT_EQ(s.rope_dim, 32);
  EXPECT_EQ(s.tensor_sources.at("output_norm.bias"), "model.final_layernorm.bias");
  EXPECT_EQ(s.tensor_sources.at("output.bias"), "lm_head.bias");
  EXPECT_EQ(s.tensor_sources.at("blk.3.attn_output.bias"), "model.layers.3.self_attn.dense.bias");
  EXPECT_EQ(s.tensor_sources.at("blk.3.ffn_up.weight"), "model.layers.3.mlp.fc1.weight");
  n = names_of(s);
  EXPECT_FALSE(n.count("blk.0.ffn_gate.weight") || n.count("blk.0.ffn_norm.weight"));
  nlohmann::json hd = phi;
  hd["head_dim"] = 64;  // PhiAttention takes hidden / heads = 80
  expect_error(hd, ErrorKind::Corrupt, "field 'head_dim'");
  hd["head_dim"] = 80;
  EXPECT_EQ(model_spec_from_hf_config(hd, "cfg.json").head_dim, 80);
  nlohmann::json silu = phi;
  silu["hidden_act"] = "silu";  // fc1 -> SiLU -> fc2: ptn's ungated MLP runs GELU only
  expect_error(silu, ErrorKind::Unsupported, "field 'hidden_act'");
  // Starcoder2: use_bias (default true) on q/k/v/o and the MLP, tied, a window on every layer.
  nlohmann::json sc = {{"architectures", {"Starcoder2ForCausalLM"}}, {"hidden_size", 3072}, {"num_hidden_layers", 30},
                       {"num_attention_heads", 24}, {"num_key_value_heads", 2}, {"intermediate_size", 12288},
                       {"vocab_size", 49152}, {"sliding_window", 4096}, {"norm_epsilon", 1e-5}};
  s = model_spec_from_hf_config(sc, "cfg.json");
  EXPECT_TRUE(s.attn_bias && s.attn_output_bias && s.mlp_bias && s.tie_word_embeddings && s.plain_mlp);
  EXPECT_FALSE(s.parallel_residual);
  EXPECT_EQ(kinds(s), std::string(30, 'W'));
  EXPECT_EQ(s.tensor_sources.at("blk.0.ffn_down.bias"), "model.layers.0.mlp.c_proj.bias");
  sc["use_bias"] = false;
  s = model_spec_from_hf_config(sc, "cfg.json");
  EXPECT_FALSE(s.attn_bias || s.attn_output_bias || s.mlp_bias);
  // Cohere: LayerNorm without bias, parallel, interleaved RoPE, logits times logit_scale, tied.
  nlohmann::json co = {{"architectures", {"CohereForCausalLM"}}, {"hidden_size", 8192}, {"num_hidden_layers", 40},
                       {"num_attention_heads", 64}, {"intermediate_size", 22528}, {"vocab_size", 256000}};
  s = model_spec_from_hf_config(co, "cfg.json");
  EXPECT_TRUE(s.layer_norm && s.parallel_residual && s.rope_interleaved && s.tie_word_embeddings);
  EXPECT_FALSE(s.norm_bias || s.attn_bias || s.plain_mlp);
  EXPECT_FLOAT_EQ(s.logit_scale, 16.0f);  // the graph divides: 1 / 0.0625
  n = names_of(s);
  EXPECT_FALSE(n.count("output_norm.bias") || n.count("blk.0.ffn_norm.weight"));
  EXPECT_NE(describe_model_spec(s).find("interleaved RoPE pairs"), std::string::npos) << describe_model_spec(s);
  co["use_qk_norm"] = true;
  expect_error(co, ErrorKind::Unsupported, "field 'use_qk_norm'");
  co["use_qk_norm"] = false;
  co["logit_scale"] = 0.0;
  expect_error(co, ErrorKind::Corrupt, "field 'logit_scale'");
}

// GPT-NeoX (Pythia): per-head fused q|k|v, 4.x RoPE keys or 5.x rope_parameters, the parallel
// MLP on its own norm, biases everywhere, untied embed_out.
TEST(HfConfig, GptNeoX) {
  // pythia-160m's config (4.x keys).
  nlohmann::json c = {{"architectures", {"GPTNeoXForCausalLM"}}, {"hidden_size", 768}, {"num_hidden_layers", 12},
                      {"num_attention_heads", 12}, {"intermediate_size", 3072}, {"vocab_size", 50304},
                      {"rotary_pct", 0.25}, {"rotary_emb_base", 10000}, {"hidden_act", "gelu"}, {"use_parallel_residual", true}};
  ModelSpec s = model_spec_from_hf_config(c, "cfg.json");
  EXPECT_EQ(s.family, "gptneox");
  EXPECT_TRUE(s.layer_norm && s.norm_bias && s.parallel_residual && s.parallel_ffn_norm && s.plain_mlp);
  EXPECT_TRUE(s.attn_bias && s.attn_output_bias && s.mlp_bias);
  EXPECT_FALSE(s.tie_word_embeddings || s.output_bias);
  EXPECT_EQ(s.activation, Activation::GeLU);
  EXPECT_EQ(s.rope_dim, 16);  // 64 * 0.25
  EXPECT_EQ(s.n_kv_heads, 12);
  EXPECT_EQ(s.tensor_sources.at("token_embd.weight"), "gpt_neox.embed_in.weight");
  EXPECT_EQ(s.tensor_sources.at("output.weight"), "embed_out.weight");
  EXPECT_EQ(s.tensor_sources.at("output_norm.bias"), "gpt_neox.final_layer_norm.bias");
  EXPECT_EQ(s.tensor_sources.at("blk.2.ffn_norm.weight"), "gpt_neox.layers.2.post_attention_layernorm.weight");
  // Head h's rows: q at 192h, k at 192h + 64, v at 192h + 128: every third block of 64 rows.
  EXPECT_EQ(s.tensor_sources.at("blk.2.attn_k.weight"), "gpt_neox.layers.2.attention.query_key_value.weight[rows 64:2304:3:64]");
  EXPECT_EQ(s.tensor_sources.at("blk.2.attn_v.bias"), "gpt_neox.layers.2.attention.query_key_value.bias[rows 128:2304:3:64]");
  const TensorSourceRef r = parse_tensor_source(s.tensor_sources.at("blk.2.attn_k.weight"));
  EXPECT_EQ(r.row_step, 3);
  EXPECT_EQ(r.row_block, 64);
  // transformers 5 keeps both RoPE keys in rope_parameters; the family's 0.25 is then not used.
  nlohmann::json v5 = c;
  v5.erase("rotary_pct");
  v5.erase("rotary_emb_base");
  v5["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 20000.0}, {"partial_rotary_factor", 0.5}};
  s = model_spec_from_hf_config(v5, "cfg.json");
  EXPECT_EQ(s.rope_dim, 32);
  EXPECT_FLOAT_EQ(s.rope_theta, 20000.0f);
  // Sequential layers keep ffn_norm as the MLP's pre-norm.
  c["use_parallel_residual"] = false;
  s = model_spec_from_hf_config(c, "cfg.json");
  EXPECT_FALSE(s.parallel_residual || s.parallel_ffn_norm);
  // attention_bias false drops the attention biases, never the MLP's.
  c["attention_bias"] = false;
  s = model_spec_from_hf_config(c, "cfg.json");
  EXPECT_FALSE(s.attn_bias || s.attn_output_bias);
  EXPECT_TRUE(s.mlp_bias);
  c["num_key_value_heads"] = 4;  // GPTNeoXAttention has no grouped-query attention
  expect_error(c, ErrorKind::Corrupt, "field 'num_key_value_heads'");
}

// GLM (glm-4-9b-hf) and GLM-4 (GLM-4-9B-0414): q/k/v biases from attention_bias (default true),
// gate|up fused, half of each head rotated on interleaved pairs; GLM-4's post-sublayer norms.
TEST(HfConfig, Glm) {
  nlohmann::json c = {{"architectures", {"Glm4ForCausalLM"}}, {"hidden_size", 4096}, {"num_hidden_layers", 40},
                      {"num_attention_heads", 32}, {"num_key_value_heads", 2}, {"head_dim", 128},
                      {"intermediate_size", 13696}, {"vocab_size", 151552}, {"rms_norm_eps", 1e-5}};
  ModelSpec s = model_spec_from_hf_config(c, "cfg.json");
  EXPECT_EQ(s.family, "glm4");
  EXPECT_TRUE(s.attn_bias && s.rope_interleaved && s.sandwich_norms && s.pre_norms);
  EXPECT_FALSE(s.attn_output_bias || s.mlp_bias || s.tie_word_embeddings || s.layer_norm || s.norm_weight_plus_one);
  EXPECT_EQ(s.rope_dim, 64);  // 128 * 0.5, Glm4Config's default
  EXPECT_EQ(s.tensor_sources.at("blk.1.post_attention_norm.weight"), "model.layers.1.post_self_attn_layernorm.weight");
  EXPECT_EQ(s.tensor_sources.at("blk.1.ffn_norm.weight"), "model.layers.1.post_attention_layernorm.weight");
  EXPECT_EQ(s.tensor_sources.at("blk.1.post_ffw_norm.weight"), "model.layers.1.post_mlp_layernorm.weight");
  EXPECT_EQ(s.tensor_sources.at("blk.1.ffn_up.weight"), "model.layers.1.mlp.gate_up_proj.weight[rows 13696:27392]");
  // transformers 5: partial_rotary_factor inside rope_parameters.
  nlohmann::json v5 = c;
  v5["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.25}};
  EXPECT_EQ(model_spec_from_hf_config(v5, "cfg.json").rope_dim, 32);
  c["attention_bias"] = false;
  c["architectures"] = {"GlmForCausalLM"};
  s = model_spec_from_hf_config(c, "cfg.json");
  EXPECT_EQ(s.family, "glm");
  EXPECT_FALSE(s.attn_bias || s.sandwich_norms);
  c["mlp_bias"] = true;  // GlmMLP has no biases
  expect_error(c, ErrorKind::Unsupported, "field 'mlp_bias'");
}

// Granite MoE (granite-3.0-1b-a400m's shapes): stacked experts, the multipliers; Granite MoE
// Shared adds an ungated shared MLP.
TEST(HfConfig, GraniteMoe) {
  nlohmann::json c = {{"architectures", {"GraniteMoeForCausalLM"}}, {"hidden_size", 1024}, {"num_hidden_layers", 24},
                      {"num_attention_heads", 16}, {"num_key_value_heads", 8}, {"intermediate_size", 512},
                      {"vocab_size", 49155}, {"num_local_experts", 32}, {"num_experts_per_tok", 8},
                      {"embedding_multiplier", 12.0}, {"attention_multiplier", 0.015625}, {"residual_multiplier", 0.22},
                      {"logits_scaling", 6.0}, {"tie_word_embeddings", true}};
  ModelSpec s = model_spec_from_hf_config(c, "cfg.json");
  expect_routed_experts(s, "granitemoe", 32, 8, 512);
  EXPECT_FLOAT_EQ(s.residual_scale, 0.22f);
  EXPECT_EQ(s.tensor_sources.at("blk.3.ffn_gate_inp.weight"), "model.layers.3.block_sparse_moe.router.layer.weight");
  EXPECT_EQ(s.tensor_sources.at("blk.3.ffn_up.5.weight"), "model.layers.3.block_sparse_moe.input_linear.weight[rows 512:1024][expert 5]");
  EXPECT_EQ(s.tensor_sources.at("blk.3.ffn_down.5.weight"), "model.layers.3.block_sparse_moe.output_linear.weight[expert 5]");
  c["architectures"] = {"GraniteMoeSharedForCausalLM"};
  EXPECT_EQ(model_spec_from_hf_config(c, "cfg.json").shared_expert_ffn_size, 0);  // shared_intermediate_size 0: none
  c["shared_intermediate_size"] = 1024;
  s = model_spec_from_hf_config(c, "cfg.json");
  EXPECT_EQ(s.family, "granitemoeshared");
  EXPECT_EQ(s.shared_expert_ffn_size, 1024);
  EXPECT_FALSE(s.shared_expert_gate);
  EXPECT_EQ(s.tensor_sources.at("blk.0.ffn_up_shexp.weight"), "model.layers.0.shared_mlp.input_linear.weight[rows 1024:2048]");
  EXPECT_EQ(s.tensor_sources.at("blk.0.ffn_down_shexp.weight"), "model.layers.0.shared_mlp.output_linear.weight");
  EXPECT_EQ(s.tensor_sources.count("blk.0.ffn_gate_inp_shexp.weight"), 0u);
}

// Ministral 3 (Ministral-3-3B's text config in kind): YaRN with mscale == mscale_all_dim (an
// attention factor of 1) and the query temperature on every layer from the rope parameters;
// Mistral3ForConditionalGeneration's text model decides the family.
TEST(HfConfig, Ministral3) {
  const nlohmann::json rp = {{"type", "yarn"}, {"rope_theta", 1000000.0}, {"factor", 16.0}, {"original_max_position_embeddings", 16384},
                             {"beta_fast", 32.0}, {"beta_slow", 1.0}, {"mscale", 1.0}, {"mscale_all_dim", 1.0},
                             {"llama_4_scaling_beta", 0.1}, {"max_position_embeddings", 262144}};
  nlohmann::json text = {{"model_type", "ministral3"}, {"hidden_size", 3072}, {"num_hidden_layers", 26}, {"num_attention_heads", 32},
                         {"num_key_value_heads", 8}, {"head_dim", 128}, {"intermediate_size", 9216}, {"vocab_size", 131072},
                         {"max_position_embeddings", 262144}, {"rope_parameters", rp}, {"sliding_window", nullptr},
                         {"tie_word_embeddings", true}};
  nlohmann::json c = text;
  c["architectures"] = {"Ministral3ForCausalLM"};
  ModelSpec s = model_spec_from_hf_config(c, "cfg.json");
  EXPECT_EQ(s.family, "ministral3");
  EXPECT_EQ(s.rope_scaling.type, RopeScalingType::Yarn);
  EXPECT_FLOAT_EQ(s.rope_scaling.attn_factor, 1.0f);
  EXPECT_FLOAT_EQ(s.attn_temperature_scale, 0.1f);
  EXPECT_EQ(s.attn_temperature_floor, 16384);
  EXPECT_TRUE(s.attn_temperature_all_layers);
  for (const LayerAttention& l : s.layers) EXPECT_EQ(l.kind, AttnKind::Full);
  // Ministral3Config's own defaults when the config leaves out rope_parameters.
  nlohmann::json bare = c;
  bare.erase("rope_parameters");
  s = model_spec_from_hf_config(bare, "cfg.json");
  EXPECT_EQ(s.rope_scaling.original_max_position, 16384);
  EXPECT_FLOAT_EQ(s.attn_temperature_scale, 0.1f);
  // beta 0: no temperature; no beta: refused by name (its modeling needs one).
  c["rope_parameters"]["llama_4_scaling_beta"] = 0.0;
  EXPECT_EQ(model_spec_from_hf_config(c, "cfg.json").attn_temperature_scale, 0.0f);
  c["rope_parameters"].erase("llama_4_scaling_beta");
  expect_error(c, ErrorKind::Corrupt, "rope_parameters.llama_4_scaling_beta");
  // The multimodal form: text_config's model_type names the text model.
  nlohmann::json mm = {{"architectures", {"Mistral3ForConditionalGeneration"}}, {"model_type", "mistral3"}, {"text_config", text}};
  EXPECT_EQ(model_spec_from_hf_config(mm, "cfg.json").family, "ministral3");
  mm["text_config"]["model_type"] = "mistral";  // Mistral Small 3.1 / 3.2
  mm["text_config"].erase("rope_parameters");
  mm["text_config"]["rope_theta"] = 1000000000.0;
  s = model_spec_from_hf_config(mm, "cfg.json");
  EXPECT_EQ(s.family, "mistral");
  EXPECT_EQ(s.attn_temperature_scale, 0.0f);
  mm["text_config"]["model_type"] = "pixtral";
  expect_error(mm, ErrorKind::Unsupported, "text_config.model_type");
}

// OLMo 2 (OLMo-2-1124-7B's config as Olmo2Config defaults it): no norm before attention or the
// MLP, the post-norms on their outputs, q/k norms over all heads; Olmo2Config's defaults.
TEST(HfConfig, Olmo2PostNormsOnly) {
  const nlohmann::json c = {{"architectures", {"Olmo2ForCausalLM"}}, {"hidden_size", 4096}, {"num_hidden_layers", 32},
                            {"num_attention_heads", 32}, {"intermediate_size", 11008}, {"vocab_size", 100352}};
  const ModelSpec s = model_spec_from_hf_config(c, "cfg.json");
  EXPECT_EQ(s.family, "olmo2");
  EXPECT_FALSE(s.pre_norms);
  EXPECT_TRUE(s.sandwich_norms);
  EXPECT_TRUE(s.qk_norm && s.qk_norm_full);
  EXPECT_FALSE(s.tie_word_embeddings);
  EXPECT_FLOAT_EQ(s.norm_eps, 1e-5f);
  EXPECT_EQ(s.n_kv_heads, 32);
  const auto names = canonical_tensor_names(s);
  auto has = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  EXPECT_FALSE(has("blk.0.attn_norm.weight"));
  EXPECT_FALSE(has("blk.0.ffn_norm.weight"));
  EXPECT_TRUE(has("blk.0.post_attention_norm.weight"));
  EXPECT_TRUE(has("blk.31.post_ffw_norm.weight"));
  EXPECT_TRUE(has("blk.0.attn_q_norm.weight"));
  EXPECT_NE(describe_model_spec(s).find("post-norms only"), std::string::npos) << describe_model_spec(s);
}

// Mixtral 8x7B's dimensions: 8 experts of the FFN's width on every layer, top-2 renormalised,
// each expert's w1 / w3 / w2 the canonical gate / up / down of that expert.
TEST(HfConfig, MixtralExperts) {
  const nlohmann::json j = nlohmann::json::parse(read_text_file(std::string(PTN_TEST_DATA) + "/formats/configs/mixtral.json"));
  const ModelSpec s = model_spec_from_hf_config(j, "cfg.json");
  expect_routed_experts(s, "mixtral", 8, 2, 14336);
  for (const LayerAttention& l : s.layers) EXPECT_TRUE(l.moe);
  EXPECT_EQ(s.tensor_sources.at("blk.3.ffn_gate_inp.weight"), "model.layers.3.block_sparse_moe.gate.weight");
  EXPECT_EQ(s.tensor_sources.at("blk.3.ffn_down.7.weight"), "model.layers.3.block_sparse_moe.experts.7.w2.weight");
  EXPECT_EQ(s.tensor_sources.at("blk.0.ffn_up.0.weight"), "model.layers.0.block_sparse_moe.experts.0.w3.weight");
  EXPECT_EQ(s.tensor_sources.count("blk.0.ffn_up.weight"), 0u);
  EXPECT_EQ(canonical_tensor_shape(s, "blk.3.ffn_down.7.weight"), (std::vector<int64_t>{4096, 14336}));
  EXPECT_EQ(canonical_tensor_shape(s, "blk.3.ffn_down.8.weight"), std::vector<int64_t>{});  // no ninth expert
  EXPECT_EQ(canonical_tensor_shape(s, "blk.3.ffn_gate_inp.weight"), (std::vector<int64_t>{8, 4096}));
}

// Qwen3-MoE: which layers are sparse (decoder_sparse_step, mlp_only_layers), the two widths.
TEST(HfConfig, Qwen3MoeLayers) {
  nlohmann::json j = {{"architectures", {"Qwen3MoeForCausalLM"}}, {"vocab_size", 1000}, {"hidden_size", 64},
                      {"intermediate_size", 96}, {"moe_intermediate_size", 32}, {"num_hidden_layers", 6},
                      {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
                      {"num_experts", 16}, {"num_experts_per_tok", 4}, {"decoder_sparse_step", 2},
                      {"mlp_only_layers", {3}}};
  const ModelSpec s = model_spec_from_hf_config(j, "cfg.json");
  std::string moe;
  for (const LayerAttention& l : s.layers) moe += l.moe ? 'E' : 'D';
  EXPECT_EQ(moe, "DEDDDE");  // (i + 1) % 2 == 0, except layer 3
  EXPECT_FALSE(s.norm_topk_prob);  // Qwen3MoeConfig's default
  EXPECT_TRUE(s.qk_norm);
  EXPECT_EQ(s.tensor_sources.at("blk.1.ffn_gate.15.weight"), "model.layers.1.mlp.experts.15.gate_proj.weight");
  EXPECT_EQ(s.tensor_sources.at("blk.3.ffn_gate.weight"), "model.layers.3.mlp.gate_proj.weight");
  EXPECT_EQ(canonical_tensor_shape(s, "blk.1.ffn_gate.15.weight"), (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(canonical_tensor_shape(s, "blk.3.ffn_gate.weight"), (std::vector<int64_t>{96, 64}));
}

TEST(HfConfig, UnsupportedAndBadConfigs) {
  expect_error(nlohmann::json::parse(R"({"architectures": ["FalconForCausalLM"]})"), ErrorKind::Unsupported, "FalconForCausalLM");
  expect_error(nlohmann::json::parse(R"({"hidden_size": 4})"), ErrorKind::Corrupt, "architectures");
  nlohmann::json dsv2 = nlohmann::json::parse(read_text_file(std::string(PTN_TEST_DATA) + "/formats/configs/mixtral.json"));
  dsv2["architectures"] = {"DeepseekV2ForCausalLM"};
  expect_error(dsv2, ErrorKind::Corrupt, "DeepSeek V2's latent attention");  // Mixtral's grouped k/v heads
  nlohmann::json l4 = nlohmann::json::parse(read_text_file(std::string(PTN_TEST_DATA) + "/formats/configs/llama4-tiny-dense.json"));
  l4["moe_layers"] = {1, 7};
  expect_error(l4, ErrorKind::Corrupt, "moe_layers");
  l4["moe_layers"] = "all";
  expect_error(l4, ErrorKind::Corrupt, "moe_layers");
  nlohmann::json base = nlohmann::json::parse(read_text_file(std::string(PTN_TEST_DATA) + "/formats/configs/qwen2-window.json"));
  auto bad = base; bad["num_hidden_layers"] = "four";
  expect_error(bad, ErrorKind::Corrupt, "num_hidden_layers");
  bad = base; bad["num_key_value_heads"] = 3;
  expect_error(bad, ErrorKind::Corrupt, "num_key_value_heads");
  bad = base; bad["layer_types"] = {"full_attention"};
  expect_error(bad, ErrorKind::Corrupt, "layer_types");
  bad = base; bad["rope_scaling"] = {{"rope_type", "longrope"}};
  expect_error(bad, ErrorKind::Corrupt, "short_factor");
  bad = base; bad.erase("vocab_size");
  expect_error(bad, ErrorKind::Corrupt, "vocab_size");
  bad = base; bad["hidden_act"] = "relu2";
  expect_error(bad, ErrorKind::Unsupported, "relu2");
  bad = base; bad["hidden_act"] = "quick_gelu";  // x sigmoid(1.702 x): neither GELU ptn has
  expect_error(bad, ErrorKind::Unsupported, "quick_gelu");
  bad = base; bad["hidden_act"] = "gelu_new";
  EXPECT_EQ(model_spec_from_hf_config(bad, "cfg.json").activation, Activation::GeLUTanh);
  bad["hidden_act"] = "gelu";
  EXPECT_EQ(model_spec_from_hf_config(bad, "cfg.json").activation, Activation::GeLU);
}

}  // namespace
}  // namespace ptn
