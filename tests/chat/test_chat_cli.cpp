// End-to-end checks around the chat templates: the `ptn chat-template` command on a
// tokenizer_config.json, a GGUF file and a .ptn file (skipped when the ptn binary has not been
// built), and the stored reference renders against @huggingface/jinja itself (skipped when node
// or tests/js/node_modules is missing).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>

#include "../cli_test_util.h"
#include "chat/chat_template.h"

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

using ptn_test::RunResult;
using ptn_test::run_ptn;
using ptn_test::spit;

// A GGUF v3 file with no tensors and the tokenizer keys the command reads.
std::string tiny_gguf(const std::string& chat_template) {
  std::string b;
  auto u32 = [&](uint32_t v) { b.append(reinterpret_cast<const char*>(&v), 4); };
  auto u64 = [&](uint64_t v) { b.append(reinterpret_cast<const char*>(&v), 8); };
  auto str = [&](const std::string& s) {
    u64(s.size());
    b += s;
  };
  b += "GGUF";
  u32(3);
  u64(0);  // tensors
  u64(4);  // key/values
  str("tokenizer.chat_template");
  u32(8);
  str(chat_template);
  str("tokenizer.ggml.tokens");
  u32(9);
  u32(8);
  u64(3);
  str("<unk>");
  str("<s>");
  str("</s>");
  str("tokenizer.ggml.bos_token_id");
  u32(4);
  u32(1);
  str("tokenizer.ggml.eos_token_id");
  u32(4);
  u32(2);
  while (b.size() % 32) b += '\0';
  return b;
}

class ChatCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(PTN_BINARY)) GTEST_SKIP() << "ptn binary not built: " << PTN_BINARY;
    dir_ = fs::temp_directory_path() / ("ptn_chat_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    spit(dir_ / "messages.json", R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi ü"}])");
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  // `ptn chat-template --model <model> --messages <messages> <extra>`
  RunResult chat_template(const fs::path& model, const fs::path& messages, const std::string& extra = "") const {
    return run_ptn("chat-template --model '" + model.string() + "' --messages '" + messages.string() + "' " + extra, dir_);
  }
  fs::path dir_;
  const std::string tmpl_ =
      "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{{ eos_token }}{% endfor %}"
      "{% if add_generation_prompt %}<|assistant|>{% endif %}";
};

TEST_F(ChatCli, RendersFromTokenizerConfig) {
  fs::create_directories(dir_ / "model");
  ojson cfg = {{"chat_template", tmpl_}, {"bos_token", {{"content", "<s>"}, {"lstrip", false}}}, {"eos_token", "</s>"}};
  spit(dir_ / "model" / "tokenizer_config.json", cfg.dump());
  RunResult r = chat_template(dir_ / "model", dir_ / "messages.json", "--add_generation_prompt");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "<s><|system|>Be brief.</s><|user|>Hi ü</s><|assistant|>");
  // The same through the library, without the generation prompt, by file path.
  RunResult r2 = chat_template(dir_ / "model" / "tokenizer_config.json", dir_ / "messages.json");
  ASSERT_EQ(r2.code, 0) << r2.err;
  EXPECT_EQ(r2.out, "<s><|system|>Be brief.</s><|user|>Hi ü</s>");
}

TEST_F(ChatCli, RendersFromGguf) {
  spit(dir_ / "m.gguf", tiny_gguf(tmpl_));
  RunResult r = chat_template(dir_ / "m.gguf", dir_ / "messages.json", "--add-generation-prompt");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "<s><|system|>Be brief.</s><|user|>Hi ü</s><|assistant|>");
}

TEST_F(ChatCli, ToolsAndVarsFromFiles) {
  spit(dir_ / "t.json", ojson{{"chat_template", "{{ tools | tojson }}|{{ enable_thinking }}|{{ messages | length }}"}}.dump());
  spit(dir_ / "conv.json", R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f", "z": 1, "a": 2}]})");
  RunResult r = chat_template(dir_ / "t.json", dir_ / "conv.json", "--vars '{\"enable_thinking\": false}'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "[{\"name\": \"f\", \"z\": 1, \"a\": 2}]|false|1");
}

TEST_F(ChatCli, ReportsErrors) {
  spit(dir_ / "m.ptn", std::string("PTN\0PROG", 8) + std::string(200, '\0'));
  RunResult r = chat_template(dir_ / "m.ptn", dir_ / "messages.json");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("m.ptn: header"), std::string::npos) << r.err;  // .ptn programs are read now: a damaged one is reported

  spit(dir_ / "bad.json", ojson{{"chat_template", "{% for m in messages %}{{ m.content | nosuchfilter }}{% endfor %}"}}.dump());
  RunResult r2 = chat_template(dir_ / "bad.json", dir_ / "messages.json");
  EXPECT_EQ(r2.code, 1);
  EXPECT_NE(r2.err.find("unknown filter 'nosuchfilter'"), std::string::npos) << r2.err;
  EXPECT_NE(r2.err.find("line 1"), std::string::npos) << r2.err;

  spit(dir_ / "notjson.json", "{\"chat_template\": ");
  RunResult r3 = chat_template(dir_ / "notjson.json", dir_ / "messages.json");
  EXPECT_EQ(r3.code, 1);
  EXPECT_NE(r3.err.find("invalid JSON"), std::string::npos) << r3.err;

  RunResult r4 = chat_template(dir_ / "missing", dir_ / "messages.json");
  EXPECT_EQ(r4.code, 1);
}

TEST(ChatReference, StoredRendersEqualHuggingFaceJinja) {
  fs::path root = PTN_SOURCE_DIR;
  if (std::system("command -v node > /dev/null 2>&1") != 0) GTEST_SKIP() << "node not installed";
  if (!fs::exists(root / "tests" / "js" / "node_modules" / "@huggingface" / "jinja"))
    GTEST_SKIP() << "tests/js/node_modules missing (run scripts/test-setup.sh)";
  std::string cmd = "node '" + (root / "tests" / "js" / "render_templates.mjs").string() + "' --check";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace
