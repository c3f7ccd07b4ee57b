// tokenizer.json (+ tokenizer_config.json) -> TokenizerSpec -> Tokenizer, then encode/decode.
// Input layout (each separator optional): tokenizer.json text, "\n--config--\n",
// tokenizer_config.json text, "\n--text--\n", a text to encode. Without a text part the last
// 64 bytes of the input are encoded. Any input must either work or throw ptn::Error.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz_common.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

namespace ptn::fuzz {

// 1 if the input was accepted all the way, 0 if a stage rejected it with a documented error.
int run_tokenizer_json(const uint8_t* data, size_t size) {
  auto [tok_json, rest] = ptn::fuzz::split(data, size, "\n--config--\n");
  auto [head, text] = ptn::fuzz::split(reinterpret_cast<const uint8_t*>(tok_json.data()), tok_json.size(),
                                       "\n--text--\n");
  std::string_view config = rest;
  if (!rest.empty()) {
    auto [c, t] = ptn::fuzz::split(reinterpret_cast<const uint8_t*>(rest.data()), rest.size(), "\n--text--\n");
    config = c;
    if (!t.empty()) text = t;
  }
  tok_json = head;
  if (text.empty()) {
    std::string_view all(reinterpret_cast<const char*>(data), size);
    text = all.substr(size - std::min<size_t>(size, 64));
  }
  std::unique_ptr<ptn::Tokenizer> tok;
  try {
    auto spec = ptn::parse_hf_tokenizer(std::string(tok_json), std::string(config), "fuzz/tokenizer.json");
    tok = ptn::Tokenizer::create(spec);
  } catch (const ptn::Error&) {
    return 0;
  }
  try {
    for (bool special : {false, true}) {
      auto ids = tok->encode(text, special, special);
      (void)tok->decode(ids, !special);
      for (int32_t id : ids) (void)tok->token_piece(id);
    }
  } catch (const ptn::Error&) {
    return 0;
  }
  // Ids made from the text's bytes, some out of range: decode must check them (and may refuse).
  std::vector<int32_t> raw;
  for (size_t i = 0; i + 1 < text.size() && raw.size() < 32; i += 2)
    raw.push_back(static_cast<int16_t>(static_cast<uint8_t>(text[i]) | (static_cast<uint8_t>(text[i + 1]) << 8)));
  try {
    (void)tok->decode(raw, false);
  } catch (const ptn::Error&) {
  }
  return 1;
}

}  // namespace ptn::fuzz

PTN_FUZZ_ENTRY(run_tokenizer_json)
