#include "serve/responses.h"

#include <ctime>
#include <set>

#include "serve/ids.h"

namespace ptn::serve {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

ApiError bad(const std::string& param, const std::string& message) {
  return ApiError(400, "invalid_request_error", "'" + param + "': " + message, param);
}

// The value of `key` unless absent or null.
const ojson* field(const ojson& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string dump_ordered(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

// Every key of `obj` must be one of `allowed` (nulls count as absent); `where` names obj.
void only_keys(const ojson& obj, const std::set<std::string>& allowed, const std::string& where) {
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (!it->is_null() && !allowed.count(it.key()))
      throw bad(where.empty() ? it.key() : where + "." + it.key(), "unknown field");
}

std::string get_string(const ojson& obj, const char* key, const std::string& where, bool required) {
  const ojson* v = field(obj, key);
  if (!v) {
    if (required) throw bad(where + "." + key, "is required");
    return "";
  }
  if (!v->is_string()) throw bad(where + "." + key, "must be a string");
  return v->get<std::string>();
}

// The text of a message's content: a string, or an array of text parts.
std::string content_text(const ojson& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad(where, "must be a string or an array of input_text / output_text parts");
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string w = where + "[" + std::to_string(j) + "]";
    const ojson& part = content[j];
    if (!part.is_object()) throw bad(w, "must be an object");
    const std::string type = get_string(part, "type", w, true);
    if (type == "input_text") {
      only_keys(part, {"type", "text"}, w);
    } else if (type == "output_text") {
      // annotations and logprobs come back with a reply's text; they do not reach the model.
      only_keys(part, {"type", "text", "annotations", "logprobs"}, w);
      for (const char* k : {"annotations", "logprobs"})
        if (const ojson* a = field(part, k); a && !a->is_array()) throw bad(w + "." + k, "must be an array");
    } else {
      throw bad(w + ".type", "'" + type.substr(0, 40) +
                                 "' parts are not supported by this server (only input_text and output_text)");
    }
    text += get_string(part, "text", w, true);
  }
  return text;
}

// A function call's arguments: JSON text of an object.
void check_arguments(const std::string& args, const std::string& where) {
  ojson a;
  try {
    a = ojson::parse(args);
  } catch (const std::exception&) {
    throw bad(where, "must be the JSON text of an object");
  }
  if (!a.is_object()) throw bad(where, "must be the JSON text of an object");
}

const char* const kNoState =
    "this server keeps no responses or conversations (it is stateless); send the whole conversation as 'input' items";

}  // namespace

ResponsesProtocol::ResponsesProtocol(const ModelInfo& model)
    : model_(model), id_(random_id("resp_", 24)), created_at_(static_cast<int64_t>(std::time(nullptr))) {}

// --- the request --------------------------------------------------------------------------------

Protocol::Translated ResponsesProtocol::translate(const std::string& body_text) {
  parse_body(body_text);  // bounded depth and valid JSON (ApiError 400 otherwise)
  const ojson body = ojson::parse(body_text);
  if (!body.is_object()) throw ApiError(400, "invalid_request_error", "the body must be a JSON object");

  // Fields accepted and honoured (or with no effect on the output, as documented).
  static const std::set<std::string> known = {
      "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "text", "max_output_tokens",
      "temperature", "top_p", "stream", "stream_options", "store", "reasoning", "metadata", "user", "truncation",
      "include", "service_tier", "safety_identifier", "prompt_cache_key", "prompt_cache_retention", "background",
      "previous_response_id", "conversation", "prompt"};
  // Responses fields this server cannot honour: refused rather than ignored.
  static const std::set<std::string> unsupported = {"top_logprobs", "max_tool_calls", "context_management",
                                                    "moderation", "prompt_cache_options"};
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& k = it.key();
    if (it->is_null() || known.count(k)) continue;
    if (unsupported.count(k)) throw bad(k, "is not supported by this server");
    throw bad(k, "unknown field for /v1/responses");
  }
  for (const char* k : {"previous_response_id", "conversation"})
    if (field(body, k)) throw bad(k, kNoState);
  if (field(body, "prompt")) throw bad("prompt", "stored prompt templates are not supported (nothing is stored)");
  if (const ojson* b = field(body, "background")) {
    if (!b->is_boolean()) throw bad("background", "must be a boolean");
    if (b->get<bool>()) throw bad("background", "background responses are not supported (nothing is stored)");
  }

