// Prints (does not assert) what the token mask costs per step at a large vocabulary: Llama 3
// (128256 ids) and Qwen 3 (151669), for a JSON-schema grammar, along a document written token by
// token (its encoding by the tokenizer itself), plus the one-time trie build.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "grammar_test_util.h"

namespace {

const char* kSchema = R"({"type":"object","properties":{
  "name":{"type":"string"},"age":{"type":"integer"},"email":{"type":"string"},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":8},
  "address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"},
             "zip":{"type":"string"}},"required":["street","city","zip"],"additionalProperties":false},
  "active":{"type":"boolean"},"score":{"type":["number","null"]}},
  "required":["name","age","email","tags","address","active","score"],"additionalProperties":false})";

const char* kDocument =
    R"({"name": "Ada Lovelace", "age": 36, "email": "ada@example.org", "tags": ["math", "poetry", "engines"], )"
    R"("address": {"street": "12 St James's Square", "city": "London", "zip": "SW1Y 4JH"}, "active": true, "score": 98.5})";

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void time_mask(const char* package) {
  const ptn::Tokenizer* tok = grammar_test::npm_tokenizer(package);
  ASSERT_NE(tok, nullptr);
  auto t0 = std::chrono::steady_clock::now();
  ptn::grammar::TokenTrie trie(*tok);
  const double build_ms = ms_since(t0);
  auto g = std::make_shared<const ptn::grammar::Grammar>(ptn::grammar::json_schema_grammar(std::string_view(kSchema)));
  ptn::grammar::Matcher m(g);
  std::vector<uint8_t> mask;
  ptn::grammar::MaskCache cache;  // as GrammarProcessor keeps one per sequence
  std::vector<double> steps;
  for (int32_t id : tok->encode(kDocument, false, false)) {
    t0 = std::chrono::steady_clock::now();
    ptn::grammar::compute_mask(m, trie, mask, cache);
    steps.push_back(ms_since(t0));
    ASSERT_TRUE(mask[id]) << "the document's token '" << tok->token_piece(id) << "' is refused";
    ASSERT_TRUE(m.accept(tok->token_piece(id)));
  }
  ASSERT_TRUE(m.is_complete());
  std::vector<double> sorted = steps;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double s : steps) sum += s;
  std::printf("%s: vocab %d, trie %zu nodes built in %.0f ms; mask over %zu steps: mean %.3f ms, median %.3f ms, "
              "p90 %.3f ms, max %.3f ms\n",
              package, tok->vocab_size(), trie.nodes().size(), build_ms, steps.size(), sum / steps.size(),
              sorted[sorted.size() / 2], sorted[sorted.size() * 9 / 10], sorted.back());
}

}  // namespace

TEST(MaskTiming, Llama3) { time_mask("tokenizer-llama3"); }
TEST(MaskTiming, Qwen3) { time_mask("tokenizer-qwen3"); }
