#include "serve/reasoning.h"

#include <algorithm>

namespace ptn::serve {
namespace {

constexpr const char* kOpen = "<think>";
constexpr const char* kClose = "</think>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string ltrim(const std::string& s) {
  size_t b = 0;
  while (b < s.size() && is_space(s[b])) ++b;
  return s.substr(b);
}

std::string rtrim(std::string s) {
  while (!s.empty() && is_space(s.back())) s.pop_back();
  return s;
}

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag(const std::string& text, const std::string& tag) {
  for (size_t n = std::min(tag.size() - 1, text.size()); n > 0; --n)
    if (text.compare(text.size() - n, n, tag, 0, n) == 0) return n;
  return 0;
}

// Where the reasoning starts in `text` (npos: the reply has none; text.size() + 1: undecided).
size_t reasoning_start(const ReasoningMode& m, const std::string& text, bool final) {
  if (m.starts_inside) return 0;
  size_t b = 0;
  while (b < text.size() && is_space(text[b])) ++b;
  const std::string open = kOpen;
  if (text.compare(b, open.size(), open) == 0) return b + open.size();
  if (!final && text.size() - b < open.size() && open.compare(0, text.size() - b, text, b) == 0)
    return text.size() + 1;  // "<thi" may still become "<think>"
  return std::string::npos;
}

ReasoningSplit split(const ReasoningMode& m, const std::string& text, bool final, bool trim_end) {
  ReasoningSplit out;
  if (!m.enabled) {
    out.content = text;
    return out;
  }
  const size_t start = reasoning_start(m, text, final);
  if (start == text.size() + 1) return out;  // undecided: hold all
  if (start == std::string::npos) {
    out.content = final ? text : (ltrim(text).empty() ? "" : text);
    return out;
  }
  const size_t close = text.find(kClose, start);
  if (close == std::string::npos) {
    std::string r = text.substr(start);
    if (!final) r.resize(r.size() - partial_tag(r, kClose));
    out.reasoning = trim_end ? rtrim(ltrim(r)) : ltrim(r);
    return out;
  }
  out.reasoning = ltrim(text.substr(start, close - start));
  if (trim_end) out.reasoning = rtrim(out.reasoning);
  out.content = ltrim(text.substr(close + std::string(kClose).size()));
  return out;
}

}  // namespace

ReasoningMode reasoning_mode(const std::string& chat_template, const std::string& prompt_text) {
  ReasoningMode m;
  m.enabled = chat_template.find(kOpen) != std::string::npos && chat_template.find(kClose) != std::string::npos;
  if (!m.enabled) return m;
  const std::string p = rtrim(prompt_text);
  const std::string open = kOpen;
  m.starts_inside = p.size() >= open.size() && p.compare(p.size() - open.size(), open.size(), open) == 0;
  return m;
}

ReasoningSplit split_reasoning(const ReasoningMode& m, const std::string& text, bool trim) {
  return split(m, text, true, trim);
}

ReasoningSplit split_reasoning_so_far(const ReasoningMode& m, const std::string& text) {
  return split(m, text, false, false);
}

}  // namespace ptn::serve
