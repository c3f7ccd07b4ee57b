// ChatSession on stories260K (exported with the ptn binary; skipped when it is not built):
// the fallback format, prefix reuse and rewinding checked against fresh sessions that feed the
// whole conversation, /undo, /load validation, and the context limit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "generate/chat_session.h"
#include "runtime/program.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using namespace ptn;
using ojson = nlohmann::ordered_json;

namespace {

class ChatSessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(PTN_BINARY)) return;
    dir_ = fs::temp_directory_path() / ("ptn_chat_session_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    const std::string out = (dir_ / "s.ptn").string();
    const std::string cmd = std::string("'") + PTN_BINARY + "' export --model '" + PTN_SOURCE_DIR +
                            "/models/stories260K/hf' --max-seq-length 64 --samples 1 --output '" + out + "' > /dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) return;
    program_ = Program::load(out);
    tok_ = Tokenizer::create(*program_->meta().tokenizer).release();
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
    program_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    // The ptn binary is built before the tests: a missing program is a failure, never a skip.
    ASSERT_TRUE(program_) << "exporting stories260K with " << PTN_BINARY << " failed";
  }
  static std::unique_ptr<Session> session(int64_t ctx = 0) {
    SessionOptions so;
    so.context = ctx;
    return std::make_unique<Session>(program_, so);
  }
  static SamplingParams greedy() {
    SamplingParams sp;
    sp.temperature = 0;
    return sp;
  }
  static ChatConfig config(const std::string& tmpl = "", int64_t max_reply = 12) {
    ChatConfig c;
    c.chat_template = tmpl;
    c.bos_token = "<s>";
    c.eos_token = "</s>";
    c.max_reply_tokens = max_reply;
    return c;
  }
  static inline fs::path dir_;
  static inline std::shared_ptr<const Program> program_;
  static inline Tokenizer* tok_ = nullptr;
};

TEST_F(ChatSessionTest, FallbackFormat) {
  auto s = session();
  ChatConfig c = config();
  c.system = "Be kind.";
  ChatSession chat(*s, *tok_, c, greedy());
  EXPECT_TRUE(chat.uses_fallback());
  ojson m = ojson::array({{{"role", "system"}, {"content", "Be kind."}},
                          {{"role", "user"}, {"content", " Hi there "}},
                          {{"role", "assistant"}, {"content", "Hello."}}});
  EXPECT_EQ(chat.render(m, false), "System: Be kind.\nUser: Hi there\nAssistant: Hello.\n");
  EXPECT_EQ(chat.render(m, true), "System: Be kind.\nUser: Hi there\nAssistant: Hello.\nAssistant:");
  // BOS added once (the model adds BOS, the fallback does not write it)
  auto ids = chat.tokenize("User: a\nAssistant:");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], *tok_->bos());
  EXPECT_NE(ids[1], *tok_->bos());
  EXPECT_EQ(chat.messages().size(), 1u);  // the system message
}

// The second turn reuses the cached prefix; its reply equals the reply of a fresh session that
// loads the first exchange (feeding it whole) and then sends the same message.
TEST_F(ChatSessionTest, PrefixReuseMatchesFreshFeed) {
  auto s = session();
  ChatSession chat(*s, *tok_, config(), greedy());
  std::string streamed;
  ChatReply r1 = chat.send("Hello", [&](const std::string& p) { streamed += p; });
  EXPECT_EQ(streamed, r1.text);
  ASSERT_FALSE(r1.text.empty());
  EXPECT_NE(r1.text[0], ' ');  // the space after "Assistant:" is not part of the reply
  EXPECT_EQ(r1.fed_tokens, r1.prompt_tokens);
  EXPECT_GT(r1.reply_tokens, 0);
  ChatReply r2 = chat.send("Tell me a story");
  EXPECT_LT(r2.fed_tokens, r2.prompt_tokens);  // the first turn came from the cache
  // the cache holds the prompt and every reply token but the last one (never run: the reply
  // ended at the limit of 12)
  ASSERT_EQ(r2.stop, "max_tokens");
  EXPECT_EQ(r2.reply_tokens, 12);
  EXPECT_EQ(s->position(), static_cast<int64_t>(chat.cached_tokens().size()));
  EXPECT_EQ(s->position(), r2.prompt_tokens + r2.reply_tokens - 1);
  const auto prompt2 = chat.tokenize(chat.render(ojson::array({chat.messages()[0], chat.messages()[1], chat.messages()[2]}), true));
  ASSERT_EQ(static_cast<int64_t>(prompt2.size()), r2.prompt_tokens);
  EXPECT_TRUE(std::equal(prompt2.begin(), prompt2.end(), chat.cached_tokens().begin()));
  EXPECT_GT(r2.prompt_tokens - r2.fed_tokens, r1.prompt_tokens);
  ASSERT_EQ(chat.messages().size(), 4u);
  EXPECT_EQ(chat.messages()[3]["role"], "assistant");

  auto s2 = session();
  ChatSession fresh(*s2, *tok_, config(), greedy());
  ojson first = ojson::array({chat.messages()[0], chat.messages()[1]});
  fresh.load(first, "test");
  EXPECT_EQ(fresh.cached_tokens(), fresh.tokenize(fresh.render(first, false)));
  ChatReply f2 = fresh.send("Tell me a story");
  EXPECT_EQ(f2.text, r2.text);
  EXPECT_EQ(f2.reply_tokens, r2.reply_tokens);
}

