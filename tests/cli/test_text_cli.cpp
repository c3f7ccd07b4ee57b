// The text commands end to end on stories260K, run through the built binary (PTN_BINARY):
// tokenize / detokenize / chat-template / inspect on .ptn programs, perplexity, and chat driven
// through a pipe.
#include <gtest/gtest.h>

#include <algorithm>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "../cli_test_util.h"

namespace fs = std::filesystem;

namespace {

using ptn_test::RunResult;
using ptn_test::slurp;
using ptn_test::spit;

size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

const char* kStory =
    "Once upon a time, there was a little girl named Mia. Mia had a small red ball. She liked to play with "
    "the ball in the garden every day. One day, the ball rolled under the fence and into the yard of an old "
    "man. Mia was scared, but she wanted her ball back. She knocked on the door. The old man opened it and "
    "smiled. \"Is this your ball?\" he asked. Mia nodded. He gave her the ball and a cookie too. Mia said "
    "thank you and ran home. She told her mom about the kind old man. Her mom was happy and they baked "
    "cookies for him the next day. The old man was very glad, and from then on Mia and the old man were "
    "good friends. They played in the garden and shared cookies every week.";

class TextCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("ptn_text_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    if (!fs::exists(PTN_BINARY)) return;
    const std::string src = std::string(PTN_SOURCE_DIR) + "/models/stories260K/hf";
    ok_ = run_in("export --model '" + src + "' --max-seq-length 64 --samples 1 --output '" + (dir_ / "s.ptn").string() + "'")
              .code == 0;
    // the same model with a chat template in its tokenizer_config.json
    fs::copy(src, dir_ / "hf_chat", fs::copy_options::recursive);
    auto cfg = nlohmann::ordered_json::parse(slurp(dir_ / "hf_chat" / "tokenizer_config.json"));
    cfg["chat_template"] =
        "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
        "{% if add_generation_prompt %}[assistant]{% endif %}";
    spit(dir_ / "hf_chat" / "tokenizer_config.json", cfg.dump());
    ok_ = ok_ && run_in("export --model '" + (dir_ / "hf_chat").string() + "' --max-seq-length 64 --samples 1 --output '" +
                        (dir_ / "c.ptn").string() + "'")
                         .code == 0;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  void SetUp() override {
    if (!fs::exists(PTN_BINARY)) GTEST_SKIP() << "ptn binary not built: " << PTN_BINARY;
    ASSERT_TRUE(ok_) << "export of stories260K failed";
  }
  // Runs `ptn args` in dir_ with stdin from `input` (empty: /dev/null).
  static RunResult run_in(const std::string& args, const std::string& input = "") {
    return ptn_test::run_ptn(args, dir_, input);
  }
  static std::string ptn_path() { return "'" + (dir_ / "s.ptn").string() + "'"; }
  static inline fs::path dir_;
  static inline bool ok_ = false;
};

TEST_F(TextCli, TokenizeDetokenizePtn) {
  RunResult r = run_in("tokenize --model " + ptn_path() + " --text 'Once upon a time'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "[1, 403, 407, 261, 378]\n");
  r = run_in("tokenize --model " + ptn_path() + " --text 'Once upon a time' --no-add-special");
  EXPECT_EQ(r.out, "[403, 407, 261, 378]\n");
  r = run_in("detokenize --model " + ptn_path() + " --ids '[1, 403, 407, 261, 378]' --skip-special");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "Once upon a time\n");
  r = run_in("detokenize --model " + ptn_path() + " --ids '[1, 99999]'");
  EXPECT_EQ(r.code, 1);
  // a file with the .ptn magic but nothing valid after it is an error, not a crash
  spit(dir_ / "broken.ptn", std::string("PTN\0PROG", 8) + std::string(100, '\x7f'));
  r = run_in("tokenize --model '" + (dir_ / "broken.ptn").string() + "' --text hi");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("broken.ptn"), std::string::npos) << r.err;
}

