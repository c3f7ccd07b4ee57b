// The Responses API translation (serve/responses.h): request bodies to chat-completions bodies,
// chat.completion replies to response objects, chat chunks to the Responses streaming events,
// and errors named by the Responses fields.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serve/responses.h"

using json = nlohmann::json;
using ptn::serve::ApiError;
using ptn::serve::ModelInfo;
using ptn::serve::ResponsesProtocol;

namespace {

ModelInfo model() {
  ModelInfo m;
  m.name = "stories";
  return m;
}

// The translated chat body of a Responses body.
json chat_of(ResponsesProtocol& p, const json& body, bool* stream = nullptr) {
  auto t = p.translate(body.dump());
  EXPECT_TRUE(t.chat);
  if (stream) *stream = t.stream;
  return json::parse(t.body);
}

// The param of the 400 a body gets.
std::string refused(const json& body) {
  ModelInfo m = model();
  ResponsesProtocol p(m);
  try {
    p.translate(body.dump());
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << e.what();
    EXPECT_NE(std::string(e.what()).find("'" + e.param + "'"), std::string::npos) << e.what();
    return e.param;
  }
  ADD_FAILURE() << "accepted: " << body.dump();
  return "";
}

struct Event {
  std::string name;
  json data;
};

// Splits an SSE text into events; every event has an `event:` line equal to its data's type.
std::vector<Event> events_of(const std::string& sse) {
  std::vector<Event> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated event: " << sse.substr(pos);
    if (end == std::string::npos) break;
    const std::string block = sse.substr(pos, end - pos);
    pos = end + 2;
    const size_t nl = block.find('\n');
    EXPECT_EQ(block.compare(0, 7, "event: "), 0) << block;
    EXPECT_EQ(block.compare(nl + 1, 6, "data: "), 0) << block;
    Event e{block.substr(7, nl - 7), json::parse(block.substr(nl + 7))};
    EXPECT_EQ(e.data["type"], e.name);
    out.push_back(std::move(e));
  }
  return out;
}

json chat_chunk(const json& delta, const json& finish = nullptr) {
  return {{"object", "chat.completion.chunk"},
          {"choices", json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}})}};
}

json usage_chunk(int prompt, int completion, int cached = 0) {
  return {{"object", "chat.completion.chunk"},
          {"choices", json::array()},
          {"usage", {{"prompt_tokens", prompt},
                     {"completion_tokens", completion},
                     {"total_tokens", prompt + completion},
                     {"prompt_tokens_details", {{"cached_tokens", cached}}}}}};
}

}  // namespace

TEST(ResponsesTranslate, StringInputWithInstructions) {
  ModelInfo m = model();
  ResponsesProtocol p(m);
  bool stream = true;
  const json chat = chat_of(p, {{"model", "stories"}, {"input", "Hi"}, {"instructions", "Be brief"},
                                {"max_output_tokens", 7}, {"temperature", 0.5}, {"top_p", 0.9}, {"store", true}},
                            &stream);
  EXPECT_FALSE(stream);
  EXPECT_EQ(chat["model"], "stories");
  EXPECT_EQ(chat["messages"], json::parse(R"([{"role":"system","content":"Be brief"},{"role":"user","content":"Hi"}])"));
  EXPECT_EQ(chat["max_tokens"], 7);
  EXPECT_EQ(chat["temperature"], 0.5);
  EXPECT_EQ(chat["top_p"], 0.9);
  EXPECT_FALSE(chat.contains("stream"));
  EXPECT_FALSE(chat.contains("store"));
}

TEST(ResponsesTranslate, StreamAsksForUsage) {
  ModelInfo m = model();
  ResponsesProtocol p(m);
  bool stream = false;
  const json chat = chat_of(p, {{"input", "Hi"}, {"stream", true}, {"stream_options", {{"include_obfuscation", false}}}},
                            &stream);
  EXPECT_TRUE(stream);
  EXPECT_EQ(chat["stream"], true);
  EXPECT_EQ(chat["stream_options"], json({{"include_usage", true}}));
}

