// Tokenizer unit tests: UTF-8 helpers, NFC, SentencePiece from a hand-made spec and from the
// bundled stories260K tokenizer.json, added tokens, decode and the streaming decoder, bad input.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "core/file.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/normalize.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

using namespace ptn;
using ids_t = std::vector<int32_t>;

namespace {

const std::string kStoriesJson = std::string(PTN_SOURCE_DIR) + "/models/stories260K/hf/tokenizer.json";

std::unique_ptr<Tokenizer> stories() { return Tokenizer::create(load_hf_tokenizer(kStoriesJson)); }

// A tiny SentencePiece vocabulary: pieces with scores, byte tokens for a few bytes.
TokenizerSpec tiny_spm() {
  TokenizerSpec s;
  s.kind = TokenizerKind::SentencePiece;
  s.tokens = {"<unk>", "<s>", "</s>", "<0x0A>", "<0xC3>", "<0xA9>", "\xE2\x96\x81", "a", "b", "c",
              "ab", "\xE2\x96\x81" "a", "\xE2\x96\x81" "ab", "bc", "<|user|>"};
  s.scores = {0, 0, 0, 0, 0, 0, -1, -2, -2, -2, -3, -1.5f, -0.5f, -2.5f, 0};
  s.token_types = {TokenType::Unknown, TokenType::Control, TokenType::Control, TokenType::Byte, TokenType::Byte,
                   TokenType::Byte,    TokenType::Normal,  TokenType::Normal,  TokenType::Normal, TokenType::Normal,
                   TokenType::Normal,  TokenType::Normal,  TokenType::Normal,  TokenType::Normal, TokenType::UserDefined};
  s.bos_id = 1;
  s.eos_id = 2;
  s.unk_id = 0;
  s.add_bos = true;
  s.add_space_prefix = true;
  return s;
}

std::string stream_all(const Tokenizer& t, const ids_t& ids, bool skip, std::vector<std::string>* parts = nullptr) {
  StreamDecoder d(t, skip);
  std::string out;
  for (int32_t id : ids) {
    std::string p = d.push(id);
    if (parts) parts->push_back(p);
    out += p;
  }
  out += d.finish();
  return out;
}

}  // namespace

