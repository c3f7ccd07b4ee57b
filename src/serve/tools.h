// Tool calling for /v1/chat/completions: the request's `tools`, `tool_choice` and
// `parallel_tool_calls`, the tool-call format of the model's chat template, the grammar that
// forces a call (tool_choice "required" or a named function), and the parser that turns the
// model's text back into OpenAI `tool_calls`.
//
// Formats (found from the chat template's own markup):
//   hermes     <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>   (Qwen 2.5/3, Hermes)
//   llama3     {"name": N, "parameters": {...}}, optionally after <|python_tag|>   (Llama 3.1-3.3)
//   mistral    [TOOL_CALLS][{"name": N, "arguments": {...}}, ...]   (Mistral v3 templates)
//   harmony    <|channel|>commentary to=functions.N <|constrain|>json<|message|>{...}<|call|>
//              (gpt-oss; one call per reply, parsed by serve/harmony.h)
// A template that takes tools in another markup is refused by name (400 naming `tools`).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ptn::serve {

enum class ToolFormat { Hermes, Llama3, Mistral, Harmony };
const char* tool_format_name(ToolFormat f);

// The format a chat template writes tool calls in; nullopt when the template has no tool-call
// markup ptn knows. `takes_tools` is set when the template reads the `tools` variable at all.
std::optional<ToolFormat> detect_tool_format(const std::string& chat_template, bool* takes_tools = nullptr);

struct ToolFunction {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON Schema object ({"type": "object"} when absent)
};

enum class ToolChoice { None, Auto, Required, Named };

struct ToolRequest {
  std::vector<ToolFunction> functions;
  nlohmann::ordered_json tools;  // the request's tools array, as the template receives it
  ToolChoice choice = ToolChoice::Auto;
  std::string named;              // the function of ToolChoice::Named
  bool parallel = true;
  ToolFormat format = ToolFormat::Hermes;
};

// Limits on what a request may define.
inline constexpr size_t kMaxTools = 128;
inline constexpr size_t kMaxToolsBytes = 256u << 10;  // the tools array as JSON text

// The tool fields of a chat body (key order kept: the schemas' properties come out in that
// order). nullopt when the body has no tools, or tool_choice is "none" (the template then sees
// no tools). Throws ApiError 400 naming the field for anything malformed, over a limit, or a
// template without a tool-call format ptn parses.
std::optional<ToolRequest> parse_tool_request(const nlohmann::ordered_json& body, const std::string& chat_template);

// The GBNF grammar of the output when a call is required: one call of the named function, or for
// "required" one call of any function (one or more when parallel). Throws ApiError 400 naming tools[i].function.parameters when a schema uses
// what the JSON Schema conversion does not support.
std::string tool_call_gbnf(const ToolRequest& t);

struct ToolCall {
  std::string id;         // "call_" + 24 random characters
  std::string name;
  std::string arguments;  // the arguments as compact JSON text
};

struct ToolOutput {
  std::string content;      // the text outside the calls (trimmed); all of it when nothing parsed
  std::string raw_content;  // the same untrimmed: what streaming sends (a prefix of it was sent already)
  std::vector<ToolCall> calls;
};

// Parses a finished reply. A call must name one of the request's functions and carry a JSON
// object of arguments; text that does not parse as a call stays content, so nothing is lost.
ToolOutput parse_tool_output(const ToolRequest& t, const std::string& text);

// One call of function `name` with `arguments` (JSON text of an object), when `name` is one of
// the request's functions and the arguments parse; nullopt otherwise.
std::optional<ToolCall> tool_call_of(const ToolRequest& t, const std::string& name, const std::string& arguments);

// Streaming: how many bytes of `text` (the reply so far) are content that can be sent now,
// i.e. cannot be the start of a tool call.
size_t tool_safe_prefix(const ToolRequest& t, std::string_view text);

// tool_safe_prefix for a reply that only grows between calls, looking at the new bytes only.
class ToolSafeScan {
 public:
  explicit ToolSafeScan(const ToolRequest& t) : t_(t) {}
  size_t update(std::string_view text);

 private:
  const ToolRequest& t_;
  size_t from_ = 0;                   // where the search for the call marker goes on
  size_t found_ = std::string::npos;  // where the marker was found
};

}  // namespace ptn::serve
