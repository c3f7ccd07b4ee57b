// Helpers shared by the runtime and export tests: in-memory programs built from a weight
// source (the bundled stories260K or random weights for a tiny config), and drivers that run
// token sequences through an Executor with a given cache and collect the logits of every step.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/hf_config.h"
#include "formats/random_weights.h"
#include "formats/weights.h"
#include "graph/checks.h"
#include "kvcache/factory.h"
#include "models/decoder.h"
#include "runtime/executor.h"
#include "runtime/program.h"

namespace ptn::testing {

inline std::string stories_dir() { return std::string(PTN_SOURCE_DIR) + "/models/stories260K"; }

// A program whose tensors are the source's (as stored: f32 for stories260K and random weights).
inline std::shared_ptr<const Program> program_from_source(const WeightSource& src, const BuildOptions& bo,
                                                          int64_t max_seq_length, const std::string& name) {
  ProgramMeta meta;
  meta.spec = src.spec();
  meta.graph = build_decoder_graph(meta.spec, bo);
  meta.cache_spec = cache_spec_from_model(meta.spec);
  meta.max_seq_length = max_seq_length;
  meta.static_cache = bo.static_cache;
  meta.static_context = bo.max_context_length;
  meta.static_cache_dtype = bo.static_cache_dtype;
  if (bo.static_cache) meta.cache_spec.max_positions = std::min(meta.cache_spec.max_positions, bo.max_context_length);
  std::map<std::string, Tensor> tensors;
  for (const Node& n : meta.graph.nodes)
    for (const auto& w : n.weights) tensors[w] = src.get(w);
  return Program::from_memory(std::move(meta), std::move(tensors), name);
}

inline std::shared_ptr<const Program> stories_program(int64_t max_seq = 64) {
  auto src = open_weights(stories_dir() + "/hf");
  return program_from_source(*src, BuildOptions{}, max_seq, "stories260K (memory)");
}

// A small config of a family (random weights), with hidden size, heads and head_dim given.
inline nlohmann::json tiny_llama_config(int64_t hidden = 64, int64_t heads = 4, int64_t kv_heads = 2,
                                        int64_t head_dim = 16, int64_t vocab = 256, int64_t layers = 2) {
  return {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", vocab},
          {"hidden_size", hidden}, {"intermediate_size", 2 * hidden}, {"num_hidden_layers", layers},
          {"num_attention_heads", heads}, {"num_key_value_heads", kv_heads}, {"head_dim", head_dim},
          {"max_position_embeddings", 512}, {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0},
          {"hidden_act", "silu"}, {"tie_word_embeddings", false}};
}

inline std::shared_ptr<const Program> random_program(const nlohmann::json& config, uint64_t seed, int64_t max_seq = 32,
                                                     const BuildOptions& bo = {}) {
  auto src = random_weights(model_spec_from_hf_config(config, "test config"), seed);
  return program_from_source(*src, bo, max_seq, "random program");
}

inline CacheOptions cache_options(DType dtype, int64_t capacity_tokens, int64_t block = 16) {
  CacheOptions co;
  co.dtype = dtype;
  co.capacity_tokens = capacity_tokens;
  co.block_size = block;
  return co;
}

// Logits of one sequence: `prompt` as one step, then every token of `decode` as its own step;
// returns [1 + decode.size()] rows of [vocab].
inline std::vector<std::vector<float>> run_sequence(std::shared_ptr<const Program> p, ExecMode mode,
                                                    const std::string& cache_kind, DType dtype,
                                                    const std::vector<int32_t>& prompt,
                                                    const std::vector<int32_t>& decode) {
  Executor exec(p, mode, static_cast<int64_t>(prompt.size()));
  const int64_t vocab = exec.vocab_size();
  auto cache = make_cache(cache_kind, p->meta().cache_spec,
                          cache_options(dtype, static_cast<int64_t>(prompt.size() + decode.size()) + 64));
  CacheScope scope(exec, *cache);
  cache->add_sequence(0);
  std::vector<std::vector<float>> out;
  StepBatch b;
  for (size_t i = 0; i < prompt.size(); ++i) b.rows.push_back({0, static_cast<int32_t>(i), prompt[i]});
  int64_t n = 0;
  const float* l = exec.step(b, OutputRows::LastPerSequence, &n);
  out.emplace_back(l, l + vocab);
  int32_t pos = static_cast<int32_t>(prompt.size());
  for (int32_t t : decode) {
    l = exec.step(StepBatch{{{0, pos++, t}}}, OutputRows::LastPerSequence, &n);
    out.emplace_back(l, l + vocab);
  }
  return out;
}

inline int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Greedy continuation of `prompt` for n tokens; the logits after the prompt go to *first.
inline std::vector<int32_t> greedy(std::shared_ptr<const Program> p, ExecMode mode, const std::string& cache_kind,
                                   DType dtype, const std::vector<int32_t>& prompt, int n,
                                   std::vector<float>* first = nullptr, int64_t block = 16) {
  Executor exec(p, mode, static_cast<int64_t>(prompt.size()));
  const int64_t vocab = exec.vocab_size();
  auto cache = make_cache(cache_kind, p->meta().cache_spec,
                          cache_options(dtype, static_cast<int64_t>(prompt.size()) + n + 64, block));
  CacheScope scope(exec, *cache);
  cache->add_sequence(0);
  StepBatch b;
  for (size_t i = 0; i < prompt.size(); ++i) b.rows.push_back({0, static_cast<int32_t>(i), prompt[i]});
  int64_t rows = 0;
  const float* l = exec.step(b, OutputRows::LastPerSequence, &rows);
  if (first) first->assign(l, l + vocab);
  std::vector<int32_t> out;
  int32_t pos = static_cast<int32_t>(prompt.size());
  for (int i = 0; i < n; ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(l, l + vocab) - l);
    out.push_back(next);
    if (i + 1 < n) l = exec.step(StepBatch{{{0, pos++, next}}}, OutputRows::LastPerSequence, &rows);
  }
  return out;
}