TEST(ResponsesTranslate, ItemsBecomeMessages) {
  ModelInfo m = model();
  ResponsesProtocol p(m);
  const json body = json::parse(R"({"input": [
    {"role": "developer", "content": "Use tools."},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather "},
                                                     {"type": "input_text", "text": "in Paris?"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "think"}]},
    {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
     "content": [{"type": "output_text", "text": "Let me look.", "annotations": [], "logprobs": []}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "get_weather",
     "arguments": "{\"city\":\"Paris\"}", "status": "completed"},
    {"type": "function_call", "call_id": "call_b", "name": "get_time", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_a", "output": "{\"temp\": 21}"},
    {"type": "function_call_output", "call_id": "call_b",
     "output": [{"type": "input_text", "text": "noon"}], "status": "completed"},
    {"role": "user", "content": "Thanks"}]})");
  const json msgs = chat_of(p, body)["messages"];
  ASSERT_EQ(msgs.size(), 6u) << msgs.dump();
  EXPECT_EQ(msgs[0], json({{"role", "system"}, {"content", "Use tools."}}));
  EXPECT_EQ(msgs[1], json({{"role", "user"}, {"content", "Weather in Paris?"}}));
  // The reasoning and both calls join the assistant turn they belong to.
  EXPECT_EQ(msgs[2]["role"], "assistant");
  EXPECT_EQ(msgs[2]["content"], "Let me look.");
  EXPECT_EQ(msgs[2]["reasoning_content"], "think");
  ASSERT_EQ(msgs[2]["tool_calls"].size(), 2u);
  EXPECT_EQ(msgs[2]["tool_calls"][0],
            json::parse(R"({"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}})"));
  EXPECT_EQ(msgs[2]["tool_calls"][1]["id"], "call_b");
  EXPECT_EQ(msgs[3], json({{"role", "tool"}, {"tool_call_id", "call_a"}, {"content", "{\"temp\": 21}"}}));
  EXPECT_EQ(msgs[4], json({{"role", "tool"}, {"tool_call_id", "call_b"}, {"content", "noon"}}));
  EXPECT_EQ(msgs[5], json({{"role", "user"}, {"content", "Thanks"}}));
}

TEST(ResponsesTranslate, CallWithoutTextStartsAnAssistantTurn) {
  ModelInfo m = model();
  ResponsesProtocol p(m);
  const json msgs = chat_of(p, json::parse(R"({"input": [
    {"role": "user", "content": "a"},
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "1"},
    {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"}]})"))["messages"];
  ASSERT_EQ(msgs.size(), 4u);
  EXPECT_EQ(msgs[1]["content"], "");
  EXPECT_EQ(msgs[1]["tool_calls"].size(), 1u);
  EXPECT_EQ(msgs[3]["tool_calls"][0]["id"], "c2");  // after a tool result: a new turn
}

