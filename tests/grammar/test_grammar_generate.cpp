// End to end: a Generator with the grammar processor and random logits always writes text that
// parses as JSON (nlohmann::json) and validates against the schema, on the stories260K
// vocabulary (512 tokens, byte fallback) and on Llama 3's (128256 byte-level tokens).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "generate/generator.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "grammar_test_util.h"

using nlohmann::json;

namespace {

// A validator for the subset the schema below uses (test-only, deliberately plain).
bool valid(const json& v, const json& s, const json& root) {
  if (s.contains("$ref")) return valid(v, root["$defs"][s["$ref"].get<std::string>().substr(8)], root);
  if (s.contains("anyOf")) {
    for (const auto& sub : s["anyOf"])
      if (valid(v, sub, root)) return true;
    return false;
  }
  if (s.contains("enum")) {
    for (const auto& e : s["enum"])
      if (e == v) return true;
    return false;
  }
  if (s.contains("type") && s["type"].is_array()) {
    for (const auto& t : s["type"]) {
      json one = s;
      one["type"] = t;
      if (valid(v, one, root)) return true;
    }
    return false;
  }
  const std::string t = s.value("type", "");
  if (t == "object") {
    if (!v.is_object()) return false;
    for (const auto& r : s["required"])
      if (!v.contains(r.get<std::string>())) return false;
    for (const auto& [k, x] : v.items())
      if (!s["properties"].contains(k) || !valid(x, s["properties"][k], root)) return false;
    return true;
  }
  if (t == "array") {
    if (!v.is_array() || v.size() < s.value("minItems", 0u) || v.size() > s.value("maxItems", 1000u)) return false;
    for (const auto& x : v)
      if (!valid(x, s["items"], root)) return false;
    return true;
  }
  if (t == "string") {
    if (!v.is_string()) return false;
    size_t cps = 0;  // maxLength counts code points
    for (unsigned char c : v.get<std::string>()) cps += (c & 0xC0) != 0x80;
    return cps <= s.value("maxLength", 1000000u);
  }
  if (t == "integer") return v.is_number_integer();
  if (t == "number") return v.is_number();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  return false;
}

const char* kSchema = R"({
  "$defs": {"tag": {"type": "object", "properties": {"k": {"enum": ["a", "b", 3]},
                                                     "w": {"type": ["number", "null"]}},
                    "required": ["k"], "additionalProperties": false}},
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "n": {"type": "integer"},
    "ok": {"type": "boolean"},
    "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}, "maxItems": 3},
    "nums": {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 4},
    "any": {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 5}]}
  },
  "required": ["name", "n", "tags", "nums"],
  "additionalProperties": false
})";

// Generates with random logits (a strong bias toward ending tokens would hide bugs, so none).
std::string generate(const ptn::Tokenizer& tok, const std::shared_ptr<const ptn::grammar::Grammar>& g,
                     const std::shared_ptr<const ptn::grammar::TokenTrie>& trie, uint32_t seed, int64_t room,
                     ptn::gen::Finish& finish) {
  ptn::grammar::GrammarProcessor proc(g, trie, tok);
  ptn::gen::GenerationParams params;
  params.sampling.seed = seed;
  params.stop.stop_at_bos = false;
  ptn::gen::Generator gen(tok, tok.vocab_size(), params, room);
  gen.set_logit_processor(&proc);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(tok.vocab_size()));
  std::string text;
  while (!gen.done()) {
    for (float& x : logits) x = normal(rng);
    text += gen.next(logits.data()).text;
  }
  finish = gen.finish();
  return text;
}

void check_generations(const ptn::Tokenizer& tok, int runs, int64_t room) {
  json schema = json::parse(kSchema);
  auto g = std::make_shared<const ptn::grammar::Grammar>(ptn::grammar::json_schema_grammar(std::string_view(kSchema)));
  auto trie = std::make_shared<const ptn::grammar::TokenTrie>(tok);
  int ended = 0;
  for (int run = 0; run < runs; ++run) {
    ptn::gen::Finish finish;
    std::string text = generate(tok, g, trie, 100 + run, room, finish);
    if (finish != ptn::gen::Finish::EndToken) continue;  // the context ran out first (long strings)
    ++ended;
    json v;
    ASSERT_NO_THROW(v = json::parse(text)) << text;
    EXPECT_TRUE(valid(v, schema, schema)) << text;
  }
  EXPECT_GE(ended, runs / 2) << "most generations should end with an end token";
}

}  // namespace

TEST(GrammarGenerate, RandomLogitsGiveValidJsonOnStories260K) {
  const ptn::Tokenizer* tok = grammar_test::stories260k();
  ASSERT_NE(tok, nullptr);
  check_generations(*tok, 30, 4000);
}

TEST(GrammarGenerate, RandomLogitsGiveValidJsonOnLlama3) {
  const ptn::Tokenizer* tok = grammar_test::npm_tokenizer("tokenizer-llama3");
  ASSERT_NE(tok, nullptr);
  check_generations(*tok, 4, 1500);
}
