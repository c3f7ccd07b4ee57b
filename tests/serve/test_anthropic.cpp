// Anthropic's Messages API as a Protocol (serve/anthropic.h): what a messages body becomes on
// the chat path, what is refused and by which field, and the message object and server-sent
// events made from chat.completion replies and chunks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/file.h"
#include "serve/anthropic.h"
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
  return m;
}

std::string qwen3() { return ptn::testing::qwen3_template(); }

ojson translated(const ModelInfo& m, const std::string& body, bool* stream = nullptr) {
  AnthropicProtocol p(m);
  const auto t = p.translate(body);
  EXPECT_TRUE(t.chat);
  if (stream) *stream = t.stream;
  return ojson::parse(t.body);
}

// The ApiError a body gets: its param (and the message names it).
std::string refusal(const ModelInfo& m, const std::string& body) {
  AnthropicProtocol p(m);
  return ptn::testing::refused_param(p, body);
}

struct Sse {
  std::string event;
  json data;
};

std::vector<Sse> events(const std::string& text) {
  std::vector<Sse> out;
  std::istringstream in(text);
  std::string line, name;
  while (std::getline(in, line)) {
    if (line.rfind("event: ", 0) == 0) {
      name = line.substr(7);
    } else if (line.rfind("data: ", 0) == 0) {
      json d = json::parse(line.substr(6));
      EXPECT_EQ(d["type"], name) << "the event line and the data's type agree";
      out.push_back({name, d});
    } else {
      EXPECT_TRUE(line.empty()) << line;
    }
  }
  return out;
}

TEST(AnthropicTranslate, MessagesSystemToolsAndChoice) {
  bool stream = true;
  const ojson out = translated(model_with(kPlain), R"({
    "model": "stories", "max_tokens": 64, "temperature": 0.5, "top_p": 0.9, "top_k": 40,
    "stop_sequences": ["END"], "metadata": {"user_id": "u1"},
    "system": [{"type": "text", "text": "Be brief. "}, {"type": "text", "text": "Be kind.", "cache_control": {"type": "ephemeral"}}],
    "tools": [{"name": "get_weather", "description": "Weather of a city",
               "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}}],
    "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": true},
    "messages": [
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": [{"type": "text", "text": "Looking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"unit": "c", "city": "Paris"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "no"}], "is_error": true},
        {"type": "text", "text": "Thanks"}]}]})",
                                 &stream);
  EXPECT_FALSE(stream);
  const ojson expected = ojson::parse(R"({
    "model": "stories", "max_tokens": 64,
    "messages": [
      {"role": "system", "content": "Be brief. Be kind."},
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "Looking.", "tool_calls": [{"id": "toolu_1", "type": "function",
        "function": {"name": "get_weather", "arguments": {"unit": "c", "city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "toolu_1", "content": "18 C"},
      {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: no"},
      {"role": "user", "content": "Thanks"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}}}}],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    "parallel_tool_calls": false,
    "stop": ["END"], "temperature": 0.5, "top_p": 0.9, "top_k": 40})");
  EXPECT_EQ(out, expected) << out.dump(1);
  // Key order is kept (the schema's properties, a call's arguments): the grammar follows it.
  EXPECT_EQ(out["messages"][2]["tool_calls"][0]["function"]["arguments"].begin().key(), "unit");
}

TEST(AnthropicTranslate, ToolChoiceKindsAndStreaming) {
  const std::string tools = R"("tools": [{"name": "t", "input_schema": {"type": "object"}}])";
  auto with = [&](const std::string& choice) {
    return R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], )" + tools +
           R"(, "tool_choice": )" + choice + "}";
  };
  const ModelInfo m = model_with(kPlain);
  EXPECT_EQ(translated(m, with(R"({"type": "any"})"))["tool_choice"], "required");
  EXPECT_EQ(translated(m, with(R"({"type": "auto"})"))["tool_choice"], "auto");
  EXPECT_EQ(translated(m, with(R"({"type": "none"})"))["tool_choice"], "none");
  EXPECT_FALSE(translated(m, with(R"({"type": "any"})")).contains("parallel_tool_calls"));
  bool stream = false;
  const ojson s = translated(m, R"({"model": "m", "max_tokens": 5, "stream": true, "messages": [{"role": "user", "content": "x"}]})",
                             &stream);
  EXPECT_TRUE(stream);
  EXPECT_EQ(s["stream"], true);
  EXPECT_EQ(s["stream_options"], ojson::parse(R"({"include_usage": true})"));
}

