#include "serve/api.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <set>

#include "chat/chat_template.h"
#include "generate/chat_prompt.h"
#include "core/error.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "serve/ids.h"
#include "serve/tools.h"
#include "sampling/logprobs.h"

namespace ptn::serve {

using json = nlohmann::json;

json error_body(const std::string& message, const std::string& type, const std::string& param,
                const std::string& code) {
  json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  return json{{"error", e}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

namespace {

ApiError bad(const std::string& param, const std::string& message) {
  return ApiError(400, "invalid_request_error", param.empty() ? message : "'" + param + "': " + message, param);
}

// Nesting depth of the JSON text, counting brackets outside strings.
int json_depth(const std::string& s) {
  int depth = 0, max_depth = 0;
  bool in_str = false, esc = false;
  for (char c : s) {
    if (in_str) {
      if (esc) esc = false;
      else if (c == '\\') esc = true;
      else if (c == '"') in_str = false;
      continue;
    }
    if (c == '"') in_str = true;
    else if (c == '[' || c == '{') max_depth = std::max(max_depth, ++depth);
    else if (c == ']' || c == '}') --depth;
  }
  return max_depth;
}

const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

double get_number(const json& body, const char* name, double lo, double hi, double def) {
  const json* v = field(body, name);
  if (!v) return def;
  if (!v->is_number()) throw bad(name, "must be a number");
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    throw bad(name, "must be between " + json(lo).dump() + " and " + json(hi).dump());
  return x;
}

int64_t get_int(const json& body, const char* name, int64_t lo, int64_t hi, int64_t def) {
  const json* v = field(body, name);
  if (!v) return def;
  if (!v->is_number_integer()) throw bad(name, "must be an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    throw bad(name, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) throw bad(name, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return x;
}

bool get_bool(const json& body, const char* name, bool def) {
  const json* v = field(body, name);
  if (!v) return def;
  if (!v->is_boolean()) throw bad(name, "must be a boolean");
  return v->get<bool>();
}

void check_model(const json& body, const ModelInfo& model) {
  const json* v = field(body, "model");
  if (!v) return;
  if (!v->is_string()) throw bad("model", "must be a string");
  if (v->get<std::string>() != model.name)
    throw ApiError(404, "invalid_request_error",
                   "The model '" + v->get<std::string>() + "' does not exist; this server serves '" + model.name + "'",
                   "model", "model_not_found");
}

// The fields shared by both endpoints; the prompt is already in r.gen.prompt.
void check_text_bound(size_t bytes, const ModelInfo& model, const char* param) {
  if (model.max_prompt_bytes > 0 && bytes > model.max_prompt_bytes)
    throw ApiError(400, "invalid_request_error",
                   "the prompt text (" + std::to_string(bytes) + " bytes) cannot fit this model's context of " +
                       std::to_string(model.context) + " tokens",
                   param, "context_length_exceeded");
}

// Every field a request may carry. Anything else is refused by name, so that nothing a client
// asks for is accepted and silently ignored.
void check_fields(const json& body, bool chat) {
  static const std::set<std::string> shared = {
      "model", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty",
      "frequency_penalty", "logit_bias", "seed", "stop", "n", "stream", "stream_options", "logprobs",
      "response_format", "grammar", "json_schema", "id_slot",
      "user", "metadata", "store", "service_tier"};  // accepted, with no effect on the output
  static const std::set<std::string> chat_only = {"messages", "top_logprobs", "tools", "tool_choice",
                                                  "parallel_tool_calls", "chat_template_kwargs", "reasoning_effort"};
  static const std::set<std::string> completion_only = {"prompt", "best_of", "echo"};
  // Known OpenAI fields this server cannot honour yet: refused rather than ignored.
  static const std::set<std::string> unsupported = {"functions", "function_call", "suffix", "modalities", "audio",
                                                     "prediction", "web_search_options"};
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& k = it.key();
    if (it->is_null() || shared.count(k) || (chat ? chat_only : completion_only).count(k)) continue;
    if (!chat && k == "tool_choice" && *it == "none") continue;  // no tools: nothing to choose
    if (unsupported.count(k)) throw bad(k, "is not supported by this server yet");
    throw bad(k, "unknown field" + std::string(chat ? " for /v1/chat/completions" : " for /v1/completions"));
  }
}

// Whether the template source names `name` as an identifier (not inside a longer one).
bool template_names(const std::string& tmpl, const std::string& name) {
  if (name.empty()) return false;
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = tmpl.find(name); at != std::string::npos; at = tmpl.find(name, at + 1)) {
    const size_t end = at + name.size();
    if ((at == 0 || !ident(tmpl[at - 1])) && (end == tmpl.size() || !ident(tmpl[end]))) return true;
  }
  return false;
}

void parse_common(const json& body, const ModelInfo& model, bool chat, ParsedRequest& r) {
  check_fields(body, chat);
  check_model(body, model);
  const int64_t n_prompt = static_cast<int64_t>(r.gen.prompt.size());
  if (n_prompt == 0) throw bad(chat ? "messages" : "prompt", "the prompt is empty");
  if (n_prompt >= model.context)
    throw ApiError(400, "invalid_request_error",
                   "the prompt has " + std::to_string(n_prompt) + " tokens; this model's context holds " +
                       std::to_string(model.context) + " tokens including the output",
                   chat ? "messages" : "prompt", "context_length_exceeded");
  const int64_t room = model.context - n_prompt;
  const char* mt_name = field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  int64_t max_tokens = get_int(body, mt_name, 1, INT64_MAX, chat ? room : 16);
  r.gen.max_tokens = std::min(max_tokens, room);  // clamped to what the context still holds

  SamplingParams& sp = r.gen.sampling;
  sp.temperature = static_cast<float>(get_number(body, "temperature", 0.0, 2.0, 1.0));
  sp.top_p = static_cast<float>(get_number(body, "top_p", 0.0, 1.0, 1.0));
  if (sp.top_p <= 0.0f) throw bad("top_p", "must be greater than 0 and at most 1");
  sp.top_k = get_int(body, "top_k", 0, INT32_MAX, 0);
  sp.min_p = static_cast<float>(get_number(body, "min_p", 0.0, 1.0, 0.0));
  sp.presence_penalty = static_cast<float>(get_number(body, "presence_penalty", -2.0, 2.0, 0.0));
  sp.frequency_penalty = static_cast<float>(get_number(body, "frequency_penalty", -2.0, 2.0, 0.0));
  sp.repetition_penalty = static_cast<float>(get_number(body, "repetition_penalty", 1e-3, 100.0, 1.0));
  // Without a seed every request draws anew (a "regenerate" gives another reply).
  sp.seed = field(body, "seed") ? static_cast<uint64_t>(get_int(body, "seed", INT64_MIN, INT64_MAX, 0)) : random_seed();
  if (const json* lb = field(body, "logit_bias")) {
    if (!lb->is_object()) throw bad("logit_bias", "must be an object mapping token ids to biases");
    if (lb->size() > 1024) throw bad("logit_bias", "at most 1024 entries");
    for (auto it = lb->begin(); it != lb->end(); ++it) {
      const std::string& key = it.key();
      size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (key.empty() || used != key.size() || id < 0 || id >= model.vocab)
        throw bad("logit_bias", "key '" + key + "' is not a token id in [0, " + std::to_string(model.vocab) + ")");
      if (!it.value().is_number()) throw bad("logit_bias", "the bias of token " + key + " must be a number");
      const double b = it.value().get<double>();
      if (!std::isfinite(b) || b < -100.0 || b > 100.0)
        throw bad("logit_bias", "the bias of token " + key + " must be between -100 and 100");
      sp.logit_bias[static_cast<int32_t>(id)] = static_cast<float>(b);
    }
  }
  try {
    sp = validate_sampling_params(sp, model.vocab);
  } catch (const Error& e) {
    std::string param = e.where();
    if (param.rfind("sampling.", 0) == 0) param = param.substr(9);
    throw bad(param, e.detail());
  }

  if (const json* st = field(body, "stop")) {
    std::vector<std::string> stops;
    if (st->is_string()) {
      stops.push_back(st->get<std::string>());
    } else if (st->is_array()) {
      if (st->size() > 4) throw bad("stop", "at most 4 stop sequences");
      for (const auto& x : *st) {
        if (!x.is_string()) throw bad("stop", "must be a string or an array of strings");
        stops.push_back(x.get<std::string>());
      }
    } else {
      throw bad("stop", "must be a string or an array of strings");
    }
    for (const auto& s : stops) {
      if (s.empty()) throw bad("stop", "stop sequences must not be empty");
      if (s.size() > 256) throw bad("stop", "stop sequences are limited to 256 bytes");
    }
    r.gen.stop = std::move(stops);
  }

  r.gen.n = static_cast<int>(get_int(body, "n", 1, kMaxChoices, 1));
  r.gen.slot = static_cast<int>(get_int(body, "id_slot", -1, 4095, -1));  // checked against --parallel on submit
  if (get_int(body, "best_of", 1, INT64_MAX, 1) != 1) throw bad("best_of", "only best_of = 1 is supported");
  if (chat) {
    const bool lp = get_bool(body, "logprobs", false);
    const int64_t top = get_int(body, "top_logprobs", 0, kMaxTopLogprobs, 0);
    if (field(body, "top_logprobs") && !lp) throw bad("top_logprobs", "needs 'logprobs': true");
    r.gen.logprobs = lp ? static_cast<int>(top) : -1;
  } else {
    const json* lp = field(body, "logprobs");
    if (lp && lp->is_boolean()) throw bad("logprobs", "must be an integer 0..20 for completions");
    r.gen.logprobs = static_cast<int>(get_int(body, "logprobs", 0, kMaxTopLogprobs, -1));
    if (get_bool(body, "echo", false)) throw bad("echo", "echo is not supported");
  }
  r.stream = get_bool(body, "stream", false);
  if (const json* so = field(body, "stream_options")) {
    if (!r.stream) throw bad("stream_options", "only allowed with 'stream': true");
    if (!so->is_object()) throw bad("stream_options", "must be an object");
    r.include_usage = get_bool(*so, "include_usage", false);
  }
}

}  // namespace

json parse_body(const std::string& body, int max_depth) {
  if (json_depth(body) > max_depth)
    throw ApiError(400, "invalid_request_error", "the JSON body nests deeper than " + std::to_string(max_depth));
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {
    throw ApiError(400, "invalid_request_error", std::string("the body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw ApiError(400, "invalid_request_error", "the body must be a JSON object");
  return j;
}

namespace {

constexpr size_t kMaxGrammarBytes = 256u << 10;  // GBNF text or a schema's JSON text

// Compiles a grammar source; its errors become a 400 naming `param`.
template <typename F>
std::shared_ptr<const grammar::Grammar> compile_constraint(const char* param, size_t bytes, F&& make) {
  if (bytes > kMaxGrammarBytes)
    throw bad(param, "is " + std::to_string(bytes) + " bytes; at most " + std::to_string(kMaxGrammarBytes));
  try {
    return std::make_shared<const grammar::Grammar>(make());
  } catch (const std::exception& e) {  // ptn::Error from the parser or the schema conversion
    throw bad(param, e.what());
  }
}

std::shared_ptr<const grammar::Grammar> schema_constraint(const char* param, const nlohmann::ordered_json& schema) {
  if (!schema.is_object() && !schema.is_boolean()) throw bad(param, "must be a JSON Schema object");
  const std::string text = schema.dump();
  return compile_constraint(param, text.size(), [&] { return grammar::json_schema_grammar(schema); });
}

std::shared_ptr<const grammar::Grammar> response_format_constraint(const nlohmann::ordered_json& rf) {
  if (!rf.is_object()) throw bad("response_format", "must be an object with a \"type\"");
  auto type = rf.find("type");
  if (type == rf.end() || !type->is_string())
    throw bad("response_format.type", "must be \"text\", \"json_object\" or \"json_schema\"");
  const std::string t = type->get<std::string>();
  if (t == "text") return nullptr;
  if (t == "json_object") return compile_constraint("response_format", 0, [] { return grammar::json_object_grammar(); });
  if (t != "json_schema")
    throw bad("response_format.type", "must be \"text\", \"json_object\" or \"json_schema\" (got '" + t.substr(0, 40) + "')");
  auto js = rf.find("json_schema");
  if (js == rf.end() || !js->is_object()) throw bad("response_format.json_schema", "must be an object with a \"schema\"");
  if (auto name = js->find("name"); name != js->end() && !name->is_string())
    throw bad("response_format.json_schema.name", "must be a string");
  if (auto strict = js->find("strict"); strict != js->end() && !strict->is_boolean() && !strict->is_null())
    throw bad("response_format.json_schema.strict", "must be a boolean");
  auto schema = js->find("schema");
  if (schema == js->end() || schema->is_null()) throw bad("response_format.json_schema.schema", "is required");
  return schema_constraint("response_format.json_schema.schema", *schema);
}

}  // namespace

std::shared_ptr<const grammar::Grammar> parse_output_constraint(const std::string& body_text) {
  nlohmann::ordered_json body;
  try {
    body = nlohmann::ordered_json::parse(body_text);
  } catch (const std::exception& e) {
    throw ApiError(400, "invalid_request_error", std::string("the body is not valid JSON: ") + e.what());
  }
  auto present = [&](const char* k) { return body.is_object() && body.contains(k) && !body[k].is_null(); };
  const int given = present("response_format") + present("grammar") + present("json_schema");
  if (given > 1) throw bad("response_format", "give at most one of response_format, grammar and json_schema");
  if (present("response_format")) return response_format_constraint(body["response_format"]);
  if (present("json_schema")) return schema_constraint("json_schema", body["json_schema"]);
  if (present("grammar")) {
    if (!body["grammar"].is_string()) throw bad("grammar", "must be a string of GBNF rules");
    const std::string& g = body["grammar"].get_ref<const std::string&>();
    return compile_constraint("grammar", g.size(), [&] { return grammar::parse_gbnf(g, "grammar"); });
  }
  return nullptr;
}

ParsedRequest parse_completion_request(const json& body, const ModelInfo& model) {
  ParsedRequest r;
  const json* p = field(body, "prompt");
  if (!p) throw bad("prompt", "is required");
  if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) p = &(*p)[0];
  if (p->is_string()) {
    const std::string& text = p->get_ref<const std::string&>();
    check_text_bound(text.size(), model, "prompt");
    r.gen.prompt = model.tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/model.parse_special);
  } else if (p->is_array()) {
    if (p->empty()) throw bad("prompt", "the prompt is empty");
    if (static_cast<int64_t>(p->size()) >= model.context)
      throw ApiError(400, "invalid_request_error",
                     "'prompt': " + std::to_string(p->size()) + " tokens; this model's context holds " +
                         std::to_string(model.context) + " tokens including at least one output token",
                     "prompt", "context_length_exceeded");
    for (const auto& x : *p) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= model.vocab)
        throw bad("prompt", "must be a string, or an array of token ids in [0, " + std::to_string(model.vocab) + ")");
      r.gen.prompt.push_back(static_cast<int32_t>(x.get<int64_t>()));
    }
  } else {
    throw bad("prompt", "must be a string or an array of token ids (one prompt only)");
  }
  parse_common(body, model, false, r);
  return r;
}

namespace {

// A message's tool_calls as the templates read them (HF apply_chat_template): each
// {"id", "type": "function", "function": {"name", "arguments"}} with the arguments an object
// (a JSON string is parsed; templates write it with tojson).
nlohmann::ordered_json template_tool_calls(const nlohmann::ordered_json& calls, const std::string& where) {
  if (!calls.is_array()) throw bad(where, "must be an array");
  if (calls.size() > kMaxTools) throw bad(where, "at most " + std::to_string(kMaxTools) + " calls");
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t j = 0; j < calls.size(); ++j) {
    const std::string w = where + "[" + std::to_string(j) + "]";
    const auto& c = calls[j];
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
      throw bad(w, "must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}");
    const auto& fn = c["function"];
    if (!fn.contains("name") || !fn["name"].is_string()) throw bad(w + ".function.name", "must be a string");
    nlohmann::ordered_json args = fn.contains("arguments") ? fn["arguments"] : nlohmann::ordered_json::object();
    if (args.is_string()) {
      try {
        args = nlohmann::ordered_json::parse(args.get<std::string>());
      } catch (const std::exception&) {
        throw bad(w + ".function.arguments", "is not a JSON text");
      }
    }
    if (!args.is_object()) throw bad(w + ".function.arguments", "must be a JSON object (or its text)");
    nlohmann::ordered_json call = {{"type", "function"}, {"function", {{"name", fn["name"]}, {"arguments", args}}}};
    if (c.contains("id") && !c["id"].is_null()) {
      if (!c["id"].is_string()) throw bad(w + ".id", "must be a string");
      call["id"] = c["id"];
    }
    out.push_back(call);
  }
  return out;
}

}  // namespace

