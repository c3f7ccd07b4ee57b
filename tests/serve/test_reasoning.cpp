// Reasoning sections: the split of finished and streamed replies, and the server end to end on
// stories260K with Qwen 3's template (a grammar makes the tiny model write a think section):
// reasoning_content and content come back apart, streamed or not, and chat_template_kwargs
// reaches the template (enable_thinking false closes the section in the prompt).
#include <gtest/gtest.h>

#include <vector>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "core/file.h"
#include "serve/api.h"
#include "serve/reasoning.h"
#include "serve/server.h"
#include "running_server.h"
#include "serve_test_util.h"

using json = nlohmann::json;
using namespace ptn;
using namespace ptn::serve;

namespace {

const ReasoningMode kOn{true, false};
const ReasoningMode kInside{true, true};

TEST(Reasoning, ModeFromTemplateAndPrompt) {
  EXPECT_FALSE(reasoning_mode("{{ messages }}", "x").enabled);
  EXPECT_FALSE(reasoning_mode("<think> only", "x").enabled);
  const ReasoningMode m = reasoning_mode("{# <think> </think> #}", "user: hi\nassistant: <think>\n");
  EXPECT_TRUE(m.enabled);
  EXPECT_TRUE(m.starts_inside);
  EXPECT_FALSE(reasoning_mode("<think></think>", "assistant: <think>\n\n</think>\n\n").starts_inside);
}

TEST(Reasoning, FinishedRepliesSplit) {
  ReasoningSplit s = split_reasoning(kOn, "<think>\nLet me see.\n</think>\n\nParis.");
  EXPECT_EQ(s.reasoning, "Let me see.");
  EXPECT_EQ(s.content, "Paris.");
  s = split_reasoning(kOn, "No thinking here.");
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, "No thinking here.");
  s = split_reasoning(kOn, "<think>cut off by max_tokens");
  EXPECT_EQ(s.reasoning, "cut off by max_tokens");
  EXPECT_EQ(s.content, "");
  s = split_reasoning(kInside, "thought</think>answer");
  EXPECT_EQ(s.reasoning, "thought");
  EXPECT_EQ(s.content, "answer");
  s = split_reasoning(ReasoningMode{}, "<think>a</think>b");  // off: all content
  EXPECT_EQ(s.content, "<think>a</think>b");
  s = split_reasoning(kOn, "Text with <think> later</think> stays content");
  EXPECT_EQ(s.content, "Text with <think> later</think> stays content");
}

// Every prefix of a reply splits into parts that the next prefix only extends, and the last
// equals the finished split: streaming sends each byte once, in the right part.
TEST(Reasoning, StreamedPartsOnlyGrow) {
  for (const ReasoningMode& m : {kOn, kInside}) {
    const std::string reply = m.starts_inside ? "Hmm, </thi>? No.\n</think>\n\nThe answer <think> is 4."
                                              : "  <think>\nHmm, </thi>? No.\n</think>\n\nThe answer <think> is 4.";
    ReasoningSplit prev;
    for (size_t n = 0; n <= reply.size(); ++n) {
      const ReasoningSplit s = split_reasoning_so_far(m, reply.substr(0, n));
      EXPECT_EQ(s.reasoning.compare(0, prev.reasoning.size(), prev.reasoning), 0) << n;
      EXPECT_EQ(s.content.compare(0, prev.content.size(), prev.content), 0) << n;
      EXPECT_GE(s.reasoning.size(), prev.reasoning.size());
      prev = s;
    }
    const ReasoningSplit end = split_reasoning(m, reply, /*trim=*/false);
    EXPECT_EQ(end.reasoning.compare(0, prev.reasoning.size(), prev.reasoning), 0);
    EXPECT_EQ(end.reasoning, "Hmm, </thi>? No.\n");
    EXPECT_EQ(end.content, "The answer <think> is 4.");
    EXPECT_EQ(prev.content, end.content);
  }
}

