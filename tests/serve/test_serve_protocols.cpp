// The other APIs end to end, in process on a free port, against stories260K with a ChatML
// template: Anthropic's /v1/messages (+ count_tokens) and the Ollama API give, greedy, exactly the
// text of the OpenAI endpoints they translate onto (one chat path), streamed or not, in their own
// shapes and error shapes; the Ollama listings and /v1/models/{id}.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "serve/server.h"
#include "running_server.h"
#include "serve_test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace ptn;
using ptn::testing::copy_stories_hf;
using ptn::testing::export_hf;
using ptn::testing::temp_dir;

namespace {

const char* kChatMl =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
const char* const kScratch = "ptn_serve_protocols_test_";

class ProtocolServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path dir = temp_dir(kScratch);
    copy_stories_hf(dir / "chat_hf", "tokenizer_config.json", [](json& cfg) { cfg["chat_template"] = kChatMl; });
    const std::string path = export_hf(dir / "chat_hf", dir, "stories_chat");
    serve::ServerOptions o;
    o.model_name = "chat";
    o.engine.capacity_tokens = 4096;
    running_ = new ptn::testing::RunningServer(path, o);
    port_ = running_->port;
  }
  static void TearDownTestSuite() {
    delete running_;
    running_ = nullptr;
    std::error_code ec;
    fs::remove_all(temp_dir(kScratch), ec);
  }
  static httplib::Result post(const std::string& path, const json& body) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c.Post(path, body.dump(), "application/json");
  }
  static json post_ok(const std::string& path, const json& body) {
    auto res = post(path, body);
    EXPECT_TRUE(res);
    if (!res) return json();
    EXPECT_EQ(res->status, 200) << res->body;
    return json::parse(res->body);
  }
  static json get(const std::string& path, int want_status = 200) {
    httplib::Client c("127.0.0.1", port_);
    auto res = c.Get(path);
    EXPECT_TRUE(res);
    if (!res) return json();
    EXPECT_EQ(res->status, want_status) << res->body;
    return json::parse(res->body);
  }
  // The greedy chat.completion content for one user message.
  static std::string chat_text(const std::string& user, int max_tokens) {
    json r = post_ok("/v1/chat/completions", {{"model", "chat"},
                                              {"messages", {{{"role", "user"}, {"content", user}}}},
                                              {"max_tokens", max_tokens},
                                              {"temperature", 0}});
    return r.is_null() ? "" : r["choices"][0]["message"]["content"].get<std::string>();
  }
  static ptn::testing::RunningServer* running_;
  static int port_;
};
ptn::testing::RunningServer* ProtocolServeTest::running_ = nullptr;
int ProtocolServeTest::port_ = 0;

const json kUser = json::array({{{"role", "user"}, {"content", "Tell me a story"}}});

