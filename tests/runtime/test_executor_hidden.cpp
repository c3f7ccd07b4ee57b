// The graph's `hidden` output (the final-norm states of the selected rows, which embeddings
// pool): what the optimized executor gives against the reference executor and against a plain
// computation from the logits (logits = hidden x classifier^T for f32 weights), rows selected by
// list, steps without the classifier, and the JSON round trip of the output.
#include <gtest/gtest.h>

#include <cmath>

#include "program_test_util.h"
#include "runtime/manifest.h"

namespace ptn::testing {
namespace {

const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378, 429, 306, 267, 270, 319, 1, 89, 44};

double nmse(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den > 0 ? num / den : num;
}

// Every row's hidden state of kPrompt as one step with `mode` and `cache_kind`, [T * H].
std::vector<double> all_hidden(const std::shared_ptr<const Program>& p, ExecMode mode, const std::string& cache_kind,
                               bool logits) {
  Executor exec(p, mode, 64);
  auto cache = make_cache(cache_kind, p->meta().cache_spec, cache_options(DType::F32, 128));
  CacheScope scope(exec, *cache);
  cache->add_sequence(7);
  StepBatch b;
  std::vector<int32_t> rows;
  for (size_t i = 0; i < kPrompt.size(); ++i) {
    b.rows.push_back({7, static_cast<int32_t>(i), kPrompt[i]});
    rows.push_back(static_cast<int32_t>(i));
  }
  int64_t n = 0;
  const float* l = exec.step_rows(b, rows, logits, &n);
  EXPECT_EQ(n, static_cast<int64_t>(kPrompt.size()));
  EXPECT_EQ(l == nullptr, !logits);
  const int64_t H = exec.hidden_size();
  EXPECT_EQ(H, p->meta().spec.hidden_size);
  const float* h = exec.hidden();
  return std::vector<double>(h, h + n * H);
}

TEST(ExecutorHidden, OptimizedMatchesReferenceAndTheLogits) {
  auto p = stories_program();
  ASSERT_GE(p->graph().hidden, 0);
  const std::vector<double> opt = all_hidden(p, ExecMode::Optimized, "paged", true);
  const std::vector<double> ref = all_hidden(p, ExecMode::Reference, "reference", true);
  const double e = nmse(opt, ref);
  std::printf("[ hidden   ] stories260K, %zu rows: NMSE optimized+paged vs reference %.2e\n", kPrompt.size(), e);
  EXPECT_LT(e, 1e-7);
  // Without the classifier: the same states.
  EXPECT_EQ(all_hidden(p, ExecMode::Optimized, "paged", false), opt);

  // A plain computation: the reference executor's logits are hidden x W^T (stories260K ties
  // its classifier to the f32 token embedding).
  const int64_t H = p->meta().spec.hidden_size, V = p->meta().spec.vocab_size;
  ASSERT_TRUE(p->meta().spec.tie_word_embeddings);
  const float* W = p->tensor("token_embd.weight").data_as<float>();
  Executor exec(p, ExecMode::Reference, 64);
  auto cache = make_cache("reference", p->meta().cache_spec, cache_options(DType::F32, 128));
  CacheScope scope(exec, *cache);
  cache->add_sequence(0);
  StepBatch b;
  for (size_t i = 0; i < kPrompt.size(); ++i) b.rows.push_back({0, static_cast<int32_t>(i), kPrompt[i]});
  int64_t n = 0;
  const float* logits = exec.step(b, OutputRows::All, &n);
  std::vector<double> got, want;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t v = 0; v < V; ++v) {
      double dot = 0;
      for (int64_t c = 0; c < H; ++c) dot += ref[static_cast<size_t>(r * H + c)] * W[v * H + c];
      got.push_back(dot);
      want.push_back(logits[r * V + v]);
    }
  EXPECT_LT(nmse(got, want), 1e-10) << "the hidden output is not what the classifier reads";
}

TEST(ExecutorHidden, ListedRowsSelectInTheOrderGiven) {
  auto p = stories_program();
  const std::vector<double> every = all_hidden(p, ExecMode::Optimized, "paged", true);
  const int64_t H = p->meta().spec.hidden_size;
  Executor exec(p, ExecMode::Optimized, 64);
  auto cache = make_cache("paged", p->meta().cache_spec, cache_options(DType::F32, 128));
  CacheScope scope(exec, *cache);
  cache->add_sequence(7);
  StepBatch b;
  for (size_t i = 0; i < kPrompt.size(); ++i) b.rows.push_back({7, static_cast<int32_t>(i), kPrompt[i]});
  const std::vector<int32_t> rows = {12, 0, 5, 5};
  int64_t n = 0;
  exec.step_rows(b, rows, false, &n);
  ASSERT_EQ(n, 4);
  for (size_t k = 0; k < rows.size(); ++k)
    for (int64_t c = 0; c < H; ++c)
      EXPECT_NEAR(exec.hidden()[static_cast<int64_t>(k) * H + c], every[static_cast<size_t>(rows[k] * H + c)], 1e-5)
          << "selected row " << k;
}

