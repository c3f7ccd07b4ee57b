#include "serve/ollama.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <set>

namespace ptn::serve {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

ApiError bad(const std::string& param, const std::string& message) {
  return ApiError(400, "invalid_request_error", "'" + param + "': " + message, param);
}

bool present(const ojson& o, const char* k) { return o.contains(k) && !o[k].is_null(); }

void check_keys(const ojson& o, const std::set<std::string>& known, const std::string& where, const std::string& what) {
  for (auto it = o.begin(); it != o.end(); ++it)
    if (!it->is_null() && !known.count(it.key()))
      throw bad(where.empty() ? it.key() : where + "." + it.key(), what);
}

const std::string& get_string(const ojson& o, const char* k, const std::string& where) {
  if (!o[k].is_string()) throw bad(where, "must be a string");
  return o[k].get_ref<const std::string&>();
}

double number_in(const ojson& o, const char* k, const std::string& where, double lo, double hi) {
  const ojson& v = o[k];
  if (!v.is_number()) throw bad(where, "must be a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) throw bad(where, "must be between " + json(lo).dump() + " and " + json(hi).dump());
  return x;
}

int64_t integer(const ojson& o, const char* k, const std::string& where) {
  const ojson& v = o[k];
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)))
    throw bad(where, "must be an integer");
  return v.get<int64_t>();
}

// RFC 3339 in UTC with nanoseconds, as Ollama writes created_at.
std::string rfc3339(std::chrono::system_clock::time_point t) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(ns % 1000000000));
  return buf;
}

std::string rfc3339_secs(int64_t unix_secs) {
  return rfc3339(std::chrono::system_clock::time_point(std::chrono::seconds(unix_secs)));
}

// options {...} -> the OpenAI sampling fields, each range checked under its Ollama name.
void translate_options(const ojson& opts, const ModelInfo& model, ojson& out) {
  if (!opts.is_object()) throw bad("options", "must be an object");
  static const std::set<std::string> known = {"temperature", "top_p", "top_k", "seed", "num_predict", "stop",
                                              "repeat_penalty", "presence_penalty", "frequency_penalty", "min_p",
                                              "num_ctx"};
  check_keys(opts, known, "options", "is not supported by this server (the options taken are listed in docs/http-api.md)");
  if (present(opts, "temperature")) out["temperature"] = number_in(opts, "temperature", "options.temperature", 0.0, 2.0);
  if (present(opts, "top_p")) {
    const double p = number_in(opts, "top_p", "options.top_p", 0.0, 1.0);
    if (p <= 0.0) throw bad("options.top_p", "must be greater than 0 and at most 1");
    out["top_p"] = p;
  }
  if (present(opts, "top_k")) {
    const int64_t k = integer(opts, "top_k", "options.top_k");
    if (k < 0 || k > INT32_MAX) throw bad("options.top_k", "must be an integer >= 0");
    out["top_k"] = k;
  }
  if (present(opts, "min_p")) out["min_p"] = number_in(opts, "min_p", "options.min_p", 0.0, 1.0);
  if (present(opts, "seed")) out["seed"] = integer(opts, "seed", "options.seed");
  if (present(opts, "repeat_penalty"))
    out["repetition_penalty"] = number_in(opts, "repeat_penalty", "options.repeat_penalty", 1e-3, 100.0);
  if (present(opts, "presence_penalty"))
    out["presence_penalty"] = number_in(opts, "presence_penalty", "options.presence_penalty", -2.0, 2.0);
  if (present(opts, "frequency_penalty"))
    out["frequency_penalty"] = number_in(opts, "frequency_penalty", "options.frequency_penalty", -2.0, 2.0);
  if (present(opts, "num_predict")) {
    const int64_t n = integer(opts, "num_predict", "options.num_predict");
    // -1: no limit, -2: fill the context; both are the rest of the context here.
    if (n == 0 || n < -2) throw bad("options.num_predict", "must be >= 1, or -1 / -2 for the rest of the context");
    if (n > 0) out["max_tokens"] = n;
  }
  if (present(opts, "num_ctx")) {
    const int64_t n = integer(opts, "num_ctx", "options.num_ctx");
    if (n < 1) throw bad("options.num_ctx", "must be >= 1");
    if (n > model.context)
      throw bad("options.num_ctx", std::to_string(n) + " is more than this server's context of " +
                                       std::to_string(model.context) + " tokens (ptn serve --ctx)");
  }
  if (present(opts, "stop")) {
    const ojson& st = opts["stop"];
    if (!st.is_array()) throw bad("options.stop", "must be an array of strings");
    if (st.size() > 4) throw bad("options.stop", "at most 4 stop sequences");
    for (const auto& s : st)
      if (!s.is_string() || s.get_ref<const std::string&>().empty() || s.get_ref<const std::string&>().size() > 256)
        throw bad("options.stop", "every entry must be a non-empty string of at most 256 bytes");
    if (!st.empty()) out["stop"] = st;
  }
}

