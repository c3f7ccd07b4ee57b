// The formats whose codes index a table of levels: IQ4_XS (IQ4_NL's 16 non-linear levels in
// super-blocks of 256 with a 6-bit scale per 32) and MXFP4 (the E2M1 values of the OCP
// microscaling format, doubled, with a power-of-two E8M0 scale per 32). Dequantization is ggml's
// formula in ggml's order; MXFP4 is also written, as ggml's reference quantizer writes it, and
// IQ4_NL and IQ4_XS as llama-quantize writes them without an importance matrix (ggml's
// quantize_iq4_nl / quantize_iq4_xs: a search over 15 trial scales per 32 weights, weighted by
// x^2, then IQ4_XS's 6-bit sub-block scales relative to the largest).
#include <algorithm>
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

namespace {

// ggml's best_index_int8 over the 16 IQ4_NL levels: the nearest level, the lower one on ties
// (halfway points go up); NaN takes the last level, as ggml's comparisons leave it.
int nearest_iq4nl(float x) {
  const int8_t* v = kIq4nlValues;
  if (x <= v[0]) return 0;
  if (x >= v[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < v[mid]) hi = mid;
    else lo = mid;
  }
  return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

// ggml's quantize_row_iq4_nl_impl with ntry = 7 and no importance matrix, for a super-block of
// sbs weights (32: IQ4_NL, whose d is the sub-block scale; 256: IQ4_XS, with 6-bit sub-block
// scales l - 32 of d = -(the largest scale) / 32). L: 256 codes of scratch.
void quantize_iq4(int sbs, const float* x, uint16_t* dh, uint8_t* q4, uint16_t* scales_h, uint8_t* scales_l) {
  constexpr int kTry = 7;
  const float v0 = static_cast<float>(kIq4nlValues[0]);
  uint8_t L[QK_K];
  float scales[QK_K / 32];
  std::memset(q4, 0, static_cast<size_t>(sbs / 2));
  *dh = f32_to_fp16(0.f);
  float max_scale = 0, amax_scale = 0;
  for (int ib = 0; ib < sbs / 32; ++ib) {
    const float* xb = x + 32 * ib;
    uint8_t* Lb = L + 32 * ib;
    float weight[32];
    for (int j = 0; j < 32; ++j) weight[j] = xb[j] * xb[j];
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
      const float ax = std::fabs(xb[j]);
      if (ax > amax) {
        amax = ax;
        max = xb[j];
      }
    }
    if (amax < 1e-15f) {  // ggml's GROUP_MAX_EPS
      scales[ib] = 0;
      continue;
    }
    float d = -max / v0;
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const int l = nearest_iq4nl(id * xb[j]);
      Lb[j] = static_cast<uint8_t>(l);
      const float q = kIq4nlValues[l], w = weight[j];
      sumqx += w * q * xb[j];
      sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -kTry; itry <= kTry; ++itry) {
      id = static_cast<float>(itry + kIq4nlValues[0]) / max;
      sumqx = sumq2 = 0;
      for (int j = 0; j < 32; ++j) {
        const float q = kIq4nlValues[nearest_iq4nl(id * xb[j])], w = weight[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
      }
      if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
        d = sumqx / sumq2;
        best = d * sumqx;
      }
    }
    scales[ib] = d;
    if (std::fabs(d) > amax_scale) {
      amax_scale = std::fabs(d);
      max_scale = d;
    }
  }
  if (sbs > 32) {
    *scales_h = 0;
    const float d = -max_scale / 32;
    *dh = f32_to_fp16(d);
    const float id = d != 0.f ? 1 / d : 0.f;
    for (int ib = 0; ib < sbs / 32; ++ib) {
      int l = std::max(-32, std::min(31, nearest_int(id * scales[ib])));
      const float dl = d * static_cast<float>(l);
      const float idl = dl != 0.f ? 1 / dl : 0.f;
      for (int j = 0; j < 32; ++j) L[32 * ib + j] = static_cast<uint8_t>(nearest_iq4nl(idl * x[32 * ib + j]));
      l += 32;
      const uint8_t l_l = static_cast<uint8_t>(l & 0xf), l_h = static_cast<uint8_t>(l >> 4);
      if (ib % 2 == 0) scales_l[ib / 2] = l_l;
      else scales_l[ib / 2] = static_cast<uint8_t>(scales_l[ib / 2] | (l_l << 4));
      *scales_h = static_cast<uint16_t>(*scales_h | (l_h << (2 * (ib % 8))));
    }
  } else {
    *dh = f32_to_fp16(scales[0]);
    const float id = scales[0] != 0.f ? 1 / scales[0] : 0.f;
    for (int j = 0; j < sbs; ++j) L[j] = static_cast<uint8_t>(nearest_iq4nl(id * x[j]));
  }
  for (int i = 0; i < sbs / 32; ++i)
    for (int j = 0; j < 16; ++j) q4[16 * i + j] = static_cast<uint8_t>(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

}  // namespace

void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) quantize_iq4(QK4_NL, x + QK4_NL * i, &y[i].d, y[i].qs, nullptr, nullptr);
}

void quantize_iq4_xs(const float* x, BlockIQ4XS* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) quantize_iq4(QK_K, x + QK_K * i, &y[i].d, y[i].qs, &y[i].scales_h, y[i].scales_l);
}

}  // namespace ptn::quant_detail