TEST(Utf8, ValidLengthAndSanitize) {
  using namespace ptn::tok;
  EXPECT_EQ(utf8_valid_length("a", 0), 1u);
  EXPECT_EQ(utf8_valid_length("\xC3\xA9", 0), 2u);
  EXPECT_EQ(utf8_valid_length("\xE2\x96\x81", 0), 3u);
  EXPECT_EQ(utf8_valid_length("\xF0\x9F\x98\x80", 0), 4u);
  bool incomplete = false;
  EXPECT_EQ(utf8_valid_length("\xF0\x9F\x98", 0, &incomplete), 0u);
  EXPECT_TRUE(incomplete);
  EXPECT_EQ(utf8_valid_length("\xC0\x80", 0, &incomplete), 0u);  // overlong
  EXPECT_FALSE(incomplete);
  EXPECT_EQ(utf8_valid_length("\xED\xA0\x80", 0), 0u);  // surrogate
  EXPECT_EQ(sanitize_utf8("a\xFF" "b\xE2\x96" "c"), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c");
  EXPECT_EQ(sanitize_utf8("\xF0\x9F\x98"), "\xEF\xBF\xBD");
}

TEST(Utf8, ByteLevelMapIsGpt2s) {
  const auto& m = ptn::tok::byte_level_map();
  EXPECT_EQ(m.byte_to_utf8[' '], "\xC4\xA0");   // Ġ U+0120
  EXPECT_EQ(m.byte_to_utf8['\n'], "\xC4\x8A");  // Ċ U+010A
  EXPECT_EQ(m.byte_to_utf8['a'], "a");
  EXPECT_EQ(m.byte_to_cp[0xAD], 0x143u);        // soft hyphen is the last remapped byte
  for (int b = 0; b < 256; ++b) EXPECT_EQ(m.cp_to_byte(m.byte_to_cp[b]), b);
}

TEST(Nfc, ComposesReordersAndKeepsInvalidBytes) {
  using ptn::tok::nfc_normalize;
  EXPECT_EQ(nfc_normalize("e\xCC\x81"), "\xC3\xA9");                      // e + U+0301 -> é
  EXPECT_EQ(nfc_normalize("\xC3\xA9"), "\xC3\xA9");                       // already composed
  EXPECT_EQ(nfc_normalize("\xE1\x84\x80\xE1\x85\xA1"), "\xEA\xB0\x80");   // Hangul L+V -> 가
  EXPECT_EQ(nfc_normalize("\xE2\x84\xAB"), "\xC3\x85");                   // Å (U+212B) -> Å (U+00C5)
  // a + dot below (ccc 220) after dot above (ccc 230) reorders and composes to U+1EA1 + U+0307.
  EXPECT_EQ(nfc_normalize("a\xCC\x87\xCC\xA3"), "\xE1\xBA\xA1\xCC\x87");
  EXPECT_EQ(nfc_normalize("e\xFF\xCC\x81"), "e\xFF\xCC\x81");            // nothing composes across bad bytes
  EXPECT_EQ(nfc_normalize("plain ascii"), "plain ascii");
}

TEST(PreTokenizer, Gpt2PatternSplitsLikeGpt2) {
  ptn::tok::RegexSplitter s({ptn::tok::kGpt2Pattern});
  auto pieces = s.split("Hello world's  123 !!\n");
  std::vector<std::string> got(pieces.begin(), pieces.end());
  EXPECT_EQ(got, (std::vector<std::string>{"Hello", " world", "'s", " ", " 123", " !!", "\n"}));
  // Invalid UTF-8 does not stop the split and keeps every byte.
  auto bad = s.split("a\xFF\xFE b");
  std::string joined;
  for (auto p : bad) joined += p;
  EXPECT_EQ(joined, "a\xFF\xFE b");
  EXPECT_THROW(ptn::tok::RegexSplitter({"(unclosed"}), ptn::Error);
  EXPECT_THROW(ptn::tok::pre_tokenizer_patterns("no-such-pre"), ptn::Error);
}

TEST(SentencePiece, ScoresDecideMerges) {
  auto t = Tokenizer::create(tiny_spm());
  // " ab" -> "▁ab": "▁a" (-1.5) is tried before "ab" (-3), then "▁ab" (-0.5).
  EXPECT_EQ(t->encode("ab", false, false), (ids_t{12}));
  EXPECT_EQ(t->encode("ab", true, false), (ids_t{1, 12}));
  // "bc" (-2.5) and "▁a"... : "▁abc" -> ▁ab + c since ▁a merges first, then ▁ab beats bc.
  EXPECT_EQ(t->encode("abc", false, false), (ids_t{12, 9}));
  // é has no piece: byte fallback; \n too; an unknown char without byte tokens -> <unk>.
  EXPECT_EQ(t->encode("\xC3\xA9\n", false, false), (ids_t{6, 4, 5, 3}));
  EXPECT_EQ(t->encode("z", false, false), (ids_t{6, 0}));
  // User-defined tokens are cut out even without parse_special; each text after one gets ▁.
  EXPECT_EQ(t->encode("a<|user|>a", false, false), (ids_t{11, 14, 11}));
  // Control tokens only with parse_special.
  EXPECT_EQ(t->encode("</s>", false, true), (ids_t{2}));
  EXPECT_NE(t->encode("</s>", false, false), (ids_t{2}));
  EXPECT_EQ(t->encode("", true, false), (ids_t{1}));
  EXPECT_EQ(t->encode("", false, false), (ids_t{}));
  // Decode strips the leading space that encode added, maps bytes back.
  EXPECT_EQ(t->decode({1, 12, 9}, true), "abc");
  EXPECT_EQ(t->decode({1, 12, 9}, false), "<s> abc");
  EXPECT_EQ(t->decode({6, 4, 5, 3}, false), "\xC3\xA9\n");
  EXPECT_THROW(t->decode({99}, false), ptn::Error);
  EXPECT_THROW(t->decode({-1}, false), ptn::Error);
  EXPECT_TRUE(t->is_eog(2));
  EXPECT_FALSE(t->is_eog(1));
  EXPECT_EQ(t->bos(), 1);
}

TEST(SentencePiece, BadSpecsAreRefused) {
  auto s = tiny_spm();
  s.scores.pop_back();
  EXPECT_THROW(Tokenizer::create(s), ptn::Error);
  s = tiny_spm();
  s.bos_id = 100;
  EXPECT_THROW(Tokenizer::create(s), ptn::Error);
  s = tiny_spm();
  s.tokens.clear();
  s.scores.clear();
  s.token_types.clear();
  EXPECT_THROW(Tokenizer::create(s), ptn::Error);
  s = tiny_spm();
  s.normalizer = "nfkd";
  EXPECT_THROW(Tokenizer::create(s), ptn::Error);
}

TEST(Stories260K, TokenizerJsonMatchesReference) {
  auto t = stories();
  EXPECT_EQ(t->kind(), TokenizerKind::SentencePiece);
  EXPECT_EQ(t->vocab_size(), 512);
  EXPECT_EQ(t->encode("Once upon a time", true, false), (ids_t{1, 403, 407, 261, 378}));
  EXPECT_EQ(t->encode("Once upon a time", false, false), (ids_t{403, 407, 261, 378}));
  EXPECT_EQ(t->decode({1, 403, 407, 261, 378}, true), "Once upon a time");
  EXPECT_EQ(t->bos(), 1);
  EXPECT_EQ(t->eos(), 2);
  EXPECT_TRUE(t->is_eog(2));
  // <s> in the text is a control token: an id with parse_special, plain text without.
  EXPECT_EQ(t->encode("<s>Once", false, true), (ids_t{1, 403}));
  EXPECT_NE(t->encode("<s>Once", false, false)[0], 1);
}

TEST(Stories260K, RoundTripsAnyTextAndBytes) {
  auto t = stories();
  for (std::string s : {"Hello, World!", "  two leading spaces", "tabs\tand\nnewlines\n", "caf\xC3\xA9 \xF0\x9F\x98\x80",
                        "\xE4\xB8\x96\xE7\x95\x8C", " "}) {
    auto ids = t->encode(s, true, false);
    EXPECT_EQ(t->decode(ids, true), s) << s;
  }
  std::mt19937 rng(42);
  for (int iter = 0; iter < 200; ++iter) {
    std::string s(rng() % 40, '\0');
    for (auto& c : s) c = static_cast<char>(rng() & 0xFF);
    auto ids = t->encode(s, false, true);
    EXPECT_EQ(t->decode(ids, false), s);  // byte fallback keeps every byte
    EXPECT_EQ(stream_all(*t, ids, false), ptn::tok::sanitize_utf8(s));
  }
}

TEST(StreamDecoder, NeverSplitsACharacter) {
  auto t = stories();
  // 😀 is not in the 512-token vocabulary: four byte tokens; the stream holds them until whole.
  const std::string text = "a \xF0\x9F\x98\x80 b";
  auto ids = t->encode(text, true, false);
  std::vector<std::string> parts;
  EXPECT_EQ(stream_all(*t, ids, true, &parts), text);
  for (const auto& p : parts) EXPECT_EQ(ptn::tok::sanitize_utf8(p), p) << "a part ends inside a character";
  int empty = 0;
  for (const auto& p : parts) empty += p.empty();
  EXPECT_GE(empty, 3);  // three of the four byte tokens produced nothing yet

  // An incomplete character at the end becomes U+FFFD; a bad byte in the middle too.
  auto b0 = t->token_id("<0xF0>"), b1 = t->token_id("<0x9F>"), ba = t->token_id("<0xFF>");
  ASSERT_TRUE(b0 && b1 && ba);
  StreamDecoder d(*t, false);
  EXPECT_EQ(d.push(*b0), "");
  EXPECT_EQ(d.push(*b1), "");
  EXPECT_EQ(d.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(d.push(*ba), "\xEF\xBF\xBD");
  EXPECT_THROW(d.push(100000), ptn::Error);

  // Continuing a prompt: the first generated token keeps its space.
  StreamDecoder cont(*t, true, /*text_start=*/false);
  EXPECT_EQ(cont.push(378), " time");
  StreamDecoder fresh(*t, true);
  EXPECT_EQ(fresh.push(378), "time");
}

TEST(HfTokenizerJson, ErrorsNameTheField) {
  auto expect_error = [](const std::string& json, ErrorKind kind, const std::string& where_part) {
    try {
      parse_hf_tokenizer(json, "", "t.json");
      ADD_FAILURE() << "no error for " << json;
    } catch (const ptn::Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_NE(std::string(e.what()).find(where_part), std::string::npos) << e.what();
    }
  };
  expect_error("{", ErrorKind::Corrupt, "t.json");
  expect_error("[]", ErrorKind::Corrupt, "(root)");
  expect_error(R"({"model": {"type": "Unigram", "vocab": []}})", ErrorKind::Unsupported, "model.type");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}})", ErrorKind::Corrupt, "model.vocab");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}})", ErrorKind::Corrupt,
               "model.vocab");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 9999999}, "merges": []}})", ErrorKind::Corrupt,
               "model.vocab");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [7]}})", ErrorKind::Corrupt,
               "model.merges[0]");
  expect_error(
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Whitespace"}})",
      ErrorKind::Unsupported, "pre_tokenizer.type");
  expect_error(
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}, "added_tokens": [{"id": 0, "content": "b"}]})",
      ErrorKind::Corrupt, "added_tokens");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "end_of_word_suffix": "</w>"}})",
               ErrorKind::Unsupported, "model.end_of_word_suffix");
  expect_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "dropout": 0.1}})", ErrorKind::Unsupported,
               "model.dropout");
  EXPECT_THROW(load_hf_tokenizer("/nonexistent/tokenizer.json"), ptn::Error);
}

