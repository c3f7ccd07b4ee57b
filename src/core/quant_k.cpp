// K-quants: super-blocks of 256 weights. Q4_K/Q5_K: 8 sub-blocks of 32, each with a 6-bit
// scale and a 6-bit min (x = d*sc*q - dmin*m). Q6_K: 16 sub-blocks of 16 with int8 scales
// (x = d*sc*(q-32)). Q8_K: the activation format (x = d*q, f32 d, plus sums of each 16 q's).
//
// The quantizers reproduce ggml's reference ones (no importance matrix): a per-sub-block scale
// search, then the sub-block scales themselves quantized against the super-block scale, then the
// weights re-rounded against the quantized scales. Float operations are written in ggml's
// order (a*b*c is (a*b)*c) because the searches compare errors and a different rounding
// flips rare ties, which changes the bytes.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "core/quant.h"
#include "core/quant_blocks.h"

// Bit-exactness with ggml needs every a*b+c rounded twice, as written: forbid FMA contraction
// even when the build targets a CPU with FMA (g++ contracts by default in C++ modes).
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace ptn::quant_detail {

namespace {

constexpr float kGroupMaxEps = 1e-15f;  // a sub-block whose absmax is below this is all zero

// The element of largest magnitude with its sign (the first one on ties; 0 if none exceeds 0),
// and that magnitude in amax. NaN never wins the comparison.
float signed_absmax(const float* x, int n, float& amax) {
  float max = 0.0f;
  amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  return max;
}

// Symmetric search for Q6_K sub-blocks (ggml's make_qx_quants with weights x^2): codes
// L[i] in [0, 2*nmax) for q = L - nmax, returns the scale. Tries the scales -(nmax + k/10)/max
// for k = -9..9 and keeps the one with the best weighted least-squares fit.
float search_symmetric(int n, int nmax, const float* x, int8_t* L) {
  float amax;
  const float max = signed_absmax(x, n, amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  auto clamp_q = [nmax](int l) { return l < -nmax ? -nmax : (l > nmax - 1 ? nmax - 1 : l); };
  // Weighted sums for one trial inverse scale: sumlx = sum w*x*l, suml2 = sum w*l*l, w = x^2.
  auto fit = [&](float iscale, float& sumlx, float& suml2) {
    sumlx = 0.0f;
    suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float l = static_cast<float>(clamp_q(nearest_int(iscale * x[i])));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
  };
  auto assign = [&](float iscale) {
    for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + clamp_q(nearest_int(iscale * x[i])));
  };
  float iscale = -static_cast<float>(nmax) / max;
  float sumlx, suml2;
  fit(iscale, sumlx, suml2);
  assign(iscale);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    fit(iscale, sumlx, suml2);
    if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
      assign(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Symmetric search for Q3_K sub-blocks (ggml's make_q3_quants with its rmse refinement): codes
// L[i] in [0, 2*nmax) for q = L - nmax, returns the scale. Starts from -nmax/max, then moves
// single codes to their weighted least-squares value (weights x^2) while that improves the fit,
// at most 5 rounds.
float search_q3(int n, int nmax, const float* x, int8_t* L) {
  float amax;
  const float max = signed_absmax(x, n, amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  auto clamp_q = [nmax](int l) { return l < -nmax ? -nmax : (l > nmax - 1 ? nmax - 1 : l); };
  const float iscale = -static_cast<float>(nmax) / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_q(nearest_int(iscale * x[i]));
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int round = 0; round < 5; ++round) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * static_cast<float>(L[i]);
      if (!(slx > 0.0f)) continue;
      float sl2 = suml2 - w * static_cast<float>(L[i]) * static_cast<float>(L[i]);
      const int nl = clamp_q(nearest_int(x[i] * sl2 / slx));
      if (nl == L[i]) continue;
      slx += w * x[i] * static_cast<float>(nl);
      sl2 += w * static_cast<float>(nl) * static_cast<float>(nl);
      if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = static_cast<int8_t>(nl);
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Asymmetric search for Q4_K/Q5_K sub-blocks (ggml's make_qkx2_quants): codes L in [0, nmax] for
// x ~ scale*L - min_out (min_out >= 0 returned through *min_out). Starts from the min..max
// range, then tries nstep+1 inverse scales (rmin + rdelta*is + nmax)/(max - min), fitting
// scale and offset by weighted least squares each time; keeps the lowest weighted squared error.
// mad: the error is the weighted absolute difference instead of the squared one (Q2_K).
float search_affine(int n, int nmax, const float* x, const float* w, uint8_t* L, float* min_out,
                    float rmin, float rdelta, int nstep, bool mad = false) {
  float min = x[0], max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *min_out = -min;
    return 0.0f;
  }
  auto code = [nmax](float v) {
    const int l = nearest_int(v);
    return static_cast<uint8_t>(l < 0 ? 0 : (l > nmax ? nmax : l));
  };
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1.0f / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    L[i] = code(iscale * (x[i] - min));
    const float diff = scale * static_cast<float>(L[i]) + min - x[i];
    best_error += w[i] * (mad ? std::fabs(diff) : diff * diff);
  }
  uint8_t trial[32];  // n <= 32
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      trial[i] = code(iscale * (x[i] - min));
      const float l = static_cast<float>(trial[i]);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0.0f)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0.0f) {
      this_min = 0.0f;
      this_scale = sum_xl / sum_l2;
    }
    float err = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * static_cast<float>(trial[i]) + this_min - x[i];
      err += w[i] * (mad ? std::fabs(diff) : diff * diff);
    }
    if (err < best_error) {
      std::memcpy(L, trial, static_cast<size_t>(n));
      best_error = err;
      scale = this_scale;
      min = this_min;
    }
  }
  *min_out = -min;
  return scale;
}

// Shared by Q4_K and Q5_K: searches the 8 sub-blocks, packs d, dmin and the 6-bit scales/mins,
// and leaves the final codes (0..nmax) of the 256 weights in L.
void quantize_k_scales(const float* x, int nmax, float rmin, int nstep, uint16_t& d_out,
                       uint16_t& dmin_out, uint8_t* packed, uint8_t* L) {
  float scales[QK_K / 32], mins[QK_K / 32], weights[32];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < QK_K / 32; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = search_affine(32, nmax, xs, weights, L + 32 * j, &mins[j], rmin, 0.1f, nstep);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  std::memset(packed, 0, K_SCALE_SIZE);
  for (int j = 0; j < QK_K / 32; ++j) {
    // ggml stores nearest_int into a uint8_t before capping at 63 (a negative scale wraps).
    uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
    uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
    if (ls > 63) ls = 63;
    if (lm > 63) lm = 63;
    if (j < 4) {
      packed[j] = ls;
      packed[j + 4] = lm;
    } else {
      packed[j + 4] = static_cast<uint8_t>((ls & 0x0f) | ((lm & 0x0f) << 4));
      packed[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      packed[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  d_out = f32_to_fp16(max_scale / 63.0f);
  dmin_out = f32_to_fp16(max_min / 63.0f);
  const float d = fp16_to_f32(d_out), dmin = fp16_to_f32(dmin_out);
  for (int j = 0; j < QK_K / 32; ++j) {
    uint8_t sc, m;
    unpack_scale_min_k4(packed, j, sc, m);
    const float ds = d * static_cast<float>(sc);
    if (ds == 0.0f) continue;  // keep the search's codes, as ggml does
    const float dm = dmin * static_cast<float>(m);
    for (int i = 0; i < 32; ++i) {
      const int l = nearest_int((x[32 * j + i] + dm) / ds);
      L[32 * j + i] = static_cast<uint8_t>(l < 0 ? 0 : (l > nmax ? nmax : l));
    }
  }
}

}  // namespace

// ---- dequantization ----

// Q2_K and Q3_K share the element order: half h (128 weights) reads 32 qs bytes, crumb i
// (bits 2i..2i+1) of byte l is element 128h + 32i + l, in sub-block 8h + 2i + l/16.
void dequantize_q2_k(const BlockQ2K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d), dmin = fp16_to_f32(x[i].dmin);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = x[i].qs + 32 * h;
      for (int c = 0; c < 4; ++c) {
        for (int part = 0; part < 2; ++part) {
          const uint8_t sc = x[i].scales[8 * h + 2 * c + part];
          const float dl = d * static_cast<float>(sc & 0x0f), ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 16 * part; l < 16 * part + 16; ++l)
            *y++ = dl * static_cast<float>((q[l] >> (2 * c)) & 3) - ml;
        }
      }
    }
  }
}

