// `ptn export` end to end: option checks, the off-graph program against the static-cache
// baseline, the .ptn round trip, stories260K from its GGUF and its HF directory (golden samples
// pass with every cache, greedy ids and logits equal the independent float32 reference in
// expected.json), quantized exports, and window / chunk layers of several families.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../runtime/program_test_util.h"
#include "export/exporter.h"
#include "runtime/verify.h"

namespace fs = std::filesystem;

namespace ptn {
namespace {

using namespace ptn::testing;
using Rows = std::vector<std::vector<float>>;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("ptn_test_export_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& f) const { return (path / f).string(); }
};

nlohmann::json expected() {
  std::ifstream f(stories_dir() + "/expected.json");
  return nlohmann::json::parse(f);
}

ExportOptions base_options(const std::string& model, const std::string& out) {
  ExportOptions o;
  o.model = model;
  o.output = out;
  o.max_seq_length = 32;
  o.samples = 2;
  return o;
}

ExportResult quiet_export(const ExportOptions& o) {
  std::ostringstream log;
  return export_program(o, log);
}

std::string write_config(const TempDir& d, const std::string& name, const nlohmann::json& cfg) {
  fs::create_directories(d.path / name);
  std::ofstream(d / (name + "/config.json")) << cfg.dump(1);
  return d / name;
}

// Every golden sample passes with the reference cache and the paged cache in each dtype that
// fits the head dims. f32_nmse: threshold with the f32 caches (f32 weights: only summation
// order differs; quantized weights: the optimized matmul also quantizes the activations).
void expect_verifies(const std::shared_ptr<const Program>& p, bool with_q8, double f32_nmse = 1e-6) {
  ASSERT_FALSE(p->meta().samples.empty());
  struct V {
    std::string kind;
    DType dtype;
    double nmse;
  };
  std::vector<V> vs = {{"reference", DType::F32, f32_nmse}, {"paged", DType::F32, f32_nmse}, {"paged", DType::F16, 3e-3},
                       {"paged", DType::BF16, 1e-2}};
  if (with_q8) vs.push_back({"paged", DType::Q8_0, 1e-2});
  for (const auto& v : vs) {
    VerifyOptions vo;
    vo.cache_kind = v.kind;
    vo.cache.dtype = v.dtype;
    vo.cache.block_size = 4;
    vo.max_nmse = v.nmse;
    for (const auto& r : verify_samples(p, vo))
      EXPECT_TRUE(r.pass) << p->name() << " " << v.kind << " " << dtype_name(v.dtype) << " sample " << r.sample
                          << ": nmse " << r.cmp.nmse << " max|err| " << r.cmp.max_abs_err;
  }
}

// --- options ---------------------------------------------------------------------------------

TEST(Export, OffgraphCacheRefusesInGraphCacheFlags) {
  ExportOptions o = base_options("m", "out.ptn");
  EXPECT_NO_THROW(validate_export_options(o));
  o.max_context_length = 128;
  expect_error([&] { validate_export_options(o); }, ErrorKind::InvalidArgument,
               {"--max_context_length", "off-graph", "--ctx", "--cache-type", "--static_cache"});
  o.max_context_length = 0;
  o.kv_cache_dtype = "f16";
  expect_error([&] { validate_export_options(o); }, ErrorKind::InvalidArgument,
               {"--kv_cache_dtype", "ptn run", "ptn serve"});
  o.offgraph_cache = true;  // explicit --offgraph_cache: the same refusal
  expect_error([&] { validate_export_options(o); }, ErrorKind::InvalidArgument, {"--kv_cache_dtype"});
  o.kv_cache_dtype.clear();
  o.static_cache = true;
  expect_error([&] { validate_export_options(o); }, ErrorKind::InvalidArgument, {"exclude"});
  o.offgraph_cache = false;
  expect_error([&] { validate_export_options(o); }, ErrorKind::InvalidArgument, {"--max_context_length"});
  o.max_context_length = 64;
  o.kv_cache_dtype = "q8_0";
  expect_error([&] { validate_export_options(o); }, ErrorKind::InvalidArgument, {"--kv_cache_dtype"});
  o.kv_cache_dtype = "bf16";
  EXPECT_NO_THROW(validate_export_options(o));
  o.quantize = "q3_xs";
  expect_error([&] { validate_export_options(o); }, ErrorKind::InvalidArgument, {"q3_xs"});
  o.quantize.clear();
  o.max_seq_length = 0;
  expect_error([&] { validate_export_options(o); }, ErrorKind::InvalidArgument, {"--max_seq_length"});
}

TEST(Export, ConfigOnlyNeedsRandomWeights) {
  TempDir d;
  ExportOptions o = base_options(stories_dir() + "/hf/config.json", d / "x.ptn");
  expect_error([&] { quiet_export(o); }, ErrorKind::InvalidArgument, {"--random_weights"});
  EXPECT_FALSE(fs::exists(d / "x.ptn"));
  // With --random_weights the same config exports (and the file says so).
  o.random_weights = true;
  o.seed = 3;
  ExportResult r = quiet_export(o);
  EXPECT_TRUE(r.meta.provenance.at("random_weights").get<bool>());
  EXPECT_TRUE(fs::exists(d / "x.ptn"));
  // A directory needs a config.json with --random_weights; a .bin model is not a config.
  o.model = stories_dir() + "/stories260K.bin";
  expect_error([&] { quiet_export(o); }, ErrorKind::InvalidArgument, {"config.json"});
}

// --- the off-graph program against the static-cache baseline ---------------------------------

TEST(Export, OffgraphLogitsMatchStaticCache) {
  auto src = open_weights(stories_dir() + "/hf");
  auto off = program_from_source(*src, BuildOptions{}, 16, "offgraph");
  BuildOptions sb;
  sb.static_cache = true;
  sb.max_context_length = 48;
  auto stat = program_from_source(*src, sb, 16, "static");
  const auto prompt = some_tokens(16, 512, 40), decode = some_tokens(30, 512, 41);
  for (ExecMode mode : {ExecMode::Reference, ExecMode::Optimized}) {
    Rows a = run_sequence(off, mode, "reference", DType::F32, prompt, decode);
    Executor exec(stat, mode, 16);
    Rows b;
    StepBatch pre;
    for (size_t i = 0; i < prompt.size(); ++i) pre.rows.push_back({0, static_cast<int32_t>(i), prompt[i]});
    int64_t n = 0;
    const float* l = exec.step(pre, OutputRows::LastPerSequence, &n);
    b.emplace_back(l, l + 512);
    for (size_t d = 0; d < decode.size(); ++d) {
      l = exec.step(StepBatch{{{0, static_cast<int32_t>(prompt.size() + d), decode[d]}}}, OutputRows::LastPerSequence,
                    &n);
      b.emplace_back(l, l + 512);
    }
    EXPECT_LE(max_abs_diff(a, b), 1e-5) << (mode == ExecMode::Reference ? "reference" : "optimized");
    // Beyond the static context the static program refuses; two sequences too.
    expect_error([&] { exec.step(StepBatch{{{0, 48, 1}}}, OutputRows::All, &n); }, ErrorKind::Capacity, {"48"});
    expect_error([&] { exec.step(StepBatch{{{0, 0, 1}, {1, 0, 1}}}, OutputRows::All, &n); },
                 ErrorKind::InvalidArgument, {"one sequence"});
    // And a static program cannot take a runtime cache.
    auto cache = make_cache("reference", stat->meta().cache_spec, cache_options(DType::F32, 64));
    expect_error([&] { CacheScope s(exec, *cache); }, ErrorKind::InvalidArgument, {"static"});
  }
}

TEST(Export, StaticAndOffgraphFilesAgree) {
  TempDir d;
  ExportOptions o = base_options(stories_dir() + "/hf", d / "off.ptn");
  quiet_export(o);
  o.output = d / "static.ptn";
  o.static_cache = true;
  o.max_context_length = 64;
  ExportResult rs = quiet_export(o);
  EXPECT_NO_THROW(check_static_cache(rs.meta.graph, 5));
  auto off = Program::load(d / "off.ptn", VerifyLevel::Full);
  auto stat = Program::load(d / "static.ptn", VerifyLevel::Full);
  EXPECT_NO_THROW(check_offgraph(off->graph(), 5));
  EXPECT_THROW(check_offgraph(stat->graph(), 5), Error);
  EXPECT_TRUE(stat->meta().static_cache);
  EXPECT_EQ(stat->meta().static_context, 64);
  // Same seed: same golden prompts, so the golden logits of the two files agree.
  ASSERT_EQ(off->meta().samples.size(), stat->meta().samples.size());
  for (size_t s = 0; s < off->meta().samples.size(); ++s) {
    EXPECT_EQ(off->meta().samples[s].prompt, stat->meta().samples[s].prompt);
    EXPECT_EQ(off->meta().samples[s].decode, stat->meta().samples[s].decode);
    const Tensor& a = off->tensor(off->meta().samples[s].logits_tensor);
    const Tensor& b = stat->tensor(stat->meta().samples[s].logits_tensor);
    ASSERT_EQ(a.numel(), b.numel());
    double m = 0;
    for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, double(std::fabs(a.data_as<float>()[i] - b.data_as<float>()[i])));
    EXPECT_LE(m, 1e-5);
  }
  VerifyOptions vo;
  for (const auto& r : verify_samples(stat, vo)) EXPECT_TRUE(r.pass) << "static sample " << r.sample;
}

// --- serialization ---------------------------------------------------------------------------

TEST(Export, RoundTripKeepsMetaAndTensors) {
  TempDir d;
  ExportOptions o = base_options(stories_dir() + "/hf", d / "s.ptn");
  o.samples = 3;
  ExportResult r = quiet_export(o);
  auto p = Program::load(d / "s.ptn", VerifyLevel::Full);
  const ProgramMeta& m = p->meta();
  EXPECT_EQ(spec_to_json(m.spec), spec_to_json(r.meta.spec));
  EXPECT_EQ(m.graph.to_json(), r.meta.graph.to_json());
  EXPECT_EQ(cache_spec_to_json(m.cache_spec), cache_spec_to_json(r.meta.cache_spec));
  EXPECT_EQ(m.max_seq_length, 32);
  EXPECT_FALSE(m.static_cache);
  EXPECT_EQ(m.provenance, r.meta.provenance);
  ASSERT_TRUE(m.tokenizer.has_value());
  ASSERT_TRUE(r.meta.tokenizer.has_value());
  EXPECT_EQ(m.tokenizer->tokens, r.meta.tokenizer->tokens);
  EXPECT_EQ(m.tokenizer->tokens.size(), 512u);
  ASSERT_EQ(m.samples.size(), 3u);
  for (size_t s = 0; s < 3; ++s) {
    EXPECT_EQ(m.samples[s].prompt, r.meta.samples[s].prompt);
    EXPECT_EQ(m.samples[s].decode, r.meta.samples[s].decode);
    EXPECT_EQ(m.samples[s].decode.size(), 6u);
  }
  EXPECT_EQ(m.samples[0].prompt.size(), 24u);  // min(max_seq_length 32, 24)
  // Every weight is byte-identical to the source's (f32 source, no --quantize).
  auto src = open_weights(stories_dir() + "/hf");
  int weights = 0;
  for (const Node& n : m.graph.nodes)
    for (const auto& w : n.weights) {
      const Tensor& got = p->tensor(w);
      Tensor want = src->get(w);
      ASSERT_EQ(got.shape(), want.shape()) << w;
      ASSERT_EQ(got.dtype(), want.dtype()) << w;
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.nbytes()), 0) << w;
      ++weights;
    }
  EXPECT_GT(weights, 5 * 9);
  // A program loaded from the file computes what the in-memory one does.
  auto mem = program_from_source(*src, BuildOptions{}, 32, "memory");
  const auto prompt = some_tokens(9, 512, 50), decode = some_tokens(5, 512, 51);
  EXPECT_EQ(max_abs_diff(run_sequence(p, ExecMode::Reference, "reference", DType::F32, prompt, decode),
                         run_sequence(mem, ExecMode::Reference, "reference", DType::F32, prompt, decode)),
            0.0);
}

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

