// The server's request bodies: parse_body (JSON with a nesting bound) then the completion, chat
// and embedding request validators against the bundled stories260K tokenizer (with a small chat
// template).
// Bad requests throw ApiError (an HTTP 400/404 reply); ptn::Error is what the handlers map to
// other replies. Nothing else may escape.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.h"
#include "serve/api.h"
#include "serve/embeddings.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"
#include "fuzz_common.h"

namespace {

const ptn::serve::ModelInfo& model() {
  static const auto tok = [] {
    auto spec = ptn::load_hf_tokenizer(std::string(PTN_SOURCE_DIR) + "/models/stories260K/hf/tokenizer.json");
    spec.chat_template =
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}";
    return ptn::Tokenizer::create(spec);
  }();
  static const ptn::serve::ModelInfo info{"stories260K", tok.get(), 512, tok->vocab_size(), 0, tok->spec().chat_template};
  return info;
}

}  // namespace

namespace ptn::fuzz {

// 1 if the input was accepted all the way, 0 if a stage rejected it with a documented error.
int run_http_request(const uint8_t* data, size_t size) {
  const auto& m = model();
  nlohmann::json body;
  try {
    body = ptn::serve::parse_body(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const ptn::serve::ApiError&) {
    return 0;
  }
  int ok = 0;
  for (bool chat : {false, true}) {
    try {
      if (chat) (void)ptn::serve::parse_chat_request(body, m);
      else (void)ptn::serve::parse_completion_request(body, m);
      ok = 1;
    } catch (const ptn::serve::ApiError&) {
    } catch (const ptn::Error&) {
    }
  }
  try {
    ptn::serve::EmbeddingModel em;
    em.hidden = 64;
    em.matryoshka = true;
    em.matryoshka_dimensions = {16, 32};
    (void)ptn::serve::parse_embedding_request(body, m, em);
    ok = 1;
  } catch (const ptn::serve::ApiError&) {
  } catch (const ptn::Error&) {
  }
  return ok;
}

}  // namespace ptn::fuzz

PTN_FUZZ_ENTRY(run_http_request)
