// Reference dequantization of the IQ1, IQ2 and IQ3 codebook types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS,
// IQ2_S, IQ3_XXS, IQ3_S), read only: ptn has no quantizer for them (llama-quantize writes them).
// Written from the block layouts in core/blocks.h, weight by weight, without the kernels'
// sub-block decoders.
#include "core/iq_grids.h"
#include "core/quant_blocks.h"
#include "core/fp16.h"

namespace ptn::quant_detail {

namespace {
// Magnitude k (0..3) of codebook entry e.
inline float magnitude(uint64_t entry, int k) { return static_cast<float>((entry >> (8 * k)) & 255); }
inline float sign_of(uint32_t signs, int bit) { return (signs >> bit) & 1 ? -1.0f : 1.0f; }
// The 7 stored sign bits of an IQ2_XXS/IQ2_XS/IQ3_XXS group completed to an even count.
inline uint32_t even_signs(uint32_t seven) { return seven | ((static_cast<uint32_t>(__builtin_popcount(seven)) & 1) << 7); }
// An IQ2 half's scale: d * (1/2 + nibble) / 4.
inline float iq2_scale(float d, int nibble) { return d * (0.5f + static_cast<float>(nibble)) * 0.25f; }
}  // namespace

// Value k (-1, 0, 1) of an IQ1 codebook entry.
inline float iq1_value(uint64_t entry, int k) { return static_cast<float>(static_cast<int8_t>((entry >> (8 * k)) & 255)); }

void dequantize_iq1_s(const BlockIQ1S* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += QK_K) {
    const float d = fp16_to_f32(x[b].d);
    for (int e = 0; e < QK_K; ++e) {
      const int j = e / 32, i = e % 32, l = i / 8;
      const uint32_t h = x[b].qh[2 * j] | (static_cast<uint32_t>(x[b].qh[2 * j + 1]) << 8);
      const float dl = d * static_cast<float>(2 * ((h >> 12) & 7) + 1);
      const float delta = (h & 0x8000) ? -0.125f : 0.125f;
      const int index = x[b].qs[4 * j + l] | (((h >> (3 * l)) & 7) << 8);
      y[e] = dl * (iq1_value(kIq1sGrid[index], i % 8) + delta);
    }
  }
}

void dequantize_iq1_m(const BlockIQ1M* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += QK_K) {
    uint16_t sc[4];
    std::memcpy(sc, x[b].scales, 8);  // little-endian words
    const uint16_t dbits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0xF0) | ((sc[2] >> 4) & 0xF00) | (sc[3] & 0xF000));
    const float d = fp16_to_f32(dbits);
    for (int e = 0; e < QK_K; ++e) {
      const int j = e / 32, i = e % 32, l = i / 8, half = i / 16;
      const int shift = 6 * (j % 2) + 3 * half;
      const float dl = d * static_cast<float>(2 * ((sc[j / 2] >> shift) & 7) + 1);
      const uint8_t h = x[b].qh[2 * j + l / 2];
      const int hi = (l % 2) ? (h >> 4) : h;  // this group's nibble
      const float delta = (hi & 8) ? -0.125f : 0.125f;
      const int index = x[b].qs[4 * j + l] | ((hi & 7) << 8);
      y[e] = dl * (iq1_value(kIq1sGrid[index], i % 8) + delta);
    }
  }
}

void dequantize_iq2_xxs(const BlockIQ2XXS* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += QK_K) {
    const float d = fp16_to_f32(x[b].d);
    for (int e = 0; e < QK_K; ++e) {
      const int j = e / 32, i = e % 32, l = i / 8;  // sub-block, weight within it, its group
      uint32_t w;
      std::memcpy(&w, x[b].qs + 8 * j + 4, 4);
      const float m = magnitude(kIq2xxsGrid[x[b].qs[8 * j + l]], i % 8);
      y[e] = iq2_scale(d, static_cast<int>(w >> 28)) * m * sign_of(even_signs((w >> (7 * l)) & 127), i % 8);
    }
  }
}

void dequantize_iq2_xs(const BlockIQ2XS* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += QK_K) {
    const float d = fp16_to_f32(x[b].d);
    for (int e = 0; e < QK_K; ++e) {
      const int j = e / 32, i = e % 32, l = i / 8;
      const uint32_t v = x[b].qs[8 * j + 2 * l] | (static_cast<uint32_t>(x[b].qs[8 * j + 2 * l + 1]) << 8);
      const int nibble = (x[b].scales[j] >> (4 * (i / 16))) & 15;
      const float m = magnitude(kIq2xsGrid[v & 511], i % 8);
      y[e] = iq2_scale(d, nibble) * m * sign_of(even_signs(v >> 9), i % 8);
    }
  }
}

void dequantize_iq2_s(const BlockIQ2S* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += QK_K) {
    const float d = fp16_to_f32(x[b].d);
    for (int e = 0; e < QK_K; ++e) {
      const int j = e / 32, i = e % 32, l = i / 8;
      const int nibble = (x[b].scales[j] >> (4 * (i / 16))) & 15;
      const int index = x[b].qs[4 * j + l] | (((x[b].qh[j] >> (2 * l)) & 3) << 8);
      const float m = magnitude(kIq2sGrid[index], i % 8);
      y[e] = iq2_scale(d, nibble) * m * sign_of(x[b].qs[32 + 4 * j + l], i % 8);
    }
  }
}

void dequantize_iq3_xxs(const BlockIQ3XXS* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += QK_K) {
    const float d = fp16_to_f32(x[b].d);
    for (int e = 0; e < QK_K; ++e) {
      const int j = e / 32, i = e % 32;  // sub-block, weight within it
      uint32_t w;
      std::memcpy(&w, x[b].qs + 64 + 4 * j, 4);
      const float scale = d * (0.5f + static_cast<float>(w >> 28)) * 0.5f;
      const int pair = i / 8;  // the 7-bit sign field of weights 8 pair .. 8 pair + 7
      const uint32_t seven = (w >> (7 * pair)) & 127;
      const uint32_t signs = seven | ((static_cast<uint32_t>(__builtin_popcount(seven)) & 1) << 7);
      const float m = magnitude(kIq3xxsGrid[x[b].qs[8 * j + i / 4]], i % 4);
      y[e] = scale * m * ((signs >> (i % 8)) & 1 ? -1.0f : 1.0f);
    }
  }
}

void dequantize_iq3_s(const BlockIQ3S* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, y += QK_K) {
    const float d = fp16_to_f32(x[b].d);
    for (int e = 0; e < QK_K; ++e) {
      const int j = e / 32, i = e % 32, g = i / 4;
      const int nibble = (x[b].scales[j / 2] >> (4 * (j % 2))) & 15;
      const float scale = d * static_cast<float>(1 + 2 * nibble);
      const int index = x[b].qs[8 * j + g] | (((x[b].qh[j] >> g) & 1) << 8);
      const float m = magnitude(kIq3sGrid[index], i % 4);
      y[e] = scale * m * ((x[b].signs[4 * j + i / 8] >> (i % 8)) & 1 ? -1.0f : 1.0f);
    }
  }
}

}  // namespace ptn::quant_detail