  ojson chat = ojson::object();
  if (const ojson* m = field(body, "model")) chat["model"] = *m;
  echo_ = ojson::object();

  // --- input -> messages
  ojson msgs = ojson::array();
  message_source_.clear();
  call_source_.clear();
  auto push = [&](ojson msg, std::string source) {
    msgs.push_back(std::move(msg));
    message_source_.push_back(std::move(source));
    call_source_.emplace_back();
  };
  if (const ojson* ins = field(body, "instructions")) {
    if (!ins->is_string()) throw bad("instructions", "must be a string");
    push(ojson{{"role", "system"}, {"content", *ins}}, "instructions");
    echo_["instructions"] = *ins;
  } else {
    echo_["instructions"] = nullptr;
  }
  const ojson* input = field(body, "input");
  if (!input && msgs.empty()) throw bad("input", "is required (a string, or an array of input items)");
  if (input && input->is_string()) {
    push(ojson{{"role", "user"}, {"content", *input}}, "input");
  } else if (input) {
    if (!input->is_array()) throw bad("input", "must be a string or an array of input items");
    if (input->size() > kMaxResponseInputItems)
      throw bad("input", "at most " + std::to_string(kMaxResponseInputItems) + " items");
    std::string reasoning;         // a reasoning item's text, for the assistant turn it precedes
    std::string reasoning_source;
    bool assistant_open = false;   // the last message is an assistant turn that calls may join
    auto flush_reasoning = [&] {   // reasoning with no turn after it: a turn of its own
      if (reasoning_source.empty()) return;
      push(ojson{{"role", "assistant"}, {"content", ""}, {"reasoning_content", reasoning}}, reasoning_source);
      reasoning.clear();
      reasoning_source.clear();
    };
    auto assistant = [&](ojson msg, const std::string& source) {
      if (!reasoning_source.empty()) msg["reasoning_content"] = reasoning;
      reasoning.clear();
      reasoning_source.clear();
      push(std::move(msg), source);
      assistant_open = true;
    };
    for (size_t k = 0; k < input->size(); ++k) {
      const std::string where = "input[" + std::to_string(k) + "]";
      const ojson& item = (*input)[k];
      if (!item.is_object()) throw bad(where, "must be an object");
      std::string type = get_string(item, "type", where, false);
      if (type.empty()) {
        if (!field(item, "role")) throw bad(where + ".type", "is required (or a message's \"role\")");
        type = "message";
      }
      if (type == "message") {
        only_keys(item, {"type", "role", "content", "id", "status"}, where);
        const std::string role = get_string(item, "role", where, true);
        if (role != "user" && role != "assistant" && role != "system" && role != "developer")
          throw bad(where + ".role", "must be \"user\", \"assistant\", \"system\" or \"developer\"");
        const ojson* c = field(item, "content");
        if (!c) throw bad(where + ".content", "is required");
        std::string text = content_text(*c, where + ".content");
        if (role == "assistant") {
          assistant(ojson{{"role", "assistant"}, {"content", std::move(text)}}, where);
        } else {
          flush_reasoning();
          // developer messages are the system turn of a chat template.
          push(ojson{{"role", role == "developer" ? "system" : role}, {"content", std::move(text)}}, where);
          assistant_open = false;
        }
      } else if (type == "function_call") {
        only_keys(item, {"type", "call_id", "name", "arguments", "id", "status"}, where);
        const std::string call_id = get_string(item, "call_id", where, true);
        if (call_id.empty() || call_id.size() > 256) throw bad(where + ".call_id", "must be 1-256 characters");
        const std::string name = get_string(item, "name", where, true);
        const std::string args = get_string(item, "arguments", where, true);
        check_arguments(args, where + ".arguments");
        ojson call = {{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}};
        if (!assistant_open) assistant(ojson{{"role", "assistant"}, {"content", ""}}, where);
        ojson& last = msgs.back();
        if (!last.contains("tool_calls")) last["tool_calls"] = ojson::array();
        last["tool_calls"].push_back(std::move(call));
        call_source_.back().push_back(where);
      } else if (type == "function_call_output") {
        only_keys(item, {"type", "call_id", "output", "id", "status"}, where);
        const std::string call_id = get_string(item, "call_id", where, true);
        const ojson* out = field(item, "output");
        if (!out) throw bad(where + ".output", "is required");
        std::string text = content_text(*out, where + ".output");
        flush_reasoning();
        push(ojson{{"role", "tool"}, {"tool_call_id", call_id}, {"content", std::move(text)}}, where);
        assistant_open = false;
      } else if (type == "reasoning") {
        only_keys(item, {"type", "id", "summary", "content", "encrypted_content", "status"}, where);
        if (field(item, "encrypted_content"))
          throw bad(where + ".encrypted_content", "this server makes no encrypted reasoning; send its text as content");
        // The reasoning text: its content (reasoning_text parts), else its summary.
        std::string text;
        for (const char* k : {"content", "summary"}) {
          const ojson* parts = field(item, k);
          if (!parts) continue;
          if (!parts->is_array()) throw bad(where + "." + k, "must be an array");
          std::string t;
          for (size_t j = 0; j < parts->size(); ++j) {
            const std::string w = where + "." + k + "[" + std::to_string(j) + "]";
            const ojson& p = (*parts)[j];
            if (!p.is_object()) throw bad(w, "must be an object");
            only_keys(p, {"type", "text"}, w);
            const std::string pt = get_string(p, "type", w, true);
            if (pt != (std::string(k) == "content" ? "reasoning_text" : "summary_text"))
              throw bad(w + ".type", std::string("must be \"") +
                                         (std::string(k) == "content" ? "reasoning_text" : "summary_text") + "\"");
            if (!t.empty()) t += "\n\n";
            t += get_string(p, "text", w, true);
          }
          if (text.empty()) text = std::move(t);
        }
        if (!reasoning.empty() && !text.empty()) reasoning += "\n\n";
        reasoning += text;
        reasoning_source = where;
      } else if (type == "item_reference") {
        throw bad(where, std::string("item references need stored items; ") + kNoState +
                             " (with the Vercel AI SDK: providerOptions.openai.store = false)");
      } else {
        throw bad(where + ".type", "'" + type.substr(0, 40) +
                                       "' items are not supported by this server (message, function_call, "
                                       "function_call_output and reasoning are)");
      }
    }
    flush_reasoning();
  }
  if (msgs.empty()) throw bad("input", "is empty");
  chat["messages"] = std::move(msgs);

