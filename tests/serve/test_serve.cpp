// The server end to end, in process on a free port, against stories260K exported from the
// bundled Hugging Face files: greedy output against the known continuation, streaming,
// concurrent batching against sequential runs, prefix reuse, request validation, limits,
// authentication and cancellation on disconnect.
#include <gtest/gtest.h>

#include <set>
#include <httplib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "serve/server.h"
#include "running_server.h"
#include "serve_test_util.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace ptn;
using ptn::testing::copy_stories_hf;
using ptn::testing::export_hf;
using ptn::testing::stories_hf_dir;
using ptn::testing::temp_dir;

namespace {

const char* kChatMl =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// This process's scratch directory (see temp_dir), removed after the suite.
const char* const kScratch = "ptn_serve_test_";

// stories260K plus a ChatML template in its tokenizer_config.json.
std::string export_chat_model() {
  const fs::path dir = temp_dir(kScratch);
  copy_stories_hf(dir / "chat_hf", "tokenizer_config.json", [](json& cfg) { cfg["chat_template"] = kChatMl; });
  return export_hf(dir / "chat_hf", dir, "stories_chat");
}

json expected() {
  return json::parse(std::ifstream(fs::path(PTN_SOURCE_DIR) / "models/stories260K/expected.json"));
}

// One compute thread: the model is tiny, and the test machine is shared.
using Running = ptn::testing::RunningServer;

class ServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    plain_path_ = new std::string(export_hf(stories_hf_dir(), temp_dir(kScratch), "stories"));
    chat_path_ = new std::string(export_chat_model());
    serve::ServerOptions o;
    o.model_name = "stories";
    o.engine.capacity_tokens = 4096;
    srv_ = new Running(*plain_path_, o);
    o.model_name = "chat";
    chat_ = new Running(*chat_path_, o);
  }
  static void TearDownTestSuite() {
    delete srv_;
    delete chat_;
    delete plain_path_;
    delete chat_path_;
    srv_ = chat_ = nullptr;
    plain_path_ = chat_path_ = nullptr;
    std::error_code ec;
    fs::remove_all(temp_dir(kScratch), ec);
  }

  static httplib::Result post(const Running& r, const std::string& path, const json& body,
                              const httplib::Headers& headers = {}) {
    auto c = r.client();
    return c.Post(path, headers, body.dump(), "application/json");
  }
  static json post_ok(const Running& r, const std::string& path, const json& body) {
    auto res = post(r, path, body);
    EXPECT_TRUE(res) << "no response";
    if (!res) return json();
    EXPECT_EQ(res->status, 200) << res->body;
    return json::parse(res->body);
  }
  static std::string completion_text(const json& prompt, int max_tokens) {
    json r = post_ok(*srv_, "/v1/completions", {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}});
    return r.is_null() ? "" : r["choices"][0]["text"].get<std::string>();
  }
  static int64_t metric(const Running& r, const std::string& name) {
    auto c = r.client();
    auto res = c.Get("/metrics");
    if (!res) return -1;
    std::istringstream in(res->body);
    std::string line;
    while (std::getline(in, line))
      if (line.rfind(name + " ", 0) == 0) return std::stoll(line.substr(name.size() + 1));
    return -1;
  }
  // The engine publishes its gauges after each step, just after the replies of that step.
  static bool settles_to_zero(const Running& r, const std::string& name) {
    for (int i = 0; i < 100; ++i) {
      if (metric(r, name) == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  // The data payloads of an SSE body.
  static std::vector<std::string> sse_data(const std::string& body) {
    std::vector<std::string> out;
    std::istringstream in(body);
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
    return out;
  }

  static std::string* plain_path_;
  static std::string* chat_path_;
  static Running* srv_;
  static Running* chat_;
};
std::string* ServeTest::plain_path_ = nullptr;
std::string* ServeTest::chat_path_ = nullptr;
Running* ServeTest::srv_ = nullptr;
Running* ServeTest::chat_ = nullptr;

TEST_F(ServeTest, GreedyCompletionMatchesKnownContinuation) {
  const json ex = expected();
  const std::string prompt = ex["prompt"];
  const std::string full = ex["text_prompt_plus_50"];
  json r = post_ok(*srv_, "/v1/completions",
                   {{"model", "stories"}, {"prompt", prompt}, {"max_tokens", 50}, {"temperature", 0}});
  ASSERT_FALSE(r.is_null());
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], full.substr(prompt.size()));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["prompt_tokens"], 5);  // BOS + 4 tokens
  EXPECT_EQ(r["usage"]["completion_tokens"], 50);
  EXPECT_EQ(r["usage"]["total_tokens"], 55);
  EXPECT_TRUE(r["usage"]["prompt_tokens_details"]["cached_tokens"].is_number_integer());
  // (the request is counted once its response is written, which the client may see first)
  for (int i = 0; i < 100 && metric(*srv_, "ptn_requests_total{endpoint=\"/v1/completions\",status=\"200\"}") < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GE(metric(*srv_, "ptn_requests_total{endpoint=\"/v1/completions\",status=\"200\"}"), 1);
  EXPECT_GE(metric(*srv_, "ptn_generated_tokens_total"), 50);
  EXPECT_GE(metric(*srv_, "ptn_time_to_first_token_seconds_count"), 1);
  EXPECT_GE(metric(*srv_, "ptn_inter_token_latency_seconds_count"), 49);
}