// format: "json" or a JSON Schema object -> response_format.
void translate_format(const ojson& f, ojson& out) {
  if (f.is_string()) {
    if (f == "") return;
    if (f != "json") throw bad("format", "must be \"json\" or a JSON Schema object");
    out["response_format"] = {{"type", "json_object"}};
    return;
  }
  if (!f.is_object()) throw bad("format", "must be \"json\" or a JSON Schema object");
  out["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "format"}, {"schema", f}}}};
}

// think: true / false (the template's enable_thinking) or "low" / "medium" / "high"
// (reasoning_effort, for templates that read it).
void translate_think(const ojson& th, const ModelInfo& model, ojson& out) {
  const std::string& t = model.chat_template;
  const bool reasons = t.find("<think>") != std::string::npos && t.find("</think>") != std::string::npos;
  const bool has_switch = t.find("enable_thinking") != std::string::npos;
  if (th.is_boolean()) {
    if (th.get<bool>() && !reasons && t.find("reasoning_effort") == std::string::npos)
      throw bad("think", "this model's chat template writes no reasoning (<think>) section");
    if (!th.get<bool>() && reasons && !has_switch)
      throw bad("think", "this model's chat template always reasons (it has no enable_thinking switch)");
    if (has_switch) out["chat_template_kwargs"] = {{"enable_thinking", th.get<bool>()}};
    return;
  }
  if (th.is_string() && (th == "low" || th == "medium" || th == "high")) {
    if (t.find("reasoning_effort") == std::string::npos)
      throw bad("think", "this model's chat template takes no reasoning effort; use true or false");
    out["reasoning_effort"] = th;
    return;
  }
  throw bad("think", "must be true, false, \"low\", \"medium\" or \"high\"");
}

void refuse_images(const ojson& o, const std::string& where) {
  if (present(o, "images") && !(o["images"].is_array() && o["images"].empty()))
    throw bad(where, "images are not supported by this server (it serves a text-only model)");
}

ojson translate_messages(const ojson& m) {
  if (!m.is_array() || m.empty()) throw bad("messages", "must be a non-empty array");
  ojson out = ojson::array();
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string w = "messages[" + std::to_string(i) + "]";
    const ojson& msg = m[i];
    if (!msg.is_object()) throw bad(w, "must be an object with a role and content");
    check_keys(msg, {"role", "content", "images", "tool_calls", "thinking", "tool_name"}, w, "unknown message field");
    refuse_images(msg, w + ".images");
    if (!present(msg, "role")) throw bad(w + ".role", "is required");
    const std::string& role = get_string(msg, "role", w + ".role");
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      throw bad(w + ".role", "must be \"system\", \"user\", \"assistant\" or \"tool\"");
    ojson o = {{"role", role}, {"content", present(msg, "content") ? get_string(msg, "content", w + ".content") : ""}};
    if (present(msg, "thinking")) o["reasoning_content"] = get_string(msg, "thinking", w + ".thinking");
    if (present(msg, "tool_name")) o["name"] = get_string(msg, "tool_name", w + ".tool_name");
    if (present(msg, "tool_calls")) {
      const ojson& calls = msg["tool_calls"];
      if (!calls.is_array()) throw bad(w + ".tool_calls", "must be an array");
      ojson oc = ojson::array();
      for (size_t j = 0; j < calls.size(); ++j) {
        const std::string cw = w + ".tool_calls[" + std::to_string(j) + "]";
        const ojson& c = calls[j];
        if (!c.is_object() || !present(c, "function") || !c["function"].is_object())
          throw bad(cw, "must be {\"function\": {\"name\", \"arguments\"}}");
        const ojson& fn = c["function"];
        check_keys(fn, {"name", "arguments", "index"}, cw + ".function", "unknown field");
        if (!present(fn, "name")) throw bad(cw + ".function.name", "is required");
        const std::string& name = get_string(fn, "name", cw + ".function.name");
        const ojson args = present(fn, "arguments") ? fn["arguments"] : ojson::object();
        if (!args.is_object()) throw bad(cw + ".function.arguments", "must be an object");
        oc.push_back({{"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}});
      }
      if (!oc.empty()) o["tool_calls"] = std::move(oc);
    }
    out.push_back(std::move(o));
  }
  return out;
}


int64_t ns_of(const json& timings, const char* ms_key) {
  if (!timings.is_object() || !timings.contains(ms_key) || !timings[ms_key].is_number()) return 0;
  const double ms = timings[ms_key].get<double>();
  if (!(ms >= 0.0 && ms < 1e12)) return 0;  // (not a duration this server measured)
  return static_cast<int64_t>(std::llround(ms * 1e6));
}

json ollama_calls(const json& calls) {
  json out = json::array();
  if (!calls.is_array()) return out;
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& c = calls[i];
    const json& fn = member(c, "function");
    if (!fn.is_object()) continue;
    json args = json::parse(text_of(fn, "arguments"), nullptr, /*allow_exceptions=*/false);
    if (!args.is_object()) args = json::object();  // the chat path returns object arguments only
    out.push_back({{"function", {{"index", i}, {"name", text_of(fn, "name")}, {"arguments", args}}}});
  }
  return out;
}


}  // namespace

OllamaProtocol::OllamaProtocol(const ModelInfo& model, Endpoint endpoint) : model_(model), endpoint_(endpoint) {}

Protocol::Translated OllamaProtocol::translate(const std::string& body_text) {
  (void)parse_body(body_text);  // bounds the depth, checks it is an object (ApiError 400)
  const ojson body = ojson::parse(body_text);
  const bool chat = endpoint_ == Endpoint::Chat;
  static const std::set<std::string> chat_fields = {"model", "messages", "tools", "format", "options",
                                                    "stream", "think", "keep_alive"};
  static const std::set<std::string> gen_fields = {"model", "prompt", "system", "raw", "format", "options",
                                                   "stream", "think", "keep_alive", "images"};
  static const std::set<std::string> unsupported = {"template", "suffix", "context"};
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (it->is_null() || (chat ? chat_fields : gen_fields).count(it.key())) continue;
    if (!chat && unsupported.count(it.key())) {
      if (it.key() == "suffix" && it->is_string() && it->get_ref<const std::string&>().empty()) continue;
      throw bad(it.key(), it.key() == "template" ? "is not supported: the server renders with its own chat template "
                                                   "(ptn serve --chat-template)"
                          : it.key() == "context" ? "is not supported: send the conversation to /api/chat"
                                                  : "is not supported by this server (fill-in-the-middle)");
    }
    throw bad(it.key(), std::string("unknown field for ") + (chat ? "/api/chat" : "/api/generate"));
  }
  if (!present(body, "model")) throw bad("model", "is required");
  ojson out = {{"model", get_string(body, "model", "model")}};
  if (present(body, "keep_alive") && !body["keep_alive"].is_string() && !body["keep_alive"].is_number())
    throw bad("keep_alive", "must be a duration string or a number of seconds");
  chat_path_ = true;
  if (chat) {
    if (!present(body, "messages")) throw bad("messages", "is required");
    out["messages"] = translate_messages(body["messages"]);
    if (present(body, "tools")) {
      if (!body["tools"].is_array()) throw bad("tools", "must be an array");
      if (!body["tools"].empty()) out["tools"] = body["tools"];  // Ollama's tools are OpenAI's
    }
  } else {
    refuse_images(body, "images");
    if (!present(body, "prompt")) throw bad("prompt", "is required");
    const std::string& prompt = get_string(body, "prompt", "prompt");
    bool raw = false;
    if (present(body, "raw")) {
      if (!body["raw"].is_boolean()) throw bad("raw", "must be a boolean");
      raw = body["raw"].get<bool>();
    }
    // Templated like Ollama unless raw (or the model has no chat template: a plain prompt).
    chat_path_ = !raw && !model_.chat_template.empty();
    std::string system;
    if (present(body, "system")) system = get_string(body, "system", "system");
    if (chat_path_) {
      ojson msgs = ojson::array();
      if (!system.empty()) msgs.push_back({{"role", "system"}, {"content", system}});
      msgs.push_back({{"role", "user"}, {"content", prompt}});
      out["messages"] = std::move(msgs);
    } else {
      if (!system.empty())
        throw bad("system", raw ? "is not used with raw: true (write it into the prompt)"
                                : "this model has no chat template to place it; write it into the prompt");
      out["prompt"] = prompt;
      out["max_tokens"] = model_.context;  // as Ollama: until the model stops (clamped to the context left)
    }
  }
  if (present(body, "format")) translate_format(body["format"], out);
  if (present(body, "options")) translate_options(body["options"], model_, out);
  if (present(body, "think")) {
    if (!chat_path_) throw bad("think", "needs the chat template (not with raw: true)");
    translate_think(body["think"], model_, out);
  }
  bool stream = true;  // Ollama streams unless told not to
  if (present(body, "stream")) {
    if (!body["stream"].is_boolean()) throw bad("stream", "must be a boolean");
    stream = body["stream"].get<bool>();
  }
  if (stream) {
    out["stream"] = true;
    out["stream_options"] = {{"include_usage", true}};
  }
  Translated t;
  t.body = out.dump();
  t.chat = chat_path_;
  t.stream = stream;
  return t;
}