TEST(AnthropicTranslate, RefusedByName) {
  const ModelInfo m = model_with(kPlain);
  const std::string msgs = R"("messages": [{"role": "user", "content": "x"}])";
  EXPECT_EQ(refusal(m, "[1]"), "");
  EXPECT_EQ(refusal(m, R"({"model": "m", )" + msgs + "}"), "max_tokens");
  EXPECT_EQ(refusal(m, R"({"max_tokens": 4, )" + msgs + "}"), "model");
  EXPECT_EQ(refusal(m, R"({"model": "m", "max_tokens": 0, )" + msgs + "}"), "max_tokens");
  EXPECT_EQ(refusal(m, R"({"model": "m", "max_tokens": 4, "messages": []})"), "messages");
  EXPECT_EQ(refusal(m, R"({"model": "m", "max_tokens": 4, "colour": 1, )" + msgs + "}"), "colour");
  EXPECT_EQ(refusal(m, R"({"model": "m", "max_tokens": 4, "mcp_servers": [], )" + msgs + "}"), "mcp_servers");
  EXPECT_EQ(refusal(m, R"({"model": "m", "max_tokens": 4, "temperature": 1.5, )" + msgs + "}"), "temperature");
  EXPECT_EQ(refusal(m, R"({"model": "m", "max_tokens": 4, "stop_sequences": ["a","b","c","d","e"], )" + msgs + "}"),
            "stop_sequences");
  EXPECT_EQ(refusal(m, R"({"model": "m", "max_tokens": 4, "stop_sequences": [""], )" + msgs + "}"), "stop_sequences");
  EXPECT_EQ(refusal(m, R"({"model": "m", "max_tokens": 4, "messages": [{"role": "system", "content": "x"}]})"),
            "messages[0].role");
  EXPECT_EQ(refusal(m, R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [
              {"type": "text", "text": "see"}, {"type": "image", "source": {"type": "base64", "data": ""}}]}]})"),
            "messages[0].content[1].type");
  EXPECT_EQ(refusal(m, R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [
              {"type": "tool_result", "tool_use_id": "a", "content": [{"type": "document"}]}]}]})"),
            "messages[0].content[0].content[0].type");
  EXPECT_EQ(refusal(m, R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [
              {"type": "tool_use", "id": "a", "name": "t", "input": {}}]}]})"),
            "messages[0].content[0].type");
  EXPECT_EQ(refusal(m, R"({"model": "m", "max_tokens": 4, "messages": [{"role": "assistant", "content": [
              {"type": "tool_use", "id": "a", "name": "t", "input": "{}"}]}]})"),
            "messages[0].content[0].input");
  EXPECT_EQ(refusal(m, R"({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x", "name": "n"}]})"),
            "messages[0].name");
  EXPECT_EQ(refusal(m, R"({"model": "m", "max_tokens": 4, )" + msgs +
                           R"(, "tools": [{"type": "web_search_20250305", "name": "web_search"}]})"),
            "tools[0].type");
  EXPECT_EQ(refusal(m, R"({"model": "m", "max_tokens": 4, )" + msgs + R"(, "tools": [{"name": "t"}]})"),
            "tools[0].input_schema");
  EXPECT_EQ(refusal(m, R"({"model": "m", "max_tokens": 4, )" + msgs +
                           R"(, "tools": [{"name": "a b", "input_schema": {"type": "object"}}]})"),
            "tools[0].name");
  EXPECT_EQ(refusal(m, R"({"model": "m", "max_tokens": 4, )" + msgs +
                           R"(, "tools": [{"name": "t", "input_schema": {}}], "tool_choice": {"type": "tool", "name": "u"}})"),
            "tool_choice.name");
  EXPECT_EQ(refusal(m, R"({"model": "m", "max_tokens": 4, )" + msgs + R"(, "tool_choice": {"type": "any"}})"),
            "tool_choice");
  EXPECT_EQ(refusal(m, R"({"model": "m", "max_tokens": 4, )" + msgs +
                           R"(, "thinking": {"type": "enabled", "budget_tokens": 2}})"),
            "thinking");  // the template writes no <think> section
}

