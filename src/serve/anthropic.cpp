#include "serve/anthropic.h"

#include <cmath>
#include <set>

#include "serve/ids.h"
#include "serve/tools.h"

namespace ptn::serve {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

ApiError bad(const std::string& param, const std::string& message) {
  return ApiError(400, "invalid_request_error", "'" + param + "': " + message, param);
}

bool present(const ojson& o, const char* k) { return o.contains(k) && !o[k].is_null(); }

const std::string& get_string(const ojson& o, const char* k, const std::string& where) {
  if (!present(o, k) || !o[k].is_string()) throw bad(where + "." + k, "must be a string");
  return o[k].get_ref<const std::string&>();
}

// Fields of an object that are neither in `known` nor null are refused by name.
void check_keys(const ojson& o, const std::set<std::string>& known, const std::string& where) {
  for (auto it = o.begin(); it != o.end(); ++it)
    if (!it->is_null() && !known.count(it.key()))
      throw bad(where.empty() ? it.key() : where + "." + it.key(), "unknown field");
}

bool valid_tool_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

// A block type this text-only server cannot take, refused by name.
bool media_block(const std::string& t) {
  return t == "image" || t == "document" || t == "search_result" || t == "container_upload";
}

// The text of a block list that may only hold text blocks (system, tool_result content).
std::string text_blocks(const ojson& blocks, const std::string& where) {
  if (!blocks.is_array()) throw bad(where, "must be a string or an array of text blocks");
  std::string text;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string w = where + "[" + std::to_string(i) + "]";
    const ojson& b = blocks[i];
    if (!b.is_object()) throw bad(w, "must be a content block object");
    const std::string& type = get_string(b, "type", w);
    if (media_block(type))
      throw bad(w + ".type", "'" + type + "' blocks are not supported by this server (text only)");
    if (type != "text") throw bad(w + ".type", "must be \"text\" here");
    check_keys(b, {"type", "text", "cache_control", "citations"}, w);
    if (present(b, "citations") && !(b["citations"].is_array() && b["citations"].empty()))
      throw bad(w + ".citations", "citations are not supported by this server");
    text += get_string(b, "text", w);
  }
  return text;
}

std::string content_text(const ojson& c, const std::string& where) {
  if (c.is_string()) return c.get<std::string>();
  return text_blocks(c, where);
}