json OllamaProtocol::base() const {
  return json{{"model", model_.name}, {"created_at", rfc3339(std::chrono::system_clock::now())}};
}

json OllamaProtocol::message_part(const std::string& content, const std::string& thinking, const json& tool_calls) const {
  json o = base();
  if (endpoint_ == Endpoint::Chat) {
    json m = {{"role", "assistant"}, {"content", content}};
    if (!thinking.empty()) m["thinking"] = thinking;
    if (!tool_calls.empty()) m["tool_calls"] = tool_calls;
    o["message"] = std::move(m);
  } else {
    o["response"] = content;
    if (!thinking.empty()) o["thinking"] = thinking;
  }
  o["done"] = false;
  return o;
}

json OllamaProtocol::final_object(const json& usage, const json& timings) const {
  json o = message_part("", "", json::array());
  o["done"] = true;
  o["done_reason"] = done_reason_.empty() ? "stop" : done_reason_;
  o["total_duration"] =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
  o["load_duration"] = 0;  // the model is loaded once, when the server starts
  o["prompt_eval_count"] = count_of(usage, "prompt_tokens");
  o["prompt_eval_duration"] = ns_of(timings, "prompt_ms");
  o["eval_count"] = count_of(usage, "completion_tokens");
  o["eval_duration"] = ns_of(timings, "predicted_ms");
  return o;
}

