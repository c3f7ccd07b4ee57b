// `ptn export`: option checks, the off-graph program against the static-cache baseline, the
// .ptn round trip, golden samples that fit the context, verify failing on wrong logits.
#include <gtest/gtest.h>

#include <cstring>

#include "export_test_util.h"

namespace fs = std::filesystem;

namespace ptn {
namespace {

using namespace ptn::testing;
using Rows = std::vector<std::vector<float>>;

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
  expect_error([&] { validate_export_options(o); }, ErrorKind::InvalidArgument, {"--static-cache", "--max-context-length"});
  o.max_context_length = 64;
  o.kv_cache_dtype = "q8_0";
  expect_error([&] { validate_export_options(o); }, ErrorKind::InvalidArgument, {"--kv_cache_dtype"});
  o.kv_cache_dtype = "bf16";
  EXPECT_NO_THROW(validate_export_options(o));
  o.quantize = "q3_xs";
  expect_error([&] { validate_export_options(o); }, ErrorKind::InvalidArgument, {"q3_xs"});
  // Block types ptn reads from GGUF files are named as such, not "unknown".
  o.quantize = "q5_1";
  expect_error([&] { validate_export_options(o); }, ErrorKind::InvalidArgument, {"'q5_1' is a tensor type", "q4_k_m"});
  o.quantize.clear();
  o.max_seq_length = 0;
  expect_error([&] { validate_export_options(o); }, ErrorKind::InvalidArgument, {"--max_seq_length"});
}

TEST(Export, ConfigOnlyNeedsRandomWeights) {
  TempDir d;
  ExportOptions o = base_options(stories_dir() + "/hf/config.json", d / "x.ptn");
  expect_error([&] { quiet_export(o); }, ErrorKind::InvalidArgument, {"--random-weights"});
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

}  // namespace
}  // namespace ptn
