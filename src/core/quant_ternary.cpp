// The ternary formats of BitNet b1.58 and TriLM checkpoints: every weight is -1, 0 or 1 times the
// block's scale, the absolute maximum of its 256 weights. TQ1_0 packs five trits per byte (1.69
// bits per weight), TQ2_0 two bits per weight (2.06). Dequantization is ggml's formula in ggml's
// order; quantization is ggml's reference quantizer (llama-quantize uses it for both types, with
// or without an importance matrix), byte for byte.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "core/quant.h"
#include "core/quant_blocks.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace ptn::quant_detail {
namespace {

constexpr uint8_t kPow3[6] = {1, 3, 9, 27, 81, 243};

// The trit of v * id (C's lroundf, halves away from zero) plus one: 0, 1 or 2. |v * id| <= 1 for
// finite input, as |v| <= the block's absolute maximum; NaN (and whatever an infinite or NaN
// scale makes of v) takes the trit of zero, so no input reaches lroundf's undefined range.
int trit_of(float v, float id) {
  const float t = v * id;
  if (!(std::fabs(t) <= 1.5f)) return 1;
  return static_cast<int>(std::lroundf(t)) + 1;
}

// ggml's scale: the absolute maximum, with ggml's MAX (a > b ? a : b), NaN handling included.
float block_absmax(const float* x) {
  float amax = 0.f;
  for (int j = 0; j < QK_K; ++j) {
    const float v = std::fabs(x[j]);
    amax = amax > v ? amax : v;
  }
  return amax;
}

// Five (or four, then shifted) trits, first most significant, as ceil(value * 256 / 243).
uint8_t pack_trits(int value) { return static_cast<uint8_t>((static_cast<uint16_t>(value) * 256 + 242) / 243); }

}  // namespace

void dequantize_tq1_0(const BlockTQ1_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d);
    const auto trit = [](uint8_t b, int n) { return static_cast<int16_t>((static_cast<uint8_t>(b * kPow3[n]) * 3) >> 8); };
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 32; ++m) *y++ = static_cast<float>(trit(x[i].qs[m], n) - 1) * d;
    for (int n = 0; n < 5; ++n)
      for (int m = 0; m < 16; ++m) *y++ = static_cast<float>(trit(x[i].qs[32 + m], n) - 1) * d;
    for (int n = 0; n < 4; ++n)
      for (int j = 0; j < 4; ++j) *y++ = static_cast<float>(trit(x[i].qh[j], n) - 1) * d;
  }
}

void dequantize_tq2_0(const BlockTQ2_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d);
    for (int j = 0; j < QK_K / 4; j += 32)
      for (int l = 0; l < 4; ++l)
        for (int m = 0; m < 32; ++m) *y++ = static_cast<float>(((x[i].qs[j + m] >> (2 * l)) & 3) - 1) * d;
  }
}

void quantize_tq1_0(const float* x, BlockTQ1_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    const float d = block_absmax(x);
    const float id = d != 0.f ? 1.f / d : 0.f;
    y[i].d = f32_to_fp16(d);
    for (int m = 0; m < 32; ++m) {  // elements m + 32 n, n = 0..4
      int q = 0;
      for (int n = 0; n < 5; ++n) q = 3 * q + trit_of(x[m + 32 * n], id);
      y[i].qs[m] = pack_trits(q);
    }
    for (int m = 0; m < 16; ++m) {  // elements 160 + m + 16 n
      int q = 0;
      for (int n = 0; n < 5; ++n) q = 3 * q + trit_of(x[160 + m + 16 * n], id);
      y[i].qs[32 + m] = pack_trits(q);
    }
    for (int j = 0; j < 4; ++j) {  // elements 240 + j + 4 n, n = 0..3, then one zero trit
      int q = 0;
      for (int n = 0; n < 4; ++n) q = 3 * q + trit_of(x[240 + j + 4 * n], id);
      y[i].qh[j] = pack_trits(3 * q);
    }
  }
}

void quantize_tq2_0(const float* x, BlockTQ2_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = block_absmax(x);
    const float id = d != 0.f ? 1.f / d : 0.f;
    y[i].d = f32_to_fp16(d);
    for (int j = 0; j < QK_K / 4; j += 32, x += 128)
      for (int m = 0; m < 32; ++m) {
        int q = 0;
        for (int n = 0; n < 4; ++n) q |= trit_of(x[m + 32 * n], id) << (2 * n);
        y[i].qs[j + m] = static_cast<uint8_t>(q);
      }
  }
}

}  // namespace ptn::quant_detail