TEST(ResponsesTranslate, ToolsToolChoiceAndFormat) {
  ModelInfo m = model();
  ResponsesProtocol p(m);
  const json chat = chat_of(p, json::parse(R"({"input": "x",
    "tools": [{"type": "function", "name": "get_weather", "description": "d", "strict": true,
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    "tool_choice": {"type": "function", "name": "get_weather"}, "parallel_tool_calls": false,
    "reasoning": {"effort": "low"}})"));
  EXPECT_EQ(chat["tools"], json::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "d",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": true}}])"));
  EXPECT_EQ(chat["tool_choice"], json::parse(R"({"type": "function", "function": {"name": "get_weather"}})"));
  EXPECT_EQ(chat["parallel_tool_calls"], false);
  EXPECT_EQ(chat["reasoning_effort"], "low");

  ResponsesProtocol q(m);
  const json c2 = chat_of(q, json::parse(R"({"input": "x", "tool_choice": "none",
    "text": {"format": {"type": "json_schema", "name": "out", "strict": true, "description": "d",
                        "schema": {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}}}}})"));
  EXPECT_EQ(c2["tool_choice"], "none");
  EXPECT_EQ(c2["response_format"]["type"], "json_schema");
  EXPECT_EQ(c2["response_format"]["json_schema"]["name"], "out");
  EXPECT_EQ(c2["response_format"]["json_schema"]["strict"], true);
  // The schema keeps its key order (properties come out in that order).
  auto t = ResponsesProtocol(m).translate(
      R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "o", "schema": {"properties": {"z": {}, "a": {}}}}}})");
  EXPECT_LT(t.body.find("\"z\""), t.body.find("\"a\""));

  ResponsesProtocol r(m);
  EXPECT_EQ(chat_of(r, json::parse(R"({"input": "x", "text": {"format": {"type": "json_object"}}})"))["response_format"],
            json({{"type", "json_object"}}));
  // A forced call is the whole reply: the text format applies to a later turn only.
  for (const char* choice : {R"("required")", R"({"type": "function", "name": "f"})"}) {
    ResponsesProtocol f(m);
    const json c = chat_of(f, json::parse(std::string(R"({"input": "x", "tools": [{"type": "function", "name": "f"}],
      "text": {"format": {"type": "json_object"}}, "tool_choice": )") + choice + "}"));
    EXPECT_FALSE(c.contains("response_format")) << choice;
  }
  ResponsesProtocol a(m);
  EXPECT_TRUE(chat_of(a, json::parse(R"({"input": "x", "tools": [{"type": "function", "name": "f"}],
    "text": {"format": {"type": "json_object"}}, "tool_choice": "auto"})")).contains("response_format"));
}

TEST(ResponsesTranslate, RefusedByName) {
  EXPECT_EQ(refused({{"input", "x"}, {"previous_response_id", "resp_1"}}), "previous_response_id");
  EXPECT_EQ(refused({{"input", "x"}, {"conversation", "conv_1"}}), "conversation");
  EXPECT_EQ(refused({{"input", "x"}, {"background", true}}), "background");
  EXPECT_EQ(refused({{"input", "x"}, {"prompt", {{"id", "p"}}}}), "prompt");
  EXPECT_EQ(refused({{"input", "x"}, {"colour", 1}}), "colour");
  EXPECT_EQ(refused({{"input", "x"}, {"top_logprobs", 2}}), "top_logprobs");
  EXPECT_EQ(refused({{"input", "x"}, {"max_tool_calls", 2}}), "max_tool_calls");
  EXPECT_EQ(refused({{"input", "x"}, {"truncation", "auto"}}), "truncation");
  EXPECT_EQ(refused({{"input", "x"}, {"include", {"reasoning.encrypted_content", "message.output_text.logprobs"}}}),
            "include[1]");
  EXPECT_EQ(refused({{"input", "x"}, {"reasoning", {{"summary", "auto"}}}}), "reasoning.summary");
  EXPECT_EQ(refused({{"input", "x"}, {"text", {{"verbosity", "low"}}}}), "text.verbosity");
  EXPECT_EQ(refused({{"input", "x"}, {"text", {{"format", {{"type", "xml"}}}}}}), "text.format.type");
  EXPECT_EQ(refused({{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}, {"schema", json::object()}}}}}}),
            "text.format.name");
  EXPECT_EQ(refused({{"input", "x"}, {"stream_options", {{"include_obfuscation", true}}}}), "stream_options");
  EXPECT_EQ(refused({{"input", "x"}, {"store", "yes"}}), "store");
  EXPECT_EQ(refused({{"input", "x"}, {"metadata", {{"k", 1}}}}), "metadata.k");
  json many = json::object();
  for (int i = 0; i < 17; ++i) many["k" + std::to_string(i)] = "v";
  EXPECT_EQ(refused({{"input", "x"}, {"metadata", many}}), "metadata");
  EXPECT_EQ(refused(json::object()), "input");
  EXPECT_EQ(refused({{"input", json::array()}}), "input");
  EXPECT_EQ(refused({{"input", 5}}), "input");
  EXPECT_EQ(refused(json::parse(R"({"input": "x", "tools": [{"type": "web_search"}]})")), "tools[0].type");
  EXPECT_EQ(refused(json::parse(R"({"input": "x", "tools": [{"type": "function", "name": "f", "colour": 1}]})")),
            "tools[0].colour");
  EXPECT_EQ(refused(json::parse(R"({"input": "x", "tools": {"type": "function"}})")), "tools");
  EXPECT_EQ(refused({{"input", "x"}, {"tool_choice", {{"type", "allowed_tools"}}}}), "tool_choice.type");
  EXPECT_EQ(refused({{"input", "x"}, {"tool_choice", 3}}), "tool_choice");
  EXPECT_EQ(refused(json::parse(R"({"input": [{"type": "item_reference", "id": "msg_1"}]})")), "input[0]");
  EXPECT_EQ(refused(json::parse(R"({"input": [{"type": "web_search_call", "id": "ws"}]})")), "input[0].type");
  EXPECT_EQ(refused(json::parse(R"({"input": [{"role": "tool", "content": "x"}]})")), "input[0].role");
  EXPECT_EQ(refused(json::parse(R"({"input": [{"role": "user", "content": "x", "colour": 1}]})")), "input[0].colour");
  EXPECT_EQ(refused(json::parse(R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})")),
            "input[0].content[0].type");
  EXPECT_EQ(refused(json::parse(R"({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "[1]"}]})")),
            "input[0].arguments");
  EXPECT_EQ(refused(json::parse(R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})")),
            "input[0].call_id");
  EXPECT_EQ(refused(json::parse(R"({"input": [{"type": "function_call_output", "call_id": "c"}]})")), "input[0].output");
  EXPECT_EQ(refused(json::parse(R"({"input": [{"type": "reasoning", "summary": [], "encrypted_content": "x"}]})")),
            "input[0].encrypted_content");
  EXPECT_EQ(refused(json::parse(R"({"input": [{"type": "reasoning", "summary": [{"type": "reasoning_text", "text": "a"}]}]})")),
            "input[0].summary[0].type");
  EXPECT_EQ(refused(json::parse(R"({"input": [1]})")), "input[0]");
  json items = json::array();
  for (size_t i = 0; i <= ptn::serve::kMaxResponseInputItems; ++i) items.push_back({{"role", "user"}, {"content", "a"}});
  EXPECT_EQ(refused({{"input", items}}), "input");
  // Not JSON, or too deep: 400 too.
  ModelInfo m = model();
  EXPECT_THROW(ResponsesProtocol(m).translate("{"), ApiError);
  EXPECT_THROW(ResponsesProtocol(m).translate(std::string(100, '[') + std::string(100, ']')), ApiError);
  EXPECT_THROW(ResponsesProtocol(m).translate("[1]"), ApiError);
}

