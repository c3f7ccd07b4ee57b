// The codebooks of the IQ3 GGUF types (ggml's iq3xxs_grid and iq3s_grid): each entry is a group
// of four magnitudes, expanded here to one 32-bit word whose byte k is the magnitude of weight k.
// Sub-block decoders shared by the matmul kernels: a sub-block's 32 signed magnitudes and its
// integer scale (the reference dequantization is written out separately in quant_iq.cpp).
#pragma once
#include <array>
#include <cstdint>
#include <cstring>

#include "core/blocks.h"

namespace ptn {

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

}  // namespace ptn