ParsedRequest parse_chat_request(const json& body, const ModelInfo& model, const nlohmann::ordered_json* ordered) {
  ParsedRequest r;
  const TokenizerSpec& ts = model.tokenizer->spec();
  if (model.chat_template.empty())
    throw ApiError(400, "invalid_request_error",
                   "this model has no chat template; use /v1/completions with a plain prompt", "messages",
                   "no_chat_template");
  const json* m = field(body, "messages");
  if (!m) throw bad("messages", "is required");
  if (!m->is_array() || m->empty()) throw bad("messages", "must be a non-empty array");
  // Tool definitions and calls keep their key order (the ordered body) when the server has it.
  // Parsed again in key order only when the caller did not and the body has what needs it.
  std::unique_ptr<nlohmann::ordered_json> reparsed;
  if (!ordered) {
    bool needs_order = body.contains("tools") || body.contains("chat_template_kwargs");
    for (const auto& msg : *m) needs_order = needs_order || (msg.is_object() && msg.contains("tool_calls"));
    reparsed = std::make_unique<nlohmann::ordered_json>(needs_order ? nlohmann::ordered_json::parse(body.dump())
                                                                    : nlohmann::ordered_json::object());
    ordered = reparsed.get();
  }
  const nlohmann::ordered_json& ordered_body = *ordered;
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) throw bad(where, "must be an object");
    const json* role = field(msg, "role");
    if (!role || !role->is_string()) throw bad(where + ".role", "must be a string");
    std::string content;
    const json* c = field(msg, "content");
    if (c && c->is_string()) {
      content = c->get<std::string>();
    } else if (c && c->is_array()) {
      for (const auto& part : *c) {
        if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
            !part["text"].is_string())
          throw bad(where + ".content", "only text parts {\"type\": \"text\", \"text\": ...} are supported");
        content += part["text"].get<std::string>();
      }
    } else if (c) {
      throw bad(where + ".content", "must be a string or an array of text parts");
    }
    nlohmann::ordered_json out = {{"role", role->get<std::string>()}, {"content", content}};
    for (auto it = msg.begin(); it != msg.end(); ++it) {
      const std::string& k = it.key();
      if (k == "role" || k == "content" || it->is_null()) continue;
      if (k == "tool_calls") {
        out["tool_calls"] = template_tool_calls(ordered_body["messages"][i]["tool_calls"], where + ".tool_calls");
      } else if (k == "name" || k == "tool_call_id" || k == "reasoning_content") {
        if (!it->is_string()) throw bad(where + "." + k, "must be a string");
        out[k] = it->get<std::string>();
        // gpt-oss's template reads an earlier turn's reasoning as `thinking` (as llama.cpp passes it).
        if (k == "reasoning_content" && model.chat_template.find("message.thinking") != std::string::npos)
          out["thinking"] = out[k];
      } else {
        throw bad(where + "." + k, "unknown message field");
      }
    }
    msgs.push_back(std::move(out));
  }
  chat::ChatOptions co;
  co.add_generation_prompt = true;
  co.bos_token = ts.bos_token;
  co.eos_token = ts.eos_token;
  if (auto t = parse_tool_request(ordered_body, model.chat_template)) {
    r.tools = std::make_shared<const ToolRequest>(std::move(*t));
    co.tools = r.tools->tools;
  }
  size_t content_bytes = 0;
  for (const auto& msg : msgs) content_bytes += msg.dump().size();
  check_text_bound(content_bytes, model, "messages");
  // Template variables: chat_template_kwargs (e.g. enable_thinking) and reasoning_effort.
  if (ordered_body.contains("chat_template_kwargs") && !ordered_body["chat_template_kwargs"].is_null()) {
    const auto& kw = ordered_body["chat_template_kwargs"];
    if (!kw.is_object()) throw bad("chat_template_kwargs", "must be an object of template variables");
    if (kw.size() > 64 || kw.dump().size() > (64u << 10)) throw bad("chat_template_kwargs", "at most 64 variables, 64 KiB");
    static const std::set<std::string> reserved = {"messages", "tools", "documents", "add_generation_prompt",
                                                   "bos_token", "eos_token"};
    for (const auto& [k, v] : kw.items()) {
      if (reserved.count(k)) throw bad("chat_template_kwargs." + k, "is set by the server from the request");
      // A variable the template never names would change nothing: refused rather than ignored.
      if (!template_names(model.chat_template, k))
        throw bad("chat_template_kwargs." + k, "this model's chat template does not read this variable");
      co.extra[k] = v;
    }
  }
  if (const json* re = field(body, "reasoning_effort")) {
    if (!re->is_string() || (*re != "minimal" && *re != "low" && *re != "medium" && *re != "high"))
      throw bad("reasoning_effort", "must be \"minimal\", \"low\", \"medium\" or \"high\"");
    if (model.chat_template.find("reasoning_effort") == std::string::npos)
      throw bad("reasoning_effort", "this model's chat template takes no reasoning effort");
    co.extra["reasoning_effort"] = re->get<std::string>();
  }
  std::string prompt_text;
  try {
    // Message text stays text: control tokens come from the template only (unless trusted).
    gen::ChatPrompt cp = gen::render_chat_prompt(*model.tokenizer, model.chat_template, msgs, co, model.parse_special);
    r.gen.prompt = std::move(cp.ids);
    prompt_text = std::move(cp.text);
  } catch (const Error& e) {
    throw bad("messages", std::string("the chat template failed: ") + e.what());
  }
  r.reasoning = reasoning_mode(model.chat_template, prompt_text);
  if (is_harmony_template(model.chat_template) && model.tokenizer->token_id("<|return|>") &&
      model.tokenizer->token_id("<|call|>")) {
    // gpt-oss: the reply's channels are marked by control tokens, kept in its text to be parsed.
    r.reasoning = ReasoningMode{};
    r.reasoning.enabled = r.reasoning.harmony = true;
    r.gen.keep_special = true;
  }
  parse_common(body, model, true, r);
  if (r.tools) {
    const ToolRequest& t = *r.tools;
    if (r.gen.logprobs >= 0) throw bad("logprobs", "is not supported together with tools");
    if (t.choice == ToolChoice::Required || t.choice == ToolChoice::Named) {
      const std::string g = tool_call_gbnf(t);
      r.gen.grammar = compile_constraint("tools", g.size(), [&] { return grammar::parse_gbnf(g, "tools"); });
    } else if (!t.parallel && t.format == ToolFormat::Hermes) {
      r.gen.stop.push_back("</tool_call>");  // one call: the reply ends where the first one does
    }
  }
  return r;
}