TEST(ResponsesTranslate, ChatParamsRenamed) {
  ModelInfo m = model();
  ResponsesProtocol p(m);
  chat_of(p, json::parse(R"({"instructions": "s", "input": [
    {"role": "user", "content": "a"},
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
    {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "1"}]})"));
  EXPECT_EQ(p.responses_param("messages"), "input");
  EXPECT_EQ(p.responses_param("messages[0]"), "instructions");
  EXPECT_EQ(p.responses_param("messages[1].content"), "input[0].content");
  EXPECT_EQ(p.responses_param("messages[2].tool_calls[1].function.arguments"), "input[2].arguments");
  EXPECT_EQ(p.responses_param("messages[3]"), "input[3]");
  EXPECT_EQ(p.responses_param("messages[9]"), "input");
  EXPECT_EQ(p.responses_param("max_tokens"), "max_output_tokens");
  EXPECT_EQ(p.responses_param("response_format.json_schema.schema"), "text.format.schema");
  EXPECT_EQ(p.responses_param("response_format"), "text.format");
  EXPECT_EQ(p.responses_param("tools[3].function.parameters"), "tools[3].parameters");
  EXPECT_EQ(p.responses_param("tool_choice.function.name"), "tool_choice.name");
  EXPECT_EQ(p.responses_param("reasoning_effort"), "reasoning.effort");
  EXPECT_EQ(p.responses_param("temperature"), "temperature");
  EXPECT_EQ(p.responses_param(""), "");
  const json e = p.error(400, "invalid_request_error", "'max_tokens': must be an integer", "max_tokens", "");
  EXPECT_EQ(e["error"]["param"], "max_output_tokens");
  EXPECT_EQ(e["error"]["message"], "'max_output_tokens': must be an integer");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(e["error"]["code"].is_null());
  const json e2 = p.error(404, "invalid_request_error", "no such model", "model", "model_not_found");
  EXPECT_EQ(e2["error"]["code"], "model_not_found");
  EXPECT_EQ(e2["error"]["param"], "model");
}

