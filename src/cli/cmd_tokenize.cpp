// `ptn tokenize` and `ptn detokenize`: the model's tokenizer from the command line.
//   ptn tokenize --model FILE --text STRING [--no-add-special]   -> [1, 15043, 3186]
//   ptn detokenize --model FILE --ids "[1, 15043, 3186]" [--skip-special] -> text
// FILE: a GGUF, a tokenizer.json (tokenizer_config.json beside it is read too), a directory
// holding tokenizer.json, or a .ptn program (the tokenizer exported with it). Special tokens
// written in the text are always recognised;
// --no-add-special leaves out the BOS/EOS the model adds (HF add_special_tokens=False).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/error.h"
#include "core/file.h"
#include "runtime/inspect.h"
#include "runtime/program.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_file.h"

namespace {

constexpr size_t kMaxIdsText = 64u << 20;

// The tokenizer of any model file the commands accept; a .ptn program's is in its manifest.
std::unique_ptr<ptn::Tokenizer> open_tokenizer(const std::string& path) {
  if (ptn::file_exists(path) && !ptn::is_directory(path) && ptn::is_ptn_file(path)) {
    auto program = ptn::Program::load(path);
    if (!program->meta().tokenizer)
      ptn::fail(ptn::ErrorKind::InvalidArgument, path, "the program was exported without a tokenizer");
    return ptn::Tokenizer::create(*program->meta().tokenizer);
  }
  return ptn::load_tokenizer(path);
}

struct TokenizeOptions {
  std::string model, text, file;
  bool no_add_special = false;
  const CLI::Option* text_option = nullptr;
};

bool text_given(const TokenizeOptions& o) { return o.text_option && o.text_option->count() > 0; }

constexpr size_t kMaxTokenizeInput = 64u << 20;

// A file's bytes, or standard input's for "-" (at most 64 MiB).
std::string read_input(const std::string& path) {
  if (path != "-") return ptn::read_text_file(path, kMaxTokenizeInput);
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) {
    out.append(buf, n);
    if (out.size() > kMaxTokenizeInput)
      ptn::fail(ptn::ErrorKind::InvalidArgument, "--file -", "standard input is larger than 64 MiB");
  }
  return out;
}

std::function<int()> setup_tokenize(CLI::App& app) {
  auto opts = std::make_shared<TokenizeOptions>();
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids of a text as a JSON array");
  cmd->add_option(ptn::cli::opt("model", "m"), opts->model, "GGUF file, tokenizer.json, model directory or .ptn program")
      ->required();
  auto* text_opt = cmd->add_option(ptn::cli::opt("text", "t"), opts->text, "The text to tokenize");
  auto* file_opt = cmd->add_option(ptn::cli::opt("file", "f"), opts->file,
                                   "Tokenize the bytes of this file instead ('-': standard input; any bytes, NUL included)");
  opts->text_option = text_opt;
  text_opt->excludes(file_opt);
  file_opt->excludes(text_opt);
  cmd->add_flag(ptn::cli::opt("no-add-special"), opts->no_add_special,
                "Do not add the BOS/EOS tokens the model adds (special tokens in the text still count)");
  return [opts] {
    try {
      if (opts->file.empty() && !text_given(*opts))
        ptn::fail(ptn::ErrorKind::InvalidArgument, "--text", "give --text TEXT or --file FILE ('-' for standard input)");
      const std::string text = opts->file.empty() ? opts->text : read_input(opts->file);
      auto tok = open_tokenizer(opts->model);
      const auto ids = tok->encode(text, !opts->no_add_special, true);
      std::string out = "[";
      for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
      std::printf("%s]\n", out.c_str());
      return 0;
    } catch (const std::exception& e) {
      return ptn::cli::report_error("tokenize", e);
    }
  };
}

struct DetokenizeOptions {
  std::string model, ids;
  bool skip_special = false;
};

std::vector<int32_t> parse_ids(const std::string& text) {
  if (text.size() > kMaxIdsText) ptn::fail(ptn::ErrorKind::InvalidArgument, "--ids", "the list is too long");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    ptn::fail(ptn::ErrorKind::InvalidArgument, "--ids", std::string("not a JSON array of integers: ") + e.what());
  }
  if (!j.is_array()) ptn::fail(ptn::ErrorKind::InvalidArgument, "--ids", "expected a JSON array such as [1, 2, 3]");
  std::vector<int32_t> ids;
  ids.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_number_integer() || j[i].get<int64_t>() < 0 || j[i].get<int64_t>() > INT32_MAX)
      ptn::fail(ptn::ErrorKind::InvalidArgument, "--ids[" + std::to_string(i) + "]", "expected a token id (an integer >= 0)");
    ids.push_back(static_cast<int32_t>(j[i].get<int64_t>()));
  }
  return ids;
}

std::function<int()> setup_detokenize(CLI::App& app) {
  auto opts = std::make_shared<DetokenizeOptions>();
  auto* cmd = app.add_subcommand("detokenize", "Print the text of a JSON array of token ids");
  cmd->add_option(ptn::cli::opt("model", "m"), opts->model, "GGUF file, tokenizer.json, model directory or .ptn program")
      ->required();
  cmd->add_option(ptn::cli::opt("ids"), opts->ids, "Token ids as a JSON array, e.g. \"[1, 15043]\"")->required();
  cmd->add_flag(ptn::cli::opt("skip-special"), opts->skip_special, "Leave out control tokens such as BOS/EOS");
  return [opts] {
    try {
      auto tok = open_tokenizer(opts->model);
      const std::string text = tok->decode(parse_ids(opts->ids), opts->skip_special);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fputc('\n', stdout);
      return 0;
    } catch (const std::exception& e) {
      return ptn::cli::report_error("detokenize", e);
    }
  };
}

PTN_COMMAND("tokenize", setup_tokenize);
PTN_COMMAND("detokenize", setup_detokenize);

}  // namespace
