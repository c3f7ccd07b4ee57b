// Tool calling: the format found in real chat templates, the parser of each format, the
// streaming hold-back, the request checks, the grammar of a required call, and the server end to
// end on stories260K with Qwen 3's, Llama 3.2's and Mistral Nemo's templates: a required or named
// call comes back as `tool_calls` whose arguments follow the tool's schema, streamed or not, and
// the tools and earlier calls reach the template.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/file.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "serve/api.h"
#include "serve/server.h"
#include "serve/tools.h"
#include "running_server.h"
#include "serve_test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using namespace ptn;
using namespace ptn::serve;

namespace {

std::string template_text(const std::string& name) {
  return read_text_file(std::string(PTN_TEST_DATA) + "/chat/templates/" + name + ".jinja", 1 << 20);
}

ToolRequest request_for(const std::string& tmpl, const std::string& tools_and_choice) {
  auto t = parse_tool_request(ojson::parse(tools_and_choice), template_text(tmpl));
  EXPECT_TRUE(t.has_value());
  return t ? *t : ToolRequest{};
}

const char* kWeatherTools = R"({"tools": [
  {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {
      "city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]},
      "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city", "unit"]}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
]})";

std::string with_choice(const std::string& choice_json) {
  std::string s = kWeatherTools;
  return s.substr(0, s.rfind('}')) + ", \"tool_choice\": " + choice_json + "}";
}

TEST(ToolFormat, FoundFromRealTemplates) {
  struct Case {
    const char* tmpl;
    std::optional<ToolFormat> format;
    bool takes_tools;
  };
  for (const Case& c : {Case{"Qwen-Qwen3", ToolFormat::Hermes, true}, Case{"Qwen-Qwen2.5-7B-Instruct", ToolFormat::Hermes, true},
                        Case{"meta-llama-Llama-3.1-8B-Instruct", ToolFormat::Llama3, true},
                        Case{"meta-llama-Llama-3.2-3B-Instruct", ToolFormat::Llama3, true},
                        Case{"mistralai-Mistral-Nemo-Instruct-2407", ToolFormat::Mistral, true},
                        Case{"meta-llama-Llama-3-8B-Instruct", std::nullopt, false},
                        Case{"google-gemma-3", std::nullopt, false}}) {
    SCOPED_TRACE(c.tmpl);
    bool takes = !c.takes_tools;
    EXPECT_EQ(detect_tool_format(template_text(c.tmpl), &takes), c.format);
    EXPECT_EQ(takes, c.takes_tools);
  }
}

