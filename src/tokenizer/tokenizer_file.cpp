#include "tokenizer/tokenizer_file.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "core/file.h"
#include "formats/gguf.h"
#include "formats/gguf_spec.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/pre_tokenizer.h"

namespace ptn {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string resolve(const std::string& path) {
  if (is_directory(path)) {
    const std::string json = path + (ends_with(path, "/") ? "" : "/") + "tokenizer.json";
    if (!file_exists(json)) fail(ErrorKind::InvalidArgument, path, "a directory without tokenizer.json");
    return json;
  }
  return path;
}

}  // namespace

void apply_gguf_strip_rules(const GgufFile& g, TokenizerSpec& spec) {
  std::string name = g.opt_string("general.name").value_or("");
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string arch = g.opt_string("general.architecture").value_or("");
  if (arch != "phi3" && name.find("phi-3") == std::string::npos && name.find("phi3") == std::string::npos) return;
  // Phi-3's tokenizer.json marks its chat markers (and </s>) rstrip; GGUF does not carry the flag.
  spec.rstrip_ids.clear();
  for (size_t i = 0; i < spec.tokens.size() && i < spec.token_types.size(); ++i) {
    const std::string& t = spec.tokens[i];
    const TokenType ty = spec.token_types[i];
    const bool special = ty == TokenType::Control || ty == TokenType::UserDefined || ty == TokenType::Unknown;
    if ((special || t == "</s>") && t != "<unk>" && t != "<s>" && t != "<|endoftext|>")
      spec.rstrip_ids.push_back(static_cast<int32_t>(i));
  }
}

TokenizerSpec wordpiece_spec_from_gguf(const GgufFile& g) {
  TokenizerSpec t;
  t.kind = TokenizerKind::WordPiece;
  t.tokens = g.get_string_array("tokenizer.ggml.tokens");
  const size_t n = t.tokens.size();
  if (n == 0) fail(ErrorKind::Corrupt, g.where_key("tokenizer.ggml.tokens"), "empty vocabulary");
  if (g.has("tokenizer.ggml.token_type")) {
    const std::vector<int64_t> types = g.get_int_array("tokenizer.ggml.token_type");
    if (types.size() != n)
      fail(ErrorKind::Corrupt, g.where_key("tokenizer.ggml.token_type"),
           std::to_string(types.size()) + " types for " + std::to_string(n) + " tokens");
    for (size_t k = 0; k < n; ++k) {
      if (types[k] < 1 || types[k] > 6)
        fail(ErrorKind::Corrupt, g.where_key("tokenizer.ggml.token_type"),
             "token " + std::to_string(k) + " has unknown type " + std::to_string(types[k]));
      t.token_types.push_back(static_cast<TokenType>(types[k]));
    }
  }
  auto id = [&](const char* k) -> std::optional<int32_t> {
    if (!g.has(k)) return std::nullopt;
    const int64_t v = g.get_i64(k);
    if (v < 0 || static_cast<uint64_t>(v) >= n)
      fail(ErrorKind::Corrupt, g.where_key(k), "token id " + std::to_string(v) + " is outside the vocabulary");
    return static_cast<int32_t>(v);
  };
  t.unk_id = id("tokenizer.ggml.unknown_token_id");
  if (!t.unk_id) fail(ErrorKind::Corrupt, g.where_key("tokenizer.ggml.unknown_token_id"), "a WordPiece vocabulary needs it");
  t.bos_id = id("tokenizer.ggml.cls_token_id");
  t.eos_id = id("tokenizer.ggml.seperator_token_id");  // sic: the key's spelling
  t.pad_id = id("tokenizer.ggml.padding_token_id");
  t.add_bos = t.bos_id.has_value();
  t.add_eos = t.eos_id.has_value();
  t.add_space_prefix = false;
  t.byte_fallback = false;
  t.pre_tokenizer = g.opt_string("tokenizer.ggml.pre").value_or("");
  if (t.bos_id) t.bos_token = t.tokens[*t.bos_id];
  if (t.eos_id) t.eos_token = t.tokens[*t.eos_id];
  return t;
}

TokenizerSource detect_tokenizer_source(const std::string& given) {
  const std::string path = resolve(given);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail(ErrorKind::Io, path, std::string("cannot open: ") + std::strerror(errno));
  char head[64] = {};
  const size_t n = std::fread(head, 1, sizeof head, f);
  std::fclose(f);
  if (n >= 4 && std::memcmp(head, "GGUF", 4) == 0) return TokenizerSource::Gguf;
  if (n >= 8 && std::memcmp(head, "PTN\0PROG", 8) == 0) return TokenizerSource::Ptn;
  if (ends_with(path, ".ptn")) return TokenizerSource::Ptn;
  for (size_t i = 0; i < n; ++i) {
    if (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t') continue;
    if (head[i] == '{') return TokenizerSource::HfJson;
    break;
  }
  fail(ErrorKind::InvalidArgument, path, "not a GGUF file, a tokenizer.json or a .ptn program");
}

TokenizerSpec load_tokenizer_spec(const std::string& given) {
  const std::string path = resolve(given);
  switch (detect_tokenizer_source(path)) {
    case TokenizerSource::Gguf: {
      auto g = GgufFile::open(path);
      if (!gguf_has_tokenizer(*g)) fail(ErrorKind::InvalidArgument, path, "the GGUF file holds no tokenizer.ggml.* keys");
      if (g->get_string("tokenizer.ggml.model") == "bert") return wordpiece_spec_from_gguf(*g);
      TokenizerSpec spec = tokenizer_spec_from_gguf(*g);
      apply_gguf_strip_rules(*g, spec);
      return spec;
    }
    case TokenizerSource::HfJson:
      return load_hf_tokenizer(path);
    case TokenizerSource::Ptn:
      // Hook for the .ptn reader: the manifest's tokenizer section will be read here.
      fail(ErrorKind::Unsupported, path, "reading the tokenizer of a .ptn program is not supported yet");
  }
  fail(ErrorKind::Internal, path, "unknown tokenizer source");
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  return Tokenizer::create(load_tokenizer_spec(path));
}

void name_gguf_pre_tokenizer(TokenizerSpec& spec, const std::string& where) {
  if (spec.kind != TokenizerKind::ByteLevelBPE || !spec.pre_tokenizer.empty()) return;
  if (!spec.pre_split_explicit && spec.pre_split_regexes.empty()) return;
  spec.pre_tokenizer = tok::pre_tokenizer_name_for(spec.pre_split_regexes, spec.ignore_merges);
  if (!spec.pre_tokenizer.empty()) return;
  std::string list;
  for (const auto& r : spec.pre_split_regexes) list += (list.empty() ? "'" : ", '") + r + "'";
  fail(ErrorKind::Unsupported, where + ": pre_tokenizer",
       "its split regexes [" + list + "] have no GGUF 'tokenizer.ggml.pre' name that llama.cpp knows");
}

}  // namespace ptn