json OllamaProtocol::reply(const json& completion) {
  const json& choice = first_choice(completion);
  const std::string finish = text_of(choice, "finish_reason");
  done_reason_ = finish == "length" ? "length" : "stop";
  const json& msg = member(choice, "message");
  const std::string content = chat_path_ ? text_of(msg, "content") : text_of(choice, "text");
  json o = final_object(member(completion, "usage"), member(completion, "timings"));
  const json calls = ollama_calls(member(msg, "tool_calls"));
  const std::string thinking = text_of(msg, "reasoning_content");
  if (endpoint_ == Endpoint::Chat) {
    o["message"]["content"] = content;
    if (!thinking.empty()) o["message"]["thinking"] = thinking;
    if (!calls.empty()) o["message"]["tool_calls"] = calls;
  } else {
    o["response"] = content;
    if (!thinking.empty()) o["thinking"] = thinking;
  }
  return o;
}

std::string OllamaProtocol::chunk(const json& c) {
  const json& choices = member(c, "choices");
  if (finished_ || !choices.is_array()) return "";
  if (choices.empty()) {  // the usage chunk: the last one
    finished_ = true;
    return dump(final_object(member(c, "usage"), member(c, "timings"))) + "\n";
  }
  const json& choice = choices[0];
  const std::string finish = text_of(choice, "finish_reason");
  if (!finish.empty()) done_reason_ = finish == "length" ? "length" : "stop";
  std::string content, thinking;
  json calls = json::array();
  if (chat_path_) {
    const json& delta = member(choice, "delta");
    content = text_of(delta, "content");
    thinking = text_of(delta, "reasoning_content");
    calls = ollama_calls(member(delta, "tool_calls"));
  } else {
    content = text_of(choice, "text");
  }
  if (content.empty() && thinking.empty() && calls.empty()) return "";
  return dump(message_part(content, thinking, calls)) + "\n";
}