TEST(ResponsesReply, ReasoningTextAndCalls) {
  ModelInfo m = model();
  ResponsesProtocol p(m);
  chat_of(p, json::parse(R"({"input": "x", "metadata": {"k": "v"}, "tools": [{"type": "function", "name": "f"}]})"));
  const json completion = json::parse(R"({"id": "chatcmpl-1", "object": "chat.completion", "model": "stories",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "Sure.",
      "reasoning_content": "hmm",
      "tool_calls": [{"id": "call_x", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15, "prompt_tokens_details": {"cached_tokens": 4}}})");
  const json r = p.reply(completion);
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(r["status"], "completed");
  EXPECT_TRUE(r["incomplete_details"].is_null());
  EXPECT_TRUE(r["error"].is_null());
  EXPECT_EQ(r["model"], "stories");
  EXPECT_EQ(r["metadata"], json({{"k", "v"}}));
  EXPECT_EQ(r["tools"][0]["name"], "f");
  EXPECT_EQ(r["store"], false);
  EXPECT_FALSE(r.contains("output_text"));  // the SDKs compute it from the output
  const json& out = r["output"];
  ASSERT_EQ(out.size(), 3u) << r.dump();
  EXPECT_EQ(out[0]["type"], "reasoning");
  EXPECT_EQ(out[0]["summary"], json::array());
  EXPECT_EQ(out[0]["content"], json::parse(R"([{"type": "reasoning_text", "text": "hmm"}])"));
  EXPECT_EQ(out[1]["type"], "message");
  EXPECT_EQ(out[1]["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(out[1]["role"], "assistant");
  EXPECT_EQ(out[1]["status"], "completed");
  EXPECT_EQ(out[1]["content"][0]["type"], "output_text");
  EXPECT_EQ(out[1]["content"][0]["text"], "Sure.");
  EXPECT_EQ(out[1]["content"][0]["annotations"], json::array());
  EXPECT_EQ(out[2]["type"], "function_call");
  EXPECT_EQ(out[2]["id"].get<std::string>().rfind("fc_", 0), 0u);
  EXPECT_EQ(out[2]["call_id"], "call_x");
  EXPECT_EQ(out[2]["name"], "f");
  EXPECT_EQ(out[2]["arguments"], "{\"a\":1}");
  EXPECT_EQ(out[2]["status"], "completed");
  EXPECT_EQ(r["usage"], json::parse(R"({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4},
    "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15})"));

  // The output goes back as input (as the Agents SDK sends it, ids and all) with the call's result.
  json input = json::array({{{"role", "user"}, {"content", "x"}}});
  for (const auto& item : out) input.push_back(item);
  input.push_back({{"type", "function_call_output"}, {"call_id", "call_x"}, {"output", "2"}});
  ResponsesProtocol next(m);
  const json msgs = chat_of(next, {{"input", input}})["messages"];
  ASSERT_EQ(msgs.size(), 3u) << msgs.dump();
  EXPECT_EQ(msgs[1]["reasoning_content"], "hmm");
  EXPECT_EQ(msgs[1]["content"], "Sure.");
  EXPECT_EQ(msgs[1]["tool_calls"][0]["id"], "call_x");
  EXPECT_EQ(msgs[2]["tool_call_id"], "call_x");
}

TEST(ResponsesReply, LengthIsIncompleteAndEmptyIsOneMessage) {
  ModelInfo m = model();
  ResponsesProtocol p(m);
  chat_of(p, {{"input", "x"}, {"max_output_tokens", 3}});
  const json r = p.reply(json::parse(R"({"choices": [{"index": 0, "finish_reason": "length",
    "message": {"role": "assistant", "content": "abc"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 3}})"));
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"], json({{"reason", "max_output_tokens"}}));
  EXPECT_EQ(r["output"][0]["status"], "incomplete");
  EXPECT_EQ(r["max_output_tokens"], 3);

  ResponsesProtocol q(m);
  chat_of(q, {{"input", "x"}});
  const json e = q.reply(json::parse(R"({"choices": [{"index": 0, "finish_reason": "stop",
    "message": {"role": "assistant", "content": ""}}]})"));
  ASSERT_EQ(e["output"].size(), 1u);
  EXPECT_EQ(e["output"][0]["content"][0]["text"], "");
  EXPECT_EQ(e["status"], "completed");
  // A reply of an odd shape gives a response, not an exception.
  ResponsesProtocol z(m);
  EXPECT_EQ(z.reply(json::parse(R"({"choices": 3})"))["output"].size(), 1u);
}

