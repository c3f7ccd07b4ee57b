#include "serve/embeddings.h"

#include <cmath>
#include <cstring>
#include <set>

namespace ptn::serve {

using json = nlohmann::json;

namespace {

ApiError bad(const std::string& param, const std::string& message, const std::string& code = "") {
  return ApiError(400, "invalid_request_error", "'" + param + "': " + message, param, code);
}

const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

void check_fields(const json& body) {
  static const std::set<std::string> known = {"input", "model", "encoding_format", "dimensions",
                                              "user"};  // user: accepted, no effect
  for (auto it = body.begin(); it != body.end(); ++it)
    if (!it->is_null() && !known.count(it.key())) throw bad(it.key(), "unknown field for /v1/embeddings");
}

std::string at(size_t i) { return "input[" + std::to_string(i) + "]"; }

// One input of token ids, each checked against the vocabulary.
std::vector<int32_t> token_ids(const json& a, const std::string& param, const ModelInfo& model) {
  if (a.empty()) throw bad(param, "is empty");
  if (static_cast<int64_t>(a.size()) > model.context)
    throw bad(param, "has " + std::to_string(a.size()) + " tokens; this model's context is " +
                         std::to_string(model.context), "context_length_exceeded");
  std::vector<int32_t> ids;
  ids.reserve(a.size());
  for (size_t k = 0; k < a.size(); ++k) {
    const json& t = a[k];
    const bool in_range = t.is_number_integer() && !(t.is_number_unsigned() && t.get<uint64_t>() > INT64_MAX) &&
                          t.get<int64_t>() >= 0 && t.get<int64_t>() < model.vocab;
    if (!in_range)
      throw bad(param + "[" + std::to_string(k) + "]", "must be a token id in [0, " + std::to_string(model.vocab) + ")");
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

std::vector<int32_t> text_ids(const json& s, const std::string& param, const ModelInfo& model) {
  const std::string& text = s.get_ref<const std::string&>();
  if (text.empty()) throw bad(param, "is an empty string");
  if (model.max_prompt_bytes > 0 && text.size() > model.max_prompt_bytes)
    throw bad(param, "the text (" + std::to_string(text.size()) + " bytes) cannot fit this model's context of " +
                         std::to_string(model.context) + " tokens", "context_length_exceeded");
  std::vector<int32_t> ids = model.tokenizer->encode(text, /*add_special=*/true, model.parse_special);
  if (ids.empty()) throw bad(param, "tokenizes to no tokens");
  if (static_cast<int64_t>(ids.size()) > model.context)
    throw bad(param, "is " + std::to_string(ids.size()) + " tokens; this model's context is " +
                         std::to_string(model.context), "context_length_exceeded");
  return ids;
}

std::vector<std::vector<int32_t>> parse_input(const json& body, const ModelInfo& model) {
  const json* in = field(body, "input");
  if (!in) throw bad("input", "is required");
  std::vector<std::vector<int32_t>> out;
  if (in->is_string()) {
    out.push_back(text_ids(*in, "input", model));
    return out;
  }
  if (!in->is_array())
    throw bad("input", "must be a string, an array of strings, an array of token ids or an array of arrays of token ids");
  if (in->empty()) throw bad("input", "is an empty array");
  const json& first = (*in)[0];
  if (first.is_number()) {  // one input of token ids
    out.push_back(token_ids(*in, "input", model));
    return out;
  }
  if (in->size() > kMaxEmbeddingInputs)
    throw bad("input", "has " + std::to_string(in->size()) + " inputs; at most " + std::to_string(kMaxEmbeddingInputs));
  for (size_t i = 0; i < in->size(); ++i) {
    const json& e = (*in)[i];
    if (first.is_string() && e.is_string()) out.push_back(text_ids(e, at(i), model));
    else if (first.is_array() && e.is_array()) out.push_back(token_ids(e, at(i), model));
    else throw bad(at(i), first.is_string() || first.is_array()
                              ? std::string("must be ") + (first.is_string() ? "a string" : "an array of token ids") +
                                    ", as input[0] is (inputs of one request are all texts or all token arrays)"
                              : "must be a string or an array of token ids");
  }
  return out;
}

}  // namespace

ParsedEmbedding parse_embedding_request(const json& body, const ModelInfo& model, const EmbeddingModel& em) {
  if (!body.is_object()) throw ApiError(400, "invalid_request_error", "the request body must be a JSON object");
  check_fields(body);
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) throw bad("model", "must be a string");
    if (m->get<std::string>() != model.name)
      throw ApiError(404, "invalid_request_error",
                     "The model '" + m->get<std::string>() + "' does not exist; this server serves '" + model.name + "'",
                     "model", "model_not_found");
  }
  if (const json* u = field(body, "user"); u && !u->is_string()) throw bad("user", "must be a string");
  if (em.hidden <= 0)
    throw ApiError(400, "invalid_request_error",
                   "this program has no 'hidden' output (it was exported before ptn computed embeddings); export it "
                   "again to serve /v1/embeddings", "", "embeddings_unsupported");
  ParsedEmbedding p;
  if (const json* f = field(body, "encoding_format")) {
    if (!f->is_string() || (*f != "float" && *f != "base64")) throw bad("encoding_format", "must be \"float\" or \"base64\"");
    p.base64 = *f == "base64";
  }
  if (const json* d = field(body, "dimensions")) {
    if (!d->is_number_integer() || (d->is_number_unsigned() && d->get<uint64_t>() > INT64_MAX) || d->get<int64_t>() < 1)
      throw bad("dimensions", "must be an integer >= 1");
    const int64_t n = d->get<int64_t>();
    if (n > em.hidden)
      throw bad("dimensions", std::to_string(n) + " is more than this model's " + std::to_string(em.hidden) + " dimensions");
    if (!em.matryoshka && n != em.hidden)
      throw bad("dimensions", "this model was not trained for shortened embeddings (its config.json claims no "
                              "Matryoshka support: is_matryoshka / matryoshka_dimensions), so it cannot shorten them");
    if (!em.matryoshka_dimensions.empty() && n != em.hidden) {
      bool listed = false;
      std::string list;
      for (int64_t x : em.matryoshka_dimensions) {
        listed = listed || x == n;
        list += (list.empty() ? "" : ", ") + std::to_string(x);
      }
      if (!listed) throw bad("dimensions", "this model supports the sizes " + list);
    }
    p.dimensions = n == em.hidden ? 0 : n;
  }
  p.req.inputs = parse_input(body, model);
  p.req.pooling = em.pooling;
  return p;
}

std::vector<float> normalized_embedding(const std::vector<float>& pooled, int64_t dimensions) {
  const size_t n = dimensions > 0 && static_cast<size_t>(dimensions) < pooled.size() ? static_cast<size_t>(dimensions)
                                                                                      : pooled.size();
  double sq = 0;
  for (size_t i = 0; i < n; ++i) sq += static_cast<double>(pooled[i]) * pooled[i];
  const double inv = sq > 0 ? 1.0 / std::sqrt(sq) : 0.0;
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(pooled[i] * inv);
  return out;
}

std::string base64_f32(const std::vector<float>& v) {
  static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> bytes(v.size() * 4);
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + static_cast<size_t>(b)] = static_cast<uint8_t>(u >> (8 * b));  // little-endian
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t a = bytes[i], b = i + 1 < bytes.size() ? bytes[i + 1] : 0, c = i + 2 < bytes.size() ? bytes[i + 2] : 0;
    const uint32_t w = a << 16 | b << 8 | c;
    out += digits[w >> 18 & 63];
    out += digits[w >> 12 & 63];
    out += i + 1 < bytes.size() ? digits[w >> 6 & 63] : '=';
    out += i + 2 < bytes.size() ? digits[w & 63] : '=';
  }
  return out;
}

json embedding_response(const std::vector<std::vector<float>>& vectors, bool base64, const std::string& model,
                        int64_t prompt_tokens) {
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    json e = {{"object", "embedding"}, {"index", i}};
    if (base64) e["embedding"] = base64_f32(vectors[i]);
    else e["embedding"] = vectors[i];
    data.push_back(std::move(e));
  }
  return json{{"object", "list"},
              {"data", std::move(data)},
              {"model", model},
              {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

}  // namespace ptn::serve