  // --- tools
  echo_["tools"] = ojson::array();
  if (const ojson* tools = field(body, "tools")) {
    if (!tools->is_array()) throw bad("tools", "must be an array of function tools");
    if (tools->size() > kMaxTools) throw bad("tools", "at most " + std::to_string(kMaxTools) + " tools");
    ojson out = ojson::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string where = "tools[" + std::to_string(i) + "]";
      const ojson& t = (*tools)[i];
      if (!t.is_object()) throw bad(where, "must be an object");
      const std::string type = get_string(t, "type", where, true);
      if (type != "function")
        throw bad(where + ".type", "'" + type.substr(0, 40) +
                                       "' tools are not supported by this server (only \"function\" tools, which the "
                                       "client runs)");
      only_keys(t, {"type", "name", "description", "parameters", "strict"}, where);
      ojson fn = ojson::object();
      for (const char* k : {"name", "description", "parameters", "strict"})
        if (const ojson* v = field(t, k)) fn[k] = *v;
      out.push_back(ojson{{"type", "function"}, {"function", std::move(fn)}});
    }
    chat["tools"] = std::move(out);
    echo_["tools"] = *tools;
  }
  echo_["tool_choice"] = "auto";
  if (const ojson* tc = field(body, "tool_choice")) {
    if (*tc == "auto" || *tc == "none" || *tc == "required") {
      chat["tool_choice"] = *tc;
    } else if (tc->is_object()) {
      const std::string type = get_string(*tc, "type", "tool_choice", true);
      if (type != "function")
        throw bad("tool_choice.type", "'" + type.substr(0, 40) +
                                          "' is not supported by this server (\"auto\", \"none\", \"required\" or "
                                          "{\"type\": \"function\", \"name\": ...})");
      only_keys(*tc, {"type", "name"}, "tool_choice");
      chat["tool_choice"] = ojson{{"type", "function"},
                                  {"function", {{"name", get_string(*tc, "name", "tool_choice", true)}}}};
    } else {
      throw bad("tool_choice", "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": ...}");
    }
    echo_["tool_choice"] = *tc;
  }
  echo_["parallel_tool_calls"] = true;
  if (const ojson* p = field(body, "parallel_tool_calls")) {
    chat["parallel_tool_calls"] = *p;
    echo_["parallel_tool_calls"] = *p;
  }

  // --- text.format -> response_format
  echo_["text"] = ojson{{"format", {{"type", "text"}}}};
  if (const ojson* text = field(body, "text")) {
    if (!text->is_object()) throw bad("text", "must be an object {\"format\": ...}");
    only_keys(*text, {"format", "verbosity"}, "text");
    if (const ojson* v = field(*text, "verbosity"); v && *v != "medium")
      throw bad("text.verbosity", "only \"medium\" (this server has no verbosity control)");
    if (const ojson* f = field(*text, "format")) {
      if (!f->is_object()) throw bad("text.format", "must be an object with a \"type\"");
      const std::string type = get_string(*f, "type", "text.format", true);
      if (type == "text" || type == "json_object") {
        only_keys(*f, {"type"}, "text.format");
        chat["response_format"] = ojson{{"type", type}};
      } else if (type == "json_schema") {
        // description tells a model about the schema; the grammar enforces the schema itself.
        only_keys(*f, {"type", "name", "schema", "strict", "description"}, "text.format");
        ojson js = {{"name", get_string(*f, "name", "text.format", true)}};
        const ojson* schema = field(*f, "schema");
        if (!schema) throw bad("text.format.schema", "is required");
        js["schema"] = *schema;
        if (const ojson* s = field(*f, "strict")) js["strict"] = *s;
        chat["response_format"] = ojson{{"type", "json_schema"}, {"json_schema", std::move(js)}};
      } else {
        throw bad("text.format.type", "must be \"text\", \"json_object\" or \"json_schema\"");
      }
      echo_["text"] = ojson{{"format", *f}};
    }
  }

  // A forced call (tool_choice "required" or a named function) makes the reply the call(s) only,
  // so the format of the reply's text has nothing to constrain in this turn. Agents with an
  // output type send both (a tool first, then the formatted answer in a later turn).
  if (const ojson* tc = field(chat, "tool_choice"); tc && *tc != "auto" && *tc != "none")
    chat.erase("response_format");

  // --- sampling and length
  echo_["max_output_tokens"] = nullptr;
  if (const ojson* m = field(body, "max_output_tokens")) {
    chat["max_tokens"] = *m;
    echo_["max_output_tokens"] = *m;
  }
  echo_["temperature"] = 1.0;
  echo_["top_p"] = 1.0;
  for (const char* k : {"temperature", "top_p"})
    if (const ojson* v = field(body, k)) {
      chat[k] = *v;
      echo_[k] = *v;
    }
  echo_["reasoning"] = ojson{{"effort", nullptr}, {"summary", nullptr}};
  if (const ojson* r = field(body, "reasoning")) {
    if (!r->is_object()) throw bad("reasoning", "must be an object {\"effort\": ...}");
    only_keys(*r, {"effort", "summary", "generate_summary"}, "reasoning");
    for (const char* k : {"summary", "generate_summary"})
      if (field(*r, k))
        throw bad(std::string("reasoning.") + k,
                  "this server makes no reasoning summaries (the reasoning comes back as reasoning_text)");
    if (const ojson* e = field(*r, "effort")) {
      chat["reasoning_effort"] = *e;  // checked on the chat path: the template must read it
      echo_["reasoning"]["effort"] = *e;
    }
  }

  // --- accepted with no effect on the output (documented)
  for (const char* k : {"user", "safety_identifier", "prompt_cache_key", "prompt_cache_retention", "service_tier"})
    if (const ojson* v = field(body, k); v && !v->is_string()) throw bad(k, "must be a string");
  echo_["user"] = field(body, "user") ? body["user"] : ojson(nullptr);
  if (const ojson* s = field(body, "store"); s && !s->is_boolean()) throw bad("store", "must be a boolean");
  echo_["store"] = false;  // nothing is kept, whatever the client asked
  echo_["metadata"] = ojson::object();
  if (const ojson* md = field(body, "metadata")) {
    if (!md->is_object()) throw bad("metadata", "must be an object of string values");
    if (md->size() > kMaxMetadataKeys) throw bad("metadata", "at most " + std::to_string(kMaxMetadataKeys) + " keys");
    for (auto it = md->begin(); it != md->end(); ++it) {
      if (it.key().size() > 64) throw bad("metadata", "keys are at most 64 characters");
      if (!it->is_string() || it->get_ref<const std::string&>().size() > 512)
        throw bad("metadata." + it.key().substr(0, 64), "must be a string of at most 512 characters");
    }
    echo_["metadata"] = *md;
  }
  echo_["truncation"] = "disabled";
  if (const ojson* t = field(body, "truncation")) {
    if (*t == "auto")
      throw bad("truncation", "\"auto\" is not supported: a conversation longer than the context is refused "
                              "(context_length_exceeded), never cut");
    if (*t != "disabled") throw bad("truncation", "must be \"disabled\"");
  }
  if (const ojson* inc = field(body, "include")) {
    if (!inc->is_array()) throw bad("include", "must be an array of strings");
    for (size_t i = 0; i < inc->size(); ++i) {
      // Reasoning comes back as plain text: there is no encrypted content to include.
      if ((*inc)[i] == "reasoning.encrypted_content") continue;
      throw bad("include[" + std::to_string(i) + "]",
                "only \"reasoning.encrypted_content\" is accepted (and has no effect: reasoning is returned as text)");
    }
  }

  // --- streaming
  Translated t;
  if (const ojson* s = field(body, "stream")) {
    if (!s->is_boolean()) throw bad("stream", "must be a boolean");
    t.stream = s->get<bool>();
  }
  if (const ojson* so = field(body, "stream_options")) {
    if (!so->is_object()) throw bad("stream_options", "must be an object");
    if (!t.stream) throw bad("stream_options", "needs \"stream\": true");
    only_keys(*so, {"include_obfuscation"}, "stream_options");
    if (const ojson* o = field(*so, "include_obfuscation"); o && !o->is_boolean())
      throw bad("stream_options.include_obfuscation", "must be a boolean");
  }
  if (t.stream) {
    chat["stream"] = true;
    chat["stream_options"] = ojson{{"include_usage", true}};
  }
  t.chat = true;
  t.body = dump_ordered(chat);
  return t;
}