TEST(ResponsesStream, EventsOfReasoningTextAndCalls) {
  ModelInfo m = model();
  ResponsesProtocol p(m);
  chat_of(p, {{"input", "x"}, {"stream", true}});
  std::string sse;
  sse += p.chunk(chat_chunk({{"role", "assistant"}, {"content", ""}}));
  sse += p.chunk(chat_chunk({{"reasoning_content", "th"}}));
  sse += p.chunk(chat_chunk({{"reasoning_content", "ink"}}));
  sse += p.chunk(chat_chunk({{"content", "Hel"}}));
  sse += p.chunk(chat_chunk({{"content", "lo"}}));
  sse += p.chunk(chat_chunk(json::parse(
      R"({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
                         {"index": 1, "id": "call_2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]})")));
  sse += p.chunk(chat_chunk(json::object(), "tool_calls"));
  sse += p.chunk(usage_chunk(9, 6, 2));
  sse += p.end();
  EXPECT_EQ(p.end(), "");  // once
  const auto ev = events_of(sse);
  std::vector<std::string> names;
  for (const auto& e : ev) names.push_back(e.name);
  const std::vector<std::string> expected = {
      "response.created", "response.in_progress",
      "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
      "response.reasoning_text.delta", "response.reasoning_text.done", "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.delta", "response.output_text.done", "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done",
      "response.completed"};
  EXPECT_EQ(names, expected);
  for (size_t i = 0; i < ev.size(); ++i) EXPECT_EQ(ev[i].data["sequence_number"], i);
  EXPECT_EQ(ev[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(ev[0].data["response"]["output"], json::array());
  // Accumulate as a client does: items by output_index, text by deltas.
  std::vector<json> items;
  std::string text, reasoning, args;
  for (const auto& e : ev) {
    if (e.name == "response.output_item.added") {
      EXPECT_EQ(e.data["output_index"], items.size());
      items.push_back(e.data["item"]);
      EXPECT_EQ(e.data["item"]["status"], "in_progress");
    } else if (e.name == "response.output_text.delta") {
      EXPECT_EQ(e.data["item_id"], items.back()["id"]);
      EXPECT_EQ(e.data["output_index"], items.size() - 1);
      EXPECT_EQ(e.data["content_index"], 0);
      text += e.data["delta"].get<std::string>();
    } else if (e.name == "response.reasoning_text.delta") {
      EXPECT_EQ(e.data["item_id"], items.back()["id"]);
      reasoning += e.data["delta"].get<std::string>();
    } else if (e.name == "response.output_text.done") {
      EXPECT_EQ(e.data["text"], text);
    } else if (e.name == "response.reasoning_text.done") {
      EXPECT_EQ(e.data["text"], reasoning);
    } else if (e.name == "response.function_call_arguments.delta") {
      args = e.data["delta"].get<std::string>();
    } else if (e.name == "response.function_call_arguments.done") {
      EXPECT_EQ(e.data["arguments"], args);
      EXPECT_EQ(e.data["item_id"], items.back()["id"]);
    } else if (e.name == "response.output_item.done") {
      EXPECT_EQ(e.data["item"]["id"], items[e.data["output_index"].get<size_t>()]["id"]);
      items[e.data["output_index"].get<size_t>()] = e.data["item"];
    }
  }
  EXPECT_EQ(text, "Hello");
  EXPECT_EQ(reasoning, "think");
  const json& final = ev.back().data["response"];
  EXPECT_EQ(final["status"], "completed");
  EXPECT_EQ(final["id"], ev[0].data["response"]["id"]);
  ASSERT_EQ(final["output"].size(), 4u);
  for (size_t i = 0; i < items.size(); ++i) EXPECT_EQ(final["output"][i], items[i]);
  EXPECT_EQ(final["output"][1]["content"][0]["text"], "Hello");
  EXPECT_EQ(final["output"][2]["call_id"], "call_1");
  EXPECT_EQ(final["output"][2]["arguments"], "{\"a\":1}");
  EXPECT_EQ(final["output"][3]["name"], "g");
  EXPECT_EQ(final["usage"]["input_tokens"], 9);
  EXPECT_EQ(final["usage"]["output_tokens"], 6);
  EXPECT_EQ(final["usage"]["input_tokens_details"]["cached_tokens"], 2);
}

TEST(ResponsesStream, LengthEndsIncompleteAndNothingIsOneEmptyMessage) {
  ModelInfo m = model();
  ResponsesProtocol p(m);
  chat_of(p, {{"input", "x"}, {"stream", true}});
  std::string sse = p.chunk(chat_chunk({{"role", "assistant"}, {"content", "ab"}}));
  sse += p.chunk(chat_chunk(json::object(), "length"));
  sse += p.chunk(usage_chunk(1, 2));
  sse += p.end();
  auto ev = events_of(sse);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back().name, "response.incomplete");
  EXPECT_EQ(ev.back().data["response"]["status"], "incomplete");
  EXPECT_EQ(ev.back().data["response"]["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(ev.back().data["response"]["output"][0]["status"], "incomplete");
  EXPECT_EQ(ev.back().data["response"]["output"][0]["content"][0]["text"], "ab");

  ResponsesProtocol q(m);
  chat_of(q, {{"input", "x"}, {"stream", true}});
  std::string s2 = q.chunk(chat_chunk({{"role", "assistant"}, {"content", ""}}));
  s2 += q.chunk(chat_chunk(json::object(), "stop"));
  s2 += q.end();
  ev = events_of(s2);
  ASSERT_EQ(ev.size(), 8u);  // created, in_progress, the message (added, part, text done, part done, done), completed
  EXPECT_EQ(ev[2].name, "response.output_item.added");
  EXPECT_EQ(ev.back().name, "response.completed");
  EXPECT_EQ(ev.back().data["response"]["output"].size(), 1u);
  EXPECT_TRUE(ev.back().data["response"]["usage"].is_null());
}

TEST(ResponsesStream, ErrorAfterStartFails) {
  ModelInfo m = model();
  ResponsesProtocol p(m);
  chat_of(p, {{"input", "x"}, {"stream", true}});
  std::string sse = p.chunk(chat_chunk({{"role", "assistant"}, {"content", "a"}}));
  sse += p.stream_error(500, "server_error", "the engine failed");
  EXPECT_EQ(p.end(), "");
  EXPECT_EQ(p.chunk(chat_chunk({{"content", "b"}})), "");
  const auto ev = events_of(sse);
  ASSERT_GE(ev.size(), 2u);
  EXPECT_EQ(ev[ev.size() - 2].name, "error");
  EXPECT_EQ(ev[ev.size() - 2].data["message"], "the engine failed");
  EXPECT_EQ(ev[ev.size() - 2].data["code"], "server_error");
  EXPECT_EQ(ev.back().name, "response.failed");
  EXPECT_EQ(ev.back().data["response"]["status"], "failed");
  EXPECT_EQ(ev.back().data["response"]["error"]["message"], "the engine failed");
  // An error before any chunk still opens the stream first (clients expect response.created).
  ResponsesProtocol q(m);
  const auto ev2 = events_of(q.stream_error(503, "server_error", "shutting down"));
  ASSERT_EQ(ev2.size(), 4u);
  EXPECT_EQ(ev2[0].name, "response.created");
  EXPECT_EQ(ev2[3].name, "response.failed");
}