TEST(HfTokenizerJson, SmallByteLevelTokenizer) {
  // Vocabulary: the 256 byte-level characters, plus "Ġh", "Ġhi", and an added special token.
  std::string vocab;
  const auto& m = ptn::tok::byte_level_map();
  for (int b = 0; b < 256; ++b) {
    std::string c = m.byte_to_utf8[b];
    vocab += "\"" + (c == "\"" ? std::string("\\\"") : c == "\\" ? std::string("\\\\") : c) + "\": " + std::to_string(b) + ",";
  }
  vocab += "\"\xC4\xA0h\": 256, \"\xC4\xA0hi\": 257";
  const std::string json = R"({"model": {"type": "BPE", "vocab": {)" + vocab +
                           R"(}, "merges": ["Ġ h", "Ġh i"]}, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
      "added_tokens": [{"id": 258, "content": "<|end|>", "special": true}]})";
  auto t = Tokenizer::create(parse_hf_tokenizer(json, R"({"eos_token": "<|end|>"})", "small.json"));
  EXPECT_EQ(t->kind(), TokenizerKind::ByteLevelBPE);
  EXPECT_EQ(t->encode("hi hi", false, false), (ids_t{'h', 'i', 257}));
  EXPECT_EQ(t->encode(" hi<|end|>", false, true), (ids_t{257, 258}));
  EXPECT_EQ(t->decode({257, 258}, false), " hi<|end|>");
  EXPECT_EQ(t->decode({257, 258}, true), " hi");
  EXPECT_TRUE(t->is_eog(258));
  // Any bytes encode and decode back.
  std::mt19937 rng(7);
  for (int iter = 0; iter < 100; ++iter) {
    std::string s(rng() % 30, '\0');
    for (auto& c : s) c = static_cast<char>(rng() & 0xFF);
    EXPECT_EQ(t->decode(t->encode(s, false, false), false), s);
  }
}

