// UTF-8 helpers for the tokenizers: character lengths, validation that tolerates any bytes,
// code point encoding, and the GPT-2 byte <-> unicode mapping of byte-level BPE.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ptn::tok {

// Length of the UTF-8 sequence that starts with `lead` as announced by the lead byte
// (1 for ASCII, continuation bytes and bytes that can never start a sequence).
size_t utf8_lead_length(uint8_t lead);

// How many bytes at `s[pos..]` form one well-formed UTF-8 character: 1..4, or 0 when the bytes
// there are not a well-formed character (invalid, overlong, surrogate, or cut off by the end).
// With `incomplete` non-null, it is set when the bytes are a valid prefix cut off by the end.
size_t utf8_valid_length(std::string_view s, size_t pos, bool* incomplete = nullptr);

// Appends the UTF-8 encoding of code point `cp` (must be <= 0x10FFFF).
void append_utf8(std::string& out, uint32_t cp);

// Decodes the character at s[pos] (which must have valid length n from utf8_valid_length).
uint32_t decode_utf8(std::string_view s, size_t pos, size_t n);

// The number of bytes at s[pos] (which is not a well-formed character) that form one maximal
// ill-formed subpart: they stand for one U+FFFD.
size_t utf8_maximal_subpart(std::string_view s, size_t pos);

// Replaces every ill-formed sequence by U+FFFD (one per maximal invalid subpart).
std::string sanitize_utf8(std::string_view s);

// GPT-2 byte-level mapping: each byte 0..255 is written as one printable code point
// (printable Latin-1 bytes map to themselves, the others to U+0100 + n in byte order).
struct ByteLevelMap {
  ByteLevelMap();
  std::array<uint32_t, 256> byte_to_cp{};  // byte -> code point
  std::array<std::string, 256> byte_to_utf8;  // byte -> that code point in UTF-8
  int32_t cp_to_byte(uint32_t cp) const {  // -1 if cp is not one of the 256
    return cp < inverse.size() ? inverse[cp] : -1;
  }

 private:
  std::array<int16_t, 512> inverse{};
};
const ByteLevelMap& byte_level_map();

}  // namespace ptn::tok