// One Anthropic message as OpenAI messages: a user turn's tool_result blocks become tool
// messages (in order) followed by its text; an assistant turn is one message with its text,
// thinking (reasoning_content) and tool_use blocks (tool_calls).
void translate_message(const ojson& msg, const std::string& where, ojson& out) {
  if (!msg.is_object()) throw bad(where, "must be an object with a role and content");
  check_keys(msg, {"role", "content"}, where);
  const std::string& role = get_string(msg, "role", where);
  if (role != "user" && role != "assistant") throw bad(where + ".role", "must be \"user\" or \"assistant\"");
  if (!present(msg, "content")) throw bad(where + ".content", "is required");
  const ojson& c = msg["content"];
  if (c.is_string()) {
    out.push_back({{"role", role}, {"content", c.get<std::string>()}});
    return;
  }
  if (!c.is_array()) throw bad(where + ".content", "must be a string or an array of content blocks");
  std::string text, thinking;
  ojson calls = ojson::array();
  bool had_results = false;
  for (size_t i = 0; i < c.size(); ++i) {
    const std::string w = where + ".content[" + std::to_string(i) + "]";
    const ojson& b = c[i];
    if (!b.is_object()) throw bad(w, "must be a content block object");
    const std::string& type = get_string(b, "type", w);
    if (type == "text") {
      check_keys(b, {"type", "text", "cache_control", "citations"}, w);
      if (present(b, "citations") && !(b["citations"].is_array() && b["citations"].empty()))
        throw bad(w + ".citations", "citations are not supported by this server");
      text += get_string(b, "text", w);
    } else if (media_block(type)) {
      throw bad(w + ".type", "'" + type + "' blocks are not supported by this server (text only)");
    } else if (type == "tool_use") {
      if (role != "assistant") throw bad(w + ".type", "tool_use blocks belong in assistant messages");
      check_keys(b, {"type", "id", "name", "input", "cache_control"}, w);
      const std::string& id = get_string(b, "id", w);
      const std::string& name = get_string(b, "name", w);
      if (!present(b, "input") || !b["input"].is_object()) throw bad(w + ".input", "must be an object");
      if (calls.size() >= kMaxTools) throw bad(w, "at most " + std::to_string(kMaxTools) + " tool_use blocks");
      calls.push_back({{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", b["input"]}}}});
    } else if (type == "tool_result") {
      if (role != "user") throw bad(w + ".type", "tool_result blocks belong in user messages");
      check_keys(b, {"type", "tool_use_id", "content", "is_error", "cache_control"}, w);
      const std::string& id = get_string(b, "tool_use_id", w);
      std::string result = present(b, "content") ? content_text(b["content"], w + ".content") : "";
      if (present(b, "is_error")) {
        if (!b["is_error"].is_boolean()) throw bad(w + ".is_error", "must be a boolean");
        if (b["is_error"].get<bool>()) result = "Error: " + result;
      }
      out.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", result}});
      had_results = true;
    } else if (type == "thinking") {
      if (role != "assistant") throw bad(w + ".type", "thinking blocks belong in assistant messages");
      check_keys(b, {"type", "thinking", "signature", "cache_control"}, w);
      thinking += get_string(b, "thinking", w);
    } else if (type == "redacted_thinking") {
      throw bad(w + ".type", "redacted_thinking blocks are not supported by this server");
    } else {
      throw bad(w + ".type", "unknown content block type '" + type.substr(0, 64) + "'");
    }
  }
  if (role == "user") {
    // A turn of only tool results has no user text; one with text keeps it after the results.
    if (!text.empty() || !had_results || c.empty()) out.push_back({{"role", "user"}, {"content", text}});
    return;
  }
  ojson m = {{"role", "assistant"}, {"content", text}};
  if (!thinking.empty()) m["reasoning_content"] = thinking;
  if (!calls.empty()) m["tool_calls"] = calls;
  out.push_back(std::move(m));
}

double number_in(const ojson& body, const char* k, double lo, double hi) {
  const ojson& v = body[k];
  if (!v.is_number()) throw bad(k, "must be a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    throw bad(k, "must be between " + json(lo).dump() + " and " + json(hi).dump());
  return x;
}

int64_t positive_int(const ojson& body, const char* k, const std::string& where) {
  const ojson& v = body[k];
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) ||
      v.get<int64_t>() < 1)
    throw bad(where, "must be an integer >= 1");
  return v.get<int64_t>();
}

const char* stop_reason_of(const std::string& finish_reason) {
  if (finish_reason == "length") return "max_tokens";
  if (finish_reason == "tool_calls") return "tool_use";
  return "end_turn";
}

// "call_..." ids of the chat path as Anthropic's "toolu_..." (the rest kept, so it round-trips).
std::string tool_use_id(const std::string& call_id) {
  return call_id.rfind("call_", 0) == 0 ? "toolu_" + call_id.substr(5) : call_id;
}


json tool_input(const std::string& arguments) {
  json input = json::parse(arguments, nullptr, /*allow_exceptions=*/false);
  // The chat path only returns calls whose arguments are a JSON object.
  return input.is_object() ? input : json::object();
}

// tools [{name, description, input_schema}] -> OpenAI function tools; returns their names.
std::set<std::string> translate_tools(const ojson& body, ojson& out) {
  std::set<std::string> tool_names;
  if (present(body, "tools")) {
    const ojson& tools = body["tools"];
    if (!tools.is_array()) throw bad("tools", "must be an array");
    if (tools.size() > kMaxTools) throw bad("tools", "at most " + std::to_string(kMaxTools) + " tools");
    ojson fns = ojson::array();
    for (size_t i = 0; i < tools.size(); ++i) {
      const std::string w = "tools[" + std::to_string(i) + "]";
      const ojson& t = tools[i];
      if (!t.is_object()) throw bad(w, "must be an object {name, description, input_schema}");
      if (present(t, "type") && t["type"] != "custom") {
        const std::string type = t["type"].is_string() ? t["type"].get<std::string>().substr(0, 64) : "?";
        throw bad(w + ".type", "server tools ('" + type + "') are not supported; define {name, description, input_schema}");
      }
      check_keys(t, {"type", "name", "description", "input_schema", "cache_control"}, w);
      const std::string& name = get_string(t, "name", w);
      if (!valid_tool_name(name)) throw bad(w + ".name", "must be 1-64 characters of a-z A-Z 0-9 _ -");
      if (!tool_names.insert(name).second) throw bad(w + ".name", "'" + name + "' is defined twice");
      if (!present(t, "input_schema") || !t["input_schema"].is_object())
        throw bad(w + ".input_schema", "is required (a JSON Schema object)");
      ojson fn = {{"name", name}};
      if (present(t, "description")) fn["description"] = get_string(t, "description", w);
      fn["parameters"] = t["input_schema"];
      fns.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    if (!fns.empty()) out["tools"] = std::move(fns);
  }
  return tool_names;
}

// tool_choice {type: auto | any | tool | none} -> OpenAI's tool_choice (and parallel_tool_calls).
void translate_tool_choice(const ojson& body, const std::set<std::string>& tool_names, ojson& out) {
  if (present(body, "tool_choice")) {
    const ojson& tc = body["tool_choice"];
    if (!tc.is_object() || !present(tc, "type") || !tc["type"].is_string())
      throw bad("tool_choice", "must be {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}");
    const std::string type = tc["type"].get<std::string>();
    check_keys(tc, {"type", "name", "disable_parallel_tool_use"}, "tool_choice");
    if (type != "none" && tool_names.empty()) throw bad("tool_choice", "needs tools");
    if (type == "auto") {
      out["tool_choice"] = "auto";
    } else if (type == "any") {
      out["tool_choice"] = "required";
    } else if (type == "tool") {
      const std::string& name = get_string(tc, "name", "tool_choice");
      if (!tool_names.count(name)) throw bad("tool_choice.name", "'" + name.substr(0, 64) + "' is not one of the tools");
      out["tool_choice"] = {{"type", "function"}, {"function", {{"name", name}}}};
    } else if (type == "none") {
      if (!tool_names.empty()) out["tool_choice"] = "none";
    } else {
      throw bad("tool_choice.type", "must be \"auto\", \"any\", \"tool\" or \"none\"");
    }
    if (present(tc, "disable_parallel_tool_use")) {
      if (!tc["disable_parallel_tool_use"].is_boolean())
        throw bad("tool_choice.disable_parallel_tool_use", "must be a boolean");
      if (tc["disable_parallel_tool_use"].get<bool>() && type != "none" && !tool_names.empty())
        out["parallel_tool_calls"] = false;
    }
  }
}

// thinking {type: enabled | disabled} -> the template's enable_thinking switch.
void translate_thinking(const ojson& body, const std::string& chat_template, bool count, ojson& out) {
  if (present(body, "thinking")) {
    const ojson& th = body["thinking"];
    if (!th.is_object() || !present(th, "type") || !th["type"].is_string())
      throw bad("thinking", "must be {\"type\": \"enabled\", \"budget_tokens\": N} or {\"type\": \"disabled\"}");
    check_keys(th, {"type", "budget_tokens"}, "thinking");
    const std::string type = th["type"].get<std::string>();
    const std::string& t = chat_template;
    const bool reasons = t.find("<think>") != std::string::npos && t.find("</think>") != std::string::npos;
    const bool has_switch = t.find("enable_thinking") != std::string::npos;
    if (type == "enabled") {
      if (!present(th, "budget_tokens")) throw bad("thinking.budget_tokens", "is required with type \"enabled\"");
      const int64_t budget = positive_int(th, "budget_tokens", "thinking.budget_tokens");
      if (!count && budget >= out["max_tokens"].get<int64_t>())
        throw bad("thinking.budget_tokens", "must be less than max_tokens");
      if (!reasons) throw bad("thinking", "this model's chat template writes no reasoning (<think>) section");
      if (has_switch) out["chat_template_kwargs"] = {{"enable_thinking", true}};
    } else if (type == "disabled") {
      if (present(th, "budget_tokens")) throw bad("thinking.budget_tokens", "only with type \"enabled\"");
      if (reasons && !has_switch)
        throw bad("thinking", "this model's chat template always reasons (it has no enable_thinking switch)");
      if (has_switch) out["chat_template_kwargs"] = {{"enable_thinking", false}};
    } else {
      throw bad("thinking.type", "must be \"enabled\" or \"disabled\"");
    }
  }
}

// stop_sequences, temperature (Anthropic's 0..1), top_p, top_k, metadata, service_tier, stream.
void translate_sampling(const ojson& body, ojson& out) {
  if (present(body, "stop_sequences")) {
    const ojson& st = body["stop_sequences"];
    if (!st.is_array()) throw bad("stop_sequences", "must be an array of strings");
    if (st.size() > 4) throw bad("stop_sequences", "at most 4 stop sequences on this server");
    for (const auto& s : st) {
      if (!s.is_string() || s.get_ref<const std::string&>().empty() || s.get_ref<const std::string&>().size() > 256)
        throw bad("stop_sequences", "every entry must be a non-empty string of at most 256 bytes");
    }
    if (!st.empty()) out["stop"] = st;
  }
  if (present(body, "temperature")) out["temperature"] = number_in(body, "temperature", 0.0, 1.0);
  if (present(body, "top_p")) {
    const double p = number_in(body, "top_p", 0.0, 1.0);
    if (p <= 0.0) throw bad("top_p", "must be greater than 0 and at most 1");
    out["top_p"] = p;
  }
  if (present(body, "top_k")) {
    const ojson& k = body["top_k"];
    if (!k.is_number_integer() || k.get<int64_t>() < 0 || k.get<int64_t>() > INT32_MAX)
      throw bad("top_k", "must be an integer >= 0");
    out["top_k"] = k;
  }
  if (present(body, "metadata")) {
    const ojson& md = body["metadata"];
    if (!md.is_object()) throw bad("metadata", "must be an object");
    check_keys(md, {"user_id"}, "metadata");
    if (present(md, "user_id") && !md["user_id"].is_string()) throw bad("metadata.user_id", "must be a string");
  }
  if (present(body, "service_tier") && body["service_tier"] != "auto" && body["service_tier"] != "standard_only")
    throw bad("service_tier", "must be \"auto\" or \"standard_only\"");
  if (present(body, "stream")) {
    if (!body["stream"].is_boolean()) throw bad("stream", "must be a boolean");
    if (body["stream"].get<bool>()) {
      out["stream"] = true;
      out["stream_options"] = {{"include_usage", true}};
    }
  }
}

}  // namespace

AnthropicProtocol::AnthropicProtocol(const ModelInfo& model) : model_(model), id_(random_id("msg_", 24)) {}

ojson AnthropicProtocol::translate_body(const ojson& body, bool count) {
  static const std::set<std::string> fields = {"model",       "max_tokens", "messages", "system", "tools",
                                               "tool_choice", "stop_sequences", "temperature", "top_p", "top_k",
                                               "stream",      "metadata",   "thinking", "service_tier"};
  static const std::set<std::string> count_fields = {"model", "messages", "system", "tools", "tool_choice", "thinking"};
  static const std::set<std::string> unsupported = {"container", "mcp_servers", "context_management"};
  const std::string endpoint = count ? "/v1/messages/count_tokens" : "/v1/messages";
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (it->is_null() || (count ? count_fields : fields).count(it.key())) continue;
    if (unsupported.count(it.key())) throw bad(it.key(), "is not supported by this server");
    throw bad(it.key(), "unknown field for " + endpoint);
  }
  ojson out = ojson::object();
  if (!present(body, "model") || !body["model"].is_string()) throw bad("model", "is required (a string)");
  out["model"] = body["model"];
  if (!count) {
    if (!present(body, "max_tokens")) throw bad("max_tokens", "is required");
    out["max_tokens"] = positive_int(body, "max_tokens", "max_tokens");
  }

  ojson msgs = ojson::array();
  if (present(body, "system")) {
    const ojson& s = body["system"];
    if (!s.is_string() && !s.is_array()) throw bad("system", "must be a string or an array of text blocks");
    const std::string text = content_text(s, "system");
    if (!text.empty()) msgs.push_back({{"role", "system"}, {"content", text}});
  }
  if (!present(body, "messages")) throw bad("messages", "is required");
  const ojson& m = body["messages"];
  if (!m.is_array() || m.empty()) throw bad("messages", "must be a non-empty array");
  for (size_t i = 0; i < m.size(); ++i) translate_message(m[i], "messages[" + std::to_string(i) + "]", msgs);
  out["messages"] = std::move(msgs);

  const std::set<std::string> tool_names = translate_tools(body, out);
  translate_tool_choice(body, tool_names, out);
  translate_thinking(body, model_.chat_template, count, out);
  if (!count) translate_sampling(body, out);
  return out;
}

namespace {
ojson parse_ordered(const std::string& body_text) {
  (void)parse_body(body_text);  // bounds the depth and checks it is a JSON object (ApiError 400)
  return ojson::parse(body_text);
}
}  // namespace

Protocol::Translated AnthropicProtocol::translate(const std::string& body_text) {
  const ojson out = translate_body(parse_ordered(body_text), /*count=*/false);
  Translated t;
  t.body = out.dump();
  t.chat = true;
  t.stream = out.contains("stream");
  return t;
}

std::string AnthropicProtocol::translate_count(const std::string& body_text) {
  return translate_body(parse_ordered(body_text), /*count=*/true).dump();
}

json AnthropicProtocol::reply(const json& completion) {
  json content = json::array();
  const json& choice = first_choice(completion);
  const std::string finish = text_of(choice, "finish_reason");
  const std::string stop_sequence = text_of(choice, "stop_reason");
  const json& msg = member(choice, "message");
  if (const std::string r = text_of(msg, "reasoning_content"); !r.empty())
    content.push_back({{"type", "thinking"}, {"thinking", r}, {"signature", ""}});
  if (const std::string t = text_of(msg, "content"); !t.empty()) content.push_back({{"type", "text"}, {"text", t}});
  const json& calls = member(msg, "tool_calls");
  if (calls.is_array())
    for (const auto& c : calls) {
      const json& fn = member(c, "function");
      content.push_back({{"type", "tool_use"},
                         {"id", tool_use_id(text_of(c, "id"))},
                         {"name", text_of(fn, "name")},
                         {"input", tool_input(text_of(fn, "arguments"))}});
    }
  const json& usage = member(completion, "usage");
  const std::string model = text_of(completion, "model");
  return json{{"id", id_},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model.empty() ? model_.name : model},
              {"content", content},
              {"stop_reason", stop_sequence.empty() ? stop_reason_of(finish) : "stop_sequence"},
              {"stop_sequence", stop_sequence.empty() ? json(nullptr) : json(stop_sequence)},
              {"usage", {{"input_tokens", count_of(usage, "prompt_tokens")}, {"output_tokens", count_of(usage, "completion_tokens")}}}};
}