std::string ResponsesProtocol::responses_param(const std::string& p) const {
  auto starts = [&](const std::string& prefix) { return p.compare(0, prefix.size(), prefix) == 0; };
  if (p == "messages") return "input";
  if (starts("messages[")) {
    const size_t close = p.find(']');
    size_t i = 0;
    try {
      i = std::stoul(p.substr(9, close - 9));
    } catch (const std::exception&) {
      return "input";
    }
    if (close == std::string::npos || i >= message_source_.size()) return "input";
    std::string rest = p.substr(close + 1);
    const std::string calls = ".tool_calls[";
    if (rest.compare(0, calls.size(), calls) == 0) {  // a call: the function_call item it came from
      const size_t c2 = rest.find(']');
      size_t j = 0;
      try {
        j = std::stoul(rest.substr(calls.size(), c2 - calls.size()));
      } catch (const std::exception&) {
        return message_source_[i];
      }
      if (c2 == std::string::npos || j >= call_source_[i].size()) return message_source_[i];
      std::string tail = rest.substr(c2 + 1);
      if (tail.compare(0, 9, ".function") == 0) tail = tail.substr(9);
      return call_source_[i][j] + tail;
    }
    return message_source_[i] + rest;
  }
  if (p == "max_tokens" || p == "max_completion_tokens") return "max_output_tokens";
  if (p == "reasoning_effort") return "reasoning.effort";
  if (starts("response_format")) {
    std::string rest = p.substr(15);
    if (rest.compare(0, 12, ".json_schema") == 0) rest = rest.substr(12);
    return "text.format" + rest;
  }
  if (starts("tools[")) {
    const size_t f = p.find("].function");
    if (f != std::string::npos) return p.substr(0, f + 1) + p.substr(f + 10);
    return p;
  }
  if (p == "tool_choice.function.name") return "tool_choice.name";
  return p;
}

