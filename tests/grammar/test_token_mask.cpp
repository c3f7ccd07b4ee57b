// The trie-walked token mask equals the reference (every token's bytes through the matcher on
// their own) at each step of walks that draw random allowed tokens, on the stories260K
// vocabulary (512 SentencePiece tokens with byte fallback) and on Llama 3's (128256 byte-level
// BPE tokens, many cutting UTF-8 characters).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "core/error.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "grammar_test_util.h"

using ptn::grammar::compute_mask;
using ptn::grammar::Matcher;
using ptn::grammar::TokenTrie;

namespace {

const char* kGrammars[] = {
    // JSON-like objects with strings, numbers and nesting.
    R"(root ::= obj
obj ::= "{" ws (pair ("," ws pair)*)? "}"
pair ::= str ws ":" ws val ws
val ::= str | num | obj | "[" ws (val ("," ws val)*)? "]" | "true" | "false" | "null"
str ::= "\"" ([^"\\\x00-\x1f] | "\\" ["\\nt])* "\""
num ::= "-"? [0-9]+ ("." [0-9]+)?
ws ::= [ \n]{0,3})",
    // Multi-byte characters only, so byte-level tokens cut inside them matter.
    R"(root ::= ([α-ω] | "é" | [一-龥] | "😀")+ "!")",
    // Words and spaces, as SentencePiece pieces start with one.
    R"(root ::= (" "? [a-zA-Z]+){1,12} ".")",
};

// Walks `steps` random allowed tokens, comparing the two masks before each (dense_states: the
// cached states with a dense transition row; 0 puts every transition in the hash map), and
// counts the steps that began inside a string.
void walk_grammar(const ptn::Tokenizer& tok, std::shared_ptr<const ptn::grammar::Grammar> g, int steps,
                  uint32_t seed, size_t dense_states = 4096, int* in_string_steps = nullptr,
                  size_t max_key_words = size_t{1} << 23) {
  TokenTrie trie(tok);
  Matcher m(g);
  std::mt19937 rng(seed);
  std::vector<uint8_t> mask;
  ptn::grammar::MaskCache cache;
  int in_string = 0;  // steps that began inside a string (after an odd number of quotes)
  std::string text;
  for (int step = 0; step < steps; ++step) {
    in_string += std::count(text.begin(), text.end(), '"') % 2;
    ptn::grammar::detail::compute_mask(m, trie, mask, cache, dense_states, max_key_words);
    auto ref = grammar_test::reference_mask(m, tok);
    ASSERT_EQ(mask.size(), ref.size());
    std::vector<int32_t> allowed;
    for (size_t id = 0; id < ref.size(); ++id) {
      ASSERT_EQ(mask[id], ref[id]) << "step " << step << " token " << id << " '" << tok.token_piece(id) << "'";
      if (mask[id] && !tok.is_eog(static_cast<int32_t>(id))) allowed.push_back(static_cast<int32_t>(id));
    }
    if (allowed.empty()) break;  // only the end is left
    int32_t pick = allowed[rng() % allowed.size()];
    ASSERT_TRUE(m.accept(tok.token_piece(pick)));
    text += tok.token_piece(pick);
    if (in_string_steps) *in_string_steps = in_string;
  }
}

void walk(const ptn::Tokenizer& tok, const char* grammar, int steps, uint32_t seed, size_t dense_states = 4096) {
  SCOPED_TRACE(grammar);
  walk_grammar(tok, std::make_shared<const ptn::grammar::Grammar>(ptn::grammar::parse_gbnf(grammar)), steps, seed,
               dense_states);
}

// A schema whose strings are long and bounded: inside the unbounded ones the state repeats (the
// cached automaton loops on one state), inside the bounded ones it changes with each character.
const char* kStringSchema = R"({"type":"object","properties":{
  "a":{"type":"string"},"b":{"type":"string","maxLength":6},"c":{"type":"array","items":{"type":"string"}}},
  "required":["a","b","c"],"additionalProperties":false})";

}  // namespace

TEST(TokenMask, EqualsReferenceOnStories260K) {
  const ptn::Tokenizer* tok = grammar_test::stories260k();
  ASSERT_NE(tok, nullptr);
  for (const char* g : kGrammars) walk(*tok, g, 60, 1);
}

TEST(TokenMask, EqualsReferenceOnLlama3) {
  const ptn::Tokenizer* tok = grammar_test::npm_tokenizer("tokenizer-llama3");
  ASSERT_NE(tok, nullptr);
  ASSERT_EQ(tok->vocab_size(), 128256);
  for (const char* g : kGrammars) walk(*tok, g, 12, 2);
}