TEST(HfTokenizerJson, GemmaStyleSpmWithStrippingAddedToken) {
  // No Prepend (Gemma): no leading ▁; Split(" ") after the ▁ replacement cuts nothing.
  const std::string json = R"({
    "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
    "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false},
    "added_tokens": [{"id": 8, "content": "<|user|>", "special": true, "rstrip": true},
                     {"id": 9, "content": "<|x|>", "special": true, "lstrip": true}],
    "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",
      "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "▁": 3, "a": 4, "b": 5, "▁a": 6, "<0x0A>": 7, "<|user|>": 8, "<|x|>": 9},
      "merges": ["▁ a"]},
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
      {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
  })";
  auto spec = parse_hf_tokenizer(json, "", "gemma-like.json");
  EXPECT_FALSE(spec.add_space_prefix);
  EXPECT_TRUE(spec.add_bos);
  auto t = Tokenizer::create(spec);
  EXPECT_EQ(t->encode("a b", false, false), (ids_t{4, 3, 5}));
  EXPECT_EQ(t->encode(" a", true, false), (ids_t{1, 6}));
  EXPECT_EQ(t->encode("<|user|>\n a", false, true), (ids_t{8, 4}));      // rstrip eats "\n "
  EXPECT_EQ(t->encode("a \n<|x|>b", false, true), (ids_t{4, 9, 5}));     // lstrip eats " \n"
  EXPECT_EQ(t->encode("\n", false, false), (ids_t{7}));                  // byte fallback
  EXPECT_EQ(t->encode("c", false, false), (ids_t{0}));                   // no <0x63>: unknown
  EXPECT_EQ(t->decode({6, 3, 5}, false), " a b");                        // no space to strip
}

