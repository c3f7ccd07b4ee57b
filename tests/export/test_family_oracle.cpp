// Every family ptn builds, against a forward pass that ptn did not compute: tests/oracle/hf_forward.py,
// written in float64 NumPy from the math of Hugging Face's modeling classes, reads the same
// config.json and model.safetensors and writes the logits of every position. Each case is a tiny
// config that keeps its family's features (biases, q/k norms, soft-caps, sandwich norms, window /
// chunk / NoPE layers, RoPE scalings, v4 and v5 config forms) with random weights whose norms and
// biases are far from 1 and 0, exported by ptn and run by the optimized executor with the paged
// cache: a prompt longer than every window as one step (every row's logits), then one token a step.
// Where the family has a GGUF architecture that can express the case, the same weights also go
// through ptn's GGUF writer and GGUF import and must match the oracle as well.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>

#include "core/file.h"
#include "core/fp16.h"
#include "../oracle_test_util.h"
#include "export_test_util.h"
#include "formats/families.h"
#include "formats/gguf_writer.h"
#include "formats/random_weights.h"
#include "formats/safetensors.h"
#include "formats/synth.h"

namespace ptn::testing {
namespace {

using json = nlohmann::json;
using Rows = std::vector<std::vector<double>>;

constexpr int kWindow = 5;  // sliding windows; chunks are kWindow + 1
const std::vector<int32_t> kTokens = {1, 17, 42, 5, 90, 3, 271, 8, 61, 212, 7, 88, 4, 155, 33, 9, 277, 2, 18, 240};
constexpr size_t kPrompt = 12;  // the first step; the other tokens follow one a step

// ---- the oracle's interpreter ----------------------------------------------------------------

// ---- a case's HF directory -------------------------------------------------------------------

bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// `config` as an HF directory with random values in every tensor (names and shapes from ptn's
// writer; values from here): matrices of standard deviation 1/sqrt(columns), the embedding 1,
// norm weights 1 +- 0.3 (Gemma: 0 +- 0.3, its norms scale by 1 + w), biases +- 0.3; stored as `dtype`.
std::string make_model(const TempDir& d, const std::string& name, const json& config, DType dtype, uint64_t seed,
                       bool embedding_as_lm_head, bool multimodal_names) {
  const std::string dir = d / name;
  write_hf_directory(*random_weights(model_spec_from_hf_config(config, name), 1), config, dir, DType::F32);
  const std::string family = model_spec_from_hf_config(config, name).family;
  const bool plus_one = family == "gemma2" || family == "gemma3";
  auto st = SafetensorsSet::open_file(dir + "/model.safetensors");
  std::mt19937_64 rng(seed);
  auto u = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-52 - 1.0; };  // uniform [-1, 1)
  std::vector<SafetensorsEntry> entries;
  for (const std::string& n : st->names()) {
    Tensor src = st->tensor(n);
    const std::vector<int64_t> shape = src.shape();
    std::vector<float> v(static_cast<size_t>(src.numel()));
    if (ends_with(n, "norm.weight")) {
      for (float& x : v) x = static_cast<float>((plus_one ? 0.0 : 1.0) + 0.3 * u());
    } else if (ends_with(n, ".bias")) {
      for (float& x : v) x = static_cast<float>(0.3 * u());
    } else {
      const double sd = n == "model.embed_tokens.weight" ? 1.0 : 1.0 / std::sqrt(static_cast<double>(shape.back()));
      for (float& x : v) x = static_cast<float>(std::sqrt(3.0) * sd * u());
    }
    Tensor t = Tensor::zeros(dtype, shape);
    for (size_t i = 0; i < v.size(); ++i) {
      if (dtype == DType::F32) t.data_as<float>()[i] = v[i];
      else if (dtype == DType::BF16) t.data_as<uint16_t>()[i] = f32_to_bf16(v[i]);
      else t.data_as<uint16_t>()[i] = f32_to_fp16(v[i]);
    }
    std::string stored = embedding_as_lm_head && n == "model.embed_tokens.weight" ? "lm_head.weight" : n;
    if (multimodal_names && stored.rfind("model.", 0) == 0) stored = "model.language_model." + stored.substr(6);
    entries.push_back({stored, dtype, shape, [t] { return t; }});
  }
  st.reset();
  write_safetensors(dir + "/model.safetensors", entries);
  return dir;
}

// The oracle's logits of every position of kTokens.
Rows oracle_logits(const std::string& python, const std::string& dir, int64_t vocab) {
  const std::string out = dir + "/oracle_logits.f64";
  EXPECT_EQ(run_oracle(python, dir, kTokens, out), "") << "the oracle failed";
  std::vector<double> flat;
  EXPECT_TRUE(read_f64(out, kTokens.size() * static_cast<size_t>(vocab), &flat))
      << out << ": not " << kTokens.size() * static_cast<size_t>(vocab) << " float64 values";
  Rows r;
  for (size_t i = 0; i < kTokens.size(); ++i) r.emplace_back(flat.begin() + i * vocab, flat.begin() + (i + 1) * vocab);
  return r;
}

// ptn's logits of every position: the prompt as one step (every row), then one token a step.
Rows ptn_logits(const std::shared_ptr<const Program>& p, ExecMode mode, const std::string& cache_kind) {
  Executor exec(p, mode, static_cast<int64_t>(kPrompt));
  const int64_t vocab = exec.vocab_size();
  auto cache = make_cache(cache_kind, p->meta().cache_spec, cache_options(DType::F32, 64, 4));
  CacheScope scope(exec, *cache);
  cache->add_sequence(0);
  StepBatch b;
  for (size_t i = 0; i < kPrompt; ++i) b.rows.push_back({0, static_cast<int32_t>(i), kTokens[i]});
  int64_t n = 0;
  const float* l = exec.step(b, OutputRows::All, &n);
  EXPECT_EQ(n, static_cast<int64_t>(kPrompt));
  Rows out;
  for (int64_t r = 0; r < n; ++r) out.emplace_back(l + r * vocab, l + (r + 1) * vocab);
  for (size_t i = kPrompt; i < kTokens.size(); ++i) {
    l = exec.step(StepBatch{{{0, static_cast<int32_t>(i), kTokens[i]}}}, OutputRows::LastPerSequence, &n);
    out.emplace_back(l, l + vocab);
  }
  return out;
}

double nmse(const Rows& got, const Rows& want) {
  double num = 0, den = 0;
  for (size_t r = 0; r < want.size(); ++r)
    for (size_t i = 0; i < want[r].size(); ++i) {
      num += (got[r][i] - want[r][i]) * (got[r][i] - want[r][i]);
      den += want[r][i] * want[r][i];
    }
  return num / den;
}

// ---- the cases -------------------------------------------------------------------------------

struct Case {
  std::string name;
  json config;
  DType dtype = DType::F32;  // how the safetensors stores the weights
  // JSON merge patches of `config` that must change the logits (null removes a key) by more than
  // the 1e-10 pass threshold can miss (NMSE > 1e-9): proof that the family's features are
  // exercised by these sizes and tokens, not passed by both sides alike.
  std::vector<json> must_matter = {};
  bool embedding_as_lm_head = false;  // a tied embedding stored only under its alias lm_head.weight
  bool multimodal_names = false;      // text tensors under model.language_model. (transformers 5's multimodal classes)
  // gpt-oss: the directory is written by tests/oracle/make_gpt_oss.py in this form ("mxfp4":
  // OpenAI's U8 blocks and scales; "dequantized": [E, in, out] matrices), config included;
  // `config` is then a merge patch of the written config.json (or empty).
  std::string gpt_oss_form = "";
  // Llama 4 with experts: the directory is written by tests/oracle/make_llama4.py with these
  // arguments after the directory ("SEED FORM TOP_K"), config included; `config` as for gpt-oss.
  std::string llama4_args = "";
  // DeepSeek: written by tests/oracle/make_deepseek.py with these arguments ("SEED VERSION").
  std::string deepseek_args = "";
};

json base(const char* arch, int64_t layers) {
  return {{"architectures", {arch}}, {"vocab_size", 288},  // room for the GGUF writer's placeholder vocabulary
          {"hidden_size", 48}, {"intermediate_size", 80},
          {"num_hidden_layers", layers}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
          {"max_position_embeddings", 256}, {"rms_norm_eps", 1e-5}, {"tie_word_embeddings", false}};
}

json merged(json a, const json& b) {
  a.update(b);
  return a;
}

std::vector<Case> cases() {
  std::vector<Case> c;
  const json llama3 = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 16}};
  // Llama 3: rope scaling with a short original context (it changes these positions), o_proj and MLP biases.
  c.push_back({"llama3", merged(base("LlamaForCausalLM", 2), {{"rope_theta", 10000.0}, {"rope_scaling", llama3},
                                                             {"attention_bias", true}, {"mlp_bias", true}}),
               DType::F32, {{{"rope_scaling", nullptr}}}});
  c.push_back({"llama3_v5", merged(base("LlamaForCausalLM", 2),
                                   {{"rope_parameters", merged(llama3, {{"rope_theta", 10000.0}})}, {"attention_bias", true}}),
               DType::F32, {{{"rope_parameters", {{"factor", 2.0}}}}}});
  // Llama stored in BF16, tied embedding, no head_dim key.
  json l16 = merged(base("LlamaForCausalLM", 2), {{"tie_word_embeddings", true}, {"rope_theta", 500.0}});
  l16.erase("head_dim");
  c.push_back({"llama_bf16_tied", l16, DType::BF16});
  // Mistral: every layer windowed, F16 storage.
  json mistral = merged(base("MistralForCausalLM", 2), {{"sliding_window", kWindow}, {"rope_theta", 10000.0}});
  mistral.erase("head_dim");
  c.push_back({"mistral", mistral, DType::F16, {{{"sliding_window", nullptr}}}});
  // Mistral-Nemo style: head_dim * heads != hidden, no window (an explicit null).
  c.push_back({"mistral_head_dim", merged(base("MistralForCausalLM", 2), {{"head_dim", 24}, {"sliding_window", nullptr}}),
               DType::F32, {{{"sliding_window", kWindow}}}});
  // Ministral 3: YaRN (factor 64 over an original context of 4, mscale = mscale_all_dim: an
  // attention factor of 1, not yarn's default) and the query temperature on every layer,
  // 1 + 0.1 * log(1 + floor(pos / 4)), which grows over these 20 positions. Also through GGUF
  // (llama.cpp's mistral3: attention.temperature_scale, rope.scaling.attn_factor). The second
  // case is its Mistral3ForConditionalGeneration form (text_config, model.language_model.).
  {
    const json rp = {{"type", "yarn"}, {"rope_theta", 1000000.0}, {"factor", 64.0}, {"original_max_position_embeddings", 4},
                     {"beta_fast", 32.0}, {"beta_slow", 1.0}, {"mscale", 1.0}, {"mscale_all_dim", 1.0}, {"llama_4_scaling_beta", 0.1}};
    json m3 = merged(base("Ministral3ForCausalLM", 2), {{"rope_parameters", rp}});
    c.push_back({"ministral3", m3, DType::BF16,
                 {{{"rope_parameters", {{"llama_4_scaling_beta", 0.0}}}}, {{"rope_parameters", {{"mscale_all_dim", 0.0}}}},
                  {{"sliding_window", kWindow}}}});
    json text = merged(m3, {{"model_type", "ministral3"}, {"sliding_window", kWindow}});
    text.erase("architectures");
    Case mm;
    mm.name = "ministral3_multimodal";
    mm.config = {{"architectures", {"Mistral3ForConditionalGeneration"}}, {"model_type", "mistral3"}, {"text_config", text}};
    mm.must_matter = {{{"text_config", {{"sliding_window", nullptr}}}}};
    mm.multimodal_names = true;
    c.push_back(mm);
  }
  // Qwen2: q/k/v biases (no o_proj bias), windows from max_window_layers on.
  c.push_back({"qwen2", merged(base("Qwen2ForCausalLM", 3), {{"rope_theta", 1000000.0}, {"use_sliding_window", true},
                                                            {"sliding_window", kWindow}, {"max_window_layers", 1},
                                                            {"tie_word_embeddings", true}, {"rms_norm_eps", 1e-6}}),
               DType::F32, {{{"max_window_layers", 2}}}});
  // Qwen2 without windows (expressible as GGUF).
  c.push_back({"qwen2_full", merged(base("Qwen2ForCausalLM", 2), {{"rope_theta", 1000000.0}})});
  // Qwen2 with explicit layer_types (v5 form: authoritative over max_window_layers), one kv head.
  c.push_back({"qwen2_layer_types", merged(base("Qwen2ForCausalLM", 3),
                                           {{"num_key_value_heads", 1}, {"use_sliding_window", true}, {"sliding_window", kWindow},
                                            {"max_window_layers", 3},
                                            {"layer_types", {"sliding_attention", "full_attention", "sliding_attention"}},
                                            {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 100000.0}}}}),
               DType::F32, {{{"layer_types", nullptr}}}});
  // Qwen3: q/k norms, head_dim * heads != hidden, attention_bias, YaRN (factor 4 =
  // max_position_embeddings / original_max_position_embeddings, as transformers derives it).
  c.push_back({"qwen3", merged(base("Qwen3ForCausalLM", 2),
                               {{"rope_theta", 1000000.0}, {"attention_bias", true},
                                {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 64}}}}),
               DType::F32, {{{"rope_scaling", nullptr}}}});
  // Gemma (1): (1 + w) norms, sqrt(hidden) embedding scale, tied, multi-query attention, the tanh
  // GELU from hidden_activation's default although hidden_act says "gelu", as Gemma 1 configs do.
  // Also through GGUF (llama.cpp's gemma). The second case has attention_bias (o_proj too), which
  // llama.cpp's gemma cannot carry.
  {
    json gemma = merged(base("GemmaForCausalLM", 3), {{"num_key_value_heads", 1}, {"hidden_act", "gelu"}, {"rope_theta", 10000.0}});
    gemma.erase("tie_word_embeddings");
    c.push_back({"gemma", gemma, DType::F32, {{{"hidden_activation", "gelu"}}}});
    c.push_back({"gemma_bias", merged(gemma, {{"attention_bias", true}}), DType::F32, {}});
  }
  // Gemma 2: soft-caps small enough to bite, sandwich norms, sqrt(hidden) embedding scale,
  // query_pre_attn_scalar != head_dim, local/global layers.
  c.push_back({"gemma2", merged(base("Gemma2ForCausalLM", 4),
                                {{"hidden_activation", "gelu_pytorch_tanh"}, {"query_pre_attn_scalar", 24}, {"sliding_window", kWindow},
                                 {"attn_logit_softcapping", 3.0}, {"final_logit_softcapping", 5.0}, {"rms_norm_eps", 1e-6}}),
               DType::F32,
               {{{"attn_logit_softcapping", 30.0}}, {{"final_logit_softcapping", 50.0}}, {{"query_pre_attn_scalar", 16}},
                {{"sliding_window", 12}}}});
  c.back().config.erase("tie_word_embeddings");  // Gemma2Config ties by default
  // Gemma 2 with exact (erf) GELU and attention_bias on q/k/v/o.
  c.push_back({"gemma2_erf_bias", merged(base("Gemma2ForCausalLM", 2),
                                         {{"hidden_activation", "gelu"}, {"query_pre_attn_scalar", 16}, {"sliding_window", kWindow},
                                          {"attention_bias", true}, {"tie_word_embeddings", true}}),
               DType::F32, {{{"hidden_activation", "gelu_pytorch_tanh"}}}});
  // Gemma 2 as its config class fills it: window 4096, soft-caps 50 and 30, tied.
  json g2d = merged(base("Gemma2ForCausalLM", 2), {{"query_pre_attn_scalar", 16}});
  g2d.erase("tie_word_embeddings");
  c.push_back({"gemma2_defaults", g2d, DType::F32, {{{"final_logit_softcapping", 1e6}}}});
  // Gemma 3 (v4 form): q/k norms, local base on sliding layers, linear x8 on the global ones,
  // pattern 3, no soft-caps.
  const json g3 = merged(base("Gemma3ForCausalLM", 4),
                         {{"hidden_activation", "gelu_pytorch_tanh"}, {"query_pre_attn_scalar", 16}, {"sliding_window", kWindow},
                          {"rms_norm_eps", 1e-6}, {"tie_word_embeddings", true}});
  c.push_back({"gemma3", merged(g3, {{"sliding_window_pattern", 3}, {"rope_theta", 1000000.0}, {"rope_local_base_freq", 10000.0},
                                     {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}}}),
               DType::F32, {{{"rope_scaling", nullptr}}, {{"rope_local_base_freq", 1000000.0}}, {{"sliding_window_pattern", 2}}}});
  // Gemma 3 (v5 form): layer_types and rope_parameters keyed by layer type, attention_bias.
  c.push_back({"gemma3_v5", merged(g3, {{"layer_types", {"sliding_attention", "full_attention", "sliding_attention", "full_attention"}},
                                        {"attention_bias", true},
                                        {"rope_parameters", {{"full_attention", {{"rope_type", "linear"}, {"factor", 4.0}, {"rope_theta", 1000000.0}}},
                                                             {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}}}}),
               DType::F32, {{{"layer_types", {"sliding_attention", "sliding_attention", "sliding_attention", "full_attention"}}}}});
  // Gemma 3 4B+ as transformers 5 saves it: Gemma3ForConditionalGeneration, a text_config that
  // leaves most keys to Gemma3TextConfig's defaults (pattern 6, local base 10000, query scalar
  // 256, tied), text tensors under model.language_model.
  {
    json text = {{"model_type", "gemma3_text"}, {"vocab_size", 288}, {"hidden_size", 48}, {"intermediate_size", 80},
                 {"num_hidden_layers", 7}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
                 {"sliding_window", kWindow}, {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}}};
    json mm = {{"architectures", {"Gemma3ForConditionalGeneration"}}, {"model_type", "gemma3"}, {"text_config", text}};
    Case g;
    g.name = "gemma3_multimodal";
    g.config = mm;
    g.dtype = DType::BF16;
    g.must_matter = {{{"text_config", {{"sliding_window_pattern", 2}}}}, {{"text_config", {{"query_pre_attn_scalar", 16}}}}};
    g.multimodal_names = true;
    c.push_back(g);
  }
  // Phi-3: fused qkv_proj and gate_up_proj, every layer windowed, half the head rotated.
  json phi3 = merged(base("Phi3ForCausalLM", 2), {{"sliding_window", kWindow}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.5}});
  phi3.erase("head_dim");
  c.push_back({"phi3", phi3, DType::F32, {{{"partial_rotary_factor", 1.0}}, {{"sliding_window", nullptr}}}});
  // Phi-3.5 style longrope (the short factors: positions within the original context), the
  // attention factor from max_position_embeddings / original_max_position_embeddings.
  json longrope = merged(base("Phi3ForCausalLM", 2), {{"rope_theta", 10000.0}, {"original_max_position_embeddings", 64},
                                                      {"rope_scaling", {{"type", "longrope"},
                                                                        {"short_factor", {1.0, 1.3, 1.9, 2.6, 3.5, 4.4, 6.0, 8.0}},
                                                                        {"long_factor", std::vector<double>(8, 4.0)}}}});
  longrope.erase("head_dim");
  longrope["hidden_size"] = 64;
  c.push_back({"phi3_longrope", longrope, DType::F32, {{{"rope_scaling", nullptr}}}});
  // SmolLM3: NoPE layers, windows from max_window_layers on, tied by default, biases.
  json smol = merged(base("SmolLM3ForCausalLM", 4),
                     {{"no_rope_layers", {1, 1, 0, 1}}, {"use_sliding_window", true}, {"sliding_window", kWindow},
                      {"max_window_layers", 2}, {"rope_theta", 2000000.0}, {"attention_bias", true}, {"mlp_bias", true}});
  smol.erase("tie_word_embeddings");
  c.push_back({"smollm3", smol, DType::F32, {{{"no_rope_layers", {1, 1, 1, 1}}}, {{"use_sliding_window", false}}}});
  // SmolLM3, v5 rope_parameters, every 4th layer NoPE by no_rope_layer_interval, tied embedding
  // stored only as lm_head.weight (replaced below).
  json smol5 = merged(base("SmolLM3ForCausalLM", 4), {{"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 50000.0}}},
                                                     {"no_rope_layer_interval", 2}, {"tie_word_embeddings", true}});
  c.push_back({"smollm3_v5", smol5, DType::BF16, {{{"no_rope_layer_interval", 4}}}, /*embedding_as_lm_head=*/true});
  // SmolLM3 as llama.cpp's smollm3 architecture expresses it (so the GGUF path runs too): RoPE
  // skipped on every 4th layer by the default no_rope_layer_interval, tied, no biases.
  json smol_gguf = merged(base("SmolLM3ForCausalLM", 4), {{"rope_theta", 5000000.0}});
  smol_gguf.erase("tie_word_embeddings");
  c.push_back({"smollm3_gguf", smol_gguf, DType::F32, {{{"no_rope_layer_interval", 8}}}});
  // Llama 4 dense: chunked RoPE layers, a NoPE layer every 4th with the attention temperature
  // (floor_scale small so it varies here), weightless q/k norm, interleaved RoPE rows, llama3 scaling.
  c.push_back({"llama4", merged(base("Llama4ForCausalLM", 4),
                                {{"intermediate_size_mlp", 80}, {"intermediate_size", 112}, {"attention_chunk_size", kWindow + 1},
                                 {"num_local_experts", 1}, {"moe_layers", json::array()}, {"use_qk_norm", true},
                                 {"attn_temperature_tuning", true}, {"floor_scale", 4}, {"attn_scale", 0.1}, {"rope_theta", 500000.0},
                                 {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 16.0}, {"low_freq_factor", 1.0},
                                                   {"high_freq_factor", 1.0}, {"original_max_position_embeddings", 32}}}}),
               DType::F32,
               {{{"floor_scale", 8192}}, {{"use_qk_norm", false}}, {{"attention_chunk_size", 64}}, {{"rope_scaling", nullptr}}}});
  // Llama 4 dense, v5 rope_parameters, an explicit no_rope_layers list, attention_bias.
  c.push_back({"llama4_v5", merged(base("Llama4ForCausalLM", 4),
                                   {{"intermediate_size_mlp", 80}, {"attention_chunk_size", kWindow + 1}, {"moe_layers", json::array()},
                                    {"no_rope_layers", {1, 0, 1, 1}}, {"floor_scale", 3}, {"attention_bias", true},
                                    {"rope_parameters", {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0},
                                                         {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                                                         {"original_max_position_embeddings", 32}}}}),
               DType::F32, {{{"no_rope_layers", {1, 1, 1, 0}}}, {{"attn_temperature_tuning", false}}}});
  // Mixtral: 4 experts, top-2 renormalised, every layer windowed.
  c.push_back({"mixtral", merged(base("MixtralForCausalLM", 2), {{"num_local_experts", 4}, {"num_experts_per_tok", 2},
                                                                {"sliding_window", kWindow}, {"rope_theta", 1000000.0}}),
               DType::F32, {{{"num_experts_per_tok", 1}}, {{"num_experts_per_tok", 3}}, {{"sliding_window", nullptr}}}});
  // Qwen3-MoE: 8 experts of width 32, top-2 not renormalised (the config class's default), q/k
  // norms, layer 1 a dense MLP by mlp_only_layers, BF16 storage.
  c.push_back({"qwen3_moe", merged(base("Qwen3MoeForCausalLM", 3),
                                   {{"num_experts", 8}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", 32},
                                    {"mlp_only_layers", {1}}, {"rope_theta", 1000000.0}}),
               DType::BF16, {{{"norm_topk_prob", true}}, {{"num_experts_per_tok", 3}}}});
  // Mixtral and Qwen3-MoE as their GGUF architectures express them (experts on every layer,
  // renormalised, no window): also through ptn's GGUF writer and import (merged expert tensors).
  c.push_back({"mixtral_full", merged(base("MixtralForCausalLM", 2), {{"num_local_experts", 4}, {"num_experts_per_tok", 2},
                                                                     {"sliding_window", nullptr}, {"rope_theta", 1000000.0}}),
               DType::BF16, {{{"num_experts_per_tok", 1}}}});
  c.push_back({"qwen3_moe_full", merged(base("Qwen3MoeForCausalLM", 2),
                                        {{"num_experts", 4}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", 32},
                                         {"norm_topk_prob", true}, {"rope_theta", 1000000.0}}),
               DType::F16, {{{"norm_topk_prob", false}}}});
  // Qwen3-MoE with decoder_sparse_step 2 (layer 0 dense, layer 1 experts), renormalised top-3 of 4,
  // attention_bias.
  c.push_back({"qwen3_moe_step", merged(base("Qwen3MoeForCausalLM", 2),
                                        {{"num_experts", 4}, {"num_experts_per_tok", 3}, {"moe_intermediate_size", 48},
                                         {"decoder_sparse_step", 2}, {"norm_topk_prob", true}, {"attention_bias", true}}),
               DType::F32, {{{"norm_topk_prob", false}}}});
  // Qwen2-MoE: 4 experts of width 32, top-2 not renormalised (its default), a shared expert of
  // width 48 with its sigmoid gate, q/k/v biases, layer 0 a dense MLP by mlp_only_layers.
  c.push_back({"qwen2_moe", merged(base("Qwen2MoeForCausalLM", 2),
                                   {{"num_experts", 4}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", 32},
                                    {"shared_expert_intermediate_size", 48}, {"mlp_only_layers", {0}}}),
               DType::F32, {{{"norm_topk_prob", true}}, {{"num_experts_per_tok", 3}}}});
  // OLMoE: 4 experts of intermediate_size on both layers, top-2 not renormalised (its default),
  // q and k each RMS-normalised over all heads; no head_dim key (OlmoeConfig has none: its q_norm
  // is hidden_size wide). Also through GGUF (llama.cpp's olmoe).
  {
    json olmoe = merged(base("OlmoeForCausalLM", 2), {{"hidden_size", 64}, {"num_experts", 4}, {"num_experts_per_tok", 2}});
    olmoe.erase("head_dim");
    c.push_back({"olmoe", olmoe, DType::F32, {{{"norm_topk_prob", true}}, {{"num_experts_per_tok", 3}}}});
  }
  // OLMo 2: post-norms only, q/k norms over all heads (heads x head_dim = hidden_size, as
  // llama.cpp's olmo2 requires); untied. Also through GGUF (llama.cpp's olmo2). The second case
  // has q/k/v/o biases (attention_bias), which GGUF cannot carry.
  {
    json olmo2 = merged(base("Olmo2ForCausalLM", 3), {{"hidden_size", 64}, {"tie_word_embeddings", false}});
    olmo2.erase("head_dim");
    c.push_back({"olmo2", olmo2, DType::F32, {{{"rms_norm_eps", 0.5}}}});
    c.push_back({"olmo2_bias", merged(olmo2, {{"attention_bias", true}}), DType::F32, {}});
  }
  // OLMo 3: OLMo 2's layer, windows on three layers of four (layer_types' default), YaRN on the
  // full layers only, with the attention factor written out as OLMo 3's configs have it. Also
  // through GGUF (llama.cpp's olmo2 with attention.sliding_window). The second case windows other
  // layers by layer_types, which llama.cpp's olmo2 (a fixed period of 4) cannot express.
  {
    json olmo3 = merged(base("Olmo3ForCausalLM", 4),
                        {{"hidden_size", 64}, {"sliding_window", kWindow}, {"rope_theta", 500000.0},
                         {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 64},
                                           {"attention_factor", 0.1 * std::log(4.0) + 1.0}, {"beta_fast", 32}, {"beta_slow", 1}}}});
    olmo3.erase("head_dim");
    c.push_back({"olmo3", olmo3, DType::F32, {{{"rope_scaling", nullptr}}, {{"sliding_window", 4096}}}});
    c.push_back({"olmo3_types",
                 merged(olmo3, {{"layer_types", {"sliding_attention", "full_attention", "full_attention", "sliding_attention"}}}),
                 DType::F32, {{{"layer_types", nullptr}}}});
  }
  // Granite 3: the four multipliers as Granite-3.x configs have them in kind (each must matter).
  // Also through GGUF (llama.cpp's granite).
  {
    json granite = merged(base("GraniteForCausalLM", 2), {{"embedding_multiplier", 12.0}, {"attention_multiplier", 0.03},
                                                          {"residual_multiplier", 0.22}, {"logits_scaling", 8.0}});
    c.push_back({"granite", granite, DType::F32,
                 {{{"embedding_multiplier", 1.0}}, {{"attention_multiplier", 0.25}}, {{"residual_multiplier", 1.0}},
                  {{"logits_scaling", 1.0}}}});
  }
  // Granite MoE: Granite's multipliers, 4 experts (stacked input_linear / output_linear) top-2
  // with the softmax over the two. Also through GGUF (llama.cpp's granitemoe).
  {
    json gmoe = merged(base("GraniteMoeForCausalLM", 2), {{"embedding_multiplier", 12.0}, {"attention_multiplier", 0.03},
                                                           {"residual_multiplier", 0.22}, {"logits_scaling", 8.0},
                                                           {"num_local_experts", 4}, {"num_experts_per_tok", 2}});
    c.push_back({"granitemoe", gmoe, DType::F32,
                 {{{"num_experts_per_tok", 1}}, {{"residual_multiplier", 1.0}}, {{"attention_multiplier", 0.25}}}});
    // Granite MoE Shared: the same with an ungated shared MLP of width 56 (through GGUF as
    // granitemoe with ffn_*_shexp).
    json shared = merged(gmoe, {{"shared_intermediate_size", 56}});
    shared["architectures"] = {"GraniteMoeSharedForCausalLM"};
    c.push_back({"granitemoeshared", shared, DType::BF16, {{{"num_experts_per_tok", 1}}}});
  }
  // Qwen2-MoE as llama.cpp's qwen2moe expresses it (experts on every layer, top-k not
  // renormalised, a shared expert): also through ptn's GGUF writer and import.
  {
    // LayerNorm families: no head_dim key (their modeling takes hidden / heads = 16).
    auto ln = [](const char* arch, int64_t layers) {
      json j = base(arch, layers);
      j.erase("head_dim");
      j["hidden_size"] = 64;
      j.erase("rms_norm_eps");
      return j;
    };
    json stablelm = merged(ln("StableLmForCausalLM", 2), {{"use_qkv_bias", true}, {"layer_norm_eps", 1e-5}, {"rope_theta", 10000.0}});
    c.push_back({"stablelm", stablelm, DType::F32, {{{"partial_rotary_factor", 0.5}}, {{"layer_norm_eps", 0.5}}}});
    c.push_back({"stablelm_parallel", merged(stablelm, {{"use_parallel_residual", true}, {"partial_rotary_factor", 0.5}}), DType::BF16,
                 {{{"partial_rotary_factor", 1.0}}}});
    json phi2 = merged(ln("PhiForCausalLM", 2), {{"rope_theta", 10000.0}});
    c.push_back({"phi2", phi2, DType::F32, {{{"partial_rotary_factor", 1.0}}, {{"layer_norm_eps", 0.5}}, {{"hidden_act", "gelu"}}}});
    json sc2 = ln("Starcoder2ForCausalLM", 3);
    sc2.erase("tie_word_embeddings");  // Starcoder2Config ties by default
    c.push_back({"starcoder2", merged(sc2, {{"sliding_window", kWindow}}), DType::F32,
                 {{{"sliding_window", nullptr}}, {{"norm_epsilon", 0.5}}}});
    c.push_back({"starcoder2_gguf", merged(sc2, {{"rope_theta", 100000.0}}), DType::F16, {{{"hidden_act", "gelu"}}}});
    c.push_back({"starcoder2_nobias", merged(sc2, {{"use_bias", false}, {"tie_word_embeddings", false}}), DType::F32, {}});
    json cohere = ln("CohereForCausalLM", 2);
    cohere.erase("tie_word_embeddings");  // CohereConfig ties by default
    c.push_back({"cohere", merged(cohere, {{"logit_scale", 0.25}}), DType::F32, {{{"logit_scale", 1.0}}, {{"layer_norm_eps", 0.5}}}});
    c.push_back({"cohere_bias", merged(cohere, {{"attention_bias", true}, {"rope_theta", 8000.0}}), DType::F32, {}});
    // GPT-NeoX: 4.x keys (rotary_pct, rotary_emb_base), parallel with the MLP on its own norm,
    // sequential, and (tanh GELU, as llama.cpp's gptneox runs it) through the GGUF writer.
    json neox = ln("GPTNeoXForCausalLM", 2);
    neox.erase("num_key_value_heads");
    neox.erase("rope_theta");
    neox = merged(neox, {{"rotary_pct", 0.5}, {"rotary_emb_base", 20000.0}, {"hidden_act", "gelu"}});
    c.push_back({"gptneox", neox, DType::F32, {{{"rotary_pct", 1.0}}, {{"layer_norm_eps", 0.5}}, {{"hidden_act", "gelu_new"}}}});
    c.push_back({"gptneox_seq", merged(neox, {{"use_parallel_residual", false}}), DType::F32, {{{"use_parallel_residual", true}}}});
    c.push_back({"gptneox_gguf", merged(neox, {{"hidden_act", "gelu_new"}}), DType::F16, {{{"rotary_emb_base", 10000.0}}}});
  }
  // GLM: q/k/v biases by attention_bias's default (true), gate|up fused, half of each head rotated
  // on interleaved pairs (config defaults). GLM-4 adds norms on both sublayers' outputs; its v5
  // form keeps partial_rotary_factor in rope_parameters. All through GGUF (chatglm, glm4).
  {
    json glm = merged(base("GlmForCausalLM", 2), {{"rope_theta", 20000.0}});
    glm.erase("rms_norm_eps");
    c.push_back({"glm", glm, DType::F32, {{{"partial_rotary_factor", 1.0}}, {{"rms_norm_eps", 0.5}}}});
    c.push_back({"glm_nobias", merged(glm, {{"attention_bias", false}, {"partial_rotary_factor", 0.25}}), DType::BF16,
                 {{{"partial_rotary_factor", 0.5}}}});
    json glm4 = merged(base("Glm4ForCausalLM", 3), {{"rope_theta", 20000.0}});
    c.push_back({"glm4", glm4, DType::F32, {{{"partial_rotary_factor", 1.0}}, {{"rope_theta", 10000.0}}}});
    glm4.erase("rope_theta");
    c.push_back({"glm4_v5",
                 merged(glm4, {{"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 5000.0}, {"partial_rotary_factor", 0.25}}}}),
                 DType::F16, {{{"rope_parameters", {{"partial_rotary_factor", 0.5}}}}}});
  }
  c.push_back({"qwen2_moe_full", merged(base("Qwen2MoeForCausalLM", 2),
                                        {{"num_experts", 4}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", 32},
                                         {"shared_expert_intermediate_size", 40}, {"rope_theta", 1000000.0}}),
               DType::BF16, {{{"norm_topk_prob", true}}}});
  // gpt-oss: sinks, alternating window / full layers, YaRN not truncated, q/k/v/o biases, experts
  // with biases and both SwiGLU clamps active, in both of the forms checkpoints come in.
  const json layers_full = {{"layer_types", {"full_attention", "full_attention"}}};
  c.push_back({"gpt_oss_mxfp4", {}, DType::F32, {layers_full, {{"rope_scaling", {{"truncate", true}}}}}, false, false, "mxfp4"});
  c.push_back({"gpt_oss_dequant", {}, DType::F32, {layers_full}, false, false, "dequantized"});
  // The YaRN ramp truncated, as llama.cpp always computes it: also through ptn's GGUF writer and
  // import of llama.cpp's "gpt-oss" architecture.
  c.push_back({"gpt_oss_gguf", {{"rope_scaling", {{"truncate", true}}}}, DType::F32, {layers_full}, false, false, "dequantized"});
  // Llama 4 with experts on layers 1 and 3 (sigmoid scores on the experts' input, an ungated
  // shared expert), dense layers 0 and 2, chunked RoPE layers and a NoPE layer: as
  // Llama4ForCausalLM with one expert per token, and as the text model of
  // Llama4ForConditionalGeneration with two.
  c.push_back({"llama4_moe", {}, DType::F32, {{{"num_experts_per_tok", 2}}, {{"attention_chunk_size", 64}}}, false, false, "", "1 causal 1"});
  c.push_back({"llama4_moe_vlm", {}, DType::F32, {{{"text_config", {{"num_experts_per_tok", 1}}}}}, false, false, "", "2 conditional 2"});
  // The chunk and temperature floor llama.cpp's llama4 graph fixes (8192), so that the model also
  // goes through ptn's GGUF writer and import of the 'llama4' architecture.
  c.push_back({"llama4_gguf", {{"attention_chunk_size", 8192}, {"floor_scale", 8192}}, DType::F32, {}, false, false, "", "3 causal 2"});
  // DeepSeek V2 (V2-Lite's form: q_proj, softmax, greedy) and V3 (q_lora, sigmoid scores with the
  // selection bias in the best groups): latent attention with YaRN's mscale in the softmax scale,
  // a dense first layer, routed and shared experts.
  c.push_back({"deepseek_v2", {}, DType::F32,
               {{{"routed_scaling_factor", 1.0}},
                {{"rope_scaling", {{"mscale_all_dim", 1.0}, {"mscale", 1.0}}}},
                {{"topk_method", "group_limited_greedy"}, {"n_group", 4}, {"topk_group", 2}}},
               false, false, "", "", "4 v2"});
  c.push_back({"deepseek_v3", {}, DType::F32,
               {{{"routed_scaling_factor", 1.0}},
                {{"topk_group", 4}},
                {{"rope_interleave", false}},
                {{"norm_topk_prob", false}}},
               false, false, "", "", "5 v3"});
  return c;
}

// A Llama 4 directory with experts from the fixture writer.
std::string make_llama4(const std::string& python, const TempDir& d, const std::string& name, const std::string& args) {
  const std::string dir = d / name;
  const std::string cmd = python + " " + std::string(PTN_SOURCE_DIR) + "/tests/oracle/make_llama4.py " + dir + " " + args;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return dir;
}

// A DeepSeek directory from the fixture writer.
std::string make_deepseek(const std::string& python, const TempDir& d, const std::string& name, const std::string& args) {
  const std::string dir = d / name;
  const std::string cmd = python + " " + std::string(PTN_SOURCE_DIR) + "/tests/oracle/make_deepseek.py " + dir + " " + args;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return dir;
}

// A gpt-oss directory from the fixture writer (its own seed; both forms hold the same model).
std::string make_gpt_oss(const std::string& python, const TempDir& d, const std::string& name, const std::string& form) {
  const std::string dir = d / name;
  const std::string cmd = python + " " + std::string(PTN_SOURCE_DIR) + "/tests/oracle/make_gpt_oss.py " + dir + " " + form + " 1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return dir;
}

TEST(FamilyOracle, EveryFamilyMatchesTheIndependentForwardPass) {
  std::string tried;
  const std::string python = python_with_numpy(&tried);
  ASSERT_FALSE(python.empty()) << "no python3 with numpy (tried " << tried
                               << "): the family oracle needs Debian's python3-numpy; run `make deps`";
  TempDir d;
  std::set<std::string> families, gguf_families;
  uint64_t seed = 100;
  // PTN_ORACLE_CASE=name runs the cases whose names contain it (the seeds stay those of the full run).
  const char* only = std::getenv("PTN_ORACLE_CASE");
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.name);
    ++seed;
    if (only && k.name.find(only) == std::string::npos) continue;
    const bool fixture = !k.gpt_oss_form.empty() || !k.llama4_args.empty() || !k.deepseek_args.empty();
    const std::string dir = !k.gpt_oss_form.empty() ? make_gpt_oss(python, d, k.name, k.gpt_oss_form)
                            : !k.llama4_args.empty()   ? make_llama4(python, d, k.name, k.llama4_args)
                            : !k.deepseek_args.empty() ? make_deepseek(python, d, k.name, k.deepseek_args)
                                : make_model(d, k.name, k.config, k.dtype, seed, k.embedding_as_lm_head, k.multimodal_names);
    if (fixture && !k.config.empty()) {
      json patched = json::parse(read_text_file(dir + "/config.json"));
      patched.merge_patch(k.config);
      std::ofstream(dir + "/config.json") << patched.dump(1);
    }
    const json config = json::parse(read_text_file(dir + "/config.json"));
    ExportOptions o = base_options(dir, "");
    o.samples = 0;
    o.max_seq_length = 32;
    o.progress = false;
    if (k.dtype != DType::F32 || fixture) o.quantize = "f32";  // ptn computes in f32: the stored values, exactly
    if (k.gpt_oss_form == "mxfp4") {
      // Kept as MXFP4 (the export's default for them): the reference executor, whose matmul
      // multiplies the exact weight values by f32 activations, matches as tightly. (The optimized
      // MXFP4 kernels quantize activations to 8 bits, and a near-tie of two experts may then
      // route differently; `ptn verify`'s golden samples cover that path.)
      ExportOptions om = o;
      om.quantize = "";
      std::ostringstream mlog;
      auto pm = export_in_memory(om, mlog);
      EXPECT_EQ(pm->tensor("blk.1.ffn_up.3.weight").dtype(), DType::MXFP4);
      const double e = nmse(ptn_logits(pm, ExecMode::Reference, "reference"), oracle_logits(python, dir, pm->meta().spec.vocab_size));
      std::printf("[ oracle   ] %-17s MXFP4 kept: NMSE reference %.1e\n", k.name.c_str(), e);
      EXPECT_LT(e, 1e-10) << "the MXFP4 experts as stored, reference executor";
    }
    std::ostringstream log;
    auto p = export_in_memory(o, log);
    families.insert(p->meta().spec.family);
    const Rows want = oracle_logits(python, dir, p->meta().spec.vocab_size);
    const Rows opt = ptn_logits(p, ExecMode::Optimized, "paged");
    const Rows ref = ptn_logits(p, ExecMode::Reference, "reference");
    ASSERT_EQ(opt.size(), want.size());
    const double e_opt = nmse(opt, want), e_ref = nmse(ref, want);
    EXPECT_LT(e_opt, 1e-10) << "optimized executor against the oracle";
    EXPECT_LT(e_ref, 1e-10) << "reference executor against the oracle";
    double least_change = 0;
    for (const json& patch : k.must_matter) {
      json changed = config;
      changed.merge_patch(patch);
      const std::string cdir = write_config(d, k.name + "_changed", changed);
      fs::copy_file(dir + "/model.safetensors", cdir + "/model.safetensors", fs::copy_options::overwrite_existing);
      o.model = cdir;
      const double e = nmse(ptn_logits(export_in_memory(o, log), ExecMode::Reference, "reference"), want);
      EXPECT_GT(e, 1e-9) << patch.dump() << " does not change the logits: the case does not exercise it";
      least_change = least_change == 0 ? e : std::min(least_change, e);
    }
    std::printf("[ oracle   ] %-17s NMSE optimized+paged %.1e, reference %.1e; smallest feature change %.1e\n",
                k.name.c_str(), e_opt, e_ref, least_change);

    // The same weights through ptn's GGUF writer and GGUF import, where the family has a GGUF
    // architecture that can express the config; a refusal must name what is missing.
    const std::string gguf = dir + "/model.gguf";
    std::string refused;
    try {
      const TokenizerSpec tok = placeholder_tokenizer(p->meta().spec.vocab_size);
      GgufModelOptions go;
      go.tokenizer = &tok;
      write_model_gguf(*open_weights(dir), gguf, go);
    } catch (const Error& e) {
      refused = e.what();
    }
    if (!refused.empty()) {
      std::printf("[ oracle   ] %-17s GGUF: refused: %s\n", k.name.c_str(), refused.c_str());
      continue;
    }
    ExportOptions og = o;
    og.model = gguf;
    const double e_gguf = nmse(ptn_logits(export_in_memory(og, log), ExecMode::Optimized, "paged"), want);
    gguf_families.insert(p->meta().spec.family);
    std::printf("[ oracle   ] %-17s GGUF: NMSE optimized+paged %.1e\n", k.name.c_str(), e_gguf);
    EXPECT_LT(e_gguf, 1e-10) << "exported through ptn's GGUF writer and importer";
  }
  // Every family ptn builds has a case here.
  if (only) return;
  for (const FamilyInfo& f : all_families()) {
    if (f.block != Block::Unsupported) {
      EXPECT_TRUE(families.count(f.name)) << f.name << " has no oracle case";
    }
    if (*f.gguf_arch) {
      EXPECT_TRUE(gguf_families.count(f.name)) << f.name << " has no oracle case that goes through GGUF";
    }
  }
}

}  // namespace
}  // namespace ptn::testing
