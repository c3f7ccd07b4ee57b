// Reads llama.cpp tokenizer test vectors: <name>.inp (texts separated by
// "\n__ggml_vocab_test__\n") and <name>.out (one line of space-separated ids per text).
#pragma once
#include <sstream>
#include <string>
#include <vector>

#include "core/file.h"

namespace ptn::test {

struct VectorCase {
  std::string text;
  std::vector<int32_t> ids;
};

inline std::vector<VectorCase> read_vectors(const std::string& base) {
  const std::string inp = read_text_file(base + ".inp");
  const std::string out = read_text_file(base + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  size_t pos = 0;
  while (true) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) break;
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<VectorCase> cases;
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line) && i < texts.size()) {
    VectorCase c{texts[i++], {}};
    std::istringstream nums(line);
    int64_t v;
    while (nums >> v) c.ids.push_back(static_cast<int32_t>(v));
    cases.push_back(std::move(c));
  }
  return cases;
}

inline std::string show_ids(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s + "]";
}

}  // namespace ptn::test