TEST_F(ProtocolServeTest, MessagesGiveTheChatPathsText) {
  const std::string want = chat_text("Tell me a story", 20);
  ASSERT_FALSE(want.empty());
  json m = post_ok("/v1/messages", {{"model", "chat"}, {"max_tokens", 20}, {"temperature", 0}, {"messages", kUser}});
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  ASSERT_EQ(m["content"].size(), 1u) << m.dump();
  EXPECT_EQ(m["content"][0]["type"], "text");
  EXPECT_EQ(m["content"][0]["text"], want);
  EXPECT_EQ(m["stop_reason"], "max_tokens");
  EXPECT_EQ(m["usage"]["output_tokens"], 20);
  json c = post_ok("/v1/messages/count_tokens", {{"model", "chat"}, {"messages", kUser}});
  EXPECT_EQ(c, json({{"input_tokens", m["usage"]["input_tokens"]}}));

  // Streamed: the text deltas add up to the same text, in Anthropic's event order.
  auto res = post("/v1/messages", {{"model", "chat"}, {"max_tokens", 20}, {"temperature", 0}, {"stream", true}, {"messages", kUser}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_NE(res->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  std::istringstream in(res->body);
  std::string line, text;
  std::vector<std::string> names;
  json last_delta, start;
  while (std::getline(in, line)) {
    if (line.rfind("event: ", 0) == 0) names.push_back(line.substr(7));
    if (line.rfind("data: ", 0) != 0) continue;
    const json d = json::parse(line.substr(6));
    EXPECT_EQ(d["type"], names.back());
    if (d["type"] == "message_start") start = d;
    if (d["type"] == "content_block_delta") text += d["delta"]["text"].get<std::string>();
    if (d["type"] == "message_delta") last_delta = d;
  }
  EXPECT_EQ(text, want);
  ASSERT_GE(names.size(), 5u);
  EXPECT_EQ(names.front(), "message_start");
  EXPECT_EQ(names.back(), "message_stop");
  EXPECT_EQ(last_delta["delta"]["stop_reason"], "max_tokens");
  EXPECT_EQ(last_delta["usage"]["output_tokens"], 20);
  EXPECT_EQ(last_delta["usage"]["input_tokens"], m["usage"]["input_tokens"]);
  // The prompt's count is known before the first event: message_start carries it already.
  EXPECT_EQ(start["message"]["usage"]["input_tokens"], m["usage"]["input_tokens"]);
}

TEST_F(ProtocolServeTest, MessagesErrorsHaveAnthropicsShape) {
  auto expect_error = [](const std::string& path, const json& body, int status, const char* type, const char* needle) {
    auto res = post(path, body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status) << res->body;
    const json e = json::parse(res->body);
    EXPECT_EQ(e["type"], "error");
    EXPECT_EQ(e["error"]["type"], type) << res->body;
    EXPECT_NE(e["error"]["message"].get<std::string>().find(needle), std::string::npos) << res->body;
  };
  expect_error("/v1/messages", {{"model", "chat"}, {"messages", kUser}}, 400, "invalid_request_error", "max_tokens");
  expect_error("/v1/messages", {{"model", "other"}, {"max_tokens", 3}, {"messages", kUser}}, 404, "not_found_error", "other");
  expect_error("/v1/messages/count_tokens", {{"model", "chat"}, {"messages", json::array()}}, 400,
               "invalid_request_error", "messages");
  expect_error("/v1/messages/count_tokens", {{"model", "other"}, {"messages", kUser}}, 404, "not_found_error", "other");
  // A prompt longer than the context is named by the chat path.
  expect_error("/v1/messages",
               {{"model", "chat"}, {"max_tokens", 3}, {"messages", {{{"role", "user"}, {"content", std::string(6000, 'a')}}}}},
               400, "invalid_request_error", "context");
}

TEST_F(ProtocolServeTest, OllamaChatAndGenerateGiveTheSameText) {
  const std::string want = chat_text("Tell me a story", 12);
  json r = post_ok("/api/chat", {{"model", "chat"}, {"messages", kUser}, {"stream", false},
                                 {"options", {{"temperature", 0}, {"num_predict", 12}}}});
  EXPECT_EQ(r["message"]["content"], want);
  EXPECT_EQ(r["done"], true);
  EXPECT_EQ(r["done_reason"], "length");
  EXPECT_EQ(r["eval_count"], 12);
  EXPECT_GT(r["prompt_eval_duration"].get<int64_t>(), 0);
  EXPECT_GT(r["eval_duration"].get<int64_t>(), 0);
  EXPECT_GE(r["total_duration"].get<int64_t>(), r["prompt_eval_duration"].get<int64_t>() + r["eval_duration"].get<int64_t>());

  // Streams by default: NDJSON lines that add up to the same text, the last one done.
  auto res = post("/api/chat", {{"model", "chat"}, {"messages", kUser}, {"options", {{"temperature", 0}, {"num_predict", 12}}}});
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_NE(res->get_header_value("Content-Type").find("application/x-ndjson"), std::string::npos);
  std::istringstream in(res->body);
  std::string line, text;
  json last;
  while (std::getline(in, line)) {
    last = json::parse(line);
    if (!last["done"].get<bool>()) text += last["message"]["content"].get<std::string>();
  }
  EXPECT_EQ(text, want);
  EXPECT_EQ(last["done"], true);
  EXPECT_EQ(last["eval_count"], 12);

  // raw generate is /v1/completions.
  json c = post_ok("/v1/completions", {{"model", "chat"}, {"prompt", "Once upon a time"}, {"max_tokens", 10}, {"temperature", 0}});
  json g = post_ok("/api/generate", {{"model", "chat"}, {"prompt", "Once upon a time"}, {"raw", true}, {"stream", false},
                                     {"options", {{"temperature", 0}, {"num_predict", 10}}}});
  EXPECT_EQ(g["response"], c["choices"][0]["text"]);
  EXPECT_EQ(g["prompt_eval_count"], c["usage"]["prompt_tokens"]);
}

TEST_F(ProtocolServeTest, OllamaErrorsAndListings) {
  auto res = post("/api/chat", {{"model", "chat"}, {"messages", kUser}, {"options", {{"mirostat", 1}}}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(json::parse(res->body)["error"].get<std::string>().find("options.mirostat"), std::string::npos) << res->body;
  res = post("/api/generate", {{"model", "other"}, {"prompt", "x"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_TRUE(json::parse(res->body)["error"].is_string());
  res = post("/api/nothing-here", json::object());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_TRUE(json::parse(res->body)["error"].is_string()) << res->body;

  const json tags = get("/api/tags");
  ASSERT_EQ(tags["models"].size(), 1u);
  EXPECT_EQ(tags["models"][0]["name"], "chat");
  EXPECT_GT(tags["models"][0]["size"].get<uint64_t>(), 0u) << "the .ptn file's size";
  EXPECT_EQ(get("/api/ps")["models"][0]["name"], "chat");
  EXPECT_TRUE(get("/api/version")["version"].is_string());
  const json show = post_ok("/api/show", {{"model", "chat"}});
  EXPECT_EQ(show["template"], kChatMl);
  EXPECT_EQ(show["details"]["family"], "llama");
  res = post("/api/show", {{"model", "other"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
}

TEST_F(ProtocolServeTest, ModelById) {
  const json m = get("/v1/models/chat");
  EXPECT_EQ(m["id"], "chat");
  EXPECT_EQ(m["object"], "model");
  EXPECT_EQ(m, get("/v1/models")["data"][0]);
  const json e = get("/v1/models/other", 404);
  EXPECT_EQ(e["error"]["code"], "model_not_found");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
}

}  // namespace