std::string AnthropicProtocol::event(const char* name, const json& data) const {
  return std::string("event: ") + name + "\ndata: " + dump(data) + "\n\n";
}

std::string AnthropicProtocol::close_block() {
  if (open_.empty()) return "";
  open_.clear();
  return event("content_block_stop", {{"type", "content_block_stop"}, {"index", block_}});
}

std::string AnthropicProtocol::open_block(const char* type) {
  std::string out = close_block();
  open_ = type;
  ++block_;
  json cb = {{"type", type}};
  if (open_ == "text") cb["text"] = "";
  if (open_ == "thinking") {
    cb["thinking"] = "";
    cb["signature"] = "";
  }
  return out + event("content_block_start", {{"type", "content_block_start"}, {"index", block_}, {"content_block", cb}});
}

std::string AnthropicProtocol::finish(const json* usage) {
  if (finished_) return "";
  finished_ = true;
  std::string out = close_block();
  json u = {{"output_tokens", 0}};
  if (usage) {
    u["input_tokens"] = count_of(*usage, "prompt_tokens");
    u["output_tokens"] = count_of(*usage, "completion_tokens");
  }
  out += event("message_delta", {{"type", "message_delta"},
                                 {"delta", {{"stop_reason", stop_reason_.empty() ? "end_turn" : stop_reason_},
                                            {"stop_sequence", stop_sequence_.empty() ? json(nullptr) : json(stop_sequence_)}}},
                                 {"usage", u}});
  return out + event("message_stop", {{"type", "message_stop"}});
}

