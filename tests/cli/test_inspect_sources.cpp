// `ptn inspect` of the two source forms other than a .ptn program: the bundled stories260K GGUF
// and its HF directory. What the output must say is read here from the files themselves (the
// GGUF header and tensor table through ptn's reader, the safetensors header, config.json), so
// each field is checked against its source rather than against a copy of earlier output; a
// directory whose config.json is broken is "not importable" with exit code 1.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../cli_test_util.h"
#include "../scratch_dir.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "formats/gguf.h"
#include "formats/gguf_spec.h"
#include "formats/safetensors.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using ptn_test::run_ptn;

namespace {

const std::string kStories = std::string(PTN_SOURCE_DIR) + "/models/stories260K";

json stories_config() { return json::parse(std::ifstream(kStories + "/hf/config.json")); }

bool has(const std::string& out, const std::string& what) { return out.find(what) != std::string::npos; }

// The "ptn:" verdict: the spec's dimensions as config.json gives them.
void expect_spec_of_config(const std::string& out) {
  const json c = stories_config();
  const size_t at = out.find("\nptn:\n");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string v = out.substr(at);
  EXPECT_TRUE(has(v, "family llama")) << v;
  char dims[256];
  std::snprintf(dims, sizeof dims, "vocab %lld, hidden %lld, ffn %lld, layers %lld, heads %lld, kv heads %lld, head dim %lld",
                c["vocab_size"].get<long long>(), c["hidden_size"].get<long long>(), c["intermediate_size"].get<long long>(),
                c["num_hidden_layers"].get<long long>(), c["num_attention_heads"].get<long long>(),
                c["num_key_value_heads"].get<long long>(), c["head_dim"].get<long long>());
  EXPECT_TRUE(has(v, dims)) << "want '" << dims << "' in\n" << v;
  EXPECT_TRUE(has(v, "rope scaling none")) << v;
  EXPECT_TRUE(has(v, "supported: yes")) << v;
}

class InspectSources : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(fs::exists(PTN_BINARY)) << PTN_BINARY << " is not built"; }
  ptn::testing::ScratchDir dir_{"ptn_inspect_sources_"};
};

TEST_F(InspectSources, GgufHeaderMetadataTensorsTokenizerAndVerdict) {
  const std::string path = kStories + "/stories260K.gguf";
  auto g = ptn::GgufFile::open(path);
  auto r = run_ptn("inspect '" + path + "'", dir_.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string& out = r.out;
  const std::string head = path + ": GGUF v" + std::to_string(g->version()) + ", " + std::to_string(g->metadata().size()) +
                           " metadata keys, " + std::to_string(g->tensors().size()) + " tensors";
  EXPECT_EQ(out.rfind(head, 0), 0u) << "want the first line to start '" << head << "':\n" << out.substr(0, 200);
  ASSERT_GT(g->metadata().size(), 10u);
  for (const auto& [k, v] : g->metadata()) EXPECT_TRUE(has(out, "\n  " + k + " = ")) << k;
  EXPECT_TRUE(has(out, "\n  general.architecture = ")) << out;
  // 40 tensor rows (name, type, shape), then how many more.
  ASSERT_GT(g->tensors().size(), 40u);
  for (size_t i = 0; i < g->tensors().size(); ++i) {
    const auto& t = g->tensors()[i];
    const bool listed = has(out, "\n  " + t.name + " ");
    EXPECT_EQ(listed, i < 40) << t.name;
    if (listed) {
      const std::string line = out.substr(out.find("\n  " + t.name + " ") + 1, out.find('\n', out.find("\n  " + t.name + " ") + 1) -
                                                                                    out.find("\n  " + t.name + " ") - 1);
      EXPECT_TRUE(has(line, std::string(" ") + ptn::dtype_name(t.dtype) + " ")) << line;
      EXPECT_TRUE(has(line, ptn::shape_str(t.shape))) << line;
      EXPECT_TRUE(has(line, "offset " + std::to_string(t.offset))) << line;
    }
  }
  EXPECT_TRUE(has(out, "... " + std::to_string(g->tensors().size() - 40) + " more")) << out;
  const ptn::TokenizerSpec tok = ptn::tokenizer_spec_from_gguf(*g);
  EXPECT_TRUE(has(out, "\ntokenizer: sentencepiece, " + std::to_string(tok.tokens.size()) + " tokens")) << out;
  EXPECT_EQ(static_cast<long long>(tok.tokens.size()), stories_config()["vocab_size"].get<long long>());
  EXPECT_TRUE(has(out, "bos " + std::to_string(stories_config()["bos_token_id"].get<int>()) + ", eos " +
                           std::to_string(stories_config()["eos_token_id"].get<int>())))
      << out;
  expect_spec_of_config(out);

  // --all-tensors lists the rest.
  r = run_ptn("inspect --all-tensors '" + path + "'", dir_.path());
  ASSERT_EQ(r.code, 0) << r.err;
  for (const auto& t : g->tensors()) EXPECT_TRUE(has(r.out, "\n  " + t.name + " ")) << t.name;
  EXPECT_FALSE(has(r.out, " more (--all-tensors"));
}

TEST_F(InspectSources, HfDirectorySafetensorsAndVerdict) {
  const std::string path = kStories + "/hf";
  auto st = ptn::SafetensorsFile::open(path + "/model.safetensors");
  auto r = run_ptn("inspect '" + path + "'", dir_.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string& out = r.out;
  EXPECT_EQ(out.rfind(path + ": Hugging Face model directory\n", 0), 0u) << out.substr(0, 200);
  EXPECT_TRUE(has(out, "model.safetensors: safetensors, " + std::to_string(st->tensors().size()) + " tensors")) << out;
  ASSERT_GT(st->tensors().size(), 40u);
  size_t listed = 0;
  for (const auto& t : st->tensors()) {
    const size_t at = out.find("\n  " + t.name + " ");
    if (at == std::string::npos) continue;
    ++listed;
    const std::string line = out.substr(at + 1, out.find('\n', at + 1) - at - 1);
    EXPECT_TRUE(has(line, " " + t.dtype + " ")) << line;
    EXPECT_TRUE(has(line, ptn::shape_str(t.shape))) << line;
  }
  EXPECT_EQ(listed, 40u);
  EXPECT_TRUE(has(out, "... " + std::to_string(st->tensors().size() - 40) + " more")) << out;
  expect_spec_of_config(out);
  EXPECT_EQ(has(out, "tied embeddings"), stories_config()["tie_word_embeddings"].get<bool>()) << out;

  // A config.json that cannot describe a model: inspect says so and exits 1.
  const fs::path broken = fs::path(dir_.path()) / "broken";
  fs::create_directories(broken);
  json c = stories_config();
  c["num_hidden_layers"] = -3;
  std::ofstream(broken / "config.json") << c.dump();
  fs::copy_file(path + "/model.safetensors", broken / "model.safetensors");
  r = run_ptn("inspect '" + broken.string() + "'", dir_.path());
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "not importable: ")) << r.out;
  EXPECT_TRUE(has(r.out, "num_hidden_layers")) << r.out;
  EXPECT_FALSE(has(r.out, "supported: yes")) << r.out;
}

}  // namespace