TEST(HfTokenizerJson, MangledFilesFailCleanly) {
  // Every truncation and many byte flips of a real tokenizer.json either load or throw ptn::Error.
  const std::string good = read_text_file(kStoriesJson);
  std::mt19937 rng(5);
  int loaded = 0, refused = 0;
  for (int iter = 0; iter < 300; ++iter) {
    std::string s = good;
    if (iter % 3 == 0) {
      s.resize(rng() % s.size());
    } else {
      static const char kChars[] = "{}[]\":,0-9a \\";
      for (int k = 0; k < 4; ++k) s[rng() % s.size()] = kChars[rng() % (sizeof kChars - 1)];
    }
    try {
      auto spec = parse_hf_tokenizer(s, "", "mangled.json");
      auto t = Tokenizer::create(spec);
      (void)t->encode("Once upon a time", true, true);
      ++loaded;
    } catch (const ptn::Error&) {
      ++refused;
    }
  }
  EXPECT_EQ(loaded + refused, 300);
  EXPECT_GT(refused, 100);
}

TEST(HfTokenizerJson, MetaspacePrependSchemes) {
  auto make = [](const std::string& scheme) {
    const std::string json = R"({"pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": ")" +
                             scheme + R"(", "split": false},
      "added_tokens": [{"id": 3, "content": "<s>", "special": true}],
      "model": {"type": "BPE", "byte_fallback": false, "vocab": {"▁": 0, "a": 1, "▁a": 2, "<s>": 3}, "merges": ["▁ a"]}})";
    return Tokenizer::create(parse_hf_tokenizer(json, "", scheme + ".json"));
  };
  EXPECT_EQ(make("always")->encode("a<s>a", false, true), (ids_t{2, 3, 2}));
  EXPECT_EQ(make("first")->encode("a<s>a", false, true), (ids_t{2, 3, 1}));   // no ▁ after the special token
  EXPECT_EQ(make("first")->encode("<s>a", false, true), (ids_t{3, 1}));
  EXPECT_EQ(make("never")->encode("a<s>a", false, true), (ids_t{1, 3, 1}));
  EXPECT_THROW(make("sometimes"), ptn::Error);
}

