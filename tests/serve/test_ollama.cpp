// The Ollama API as a Protocol (serve/ollama.h): chat and generate bodies on the chat (or
// completions) path with Ollama's option names, what is refused and by which field, the reply
// objects and NDJSON lines made from chat.completion replies and chunks, and the model listings.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/file.h"
#include "serve/ollama.h"
#include "serve_test_util.h"

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using namespace ptn;
using namespace ptn::serve;

namespace {

const char* kPlain = "{% for m in messages %}{{ m.content }}{% endfor %}";

ModelInfo model_with(const std::string& tmpl) {
  ModelInfo m;
  m.name = "stories";
  m.chat_template = tmpl;
  m.context = 512;
  return m;
}

std::string qwen3() { return ptn::testing::qwen3_template(); }

std::string refusal(const ModelInfo& m, OllamaProtocol::Endpoint ep, const std::string& body) {
  OllamaProtocol p(m, ep);
  return ptn::testing::refused_param(p, body);
}

std::vector<json> lines(const std::string& ndjson) {
  std::vector<json> out;
  std::istringstream in(ndjson);
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line));
  return out;
}

constexpr auto kChat = OllamaProtocol::Endpoint::Chat;
constexpr auto kGenerate = OllamaProtocol::Endpoint::Generate;

TEST(OllamaTranslate, ChatWithOptionsFormatAndTools) {
  const ModelInfo m = model_with(kPlain);
  OllamaProtocol p(m, kChat);
  const auto t = p.translate(R"({"model": "stories", "keep_alive": "5m",
    "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u", "images": []},
      {"role": "assistant", "content": "", "thinking": "hm", "tool_calls": [{"function": {"name": "f", "arguments": {"b": 1, "a": 2}}}]},
      {"role": "tool", "content": "r", "tool_name": "f"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "format": {"type": "object", "properties": {"x": {"type": "integer"}}},
    "options": {"temperature": 0.2, "top_p": 0.5, "top_k": 3, "seed": 7, "num_predict": 9, "stop": ["\n"],
                "repeat_penalty": 1.1, "presence_penalty": 0.5, "frequency_penalty": 0.25, "min_p": 0.05, "num_ctx": 512}})");
  EXPECT_TRUE(t.chat);
  EXPECT_TRUE(t.stream) << "Ollama streams by default";
  const ojson expected = ojson::parse(R"({"model": "stories",
    "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
      {"role": "assistant", "content": "", "reasoning_content": "hm",
       "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"b": 1, "a": 2}}}]},
      {"role": "tool", "content": "r", "name": "f"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "response_format": {"type": "json_schema", "json_schema": {"name": "format", "schema": {"type": "object", "properties": {"x": {"type": "integer"}}}}},
    "temperature": 0.2, "top_p": 0.5, "top_k": 3, "min_p": 0.05, "seed": 7, "repetition_penalty": 1.1,
    "presence_penalty": 0.5, "frequency_penalty": 0.25, "max_tokens": 9, "stop": ["\n"],
    "stream": true, "stream_options": {"include_usage": true}})");
  EXPECT_EQ(ojson::parse(t.body), expected) << t.body;

  const auto j = OllamaProtocol(m, kChat).translate(
      R"({"model": "stories", "stream": false, "format": "json", "options": {"num_predict": -1}, "messages": [{"role": "user", "content": "u"}]})");
  EXPECT_FALSE(j.stream);
  const ojson jb = ojson::parse(j.body);
  EXPECT_EQ(jb["response_format"], ojson::parse(R"({"type": "json_object"})"));
  EXPECT_FALSE(jb.contains("max_tokens")) << "-1: the rest of the context";
  EXPECT_FALSE(jb.contains("stream"));
}

TEST(OllamaTranslate, GenerateTemplatedOrRaw) {
  const ModelInfo m = model_with(kPlain);
  const auto t = OllamaProtocol(m, kGenerate).translate(R"({"model": "stories", "prompt": "p", "system": "s", "suffix": ""})");
  EXPECT_TRUE(t.chat) << "templated, as Ollama";
  EXPECT_EQ(ojson::parse(t.body)["messages"],
            ojson::parse(R"([{"role": "system", "content": "s"}, {"role": "user", "content": "p"}])"));
  const auto raw = OllamaProtocol(m, kGenerate).translate(R"({"model": "stories", "prompt": "p", "raw": true, "stream": false})");
  EXPECT_FALSE(raw.chat);
  EXPECT_EQ(ojson::parse(raw.body)["prompt"], "p");
  // No chat template: the prompt as it is.
  EXPECT_FALSE(OllamaProtocol(model_with(""), kGenerate).translate(R"({"model": "stories", "prompt": "p"})").chat);
}