// sum (a-b)^2 / sum b^2 over all rows.
inline double nmse(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want) {
  double num = 0, den = 0;
  EXPECT_EQ(got.size(), want.size());
  for (size_t r = 0; r < std::min(got.size(), want.size()); ++r) {
    EXPECT_EQ(got[r].size(), want[r].size());
    for (size_t i = 0; i < std::min(got[r].size(), want[r].size()); ++i) {
      const double d = static_cast<double>(got[r][i]) - want[r][i];
      num += d * d;
      den += static_cast<double>(want[r][i]) * want[r][i];
    }
  }
  return den > 0 ? num / den : num;
}

inline double max_abs_diff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double m = 0;
  for (size_t r = 0; r < std::min(a.size(), b.size()); ++r)
    for (size_t i = 0; i < std::min(a[r].size(), b[r].size()); ++i)
      m = std::max(m, std::fabs(static_cast<double>(a[r][i]) - b[r][i]));
  return m;
}

inline std::vector<int32_t> some_tokens(size_t n, int64_t vocab, uint32_t seed) {
  std::vector<int32_t> t;
  uint32_t x = seed * 2654435761u + 12345u;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    t.push_back(static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(vocab)));
  }
  return t;
}

// Runs f and expects a ptn::Error of `kind` whose message contains every string of `parts`.
template <class F>
void expect_error(F&& f, ErrorKind kind, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no ptn::Error thrown (expected one mentioning '" << (parts.empty() ? "" : parts[0]) << "')";
  } catch (const Error& e) {
    EXPECT_EQ(error_kind_name(e.kind()), std::string(error_kind_name(kind))) << e.what();
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "'" << p << "' not in: " << e.what();
  }
}

}  // namespace ptn::testing