TEST(ByteLevelSpec, EdgeCasesAreHandledOrRefused) {
  // A byte-level vocabulary missing most bytes, with odd merges: encodes without crashing,
  // bytes without a token become <unk> when there is one.
  TokenizerSpec s;
  s.kind = TokenizerKind::ByteLevelBPE;
  s.tokens = {"<unk>", "a", "b", "ab", "", "\xC4\xA0", "\xC4\xA0" "a"};
  s.token_types = {TokenType::Unknown, TokenType::Normal, TokenType::Normal, TokenType::Normal,
                   TokenType::Unused,  TokenType::Normal, TokenType::Normal};
  s.unk_id = 0;
  s.merges = {"a b", "nospace", "x y", "\xC4\xA0 a", "a  b"};
  s.pre_tokenizer = "gpt-2";
  auto t = Tokenizer::create(s);
  EXPECT_EQ(t->encode("ab a", false, false), (ids_t{3, 6}));
  EXPECT_EQ(t->encode("abc", false, false), (ids_t{3, 0}));  // 'c' has no token
  EXPECT_EQ(t->decode({3, 6, 4}, false), "ab a");           // an unused token decodes to nothing

  s.pre_tokenizer = "no-such-family";
  EXPECT_THROW(Tokenizer::create(s), ptn::Error);
  s.pre_tokenizer = "";
  s.pre_split_regexes = {"[unclosed"};
  EXPECT_THROW(Tokenizer::create(s), ptn::Error);
  s.pre_split_regexes.clear();
  s.merges.clear();
  EXPECT_THROW(Tokenizer::create(s), ptn::Error);  // byte-level BPE needs merges
  s.merges = {"a b"};
  s.rstrip_ids = {99};
  EXPECT_THROW(Tokenizer::create(s), ptn::Error);
}

TEST(SentencePiece, ByteTokenTextIsValidated) {
  auto s = tiny_spm();
  s.token_types[7] = TokenType::Byte;  // "a" is not <0xXX>
  EXPECT_THROW(Tokenizer::create(s), ptn::Error);
  s = tiny_spm();
  s.token_types[7] = static_cast<TokenType>(9);
  EXPECT_THROW(Tokenizer::create(s), ptn::Error);
}