TEST_F(ServeTest, TokenIdsPromptAndTokenizeEndpoints) {
  const json ex = expected();
  json t = post_ok(*srv_, "/tokenize", {{"content", ex["prompt"]}, {"add_special", true}});
  EXPECT_EQ(t["tokens"], ex["prompt_token_ids_with_bos"]);
  json d = post_ok(*srv_, "/detokenize", {{"tokens", ex["greedy_50_new_token_ids"]}});
  const std::string text_50 = ex["text_prompt_plus_50"];
  EXPECT_EQ(d["content"], text_50.substr(std::string(ex["prompt"]).size())) << "expected.json's text, not ptn's";
  json round = post_ok(*srv_, "/detokenize", {{"tokens", ex["prompt_token_ids_with_bos"]}});
  // Special tokens render as their text, as llama-server's /detokenize does.
  EXPECT_EQ(round["content"], "<s> " + ex["prompt"].get<std::string>());
  json r = post_ok(*srv_, "/v1/completions",
                   {{"prompt", ex["prompt_token_ids_with_bos"]}, {"max_tokens", 50}, {"temperature", 0},
                    {"logprobs", 3}});
  const std::string full = ex["text_prompt_plus_50"];
  EXPECT_EQ(r["choices"][0]["text"], full.substr(std::string(ex["prompt"]).size()));
  const json& lp = r["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 50u);
  for (size_t i = 0; i < 50; ++i) {
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
    EXPECT_EQ(lp["top_logprobs"][i].size(), 3u);
  }
}

TEST_F(ServeTest, StreamingGivesTheSameTextAsNonStreaming) {
  const std::string want = completion_text("Once upon a time", 30);
  json body = {{"prompt", "Once upon a time"}, {"max_tokens", 30}, {"temperature", 0}, {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  auto res = post(*srv_, "/v1/completions", body);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_NE(res->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  auto data = sse_data(res->body);
  ASSERT_GE(data.size(), 3u);
  EXPECT_EQ(data.back(), "[DONE]");
  std::string text, finish;
  json usage;
  for (size_t i = 0; i + 1 < data.size(); ++i) {
    json c = json::parse(data[i]);
    if (c.contains("usage")) usage = c["usage"];
    if (c["choices"].empty()) continue;
    text += c["choices"][0]["text"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, want);
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(usage["completion_tokens"], 30);
}

TEST_F(ServeTest, ConcurrentRequestsMatchSequentialOnes) {
  std::vector<std::string> prompts;
  const char* starts[] = {"Once upon a time", "The little dog", "Lily and Ben", "One day, a bird",
                          "The sun was", "Tom had a red", "Mom said", "In the park there"};
  for (int i = 0; i < 16; ++i) prompts.push_back(std::string(starts[i % 8]) + (i >= 8 ? " and then" : ""));
  std::vector<std::string> sequential;
  for (const auto& p : prompts) sequential.push_back(completion_text(p, 40));
  std::vector<std::string> concurrent(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i)
    threads.emplace_back([&, i] { concurrent[i] = completion_text(prompts[i], 40); });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(concurrent[i], sequential[i]) << "prompt " << i;
  EXPECT_TRUE(settles_to_zero(*srv_, "ptn_running_sequences"));
}

TEST_F(ServeTest, SharedPrefixIsReused) {
  std::string prefix;
  for (int i = 0; i < 12; ++i) prefix += "Lily went to the park with her mom and saw a big tree. ";
  const int64_t hits_before = metric(*srv_, "ptn_prefix_cache_hit_tokens_total");
  json a = post_ok(*srv_, "/v1/completions", {{"prompt", prefix + "She"}, {"max_tokens", 4}, {"temperature", 0}});
  json b = post_ok(*srv_, "/v1/completions", {{"prompt", prefix + "Then"}, {"max_tokens", 4}, {"temperature", 0}});
  const int64_t prompt_b = b["usage"]["prompt_tokens"];
  const int64_t cached_b = b["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GE(prompt_b, 100);
  EXPECT_GE(cached_b, prompt_b - 32);  // all full 16-token blocks of the shared prefix
  EXPECT_LT(cached_b, prompt_b);
  EXPECT_EQ(cached_b % 16, 0);
  EXPECT_GE(metric(*srv_, "ptn_prefix_cache_hit_tokens_total") - hits_before, cached_b);
  // The same result as without reuse: repeat the first prompt (now fully cached but one token).
  json a2 = post_ok(*srv_, "/v1/completions", {{"prompt", prefix + "She"}, {"max_tokens", 4}, {"temperature", 0}});
  EXPECT_EQ(a2["choices"][0]["text"], a["choices"][0]["text"]);
  EXPECT_GT(a2["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), cached_b - 1);
}

TEST_F(ServeTest, BadRequestsGetErrorsAndTheServerKeepsServing) {
  struct Case {
    std::string body;
    int status;
    std::string param;
  };
  const std::vector<Case> cases = {
      {"{not json", 400, ""},
      {"[1, 2]", 400, ""},
      {R"({"prompt": 5})", 400, "prompt"},
      {R"({"max_tokens": 4})", 400, "prompt"},
      {R"({"prompt": "hi", "max_tokens": -3})", 400, "max_tokens"},
      {R"({"prompt": "hi", "max_tokens": 0})", 400, "max_tokens"},
      {R"({"prompt": "hi", "max_tokens": "many"})", 400, "max_tokens"},
      {R"({"prompt": "hi", "max_tokens": 1.5})", 400, "max_tokens"},
      {R"({"prompt": "hi", "temperature": "NaN"})", 400, "temperature"},
      {R"({"prompt": "hi", "temperature": 1e999})", 400, ""},
      {R"({"prompt": "hi", "temperature": -1})", 400, "temperature"},
      {R"({"prompt": "hi", "top_p": 0})", 400, "top_p"},
      {R"({"prompt": "hi", "top_k": -2})", 400, "top_k"},
      {R"({"prompt": "hi", "n": 65})", 400, "n"},
      {R"({"prompt": "hi", "stop": ["a","b","c","d","e"]})", 400, "stop"},
      {R"({"prompt": "hi", "stop": 7})", 400, "stop"},
      {R"({"prompt": "hi", "logit_bias": {"99999": 1}})", 400, "logit_bias"},
      {R"({"prompt": "hi", "logit_bias": {"5": 500}})", 400, "logit_bias"},
      {R"({"prompt": "hi", "logprobs": 21})", 400, "logprobs"},
      {R"({"prompt": "hi", "stream": "yes"})", 400, "stream"},
      {R"({"prompt": "hi", "stream_options": {"include_usage": true}})", 400, "stream_options"},
      {R"({"prompt": [1, 2, 100000]})", 400, "prompt"},
      {R"({"prompt": "hi", "model": "gpt-4"})", 404, "model"},
      {std::string(100000, '[') + std::string(100000, ']'), 400, ""},
  };
  for (const auto& c : cases) {
    auto cl = srv_->client();
    auto res = cl.Post("/v1/completions", c.body, "application/json");
    ASSERT_TRUE(res) << c.body.substr(0, 80);
    EXPECT_EQ(res->status, c.status) << c.body.substr(0, 80) << " -> " << res->body;
    json e = json::parse(res->body, nullptr, false);
    ASSERT_TRUE(e.contains("error")) << res->body;
    EXPECT_TRUE(e["error"]["message"].is_string());
    EXPECT_TRUE(e["error"]["type"].is_string());
    if (!c.param.empty()) {
      EXPECT_EQ(e["error"]["param"], c.param) << c.body;
    }
  }
  // A prompt longer than the context (512 tokens).
  std::string long_prompt;
  for (int i = 0; i < 300; ++i) long_prompt += "the dog ran. ";
  auto res = post(*srv_, "/v1/completions", {{"prompt", long_prompt}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("context_length_exceeded"), std::string::npos);
  // Huge max_tokens is clamped to the context, not refused (EOS and BOS, which end a story, banned).
  json r = post_ok(*srv_, "/v1/completions",
                   {{"prompt", "Once upon a time"}, {"max_tokens", int64_t{1} << 40}, {"temperature", 0},
                    {"logit_bias", {{"1", -100}, {"2", -100}}}});
  EXPECT_EQ(r["usage"]["completion_tokens"].get<int64_t>() + r["usage"]["prompt_tokens"].get<int64_t>(), 512);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  // Chat on a model without a template.
  res = post(*srv_, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("no_chat_template"), std::string::npos);
  // Unknown path.
  auto cl = srv_->client();
  auto nf = cl.Get("/v1/nothing");
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, 404);
  // Still serving.
  EXPECT_EQ(completion_text("Once upon a time", 5), ", there was a little");
  EXPECT_GE(metric(*srv_, "ptn_kv_blocks_total"), 1);
}

TEST_F(ServeTest, OversizedBodyGets413) {
  {
    // A server whose limit is 4 KiB, and a body of 8 KiB: small enough that the client has
    // written all of it before the answer comes, so the 413 always arrives.
    serve::ServerOptions o;
    o.model_name = "stories";
    o.max_body_bytes = 4096;
    Running small(*plain_path_, o);
    auto res = small.post("/v1/completions", {{"prompt", std::string(8192, 'a')}, {"max_tokens", 1}});
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 413) << res->body.substr(0, 200);
    EXPECT_NE(res->body.find("4096"), std::string::npos) << "the error names the limit: " << res->body;
    auto under = small.post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 2}});
    ASSERT_TRUE(under);
    EXPECT_EQ(under->status, 200) << under->body;
  }
  // 10 MiB to the default limit (4 MiB): the server may close the connection before the client
  // has written it all, so only a reply that came is checked; either way it goes on serving.
  auto c = srv_->client();
  std::string body = R"({"prompt": ")" + std::string(10 << 20, 'a') + "\"}";
  auto res = c.Post("/v1/completions", body, "application/json");
  if (res) {
    EXPECT_EQ(res->status, 413) << res->body.substr(0, 200);
  }
  EXPECT_EQ(completion_text("Once upon a time", 5), ", there was a little");
}

TEST_F(ServeTest, StopStringsAcrossTokensAreCut) {
  const std::string full = completion_text("Once upon a time", 20);  // ", there was a little girl named..."
  ASSERT_NE(full.find("little girl"), std::string::npos);
  json r = post_ok(*srv_, "/v1/completions",
                   {{"prompt", "Once upon a time"}, {"max_tokens", 20}, {"temperature", 0}, {"stop", {"tle gi", "zzz"}}});
  EXPECT_EQ(r["choices"][0]["text"], full.substr(0, full.find("tle gi")));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(r["choices"][0]["stop_reason"], "tle gi");  // which stop string, as vLLM says it
  // llama-server's timings beside usage: the tokens generated, and times that add up.
  EXPECT_EQ(r["timings"]["predicted_n"], r["usage"]["completion_tokens"]);
  EXPECT_GT(r["timings"]["prompt_ms"].get<double>(), 0.0);
  EXPECT_GE(r["timings"]["predicted_ms"].get<double>(), 0.0);
  json unstopped = post_ok(*srv_, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 3}, {"temperature", 0}});
  EXPECT_EQ(unstopped["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(unstopped["choices"][0]["stop_reason"].is_null());
  // Streaming: the held-back text never leaks the stop string.
  auto res = post(*srv_, "/v1/completions",
                  {{"prompt", "Once upon a time"}, {"max_tokens", 20}, {"temperature", 0}, {"stop", "tle gi"},
                   {"stream", true}});
  ASSERT_TRUE(res);
  std::string text;
  for (const auto& d : sse_data(res->body)) {
    if (d == "[DONE]") break;
    json c = json::parse(d);
    if (!c["choices"].empty()) text += c["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, full.substr(0, full.find("tle gi")));
}

TEST_F(ServeTest, SeededSamplingReplays) {
  json body = {{"prompt", "Once upon a time"}, {"max_tokens", 30}, {"temperature", 1.0}, {"top_p", 0.9},
               {"seed", 1234}};
  json a = post_ok(*srv_, "/v1/completions", body);
  json b = post_ok(*srv_, "/v1/completions", body);
  EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);
  body["seed"] = 99;
  body["temperature"] = 1.5;
  json c = post_ok(*srv_, "/v1/completions", body);
  EXPECT_NE(a["choices"][0]["text"], c["choices"][0]["text"]);
  // Without a seed each request draws anew: "regenerate" gives another text.
  body.erase("seed");
  std::set<std::string> texts;
  for (int i = 0; i < 3; ++i) texts.insert(post_ok(*srv_, "/v1/completions", body)["choices"][0]["text"].get<std::string>());
  EXPECT_EQ(texts.size(), 3u);
}

// response_format / grammar / json_schema: the output follows them, sampled or greedy, and ends
// with the model's EOS as soon as the grammar is complete; bad ones get a 400 naming the field.
TEST_F(ServeTest, StructuredOutputFollowsTheSchema) {
  const json schema = {{"type", "object"},
                       {"properties",
                        {{"name", {{"type", "string"}, {"maxLength", 30}}},
                         {"age", {{"type", "integer"}}},
                         {"mood", {{"enum", {"happy", "sad"}}}},
                         {"tags", {{"type", "array"}, {"items", {{"type", "string"}, {"maxLength", 10}}}, {"maxItems", 3}}}}},
                       {"required", {"name", "age", "mood", "tags"}},
                       {"additionalProperties", false}};
  for (int seed = 0; seed < 4; ++seed) {
    json r = post_ok(*srv_, "/v1/completions",
                     {{"prompt", "Once upon a time"},
                      {"max_tokens", 300},
                      {"temperature", seed == 0 ? 0.0 : 1.0},
                      {"seed", seed},
                      {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "p"}, {"schema", schema}}}}}});
    ASSERT_FALSE(r.is_null());
    const std::string text = r["choices"][0]["text"];
    ASSERT_EQ(r["choices"][0]["finish_reason"], "stop") << text;
    json v = json::parse(text, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << text;
    EXPECT_TRUE(v["name"].is_string() && v["age"].is_number_integer() && v["tags"].is_array()) << text;
    EXPECT_TRUE(v["mood"] == "happy" || v["mood"] == "sad") << text;
    EXPECT_EQ(v.size(), 4u) << text;
    EXPECT_LE(v["tags"].size(), 3u) << text;
  }
  // json_object, llama-server's grammar and json_schema fields, and on the chat endpoint.
  json o = post_ok(*srv_, "/v1/completions",
                   {{"prompt", "Once"}, {"max_tokens", 200}, {"temperature", 0}, {"response_format", {{"type", "json_object"}}}});
  if (o["choices"][0]["finish_reason"] == "stop") {
    EXPECT_TRUE(json::parse(o["choices"][0]["text"].get<std::string>()).is_object());
  }
  json g = post_ok(*srv_, "/v1/completions",
                   {{"prompt", "Once"}, {"max_tokens", 20}, {"seed", 5}, {"grammar", "root ::= (\"yes\" | \"no\") \".\""}});
  EXPECT_TRUE(g["choices"][0]["text"] == "yes." || g["choices"][0]["text"] == "no.") << g.dump();
  json js = post_ok(*srv_, "/v1/completions",
                    {{"prompt", "Once"}, {"max_tokens", 20}, {"json_schema", {{"enum", {"red", "green"}}}}});
  // (a schema's grammar allows whitespace after the value, as JSON does)
  const json color = json::parse(js["choices"][0]["text"].get<std::string>());
  EXPECT_TRUE(color == "red" || color == "green") << js.dump();
  json c = post_ok(*chat_, "/v1/chat/completions",
                   {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                    {"max_tokens", 20},
                    {"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "boolean"}}}}}}}});
  const std::string b = c["choices"][0]["message"]["content"];
  EXPECT_TRUE(json::parse(b).is_boolean()) << b;

  // Refusals name the field (and the unsupported keyword).
  auto refused = [&](const json& extra, const std::string& param, const std::string& what) {
    json body = {{"prompt", "Once"}, {"max_tokens", 4}};
    for (auto& [k, v] : extra.items()) body[k] = v;
    auto res = post(*srv_, "/v1/completions", body);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 400) << body.dump();
    json e = json::parse(res->body);
    EXPECT_EQ(e["error"]["param"], param) << res->body;
    EXPECT_NE(res->body.find(what), std::string::npos) << res->body;
  };
  refused({{"response_format", {{"type", "bogus"}}}}, "response_format.type", "bogus");
  refused({{"response_format", {{"type", "json_schema"}}}}, "response_format.json_schema", "schema");
  refused({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", {{"type", "string"}, {"pattern", "a+"}}}}}}}},
          "response_format.json_schema.schema", "pattern");
  refused({{"grammar", "root ::= undefined-rule"}}, "grammar", "undefined-rule");
  refused({{"grammar", 7}}, "grammar", "GBNF");
  refused({{"grammar", "root ::= \"a\""}, {"json_schema", {{"type", "string"}}}}, "response_format", "at most one");
  refused({{"grammar", std::string(300000, 'x')}}, "grammar", "bytes");
}

TEST_F(ServeTest, ChatCompletionWithTemplate) {
  json r = post_ok(*chat_, "/v1/chat/completions",
                   {{"model", "chat"},
                    {"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}}},
                    {"max_tokens", 12},
                    {"temperature", 0},
                    {"logprobs", true},
                    {"top_logprobs", 2}});
  ASSERT_FALSE(r.is_null());
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(r["choices"][0]["message"]["content"].is_string());
  EXPECT_EQ(r["choices"][0]["logprobs"]["content"].size(), r["usage"]["completion_tokens"].get<size_t>());
  // The prompt is the rendered template, with the BOS the model adds and the template left out
  // (as ptn chat does): compare with /tokenize of the same text with special tokens added.
  json t = post_ok(*chat_, "/tokenize",
                   {{"content", "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                                "<|im_start|>assistant\n"},
                    {"add_special", true}});
  EXPECT_EQ(r["usage"]["prompt_tokens"], t["tokens"].size());
  // Streaming chat: role first, then content deltas, then finish_reason.
  auto res = post(*chat_, "/v1/chat/completions",
                  {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 8}, {"stream", true}, {"seed", 1}});
  ASSERT_TRUE(res);
  auto data = sse_data(res->body);
  ASSERT_GE(data.size(), 3u);
  json first = json::parse(data[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(data.back(), "[DONE]");
  // A bad message.
  auto bad = post(*chat_, "/v1/chat/completions", {{"messages", {{{"content", "Hi"}}}}});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["error"]["param"], "messages[0].role");
}

TEST_F(ServeTest, DisconnectMidStreamReturnsBlocks) {
  // Let the previous tests' sequences settle, then note the baseline.
  ASSERT_TRUE(settles_to_zero(*srv_, "ptn_kv_blocks_used"));
  {
    auto c = srv_->client();
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = json({{"prompt", "Once upon a time"}, {"max_tokens", 400}, {"stream", true},
                     {"logit_bias", {{"1", -100}, {"2", -100}}}})
                   .dump();
    req.set_header("Content-Type", "application/json");
    int chunks = 0;
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
    auto res = c.send(req);
    EXPECT_FALSE(res);  // the client gave up
    EXPECT_GE(chunks, 3);
  }
  EXPECT_TRUE(settles_to_zero(*srv_, "ptn_kv_blocks_used"));
  EXPECT_TRUE(settles_to_zero(*srv_, "ptn_running_sequences"));
  // The cancelled request did not run to its 400 tokens.
  EXPECT_EQ(completion_text("Once upon a time", 5), ", there was a little");
}

TEST_F(ServeTest, ApiKeyIsRequiredExceptForHealth) {
  serve::ServerOptions o;
  o.api_key = "s3cret-key";
  o.engine.capacity_tokens = 1024;
  Running r(*plain_path_, o);
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 3}};
  auto none = post(r, "/v1/completions", body);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(json::parse(none->body)["error"]["code"], "invalid_api_key");
  auto wrong = post(r, "/v1/completions", body, {{"Authorization", "Bearer s3cret-kez"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto prefix = post(r, "/v1/completions", body, {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(prefix);
  EXPECT_EQ(prefix->status, 401);
  auto right = post(r, "/v1/completions", body, {{"Authorization", "Bearer s3cret-key"}});
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200);
  auto c = r.client();
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 401);
  EXPECT_TRUE(serve::keys_equal("abc", "abc"));
  EXPECT_FALSE(serve::keys_equal("abcd", "abc"));
  EXPECT_FALSE(serve::keys_equal("", "abc"));
  // The scheme is matched in any case (RFC 7235); the key is not.
  auto lower = post(r, "/v1/completions", body, {{"Authorization", "bearer  s3cret-key"}});
  ASSERT_TRUE(lower);
  EXPECT_EQ(lower->status, 200);
  auto upper_key = post(r, "/v1/completions", body, {{"Authorization", "BEARER S3CRET-KEY"}});
  ASSERT_TRUE(upper_key);
  EXPECT_EQ(upper_key->status, 401);
  EXPECT_EQ(serve::bearer_token("Bearer abc"), "abc");
  EXPECT_EQ(serve::bearer_token("BeArEr   abc "), "abc");
  EXPECT_EQ(serve::bearer_token("Basic abc"), "");
  EXPECT_EQ(serve::bearer_token("Bearerabc"), "");
  EXPECT_EQ(serve::bearer_token("Bearer"), "");
  // Anthropic's clients send x-api-key; errors before a handler have the shape of the path's API.
  auto xkey = post(r, "/v1/completions", body, {{"x-api-key", "s3cret-key"}});
  ASSERT_TRUE(xkey);
  EXPECT_EQ(xkey->status, 200);
  auto xwrong = post(r, "/v1/messages", body, {{"x-api-key", "s3cret-kez"}});
  ASSERT_TRUE(xwrong);
  EXPECT_EQ(xwrong->status, 401);
  const json a = json::parse(xwrong->body);
  EXPECT_EQ(a["type"], "error");
  EXPECT_EQ(a["error"]["type"], "authentication_error");
  auto ollama = post(r, "/api/chat", body);
  ASSERT_TRUE(ollama);
  EXPECT_EQ(ollama->status, 401);
  EXPECT_TRUE(json::parse(ollama->body)["error"].is_string()) << ollama->body;
}

// --cors-origin: an allowed origin's preflight is answered (before authentication) and every
// reply carries Access-Control-Allow-Origin; another origin gets neither.
TEST_F(ServeTest, CorsOriginsAreAllowedByName) {
  serve::ServerOptions o;
  o.api_key = "k";
  o.cors_origins = {"http://localhost:3000"};
  o.engine.capacity_tokens = 1024;
  Running r(*plain_path_, o);
  auto c = r.client();
  httplib::Headers pre = {{"Origin", "http://localhost:3000"}, {"Access-Control-Request-Method", "POST"},
                          {"Access-Control-Request-Headers", "authorization, content-type"}};
  auto res = c.Options("/v1/chat/completions", pre);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 204);
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "http://localhost:3000");
  EXPECT_NE(res->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type");
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 3}};
  res = post(r, "/v1/completions", body, {{"Origin", "http://localhost:3000"}, {"Authorization", "Bearer k"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "http://localhost:3000");
  res = post(r, "/v1/completions", body, {{"Origin", "http://localhost:3000"}});  // errors carry it too
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "http://localhost:3000");
  res = c.Options("/v1/chat/completions", {{"Origin", "http://evil.example"}, {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  EXPECT_FALSE(res->has_header("Access-Control-Allow-Origin"));
  res = post(r, "/v1/completions", body, {{"Origin", "http://evil.example"}, {"Authorization", "Bearer k"}});
  ASSERT_TRUE(res);
  EXPECT_FALSE(res->has_header("Access-Control-Allow-Origin"));
}

// n > 1: one prompt, n choices sampled with seeds seed, seed + 1, ...: choice i equals the
// single request with seed + i, streamed or not; the prompt counts once in usage; the forked
// sequences' blocks all return.
TEST_F(ServeTest, SeveralChoicesShareOnePrompt) {
  const json one = {{"prompt", "Once upon a time"}, {"max_tokens", 10}, {"temperature", 1.0}, {"seed", 40}};
  std::vector<std::string> alone;
  int64_t completion = 0;
  for (int i = 0; i < 3; ++i) {
    json b = one;
    b["seed"] = 40 + i;
    const json r = post_ok(*srv_, "/v1/completions", b);
    alone.push_back(r["choices"][0]["text"]);
    completion += r["usage"]["completion_tokens"].get<int64_t>();
  }
  json three = one;
  three["n"] = 3;
  const json r = post_ok(*srv_, "/v1/completions", three);
  ASSERT_EQ(r["choices"].size(), 3u) << r.dump();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r["choices"][i]["index"], i);
    EXPECT_EQ(r["choices"][i]["text"], alone[i]) << i;
  }
  EXPECT_NE(alone[0], alone[1]);
  EXPECT_EQ(r["usage"]["prompt_tokens"], post_ok(*srv_, "/v1/completions", one)["usage"]["prompt_tokens"]);
  EXPECT_EQ(r["usage"]["completion_tokens"], completion);
  // Streamed: the chunks of each index join to the same texts; usage once at the end.
  three["stream"] = true;
  three["stream_options"] = {{"include_usage", true}};
  auto res = post(*srv_, "/v1/completions", three);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  std::vector<std::string> texts(3);
  std::vector<int> finishes(3, 0);
  int usage_chunks = 0;
  std::istringstream in(res->body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data: {", 0) != 0) continue;
    const json c = json::parse(line.substr(6));
    if (c.contains("usage") && !c["usage"].is_null()) {
      ++usage_chunks;
      EXPECT_EQ(c["usage"]["completion_tokens"], completion);
    }
    for (const auto& ch : c["choices"]) {
      const int i = ch["index"];
      ASSERT_TRUE(i >= 0 && i < 3);
      texts[i] += ch["text"].get<std::string>();
      finishes[i] += !ch["finish_reason"].is_null();
    }
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(texts[i], alone[i]) << i;
    EXPECT_EQ(finishes[i], 1) << i;
  }
  EXPECT_EQ(usage_chunks, 1);
  EXPECT_TRUE(settles_to_zero(*srv_, "ptn_kv_blocks_used"));
  // Chat too, and more choices than sequences run at once is refused by name.
  const json chat = post_ok(*chat_, "/v1/chat/completions",
                            {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}, {"max_tokens", 4},
                             {"n", 2}, {"seed", 3}});
  ASSERT_EQ(chat["choices"].size(), 2u);
  EXPECT_EQ(chat["choices"][1]["index"], 1);
  serve::ServerOptions o;
  o.engine.capacity_tokens = 1024;
  o.engine.max_running = 2;
  Running small(*plain_path_, o);
  auto big = post(small, "/v1/completions", {{"prompt", "Once"}, {"n", 3}});
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 400);
  EXPECT_EQ(json::parse(big->body)["error"]["param"], "n") << big->body;
}

// The seed of a request without one is returned, and replays the same reply.
TEST_F(ServeTest, TheSeedIsReturnedAndReplays) {
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 1.0}};
  const json a = post_ok(*srv_, "/v1/completions", body);
  ASSERT_TRUE(a.contains("seed")) << a.dump();
  const uint64_t seed = a["seed"].get<uint64_t>();
  EXPECT_LT(seed, uint64_t{1} << 53);  // exact in a JavaScript number
  json again = body;
  again["seed"] = seed;
  const json b = post_ok(*srv_, "/v1/completions", again);
  EXPECT_EQ(b["seed"], a["seed"]);
  EXPECT_EQ(b["choices"][0]["text"], a["choices"][0]["text"]);
  const json c = post_ok(*srv_, "/v1/completions", body);
  EXPECT_NE(c["seed"], a["seed"]);
}

TEST_F(ServeTest, FullQueueGets503WithRetryAfter) {
  serve::ServerOptions o;
  o.engine.capacity_tokens = 2048;
  o.engine.max_running = 1;
  o.engine.max_queue = 1;
  Running r(*plain_path_, o);
  std::atomic<int> ok{0}, busy{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      auto res = post(r, "/v1/completions",
                      {{"prompt", "Once upon a time"}, {"max_tokens", 500}, {"logit_bias", {{"1", -100}, {"2", -100}}}});
      if (res && res->status == 200)
        ++ok;
      else if (res && res->status == 503 && res->get_header_value("Retry-After") == "1")
        ++busy;
      else
        ++other;
    });
  for (auto& t : threads) t.join();
  EXPECT_GE(ok, 1);
  EXPECT_GE(busy, 1);
  EXPECT_EQ(other, 0);
}

TEST_F(ServeTest, SmallCachePreemptsInsteadOfFailing) {
  // 6 blocks of 16 tokens: one 5 + 80 token sequence fits, two at once do not.
  serve::ServerOptions o;
  o.engine.capacity_tokens = 96;
  Running r(*plain_path_, o);
  std::vector<std::string> sequential;
  const char* prompts[] = {"Once upon a time", "The little dog", "Lily and Ben", "One day, a bird"};
  for (const char* p : prompts) {
    json j = post_ok(r, "/v1/completions", {{"prompt", p}, {"max_tokens", 80}, {"temperature", 0}});
    sequential.push_back(j.is_null() ? "" : j["choices"][0]["text"].get<std::string>());
  }
  // A round of 80-token generations takes milliseconds on this model: on a loaded machine the
  // four requests may not overlap, so rounds repeat (each checked) until one preempted.
  for (int round = 0; round < 8 && metric(r, "ptn_preemptions_total") < 1; ++round) {
    std::vector<std::string> concurrent(4);
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i)
      threads.emplace_back([&, i] {
        json j = post_ok(r, "/v1/completions", {{"prompt", prompts[i]}, {"max_tokens", 80}, {"temperature", 0}});
        concurrent[i] = j.is_null() ? "" : j["choices"][0]["text"].get<std::string>();
      });
    for (auto& t : threads) t.join();
    for (int i = 0; i < 4; ++i) EXPECT_EQ(concurrent[i], sequential[i]) << prompts[i] << " (round " << round << ")";
  }
  EXPECT_TRUE(settles_to_zero(r, "ptn_kv_blocks_used"));
  EXPECT_GE(metric(r, "ptn_preemptions_total"), 1);
}

TEST_F(ServeTest, ShutdownLetsRunningRequestsFinish) {
  serve::ServerOptions o;
  o.engine.capacity_tokens = 1024;
  auto r = std::make_unique<Running>(*plain_path_, o);
  int status = 0;
  json body;
  std::thread t([&] {
    auto res =
        post(*r, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 300}, {"logit_bias", {{"1", -100}, {"2", -100}}}});
    if (res) {
      status = res->status;
      body = json::parse(res->body, nullptr, false);
    }
  });
  for (int i = 0; i < 200 && metric(*r, "ptn_running_sequences") != 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  r->server->shutdown(std::chrono::seconds(10));
  t.join();
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body["usage"]["completion_tokens"], 300);
}