TEST(ExecutorHidden, BadRowListsAreRefusedAndTheCacheIsUntouched) {
  auto p = stories_program();
  Executor exec(p, ExecMode::Optimized, 64);
  auto cache = make_cache("paged", p->meta().cache_spec, cache_options(DType::F32, 128));
  CacheScope scope(exec, *cache);
  cache->add_sequence(1);
  StepBatch b{{{1, 0, 1}, {1, 1, 403}}};
  int64_t n = 0;
  for (const std::vector<int32_t>& bad : {std::vector<int32_t>{}, {2}, {-1}, {0, 1, 1}}) {
    try {
      exec.step_rows(b, bad, true, &n);
      ADD_FAILURE() << "a bad row list was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("select"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(cache->bytes_used(), 0u);
}

TEST(ExecutorHidden, TheOutputRoundTripsAndBadOnesAreRefusedByName) {
  auto p = stories_program();
  const nlohmann::json j = p->graph().to_json();
  ASSERT_TRUE(j.contains("hidden"));
  EXPECT_EQ(Graph::from_json(j, "test").hidden, p->graph().hidden);
  nlohmann::json old = j;
  old.erase("hidden");  // a program written before the output existed
  EXPECT_EQ(Graph::from_json(old, "test").hidden, -1);
  for (const nlohmann::json& v : {nlohmann::json(-1), nlohmann::json(1 << 20), nlohmann::json("x"),
                                  nlohmann::json(j["input_ids"]), nlohmann::json(0)}) {
    nlohmann::json bad = j;
    bad["hidden"] = v;
    try {
      Graph::from_json(bad, "test");
      ADD_FAILURE() << "hidden = " << v.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("hidden"), std::string::npos) << e.what();
    }
  }
}

TEST(ExecutorHidden, AProgramWithoutTheOutputRefusesHiddenOnlySteps) {
  auto src = open_weights(stories_dir() + "/hf");
  ProgramMeta meta;
  meta.spec = src->spec();
  meta.graph = build_decoder_graph(meta.spec, BuildOptions{});
  meta.graph.hidden = -1;
  meta.cache_spec = cache_spec_from_model(meta.spec);
  meta.max_seq_length = 8;
  std::map<std::string, Tensor> tensors;
  for (const Node& n : meta.graph.nodes)
    for (const auto& w : n.weights) tensors[w] = src->get(w);
  auto p = Program::from_memory(std::move(meta), std::move(tensors), "old program");
  Executor exec(p, ExecMode::Optimized, 8);
  EXPECT_EQ(exec.hidden_size(), 0);
  EXPECT_EQ(exec.hidden(), nullptr);
  auto cache = make_cache("paged", p->meta().cache_spec, cache_options(DType::F32, 64));
  CacheScope scope(exec, *cache);
  cache->add_sequence(1);
  int64_t n = 0;
  EXPECT_THROW(exec.step_rows(StepBatch{{{1, 0, 1}}}, {0}, false, &n), Error);
  EXPECT_NE(exec.step_rows(StepBatch{{{1, 0, 1}}}, {0}, true, &n), nullptr);
}

TEST(ManifestEmbedding, RoundTripsAndRefusesBadValuesByName) {
  auto p = stories_program();
  ProgramMeta m = p->meta();
  m.embedding.pooling = "mean";
  m.embedding.matryoshka_dimensions = {8, 16};
  m.embedding.matryoshka = true;
  std::map<std::string, Tensor> extra;
  nlohmann::json j = meta_to_json(m, extra);
  std::map<std::string, Tensor> none;
  const ProgramMeta back = meta_from_json(j, none, "test");
  EXPECT_EQ(back.embedding.pooling, "mean");
  EXPECT_TRUE(back.embedding.matryoshka);
  EXPECT_EQ(back.embedding.matryoshka_dimensions, (std::vector<int64_t>{8, 16}));
  ProgramMeta plain = p->meta();
  EXPECT_FALSE(meta_to_json(plain, extra).contains("embedding")) << "written only when the model says";
  for (const nlohmann::json& e : {nlohmann::json{{"pooling", "max"}}, nlohmann::json{{"pooling", 3}},
                                  nlohmann::json{{"matryoshka_dimensions", {0}}},
                                  nlohmann::json{{"matryoshka_dimensions", {m.spec.hidden_size + 1}}},
                                  nlohmann::json{{"matryoshka", "yes"}}, nlohmann::json("last")}) {
    nlohmann::json bad = j;
    bad["embedding"] = e;
    try {
      meta_from_json(bad, none, "test");
      ADD_FAILURE() << e.dump() << " was accepted";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("embedding"), std::string::npos) << err.what();
    }
  }
}

}  // namespace
}  // namespace ptn::testing