void dequantize_q3_k(const BlockQ3K* x, float* y, int64_t nb) {
  int8_t sc[16];
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d);
    unpack_q3_k_scales(x[i].scales, sc);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* q = x[i].qs + 32 * h;
      for (int c = 0; c < 4; ++c) {
        const int bit = 4 * h + c;  // of hmask[l]
        for (int part = 0; part < 2; ++part) {
          const float dl = d * static_cast<float>(sc[8 * h + 2 * c + part]);
          for (int l = 16 * part; l < 16 * part + 16; ++l) {
            const int v = ((q[l] >> (2 * c)) & 3) - (((x[i].hmask[l] >> bit) & 1) ? 0 : 4);
            *y++ = dl * static_cast<float>(v);
          }
        }
      }
    }
  }
}

void dequantize_q4_k(const BlockQ4K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d), dmin = fp16_to_f32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    // 4 groups of 64 weights: 32 bytes, low nibbles = sub-block 2g, high nibbles = 2g+1.
    for (int g = 0; g < 4; ++g, q += 32) {
      uint8_t sc, m;
      unpack_scale_min_k4(x[i].scales, 2 * g, sc, m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      unpack_scale_min_k4(x[i].scales, 2 * g + 1, sc, m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0x0f) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

void dequantize_q5_k(const BlockQ5K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d), dmin = fp16_to_f32(x[i].dmin);
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    // Group g: the fifth bit of its low-nibble half is qh bit 2g, of its high-nibble half 2g+1.
    for (int g = 0; g < 4; ++g, ql += 32) {
      uint8_t sc, m;
      unpack_scale_min_k4(x[i].scales, 2 * g, sc, m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      unpack_scale_min_k4(x[i].scales, 2 * g + 1, sc, m);
      const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
      const int b1 = 2 * g, b2 = 2 * g + 1;
      for (int l = 0; l < 32; ++l)
        *y++ = d1 * static_cast<float>((ql[l] & 0x0f) | (((qh[l] >> b1) & 1) << 4)) - m1;
      for (int l = 0; l < 32; ++l)
        *y++ = d2 * static_cast<float>((ql[l] >> 4) | (((qh[l] >> b2) & 1) << 4)) - m2;
    }
  }
}

void dequantize_q6_k(const BlockQ6K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    // Two halves of 128 weights: 64 ql bytes (4 low bits), 32 qh bytes (2 high bits x 4),
    // 8 scales (one per 16 weights).
    for (int h = 0; h < 2; ++h, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

void dequantize_q8_k(const BlockQ8K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i)
    for (int j = 0; j < QK_K; ++j) *y++ = x[i].d * static_cast<float>(x[i].qs[j]);
}

// ---- quantization ----

namespace {

// Packs 256 2-bit codes in Q2_K / Q3_K order (see dequantize_q2_k).
void pack_crumbs(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < QK_K; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

}  // namespace

void quantize_q2_k(const float* x, BlockQ2K* y, int64_t nb) {
  uint8_t L[QK_K];
  float weights[16], scales[QK_K / 16], mins[QK_K / 16];
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < QK_K / 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = search_affine(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    // ggml stores nearest_int unclamped into the byte (the scale's search never exceeds max).
    if (max_scale > 0.0f) {
      const float iscale = 15.0f / max_scale;
      for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      y[i].d = f32_to_fp16(max_scale / 15.0f);
    } else {
      std::memset(y[i].scales, 0, sizeof(y[i].scales));
      y[i].d = f32_to_fp16(0.0f);
    }
    if (max_min > 0.0f) {
      const float iscale = 15.0f / max_min;
      for (int j = 0; j < QK_K / 16; ++j)
        y[i].scales[j] |= static_cast<uint8_t>(static_cast<unsigned>(nearest_int(iscale * mins[j])) << 4);
      y[i].dmin = f32_to_fp16(max_min / 15.0f);
    } else {
      y[i].dmin = f32_to_fp16(0.0f);
    }
    const float d = fp16_to_f32(y[i].d), dmin = fp16_to_f32(y[i].dmin);
    for (int j = 0; j < QK_K / 16; ++j) {
      const float ds = d * static_cast<float>(y[i].scales[j] & 0x0f);
      if (ds == 0.0f) continue;  // keep the search's codes, as ggml does
      const float dm = dmin * static_cast<float>(y[i].scales[j] >> 4);
      for (int l = 0; l < 16; ++l) {
        const int q = nearest_int((x[16 * j + l] + dm) / ds);
        L[16 * j + l] = static_cast<uint8_t>(q < 0 ? 0 : (q > 3 ? 3 : q));
      }
    }
    pack_crumbs(L, y[i].qs);
  }
}

void quantize_q3_k(const float* x, BlockQ3K* y, int64_t nb) {
  int8_t L[QK_K];
  float scales[QK_K / 16];
  int8_t sc[16];
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    float max_scale = 0.0f, amax = 0.0f;
    for (int j = 0; j < QK_K / 16; ++j) {
      scales[j] = search_q3(16, 4, x + 16 * j, L + 16 * j);
      const float a = std::fabs(scales[j]);
      if (a > amax) {
        amax = a;
        max_scale = scales[j];
      }
    }
    std::memset(y[i].scales, 0, sizeof(y[i].scales));
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      for (int j = 0; j < QK_K / 16; ++j) {
        int l = nearest_int(iscale * scales[j]);
        l = (l < -32 ? -32 : (l > 31 ? 31 : l)) + 32;
        if (j < 8) y[i].scales[j] = static_cast<uint8_t>(l & 0x0f);
        else y[i].scales[j - 8] |= static_cast<uint8_t>((l & 0x0f) << 4);
        y[i].scales[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
      }
      y[i].d = f32_to_fp16(1.0f / iscale);
    } else {
      y[i].d = f32_to_fp16(0.0f);
    }
    unpack_q3_k_scales(y[i].scales, sc);
    const float d = fp16_to_f32(y[i].d);
    for (int j = 0; j < QK_K / 16; ++j) {
      const float ds = d * static_cast<float>(sc[j]);
      if (ds == 0.0f) continue;  // keep the search's codes, as ggml does
      for (int l = 0; l < 16; ++l) {
        const int q = nearest_int(x[16 * j + l] / ds);
        L[16 * j + l] = static_cast<int8_t>((q < -4 ? -4 : (q > 3 ? 3 : q)) + 4);
      }
    }
    // The high bit of element j goes to bit j/32 of hmask[j%32]; qs keeps the low 2 bits.
    uint8_t low[QK_K];
    std::memset(y[i].hmask, 0, sizeof(y[i].hmask));
    for (int j = 0; j < QK_K; ++j) {
      const int v = L[j];
      if (v > 3) y[i].hmask[j % 32] |= static_cast<uint8_t>(1u << (j / 32));
      low[j] = static_cast<uint8_t>(v > 3 ? v - 4 : v);
    }
    pack_crumbs(low, y[i].qs);
  }
}

void quantize_q4_k(const float* x, BlockQ4K* y, int64_t nb) {
  uint8_t L[QK_K];
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    quantize_k_scales(x, 15, -1.0f, 20, y[i].d, y[i].dmin, y[i].scales, L);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < QK_K; j += 64, q += 32)
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
  }
}