// --- the request parser and response builder without HTTP ----------------------------------

TEST_F(ServeTest, ParserDefaultsClampsAndFields) {
  auto program = Program::load(*plain_path_);
  auto tok = Tokenizer::create(*program->meta().tokenizer);
  serve::ModelInfo m{"stories", tok.get(), 512, 512};
  auto r = serve::parse_completion_request(serve::parse_body(R"({"prompt": "Once upon a time"})"), m);
  EXPECT_EQ(r.gen.prompt, (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(r.gen.max_tokens, 16);
  EXPECT_FLOAT_EQ(r.gen.sampling.temperature, 1.0f);
  EXPECT_EQ(r.gen.logprobs, -1);
  EXPECT_FALSE(r.stream);
  r = serve::parse_completion_request(
      serve::parse_body(R"({"prompt": [1, 403], "max_tokens": 100000, "stop": "x", "logit_bias": {"7": -100},
                            "top_k": 40, "min_p": 0.05, "seed": -1, "logprobs": 5, "stream": true,
                            "stream_options": {"include_usage": true}, "user": "ignored"})"),
      m);
  EXPECT_EQ(r.gen.max_tokens, 510);  // 512 - 2 prompt tokens
  EXPECT_EQ(r.gen.stop, std::vector<std::string>{"x"});
  EXPECT_FLOAT_EQ(r.gen.sampling.logit_bias.at(7), -100.0f);
  EXPECT_EQ(r.gen.sampling.top_k, 40);
  EXPECT_EQ(r.gen.sampling.seed, UINT64_MAX);
  EXPECT_EQ(r.gen.logprobs, 5);
  EXPECT_TRUE(r.stream && r.include_usage);
  // max_completion_tokens wins over max_tokens.
  r = serve::parse_completion_request(
      serve::parse_body(R"({"prompt": "a", "max_tokens": 3, "max_completion_tokens": 9})"), m);
  EXPECT_EQ(r.gen.max_tokens, 9);
  auto param_of = [&](const std::string& body) {
    try {
      serve::parse_completion_request(serve::parse_body(body), m);
    } catch (const serve::ApiError& e) {
      return std::to_string(e.status) + ":" + e.param;
    }
    return std::string("accepted");
  };
  EXPECT_EQ(param_of(R"({"prompt": "a", "presence_penalty": 2.5})"), "400:presence_penalty");
  EXPECT_EQ(param_of(R"({"prompt": "a", "frequency_penalty": "1"})"), "400:frequency_penalty");
  EXPECT_EQ(param_of(R"({"prompt": "a", "seed": 1.5})"), "400:seed");
  EXPECT_EQ(param_of(R"({"prompt": "a", "stop": [""]})"), "400:stop");
  EXPECT_EQ(param_of(R"({"prompt": "a", "logit_bias": {"x": 1}})"), "400:logit_bias");
  // Unknown fields and fields this server cannot honour yet are refused by name, never ignored.
  EXPECT_EQ(param_of(R"({"prompt": "a", "temprature": 0.5})"), "400:temprature");
  EXPECT_EQ(param_of(R"({"prompt": "a", "tools": [{"type": "function"}]})"), "400:tools");
  EXPECT_EQ(param_of(R"({"prompt": "a", "suffix": "x"})"), "400:suffix");
  EXPECT_EQ(param_of(R"({"prompt": "a", "messages": []})"), "400:messages");  // a chat field
  EXPECT_EQ(param_of(R"({"prompt": "a", "user": "u1", "tools": null, "tool_choice": "none", "metadata": {}})"),
            "accepted");
  EXPECT_EQ(param_of(R"({"prompt": "a", "logit_bias": {"-1": 1}})"), "400:logit_bias");
  EXPECT_EQ(param_of(R"({"prompt": "a", "logprobs": true})"), "400:logprobs");
  EXPECT_EQ(param_of(R"({"prompt": "a", "max_tokens": 18446744073709551615})"), "400:max_tokens");
  EXPECT_EQ(param_of(R"({"prompt": []})"), "400:prompt");
  EXPECT_EQ(param_of(R"({"prompt": ""})"), "accepted");  // BOS alone is a prompt
  EXPECT_EQ(param_of(R"({"prompt": "a", "temperature": null, "top_p": null})"), "accepted");
  EXPECT_EQ(param_of(R"({"prompt": "a", "model": "stories"})"), "accepted");
  EXPECT_EQ(param_of(R"({"prompt": "a", "model": 3})"), "400:model");
  EXPECT_THROW(serve::parse_body(std::string(65, '[') + std::string(65, ']')), serve::ApiError);
  EXPECT_NO_THROW(serve::parse_body("{\"a\": \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"}"));
}

TEST_F(ServeTest, ResponseBuilderShapes) {
  auto program = Program::load(*plain_path_);
  auto tok = Tokenizer::create(*program->meta().tokenizer);
  serve::ModelInfo m{"stories", tok.get(), 512, 512};
  serve::Event d1;
  d1.text = " there";
  d1.tokens = {{383, -0.5f, {{383, -0.5f}, {400, -1.5f}}}};
  serve::Event done;
  done.kind = serve::Event::Kind::Done;
  done.finish_reason = "stop";
  done.prompt_tokens = 5;
  done.completion_tokens = 1;
  done.cached_tokens = 0;
  serve::ResponseBuilder chat(true, m, "chatcmpl-1", 7, 1);
  json c = chat.chunk(d1);
  EXPECT_EQ(c["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(c["choices"][0]["delta"]["content"], " there");
  EXPECT_EQ(c["choices"][0]["logprobs"]["content"][0]["token"], tok->token_piece(383));
  EXPECT_EQ(c["choices"][0]["logprobs"]["content"][0]["top_logprobs"].size(), 2u);
  const std::vector<json> fs = chat.final_chunks(done);
  ASSERT_EQ(fs.size(), 1u);
  const json& f = fs[0];
  EXPECT_EQ(f["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(f["choices"][0]["delta"].empty());
  json u = chat.usage_chunk(done);
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["total_tokens"], 6);
  serve::ResponseBuilder cmpl(false, m, "cmpl-1", 7, 1);
  cmpl.add(d1);
  json r = cmpl.response(done);
  EXPECT_EQ(r["choices"][0]["text"], " there");
  EXPECT_EQ(r["choices"][0]["logprobs"]["text_offset"], json::array({0}));
  EXPECT_DOUBLE_EQ(r["choices"][0]["logprobs"]["token_logprobs"][0].get<double>(), -0.5);
}

TEST(ServeMetrics, HistogramIsCumulativeAndRendersEveryBucket) {
  serve::Histogram h;
  h.observe(0.0005);
  h.observe(0.003);
  h.observe(0.003);
  h.observe(50.0);
  const std::string text = h.render("x", "help");
  EXPECT_NE(text.find("x_bucket{le=\"0.001\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("x_bucket{le=\"0.0025\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("x_bucket{le=\"0.005\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("x_bucket{le=\"10\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("x_bucket{le=\"+Inf\"} 4\n"), std::string::npos);
  EXPECT_NE(text.find("x_count 4\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE x histogram"), std::string::npos);
}

}  // namespace