// --- responses ---------------------------------------------------------------------------------

ResponseBuilder::ResponseBuilder(bool chat, const ModelInfo& model, std::string id, int64_t created, int logprobs,
                                 std::shared_ptr<const ToolRequest> tools, ReasoningMode reasoning)
    : chat_(chat), model_(model), tools_(std::move(tools)), reasoning_(reasoning), stream_split_(reasoning),
      id_(std::move(id)), created_(created), logprobs_(logprobs) {
  if (tools_ && !reasoning_.harmony) tool_scan_ = std::make_unique<ToolSafeScan>(*tools_);
}

ResponseBuilder::Parsed ResponseBuilder::parse_reply(bool trim) const {
  Parsed p;
  if (reasoning_.harmony) {
    HarmonyReply h = harmony_reply(text_, tools_.get(), /*final=*/true, trim);
    p.reasoning = std::move(h.reasoning);
    p.out = std::move(h.out);
    return p;
  }
  ReasoningSplit r = split_reasoning(reasoning_, text_, trim);
  p.reasoning = std::move(r.reasoning);
  if (tools_) {
    p.out = parse_tool_output(*tools_, r.content);
  } else {
    p.out.content = p.out.raw_content = std::move(r.content);
  }
  return p;
}

std::string ResponseBuilder::finish_reason(const Event& d, const ToolOutput* out) const {
  // A reply that ended by itself after calling tools asks for their results.
  if (out && !out->calls.empty() && d.finish_reason == "stop") return "tool_calls";
  return d.finish_reason;
}

