#include "serve/tools.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "core/text.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "serve/api.h"
#include "serve/harmony.h"
#include "serve/ids.h"

namespace ptn::serve {
namespace {

using ojson = nlohmann::ordered_json;

constexpr size_t kMaxTries = 64;  // closing-tag candidates tried per call

ApiError bad_field(const std::string& param, const std::string& msg) {
  return ApiError(400, "invalid_request_error", param + ": " + msg, param);
}

bool valid_function_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  return true;
}

// Non-strict tools describe values the model should give; OpenAI enforces their bounds only in
// strict mode. The grammar of a non-strict tool keeps the shape (properties, required, types,
// enums, integer bounds) and leaves out the value bounds the conversion has no rule for. An object lists its
// arguments: without "additionalProperties" it holds only its properties (none when it has
// none), as strict mode requires them to be written.
void drop_value_bounds(ojson& s, int depth) {
  if (depth > 64 || !s.is_object()) return;
  const bool is_object = s.contains("type") && s["type"] == "object";
  if (is_object && !s.contains("additionalProperties")) {
    if (!s.contains("properties")) s["properties"] = ojson::object();
    s["additionalProperties"] = false;
  }
  static const std::set<std::string> bounds = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                               "multipleOf", "pattern", "minProperties", "maxProperties",
                                               "uniqueItems"};
  static const std::set<std::string> formats = {"date", "time", "date-time", "uuid"};
  static const std::set<std::string> integer_bounds = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
  const bool integer = s.contains("type") && s["type"] == "integer";  // the grammar enforces its bounds
  for (auto it = s.begin(); it != s.end();) {
    if ((bounds.count(it.key()) && !(integer && integer_bounds.count(it.key()))) ||
        (it.key() == "format" && (!it.value().is_string() || !formats.count(it.value().get<std::string>()))))
      it = s.erase(it);
    else
      ++it;
  }
  for (const char* k : {"properties", "$defs", "definitions"})
    if (s.contains(k) && s[k].is_object())
      for (auto& [name, sub] : s[k].items()) drop_value_bounds(sub, depth + 1);
  if (s.contains("items")) drop_value_bounds(s["items"], depth + 1);
  if (s.contains("additionalProperties")) drop_value_bounds(s["additionalProperties"], depth + 1);
  if (s.contains("anyOf") && s["anyOf"].is_array())
    for (auto& sub : s["anyOf"]) drop_value_bounds(sub, depth + 1);
}

const ToolFunction* find_function(const ToolRequest& t, const std::string& name) {
  for (const auto& f : t.functions)
    if (f.name == name) return &f;
  return nullptr;
}