// verify can fail: golden logits that differ from what the program computes are caught.
TEST(Export, VerifyDetectsWrongGoldenLogits) {
  TempDir d;
  ExportOptions o = base_options(stories_dir() + "/hf", d / "s.ptn");
  o.samples = 1;
  ExportResult r = quiet_export(o);
  auto good = Program::load(o.output);
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, t] : good->tensors()) tensors[name] = t;
  const std::string lt = r.meta.samples[0].logits_tensor;
  Tensor bad = Tensor::zeros(DType::F32, tensors[lt].shape());
  std::memcpy(bad.data(), tensors[lt].data(), bad.nbytes());
  // Shift one decode step's logits (as if the cache had lost a position).
  for (int64_t i = 0; i < 512; ++i) bad.data_as<float>()[3 * 512 + i] *= 1.2f;
  tensors[lt] = bad;
  auto p = Program::from_memory(good->meta(), tensors, "tampered");
  VerifyOptions vo;
  auto checks = verify_samples(p, vo);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_FALSE(checks[0].pass);
  EXPECT_GT(checks[0].cmp.nmse, 1e-3);
  EXPECT_TRUE(verify_samples(good, vo)[0].pass);
}

// A path that is not UTF-8 (a Latin-1 file name) lands in the provenance; JSON cannot hold
// those bytes, so they are replaced instead of failing the export.
TEST(Export, NonUtf8OutputPathExports) {
  TempDir d;
  ExportOptions o = base_options(stories_dir() + "/hf", d / "caf\xe9.ptn");
  o.samples = 1;
  o.command_line = "ptn export --output " + o.output;
  quiet_export(o);
  auto p = Program::load(o.output);
  const std::string cl = p->meta().provenance.at("command_line").get<std::string>();
  EXPECT_NE(cl.find("caf\xef\xbf\xbd.ptn"), std::string::npos) << cl;  // U+FFFD
}

