#include "core/crc32c.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <array>
#include <cstring>

namespace ptn {

namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // Castagnoli polynomial, bit-reflected

// tables[0] is the classic byte-at-a-time table; tables[k][b] is the CRC contribution of byte
// b followed by k zero bytes, which lets the loop fold 8 input bytes per step.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; ++b)
    for (int k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  return t;
}

constexpr Tables kTables = make_tables();

bool detect_sse42() {
#if !defined(__x86_64__) && !defined(__i386__)
  return false;  // not an x86 CPU: crc32c_sse42.cpp holds a stub that is never called
#else
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  return (c >> 20) & 1;
#endif
}

}  // namespace

uint32_t crc32c_extend_portable(uint32_t crc, const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (n >= 8) {
    uint32_t lo, hi;  // little-endian words; the .ptn code assumes a little-endian host
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = kTables[7][lo & 0xff] ^ kTables[6][(lo >> 8) & 0xff] ^ kTables[5][(lo >> 16) & 0xff] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xff] ^ kTables[2][(hi >> 8) & 0xff] ^
        kTables[1][(hi >> 16) & 0xff] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xff];
  return ~c;
}

bool crc32c_sse42_available() {
  static const bool ok = detect_sse42();
  return ok;
}

#if !defined(__x86_64__) && !defined(__i386__)
// crc32c_sse42.cpp is x86 only; elsewhere crc32c_sse42_available() is false and this is never
// reached through crc32c_extend (a direct caller gets the same result, portably).
uint32_t crc32c_extend_sse42(uint32_t crc, const void* data, size_t n) { return crc32c_extend_portable(crc, data, n); }
#endif

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n) {
  if (crc32c_sse42_available()) return crc32c_extend_sse42(crc, data, n);
  return crc32c_extend_portable(crc, data, n);
}

const char* crc32c_implementation() { return crc32c_sse42_available() ? "sse4.2" : "portable"; }

}  // namespace ptn