// The streaming splitter gives, after every growth of the reply and for every way of cutting
// it into pieces, exactly the parts split_reasoning_so_far gives for the text so far.
TEST(Reasoning, StreamSplitterEqualsTheWholeTextSplit) {
  const std::vector<std::string> replies = {
      "  <think>\nHmm, </thi>? No.\n</think>\n\nThe answer <think> is 4.",
      "Hmm, </thi>? No.\n</think>\n\nThe answer is 4.",
      "<thinx>not reasoning</think> at all",
      "   \n  ",
      "<think></think>",
      "<think>   </think>   x",
      "<think>only thinking, cut off </thin",
      "plain text with no tags",
      "<",
  };
  for (const ReasoningMode& m : {kOn, kInside, ReasoningMode{}}) {
    for (const std::string& reply : replies) {
      for (size_t step : {1u, 2u, 3u, 7u, 100u}) {
        ReasoningStream st(m);
        std::string text;
        for (size_t at = 0; at < reply.size(); at += step) {
          text += reply.substr(at, step);
          st.update(text);
          const ReasoningSplit want = split_reasoning_so_far(m, text);
          const auto r = st.reasoning(), c = st.content();
          EXPECT_EQ(text.substr(r.begin, r.size()), want.reasoning) << reply << " step " << step << " at " << at;
          EXPECT_EQ(text.substr(c.begin, c.size()), want.content) << reply << " step " << step << " at " << at;
        }
      }
    }
  }
}

// stories260K (context 2048) served with Qwen 3's chat template.
const std::string& qwen_program() {
  static const std::string program =
      ptn::testing::export_stories(ptn::testing::temp_dir("ptn_reasoning_test_"), "stories", 2048);
  return program;
}

ServerOptions qwen_options() {
  ServerOptions o;
  o.model_name = "stories";
  o.chat_template = ptn::testing::qwen3_template();
  return o;
}

struct QwenServer : ptn::testing::RunningServer {
  QwenServer() : RunningServer(qwen_program(), qwen_options()) {}
  httplib::Result post(const json& body) const { return RunningServer::post("/v1/chat/completions", body); }
};

json forced(const std::string& gbnf) {
  return {{"messages", json::array({{{"role", "user"}, {"content", "2 + 2?"}}})},
          {"grammar", gbnf},
          {"max_tokens", 100},
          {"temperature", 0}};
}

TEST(ReasoningServe, ThinkSectionComesBackAsReasoningContent) {
  QwenServer s;
  const std::string gbnf = R"(root ::= "<think>\nTwo and two.\n</think>\n\nFour.")";
  auto res = s.post(forced(gbnf));
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json msg = json::parse(res->body)["choices"][0]["message"];
  EXPECT_EQ(msg["reasoning_content"], "Two and two.");
  EXPECT_EQ(msg["content"], "Four.");

  json body = forced(gbnf);
  body["stream"] = true;
  res = s.post(body);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  std::istringstream in(res->body);
  std::string line, reasoning, content;
  int reasoning_chunks = 0;
  while (std::getline(in, line)) {
    if (line.rfind("data: {", 0) != 0) continue;
    const json d = json::parse(line.substr(6))["choices"][0]["delta"];
    if (d.contains("reasoning_content")) {
      reasoning += d["reasoning_content"].get<std::string>();
      ++reasoning_chunks;
      EXPECT_TRUE(content.empty()) << "content before the reasoning ended";
    }
    if (d.contains("content")) content += d["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "Two and two.\n");  // a stream cannot take back the newline before </think>
  EXPECT_EQ(content, "Four.");
  EXPECT_GT(reasoning_chunks, 1) << "the reasoning was not streamed";

  // enable_thinking false: the template closes an empty section in the prompt, so the reply is content.
  json off = forced(R"(root ::= "Four.")");
  json on_usage = json::parse(s.post(off)->body)["usage"];
  off["chat_template_kwargs"] = {{"enable_thinking", false}};
  res = s.post(off);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json r = json::parse(res->body);
  EXPECT_EQ(r["choices"][0]["message"]["content"], "Four.");
  EXPECT_FALSE(r["choices"][0]["message"].contains("reasoning_content"));
  EXPECT_GT(r["usage"]["prompt_tokens"].get<int>(), on_usage["prompt_tokens"].get<int>());

  // Template variables the server sets, and reasoning_effort for a template without it: 400.
  off["chat_template_kwargs"] = {{"messages", json::array()}};
  res = s.post(off);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("chat_template_kwargs.messages"), std::string::npos) << res->body;
  // A variable the template never reads would change nothing: refused by name, not ignored.
  off["chat_template_kwargs"] = {{"enable_thinkin", false}};
  res = s.post(off);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("chat_template_kwargs.enable_thinkin"), std::string::npos) << res->body;
  off.erase("chat_template_kwargs");
  off["reasoning_effort"] = "low";
  res = s.post(off);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("reasoning_effort"), std::string::npos) << res->body;
}

}  // namespace