std::string OllamaProtocol::end() {
  if (finished_) return "";
  finished_ = true;
  return dump(final_object(json::object(), json::object())) + "\n";
}

std::string OllamaProtocol::stream_error(int, const std::string&, const std::string& message) {
  finished_ = true;
  return dump(ollama_error_body(message)) + "\n";
}

json OllamaProtocol::error(int, const std::string&, const std::string& message, const std::string&,
                           const std::string&) const {
  return ollama_error_body(message);
}

namespace {
json details(const OllamaModel& m) {
  return json{{"parent_model", ""},
              {"format", "ptn"},
              {"family", m.family},
              {"families", json::array({m.family})},
              {"parameter_size", m.parameters > 0 ? std::to_string(m.parameters) : ""},
              {"quantization_level", ""}};
}

json model_entry(const OllamaModel& m) {
  return json{{"name", m.name},       {"model", m.name}, {"modified_at", rfc3339_secs(m.modified)},
              {"size", m.size},       {"digest", ""},    {"details", details(m)}};
}
}  // namespace

json ollama_tags(const OllamaModel& m) { return json{{"models", json::array({model_entry(m)})}}; }

json ollama_ps(const OllamaModel& m) {
  json e = model_entry(m);
  e.erase("modified_at");
  e["expires_at"] = "9999-12-31T23:59:59Z";  // loaded for as long as the server runs
  e["size_vram"] = 0;
  e["context_length"] = m.context;
  return json{{"models", json::array({e})}};
}

json ollama_version(const OllamaModel& m) { return json{{"version", m.version}}; }

json ollama_show(const std::string& body_text, const OllamaModel& m) {
  const json body = parse_body(body_text);
  std::string name;
  for (const char* k : {"model", "name"})
    if (body.contains(k) && !body[k].is_null()) {
      if (!body[k].is_string()) throw bad(k, "must be a string");
      name = body[k].get<std::string>();
    }
  if (name.empty()) throw bad("model", "is required");
  for (auto it = body.begin(); it != body.end(); ++it)
    if (!it->is_null() && it.key() != "model" && it.key() != "name" && it.key() != "verbose")
      throw bad(it.key(), "unknown field for /api/show");
  if (name != m.name && name != m.name + ":latest")
    throw ApiError(404, "invalid_request_error", "model '" + name.substr(0, 200) + "' not found; this server serves '" +
                                                     m.name + "'",
                   "model", "model_not_found");
  json caps = json::array({"completion"});
  const std::string& t = m.chat_template;
  if (t.find("tools") != std::string::npos) caps.push_back("tools");
  if (t.find("<think>") != std::string::npos && t.find("</think>") != std::string::npos) caps.push_back("thinking");
  json info = {{"general.architecture", m.family}, {m.family + ".context_length", m.context}};
  if (m.parameters > 0) info["general.parameter_count"] = m.parameters;
  return json{{"modelfile", ""},
              {"parameters", ""},
              {"template", t},
              {"details", details(m)},
              {"model_info", info},
              {"capabilities", caps},
              {"modified_at", rfc3339_secs(m.modified)}};
}

}  // namespace ptn::serve