json ResponsesProtocol::error(int, const std::string& type, const std::string& message, const std::string& param,
                              const std::string& code) const {
  const std::string rp = responses_param(param);
  std::string msg = message;
  const std::string quoted = "'" + param + "'";
  if (!param.empty() && rp != param && msg.compare(0, quoted.size(), quoted) == 0)
    msg = "'" + rp + "'" + msg.substr(quoted.size());
  return error_body(msg, type, rp, code);
}

// --- the reply ----------------------------------------------------------------------------------

json ResponsesProtocol::usage_json(const json& u) const {
  auto num = [&](const json& obj, const char* k) -> int64_t {
    auto it = obj.find(k);
    return it != obj.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
  };
  int64_t cached = 0;
  if (auto d = u.find("prompt_tokens_details"); d != u.end() && d->is_object()) cached = num(*d, "cached_tokens");
  const int64_t in = num(u, "prompt_tokens"), out = num(u, "completion_tokens");
  // Reasoning tokens are not counted apart from the other output tokens.
  return json{{"input_tokens", in},
              {"input_tokens_details", {{"cached_tokens", cached}}},
              {"output_tokens", out},
              {"output_tokens_details", {{"reasoning_tokens", 0}}},
              {"total_tokens", in + out}};
}

void ResponsesProtocol::set_finish(const std::string& finish_reason) {
  finished_ = true;
  incomplete_ = finish_reason == "length";
}

