// CRC-32C with the SSE4.2 crc32 instruction. Only called after crc32c_sse42_available()
// (cpuid) said yes; every function that uses the instruction carries the target attribute, so
// the rest of the program stays baseline x86-64.
//
// The instruction has a latency of about 3 cycles and a throughput of 1 per cycle, so one
// dependency chain uses a third of it. Long inputs are cut into three lanes of kLane bytes,
// each lane is run as its own chain, and the lanes are joined with the linear "append kLane
// zero bytes" map: reg(r, a ++ b) = shift(reg(r, a)) ^ reg(0, b) for raw (uninverted) registers.
#include <nmmintrin.h>

#include <array>
#include <cstring>

#include "core/crc32c.h"

namespace ptn {

namespace {

constexpr size_t kLane = 4096;  // bytes per lane; three lanes per step

__attribute__((target("sse4.2"))) uint32_t raw_update(uint32_t reg, const uint8_t* p, size_t n) {
  uint64_t c = reg;
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

// shift(r) = register after feeding kLane zero bytes from register r, as four byte tables
// (the map is linear over GF(2), so it is the XOR of the images of r's bytes).
struct ShiftTables {
  std::array<std::array<uint32_t, 256>, 4> t{};
};

__attribute__((target("sse4.2"))) ShiftTables make_shift_tables() {
  static const uint8_t zeros[kLane] = {};
  uint32_t basis[32];
  for (int bit = 0; bit < 32; ++bit) basis[bit] = raw_update(1u << bit, zeros, kLane);
  ShiftTables s;
  for (int k = 0; k < 4; ++k)
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t v = 0;
      for (int i = 0; i < 8; ++i)
        if ((b >> i) & 1) v ^= basis[8 * k + i];
      s.t[k][b] = v;
    }
  return s;
}

inline uint32_t shift(const ShiftTables& s, uint32_t r) {
  return s.t[0][r & 0xff] ^ s.t[1][(r >> 8) & 0xff] ^ s.t[2][(r >> 16) & 0xff] ^ s.t[3][r >> 24];
}

}  // namespace

__attribute__((target("sse4.2"))) uint32_t crc32c_extend_sse42(uint32_t crc, const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t reg = ~crc;
  if (n >= 3 * kLane) {
    static const ShiftTables tables = make_shift_tables();
    while (n >= 3 * kLane) {
      uint64_t a = reg, b = 0, c = 0;
      const uint8_t* pa = p;
      const uint8_t* pb = p + kLane;
      const uint8_t* pc = p + 2 * kLane;
      for (size_t i = 0; i < kLane; i += 8) {
        uint64_t wa, wb, wc;
        std::memcpy(&wa, pa + i, 8);
        std::memcpy(&wb, pb + i, 8);
        std::memcpy(&wc, pc + i, 8);
        a = _mm_crc32_u64(a, wa);
        b = _mm_crc32_u64(b, wb);
        c = _mm_crc32_u64(c, wc);
      }
      uint32_t ab = shift(tables, static_cast<uint32_t>(a)) ^ static_cast<uint32_t>(b);
      reg = shift(tables, ab) ^ static_cast<uint32_t>(c);
      p += 3 * kLane;
      n -= 3 * kLane;
    }
  }
  return ~raw_update(reg, p, n);
}

}  // namespace ptn