TEST(ToolOutput, HermesCallsAndTextAround) {
  const ToolRequest t = request_for("Qwen-Qwen3", kWeatherTools);
  ToolOutput o = parse_tool_output(t, "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                                      "\"Paris\", \"unit\": \"c\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
                                      "\"arguments\": {}}\n</tool_call>");
  ASSERT_EQ(o.calls.size(), 2u);
  EXPECT_EQ(o.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(o.calls[0].arguments), json::parse(R"({"city": "Paris", "unit": "c"})"));
  EXPECT_EQ(o.calls[1].arguments, "{}");
  EXPECT_EQ(o.content, "Let me look.");
  EXPECT_EQ(o.calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(o.calls[0].id.size(), 29u);
  EXPECT_NE(o.calls[0].id, o.calls[1].id);
  // A closing tag cut by a stop string, arguments given as a JSON string.
  o = parse_tool_output(t, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": \\\"UTC\\\"}\"}");
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(o.calls[0].arguments, R"({"tz":"UTC"})");
  EXPECT_EQ(o.content, "");
  // An argument may hold the closing tag's text.
  o = parse_tool_output(t, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a</tool_call>b\", "
                           "\"unit\": \"c\"}}\n</tool_call> after");
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(json::parse(o.calls[0].arguments)["city"], "a</tool_call>b");
  EXPECT_EQ(o.content, "after");
  // Not calls: an unknown function, broken JSON, arguments that are not an object. All stays text.
  for (const std::string& bad : {std::string("<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>"),
                                std::string("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\n</tool_call>"),
                                std::string("<tool_call>{\"name\": \"get_time\", \"arguments\": [1]}</tool_call>"),
                                std::string("just text")}) {
    SCOPED_TRACE(bad);
    o = parse_tool_output(t, bad);
    EXPECT_TRUE(o.calls.empty());
    EXPECT_EQ(o.content, bad);
    EXPECT_EQ(o.raw_content, bad);
  }
}

TEST(ToolOutput, Llama3AndMistral) {
  const ToolRequest l = request_for("meta-llama-Llama-3.2-3B-Instruct", kWeatherTools);
  ToolOutput o = parse_tool_output(l, " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"unit\": \"f\"}}");
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(json::parse(o.calls[0].arguments)["city"], "Oslo");
  o = parse_tool_output(l, "<|python_tag|>{\"name\": \"get_time\", \"parameters\": {}}");
  ASSERT_EQ(o.calls.size(), 1u);
  o = parse_tool_output(l, "The weather is {\"name\": \"get_time\"}");
  EXPECT_TRUE(o.calls.empty());
  EXPECT_EQ(o.content, "The weather is {\"name\": \"get_time\"}");

  const ToolRequest m = request_for("mistralai-Mistral-Nemo-Instruct-2407", kWeatherTools);
  o = parse_tool_output(m, "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}, \"id\": \"abcdefghi\"}, "
                           "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"unit\": \"c\"}}]");
  ASSERT_EQ(o.calls.size(), 2u);
  EXPECT_EQ(o.calls[1].name, "get_weather");
  // Text after the array stays content; a ']' inside an argument does not end the array.
  o = parse_tool_output(m, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x]\", \"unit\": \"c\"}}] ok");
  ASSERT_EQ(o.calls.size(), 1u);
  EXPECT_EQ(json::parse(o.calls[0].arguments)["city"], "x]");
  EXPECT_EQ(o.content, "ok");
  o = parse_tool_output(m, "[TOOL_CALLS][{\"name\": \"nope\", \"arguments\": {}}]");
  EXPECT_TRUE(o.calls.empty());
}

TEST(ToolOutput, StreamingHoldsBackOnlyWhatMayBeACall) {
  const ToolRequest h = request_for("Qwen-Qwen3", kWeatherTools);
  EXPECT_EQ(tool_safe_prefix(h, "Hello there"), 11u);
  EXPECT_EQ(tool_safe_prefix(h, "Hello <tool"), 6u);  // "<tool" may become "<tool_call>"
  EXPECT_EQ(tool_safe_prefix(h, "Hello <tool_call>\n{\"na"), 6u);
  EXPECT_EQ(tool_safe_prefix(h, "a < b"), 5u);
  const ToolRequest l = request_for("meta-llama-Llama-3.2-3B-Instruct", kWeatherTools);
  EXPECT_EQ(tool_safe_prefix(l, "  {\"name"), 0u);
  EXPECT_EQ(tool_safe_prefix(l, "<|python"), 0u);
  EXPECT_EQ(tool_safe_prefix(l, "Sure, "), 6u);
  const ToolRequest r = request_for("Qwen-Qwen3", with_choice("\"required\""));
  EXPECT_EQ(tool_safe_prefix(r, "Hello"), 0u);
  // The streaming scan (new bytes only) answers as the whole-text one for every prefix.
  const ToolRequest m = request_for("mistralai-Mistral-Nemo-Instruct-2407", kWeatherTools);
  for (const ToolRequest* t : {&h, &l, &r, &m}) {
    for (const std::string reply : {"Hello <tool", "Hello <tool_call>\n{\"name\": 1}</tool_call>", "a <tool_cal <tool_call>",
                                    "  {\"name", "ok [TOOL_CALL [TOOL_CALLS][{}]", "<<<tool_call>"}) {
      ToolSafeScan scan(*t);
      for (size_t n = 0; n <= reply.size(); ++n)
        EXPECT_EQ(scan.update(std::string_view(reply).substr(0, n)), tool_safe_prefix(*t, reply.substr(0, n)))
            << reply << " at " << n;
    }
  }
}

