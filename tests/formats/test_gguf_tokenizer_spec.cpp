// TokenizerSpec from GGUF tokenizer.ggml.* keys: llama.cpp's vocabulary fixtures (SPM and BPE),
// the round trip through the writer, and malformed tokenizer metadata.
#include <gtest/gtest.h>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/gguf_spec.h"
#include "formats/gguf_writer.h"

namespace ptn {
namespace {

const std::string kVocab = std::string(PTN_TEST_DATA) + "/tokenizers/ggml-vocab-";

std::string tmp(const std::string& name) {
  std::string base = ::testing::TempDir().empty() ? std::string("/tmp/") : ::testing::TempDir();
  return base + "ptn_toktest_" + std::to_string(getpid()) + "_" + name;
}

TEST(GgufTokenizer, LlamaSpm) {
  auto g = GgufFile::open(kVocab + "llama-spm.gguf");
  TokenizerSpec t = tokenizer_spec_from_gguf(*g);
  EXPECT_EQ(t.kind, TokenizerKind::SentencePiece);
  ASSERT_EQ(t.tokens.size(), 32000u);
  EXPECT_EQ(t.scores.size(), 32000u);
  EXPECT_EQ(t.tokens[1], "<s>");
  EXPECT_EQ(t.tokens[3], "<0x00>");
  EXPECT_EQ(t.token_types[0], TokenType::Unknown);
  EXPECT_EQ(t.token_types[1], TokenType::Control);
  EXPECT_EQ(t.token_types[3], TokenType::Byte);
  EXPECT_EQ(t.bos_id, 1);
  EXPECT_EQ(t.eos_id, 2);
  EXPECT_EQ(t.unk_id, 0);
  EXPECT_TRUE(t.add_bos);
  EXPECT_FALSE(t.add_eos);
  EXPECT_TRUE(t.add_space_prefix);  // SPM default when the key is absent
  EXPECT_EQ(t.bos_token, "<s>");
  EXPECT_TRUE(t.merges.empty());
}

TEST(GgufTokenizer, Gpt2Bpe) {
  auto g = GgufFile::open(kVocab + "gpt-2.gguf");
  TokenizerSpec t = tokenizer_spec_from_gguf(*g);
  EXPECT_EQ(t.kind, TokenizerKind::ByteLevelBPE);
  EXPECT_EQ(t.tokens.size(), 50257u);
  ASSERT_EQ(t.merges.size(), 50000u);
  EXPECT_EQ(t.merges[0], "\xc4\xa0 t");  // "Ġ t"
  EXPECT_EQ(t.pre_tokenizer, "gpt-2");
  EXPECT_EQ(t.bos_id, 50256);
  EXPECT_EQ(t.eos_token, "<|endoftext|>");
  EXPECT_FALSE(t.add_space_prefix);
}

TEST(GgufTokenizer, Phi3ChatTemplateAndPadding) {
  auto g = GgufFile::open(kVocab + "phi-3.gguf");
  TokenizerSpec t = tokenizer_spec_from_gguf(*g);
  EXPECT_EQ(t.eos_id, 32000);
  EXPECT_EQ(t.pad_id, 32000);
  EXPECT_NE(t.chat_template.find("for message in messages"), std::string::npos);
  EXPECT_EQ(t.token_types[2], TokenType::UserDefined);
}

TEST(GgufTokenizer, WriterRoundTrip) {
  auto g = GgufFile::open(kVocab + "phi-3.gguf");
  TokenizerSpec t = tokenizer_spec_from_gguf(*g);
  GgufWriter w;
  set_tokenizer_keys(w, t);
  const std::string p = tmp("tok.gguf");
  w.write(p);
  TokenizerSpec back = tokenizer_spec_from_gguf(*GgufFile::open(p));
  EXPECT_EQ(back.tokens, t.tokens);
  EXPECT_EQ(back.scores, t.scores);
  EXPECT_EQ(back.token_types, t.token_types);
  EXPECT_EQ(back.bos_id, t.bos_id);
  EXPECT_EQ(back.eos_id, t.eos_id);
  EXPECT_EQ(back.pad_id, t.pad_id);
  EXPECT_EQ(back.chat_template, t.chat_template);
  EXPECT_EQ(back.add_bos, t.add_bos);
  std::remove(p.c_str());
}

void expect_tok_error(GgufWriter& w, const std::string& name, ErrorKind kind, const std::string& needle) {
  const std::string p = tmp(name);
  w.write(p);
  auto g = GgufFile::open(p);
  try {
    tokenizer_spec_from_gguf(*g);
    ADD_FAILURE() << name << ": no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
  std::remove(p.c_str());
}

TEST(GgufTokenizer, MalformedMetadata) {
  {
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "bert");
    w.set_string_array("tokenizer.ggml.tokens", {"a"});
    expect_tok_error(w, "bert.gguf", ErrorKind::Unsupported, "'bert'");
  }
  {
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
    w.set_f32_array("tokenizer.ggml.scores", {0.0f});
    expect_tok_error(w, "scores.gguf", ErrorKind::Corrupt, "tokenizer.ggml.scores");
  }
  {
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
    w.set_i32_array("tokenizer.ggml.token_type", {1, 9});
    expect_tok_error(w, "types.gguf", ErrorKind::Corrupt, "unknown type 9");
  }
  {
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
    w.set_u32("tokenizer.ggml.bos_token_id", 7);
    expect_tok_error(w, "bos.gguf", ErrorKind::Corrupt, "tokenizer.ggml.bos_token_id");
  }
  {
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
    expect_tok_error(w, "merges.gguf", ErrorKind::Corrupt, "merges");
  }
  {
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_u32("tokenizer.ggml.tokens", 3);
    expect_tok_error(w, "tokens_type.gguf", ErrorKind::Corrupt, "tokenizer.ggml.tokens");
  }
}

}  // namespace
}  // namespace ptn

#include "formats/hf_config.h"
#include "formats/random_weights.h"
#include "formats/weights.h"

namespace ptn {
namespace {

TEST(GgufTokenizer, SpmFromMergesGetsRankScoresAndPadding) {
  ModelSpec s = model_spec_from_hf_config(
      nlohmann::json::parse(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 8, "hidden_size": 32,
        "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2})"),
      "cfg");
  auto src = random_weights(s, 1);
  TokenizerSpec t;
  t.kind = TokenizerKind::SentencePiece;
  t.tokens = {"<unk>", "a", "b", "ab", "abb", "ba"};
  t.merges = {"a b", "ab b", "b a", "a b"};
  GgufModelOptions opt;
  opt.tokenizer = &t;
  const std::string p = tmp("spm_merges.gguf");
  write_model_gguf(*src, p, opt);
  TokenizerSpec back = tokenizer_spec_from_gguf(*GgufFile::open(p));
  ASSERT_EQ(back.tokens.size(), 8u);  // padded to the embedding rows
  EXPECT_EQ(back.tokens[6], "[PAD6]");
  EXPECT_EQ(back.scores, (std::vector<float>{0, 0, 0, -0.0f, -1, -2, 0, 0}));
  std::remove(p.c_str());
}

}  // namespace
}  // namespace ptn