json ResponsesProtocol::response_object(const std::string& status) const {
  ojson r = {{"id", id_},
             {"object", "response"},
             {"created_at", created_at_},
             {"status", status},
             {"background", false},
             {"error", nullptr},
             {"incomplete_details", nullptr},
             {"model", model_.name}};
  if (status == "incomplete") r["incomplete_details"] = ojson{{"reason", "max_output_tokens"}};
  r["output"] = output_;
  r["usage"] = usage_;
  r["previous_response_id"] = nullptr;
  r["service_tier"] = "default";
  for (auto it = echo_.begin(); it != echo_.end(); ++it) r[it.key()] = it.value();
  return json::parse(dump_ordered(r));
}

namespace {

ojson message_item(const std::string& id, const std::string& status, const std::string& text) {
  return ojson{{"id", id},
               {"type", "message"},
               {"status", status},
               {"role", "assistant"},
               {"content", ojson::array({ojson{{"type", "output_text"},
                                               {"text", text},
                                               {"annotations", ojson::array()},
                                               {"logprobs", ojson::array()}}})}};
}

ojson reasoning_item(const std::string& id, const std::string& status, const std::string& text) {
  return ojson{{"id", id},
               {"type", "reasoning"},
               {"status", status},
               {"summary", ojson::array()},
               {"content", ojson::array({ojson{{"type", "reasoning_text"}, {"text", text}}})}};
}

ojson function_call(const std::string& id, const std::string& status, const std::string& call_id,
                    const std::string& name, const std::string& arguments) {
  return ojson{{"id", id},       {"type", "function_call"}, {"status", status},
               {"call_id", call_id}, {"name", name},        {"arguments", arguments}};
}

// (The readers of protocol.h, as pointers: nullptr for an absent or null member.)
const json* member_ptr(const json& obj, const char* key) {
  const json& v = member(obj, key);
  return v.is_null() ? nullptr : &v;
}

const json* first_choice_ptr(const json& j) {
  const json& c = first_choice(j);
  return c.is_null() ? nullptr : &c;
}

}  // namespace