void quantize_q5_k(const float* x, BlockQ5K* y, int64_t nb) {
  uint8_t L[QK_K];
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    quantize_k_scales(x, 31, -0.5f, 15, y[i].d, y[i].dmin, y[i].scales, L);
    std::memset(y[i].qh, 0, sizeof(y[i].qh));
    uint8_t* ql = y[i].qs;
    for (int g = 0; g < 4; ++g, ql += 32) {
      for (int l = 0; l < 32; ++l) {
        const int a = L[64 * g + l], b = L[64 * g + l + 32];
        ql[l] = static_cast<uint8_t>((a & 0x0f) | ((b & 0x0f) << 4));
        y[i].qh[l] |= static_cast<uint8_t>(((a >> 4) << (2 * g)) | ((b >> 4) << (2 * g + 1)));
      }
    }
  }
}

void quantize_q6_k(const float* x, BlockQ6K* y, int64_t nb) {
  int8_t L[QK_K];  // codes 0..63 (q + 32)
  float scales[QK_K / 16];
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    float max_scale = 0.0f, max_abs_scale = 0.0f;
    for (int ib = 0; ib < QK_K / 16; ++ib) {
      scales[ib] = search_symmetric(16, 32, x + 16 * ib, L + 16 * ib);
      const float a = std::fabs(scales[ib]);
      if (a > max_abs_scale) {
        max_abs_scale = a;
        max_scale = scales[ib];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(BlockQ6K));
      continue;
    }
    const float iscale = -128.0f / max_scale;
    y[i].d = f32_to_fp16(1.0f / iscale);
    for (int ib = 0; ib < QK_K / 16; ++ib) {
      const int s = nearest_int(iscale * scales[ib]);
      y[i].scales[ib] = static_cast<int8_t>(s > 127 ? 127 : (s < -128 ? -128 : s));
    }
    const float d = fp16_to_f32(y[i].d);
    for (int j = 0; j < QK_K / 16; ++j) {
      const float ds = d * static_cast<float>(y[i].scales[j]);
      if (ds == 0.0f) continue;  // keep the search's codes, as ggml does
      for (int k = 0; k < 16; ++k) {
        const int l = nearest_int(x[16 * j + k] / ds);
        L[16 * j + k] = static_cast<int8_t>((l < -32 ? -32 : (l > 31 ? 31 : l)) + 32);
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int c1 = L[j + l], c2 = L[j + l + 32], c3 = L[j + l + 64], c4 = L[j + l + 96];
        ql[l] = static_cast<uint8_t>((c1 & 0x0f) | ((c3 & 0x0f) << 4));
        ql[l + 32] = static_cast<uint8_t>((c2 & 0x0f) | ((c4 & 0x0f) << 4));
        qh[l] = static_cast<uint8_t>((c1 >> 4) | ((c2 >> 4) << 2) | ((c3 >> 4) << 4) | ((c4 >> 4) << 6));
      }
    }
  }
}

void quantize_q8_k(const float* x, BlockQ8K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < QK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      y[i].d = 0.0f;
      std::memset(y[i].qs, 0, sizeof(y[i].qs));
      std::memset(y[i].bsums, 0, sizeof(y[i].bsums));  // (ggml leaves bsums unwritten here)
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < QK_K; ++j) {
      const int v = nearest_int(iscale * x[j]);
      y[i].qs[j] = static_cast<int8_t>(v > 127 ? 127 : (v < -128 ? -128 : v));
    }
    for (int j = 0; j < QK_K / 16; ++j) {
      int sum = 0;
      for (int k = 0; k < 16; ++k) sum += y[i].qs[16 * j + k];
      y[i].bsums[j] = static_cast<int16_t>(sum);
    }
    y[i].d = 1.0f / iscale;
  }
}

}  // namespace ptn::quant_detail
