// The formats whose codes index a table of levels: IQ4_XS (IQ4_NL's 16 non-linear levels in
// super-blocks of 256 with a 6-bit scale per 32) and MXFP4 (the E2M1 values of the OCP
// microscaling format, doubled, with a power-of-two E8M0 scale per 32). Dequantization is ggml's
// formula in ggml's order; MXFP4 is also written, as ggml's reference quantizer writes it.
// IQ4_XS is read only (ggml's quantizer for it is a scale search, as IQ4_NL's).
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

void dequantize_iq4_xs(const BlockIQ4XS* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d);
    for (int j = 0; j < QK_K / 32; ++j, y += 32) {
      const float dl = d * static_cast<float>(iq4_xs_scale(x[i].scales_h, x[i].scales_l, j) - 32);
      const uint8_t* qs = x[i].qs + 16 * j;
      for (int l = 0; l < 16; ++l) {
        y[l] = dl * static_cast<float>(kIq4nlValues[qs[l] & 0x0f]);
        y[l + 16] = dl * static_cast<float>(kIq4nlValues[qs[l] >> 4]);
      }
    }
  }
}

void dequantize_mxfp4(const BlockMXFP4* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK_MXFP4) {
    const float d = mxfp4_scale(x[i].e);
    for (int l = 0; l < QK_MXFP4 / 2; ++l) {
      y[l] = static_cast<float>(kMxfp4Values[x[i].qs[l] & 0x0f]) * d;
      y[l + QK_MXFP4 / 2] = static_cast<float>(kMxfp4Values[x[i].qs[l] >> 4]) * d;
    }
  }
}

namespace {

// The code whose level times d is nearest to v (the first one on ties, so +0 over -0).
uint8_t nearest_mxfp4(float v, float d) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kMxfp4Values[0]) * d - v);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(kMxfp4Values[i]) * d - v);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}

}  // namespace

// e = floor(log2(absmax)) - 2 + 127, so that the largest level (6, doubled 12) covers the
// absmax; ggml converts that float to uint8_t as x86 does (through int32, keeping the low byte),
// which is what the truncation below reproduces for every finite absmax. A block of zeros has
// e = 0; NaN weights never become the absmax; an infinite absmax gives an unspecified scale.
void quantize_mxfp4(const float* x, BlockMXFP4* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK_MXFP4) {
    float amax = 0.0f;
    for (int j = 0; j < QK_MXFP4; ++j)
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
    uint8_t e = 0;
    if (amax > 0.0f) {
      const float f = std::floor(std::log2(amax)) - 2.0f + 127.0f;
      e = static_cast<uint8_t>(static_cast<unsigned>(trunc_clamped(f, -4096, 4096, 0)) & 0xffu);
    }
    y[i].e = e;
    const float d = mxfp4_scale(e);
    for (int l = 0; l < QK_MXFP4 / 2; ++l)
      y[i].qs[l] = static_cast<uint8_t>(nearest_mxfp4(x[l], d) | (nearest_mxfp4(x[l + QK_MXFP4 / 2], d) << 4));
  }
}

}  // namespace ptn::quant_detail