std::string AnthropicProtocol::chunk(const json& c) {
  if (finished_) return "";
  std::string out;
  if (!started_) {
    started_ = true;
    json message = {{"id", id_},          {"type", "message"},      {"role", "assistant"},
                    {"model", model_.name}, {"content", json::array()}, {"stop_reason", nullptr},
                    {"stop_sequence", nullptr}, {"usage", {{"input_tokens", prompt_tokens_}, {"output_tokens", 0}}}};
    out += event("message_start", {{"type", "message_start"}, {"message", message}});
  }
  const json& choices = member(c, "choices");
  if (!choices.is_array()) return out;
  if (choices.empty()) {  // the usage chunk: the last one
    if (member(c, "usage").is_object()) out += finish(&c["usage"]);
    return out;
  }
  const json& choice = choices[0];
  const json& delta = member(choice, "delta");
  const std::string reasoning = text_of(delta, "reasoning_content"), text = text_of(delta, "content");
  if (!reasoning.empty()) {
    if (open_ != "thinking") out += open_block("thinking");
    out += event("content_block_delta", {{"type", "content_block_delta"},
                                         {"index", block_},
                                         {"delta", {{"type", "thinking_delta"}, {"thinking", reasoning}}}});
  }
  if (!text.empty()) {
    if (open_ != "text") out += open_block("text");
    out += event("content_block_delta",
                 {{"type", "content_block_delta"}, {"index", block_}, {"delta", {{"type", "text_delta"}, {"text", text}}}});
  }
  const json& calls = member(delta, "tool_calls");
  if (calls.is_array()) {
    for (const auto& call : calls) {
      const json& fn = member(call, "function");
      if (!fn.is_object()) continue;
      out += close_block();
      ++block_;
      open_ = "tool_use";
      out += event("content_block_start",
                   {{"type", "content_block_start"},
                    {"index", block_},
                    {"content_block",
                     {{"type", "tool_use"}, {"id", tool_use_id(text_of(call, "id"))}, {"name", text_of(fn, "name")},
                      {"input", json::object()}}}});
      std::string args = text_of(fn, "arguments");
      out += event("content_block_delta", {{"type", "content_block_delta"},
                                           {"index", block_},
                                           {"delta", {{"type", "input_json_delta"}, {"partial_json", args.empty() ? "{}" : args}}}});
      out += close_block();
    }
  }
  if (member(choice, "finish_reason").is_string()) {
    out += close_block();
    stop_reason_ = stop_reason_of(text_of(choice, "finish_reason"));
    if (member(choice, "stop_reason").is_string()) {
      stop_sequence_ = text_of(choice, "stop_reason");
      stop_reason_ = "stop_sequence";
    }
  }
  return out;
}

std::string AnthropicProtocol::end() {
  std::string out;
  if (!started_) out = chunk(json{{"choices", json::array({{{"delta", json::object()}}})}});
  return out + finish(nullptr);
}

std::string AnthropicProtocol::stream_error(int status, const std::string& type, const std::string& message) {
  finished_ = true;  // nothing follows an error event
  return event("error", error(status, type, message, "", ""));
}

json AnthropicProtocol::error(int status, const std::string&, const std::string& message, const std::string&,
                              const std::string& code) const {
  return anthropic_error_body(code == "server_busy" ? 503 : status, message);
}

json anthropic_count_tokens(const std::string& body_text, const ModelInfo& model) {
  AnthropicProtocol p(model);
  const std::string chat_text = p.translate_count(body_text);
  const ojson ordered = ojson::parse(chat_text);
  const json body = json::parse(chat_text);
  const ParsedRequest r = parse_chat_request(body, model, &ordered);
  return json{{"input_tokens", r.gen.prompt.size()}};
}

}  // namespace ptn::serve