TEST(AnthropicTranslate, ThinkingReachesTheTemplateSwitch) {
  const ModelInfo q = model_with(qwen3());
  const std::string msgs = R"("messages": [{"role": "user", "content": "x"}])";
  ojson on = translated(q, R"({"model": "m", "max_tokens": 40, "thinking": {"type": "enabled", "budget_tokens": 20}, )" +
                               msgs + "}");
  EXPECT_EQ(on["chat_template_kwargs"], ojson::parse(R"({"enable_thinking": true})"));
  ojson off = translated(q, R"({"model": "m", "max_tokens": 40, "thinking": {"type": "disabled"}, )" + msgs + "}");
  EXPECT_EQ(off["chat_template_kwargs"], ojson::parse(R"({"enable_thinking": false})"));
  EXPECT_EQ(refusal(q, R"({"model": "m", "max_tokens": 40, "thinking": {"type": "enabled", "budget_tokens": 40}, )" +
                           msgs + "}"),
            "thinking.budget_tokens");
  EXPECT_EQ(refusal(q, R"({"model": "m", "max_tokens": 40, "thinking": {"type": "sometimes"}, )" + msgs + "}"),
            "thinking.type");
  // A template that always reasons cannot turn it off.
  EXPECT_EQ(refusal(model_with("<think>{{ messages }}</think>"),
                    R"({"model": "m", "max_tokens": 40, "thinking": {"type": "disabled"}, )" + msgs + "}"),
            "thinking");
  // An assistant turn's thinking goes back as reasoning_content.
  ojson prev = translated(q, R"({"model": "m", "max_tokens": 40, "messages": [{"role": "user", "content": "x"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"}, {"type": "text", "text": "y"}]},
      {"role": "user", "content": "z"}]})");
  EXPECT_EQ(prev["messages"][1], ojson::parse(R"({"role": "assistant", "content": "y", "reasoning_content": "hmm"})"));
}

TEST(AnthropicTranslate, CountTokensTakesNoMaxTokens) {
  AnthropicProtocol p(model_with(kPlain));
  const ojson out = ojson::parse(p.translate_count(R"({"model": "m", "system": "s", "messages": [{"role": "user", "content": "x"}]})"));
  EXPECT_FALSE(out.contains("max_tokens"));
  EXPECT_EQ(out["messages"].size(), 2u);
  EXPECT_THROW(p.translate_count(R"({"model": "m", "max_tokens": 3, "messages": [{"role": "user", "content": "x"}]})"),
               ApiError);
}

