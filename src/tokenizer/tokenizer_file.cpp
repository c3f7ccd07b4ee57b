#include "tokenizer/tokenizer_file.h"

#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/file.h"
#include "formats/gguf.h"
#include "formats/gguf_spec.h"
#include "tokenizer/hf_tokenizer_json.h"

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
      return tokenizer_spec_from_gguf(*g);
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

}  // namespace ptn