// --file takes what argv cannot carry: a NUL byte is a byte of the text, from a file or stdin.
TEST_F(TextCli, TokenizeReadsAFileOrStandardInput) {
  const std::string text("Once\0upon", 9);
  spit(dir_ / "nul.txt", text);
  RunResult f = run_in("tokenize --model " + ptn_path() + " --file '" + (dir_ / "nul.txt").string() + "'");
  ASSERT_EQ(f.code, 0) << f.err;
  RunResult in = run_in("tokenize --model " + ptn_path() + " --file -", text);
  ASSERT_EQ(in.code, 0) << in.err;
  EXPECT_EQ(in.out, f.out);
  // The NUL is a token of its own between the two words' tokens.
  RunResult once = run_in("tokenize --model " + ptn_path() + " --text Once");
  EXPECT_EQ(f.out.rfind(once.out.substr(0, once.out.size() - 2), 0), 0u) << f.out;  // "[1, 403" ...
  EXPECT_NE(f.out, once.out);
  EXPECT_GT(std::count(f.out.begin(), f.out.end(), ','), std::count(once.out.begin(), once.out.end(), ',') + 1);
  RunResult none = run_in("tokenize --model " + ptn_path());
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.err.find("--file"), std::string::npos) << none.err;
  RunResult both = run_in("tokenize --model " + ptn_path() + " --text a --file -");
  EXPECT_NE(both.code, 0);
}

TEST_F(TextCli, ChatTemplateAndInspectPtn) {
  spit(dir_ / "m.json", R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}])");
  RunResult r = run_in("chat-template --model '" + (dir_ / "c.ptn").string() + "' --messages '" + (dir_ / "m.json").string() +
                       "' --add-generation-prompt");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "<s>[user] Hi\n[assistant] Hello.\n[assistant]");
  r = run_in("chat-template --model " + ptn_path() + " --messages '" + (dir_ / "m.json").string() + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no chat template"), std::string::npos) << r.err;

  r = run_in("inspect " + ptn_path());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(".ptn version 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vocab 512"), std::string::npos) << r.out;
}

TEST_F(TextCli, Perplexity) {
  spit(dir_ / "story.txt", kStory);
  RunResult r = run_in("perplexity -m " + ptn_path() + " -f '" + (dir_ / "story.txt").string() + "' --ctx 64 -t 1");
  ASSERT_EQ(r.code, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(^\[1\][0-9.]+,\[2\][0-9.]+,)"))) << r.out;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+))"))) << r.out;
  const double ppl = std::stod(m[1]), se = std::stod(m[2]);
  EXPECT_TRUE(std::isfinite(ppl));
  EXPECT_GT(ppl, 1.5);
  EXPECT_LT(ppl, 15.0);
  EXPECT_GT(se, 0.0);
  EXPECT_LT(se, ppl);
  // the last running figure is the final estimate
  std::smatch last;
  ASSERT_TRUE(std::regex_search(r.out, last, std::regex(R"(\[[0-9]+\]([0-9.]+),\n)")));
  EXPECT_EQ(last[1].str(), m[1].str());

  r = run_in("perplexity -m " + ptn_path() + " -f '" + (dir_ / "story.txt").string() + "' --ctx 64 --chunks 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(^\[1\][0-9.]+,\nFinal estimate)"))) << r.out;

  r = run_in("perplexity -m " + ptn_path() + " -f '" + (dir_ / "story.txt").string() + "'");  // 512 needs 1024 tokens
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("needs at least 1024"), std::string::npos) << r.err;
  r = run_in("perplexity -m " + ptn_path() + " -f '" + (dir_ / "missing.txt").string() + "'");
  EXPECT_EQ(r.code, 1);
}

