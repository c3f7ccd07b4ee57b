// The semantic content of a .ptn manifest: model spec, cache spec, tokenizer, golden samples,
// provenance, and their JSON (and tensor) encodings. The container itself (header, tensor
// table, checksums) is formats/ptn_file.h.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "formats/model_spec.h"
#include "formats/tokenizer_spec.h"
#include "graph/graph.h"
#include "kvcache/cache.h"

namespace ptn {

constexpr int kProgramSchemaVersion = 1;

// A golden sample: a prompt run as one step, then `decode` tokens fed one step at a time.
// Logits of the last row of every step ([1 + decode.size(), vocab]) are in tensor `logits_tensor`.
struct GoldenSample {
  std::vector<int32_t> prompt;
  std::vector<int32_t> decode;
  std::string logits_tensor;
};

// What the source model says about its embeddings (manifest key "embedding", absent when it
// says nothing).
struct EmbeddingInfo {
  // How the hidden states of a text's tokens are pooled: "last" (the last token's), "mean"
  // (their average) or "cls" (the first token's); "" when the model does not say (a generation
  // model: `ptn serve` then pools the last token unless `--pooling` says otherwise).
  std::string pooling;
  // The model was trained for truncated embeddings (Matryoshka: config.json `is_matryoshka` or
  // `matryoshka_dimensions`), so a request's `dimensions` may shorten them; when the list is not
  // empty, only those sizes.
  bool matryoshka = false;
  std::vector<int64_t> matryoshka_dimensions;
  bool empty() const { return pooling.empty() && !matryoshka; }
};

struct ProgramMeta {
  ModelSpec spec;
  Graph graph;
  CacheSpec cache_spec;
  int64_t max_seq_length = 0;     // most token rows one step may process
  bool static_cache = false;      // in-graph cache baseline (one sequence, fixed context)
  int64_t static_context = 0;
  DType static_cache_dtype = DType::F32;
  std::optional<TokenizerSpec> tokenizer;
  std::vector<GoldenSample> samples;
  EmbeddingInfo embedding;
  nlohmann::json provenance = nlohmann::json::object();
};

nlohmann::json spec_to_json(const ModelSpec& s);
ModelSpec spec_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json cache_spec_to_json(const CacheSpec& c);
CacheSpec cache_spec_from_json(const nlohmann::json& j, const std::string& where);
CacheSpec cache_spec_from_model(const ModelSpec& s);
// Whether `name` is a pooling ptn can compute ("last", "mean", "cls").
bool pooling_known(const std::string& name);

// The tokenizer travels as JSON for its scalars plus byte tensors for its strings (pieces need
// not be valid UTF-8). `tensors` receives the binary parts under "tokenizer.*" names.
nlohmann::json tokenizer_to_manifest(const TokenizerSpec& t, std::map<std::string, Tensor>& tensors);
TokenizerSpec tokenizer_from_manifest(const nlohmann::json& j, const std::map<std::string, Tensor>& tensors,
                                      const std::string& where);

// Whole manifest (everything but the tensor table, which the container adds).
nlohmann::json meta_to_json(const ProgramMeta& m, std::map<std::string, Tensor>& extra_tensors);
ProgramMeta meta_from_json(const nlohmann::json& j, const std::map<std::string, Tensor>& tensors,
                           const std::string& where);

// Packs strings as (bytes, offsets) tensors and back.
void pack_strings(const std::vector<std::string>& strs, const std::string& name, std::map<std::string, Tensor>& out);
std::vector<std::string> unpack_strings(const std::map<std::string, Tensor>& tensors, const std::string& name,
                                        const std::string& where);

}  // namespace ptn