TEST(PreTokenizer, EveryKnownFamilyCompilesAndCoversTheText) {
  const std::string text = "Hello World's 12345 caf\xC3\xA9 \xE4\xB8\x96\xE7\x95\x8C!! \n\n  x \xFF end";
  for (const char* name : {"llama-bpe", "llama3", "qwen2", "gpt-2", "mpt", "starcoder", "refact", "falcon",
                           "deepseek-coder", "deepseek-llm", "deepseek-v3", "tekken", "bloom", "viking", "default",
                           "", "gpt-4o", "llama4", "qwen35", "tiny_aya", "seed-coder", "bailingmoe", "glm4",
                           "hunyuan-dense", "exaone4"}) {
    ptn::tok::RegexSplitter s(ptn::tok::pre_tokenizer_patterns(name));
    std::string joined;
    size_t pieces = 0;
    for (auto p : s.split(text)) {
      EXPECT_FALSE(p.empty()) << name;
      joined += p;
      ++pieces;
    }
    EXPECT_EQ(joined, text) << name;
    EXPECT_GT(pieces, 5u) << name;
  }
  // Llama 3 keeps up to three digits together, Qwen 2 one.
  auto digits = [](const char* name) {
    ptn::tok::RegexSplitter s(ptn::tok::pre_tokenizer_patterns(name));
    return s.split("12345").size();
  };
  EXPECT_EQ(digits("llama-bpe"), 2u);
  EXPECT_EQ(digits("qwen2"), 5u);
  EXPECT_EQ(digits("gpt-2"), 1u);
  EXPECT_EQ(digits("gpt-4o"), 2u);
  EXPECT_EQ(digits("tiny_aya"), 2u);  // "12" "345": thousands groups from the right
  // o200k cuts words at case changes and keeps a contraction on its word.
  auto pieces = [](const char* name, const char* text) {
    ptn::tok::RegexSplitter s(ptn::tok::pre_tokenizer_patterns(name));
    std::vector<std::string> out;
    for (auto p : s.split(text)) out.emplace_back(p);
    return out;
  };
  EXPECT_EQ(pieces("gpt-4o", "HTTPServer he's"), (std::vector<std::string>{"HTTPServer", " he's"}));
  EXPECT_EQ(pieces("gpt-4o", "camelCase"), (std::vector<std::string>{"camel", "Case"}));
  EXPECT_EQ(pieces("tiny_aya", "1234567"), (std::vector<std::string>{"1", "234", "567"}));
  EXPECT_TRUE(ptn::tok::pre_tokenizer_ignores_merges("llama-bpe"));
  EXPECT_TRUE(ptn::tok::pre_tokenizer_ignores_merges("falcon-h1"));
  EXPECT_FALSE(ptn::tok::pre_tokenizer_ignores_merges("gpt-4o"));
  // A regex list maps back to its name; keeping only the matches of a pattern that covers all
  // text is the same split.
  EXPECT_EQ(ptn::tok::pre_tokenizer_name_for(ptn::tok::pre_tokenizer_patterns("qwen2"), false), "qwen2");
  EXPECT_EQ(ptn::tok::pre_tokenizer_name_for(ptn::tok::pre_tokenizer_patterns("llama3"), true), "llama-bpe");
  const std::string o200k = ptn::tok::pre_tokenizer_patterns("gpt-4o")[0];
  EXPECT_EQ(ptn::tok::pre_tokenizer_name_for({ptn::tok::kDropGapsMarker + o200k}, false), "gpt-4o");
  EXPECT_EQ(ptn::tok::pre_tokenizer_name_for({R"(\p{L}+)"}, false), "");
  // Removed-gaps patterns drop unmatched valid text but keep invalid bytes.
  ptn::tok::RegexSplitter only_words({std::string(ptn::tok::kDropGapsMarker) + R"(\p{L}+)"});
  std::vector<std::string> got;
  for (auto p : only_words.split("ab, cd \xFF!")) got.emplace_back(p);
  EXPECT_EQ(got, (std::vector<std::string>{"ab", "cd", " \xFF!"}));
}

TEST(HfTokenizerJson, ConfigDecidesBosEosAndTemplate) {
  const std::string json = read_text_file(kStoriesJson);
  // add_bos_token false in the config wins over the post-processor's <s>.
  auto spec = parse_hf_tokenizer(json, R"({"add_bos_token": false, "eos_token": {"content": "</s>"},
      "pad_token": "<pad-not-in-vocab>", "chat_template": [{"name": "tool_use", "template": "T"},
      {"name": "default", "template": "D"}]})", "stories.json");
  EXPECT_FALSE(spec.add_bos);
  EXPECT_EQ(spec.eos_id, 2);
  EXPECT_EQ(spec.eos_token, "</s>");
  EXPECT_FALSE(spec.pad_id.has_value());
  EXPECT_EQ(spec.chat_template, "D");
  EXPECT_EQ(Tokenizer::create(spec)->encode("Once", true, false), (ids_t{403}));
  // add_eos_token without an eos token in the vocabulary is an error naming the config field.
  try {
    parse_hf_tokenizer(json, R"({"add_eos_token": true, "eos_token": "<nope>"})", "stories.json");
    ADD_FAILURE() << "no error";
  } catch (const ptn::Error& e) {
    EXPECT_NE(std::string(e.what()).find("add_eos_token"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_hf_tokenizer(json, "{not json", "stories.json"), ptn::Error);
}
