// Small text helpers shared by the front ends: ASCII whitespace trimming, and the hold-back
// length of streamed text (the tail that may still grow into a tag, marker or stop string).
#pragma once
#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

namespace ptn::text {

inline bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

inline std::string_view ltrim(std::string_view s) {
  size_t b = 0;
  while (b < s.size() && is_space(s[b])) ++b;
  return s.substr(b);
}

inline std::string_view rtrim(std::string_view s) {
  size_t e = s.size();
  while (e > 0 && is_space(s[e - 1])) --e;
  return s.substr(0, e);
}

inline std::string trim(std::string_view s) { return std::string(rtrim(ltrim(s))); }

// Length of the longest suffix of `text` that is a proper prefix of `marker`: the bytes a
// stream holds back because they may be the start of `marker` (0 when marker is empty).
inline size_t partial_prefix_suffix(std::string_view text, std::string_view marker) {
  if (marker.empty()) return 0;
  for (size_t n = std::min(marker.size() - 1, text.size()); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

}  // namespace ptn::text