const json kCompletion = json::parse(R"({
  "id": "chatcmpl-1", "object": "chat.completion", "model": "stories",
  "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "Sure.",
    "reasoning_content": "think", "tool_calls": [{"id": "call_abc", "type": "function",
    "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]}}],
  "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}})");

TEST(AnthropicReply, MessageWithThinkingTextAndToolUse) {
  AnthropicProtocol p(model_with(kPlain));
  const json r = p.reply(kCompletion);
  EXPECT_EQ(r["type"], "message");
  EXPECT_EQ(r["role"], "assistant");
  EXPECT_EQ(r["model"], "stories");
  EXPECT_EQ(r["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(r["content"], json::parse(R"([{"type": "thinking", "thinking": "think", "signature": ""},
      {"type": "text", "text": "Sure."},
      {"type": "tool_use", "id": "toolu_abc", "name": "get_weather", "input": {"city": "Paris"}}])"));
  EXPECT_EQ(r["stop_reason"], "tool_use");
  EXPECT_TRUE(r["stop_sequence"].is_null());
  EXPECT_EQ(r["usage"], json::parse(R"({"input_tokens": 12, "output_tokens": 7})"));

  json cut = kCompletion;
  cut["choices"][0]["finish_reason"] = "length";
  cut["choices"][0]["message"] = {{"role", "assistant"}, {"content", ""}};
  const json r2 = p.reply(cut);
  EXPECT_EQ(r2["stop_reason"], "max_tokens");
  EXPECT_EQ(r2["content"], json::array());
  cut["choices"][0]["finish_reason"] = "stop";
  EXPECT_EQ(p.reply(cut)["stop_reason"], "end_turn");
}

json chunk_of(const json& delta, const json& finish = nullptr) {
  return {{"id", "chatcmpl-1"},
          {"object", "chat.completion.chunk"},
          {"choices", json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}})}};
}

TEST(AnthropicStream, EventsInOrder) {
  AnthropicProtocol p(model_with(kPlain));
  std::string out;
  out += p.chunk(chunk_of({{"role", "assistant"}, {"content", ""}}));
  out += p.chunk(chunk_of({{"reasoning_content", "hm"}}));
  out += p.chunk(chunk_of({{"reasoning_content", "m"}}));
  out += p.chunk(chunk_of({{"content", "He"}}));
  out += p.chunk(chunk_of({{"content", "llo"}}));
  out += p.chunk(chunk_of(json::parse(R"({"tool_calls": [
      {"index": 0, "id": "call_1", "type": "function", "function": {"name": "a", "arguments": "{\"x\":1}"}},
      {"index": 1, "id": "call_2", "type": "function", "function": {"name": "b", "arguments": "{}"}}]})")));
  out += p.chunk(chunk_of(json::object(), "tool_calls"));
  out += p.chunk(json::parse(R"({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}})"));
  out += p.end();
  const auto ev = events(out);
  std::vector<std::string> names;
  for (const auto& e : ev) names.push_back(e.event);
  const std::vector<std::string> expected = {
      "message_start",       "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
      "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",  "content_block_start",
      "content_block_delta", "content_block_stop",  "content_block_start", "content_block_delta", "content_block_stop",
      "message_delta",       "message_stop"};
  ASSERT_EQ(names, expected) << out;
  EXPECT_EQ(ev[0].data["message"]["role"], "assistant");
  EXPECT_EQ(ev[0].data["message"]["content"], json::array());
  EXPECT_EQ(ev[1].data["content_block"]["type"], "thinking");
  EXPECT_EQ(ev[2].data["delta"], json::parse(R"({"type": "thinking_delta", "thinking": "hm"})"));
  EXPECT_EQ(ev[5].data["index"], 1);
  EXPECT_EQ(ev[5].data["content_block"], json::parse(R"({"type": "text", "text": ""})"));
  EXPECT_EQ(ev[7].data["delta"], json::parse(R"({"type": "text_delta", "text": "llo"})"));
  EXPECT_EQ(ev[9].data["content_block"], json::parse(R"({"type": "tool_use", "id": "toolu_1", "name": "a", "input": {}})"));
  EXPECT_EQ(ev[10].data["delta"], json::parse(R"({"type": "input_json_delta", "partial_json": "{\"x\":1}"})"));
  EXPECT_EQ(ev[12].data["index"], 3);
  EXPECT_EQ(ev[14].data["index"], 3);
  EXPECT_EQ(ev[15].data["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(ev[15].data["usage"], json::parse(R"({"input_tokens": 9, "output_tokens": 4})"));
}

TEST(AnthropicStream, EndWithoutUsageAndErrors) {
  AnthropicProtocol p(model_with(kPlain));
  std::string out = p.chunk(chunk_of({{"content", "x"}}, "length"));
  out += p.end();
  const auto ev = events(out);
  ASSERT_EQ(ev.size(), 6u);
  EXPECT_EQ(ev[4].data["delta"]["stop_reason"], "max_tokens");
  EXPECT_EQ(ev[5].event, "message_stop");

  AnthropicProtocol q(model_with(kPlain));
  const auto only = events(q.end());  // a stream that got nothing still is a whole message
  ASSERT_EQ(only.size(), 3u);
  EXPECT_EQ(only[0].event, "message_start");

  AnthropicProtocol e(model_with(kPlain));
  std::string err_out = e.chunk(chunk_of({{"content", "x"}}));
  err_out += e.stream_error(503, "server_error", "shutting down");
  const auto err = events(err_out);
  ASSERT_EQ(err.back().event, "error");
  EXPECT_EQ(err.back().data, json::parse(R"({"type": "error", "error": {"type": "overloaded_error", "message": "shutting down"}})"));
  EXPECT_EQ(e.end(), "") << "nothing follows an error event";
}

TEST(AnthropicError, ShapeAndTypes) {
  AnthropicProtocol p(model_with(kPlain));
  EXPECT_EQ(p.error(400, "invalid_request_error", "bad", "max_tokens", ""),
            json::parse(R"({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}})"));
  EXPECT_EQ(p.error(404, "invalid_request_error", "m", "model", "model_not_found")["error"]["type"], "not_found_error");
  EXPECT_EQ(p.error(401, "invalid_request_error", "k", "", "invalid_api_key")["error"]["type"], "authentication_error");
  EXPECT_EQ(p.error(413, "invalid_request_error", "big", "", "")["error"]["type"], "request_too_large");
  EXPECT_EQ(p.error(503, "server_error", "busy", "", "server_busy")["error"]["type"], "overloaded_error");
  EXPECT_EQ(p.error(500, "server_error", "x", "", "")["error"]["type"], "api_error");
}

}  // namespace