json ResponsesProtocol::reply(const json& completion) {
  output_ = ojson::array();
  const json* choice = first_choice_ptr(completion);
  const json* message = choice ? member_ptr(*choice, "message") : nullptr;
  set_finish(choice ? text_of(*choice, "finish_reason") : "");
  const std::string item_status = incomplete_ ? "incomplete" : "completed";
  if (message) {
    const std::string reasoning = text_of(*message, "reasoning_content");
    if (!reasoning.empty()) output_.push_back(reasoning_item(random_id("rs_", 24), item_status, reasoning));
    const std::string text = text_of(*message, "content");
    const json* calls = member_ptr(*message, "tool_calls");
    const bool has_calls = calls && calls->is_array() && !calls->empty();
    if (!text.empty() || !has_calls) output_.push_back(message_item(random_id("msg_", 24), item_status, text));
    if (has_calls)
      for (const json& c : *calls) {
        const json* fn = member_ptr(c, "function");
        output_.push_back(function_call(random_id("fc_", 24), "completed", text_of(c, "id"),
                                        fn ? text_of(*fn, "name") : "", fn ? text_of(*fn, "arguments") : ""));
      }
  } else {
    output_.push_back(message_item(random_id("msg_", 24), item_status, ""));
  }
  if (const json* u = member_ptr(completion, "usage")) usage_ = usage_json(*u);
  return response_object(incomplete_ ? "incomplete" : "completed");
}

// --- streaming ----------------------------------------------------------------------------------

std::string ResponsesProtocol::event(const std::string& type, json data) {
  ojson e = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto it = data.begin(); it != data.end(); ++it) e[it.key()] = it.value();
  return "event: " + type + "\ndata: " + dump_ordered(e) + "\n\n";
}

std::string ResponsesProtocol::start_stream() {
  if (started_) return "";
  started_ = true;
  const json r = response_object("in_progress");
  std::string out = event("response.created", {{"response", r}});  // (one statement each: events are numbered in order)
  out += event("response.in_progress", {{"response", r}});
  return out;
}

std::string ResponsesProtocol::open_message() {
  open_ = Open::Message;
  open_id_ = random_id("msg_", 24);
  open_text_.clear();
  const auto index = static_cast<int64_t>(output_.size());
  ojson item = message_item(open_id_, "in_progress", "");
  item["content"] = ojson::array();
  std::string out =
      event("response.output_item.added", {{"output_index", index}, {"item", json::parse(dump_ordered(item))}});
  out += event("response.content_part.added",
               {{"item_id", open_id_},
                {"output_index", index},
                {"content_index", 0},
                {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}, {"logprobs", json::array()}}}});
  return out;
}

std::string ResponsesProtocol::open_reasoning() {
  open_ = Open::Reasoning;
  open_id_ = random_id("rs_", 24);
  open_text_.clear();
  const auto index = static_cast<int64_t>(output_.size());
  ojson item = reasoning_item(open_id_, "in_progress", "");
  item["content"] = ojson::array();
  std::string out =
      event("response.output_item.added", {{"output_index", index}, {"item", json::parse(dump_ordered(item))}});
  out += event("response.content_part.added", {{"item_id", open_id_},
                                               {"output_index", index},
                                               {"content_index", 0},
                                               {"part", {{"type", "reasoning_text"}, {"text", ""}}}});
  return out;
}

std::string ResponsesProtocol::close_open_item() {
  if (open_ == Open::None) return "";
  const auto index = static_cast<int64_t>(output_.size());
  const std::string status = incomplete_ ? "incomplete" : "completed";
  std::string out;
  ojson item;
  if (open_ == Open::Message) {
    out += event("response.output_text.done", {{"item_id", open_id_},
                                               {"output_index", index},
                                               {"content_index", 0},
                                               {"text", open_text_},
                                               {"logprobs", json::array()}});
    out += event("response.content_part.done",
                 {{"item_id", open_id_},
                  {"output_index", index},
                  {"content_index", 0},
                  {"part", {{"type", "output_text"}, {"text", open_text_}, {"annotations", json::array()}, {"logprobs", json::array()}}}});
    item = message_item(open_id_, status, open_text_);
  } else {
    out += event("response.reasoning_text.done",
                 {{"item_id", open_id_}, {"output_index", index}, {"content_index", 0}, {"text", open_text_}});
    out += event("response.content_part.done", {{"item_id", open_id_},
                                                {"output_index", index},
                                                {"content_index", 0},
                                                {"part", {{"type", "reasoning_text"}, {"text", open_text_}}}});
    item = reasoning_item(open_id_, status, open_text_);
  }
  out += event("response.output_item.done", {{"output_index", index}, {"item", json::parse(dump_ordered(item))}});
  output_.push_back(std::move(item));
  open_ = Open::None;
  open_text_.clear();
  return out;
}

