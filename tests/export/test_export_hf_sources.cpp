// HF directories as transformers writes them, exported end to end: the v4 and v5 config forms
// give identical logits; o_proj and MLP biases are applied (checked against a forward pass
// written out in this file); a tied embedding stored only as lm_head.weight loads; every source
// tensor is used, left out with a note (a vision tower), or refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>

#include "core/error.h"
#include "export_test_util.h"
#include "formats/random_weights.h"
#include "formats/safetensors.h"
#include "formats/synth.h"

namespace ptn::testing {
namespace {

using json = nlohmann::json;

// `config` with random weights (seed) written as an HF directory d/name.
std::string hf_dir(const TempDir& d, const std::string& name, const json& config, uint64_t seed = 7) {
  const std::string dir = d / name;
  auto src = random_weights(model_spec_from_hf_config(config, name), seed);
  write_hf_directory(*src, config, dir, DType::F32);
  return dir;
}

// Another directory with `config` and a copy of dir's weights.
std::string same_weights(const TempDir& d, const std::string& dir, const std::string& name, const json& config) {
  const std::string out = write_config(d, name, config);
  fs::copy_file(dir + "/model.safetensors", out + "/model.safetensors", fs::copy_options::overwrite_existing);
  return out;
}

using TensorMap = std::map<std::string, Tensor>;

TensorMap read_tensors(const std::string& dir) {
  auto st = SafetensorsSet::open_file(dir + "/model.safetensors");
  TensorMap m;
  for (const std::string& n : st->names()) m[n] = st->tensor(n).copy();
  return m;
}

void write_tensors(const std::string& dir, const TensorMap& m) {
  std::vector<SafetensorsEntry> entries;
  for (const auto& [n, t] : m) entries.push_back({n, DType::F32, t.shape(), [t] { return t; }});
  write_safetensors(dir + "/model.safetensors", entries);
}

Tensor filled(std::vector<int64_t> shape, const std::function<float(int64_t)>& f) {
  Tensor t = Tensor::zeros(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = f(i);
  return t;
}

std::shared_ptr<const Program> export_dir(const std::string& dir, std::string* log_out = nullptr) {
  ExportOptions o = base_options(dir, "");
  o.samples = 0;
  std::ostringstream log;
  auto p = export_in_memory(o, log);
  if (log_out) *log_out = log.str();
  return p;
}

const std::vector<int32_t> kPrompt = {1, 17, 42, 5, 99, 3, 250, 8, 61, 12, 7, 200};
const std::vector<int32_t> kDecode = {4, 150, 33, 9, 77, 2, 18, 140};

std::vector<std::vector<float>> logits(const std::shared_ptr<const Program>& p, ExecMode mode = ExecMode::Reference) {
  return run_sequence(p, mode, "reference", DType::F32, kPrompt, kDecode);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// ---- v4 and v5 config forms ------------------------------------------------------------------

TEST(ExportHfSources, V4AndV5RopeFormsGiveIdenticalLogits) {
  TempDir d;
  // Llama 3 scaling with a short original context, so that it changes positions below 20.
  json v4 = tiny_llama_config();
  v4["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                        {"original_max_position_embeddings", 16}};
  json v5 = v4;
  v5.erase("rope_theta");
  v5.erase("rope_scaling");
  v5["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 10000.0}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                           {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 16}};
  json plain = v4;
  plain.erase("rope_scaling");
  const std::string a = hf_dir(d, "v4", v4);
  const auto la = logits(export_dir(a));
  EXPECT_EQ(la, logits(export_dir(same_weights(d, a, "v5", v5))));
  EXPECT_NE(la, logits(export_dir(same_weights(d, a, "plain", plain))));  // the scaling is applied

  // Gemma 3: linear x8 on the global layers, the local base on the sliding ones.
  json g4 = {{"architectures", {"Gemma3ForCausalLM"}}, {"vocab_size", 256}, {"hidden_size", 64}, {"intermediate_size", 96},
             {"num_hidden_layers", 3}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
             {"max_position_embeddings", 256}, {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0},
             {"rope_local_base_freq", 10000.0}, {"sliding_window", 8}, {"query_pre_attn_scalar", 16},
             {"hidden_activation", "gelu_pytorch_tanh"}, {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}},
             {"layer_types", {"sliding_attention", "full_attention", "sliding_attention"}}};
  json g5 = g4;
  for (const char* k : {"rope_theta", "rope_local_base_freq", "rope_scaling"}) g5.erase(k);
  g5["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1000000.0}}},
                           {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
  json g_plain = g4;
  g_plain.erase("rope_scaling");
  const std::string g = hf_dir(d, "g4", g4);
  const auto lg = logits(export_dir(g));
  EXPECT_EQ(lg, logits(export_dir(same_weights(d, g, "g5", g5))));
  EXPECT_NE(lg, logits(export_dir(same_weights(d, g, "g_plain", g_plain))));
}

// Phi-3 longrope (short factors within the original context): v4 and v5 alike, scaled, and
// the program's positions stop at original_max_position_embeddings.
TEST(ExportHfSources, LongRopeV4AndV5GiveIdenticalLogits) {
  TempDir d;
  std::vector<double> shorts = {1.0, 1.3, 1.9, 2.6, 3.5, 4.4, 6.0, 8.0}, longs(8, 4.0);  // head_dim 16: 8 pairs
  json v4 = {{"architectures", {"Phi3ForCausalLM"}}, {"vocab_size", 256}, {"hidden_size", 64}, {"intermediate_size", 96},
             {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 4},
             {"max_position_embeddings", 256}, {"original_max_position_embeddings", 64}, {"rope_theta", 10000.0},
             {"rope_scaling", {{"type", "longrope"}, {"short_factor", shorts}, {"long_factor", longs}}}};
  json v5 = v4;
  v5.erase("rope_scaling");
  v5.erase("rope_theta");
  v5["rope_parameters"] = {{"rope_type", "longrope"}, {"rope_theta", 10000.0}, {"short_factor", shorts},
                           {"long_factor", longs}, {"original_max_position_embeddings", 64}};
  json plain = v4;
  plain.erase("rope_scaling");
  const std::string a = hf_dir(d, "v4", v4);
  auto p = export_dir(a);
  EXPECT_EQ(p->meta().cache_spec.max_positions, 64);
  const auto la = logits(p);
  EXPECT_EQ(la, logits(export_dir(same_weights(d, a, "v5", v5))));
  EXPECT_NE(la, logits(export_dir(same_weights(d, a, "plain", plain))));
  EXPECT_LT(nmse(logits(p, ExecMode::Optimized), la), 1e-8);
}

// ---- biases ----------------------------------------------------------------------------------


// y = W x + b for W [out, in] (f32, row-major).
std::vector<double> affine(const Tensor& w, const Tensor* b, const std::vector<double>& x) {
  const int64_t out = w.dim(0), in = w.dim(1);
  std::vector<double> y(static_cast<size_t>(out));
  const float* W = w.data_as<float>();
  for (int64_t r = 0; r < out; ++r) {
    double s = b ? b->data_as<float>()[r] : 0.0;
    for (int64_t c = 0; c < in; ++c) s += static_cast<double>(W[r * in + c]) * x[c];
    y[r] = s;
  }
  return y;
}

std::vector<double> rms_norm(const std::vector<double>& x, const Tensor& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double k = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * k * w.data_as<float>()[i];
  return y;
}

// LlamaForCausalLM's forward for one token at position 0, written out from the HF modeling:
// a single key makes attention's output the (biased) value of each head's kv group, whatever
// q, k and RoPE are.
std::vector<double> llama_first_token_logits(const TensorMap& t, const json& cfg, int32_t token) {
  const int64_t H = cfg["hidden_size"], L = cfg["num_hidden_layers"], Hq = cfg["num_attention_heads"],
                Hkv = cfg["num_key_value_heads"], D = cfg["head_dim"];
  const double eps = cfg["rms_norm_eps"];
  auto get = [&](const std::string& n) -> const Tensor& { return t.at(n); };
  auto opt = [&](const std::string& n) -> const Tensor* { auto it = t.find(n); return it == t.end() ? nullptr : &it->second; };
  std::vector<double> x(static_cast<size_t>(H));
  for (int64_t i = 0; i < H; ++i) x[i] = get("model.embed_tokens.weight").data_as<float>()[token * H + i];
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::vector<double> h = rms_norm(x, get(p + "input_layernorm.weight"), eps);
    const std::vector<double> v = affine(get(p + "self_attn.v_proj.weight"), opt(p + "self_attn.v_proj.bias"), h);
    std::vector<double> a(static_cast<size_t>(Hq * D));
    for (int64_t hq = 0; hq < Hq; ++hq)
      for (int64_t j = 0; j < D; ++j) a[hq * D + j] = v[(hq / (Hq / Hkv)) * D + j];
    const std::vector<double> o = affine(get(p + "self_attn.o_proj.weight"), opt(p + "self_attn.o_proj.bias"), a);
    for (int64_t i = 0; i < H; ++i) x[i] += o[i];
    const std::vector<double> f = rms_norm(x, get(p + "post_attention_layernorm.weight"), eps);
    const std::vector<double> gate = affine(get(p + "mlp.gate_proj.weight"), opt(p + "mlp.gate_proj.bias"), f);
    const std::vector<double> up = affine(get(p + "mlp.up_proj.weight"), opt(p + "mlp.up_proj.bias"), f);
    std::vector<double> m(gate.size());
    for (size_t i = 0; i < m.size(); ++i) m[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
    const std::vector<double> dn = affine(get(p + "mlp.down_proj.weight"), opt(p + "mlp.down_proj.bias"), m);
    for (int64_t i = 0; i < H; ++i) x[i] += dn[i];
  }
  return affine(get("lm_head.weight"), nullptr, rms_norm(x, get("model.norm.weight"), eps));
}

TEST(ExportHfSources, OprojAndMlpBiasesAreApplied) {
  TempDir d;
  json cfg = tiny_llama_config();
  cfg["attention_bias"] = true;
  cfg["mlp_bias"] = true;
  const std::string dir = hf_dir(d, "biased", cfg);
  TensorMap t = read_tensors(dir);
  ASSERT_TRUE(t.count("model.layers.1.self_attn.o_proj.bias"));
  ASSERT_TRUE(t.count("model.layers.1.mlp.down_proj.bias"));
  // Random weights write zero biases; give each its own values.
  int salt = 0;
  for (auto& [n, w] : t)
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".bias") == 0) {
      ++salt;
      w = filled(w.shape(), [salt](int64_t i) { return 0.05f * static_cast<float>((i * 7 + salt) % 11 - 5); });
    }
  write_tensors(dir, t);

  auto p = export_dir(dir);
  const int32_t token = 42;
  const auto got = run_sequence(p, ExecMode::Reference, "reference", DType::F32, {token}, {})[0];
  const std::vector<double> want = llama_first_token_logits(t, cfg, token);
  ASSERT_EQ(got.size(), want.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  EXPECT_LT(num / den, 1e-10) << "ptn against the forward written out here";
  const auto opt = run_sequence(p, ExecMode::Optimized, "paged", DType::F32, {token}, {})[0];
  EXPECT_LT(nmse({opt}, {got}), 1e-8);

  // Without the o_proj biases the output changes by far more than rounding: they are not dropped.
  TensorMap no_o = t;
  for (auto& [n, w] : no_o)
    if (n.find("o_proj.bias") != std::string::npos) w = filled(w.shape(), [](int64_t) { return 0.0f; });
  const std::vector<double> want_no_o = llama_first_token_logits(no_o, cfg, token);
  double diff = 0;
  for (size_t i = 0; i < want.size(); ++i) diff += (want_no_o[i] - want[i]) * (want_no_o[i] - want[i]);
  EXPECT_GT(diff / den, 1e-4);
  EXPECT_GT(nmse({got}, {std::vector<float>(want_no_o.begin(), want_no_o.end())}), 1e-4);

  // Qwen2 has q/k/v biases and no o_proj bias: an o_proj bias in its checkpoint is refused.
  json q = cfg;
  q["architectures"] = {"Qwen2ForCausalLM"};
  q.erase("mlp_bias");
  q.erase("attention_bias");
  const std::string qdir = same_weights(d, dir, "qwen2", q);
  TensorMap qt = t;
  for (auto it = qt.begin(); it != qt.end();)
    it = it->first.find("mlp.") != std::string::npos && it->first.find(".bias") != std::string::npos ? qt.erase(it) : std::next(it);
  write_tensors(qdir, qt);
  const std::string err = error_of([&] { export_dir(qdir); });
  EXPECT_NE(err.find("model.layers.0.self_attn.o_proj.bias"), std::string::npos) << err;
  EXPECT_NE(err.find("does not use"), std::string::npos) << err;
}

// ---- which tensors are read ------------------------------------------------------------------

TEST(ExportHfSources, TiedEmbeddingStoredAsLmHeadLoads) {
  TempDir d;
  json cfg = tiny_llama_config();
  cfg["tie_word_embeddings"] = true;
  const std::string dir = hf_dir(d, "tied", cfg);
  const auto want = logits(export_dir(dir));
  TensorMap t = read_tensors(dir);
  ASSERT_TRUE(t.count("model.embed_tokens.weight"));
  ASSERT_FALSE(t.count("lm_head.weight"));
  // Both names (transformers may save the alias too): the alias is left out with a note.
  const std::string both = same_weights(d, dir, "both", cfg);
  TensorMap tb = t;
  tb["lm_head.weight"] = t.at("model.embed_tokens.weight");
  write_tensors(both, tb);
  std::string log;
  EXPECT_EQ(want, logits(export_dir(both, &log)));
  EXPECT_NE(log.find("lm_head.weight left out: tie_word_embeddings is true"), std::string::npos) << log;
  // Only the alias.
  const std::string alias = same_weights(d, dir, "alias", cfg);
  TensorMap ta = t;
  ta["lm_head.weight"] = t.at("model.embed_tokens.weight");
  ta.erase("model.embed_tokens.weight");
  write_tensors(alias, ta);
  auto p = export_dir(alias);
  EXPECT_EQ(want, logits(p));
}

// Qwen3-Embedding as sentence-transformers saves it: architecture Qwen3Model, tensor names
// without the "model." prefix, no lm_head (tied). It exports as qwen3 and computes what the
// same weights under Qwen3ForCausalLM names compute; untied without an lm_head it is refused
// naming the missing tensor.
TEST(ExportHfSources, BareQwen3ModelExportsAsTheCausalModel) {
  TempDir d;
  json cfg = tiny_llama_config();
  cfg["architectures"] = {"Qwen3ForCausalLM"};
  cfg["model_type"] = "qwen3";
  cfg["tie_word_embeddings"] = true;
  const std::string dir = hf_dir(d, "causal", cfg);
  const auto want = logits(export_dir(dir));
  json bare_cfg = cfg;
  bare_cfg["architectures"] = {"Qwen3Model"};
  const std::string bare = same_weights(d, dir, "bare", bare_cfg);
  TensorMap t = read_tensors(dir), tb;
  for (const auto& [n, v] : t) tb[n.rfind("model.", 0) == 0 ? n.substr(6) : n] = v;
  ASSERT_TRUE(tb.count("embed_tokens.weight") && tb.count("norm.weight") && !tb.count("lm_head.weight"));
  write_tensors(bare, tb);
  auto p = export_dir(bare);
  EXPECT_EQ(p->meta().spec.family, "qwen3");
  EXPECT_GE(p->graph().hidden, 0);
  EXPECT_EQ(want, logits(p));
  json untied = bare_cfg;
  untied["tie_word_embeddings"] = false;
  const std::string u = same_weights(d, bare, "untied", untied);
  EXPECT_NE(error_of([&] { export_dir(u); }).find("lm_head.weight"), std::string::npos) << error_of([&] { export_dir(u); });
}

TEST(ExportHfSources, UnusedTensorsAreRefusedByNameOrLeftOutWithANote) {
  TempDir d;
  json cfg = tiny_llama_config();
  const std::string dir = hf_dir(d, "base", cfg);
  const TensorMap t = read_tensors(dir);

  // A tensor no part of the config reads: refused, named.
  const std::string extra = same_weights(d, dir, "extra", cfg);
  TensorMap te = t;
  te["model.layers.1.self_attn.sinks"] = filled({4}, [](int64_t) { return 1.0f; });
  write_tensors(extra, te);
  std::string err = error_of([&] { export_dir(extra); });
  EXPECT_NE(err.find("model.layers.1.self_attn.sinks"), std::string::npos) << err;

  // A vision tower (multimodal checkpoint, text-only program): left out, and said so.
  const std::string vis = same_weights(d, dir, "vision", cfg);
  TensorMap tv = t;
  tv["vision_tower.vision_model.post_layernorm.weight"] = filled({8}, [](int64_t) { return 1.0f; });
  tv["multi_modal_projector.mm_input_projection_weight"] = filled({8, 4}, [](int64_t i) { return 0.01f * i; });
  write_tensors(vis, tv);
  std::string log;
  auto p = export_dir(vis, &log);
  EXPECT_NE(log.find("vision tower left out: text-only program (2 tensors)"), std::string::npos) << log;
  ASSERT_TRUE(p->meta().provenance.contains("left_out"));
  EXPECT_EQ(p->meta().provenance["left_out"][0], "vision tower left out: text-only program (2 tensors)");
  EXPECT_EQ(logits(export_dir(dir)), logits(p));
  EXPECT_FALSE(export_dir(dir)->meta().provenance.contains("left_out"));
}

// ---- activations -----------------------------------------------------------------------------

TEST(ExportHfSources, ExactGeluRunsAsExactGelu) {
  TempDir d;
  json cfg = {{"architectures", {"Gemma2ForCausalLM"}}, {"vocab_size", 256}, {"hidden_size", 64}, {"intermediate_size", 96},
              {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
              {"max_position_embeddings", 256}, {"sliding_window", 8}, {"query_pre_attn_scalar", 16},
              {"hidden_activation", "gelu"}};
  const std::string dir = hf_dir(d, "erf", cfg);
  json tanh_cfg = cfg;
  tanh_cfg["hidden_activation"] = "gelu_pytorch_tanh";
  auto p = export_dir(dir);
  bool found = false;
  for (const Node& n : p->meta().graph.nodes)
    if (n.op == OpType::GeGLU) {
      EXPECT_EQ(n.attrs.value("activation", ""), "gelu");
      found = true;
    }
  EXPECT_TRUE(found);
  const auto ref = logits(p), opt = logits(p, ExecMode::Optimized);
  EXPECT_LT(nmse(opt, ref), 1e-8);  // the optimized kernel computes the same (exact) GELU
  EXPECT_NE(ref, logits(export_dir(same_weights(d, dir, "tanh", tanh_cfg))));
}

}  // namespace
}  // namespace ptn::testing