// The state cache: the same masks with every transition in the hash map, with the cache dropped
// within walks (a tight bound on its keys), and along JSON-schema walks that spend most steps
// inside strings.
TEST(TokenMask, EqualsReferenceWithoutDenseRows) {
  const ptn::Tokenizer* tok = grammar_test::stories260k();
  ASSERT_NE(tok, nullptr);
  for (const char* g : kGrammars) walk(*tok, g, 40, 3, 0);
  for (const char* g : kGrammars) walk(*tok, g, 40, 4, 2);
  auto json = std::make_shared<const ptn::grammar::Grammar>(ptn::grammar::parse_gbnf(kGrammars[0]));
  walk_grammar(*tok, json, 40, 12, 4096, nullptr, 300);  // most walks drop the cache (plain walks)
}

TEST(TokenMask, EqualsReferenceInsideJsonStrings) {
  auto g = std::make_shared<const ptn::grammar::Grammar>(
      ptn::grammar::json_schema_grammar(std::string_view(kStringSchema)));
  const ptn::Tokenizer* small = grammar_test::stories260k();
  ASSERT_NE(small, nullptr);
  int in_string = 0;
  for (uint32_t seed = 5; seed < 8; ++seed) {
    int n = 0;
    walk_grammar(*small, g, 60, seed, 4096, &n);
    in_string += n;
  }
  const ptn::Tokenizer* llama = grammar_test::npm_tokenizer("tokenizer-llama3");
  ASSERT_NE(llama, nullptr);
  int n = 0;
  walk_grammar(*llama, g, 16, 9, 4096, &n);
  in_string += n;
  walk_grammar(*llama, g, 8, 10, 1, &n);
  in_string += n;
  walk_grammar(*llama, g, 6, 11, 4096, &n, 2000);  // the cache dropped within walks (plain walks)
  in_string += n;
  EXPECT_GE(in_string, 40);
}

TEST(TokenMask, EndOfGenerationExactlyWhenComplete) {
  const ptn::Tokenizer* tok = grammar_test::stories260k();
  ASSERT_NE(tok, nullptr);
  auto g = std::make_shared<const ptn::grammar::Grammar>(ptn::grammar::parse_gbnf("root ::= \"ab\""));
  TokenTrie trie(*tok);
  ASSERT_FALSE(trie.eog_ids().empty());
  const int32_t eos = trie.eog_ids()[0];
  Matcher m(g);
  std::vector<uint8_t> mask;
  compute_mask(m, trie, mask);
  EXPECT_EQ(mask[eos], 0);
  ASSERT_TRUE(m.accept("ab"));
  compute_mask(m, trie, mask);
  EXPECT_EQ(mask[eos], 1);
  for (size_t id = 0; id < mask.size(); ++id) {
    if (static_cast<int32_t>(id) != eos && !tok->is_eog(static_cast<int32_t>(id))) {
      EXPECT_EQ(mask[id], 0) << id;
    }
  }
}

TEST(TokenMask, ProcessorMasksLogitsAndRefusesBadTokens) {
  const ptn::Tokenizer* tok = grammar_test::stories260k();
  ASSERT_NE(tok, nullptr);
  auto g = std::make_shared<const ptn::grammar::Grammar>(ptn::grammar::parse_gbnf("root ::= [a-z]+"));
  auto trie = std::make_shared<const TokenTrie>(*tok);
  ptn::grammar::GrammarProcessor p(g, trie, *tok);
  const int64_t n_vocab = tok->vocab_size() + 3;  // padded logits: the extra ids are refused
  std::vector<float> logits(static_cast<size_t>(n_vocab), 1.0f);
  p.apply(logits.data(), n_vocab);
  for (int64_t i = 0; i < n_vocab; ++i) {
    bool allowed = std::isfinite(logits[i]);
    if (i >= tok->vocab_size()) {
      EXPECT_FALSE(allowed);
      continue;
    }
    std::string piece = tok->token_piece(static_cast<int32_t>(i));
    bool lower = !piece.empty() && !tok->is_control(static_cast<int32_t>(i));
    for (char c : piece) lower &= (c >= 'a' && c <= 'z');
    EXPECT_EQ(allowed, lower) << i << " '" << piece << "'";
  }
  auto space = tok->token_id("▁");
  ASSERT_TRUE(space.has_value());
  EXPECT_THROW(p.accept(*space), ptn::Error);
  EXPECT_THROW(p.accept(trie->eog_ids()[0]), ptn::Error);  // not complete yet
}