// One call object {"name": N, "arguments"|"parameters": {...}} (extra keys such as "id" allowed).
std::optional<ToolCall> call_from_json(const ToolRequest& t, const ojson& j) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  const std::string name = j["name"].get<std::string>();
  if (!find_function(t, name)) return std::nullopt;
  const char* key = j.contains("arguments") ? "arguments" : j.contains("parameters") ? "parameters" : nullptr;
  ojson args = key ? j[key] : ojson::object();
  if (args.is_string()) {  // arguments written as a JSON string
    try {
      args = ojson::parse(args.get<std::string>());
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  if (!args.is_object()) return std::nullopt;
  return ToolCall{random_id("call_", 24), name, args.dump()};
}

std::optional<ojson> parse_json(const std::string& text) {
  try {
    return ojson::parse(text);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

const char* marker_of(ToolFormat f) {
  switch (f) {
    case ToolFormat::Hermes: return "<tool_call>";
    case ToolFormat::Mistral: return "[TOOL_CALLS]";
    case ToolFormat::Llama3: return "<|python_tag|>";
    case ToolFormat::Harmony: return "<|channel|>";
  }
  return "";
}

}  // namespace

const char* tool_format_name(ToolFormat f) {
  switch (f) {
    case ToolFormat::Hermes: return "hermes";
    case ToolFormat::Llama3: return "llama3";
    case ToolFormat::Mistral: return "mistral";
    case ToolFormat::Harmony: return "harmony";
  }
  return "?";
}

std::optional<ToolFormat> detect_tool_format(const std::string& tmpl, bool* takes_tools) {
  const bool tools = tmpl.find("tools") != std::string::npos;
  if (takes_tools) *takes_tools = tools;
  if (!tools) return std::nullopt;
  if (is_harmony_template(tmpl) && tmpl.find("functions.") != std::string::npos) return ToolFormat::Harmony;
  if (tmpl.find("<tool_call>") != std::string::npos) return ToolFormat::Hermes;
  if (tmpl.find("[TOOL_CALLS]") != std::string::npos && tmpl.find("[ARGS]") == std::string::npos)
    return ToolFormat::Mistral;
  if (tmpl.find("\"parameters\"") != std::string::npos &&
      (tmpl.find("<|python_tag|>") != std::string::npos || tmpl.find("ipython") != std::string::npos))
    return ToolFormat::Llama3;
  return std::nullopt;
}

std::optional<ToolRequest> parse_tool_request(const ojson& body, const std::string& chat_template) {
  auto present = [&](const char* k) { return body.contains(k) && !body[k].is_null(); };
  if (present("functions") || present("function_call"))
    throw bad_field(present("functions") ? "functions" : "function_call",
                    "the deprecated functions API is not supported: use tools and tool_choice");
  const bool has_tools = present("tools");
  if (!has_tools) {
    if (present("tool_choice") && body["tool_choice"] != "none" && body["tool_choice"] != "auto")
      throw bad_field("tool_choice", "needs tools");
    if (present("parallel_tool_calls") && !body["parallel_tool_calls"].is_boolean())
      throw bad_field("parallel_tool_calls", "must be a boolean");
    return std::nullopt;
  }
  const ojson& tools = body["tools"];
  if (!tools.is_array()) throw bad_field("tools", "must be an array of {\"type\": \"function\", \"function\": {...}}");
  if (tools.size() > kMaxTools) throw bad_field("tools", "at most " + std::to_string(kMaxTools) + " tools");
  if (tools.dump().size() > kMaxToolsBytes)
    throw bad_field("tools", "the tool definitions exceed " + std::to_string(kMaxToolsBytes >> 10) + " KiB");
  ToolRequest t;
  t.tools = tools;
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = "tools[" + std::to_string(i) + "]";
    const ojson& tool = tools[i];
    if (!tool.is_object()) throw bad_field(where, "must be an object");
    if (!tool.contains("type") || tool["type"] != "function")
      throw bad_field(where + ".type", "must be \"function\" (the only tool type this server runs)");
    if (!tool.contains("function") || !tool["function"].is_object())
      throw bad_field(where + ".function", "must be an object with a name");
    const ojson& fn = tool["function"];
    for (const auto& [k, v] : fn.items())
      if (k != "name" && k != "description" && k != "parameters" && k != "strict")
        throw bad_field(where + ".function." + k, "unknown field");
    if (!fn.contains("name") || !fn["name"].is_string() || !valid_function_name(fn["name"].get<std::string>()))
      throw bad_field(where + ".function.name", "must be 1-64 characters of a-z, A-Z, 0-9, _ and -");
    ToolFunction f;
    f.name = fn["name"].get<std::string>();
    if (!names.insert(f.name).second) throw bad_field(where + ".function.name", "'" + f.name + "' is defined twice");
    if (fn.contains("description") && !fn["description"].is_string() && !fn["description"].is_null())
      throw bad_field(where + ".function.description", "must be a string");
    if (fn.contains("strict") && !fn["strict"].is_boolean() && !fn["strict"].is_null())
      throw bad_field(where + ".function.strict", "must be a boolean");
    f.parameters = fn.contains("parameters") && !fn["parameters"].is_null() ? fn["parameters"] : ojson{{"type", "object"}};
    if (!f.parameters.is_object()) throw bad_field(where + ".function.parameters", "must be a JSON Schema object");
    if (!(fn.contains("strict") && fn["strict"] == true)) drop_value_bounds(f.parameters, 0);
    t.functions.push_back(std::move(f));
  }
  if (present("parallel_tool_calls")) {
    if (!body["parallel_tool_calls"].is_boolean()) throw bad_field("parallel_tool_calls", "must be a boolean");
    t.parallel = body["parallel_tool_calls"].get<bool>();
  }
  if (present("tool_choice")) {
    const ojson& c = body["tool_choice"];
    if (c == "none") return std::nullopt;  // the template sees no tools; the reply is text
    if (c == "auto") {
      t.choice = ToolChoice::Auto;
    } else if (c == "required") {
      t.choice = ToolChoice::Required;
    } else if (c.is_object() && c.contains("type") && c["type"] == "function" && c.contains("function") &&
               c["function"].is_object() && c["function"].contains("name") && c["function"]["name"].is_string()) {
      t.choice = ToolChoice::Named;
      t.named = c["function"]["name"].get<std::string>();
      if (!names.count(t.named))
        throw bad_field("tool_choice.function.name", "'" + t.named.substr(0, 64) + "' is not one of the tools");
    } else {
      throw bad_field("tool_choice",
                      "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
  }
  if (t.functions.empty() && t.choice != ToolChoice::Auto) throw bad_field("tools", "is empty");
  bool takes_tools = false;
  const auto format = detect_tool_format(chat_template, &takes_tools);
  if (!format)
    throw bad_field("tools", takes_tools ? "the chat template writes tool calls in a markup this server does not parse "
                                           "(it knows hermes <tool_call>, llama3 JSON, mistral [TOOL_CALLS] and harmony)"
                                         : "this model's chat template takes no tools");
  t.format = *format;
  if ((t.format == ToolFormat::Llama3 || t.format == ToolFormat::Harmony) && t.parallel &&
      t.choice == ToolChoice::Required && t.functions.size() > 1) {
    // Llama 3's format holds one call per reply, as does harmony's (the reply ends at <|call|>):
    // "required" then means exactly one.
    t.parallel = false;
  }
  if (!t.parallel && t.choice == ToolChoice::Auto && t.format == ToolFormat::Mistral)
    throw bad_field("parallel_tool_calls",
                    "false needs tool_choice \"required\" or a named function with this template's [TOOL_CALLS] "
                    "format (an automatic reply may list several calls)");
  return t;
}

std::string tool_call_gbnf(const ToolRequest& t) {
  const char* args_key = t.format == ToolFormat::Llama3 ? "parameters" : "arguments";
  std::string rules, alts;
  for (size_t i = 0; i < t.functions.size(); ++i) {
    const ToolFunction& f = t.functions[i];
    if (t.choice == ToolChoice::Named && f.name != t.named) continue;
    const std::string args = "tool-" + std::to_string(i) + "-args";
    try {
      rules += grammar::json_schema_rules(f.parameters, args);
    } catch (const Error& e) {
      throw bad_field("tools[" + std::to_string(i) + "].function.parameters", e.what());
    }
    // {"name": "N", "arguments": {...}} in the compact form the templates write.
    if (t.format == ToolFormat::Harmony)  // the name in the header, the arguments as the body
      rules += "tool-" + std::to_string(i) + " ::= \"<|channel|>commentary to=functions." + f.name +
               " <|constrain|>json<|message|>\" " + args + "\n";
    else
      rules += "tool-" + std::to_string(i) + " ::= \"{\\\"name\\\": \\\"" + f.name + "\\\", \\\"" + args_key +
               "\\\": \" " + args + " \"}\"\n";
    alts += (alts.empty() ? "" : " | ") + ("tool-" + std::to_string(i));
  }
  // A named function is one call of it; "required" is one or more when parallel calls are allowed.
  const bool parallel = t.parallel && t.choice == ToolChoice::Required;
  std::string root;
  switch (t.format) {
    case ToolFormat::Hermes:
      root = "root ::= call-block" + std::string(parallel ? " ( \"\\n\" call-block )*" : "") + "\n" +
             "call-block ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n";
      break;
    case ToolFormat::Llama3:
    case ToolFormat::Harmony:
      root = "root ::= call\n";
      break;
    case ToolFormat::Mistral:
      root = "root ::= \"[TOOL_CALLS][\" call" + std::string(parallel ? " ( \", \" call )*" : "") + " \"]\"\n";
      break;
  }
  return root + "call ::= " + alts + "\n" + rules + grammar::json_primitives_gbnf();
}

ToolOutput parse_tool_output(const ToolRequest& t, const std::string& text) {
  ToolOutput out;
  switch (t.format) {
    case ToolFormat::Harmony:
      return harmony_reply(text, &t, /*final=*/true, /*trim=*/true).out;
    case ToolFormat::Hermes: {
      const std::string open = "<tool_call>", close = "</tool_call>";
      std::string content;
      size_t pos = 0;
      while (pos < text.size()) {
        const size_t at = text.find(open, pos);
        if (at == std::string::npos) {
          content += text.substr(pos);
          break;
        }
        const size_t body = at + open.size();
        // The call ends at the first closing tag after which the JSON is whole (an argument may
        // hold the tag's text), or at the end (a stop string may have cut the tag).
        std::optional<ToolCall> call;
        size_t next = text.size();
        for (size_t end = text.find(close, body), tries = 0;; end = text.find(close, end + 1), ++tries) {
          const size_t stop = end == std::string::npos || tries >= kMaxTries ? text.size() : end;
          const auto j = parse_json(text::trim(text.substr(body, stop - body)));
          if (j) call = call_from_json(t, *j);
          if (call || stop == text.size()) {
            next = stop == text.size() ? stop : stop + close.size();
            break;
          }
        }
        if (call) {
          content += text.substr(pos, at - pos);
          out.calls.push_back(*call);
        } else {
          next = text.find(close, body);  // not a call: it stays text, up to its closing tag
          next = next == std::string::npos ? text.size() : next + close.size();
          content += text.substr(pos, next - pos);
        }
        pos = next;
      }
      out.raw_content = out.calls.empty() ? text : content;
      out.content = out.calls.empty() ? text : text::trim(content);
      break;
    }
    case ToolFormat::Llama3: {
      std::string body = text::trim(text);
      if (body.rfind("<|python_tag|>", 0) == 0) body = text::trim(body.substr(14));
      const auto j = body.empty() || body[0] != '{' ? std::nullopt : parse_json(body);
      const auto call = j ? call_from_json(t, *j) : std::nullopt;
      if (call) {
        out.calls.push_back(*call);
      } else {
        out.content = out.raw_content = text;
      }
      break;
    }
    case ToolFormat::Mistral: {
      const size_t at = text.find("[TOOL_CALLS]");
      // The array ends at the first ']' after which it is whole JSON (text may follow it).
      std::optional<ojson> j;
      size_t after = text.size();
      if (at != std::string::npos)
        for (size_t end = text.find(']', at + 12), tries = 0; end != std::string::npos && tries < kMaxTries && !j;
             end = text.find(']', end + 1), ++tries) {
          j = parse_json(text::trim(text.substr(at + 12, end + 1 - (at + 12))));
          after = end + 1;
        }
      std::vector<ToolCall> calls;
      bool all = j && j->is_array() && !j->empty();
      if (all)
        for (const auto& c : *j) {
          auto call = call_from_json(t, c);
          if (!call) {
            all = false;
            break;
          }
          calls.push_back(*call);
        }
      if (all) {
        out.calls = std::move(calls);
        out.raw_content = text.substr(0, at) + text.substr(after);
        out.content = text::trim(out.raw_content);
      } else {
        out.content = out.raw_content = text;
      }
      break;
    }
  }
  return out;
}

std::optional<ToolCall> tool_call_of(const ToolRequest& t, const std::string& name, const std::string& arguments) {
  const auto args = parse_json(text::trim(arguments));
  if (!args) return std::nullopt;
  return call_from_json(t, ojson{{"name", name}, {"arguments", *args}});
}

size_t tool_safe_prefix(const ToolRequest& t, std::string_view text) {
  if (t.choice == ToolChoice::Required || t.choice == ToolChoice::Named) return 0;  // the whole reply is calls
  if (t.format == ToolFormat::Llama3) {
    // A call is the whole reply: hold it while it could still become one.
    const size_t b = text.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return 0;
    const std::string_view tag = marker_of(t.format);
    const std::string_view rest = text.substr(b);
    const bool may_be_tag = rest.size() <= tag.size() ? tag.substr(0, rest.size()) == rest : rest.substr(0, tag.size()) == tag;
    return rest[0] == '{' || may_be_tag ? 0 : text.size();
  }
  const std::string_view marker = marker_of(t.format);
  const size_t at = text.find(marker);
  if (at != std::string::npos) return at;
  return text.size() - text::partial_prefix_suffix(text, marker);
}

size_t ToolSafeScan::update(std::string_view text) {
  if (t_.choice == ToolChoice::Required || t_.choice == ToolChoice::Named || t_.format == ToolFormat::Llama3)
    return tool_safe_prefix(t_, text);  // (no search through the text: decided at its start)
  if (found_ != std::string::npos) return found_;
  const std::string_view marker = marker_of(t_.format);
  const size_t at = text.find(marker, from_);
  if (at != std::string::npos) return found_ = at;
  // A marker not found so far can only begin in its last marker.size() - 1 bytes.
  if (text.size() >= marker.size()) from_ = std::max(from_, text.size() - marker.size() + 1);
  return text.size() - text::partial_prefix_suffix(text, marker);
}

}  // namespace ptn::serve
