#include "tokenizer/utf8.h"

namespace ptn::tok {

size_t utf8_lead_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

size_t utf8_valid_length(std::string_view s, size_t pos, bool* incomplete) {
  if (incomplete) *incomplete = false;
  if (pos >= s.size()) return 0;
  const auto b = [&](size_t i) { return static_cast<uint8_t>(s[pos + i]); };
  const uint8_t c = b(0);
  if (c < 0x80) return 1;
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlongs
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    return 0;
  }
  for (size_t i = 1; i < n; ++i) {
    if (pos + i >= s.size()) {
      if (incomplete) *incomplete = true;
      return 0;
    }
    const uint8_t x = b(i);
    const uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (x < l || x > h) return 0;
  }
  return n;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

uint32_t decode_utf8(std::string_view s, size_t pos, size_t n) {
  const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(s[pos + i])); };
  switch (n) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

size_t utf8_maximal_subpart(std::string_view s, size_t pos) {
  // A lead byte followed by the continuation bytes that still form a valid prefix.
  size_t skip = 1;
  const size_t want = utf8_lead_length(static_cast<uint8_t>(s[pos]));
  while (skip < want && pos + skip < s.size()) {
    bool incomplete = false;
    if (utf8_valid_length(s.substr(pos, skip + 1), 0, &incomplete) == 0 && !incomplete) break;
    ++skip;
  }
  return skip;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = utf8_valid_length(s, i);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    const size_t skip = utf8_maximal_subpart(s, i);
    out += "\xEF\xBF\xBD";
    i += skip;
  }
  return out;
}

ByteLevelMap::ByteLevelMap() {
  inverse.fill(-1);
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const uint32_t cp = printable ? b : next++;
    byte_to_cp[b] = cp;
    append_utf8(byte_to_utf8[b], cp);
    inverse[cp] = static_cast<int16_t>(b);
  }
}

const ByteLevelMap& byte_level_map() {
  static const ByteLevelMap m;
  return m;
}

}  // namespace ptn::tok
