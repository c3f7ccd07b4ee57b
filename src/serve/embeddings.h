// POST /v1/embeddings: the request body checked field by field (ApiError naming the field, and
// the input's index, otherwise) and the reply built from the engine's pooled vectors. See
// docs/http-api.md.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serve/api.h"
#include "serve/engine.h"

namespace ptn::serve {

// Most inputs one request may carry (OpenAI's limit).
inline constexpr size_t kMaxEmbeddingInputs = 2048;

// What the handler knows about the model's embeddings.
struct EmbeddingModel {
  int64_t hidden = 0;       // width of the pooled vectors (0: the program cannot embed)
  Pooling pooling = Pooling::Last;  // the program's pooling, or --pooling
  bool matryoshka = false;  // `dimensions` allowed (the model was trained for truncation)
  std::vector<int64_t> matryoshka_dimensions;  // when not empty: the only sizes allowed
};

struct ParsedEmbedding {
  EmbedRequest req;
  bool base64 = false;     // encoding_format "base64": little-endian f32 bytes, base64
  int64_t dimensions = 0;  // 0: the whole hidden state
};

// Parses a body: `input` (a string, an array of strings, an array of token ids, or an array of
// arrays of token ids; each input 1..context tokens, ids < vocab), `model`, `encoding_format`,
// `dimensions`, `user` (ignored). Unknown fields are refused by name.
ParsedEmbedding parse_embedding_request(const nlohmann::json& body, const ModelInfo& model, const EmbeddingModel& em);

// The first `dimensions` values of `pooled` (all of them for 0), L2-normalized (a zero vector
// stays zero).
std::vector<float> normalized_embedding(const std::vector<float>& pooled, int64_t dimensions);

// Little-endian f32 bytes in standard base64 (with padding), as OpenAI's encoding_format base64.
std::string base64_f32(const std::vector<float>& v);

// {"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model", "usage"}.
nlohmann::json embedding_response(const std::vector<std::vector<float>>& vectors, bool base64,
                                  const std::string& model, int64_t prompt_tokens);

}  // namespace ptn::serve