namespace {
double finite_lp(float lp) { return std::isfinite(lp) ? lp : -9999.0; }
// A token's text for logprobs; ids past the tokenizer (a padded model vocabulary) get "".
std::string piece_of(const Tokenizer& tok, int32_t id) {
  return id >= 0 && id < tok.vocab_size() ? tok.token_piece(id) : std::string();
}
json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}
}  // namespace

json ResponseBuilder::logprobs_json(const std::vector<TokenOut>& tokens, size_t text_offset) const {
  const Tokenizer& tok = *model_.tokenizer;
  if (chat_) {
    json content = json::array();
    for (const auto& t : tokens) {
      const std::string piece = piece_of(tok, t.id);
      json top = json::array();
      for (const auto& a : t.top) {
        const std::string ap = piece_of(tok, a.id);
        top.push_back({{"token", ap}, {"logprob", finite_lp(a.logprob)}, {"bytes", bytes_of(ap)}});
      }
      content.push_back(
          {{"token", piece}, {"logprob", finite_lp(t.logprob)}, {"bytes", bytes_of(piece)}, {"top_logprobs", top}});
    }
    return json{{"content", content}};
  }
  json toks = json::array(), vals = json::array(), tops = json::array(), offs = json::array();
  for (const auto& t : tokens) {
    const std::string piece = piece_of(tok, t.id);
    toks.push_back(piece);
    vals.push_back(finite_lp(t.logprob));
    json top = json::object();
    for (const auto& a : t.top) top[piece_of(tok, a.id)] = finite_lp(a.logprob);
    tops.push_back(top);
    offs.push_back(text_offset);
    text_offset += piece.size();
  }
  return json{{"tokens", toks}, {"token_logprobs", vals}, {"top_logprobs", tops}, {"text_offset", offs}};
}

