// The codebooks of the IQ1, IQ2 and IQ3 GGUF types (ggml's iq1s_grid, iq2xxs_grid, iq2xs_grid,
// iq2s_grid, iq3xxs_grid and iq3s_grid): an IQ3 entry is a group of four magnitudes, expanded
// here to one 32-bit word whose byte k is the magnitude of weight k; an IQ2 entry a group of eight
// in a 64-bit word, an IQ1 entry eight int8 values -1, 0, 1.
// Sub-block decoders shared by the matmul kernels: a sub-block's 32 signed magnitudes and its
// integer scale (the reference dequantization is written out separately in quant_iq.cpp).
#pragma once
#include <array>
#include <cstdint>
#include <cstring>

#include "core/blocks.h"

namespace ptn {

extern const std::array<uint64_t, 2048> kIq1sGrid;   // int8 values -1, 0, 1 (IQ1_S and IQ1_M)
extern const std::array<uint64_t, 256> kIq2xxsGrid;   // magnitudes 8, 25, 43
extern const std::array<uint64_t, 512> kIq2xsGrid;
extern const std::array<uint64_t, 1024> kIq2sGrid;
extern const std::array<uint32_t, 256> kIq3xxsGrid;  // magnitudes 4, 12, 20, 28, 36, 44, 52, 62
extern const std::array<uint32_t, 512> kIq3sGrid;    // magnitudes 1, 3, ..., 15

// The 8 signs of a group pair of IQ3_XXS (and the IQ2 types): 7 stored bits, the 8th set when
// they hold an odd count, so that every sign byte has an even count of minus signs.
inline uint8_t iq_even_signs(uint32_t seven) {
  return static_cast<uint8_t>(seven | (static_cast<uint32_t>(__builtin_parity(seven)) << 7));
}

// IQ3_XXS sub-block s (0..7): q[i] = sign * magnitude of weight 32 s + i; x = d * L / 4 * q.
inline void iq3xxs_sub_codes(const BlockIQ3XXS& b, int s, int8_t q[32], int* L) {
  uint32_t w;
  std::memcpy(&w, b.qs + 64 + 4 * s, 4);
  *L = 2 * static_cast<int>(w >> 28) + 1;
  const uint8_t* idx = b.qs + 8 * s;
  for (int l = 0; l < 4; ++l) {
    const uint8_t signs = iq_even_signs((w >> (7 * l)) & 127);
    for (int i = 0; i < 8; ++i) {
      const int m = static_cast<int>((kIq3xxsGrid[idx[2 * l + i / 4]] >> (8 * (i % 4))) & 255);
      q[8 * l + i] = static_cast<int8_t>((signs >> i) & 1 ? -m : m);
    }
  }
}

// IQ3_S sub-block s (0..7): q[i] = sign * magnitude of weight 32 s + i; x = d * L * q.
inline void iq3s_sub_codes(const BlockIQ3S& b, int s, int8_t q[32], int* L) {
  *L = 2 * ((b.scales[s / 2] >> (4 * (s % 2))) & 15) + 1;
  for (int g = 0; g < 8; ++g) {
    const uint32_t grid = kIq3sGrid[b.qs[8 * s + g] | (((b.qh[s] >> g) & 1) << 8)];
    const uint8_t signs = b.signs[4 * s + g / 2];
    for (int k = 0; k < 4; ++k) {
      const int i = 4 * (g % 2) + k;  // the weight's bit in its sign byte
      const int m = static_cast<int>((grid >> (8 * k)) & 255);
      q[4 * g + k] = static_cast<int8_t>((signs >> i) & 1 ? -m : m);
    }
  }
}

// A group of 8 codebook magnitudes with its sign byte applied (bit i: weight i negative).
inline void iq2_group(uint64_t grid, uint8_t signs, int8_t* q) {
  for (int i = 0; i < 8; ++i) {
    const int m = static_cast<int>((grid >> (8 * i)) & 255);
    q[i] = static_cast<int8_t>((signs >> i) & 1 ? -m : m);
  }
}

// The IQ2 types' sub-block s (0..7): q[i] = sign * magnitude of weight 32 s + i, L[h] the odd
// integer scale of half h (weights 16 h .. 16 h + 15): x = d * L / 8 * q.
inline void iq2xxs_sub_codes(const BlockIQ2XXS& b, int s, int8_t q[32], int L[2]) {
  uint32_t w;
  std::memcpy(&w, b.qs + 8 * s + 4, 4);
  L[0] = L[1] = 2 * static_cast<int>(w >> 28) + 1;
  for (int l = 0; l < 4; ++l) iq2_group(kIq2xxsGrid[b.qs[8 * s + l]], iq_even_signs((w >> (7 * l)) & 127), q + 8 * l);
}

inline void iq2xs_sub_codes(const BlockIQ2XS& b, int s, int8_t q[32], int L[2]) {
  L[0] = 2 * (b.scales[s] & 15) + 1;
  L[1] = 2 * (b.scales[s] >> 4) + 1;
  for (int l = 0; l < 4; ++l) {
    const uint32_t v = b.qs[8 * s + 2 * l] | (static_cast<uint32_t>(b.qs[8 * s + 2 * l + 1]) << 8);
    iq2_group(kIq2xsGrid[v & 511], iq_even_signs(v >> 9), q + 8 * l);
  }
}

inline void iq2s_sub_codes(const BlockIQ2S& b, int s, int8_t q[32], int L[2]) {
  L[0] = 2 * (b.scales[s] & 15) + 1;
  L[1] = 2 * (b.scales[s] >> 4) + 1;
  for (int l = 0; l < 4; ++l)
    iq2_group(kIq2sGrid[b.qs[4 * s + l] | (((b.qh[s] >> (2 * l)) & 3) << 8)], b.qs[32 + 4 * s + l], q + 8 * l);
}

// The IQ1 types' sub-block s (0..7) in the same form: q[i] = 8 * value + (delta < 0 ? -1 : 1)
// (the delta is +-1/8), so that x = d * L[h] / 8 * q as for IQ2.
inline void iq1_group(uint64_t grid, bool minus, int8_t* q) {
  for (int i = 0; i < 8; ++i) q[i] = static_cast<int8_t>(8 * static_cast<int8_t>((grid >> (8 * i)) & 255) + (minus ? -1 : 1));
}

inline void iq1s_sub_codes(const BlockIQ1S& b, int s, int8_t q[32], int L[2]) {
  const uint32_t h = b.qh[2 * s] | (static_cast<uint32_t>(b.qh[2 * s + 1]) << 8);
  L[0] = L[1] = 2 * static_cast<int>((h >> 12) & 7) + 1;
  for (int l = 0; l < 4; ++l) iq1_group(kIq1sGrid[b.qs[4 * s + l] | (((h >> (3 * l)) & 7) << 8)], (h >> 15) & 1, q + 8 * l);
}

// IQ1_M's four 16-bit scale words.
inline uint16_t iq1m_word(const BlockIQ1M& b, int w) {
  return static_cast<uint16_t>(b.scales[2 * w] | (b.scales[2 * w + 1] << 8));
}
// IQ1_M's f16 block scale: the top nibbles of the four words, word 0 lowest.
inline uint16_t iq1m_d_bits(const BlockIQ1M& b) {
  return static_cast<uint16_t>((iq1m_word(b, 0) >> 12) | ((iq1m_word(b, 1) >> 8) & 0x00F0) |
                               ((iq1m_word(b, 2) >> 4) & 0x0F00) | (iq1m_word(b, 3) & 0xF000));
}

inline void iq1m_sub_codes(const BlockIQ1M& b, int s, int8_t q[32], int L[2]) {
  const uint16_t w = iq1m_word(b, s / 2);
  L[0] = 2 * ((w >> (6 * (s % 2))) & 7) + 1;
  L[1] = 2 * ((w >> (6 * (s % 2) + 3)) & 7) + 1;
  for (int l = 0; l < 4; ++l) {
    const int nib = (b.qh[2 * s + l / 2] >> (4 * (l % 2))) & 15;
    iq1_group(kIq1sGrid[b.qs[4 * s + l] | ((nib & 7) << 8)], nib & 8, q + 8 * l);
  }
}

}  // namespace ptn
