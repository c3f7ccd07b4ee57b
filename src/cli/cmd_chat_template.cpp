// `ptn chat-template`: render a conversation with a model's chat template, exactly as Hugging
// Face would, and print the prompt (raw bytes, no newline added).
//   --model FILE        tokenizer_config.json (or its directory), a GGUF file, or a .ptn
//   --messages FILE     a JSON array of messages, or {"messages": [...], "tools": [...]}
//   --tools FILE        a JSON array of tool schemas (overrides the messages file's)
//   --vars JSON         more template variables, e.g. '{"enable_thinking": false}'
//   --template NAME     which named template when the config has several (default "default")
#include <cstdio>
#include <cstring>
#include <fstream>

#include "chat/chat_template.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/file.h"
#include "formats/gguf.h"
#include "runtime/program.h"

namespace {

struct Args {
  std::string model, messages, tools, vars, template_name = "default";
  bool add_generation_prompt = false;
};

nlohmann::ordered_json parse_json(const std::string& text, const std::string& where) {
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    ptn::fail(ptn::ErrorKind::Corrupt, where, std::string("invalid JSON: ") + e.what());
  }
}

bool starts_with_bytes(const std::string& path, const char* magic, size_t n) {
  std::ifstream f(path, std::ios::binary);
  char buf[16] = {};
  if (!f.read(buf, static_cast<std::streamsize>(n))) return false;
  return std::memcmp(buf, magic, n) == 0;
}

std::string gguf_token(const ptn::GgufFile& g, const char* id_key) {
  auto id = g.opt_u32(id_key);
  if (!id || !g.has("tokenizer.ggml.tokens")) return "";
  const ptn::GgufValue& tokens = g.get("tokenizer.ggml.tokens");
  if (tokens.type != ptn::GgufType::Array || tokens.elem_type != ptn::GgufType::String)
    ptn::fail(ptn::ErrorKind::Corrupt, g.where_key("tokenizer.ggml.tokens"), "must be an array of strings");
  if (*id >= tokens.strings.size())
    ptn::fail(ptn::ErrorKind::Corrupt, g.where_key(id_key),
              "token id " + std::to_string(*id) + " is past the vocabulary of " + std::to_string(tokens.strings.size()));
  return std::string(tokens.strings[*id]);
}

ptn::chat::ChatTemplateInfo load_template(const Args& a) {
  std::string path = a.model;
  if (ptn::is_directory(path)) path += "/tokenizer_config.json";
  if (!ptn::file_exists(path)) ptn::fail(ptn::ErrorKind::Io, path, "no such file");
  if (starts_with_bytes(path, "PTN\0PROG", 8)) {  // the template and tokens exported with the program
    auto program = ptn::Program::load(path);
    const auto& tok = program->meta().tokenizer;
    if (!tok) ptn::fail(ptn::ErrorKind::InvalidArgument, path, "the program was exported without a tokenizer");
    if (a.template_name != "default")
      ptn::fail(ptn::ErrorKind::Unsupported, path, "a .ptn program holds only the default chat template");
    if (tok->chat_template.empty()) ptn::fail(ptn::ErrorKind::Unsupported, path, "the program has no chat template");
    return {tok->chat_template, tok->bos_token, tok->eos_token};
  }
  if (ptn::looks_like_gguf(path)) {
    auto g = ptn::GgufFile::open(path);
    ptn::chat::ChatTemplateInfo info;
    std::string key = a.template_name == "default" ? "tokenizer.chat_template" : "tokenizer.chat_template." + a.template_name;
    auto tmpl = g->opt_string(key);
    if (!tmpl) ptn::fail(ptn::ErrorKind::Unsupported, g->where_key(key), "the GGUF file has no chat template");
    info.chat_template = *tmpl;
    info.bos_token = gguf_token(*g, "tokenizer.ggml.bos_token_id");
    info.eos_token = gguf_token(*g, "tokenizer.ggml.eos_token_id");
    return info;
  }
  return ptn::chat::read_tokenizer_config(parse_json(ptn::read_text_file(path), path), path, a.template_name);
}

std::function<int()> setup(CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* sub = app.add_subcommand("chat-template", "Render a conversation with a model's chat template (as Hugging Face does)");
  sub->add_option(ptn::cli::opt("model"), args->model, "tokenizer_config.json (or its directory), GGUF file or .ptn")->required();
  sub->add_option(ptn::cli::opt("messages"), args->messages, "JSON file: array of messages or {\"messages\", \"tools\"}")->required();
  sub->add_option(ptn::cli::opt("tools"), args->tools, "JSON file: array of tool schemas");
  sub->add_option(ptn::cli::opt("vars"), args->vars, "JSON object of extra template variables, e.g. '{\"enable_thinking\": false}'");
  sub->add_option(ptn::cli::opt("template"), args->template_name, "named template to use when there are several");
  sub->add_flag(ptn::cli::opt("add-generation-prompt"), args->add_generation_prompt, "end with the assistant turn header");
  return [args] {
    const Args& a = *args;
    ptn::chat::ChatTemplateInfo info = load_template(a);
    nlohmann::ordered_json input = parse_json(ptn::read_text_file(a.messages), a.messages);
    nlohmann::ordered_json messages;
    ptn::chat::ChatOptions opts;
    if (input.is_array()) {
      messages = input;
    } else if (input.is_object() && input.contains("messages")) {
      messages = input["messages"];
      if (input.contains("tools")) opts.tools = input["tools"];
    } else {
      ptn::fail(ptn::ErrorKind::InvalidArgument, a.messages, "must hold a JSON array of messages or an object with \"messages\"");
    }
    if (!a.tools.empty()) opts.tools = parse_json(ptn::read_text_file(a.tools), a.tools);
    if (!a.vars.empty()) {
      opts.extra = parse_json(a.vars, "--vars");
      if (!opts.extra.is_object()) ptn::fail(ptn::ErrorKind::InvalidArgument, "--vars", "must be a JSON object");
    }
    opts.add_generation_prompt = a.add_generation_prompt;
    opts.bos_token = info.bos_token;
    opts.eos_token = info.eos_token;
    std::string prompt = ptn::chat::render_chat(info.chat_template, messages, opts);
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    std::fflush(stdout);
    return 0;
  };
}

PTN_COMMAND("chat-template", setup);

}  // namespace