TEST(ToolRequestCheck, EveryMalformedFieldIsNamed) {
  const std::string qwen = template_text("Qwen-Qwen3");
  auto param_of = [&](const std::string& body, const std::string& tmpl) {
    try {
      parse_tool_request(ojson::parse(body), tmpl);
    } catch (const ApiError& e) {
      return std::to_string(e.status) + ":" + e.param;
    }
    return std::string("accepted");
  };
  EXPECT_EQ(param_of(R"({"tools": 5})", qwen), "400:tools");
  EXPECT_EQ(param_of(R"({"tools": [{"type": "retrieval"}]})", qwen), "400:tools[0].type");
  EXPECT_EQ(param_of(R"({"tools": [{"type": "function", "function": {"name": "a b"}}]})", qwen), "400:tools[0].function.name");
  EXPECT_EQ(param_of(R"({"tools": [{"type": "function", "function": {"name": "a", "paramters": {}}}]})", qwen),
            "400:tools[0].function.paramters");
  EXPECT_EQ(param_of(R"({"tools": [{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "a"}}]})", qwen),
            "400:tools[1].function.name");
  EXPECT_EQ(param_of(with_choice(R"({"type": "function", "function": {"name": "get_news"}})"), qwen), "400:tool_choice.function.name");
  EXPECT_EQ(param_of(with_choice("\"sometimes\""), qwen), "400:tool_choice");
  EXPECT_EQ(param_of(R"({"tool_choice": "required"})", qwen), "400:tool_choice");
  EXPECT_EQ(param_of(R"({"functions": []})", qwen), "400:functions");
  EXPECT_EQ(param_of(kWeatherTools, template_text("google-gemma-3")), "400:tools");
  std::string many = R"({"tools": [)";
  for (size_t i = 0; i <= kMaxTools; ++i)
    many += std::string(i ? "," : "") + R"({"type": "function", "function": {"name": "f)" + std::to_string(i) + "\"}}";
  EXPECT_EQ(param_of(many + "]}", qwen), "400:tools");
  EXPECT_EQ(param_of(kWeatherTools, qwen), "accepted");
  EXPECT_FALSE(parse_tool_request(ojson::parse(with_choice("\"none\"")), qwen).has_value());
  // A strict tool keeps every keyword and refuses what the grammar cannot enforce.
  const ToolRequest strict = request_for("Qwen-Qwen3", R"({"tools": [{"type": "function", "function": {"name": "f",
      "strict": true, "parameters": {"type": "object", "properties": {"n": {"type": "string", "pattern": "^a"}}}}}],
      "tool_choice": "required"})");
  try {
    tool_call_gbnf(strict);
    ADD_FAILURE() << "a strict schema with 'pattern' compiled";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "tools[0].function.parameters");
    EXPECT_NE(std::string(e.what()).find("pattern"), std::string::npos) << e.what();
  }
}

// The required-call grammar of each format accepts a call and refuses text, other names and
// arguments that break the schema.
TEST(ToolGrammar, RequiredCallOfEachFormat) {
  struct Case {
    const char* tmpl;
    const char* choice;
    std::vector<std::string> good, bad;
  };
  const std::vector<Case> cases = {
      {"Qwen-Qwen3", "\"required\"",
       {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
        "\"arguments\": {}}\n</tool_call>"},
       {"Hello", "<tool_call>\n{\"name\": \"get_news\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"k\"}}\n</tool_call>"}},
      {"Qwen-Qwen3", R"({"type": "function", "function": {"name": "get_time"}})",
       {"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"},
       {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\", \"unit\": \"c\"}}\n</tool_call>"}},
      {"meta-llama-Llama-3.2-3B-Instruct", "\"required\"",
       {"{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"unit\": \"f\", \"days\": 3}}"},
       {"{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"f\"}}",
        "{\"name\": \"get_time\", \"parameters\": {}}{\"name\": \"get_time\", \"parameters\": {}}"}},
      {"mistralai-Mistral-Nemo-Instruct-2407", "\"required\"",
       {"[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_time\", \"arguments\": {}}]"},
       {"[TOOL_CALLS][]", "[TOOL_CALLS]{\"name\": \"get_time\", \"arguments\": {}}"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.tmpl) + " " + c.choice);
    const ToolRequest t = request_for(c.tmpl, with_choice(c.choice));
    auto g = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(tool_call_gbnf(t), "tools"));
    for (const auto& s : c.good) {
      grammar::Matcher m(g);
      EXPECT_TRUE(m.accept(s) && m.is_complete()) << s;
      // What the grammar lets through parses back into calls.
      EXPECT_FALSE(parse_tool_output(t, s).calls.empty()) << s;
    }
    for (const auto& s : c.bad) {
      grammar::Matcher m(g);
      EXPECT_FALSE(m.accept(s) && m.is_complete()) << s;
    }
  }
}