TEST(OllamaTranslate, RefusedByName) {
  const ModelInfo m = model_with(kPlain);
  const std::string msgs = R"("messages": [{"role": "user", "content": "u"}])";
  EXPECT_EQ(refusal(m, kChat, R"({"messages": [{"role": "user", "content": "u"}]})"), "model");
  EXPECT_EQ(refusal(m, kChat, R"({"model": "m", "colour": 1, )" + msgs + "}"), "colour");
  EXPECT_EQ(refusal(m, kChat, R"({"model": "m", "messages": [{"role": "user", "content": "u", "images": ["aGk="]}]})"),
            "messages[0].images");
  EXPECT_EQ(refusal(m, kChat, R"({"model": "m", "messages": [{"role": "robot", "content": "u"}]})"), "messages[0].role");
  EXPECT_EQ(refusal(m, kChat, R"({"model": "m", "options": {"mirostat": 1}, )" + msgs + "}"), "options.mirostat");
  EXPECT_EQ(refusal(m, kChat, R"({"model": "m", "options": {"num_ctx": 513}, )" + msgs + "}"), "options.num_ctx");
  EXPECT_EQ(refusal(m, kChat, R"({"model": "m", "options": {"temperature": 3}, )" + msgs + "}"), "options.temperature");
  EXPECT_EQ(refusal(m, kChat, R"({"model": "m", "options": {"num_predict": 0}, )" + msgs + "}"), "options.num_predict");
  EXPECT_EQ(refusal(m, kChat, R"({"model": "m", "options": {"stop": "x"}, )" + msgs + "}"), "options.stop");
  EXPECT_EQ(refusal(m, kChat, R"({"model": "m", "format": "yaml", )" + msgs + "}"), "format");
  EXPECT_EQ(refusal(m, kChat, R"({"model": "m", "think": true, )" + msgs + "}"), "think");
  EXPECT_EQ(refusal(m, kChat, R"({"model": "m", "stream": "yes", )" + msgs + "}"), "stream");
  EXPECT_EQ(refusal(m, kGenerate, R"({"model": "m", "prompt": "p", "suffix": "s"})"), "suffix");
  EXPECT_EQ(refusal(m, kGenerate, R"({"model": "m", "prompt": "p", "template": "{{ .Prompt }}"})"), "template");
  EXPECT_EQ(refusal(m, kGenerate, R"({"model": "m", "prompt": "p", "context": [1, 2]})"), "context");
  EXPECT_EQ(refusal(m, kGenerate, R"({"model": "m", "prompt": "p", "images": ["aGk="]})"), "images");
  EXPECT_EQ(refusal(m, kGenerate, R"({"model": "m", "prompt": "p", "raw": true, "system": "s"})"), "system");
  EXPECT_EQ(refusal(m, kGenerate, R"({"model": "m"})"), "prompt");
}

TEST(OllamaTranslate, ThinkReachesTheTemplateSwitch) {
  const ModelInfo q = model_with(qwen3());
  const std::string msgs = R"("messages": [{"role": "user", "content": "u"}])";
  const auto on = OllamaProtocol(q, kChat).translate(R"({"model": "m", "think": true, )" + msgs + "}");
  EXPECT_EQ(ojson::parse(on.body)["chat_template_kwargs"], ojson::parse(R"({"enable_thinking": true})"));
  const auto off = OllamaProtocol(q, kChat).translate(R"({"model": "m", "think": false, )" + msgs + "}");
  EXPECT_EQ(ojson::parse(off.body)["chat_template_kwargs"], ojson::parse(R"({"enable_thinking": false})"));
  EXPECT_EQ(refusal(q, kChat, R"({"model": "m", "think": "high", )" + msgs + "}"), "think");  // no reasoning_effort
}

const json kCompletion = json::parse(R"({"id": "chatcmpl-1", "object": "chat.completion", "model": "stories",
  "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "ok",
    "reasoning_content": "hm", "tool_calls": [{"id": "call_1", "type": "function",
    "function": {"name": "f", "arguments": "{\"a\":1}"}}]}}],
  "usage": {"prompt_tokens": 10, "completion_tokens": 4},
  "timings": {"prompt_n": 10, "prompt_ms": 1.5, "predicted_n": 4, "predicted_ms": 2.25}})");