std::string ResponsesProtocol::function_call_item(const std::string& call_id, const std::string& name,
                                                  const std::string& arguments) {
  const auto index = static_cast<int64_t>(output_.size());
  const std::string id = random_id("fc_", 24);
  std::string out;
  out += event("response.output_item.added",
               {{"output_index", index}, {"item", json::parse(dump_ordered(function_call(id, "in_progress", call_id, name, "")))}});
  out += event("response.function_call_arguments.delta", {{"item_id", id}, {"output_index", index}, {"delta", arguments}});
  out += event("response.function_call_arguments.done",
               {{"item_id", id}, {"output_index", index}, {"name", name}, {"arguments", arguments}});
  ojson item = function_call(id, "completed", call_id, name, arguments);
  out += event("response.output_item.done", {{"output_index", index}, {"item", json::parse(dump_ordered(item))}});
  output_.push_back(std::move(item));
  return out;
}

std::string ResponsesProtocol::chunk(const json& c) {
  if (failed_ || ended_) return "";
  std::string out = start_stream();
  if (const json* u = member_ptr(c, "usage"); u && u->is_object()) usage_ = usage_json(*u);
  const json* choice = first_choice_ptr(c);
  if (!choice || finished_) return out;
  if (const json* delta = member_ptr(*choice, "delta")) {
    const std::string reasoning = text_of(*delta, "reasoning_content");
    if (!reasoning.empty()) {
      if (open_ != Open::Reasoning) {
        out += close_open_item();
        out += open_reasoning();
      }
      out += event("response.reasoning_text.delta", {{"item_id", open_id_},
                                                     {"output_index", static_cast<int64_t>(output_.size())},
                                                     {"content_index", 0},
                                                     {"delta", reasoning}});
      open_text_ += reasoning;
    }
    const std::string content = text_of(*delta, "content");
    if (!content.empty()) {
      if (open_ != Open::Message) {
        out += close_open_item();
        out += open_message();
      }
      out += event("response.output_text.delta", {{"item_id", open_id_},
                                                  {"output_index", static_cast<int64_t>(output_.size())},
                                                  {"content_index", 0},
                                                  {"delta", content},
                                                  {"logprobs", json::array()}});
      open_text_ += content;
    }
    if (const json* calls = member_ptr(*delta, "tool_calls"); calls && calls->is_array() && !calls->empty()) {
      out += close_open_item();
      for (const json& call : *calls) {
        const json* fn = member_ptr(call, "function");
        out += function_call_item(text_of(call, "id"), fn ? text_of(*fn, "name") : "",
                                  fn ? text_of(*fn, "arguments") : "");
      }
    }
  }
  if (const json* fr = member_ptr(*choice, "finish_reason"); fr && fr->is_string()) {
    set_finish(fr->get<std::string>());
    out += close_open_item();
    // A reply of no text and no calls is still one (empty) message.
    if (output_.empty()) {
      out += open_message();
      out += close_open_item();
    }
  }
  return out;
}

std::string ResponsesProtocol::end() {
  if (failed_ || ended_) return "";
  ended_ = true;
  std::string out = start_stream();
  if (!finished_) {  // (the chat stream always ends with a finish_reason; this closes it regardless)
    finished_ = true;
    out += close_open_item();
    if (output_.empty()) {
      out += open_message();
      out += close_open_item();
    }
  }
  const std::string status = incomplete_ ? "incomplete" : "completed";
  out += event("response." + status, {{"response", response_object(status)}});
  return out;
}

std::string ResponsesProtocol::stream_error(int, const std::string& type, const std::string& message) {
  if (failed_ || ended_) return "";
  failed_ = true;
  std::string out = start_stream();
  const std::string code = type == "invalid_request_error" ? "invalid_request_error" : "server_error";
  out += event("error", {{"code", code}, {"message", message}, {"param", nullptr}});
  json r = response_object("failed");
  r["error"] = {{"code", code}, {"message", message}};
  out += event("response.failed", {{"response", r}});
  return out;
}

}  // namespace ptn::serve
