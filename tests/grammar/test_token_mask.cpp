// The trie-walked token mask equals the reference (every token's bytes through the matcher on
// their own) at each step of walks that draw random allowed tokens, on the stories260K
// vocabulary (512 SentencePiece tokens with byte fallback) and on Llama 3's (128256 byte-level
// BPE tokens, many cutting UTF-8 characters).
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "grammar/grammar.h"
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

// Walks `steps` random allowed tokens, comparing the two masks before each.
void walk(const ptn::Tokenizer& tok, const char* grammar, int steps, uint32_t seed) {
  SCOPED_TRACE(grammar);
  auto g = std::make_shared<const ptn::grammar::Grammar>(ptn::grammar::parse_gbnf(grammar));
  TokenTrie trie(tok);
  Matcher m(g);
  std::mt19937 rng(seed);
  std::vector<uint8_t> mask;
  for (int step = 0; step < steps; ++step) {
    compute_mask(m, trie, mask);
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
  }
}

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
  for (size_t id = 0; id < mask.size(); ++id)
    if (static_cast<int32_t>(id) != eos && !tok->is_eog(static_cast<int32_t>(id))) EXPECT_EQ(mask[id], 0) << id;
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