// A static context shorter than the default golden prompt (24) + decode steps (6): the samples
// shrink to fit instead of failing the export; a context with no room at all is refused.
TEST(Export, StaticGoldenSamplesFitTheStaticContext) {
  TempDir d;
  ExportOptions o = base_options(stories_dir() + "/hf", d / "st.ptn");
  o.max_seq_length = 64;
  o.static_cache = true;
  o.max_context_length = 16;
  quiet_export(o);
  auto p = Program::load(o.output, VerifyLevel::Full);
  for (const auto& s : p->meta().samples) EXPECT_LE(s.prompt.size() + s.decode.size(), 16u);
  VerifyOptions vo;
  for (const auto& r : verify_samples(p, vo)) EXPECT_TRUE(r.pass) << r.sample;
  o.max_context_length = 6;
  expect_error([&] { quiet_export(o); }, ErrorKind::InvalidArgument, {"--max_context_length", "--samples 0"});
  o.samples = 0;
  EXPECT_NO_THROW(quiet_export(o));
  // The same for an off-graph program of a model whose context (12) is shorter than 24 + 6.
  nlohmann::json cfg = tiny_llama_config();
  cfg["max_position_embeddings"] = 12;
  ExportOptions r = base_options(write_config(d, "short", cfg), d / "short.ptn");
  r.random_weights = true;
  quiet_export(r);
  auto ps = Program::load(r.output);
  ASSERT_EQ(ps->meta().samples.size(), 2u);
  for (const auto& s : ps->meta().samples) EXPECT_LE(s.prompt.size() + s.decode.size(), 12u);
  for (const auto& c : verify_samples(ps, vo)) EXPECT_TRUE(c.pass) << c.sample;
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