// --- the server end to end ----------------------------------------------------------------------

const char* const kScratch = "ptn_tool_calls_test_";

// A context of 2048: the templates' tool preambles alone fill most of 512 byte-level tokens.
const std::string& tool_program() {
  static const std::string program = ptn::testing::export_stories(ptn::testing::temp_dir(kScratch), "stories", 2048);
  return program;
}

ServerOptions tool_options(const std::string& tmpl) {
  ServerOptions o;
  o.model_name = "stories";
  o.chat_template = template_text(tmpl);
  return o;
}

struct ToolServer : ptn::testing::RunningServer {
  explicit ToolServer(const std::string& tmpl) : RunningServer(tool_program(), tool_options(tmpl)) {}
  httplib::Result post(const json& body) const { return RunningServer::post("/v1/chat/completions", body); }
  json post_ok(const json& body) const { return RunningServer::post_ok("/v1/chat/completions", body); }
};

// Short tools for the server tests: stories260K's context is 512 tokens of a 512-token vocabulary,
// and the templates' tool preambles are long. The city is bounded so a sampled call ends.
const char* kServeTools = R"({"tools": [
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
      "city": {"type": "string", "maxLength": 12}, "unit": {"type": "string", "enum": ["c", "f"]}},
      "required": ["city", "unit"]}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]})";

json weather_request(const std::string& choice_json) {
  json b = json::parse(kServeTools);
  b["tool_choice"] = json::parse(choice_json);
  b["messages"] = json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}});
  b["max_tokens"] = 120;
  b["temperature"] = 0.7;
  b["seed"] = 11;
  // stories260K would end a story at its BOS/EOS: the grammar decides where the call ends.
  b["logit_bias"] = {{"1", -100}};
  return b;
}

void expect_weather_call(const json& call, const std::string& name) {
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], name);
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
  const json args = json::parse(call["function"]["arguments"].get<std::string>());
  ASSERT_TRUE(args.is_object());
  if (name == "get_weather") {
    EXPECT_TRUE(args["city"].is_string()) << args.dump();
    EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << args.dump();
    if (args.contains("days")) {
      EXPECT_TRUE(args["days"].is_number_integer()) << args.dump();
    }
    for (const auto& [k, v] : args.items()) EXPECT_TRUE(k == "city" || k == "unit" || k == "days") << k;
  } else {
    EXPECT_TRUE(args.empty()) << args.dump();
  }
}

TEST(ToolServe, RequiredAndNamedCallsComeBackAsToolCalls) {
  for (const char* tmpl : {"Qwen-Qwen3", "meta-llama-Llama-3.2-3B-Instruct", "mistralai-Mistral-Nemo-Instruct-2407"}) {
    SCOPED_TRACE(tmpl);
    ToolServer s(tmpl);
    json r = s.post_ok(weather_request(R"({"type": "function", "function": {"name": "get_weather"}})"));
    ASSERT_FALSE(r.is_null());
    const json& choice = r["choices"][0];
    ASSERT_TRUE(choice["message"].contains("tool_calls")) << r.dump();
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << r.dump();
    EXPECT_TRUE(choice["message"]["content"].is_null()) << r.dump();
    ASSERT_GE(choice["message"]["tool_calls"].size(), 1u);
    for (const auto& call : choice["message"]["tool_calls"]) expect_weather_call(call, "get_weather");

    json req = weather_request("\"required\"");
    req["parallel_tool_calls"] = false;  // one call: the tiny model would go on calling to max_tokens
    r = s.post_ok(req);
    ASSERT_FALSE(r.is_null());
    ASSERT_EQ(r["choices"][0]["finish_reason"], "tool_calls") << r.dump();
    ASSERT_TRUE(r["choices"][0]["message"].contains("tool_calls")) << r.dump();
    for (const auto& call : r["choices"][0]["message"]["tool_calls"])
      expect_weather_call(call, call["function"]["name"].get<std::string>());
  }
}

