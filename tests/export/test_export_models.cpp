// `ptn export` of real and synthetic models: stories260K from its GGUF and its HF directory
// (golden samples pass with every cache, greedy ids and logits equal the independent float32
// reference in expected.json), quantized exports and llama.cpp's quantized GGUFs, and window /
// chunk layers of several families.
#include <gtest/gtest.h>

#include "core/cpu.h"
#include "export_test_util.h"

namespace fs = std::filesystem;

namespace ptn {
namespace {

using namespace ptn::testing;
using Rows = std::vector<std::vector<float>>;

// --- stories260K end to end --------------------------------------------------------------------

void check_stories_program(const std::shared_ptr<const Program>& p) {
  expect_verifies(p, /*with_q8=*/false);
  const nlohmann::json e = expected();
  const auto prompt = e.at("prompt_token_ids_with_bos").get<std::vector<int32_t>>();
  const auto want_ids = e.at("greedy_50_new_token_ids").get<std::vector<int32_t>>();
  const auto want_logits = e.at("logits_after_prompt_pos4").get<std::vector<float>>();
  ASSERT_EQ(want_logits.size(), 512u);
  std::vector<float> first;
  EXPECT_EQ(greedy(p, ExecMode::Reference, "reference", DType::F32, prompt, 50, &first), want_ids) << p->name();
  double m = 0;
  for (size_t i = 0; i < 512; ++i) m = std::max(m, double(std::fabs(first[i] - want_logits[i])));
  EXPECT_LE(m, 1e-4) << p->name();
  EXPECT_EQ(argmax(first), e.at("argmax_after_prompt").get<int32_t>());
  // The optimized executor with the paged cache gives the same continuation.
  EXPECT_EQ(greedy(p, ExecMode::Optimized, "paged", DType::F32, prompt, 50), want_ids) << p->name();
  // The tokenizer came along: the prompt text encodes to the expected ids.
  ASSERT_TRUE(p->meta().tokenizer.has_value());
}

TEST(Export, StoriesFromGgufAndHfMatchTheReference) {
  TempDir d;
  for (const std::string& model : {stories_dir() + "/stories260K.gguf", stories_dir() + "/hf"}) {
    SCOPED_TRACE(model);
    ExportOptions o = base_options(model, d / "s.ptn");
    o.max_seq_length = 64;
    quiet_export(o);
    auto p = Program::load(d / "s.ptn", VerifyLevel::Full);
    EXPECT_EQ(p->meta().spec.n_layers, 5);
    EXPECT_EQ(p->meta().spec.vocab_size, 512);
    check_stories_program(p);
  }
}

// --- quantized exports ------------------------------------------------------------------------

TEST(Export, QuantizedExportsVerify) {
  TempDir d;
  // hidden 256 / head_dim 64 / ffn 512: rows of 256 and 512 so the K-quants apply.
  nlohmann::json cfg = tiny_llama_config(256, 4, 2, 64, 512, 2);
  const std::string dir = write_config(d, "tiny", cfg);
  struct Q {
    std::string policy;
    std::set<DType> matrix_types;
  };
  const std::vector<Q> qs = {{"q8_0", {DType::Q8_0}},
                             {"q4_k_m", {DType::Q4_K, DType::Q6_K}},
                             {"f16", {DType::F16}},
                             {"bf16", {DType::BF16}}};
  for (const auto& q : qs) {
    SCOPED_TRACE(q.policy);
    ExportOptions o = base_options(dir, d / (q.policy + ".ptn"));
    o.random_weights = true;
    o.seed = 11;
    o.samples = 1;
    o.sample_prompt_tokens = 12;
    o.quantize = q.policy;
    quiet_export(o);
    auto p = Program::load(o.output, VerifyLevel::Full);
    std::set<DType> seen;
    for (const Node& n : p->graph().nodes)
      for (const auto& w : n.weights) {
        const Tensor& t = p->tensor(w);
        if (t.ndim() == 2) seen.insert(t.dtype());
        else EXPECT_EQ(t.dtype(), DType::F32) << w;
      }
    EXPECT_EQ(seen, q.matrix_types);
    // f16 weights multiply f32 activations; bf16 and the block types round the activations
    // too (bf16: 8-bit mantissa, relative error ~2e-3, NMSE ~5e-6 measured).
    const double f32_nmse = q.policy == "f16" ? 1e-6 : q.policy == "bf16" ? 1e-4 : 1e-3;
    expect_verifies(p, /*with_q8=*/true, f32_nmse);
  }
}

// The optimized executor runs Q4_K matrices from an interleaved copy (AVX-512) unless
// set_weight_repack(false): both give the same greedy continuation and logits that differ by
// float rounding only (the integer dot products are the same). On other SIMD levels the copy is
// not made and both runs take the same path.
TEST(Export, InterleavedQ4KWeightsGiveTheSameLogits) {
  if (simd_level() < SimdLevel::AVX512)
    GTEST_SKIP() << "the interleaved copy is made for the AVX-512 kernels only; this CPU runs "
                 << simd_level_name(simd_level()) << ", where both runs would take the same path";
  TempDir d;
  const std::string dir = write_config(d, "tiny", tiny_llama_config(256, 4, 2, 64, 512, 2));
  ExportOptions o = base_options(dir, d / "q4.ptn");
  o.random_weights = true;
  o.seed = 12;
  o.samples = 0;
  o.quantize = "q4_k_m";
  quiet_export(o);
  auto p = Program::load(o.output, VerifyLevel::Full);
  const std::vector<int32_t> prompt = {1, 17, 300, 42, 9, 250, 7};
  std::vector<float> packed_logits, rows_logits;
  const auto packed = greedy(p, ExecMode::Optimized, "paged", DType::F32, prompt, 20, &packed_logits);
  set_weight_repack(false);
  const auto rows = greedy(p, ExecMode::Optimized, "paged", DType::F32, prompt, 20, &rows_logits);
  set_weight_repack(true);
  EXPECT_EQ(packed, rows);
  ASSERT_EQ(packed_logits.size(), rows_logits.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < rows_logits.size(); ++i) {
    num += (packed_logits[i] - rows_logits[i]) * double(packed_logits[i] - rows_logits[i]);
    den += rows_logits[i] * double(rows_logits[i]);
  }
  EXPECT_LT(num / den, 1e-10);
}

// --- window and chunk layers -------------------------------------------------------------------

struct WindowCase {
  std::string name;
  nlohmann::json config;
};

std::vector<WindowCase> window_cases() {
  const int W = 8;
  std::vector<WindowCase> c;
  c.push_back({"gemma3",
               {{"architectures", {"Gemma3ForCausalLM"}}, {"model_type", "gemma3_text"}, {"vocab_size", 256},
                {"hidden_size", 64}, {"intermediate_size", 128}, {"num_hidden_layers", 4},
                {"num_attention_heads", 4}, {"num_key_value_heads", 1}, {"head_dim", 32},
                {"query_pre_attn_scalar", 32}, {"sliding_window", W}, {"sliding_window_pattern", 2},
                {"rope_theta", 1000000.0}, {"rope_local_base_freq", 10000.0}, {"rope_scaling", nullptr},
                {"hidden_activation", "gelu_pytorch_tanh"}, {"max_position_embeddings", 512},
                {"rms_norm_eps", 1e-6}}});
  c.push_back({"mistral",
               {{"architectures", {"MistralForCausalLM"}}, {"model_type", "mistral"}, {"vocab_size", 256},
                {"hidden_size", 64}, {"intermediate_size", 128}, {"num_hidden_layers", 2},
                {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"max_position_embeddings", 512},
                {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0}, {"sliding_window", W}, {"hidden_act", "silu"}}});
  c.push_back({"qwen2",
               {{"architectures", {"Qwen2ForCausalLM"}}, {"model_type", "qwen2"}, {"vocab_size", 256},
                {"hidden_size", 64}, {"intermediate_size", 128}, {"num_hidden_layers", 3},
                {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"max_position_embeddings", 512},
                {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0}, {"use_sliding_window", true},
                {"sliding_window", W}, {"max_window_layers", 1}, {"hidden_act", "silu"},
                {"tie_word_embeddings", true}}});
  c.push_back({"llama4",
               {{"architectures", {"Llama4ForCausalLM"}}, {"model_type", "llama4_text"}, {"vocab_size", 256},
                {"hidden_size", 64}, {"intermediate_size", 128}, {"intermediate_size_mlp", 128},
                {"num_hidden_layers", 4}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
                {"max_position_embeddings", 512}, {"rms_norm_eps", 1e-5}, {"rope_theta", 500000.0},
                {"attention_chunk_size", W}, {"num_local_experts", 1}, {"moe_layers", nlohmann::json::array()},
                {"use_qk_norm", true}, {"attn_temperature_tuning", true}, {"floor_scale", 8192},
                {"attn_scale", 0.1}, {"hidden_act", "silu"}, {"tie_word_embeddings", false}}});
  return c;
}

TEST(Export, WindowAndChunkLayersExportVerifyAndMatchTheReference) {
  TempDir d;
  for (const auto& wc : window_cases()) {
    SCOPED_TRACE(wc.name);
    const ModelSpec spec = model_spec_from_hf_config(wc.config, wc.name);
    int windowed = 0;
    for (const auto& l : spec.layers) windowed += l.kind != AttnKind::Full && l.span == 8;
    ASSERT_GT(windowed, 0) << "the tiny config has no window/chunk layer";
    ExportOptions o = base_options(write_config(d, wc.name, wc.config), d / (wc.name + ".ptn"));
    o.random_weights = true;
    o.seed = 5;
    o.sample_prompt_tokens = 20;  // longer than the window
    ExportResult r = quiet_export(o);
    int in_cache_spec = 0;
    for (const auto& l : r.meta.cache_spec.layers) in_cache_spec += l.kind != AttnKind::Full && l.span == 8;
    EXPECT_EQ(in_cache_spec, windowed);
    auto p = Program::load(o.output, VerifyLevel::Full);
    expect_verifies(p, /*with_q8=*/p->meta().cache_spec.layers[0].head_dim_k % 32 == 0);

    // Greedy: optimized executor + paged cache (block 4, so out-of-window blocks are released
    // where every layer is windowed) equals the reference executor + reference cache, for 64
    // steps past the window.
    const auto prompt = some_tokens(5, 256, 60);
    const int n = 8 + 64;
    const auto want = greedy(p, ExecMode::Reference, "reference", DType::F32, prompt, n);
    EXPECT_EQ(greedy(p, ExecMode::Optimized, "paged", DType::F32, prompt, n, nullptr, 4), want);

    // The window matters: the same weights with every layer full agree inside the window and
    // differ past it.
    ModelSpec full = spec;
    for (auto& l : full.layers) {
      l.kind = AttnKind::Full;
      l.span = 0;
    }
    auto pf = program_from_source(*random_weights(full, 5), BuildOptions{}, 32, "full");
    auto pw = program_from_source(*random_weights(spec, 5), BuildOptions{}, 32, "windowed");
    const auto toks = some_tokens(20, 256, 61);
    Rows lw = run_sequence(pw, ExecMode::Reference, "reference", DType::F32, {toks[0]},
                           std::vector<int32_t>(toks.begin() + 1, toks.end()));
    Rows lf = run_sequence(pf, ExecMode::Reference, "reference", DType::F32, {toks[0]},
                           std::vector<int32_t>(toks.begin() + 1, toks.end()));
    EXPECT_EQ(max_abs_diff(Rows(lw.begin(), lw.begin() + 8), Rows(lf.begin(), lf.begin() + 8)), 0.0);
    EXPECT_GT(max_abs_diff(Rows(lw.begin() + 8, lw.end()), Rows(lf.begin() + 8, lf.end())), 1e-6);
  }
}

TEST(Export, WindowLayersCanBeRefused) {
  TempDir d;
  const auto wc = window_cases()[1];
  ExportOptions o = base_options(write_config(d, wc.name, wc.config), d / "m.ptn");
  o.random_weights = true;
  o.allow_windows = false;
  expect_error([&] { quiet_export(o); }, ErrorKind::Unsupported, {"sliding-window", "layers 0 (window 8)"});
}

// llama.cpp's requantized stories260K GGUFs keep their block types through export (rows of 64
// and 172 use the fallback types), verify, and start the expected story.
TEST(Export, QuantizedGgufsKeepTheirTypesAndVerify) {
  TempDir d;
  const nlohmann::json e = expected();
  const auto prompt = e.at("prompt_token_ids_with_bos").get<std::vector<int32_t>>();
  auto want = e.at("greedy_50_new_token_ids").get<std::vector<int32_t>>();
  want.resize(10);
  for (const char* f : {"stories260K-F16.gguf", "stories260K-Q6_K.gguf", "stories260K-Q4_K_M.gguf"}) {
    SCOPED_TRACE(f);
    ExportOptions o = base_options(stories_dir() + "/quantized/" + f, d / "q.ptn");
    o.samples = 1;
    quiet_export(o);
    auto p = Program::load(o.output, VerifyLevel::Full);
    auto src = open_weights(o.model);
    for (const Node& n : p->graph().nodes)
      for (const auto& w : n.weights) EXPECT_EQ(p->tensor(w).dtype(), src->get(w).dtype()) << w;
    expect_verifies(p, /*with_q8=*/false, 1e-3);
    EXPECT_EQ(greedy(p, ExecMode::Reference, "reference", DType::F32, prompt, 10), want);
    EXPECT_EQ(greedy(p, ExecMode::Optimized, "paged", DType::F32, prompt, 10), want);
  }
}

}  // namespace
}  // namespace ptn
