// `ptn tokenize` / `ptn detokenize` end to end: runs the built binary (PTN_BINARY).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

#include "core/file.h"

namespace {

struct Run {
  int status;
  std::string out;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

Run run(const std::string& args) {
  const std::string cmd = quote(PTN_BINARY) + " " + args + " 2>&1";
  std::FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed"};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

const std::string kStories = std::string(PTN_SOURCE_DIR) + "/models/stories260K/";

class TokenizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ptn::file_exists(PTN_BINARY)) << PTN_BINARY << " is not built (cmake --build <dir> --target ptn)";
  }
};

}  // namespace

TEST_F(TokenizeCli, TokenizeGgufAndJson) {
  for (const std::string& model : {kStories + "stories260K.gguf", kStories + "hf/tokenizer.json", kStories + "hf"}) {
    auto r = run("tokenize --model " + quote(model) + " --text 'Once upon a time'");
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_EQ(r.out, "[1, 403, 407, 261, 378]\n") << model;
  }
  auto r = run("tokenize --model " + quote(kStories + "stories260K.gguf") + " --text 'Once upon a time' --no_add_special");
  EXPECT_EQ(r.out, "[403, 407, 261, 378]\n");
  r = run("tokenize -m " + quote(kStories + "stories260K.gguf") + " -t '<s>Once' --no-add-special");
  EXPECT_EQ(r.out, "[1, 403]\n");  // special tokens in the text are recognised
}

TEST_F(TokenizeCli, Detokenize) {
  auto r = run("detokenize --model " + quote(kStories + "stories260K.gguf") + " --ids '[1, 403, 407, 261, 378]'");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "<s> Once upon a time\n");
  r = run("detokenize --model " + quote(kStories + "stories260K.gguf") + " --ids '[1,403,407,261,378]' --skip-special");
  EXPECT_EQ(r.out, "Once upon a time\n");
}

TEST_F(TokenizeCli, BadInputIsReported) {
  auto r = run("detokenize --model " + quote(kStories + "stories260K.gguf") + " --ids '[1, 99999]'");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("99999"), std::string::npos) << r.out;
  r = run("detokenize --model " + quote(kStories + "stories260K.gguf") + " --ids 'not json'");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("--ids"), std::string::npos) << r.out;
  r = run("tokenize --model " + quote(kStories + "PROVENANCE.md") + " --text hi");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("not a GGUF file"), std::string::npos) << r.out;
  r = run("tokenize --model /nonexistent.gguf --text hi");
  EXPECT_EQ(r.status, 1);
}