// Streaming gives the same calls (same seed) as OpenAI's deltas: a role chunk, one tool_calls
// delta with index, id, type, name and arguments, then finish_reason "tool_calls".
TEST(ToolServe, StreamedCallsEqualTheNonStreamedOnes) {
  ToolServer s("Qwen-Qwen3");
  json body = weather_request("\"required\"");
  body["parallel_tool_calls"] = false;
  const json whole = s.post_ok(body);
  ASSERT_FALSE(whole.is_null());
  body["stream"] = true;
  auto res = s.post(body);
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  std::istringstream in(res->body);
  std::string line, content, finish;
  json calls = json::array();
  bool done = false;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) != 0) continue;
    if (line == "data: [DONE]") {
      done = true;
      break;
    }
    const json c = json::parse(line.substr(6));
    const json& ch = c["choices"][0];
    if (ch["delta"].contains("content") && ch["delta"]["content"].is_string()) content += ch["delta"]["content"];
    if (ch["delta"].contains("tool_calls"))
      for (const auto& tc : ch["delta"]["tool_calls"]) {
        EXPECT_EQ(tc["index"], calls.size());
        calls.push_back({{"id", tc["id"]}, {"type", tc["type"]}, {"function", tc["function"]}});
      }
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(content, "");
  const json& want = whole["choices"][0]["message"]["tool_calls"];
  ASSERT_EQ(calls.size(), want.size()) << res->body;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i]["function"], want[i]["function"]);  // ids are new per reply
    expect_weather_call(calls[i], calls[i]["function"]["name"]);
  }
}

// The tools, an earlier call and its result reach the template: the prompt grows by them, and
// the same conversation without tools is shorter. A bad tool message is a 400 naming it.
TEST(ToolServe, ToolsAndEarlierCallsReachTheTemplate) {
  ToolServer s("Qwen-Qwen3");
  json plain = {{"messages", json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}})},
                {"max_tokens", 1}};
  const int64_t base = s.post_ok(plain)["usage"]["prompt_tokens"];
  json with_tools = plain;
  with_tools["tools"] = json::parse(kServeTools)["tools"];
  const int64_t tooled = s.post_ok(with_tools)["usage"]["prompt_tokens"];
  EXPECT_GT(tooled, base + 50);
  json none = with_tools;
  none["tool_choice"] = "none";  // the template then sees no tools
  EXPECT_EQ(s.post_ok(none)["usage"]["prompt_tokens"], base);
  json history = with_tools;
  history["messages"].push_back({{"role", "assistant"}, {"content", nullptr},
                                 {"tool_calls", json::array({{{"id", "call_1"}, {"type", "function"},
                                   {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\", \"unit\": \"c\"}"}}}}})}});
  history["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "{\"temp\": 21}"}});
  const int64_t longer = s.post_ok(history)["usage"]["prompt_tokens"];
  EXPECT_GT(longer, tooled + 20);
  json bad = history;
  bad["messages"][1]["tool_calls"][0]["function"]["arguments"] = "{not json";
  auto res = s.post(bad);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("messages[1].tool_calls[0].function.arguments"), std::string::npos) << res->body;
  bad = plain;
  bad["messages"][0]["colour"] = "red";
  res = s.post(bad);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("messages[0].colour"), std::string::npos) << res->body;
  bad = weather_request("\"required\"");
  bad["response_format"] = {{"type", "json_object"}};
  res = s.post(bad);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("tool_choice"), std::string::npos) << res->body;
  bad = weather_request("\"auto\"");
  bad["logprobs"] = true;
  res = s.post(bad);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
}

}  // namespace