// A template whose first line changes every turn forces a rewind to the start; replies still
// equal those of a session that runs the whole render from an empty cache.
TEST_F(ChatSessionTest, RenderThatChangesEarlierTokensRewinds) {
  const std::string tmpl =
      "{{ bos_token }}{{ messages | length }} turns\n{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
      "{% if add_generation_prompt %}assistant:{% endif %}";
  auto s = session();
  ChatSession chat(*s, *tok_, config(tmpl), greedy());
  EXPECT_FALSE(chat.uses_fallback());
  chat.send("Hello");
  ChatReply r2 = chat.send("Where is the cat?");
  // only BOS (and maybe nothing else) is shared with the cache
  EXPECT_GE(r2.fed_tokens, r2.prompt_tokens - 2);
  EXPECT_EQ(s->position(), static_cast<int64_t>(chat.cached_tokens().size()));
  auto ids = chat.tokenize(chat.render(ojson::array({{{"role", "user"}, {"content", "x"}}}), true));
  EXPECT_EQ(ids[0], *tok_->bos());
  EXPECT_NE(ids[1], *tok_->bos());  // the template's <s> is the BOS; no second one

  auto s2 = session();
  ChatSession fresh(*s2, *tok_, config(tmpl), greedy());
  fresh.load(ojson::array({chat.messages()[0], chat.messages()[1]}), "test");
  EXPECT_EQ(fresh.send("Where is the cat?").text, r2.text);
}

TEST_F(ChatSessionTest, UndoRewindsAndReplays) {
  auto s = session();
  ChatSession chat(*s, *tok_, config(), greedy());
  const std::string a = chat.send("Hello").text;
  const ojson after_one = chat.messages();
  const std::string b = chat.send("Tell me a story").text;
  chat.send("What next?");
  EXPECT_EQ(chat.undo(2), 2);
  EXPECT_EQ(chat.messages(), after_one);
  // the cache holds a prefix of the shorter conversation, and the session agrees
  const auto full = chat.tokenize(chat.render(chat.messages(), false));
  const auto& cached = chat.cached_tokens();
  ASSERT_LE(cached.size(), full.size());
  EXPECT_TRUE(std::equal(cached.begin(), cached.end(), full.begin()));
  EXPECT_GT(cached.size(), 1u);
  EXPECT_EQ(s->position(), static_cast<int64_t>(cached.size()));
  EXPECT_EQ(chat.send("Tell me a story").text, b);  // greedy: the same reply again
  EXPECT_EQ(chat.undo(10), 2);  // only two exchanges left
  EXPECT_TRUE(chat.messages().empty());
  EXPECT_EQ(s->position(), 0);
  EXPECT_EQ(chat.undo(1), 0);
  EXPECT_THROW(chat.undo(0), Error);
  EXPECT_EQ(chat.send("Hello").text, a);
}

TEST_F(ChatSessionTest, ResetKeepsSystem) {
  auto s = session();
  ChatConfig c = config();
  c.system = "You tell stories.";
  ChatSession chat(*s, *tok_, c, greedy());
  chat.send("Hi");
  EXPECT_EQ(chat.messages().size(), 3u);
  chat.reset();
  ASSERT_EQ(chat.messages().size(), 1u);
  EXPECT_EQ(chat.messages()[0]["content"], "You tell stories.");
  EXPECT_EQ(s->position(), 0);
  EXPECT_TRUE(chat.cached_tokens().empty());
}

