#include "chat/chat_template.h"

#include "core/error.h"

namespace ptn::chat {

nlohmann::ordered_json chat_context(const nlohmann::ordered_json& messages, const ChatOptions& opts) {
  if (!messages.is_array()) fail(ErrorKind::InvalidArgument, "messages", "must be a JSON array of message objects");
  if (!opts.tools.is_null() && !opts.tools.is_array())
    fail(ErrorKind::InvalidArgument, "tools", "must be a JSON array of tool schemas or null");
  if (!opts.extra.is_object() && !opts.extra.is_null())
    fail(ErrorKind::InvalidArgument, "chat template variables", "must be a JSON object");
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["messages"] = messages;
  ctx["tools"] = opts.tools;
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = opts.add_generation_prompt;
  ctx["bos_token"] = opts.bos_token;
  ctx["eos_token"] = opts.eos_token;
  if (opts.extra.is_object())
    for (auto it = opts.extra.begin(); it != opts.extra.end(); ++it) ctx[it.key()] = it.value();
  return ctx;
}

std::string render_chat(const std::string& template_src, const nlohmann::ordered_json& messages,
                        const ChatOptions& opts) {
  jinja::Template t(template_src, opts.limits);
  return t.render(chat_context(messages, opts));
}

static std::string token_text(const nlohmann::ordered_json& config, const char* key, const std::string& where) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) return c->get<std::string>();
  }
  fail(ErrorKind::Corrupt, where + ": field '" + key + "'", "must be a string or an object with a string 'content'");
}

ChatTemplateInfo read_tokenizer_config(const nlohmann::ordered_json& config, const std::string& where,
                                       const std::string& name) {
  if (!config.is_object()) fail(ErrorKind::Corrupt, where, "tokenizer config must be a JSON object");
  ChatTemplateInfo info;
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null())
    fail(ErrorKind::Unsupported, where, "has no 'chat_template' field");
  if (it->is_string()) {
    info.chat_template = it->get<std::string>();
  } else if (it->is_array()) {
    std::string names;
    bool found = false;
    for (auto& entry : *it) {
      if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() || !entry.contains("template") ||
          !entry["template"].is_string())
        fail(ErrorKind::Corrupt, where + ": field 'chat_template'", "list entries must be {\"name\": string, \"template\": string}");
      std::string n = entry["name"].get<std::string>();
      names += (names.empty() ? "" : ", ") + n;
      if (n == name) {
        info.chat_template = entry["template"].get<std::string>();
        found = true;
        break;
      }
    }
    if (!found) fail(ErrorKind::Unsupported, where + ": field 'chat_template'", "no template named '" + name + "' (has: " + names + ")");
  } else {
    fail(ErrorKind::Corrupt, where + ": field 'chat_template'", "must be a string or a list of named templates");
  }
  info.bos_token = token_text(config, "bos_token", where);
  info.eos_token = token_text(config, "eos_token", where);
  return info;
}

}  // namespace ptn::chat