json ResponseBuilder::base(const char* object) const {
  return json{{"id", id_}, {"object", object}, {"created", created_}, {"model", model_.name}};
}

json ResponseBuilder::usage(const Event& d) const {
  return json{{"prompt_tokens", d.prompt_tokens},
              {"completion_tokens", d.completion_tokens},
              {"total_tokens", d.prompt_tokens + d.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", d.cached_tokens}}}};
}

json ResponseBuilder::timings(const Event& d) {
  json t{{"prompt_n", d.prompt_tokens - d.cached_tokens},
         {"prompt_ms", d.prompt_seconds * 1e3},
         {"predicted_n", d.completion_tokens},
         {"predicted_ms", d.generate_seconds * 1e3}};
  if (d.drafted_tokens > 0) {  // speculative decoding drafted (llama-server's names)
    t["draft_n"] = d.drafted_tokens;
    t["draft_n_accepted"] = d.accepted_tokens;
  }
  return t;
}

json ResponseBuilder::chunk(const Event& e) {
  if (processed()) {
    // Reasoning and content stream as far as they are known (a tag that may still be forming, or
    // a tool call that may be beginning, waits); the rest is sent at the end.
    const bool want_lp = logprobs_ >= 0 && !e.tokens.empty();
    json lp = want_lp ? logprobs_json(e.tokens, text_.size()) : json(nullptr);
    text_ += e.text;
    // (Each event looks at its new bytes only, so a long reply costs linear time.)
    std::string_view reasoning, content;
    if (reasoning_.harmony) {
      harmony_stream_.update(text_);
      reasoning = harmony_stream_.reasoning();
      content = harmony_stream_.content();
    } else {
      stream_split_.update(text_);
      const ReasoningStream::Span r = stream_split_.reasoning(), cs = stream_split_.content();
      reasoning = std::string_view(text_.data() + r.begin, r.size());
      content = std::string_view(text_.data() + cs.begin, cs.size());
    }
    const size_t content_safe = tool_scan_ ? std::min(content.size(), tool_scan_->update(content)) : content.size();
    json delta = json::object();
    if (!sent_role_) delta = {{"role", "assistant"}, {"content", ""}};
    if (reasoning.size() > sent_reasoning_) {
      delta["reasoning_content"] = std::string(reasoning.substr(sent_reasoning_));
      sent_reasoning_ = reasoning.size();
    }
    if (content_safe > sent_content_) {
      delta["content"] = std::string(content.substr(sent_content_, content_safe - sent_content_));
      sent_content_ = content_safe;
    }
    if (delta.empty() && !want_lp) return nullptr;
    sent_role_ = true;
    json c = base("chat.completion.chunk");
    c["choices"] = json::array({{{"index", index_}, {"delta", delta}, {"logprobs", lp}, {"finish_reason", nullptr}}});
    return c;
  }
  const bool want_lp = logprobs_ >= 0 && !e.tokens.empty();
  if (e.text.empty() && !want_lp && (sent_role_ || !chat_)) return nullptr;
  json c = base(chat_ ? "chat.completion.chunk" : "text_completion");
  json choice = {{"index", index_}, {"finish_reason", nullptr}};
  if (chat_) {
    json delta = {{"content", e.text}};
    if (!sent_role_) delta["role"] = "assistant";
    sent_role_ = true;
    choice["delta"] = delta;
  } else {
    choice["text"] = e.text;
  }
  choice["logprobs"] = want_lp ? logprobs_json(e.tokens, text_.size()) : json(nullptr);
  text_ += e.text;
  c["choices"] = json::array({choice});
  return c;
}

std::vector<json> ResponseBuilder::final_chunks(const Event& d) {
  std::vector<json> out;
  auto delta_chunk = [&](json delta) {
    json c = base("chat.completion.chunk");
    c["choices"] = json::array({{{"index", index_}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
    out.push_back(std::move(c));
  };
  Parsed p;
  if (processed()) {
    p = parse_reply(/*trim=*/false);  // continues what was streamed
    if (p.reasoning.size() > sent_reasoning_) delta_chunk({{"reasoning_content", p.reasoning.substr(sent_reasoning_)}});
    // The content not sent yet: what was held back, without the calls.
    if (p.out.raw_content.size() > sent_content_) delta_chunk({{"content", p.out.raw_content.substr(sent_content_)}});
    const auto& calls_out = p.out.calls;
    if (!calls_out.empty()) {
      json calls = json::array();
      for (size_t i = 0; i < calls_out.size(); ++i)
        calls.push_back({{"index", i},
                         {"id", calls_out[i].id},
                         {"type", "function"},
                         {"function", {{"name", calls_out[i].name}, {"arguments", calls_out[i].arguments}}}});
      delta_chunk({{"tool_calls", calls}});
    }
  }
  json c = base(chat_ ? "chat.completion.chunk" : "text_completion");
  json choice = {{"index", index_}, {"logprobs", nullptr}, {"finish_reason", finish_reason(d, processed() ? &p.out : nullptr)}};
  choice["stop_reason"] = d.stop_string.empty() ? json(nullptr) : json(d.stop_string);
  if (chat_)
    choice["delta"] = json::object();
  else
    choice["text"] = "";
  c["choices"] = json::array({choice});
  if (seed_) c["seed"] = *seed_;
  out.push_back(std::move(c));
  return out;
}

json ResponseBuilder::usage_chunk(const Event& d) const {
  json c = base(chat_ ? "chat.completion.chunk" : "text_completion");
  c["choices"] = json::array();
  c["usage"] = usage(d);
  c["timings"] = timings(d);
  return c;
}

void ResponseBuilder::add(const Event& e) {
  if (logprobs_ >= 0 && !e.tokens.empty()) {
    json lp = logprobs_json(e.tokens, text_.size());
    if (chat_) {
      for (auto& x : lp["content"]) lp_content_.push_back(std::move(x));
    } else {
      for (auto& x : lp["tokens"]) lp_tokens_.push_back(std::move(x));
      for (auto& x : lp["token_logprobs"]) lp_values_.push_back(std::move(x));
      for (auto& x : lp["top_logprobs"]) lp_top_.push_back(std::move(x));
      for (auto& x : lp["text_offset"]) lp_offsets_.push_back(std::move(x));
    }
  }
  text_ += e.text;
}

json ResponseBuilder::response(const Event& d) const {
  json r = base(chat_ ? "chat.completion" : "text_completion");
  json choice = {{"index", index_}, {"finish_reason", d.finish_reason}, {"logprobs", nullptr}};
  choice["stop_reason"] = d.stop_string.empty() ? json(nullptr) : json(d.stop_string);  // as vLLM
  if (processed()) {
    const Parsed p = parse_reply(/*trim=*/true);
    const ToolOutput& t = p.out;
    json message = {{"role", "assistant"}, {"content", t.calls.empty() || !t.content.empty() ? json(t.content) : json(nullptr)}};
    if (!p.reasoning.empty()) message["reasoning_content"] = p.reasoning;
    if (!t.calls.empty()) {
      json calls = json::array();
      for (const auto& call : t.calls)
        calls.push_back({{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
      message["tool_calls"] = calls;
    }
    choice["message"] = message;
    choice["finish_reason"] = finish_reason(d, &t);
    if (logprobs_ >= 0) choice["logprobs"] = {{"content", lp_content_}};
  } else if (chat_) {
    choice["message"] = {{"role", "assistant"}, {"content", text_}};
    if (logprobs_ >= 0) choice["logprobs"] = {{"content", lp_content_}};
  } else {
    choice["text"] = text_;
    if (logprobs_ >= 0)
      choice["logprobs"] = {
          {"tokens", lp_tokens_}, {"token_logprobs", lp_values_}, {"top_logprobs", lp_top_}, {"text_offset", lp_offsets_}};
  }
  r["choices"] = json::array({choice});
  r["usage"] = usage(d);
  r["timings"] = timings(d);
  if (seed_) r["seed"] = *seed_;
  return r;
}

}  // namespace ptn::serve