TEST(OllamaReply, ChatAndGenerate) {
  OllamaProtocol p(model_with(kPlain), kChat);
  p.translate(R"({"model": "stories", "messages": [{"role": "user", "content": "u"}]})");
  const json r = p.reply(kCompletion);
  EXPECT_EQ(r["model"], "stories");
  EXPECT_EQ(r["message"], json::parse(R"({"role": "assistant", "content": "ok", "thinking": "hm",
      "tool_calls": [{"function": {"index": 0, "name": "f", "arguments": {"a": 1}}}]})"));
  EXPECT_EQ(r["done"], true);
  EXPECT_EQ(r["done_reason"], "stop");
  EXPECT_EQ(r["prompt_eval_count"], 10);
  EXPECT_EQ(r["eval_count"], 4);
  EXPECT_EQ(r["prompt_eval_duration"], 1500000);
  EXPECT_EQ(r["eval_duration"], 2250000);
  EXPECT_EQ(r["load_duration"], 0);
  EXPECT_GT(r["total_duration"].get<int64_t>(), 0);
  EXPECT_EQ(r["created_at"].get<std::string>().back(), 'Z');

  OllamaProtocol g(model_with(kPlain), kGenerate);
  g.translate(R"({"model": "stories", "prompt": "p", "raw": true})");
  json text = {{"choices", json::array({{{"index", 0}, {"text", "story"}, {"finish_reason", "length"}}})},
               {"usage", {{"prompt_tokens", 2}, {"completion_tokens", 3}}}};
  const json rg = g.reply(text);
  EXPECT_EQ(rg["response"], "story");
  EXPECT_EQ(rg["done_reason"], "length");
  EXPECT_FALSE(rg.contains("message"));
}

TEST(OllamaStream, LinesThenTheFinalObject) {
  OllamaProtocol p(model_with(kPlain), kChat);
  p.translate(R"({"model": "stories", "messages": [{"role": "user", "content": "u"}]})");
  EXPECT_EQ(p.stream_content_type(), "application/x-ndjson");
  auto chunk = [](const json& delta, const json& finish = nullptr) {
    return json{{"choices", json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}})}};
  };
  std::string out;
  out += p.chunk(chunk({{"role", "assistant"}, {"content", ""}}));
  out += p.chunk(chunk({{"reasoning_content", "hm"}}));
  out += p.chunk(chunk({{"content", "Hi"}}));
  out += p.chunk(chunk(json::object(), "length"));
  out += p.chunk(json::parse(R"({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2},
                                 "timings": {"prompt_ms": 1, "predicted_ms": 2}})"));
  out += p.end();
  const auto l = lines(out);
  ASSERT_EQ(l.size(), 3u) << out;
  EXPECT_EQ(l[0]["message"], json::parse(R"({"role": "assistant", "content": "", "thinking": "hm"})"));
  EXPECT_EQ(l[0]["done"], false);
  EXPECT_EQ(l[1]["message"]["content"], "Hi");
  EXPECT_EQ(l[2]["done"], true);
  EXPECT_EQ(l[2]["done_reason"], "length");
  EXPECT_EQ(l[2]["eval_count"], 2);
  EXPECT_EQ(l[2]["eval_duration"], 2000000);

  OllamaProtocol e(model_with(kPlain), kChat);
  EXPECT_EQ(json::parse(e.stream_error(500, "server_error", "boom")), json::parse(R"({"error": "boom"})"));
  EXPECT_EQ(e.end(), "");
  EXPECT_EQ(e.error(404, "invalid_request_error", "no", "model", "model_not_found"), json::parse(R"({"error": "no"})"));
}

TEST(OllamaModels, TagsShowPsVersion) {
  OllamaModel m;
  m.name = "stories";
  m.family = "llama";
  m.context = 512;
  m.size = 1234;
  m.modified = 0;
  m.chat_template = qwen3();
  m.version = "1.2.3";
  const json tags = ollama_tags(m);
  ASSERT_EQ(tags["models"].size(), 1u);
  EXPECT_EQ(tags["models"][0]["name"], "stories");
  EXPECT_EQ(tags["models"][0]["size"], 1234);
  EXPECT_EQ(tags["models"][0]["modified_at"], "1970-01-01T00:00:00.000000000Z");
  EXPECT_EQ(ollama_ps(m)["models"][0]["context_length"], 512);
  EXPECT_EQ(ollama_version(m), json::parse(R"({"version": "1.2.3"})"));
  const json s = ollama_show(R"({"model": "stories:latest"})", m);
  EXPECT_EQ(s["capabilities"], json::parse(R"(["completion", "tools", "thinking"])"));
  EXPECT_EQ(s["model_info"]["llama.context_length"], 512);
  EXPECT_THROW(ollama_show(R"({"model": "other"})", m), ApiError);
  EXPECT_THROW(ollama_show(R"({"model": "stories", "x": 1})", m), ApiError);
  EXPECT_THROW(ollama_show("[]", m), ApiError);
}

}  // namespace
