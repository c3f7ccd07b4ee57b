// Reference dequantization of the IQ3 codebook types (IQ3_XXS, IQ3_S), read only: ptn has no
// quantizer for them (llama-quantize writes them). Written from the block layouts in
// core/blocks.h, weight by weight, without the kernels' sub-block decoders.
#include "core/iq_grids.h"
#include "core/quant_blocks.h"
#include "core/fp16.h"

namespace ptn::quant_detail {

namespace {
// Magnitude k (0..3) of codebook entry e.
inline float magnitude(uint32_t entry, int k) { return static_cast<float>((entry >> (8 * k)) & 255); }
}  // namespace

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
