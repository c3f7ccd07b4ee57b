// Chat prompts from a model's chat template, rendered the way Hugging Face renders them
// (transformers' apply_chat_template variables; @huggingface/jinja is the byte-for-byte
// reference the tests compare against).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "chat/jinja.h"

namespace ptn::chat {

struct ChatOptions {
  bool add_generation_prompt = false;
  std::string bos_token;
  std::string eos_token;
  nlohmann::ordered_json tools;                                  // a list of tool schemas, or null
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more variables, e.g. enable_thinking
  jinja::Limits limits;
};

// The variables a template sees: messages, tools (none when absent), documents (none),
// add_generation_prompt, bos_token, eos_token, then every key of opts.extra (which may
// override the others). Use ordered_json so that dict order (and so tojson output) follows the
// input; a plain nlohmann::json converts but has already sorted its keys.
nlohmann::ordered_json chat_context(const nlohmann::ordered_json& messages, const ChatOptions& opts);

// Parses and renders in one go; throws ptn::Error (template errors name line and column,
// raise_exception() in the template becomes an InvalidArgument error with its message).
std::string render_chat(const std::string& template_src, const nlohmann::ordered_json& messages,
                        const ChatOptions& opts);

// What a tokenizer_config.json says about chat: the template (a string, or the entry named
// `name` of a list of {"name", "template"}) and the bos/eos tokens (strings or AddedToken
// objects {"content": ...}; empty when absent or null).
struct ChatTemplateInfo {
  std::string chat_template;
  std::string bos_token;
  std::string eos_token;
};
ChatTemplateInfo read_tokenizer_config(const nlohmann::ordered_json& config, const std::string& where,
                                       const std::string& name = "default");

}  // namespace ptn::chat