TEST_F(ChatSessionTest, LoadValidates) {
  auto s = session();
  ChatSession chat(*s, *tok_, config(), greedy());
  chat.send("Hello");
  const ojson before = chat.messages();
  const ojson bad[] = {
      ojson::parse(R"({"nomessages": 1})"),
      ojson::parse(R"([{"role": "user"}])"),
      ojson::parse(R"([{"role": "user", "content": 3}])"),
      ojson::parse(R"([{"role": "wizard", "content": "x"}])"),
      ojson::parse(R"([[1, 2]])"),
      ojson::parse(R"(42)"),
  };
  for (const auto& j : bad) {
    EXPECT_THROW(chat.load(j, "conv.json"), Error) << j.dump();
    EXPECT_EQ(chat.messages(), before);
  }
  try {
    chat.load(ojson::parse(R"([{"role": "user", "content": "a"}, {"role": "user", "content": 3}])"), "conv.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("conv.json: messages[1].content"), std::string::npos) << e.what();
  }
  chat.load(ojson::parse(R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]})"),
            "conv.json");
  EXPECT_EQ(chat.messages().size(), 2u);
  EXPECT_EQ(chat.cached_tokens(), chat.tokenize("User: Hi\nAssistant: Hello.\n"));
  EXPECT_EQ(s->position(), static_cast<int64_t>(chat.cached_tokens().size()));
}

// A reply that ends at an end-of-generation token the model writes by itself: stories260K
// never writes its </s>, so a token of its greedy reply joins the tokenizer's end set (as a
// config.json eos_token_id list does). The reply stops right there with stop "eog", the token
// counted but its text not in the reply or the recorded message, and the next turn goes on
// from the cache as a fresh session fed the same conversation does.
TEST_F(ChatSessionTest, ReplyEndsAtAnEndOfGenerationToken) {
  auto s = session();
  ChatSession free_chat(*s, *tok_, config("", 40), greedy());
  const ChatReply full = free_chat.send("Tell me a story");
  ASSERT_EQ(full.stop, "max_tokens") << full.text;
  ASSERT_EQ(full.tokens.size(), 40u);
  // the first token past the 8th that did not occur before it and has text
  size_t at = 8;
  while (at < full.tokens.size() &&
         (std::find(full.tokens.begin(), full.tokens.begin() + static_cast<std::ptrdiff_t>(at), full.tokens[at]) !=
              full.tokens.begin() + static_cast<std::ptrdiff_t>(at) ||
          tok_->token_piece(full.tokens[at]).empty()))
    ++at;
  ASSERT_LT(at, full.tokens.size());
  const int32_t end_id = full.tokens[at];
  TokenizerSpec spec = *program_->meta().tokenizer;
  spec.extra_eos_ids.push_back(end_id);
  auto tok = Tokenizer::create(spec);
  ASSERT_TRUE(tok->is_eog(end_id));

  auto s2 = session();
  ChatSession chat(*s2, *tok, config("", 200), greedy());
  const ChatReply r = chat.send("Tell me a story");
  EXPECT_EQ(r.stop, "eog");
  EXPECT_EQ(r.reply_tokens, static_cast<int64_t>(at) + 1);
  ASSERT_FALSE(r.tokens.empty());
  EXPECT_EQ(r.tokens.back(), end_id);
  EXPECT_TRUE(std::equal(r.tokens.begin(), r.tokens.end(), full.tokens.begin()));
  // the text stops before the end token's piece (the 40-token reply goes on with it)
  ASSERT_LT(r.text.size(), full.text.size());
  EXPECT_EQ(full.text.compare(0, r.text.size(), r.text), 0) << "'" << r.text << "' vs '" << full.text << "'";
  const std::string piece = tok->token_piece(end_id);
  EXPECT_EQ(full.text.compare(r.text.size(), piece.size(), piece), 0)
      << "after '" << r.text << "' the full reply has '" << full.text.substr(r.text.size()) << "', not the end token '" << piece << "'";
  ASSERT_EQ(chat.messages().size(), 2u);
  EXPECT_EQ(chat.messages()[1]["content"], r.text);

  const ChatReply next = chat.send("And then?");
  EXPECT_LT(next.fed_tokens, next.prompt_tokens);  // the first exchange came from the cache
  auto s3 = session();
  ChatSession fresh(*s3, *tok, config("", 200), greedy());
  fresh.load(ojson::array({chat.messages()[0], chat.messages()[1]}), "test");
  const ChatReply again = fresh.send("And then?");
  EXPECT_EQ(again.text, next.text);
  EXPECT_EQ(again.stop, next.stop);
}

TEST_F(ChatSessionTest, ContextLimit) {
  auto s = session(32);
  ChatSession chat(*s, *tok_, config("", 0), greedy());
  const std::string long_text(200, 'a');
  EXPECT_THROW(chat.send(long_text), Error);
  EXPECT_TRUE(chat.messages().empty());
  // still usable; an unlimited reply stops at the end of the context (or earlier at EOG/BOS)
  ChatReply r = chat.send("Hi");
  EXPECT_LE(r.prompt_tokens + r.reply_tokens, 32 + 1);
  EXPECT_TRUE(r.stop == "context" || r.stop == "eog" || r.stop == "bos" || r.stop == "stop_string") << r.stop;
  EXPECT_LE(s->position(), 32);
  EXPECT_EQ(chat.messages().size(), 2u);
}

}  // namespace
