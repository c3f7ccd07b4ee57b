// Tokenizers built from GGUF vocabularies (formats/gguf_spec.h) against llama.cpp's test
// vectors, whose ids come from the Hugging Face reference tokenizers; and the bundled
// stories260K GGUF against its tokenizer.json.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/gguf_spec.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "vectors.h"

using namespace ptn;
using ids_t = std::vector<int32_t>;

namespace {

const std::string kData = std::string(PTN_TEST_DATA) + "/tokenizers/";

std::unique_ptr<Tokenizer> from_gguf(const std::string& path) {
  auto g = GgufFile::open(path);
  return Tokenizer::create(tokenizer_spec_from_gguf(*g));
}

struct VocabCase {
  const char* name;
  TokenizerKind kind;
  bool lossless;  // decode(encode(text)) == text for every vector text
};

class GgufVectors : public ::testing::TestWithParam<VocabCase> {};

}  // namespace

TEST_P(GgufVectors, EncodeMatchesReferenceAndDecodeRoundTrips) {
  const VocabCase& v = GetParam();
  const std::string base = kData + "ggml-vocab-" + v.name + ".gguf";
  auto t = from_gguf(base);
  EXPECT_EQ(t->kind(), v.kind);
  const auto cases = test::read_vectors(base);
  ASSERT_GE(cases.size(), 40u);
  int failures = 0;
  for (const auto& c : cases) {
    const auto got = t->encode(c.text, false, false);
    if (got != c.ids) {
      ++failures;
      ADD_FAILURE() << v.name << ": text '" << c.text << "'\n  want " << test::show_ids(c.ids) << "\n  got  "
                    << test::show_ids(got);
    }
    if (v.lossless) {
      EXPECT_EQ(t->decode(got, false), c.text) << v.name << " round trip";
    }
  }
  EXPECT_EQ(failures, 0) << v.name << ": " << failures << " of " << cases.size() << " texts differ";

  // Arbitrary bytes never crash. Bytes that have a token (a byte-level character, or <0xXX>) come
  // back exactly; some vocabularies have none for bytes that never occur in UTF-8 (C0, C1, F5..FF),
  // falcon lacks more.
  std::vector<char> known;
  const auto& blm = tok::byte_level_map();
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    const auto id = t->token_id(v.kind == TokenizerKind::SentencePiece ? std::string(hex) : blm.byte_to_utf8[b]);
    // (A byte-level character that is an added token decodes as its text, not as the byte.)
    if (id && (t->token_type(*id) == TokenType::Normal || t->token_type(*id) == TokenType::Byte))
      known.push_back(static_cast<char>(b));
  }
  EXPECT_GE(known.size(), 200u);
  std::mt19937 rng(11);
  for (int iter = 0; iter < 100; ++iter) {
    std::string any(rng() % 48, '\0'), ok(rng() % 48, '\0');
    for (auto& ch : any) ch = static_cast<char>(rng() & 0xFF);
    for (auto& ch : ok) ch = known[rng() % known.size()];
    (void)t->encode(any, true, true);
    if (v.lossless) {
      EXPECT_EQ(t->decode(t->encode(ok, true, true), true), ok);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    LlamaCppVocabs, GgufVectors,
    ::testing::Values(VocabCase{"llama-spm", TokenizerKind::SentencePiece, true},
                      VocabCase{"phi-3", TokenizerKind::SentencePiece, true},
                      VocabCase{"gpt-2", TokenizerKind::ByteLevelBPE, true},
                      VocabCase{"mpt", TokenizerKind::ByteLevelBPE, true},
                      VocabCase{"falcon", TokenizerKind::ByteLevelBPE, true},
                      VocabCase{"starcoder", TokenizerKind::ByteLevelBPE, true},
                      VocabCase{"refact", TokenizerKind::ByteLevelBPE, true},
                      VocabCase{"deepseek-coder", TokenizerKind::ByteLevelBPE, true},
                      VocabCase{"deepseek-llm", TokenizerKind::ByteLevelBPE, true}),
    [](const ::testing::TestParamInfo<VocabCase>& info) {
      std::string n = info.param.name;
      for (auto& ch : n)
        if (ch == '-') ch = '_';
      return n;
    });

TEST(Stories260KGguf, MatchesTokenizerJson) {
  auto g = from_gguf(std::string(PTN_SOURCE_DIR) + "/models/stories260K/stories260K.gguf");
  auto j = Tokenizer::create(load_hf_tokenizer(std::string(PTN_SOURCE_DIR) + "/models/stories260K/hf/tokenizer.json"));
  EXPECT_EQ(g->kind(), TokenizerKind::SentencePiece);
  EXPECT_EQ(g->encode("Once upon a time", true, false), (ids_t{1, 403, 407, 261, 378}));
  const auto cases = test::read_vectors(kData + "ggml-vocab-llama-spm.gguf");
  for (const auto& c : cases) {
    EXPECT_EQ(g->encode(c.text, true, false), j->encode(c.text, true, false)) << c.text;
    EXPECT_EQ(g->decode(g->encode(c.text, true, false), true), c.text);
  }
  EXPECT_EQ(g->vocab_size(), j->vocab_size());
  for (int32_t id = 0; id < g->vocab_size(); ++id) EXPECT_EQ(g->token_piece(id), j->token_piece(id)) << id;
}

TEST(GgufTokenizer, EndOfGenerationAndSpecialTokens) {
  auto t = from_gguf(kData + "ggml-vocab-gpt-2.gguf");
  const auto eot = t->token_id("<|endoftext|>");
  ASSERT_TRUE(eot.has_value());
  EXPECT_TRUE(t->is_eog(*eot));
  EXPECT_EQ(t->encode("a<|endoftext|>", false, true), (ids_t{64, *eot}));
  EXPECT_NE(t->encode("a<|endoftext|>", false, false).back(), *eot);
  EXPECT_EQ(t->decode({64, *eot}, true), "a");
  EXPECT_EQ(t->decode({64, *eot}, false), "a<|endoftext|>");
}

// WordPiece (BERT): llama.cpp's bert-bge vectors (ids from HF BertTokenizerFast).
TEST(GgufWordPiece, BertBgeVectors) {
  const std::string base = kData + "ggml-vocab-bert-bge.gguf";
  auto t = load_tokenizer(base);
  EXPECT_EQ(t->kind(), TokenizerKind::WordPiece);
  const auto cases = test::read_vectors(base);
  ASSERT_GE(cases.size(), 40u);
  int failures = 0;
  for (const auto& c : cases) {
    const auto got = t->encode(c.text, false, false);
    if (got != c.ids) {
      ++failures;
      ADD_FAILURE() << "bert-bge: text '" << c.text << "'\n  want " << test::show_ids(c.ids) << "\n  got  "
                    << test::show_ids(got);
    }
  }
  EXPECT_EQ(failures, 0);
  // [CLS] ... [SEP] with special tokens; decode joins pieces (uncased, so not a round trip).
  const auto ids = t->encode("Hello world", true, false);
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(ids.front(), *t->bos());
  EXPECT_EQ(ids.back(), *t->eos());
  EXPECT_EQ(t->decode(ids, true), "hello world");
  std::mt19937 rng(13);
  for (int iter = 0; iter < 100; ++iter) {
    std::string s(rng() % 48, '\0');
    for (auto& ch : s) ch = static_cast<char>(rng() & 0xFF);
    (void)t->encode(s, true, true);  // any bytes: no crash
  }
}

// Phi-3: the chat markers swallow the whitespace after them (rstrip in its tokenizer.json);
// <s> and <|endoftext|> do not.
TEST(GgufTokenizer, Phi3ChatMarkersStripFollowingWhitespace) {
  auto t = load_tokenizer(kData + "ggml-vocab-phi-3.gguf");
  const auto user = t->token_id("<|user|>"), end = t->token_id("<|end|>"), bos = t->token_id("<s>");
  ASSERT_TRUE(user && end && bos);
  EXPECT_EQ(t->encode("<|user|>\nHi<|end|>\n", false, true), t->encode("<|user|>Hi<|end|>", false, true));
  EXPECT_EQ(t->encode("<|user|>\nHi", false, true).size(), 2u);  // <|user|> ▁Hi
  EXPECT_NE(t->encode("<s>\nHi", false, true), t->encode("<s>Hi", false, true));
  // Other vocabularies are untouched.
  auto g = load_tokenizer(kData + "ggml-vocab-llama-spm.gguf");
  EXPECT_TRUE(g->spec().rstrip_ids.empty());
}