TEST_F(TextCli, ChatThroughAPipe) {
  const std::string conv = (dir_ / "conv.json").string();
  RunResult r = run_in("chat -m " + ptn_path() + " --temp 0 -n 10 -t 1",
                       "Hello\n/undo\nHello\n/save " + conv + "\n/bogus\n/quit\nnever sent\n");
  ASSERT_EQ(r.code, 0) << r.err;
  // two replies, the same (greedy, and /undo rewound the first one away), nothing else on stdout
  std::vector<std::string> lines;
  std::stringstream ss(r.out);
  for (std::string l; std::getline(ss, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_EQ(lines[0], lines[1]);
  EXPECT_FALSE(lines[0].empty());
  EXPECT_EQ(count_of(r.err, "no chat template"), 1u) << r.err;
  EXPECT_NE(r.err.find("dropped 1 exchange"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("unknown command '/bogus'"), std::string::npos) << r.err;
  auto saved = nlohmann::json::parse(slurp(conv));
  ASSERT_EQ(saved.size(), 2u);
  EXPECT_EQ(saved[0]["role"], "user");
  EXPECT_EQ(saved[0]["content"], "Hello");
  EXPECT_EQ(saved[1]["role"], "assistant");

  // /load feeds the saved conversation; the next turn reuses it from the cache. EOF ends cleanly.
  r = run_in("chat -m " + ptn_path() + " --temp 0 -n 10 -t 1", "/load " + conv + "\nTell me more\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("loaded 2 messages"), std::string::npos) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex(R"(\[prompt ([0-9]+) tokens \(([0-9]+) run, ([0-9]+) from the cache\))")))
      << r.err;
  EXPECT_GT(std::stoi(m[3]), 10);
  EXPECT_EQ(count_of(r.out, "\n"), 1u);

  // a bad file is reported and the chat goes on
  spit(dir_ / "bad.json", R"([{"role": "user", "content": 5}])");
  r = run_in("chat -m " + ptn_path() + " --temp 0 -n 5 -t 1", "/load " + (dir_ / "bad.json").string() + "\nHi\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("messages[0].content"), std::string::npos) << r.err;
  EXPECT_EQ(count_of(r.out, "\n"), 1u);
}

TEST_F(TextCli, ChatWithTemplateAndContinuationLines) {
  RunResult r = run_in("chat -m '" + (dir_ / "c.ptn").string() + "' --temp 0 -n 8 -t 1 --system 'Tell stories.'",
                       "Hello \\\nthere\n/save " + (dir_ / "c.json").string() + "\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("no chat template"), std::string::npos) << r.err;
  auto saved = nlohmann::json::parse(slurp(dir_ / "c.json"));
  ASSERT_EQ(saved.size(), 3u);
  EXPECT_EQ(saved[0]["content"], "Tell stories.");
  EXPECT_EQ(saved[1]["content"], "Hello \nthere");
  // a message too long for the context is reported, and the chat ends cleanly at EOF
  r = run_in("chat -m " + ptn_path() + " -n 0 --ctx 16 -t 1", std::string(300, 'x') + "\n");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.err.find("context"), std::string::npos) << r.err;
}

// Invalid UTF-8 typed at the prompt becomes U+FFFD, one per maximal ill-formed subpart, before
// it joins the conversation: the turn runs without an error, /save writes the replaced text,
// typing the replaced text gives the same prompt and reply (the model saw U+FFFD, not the raw
// bytes), and the saved file loads back.
TEST_F(TextCli, ChatInvalidUtf8BecomesReplacementOnEntry) {
  const std::string R = "\xEF\xBF\xBD";  // U+FFFD
  // a surrogate (ED A0 80: 3 subparts), an overlong (C0 AF: 2), a lone continuation byte, a
  // 4-byte sequence cut off by a space (1), FF, and a 3-byte sequence cut off by the line's end (1)
  const std::string typed = std::string("a\xED\xA0\x80") + "b \xC0\xAF \x80 \xF0\x9F\x98 x \xFF \xE2\x82";
  const std::string want = "a" + R + R + R + "b " + R + R + " " + R + " " + R + " x " + R + " " + R;
  const std::string conv = (dir_ / "u.json").string();
  const std::string chat = "chat -m " + ptn_path() + " --temp 0 -n 6 -t 1";
  RunResult r = run_in(chat, typed + "\n//\xFF\n/save " + conv + "\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("saved 4 messages"), std::string::npos) << r.err;
  EXPECT_EQ(count_of(r.err, "ptn chat: "), 2u) << r.err;  // the no-template notice and the save: no error
  auto saved = nlohmann::json::parse(slurp(conv));
  ASSERT_EQ(saved.size(), 4u);
  EXPECT_EQ(saved[0]["content"], want);
  EXPECT_EQ(saved[2]["content"], "/" + R);  // "//" sends the text after the first '/'

  std::smatch m;
  const std::regex prompt(R"(\[prompt ([0-9]+) tokens)");
  ASSERT_TRUE(std::regex_search(r.err, m, prompt)) << r.err;
  const std::string first_prompt = m[1];
  RunResult same = run_in(chat, want + "\n");
  ASSERT_EQ(same.code, 0) << same.err;
  ASSERT_TRUE(std::regex_search(same.err, m, prompt)) << same.err;
  EXPECT_EQ(m[1], first_prompt);
  EXPECT_EQ(same.out, r.out.substr(0, r.out.find('\n') + 1));  // the same first reply

  r = run_in(chat, "/load " + conv + "\nmore\n");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("loaded 4 messages"), std::string::npos) << r.err;
  EXPECT_EQ(count_of(r.out, "\n"), 1u);
}

}  // namespace

// --save writes the conversation with its KV blocks; --load restores them (the saved prompt is
// not run again) and the next reply equals the one a single session gives for both turns.
TEST_F(TextCli, ChatSaveAndLoadKvBlocks) {
  const std::string kv = (dir_ / "conv.kv").string();
  const std::string flags = " --temp 0 -n 12 -t 1 --ctx 256";
  RunResult both = run_in("chat -m " + ptn_path() + flags, std::string(kStory).substr(0, 300) + "\nTell me more\n");
  ASSERT_EQ(both.code, 0) << both.err;
  RunResult first = run_in("chat -m " + ptn_path() + flags + " --save '" + kv + "'", std::string(kStory).substr(0, 300) + "\n");
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.err.find("saved 2 messages"), std::string::npos) << first.err;
  RunResult second = run_in("chat -m " + ptn_path() + flags + " --load '" + kv + "'", "Tell me more\n");
  ASSERT_EQ(second.code, 0) << second.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(second.err, m, std::regex(R"(loaded 2 messages from .* \(([0-9]+) tokens, ([0-9]+) from its KV blocks\))")))
      << second.err;
  EXPECT_GE(std::stoi(m[2]), 48) << "the saved blocks were attached, not recomputed";
  ASSERT_TRUE(std::regex_search(second.err, m, std::regex(R"(\[prompt ([0-9]+) tokens \(([0-9]+) run, ([0-9]+) from the cache\))")))
      << second.err;
  EXPECT_GT(std::stoi(m[3]), 48);
  // The second reply of the one-session run equals the reply after --load.
  std::vector<std::string> lines;
  std::stringstream ss(both.out);
  for (std::string l; std::getline(ss, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 2u) << both.out;
  EXPECT_EQ(second.out, lines[1] + "\n");

  // Refused by name: another program (the same weights with a chat template), another cache
  // dtype, a damaged file.
  RunResult r = run_in("chat -m '" + (dir_ / "c.ptn").string() + "'" + flags + " --load '" + kv + "'", "Hi\n");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("program"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("in the record"), std::string::npos) << r.err;
  r = run_in("chat -m " + ptn_path() + flags + " --cache-type f32 --load '" + kv + "'", "Hi\n");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("cache dtype f16 in the record, f32 in this cache"), std::string::npos) << r.err;
  std::string bytes = slurp(kv);
  bytes[bytes.size() / 2] ^= 1;
  spit(dir_ / "bad.kv", bytes);
  r = run_in("chat -m " + ptn_path() + flags + " --load '" + (dir_ / "bad.kv").string() + "'", "Hi\n");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("checksum mismatch"), std::string::npos) << r.err;
}
