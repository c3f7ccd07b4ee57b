// Internal to kernels/matmul_neon.cpp, matmul_dotprod.cpp and matmul_i8mm.cpp: the aarch64
// matmul kernels, written once and compiled three times with the flags of each NEON level
// (baseline Advanced SIMD, + dotprod, + i8mm). Internal linkage throughout, as
// matmul_generic.h.
//
// Row kernels (every level): one weight row is decoded in registers into signed int8 codes
// (the type's offset subtracted, so every format is a plain signed dot product) and dotted with
// up to 4 activation rows, so the weights stream from memory once per 4 rows. The 16-byte
// integer dot product is SDOT (vdotq_s32: 16 MACs into 4 s32 lanes, 1 instruction) with
// dotprod, else SMULL + SMULL2 + 2 SADALP (4 instructions): products of int8 codes fit s16
// (|w| <= 128, |a| <= 127).
//
// With i8mm (m >= 2): 2 weight rows are decoded once into signed codes interleaved for SMMLA
// (vmmlaq_s32: a 2x8 by 8x2 int8 block product, 32 MACs in 1 instruction), then every pair of
// activation rows is multiplied against them: 4 outputs per instruction stream instead of 1.
#pragma once
#include <arm_neon.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/matmul_generic.h"

namespace ptn::mm {
namespace {

inline int32x4_t dot16(int32x4_t acc, int8x16_t w, int8x16_t a) {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(acc, w, a);
#else
  const int16x8_t lo = vmull_s8(vget_low_s8(w), vget_low_s8(a));
  const int16x8_t hi = vmull_high_s8(w, a);
  return vpadalq_s16(vpadalq_s16(acc, lo), hi);
#endif
}
inline int32x4_t dot32(int8x16_t w0, int8x16_t w1, const int8_t* a) {
  return dot16(dot16(vdupq_n_s32(0), w0, vld1q_s8(a)), w1, vld1q_s8(a + 16));
}

// Byte j of the result is 16 where bit j of the 16-bit h is set, else 0 (the 5th bit of Q5_*).
inline uint8x16_t fifth_bits(uint32_t h) {
  static constexpr uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t bytes = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(h)), vdup_n_u8(static_cast<uint8_t>(h >> 8)));
  return vandq_u8(vtstq_u8(bytes, vld1q_u8(kBit)), vdupq_n_u8(16));
}

// Per-row base pointers of up to 4 activation rows.
struct NeonRows {
  const int8_t* a[4] = {};
  const float* d[4] = {};
  const int32_t* s32[4] = {};
  const int32_t* s16[4] = {};
  int64_t r0 = 0;
  NeonRows(const QuantActs& qa, int64_t first, int64_t rows) : r0(first) {
    if (qa.q == nullptr) return;  // float weights
    const int64_t k = qa.k, ng = qa.groups();
    for (int64_t r = 0; r < rows && r < 4; ++r) {
      a[r] = qa.q + (r0 + r) * k;
      d[r] = qa.d + (r0 + r) * ng;
      s32[r] = qa.s32 + (r0 + r) * (k / 32);
      s16[r] = qa.s16 + (r0 + r) * (k / 16);
    }
  }
};

// The 32 codes of a 32-element block as signed int8 (w0: elements 0..15, w1: 16..31), and
// for Q4_1/Q5_1 their min m (x = d u + m, u unsigned).
template <DType T>
inline void signed_codes_b32(const typename WTraits<T>::Block& b, int8x16_t& w0, int8x16_t& w1) {
  if constexpr (T == DType::Q8_0) {
    w0 = vld1q_s8(b.qs);
    w1 = vld1q_s8(b.qs + 16);
  } else {
    const uint8x16_t raw = vld1q_u8(b.qs);
    uint8x16_t lo = vandq_u8(raw, vdupq_n_u8(15)), hi = vshrq_n_u8(raw, 4);
    if constexpr (T == DType::Q5_0 || T == DType::Q5_1) {
      uint32_t qh;
      std::memcpy(&qh, b.qh, 4);
      lo = vorrq_u8(lo, fifth_bits(qh & 0xffff));
      hi = vorrq_u8(hi, fifth_bits(qh >> 16));
    }
    if constexpr (T == DType::IQ4_NL) {
      const int8x16_t levels = vld1q_s8(kIq4nlValues);
      w0 = vqtbl1q_s8(levels, lo);
      w1 = vqtbl1q_s8(levels, hi);
    } else {
      const int8x16_t off = vdupq_n_s8(static_cast<int8_t>(WTraits<T>::kOff));
      w0 = vsubq_s8(vreinterpretq_s8_u8(lo), off);
      w1 = vsubq_s8(vreinterpretq_s8_u8(hi), off);
    }
  }
}

// Q8_0 / Q4_0 / Q5_0 / Q4_1 / Q5_1 / IQ4_NL: one f32 scale per 32-element block (and a min
// for Q4_1 / Q5_1, applied through the activation block sums).
template <int R, DType T>
void row_b32(const void* row, int64_t k, const NeonRows& ra, float* out) {
  using Block = typename WTraits<T>::Block;
  const Block* b = static_cast<const Block*>(row);
  float32x4_t acc[R];
  float mins[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = vdupq_n_f32(0);
    mins[r] = 0;
  }
  for (int64_t i = 0; i < k / 32; ++i) {
    __builtin_prefetch(reinterpret_cast<const char*>(b + i) + 1024);
    int8x16_t w0, w1;
    signed_codes_b32<T>(b[i], w0, w1);
    const float dw = fp16_to_f32(b[i].d);
    for (int r = 0; r < R; ++r) {
      const float da = ra.d[r][i];
      acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(dot32(w0, w1, ra.a[r] + i * 32)), dw * da);
      if constexpr (WTraits<T>::kMins) mins[r] += fp16_to_f32(b[i].m) * da * static_cast<float>(ra.s32[r][i]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = vaddvq_f32(acc[r]) + mins[r];
}

// Q4_K / Q5_K: codes 0..31 (no offset) with 6-bit integer scales per 32, mins through the
// activation sums: y = d da sum_j sc_j dot_j - dmin da sum_j m_j sum(a_j).
template <int R, bool Q5>
void row_q45_k(const void* row, int64_t k, const NeonRows& ra, float* out) {
  using Block = std::conditional_t<Q5, BlockQ5K, BlockQ4K>;
  const Block* b = static_cast<const Block*>(row);
  float32x4_t acc[R];
  float mins[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = vdupq_n_f32(0);
    mins[r] = 0;
  }
  const uint8x16_t m4 = vdupq_n_u8(15);
  for (int64_t i = 0; i < k / 256; ++i) {
    const Block& blk = b[i];
    __builtin_prefetch(reinterpret_cast<const char*>(&blk) + 1024);
    __builtin_prefetch(reinterpret_cast<const char*>(&blk) + 1088);
    uint8_t sc[8], mn[8];
    for (int s = 0; s < 8; ++s) unpack_scale_min_k4(blk.scales, s, sc[s], mn[s]);
    uint8x16_t qh0 = vdupq_n_u8(0), qh1 = vdupq_n_u8(0);
    if constexpr (Q5) {
      qh0 = vld1q_u8(blk.qh);
      qh1 = vld1q_u8(blk.qh + 16);
    }
    int32x4_t isum[R];
    for (int r = 0; r < R; ++r) isum[r] = vdupq_n_s32(0);
    for (int s = 0; s < 8; ++s) {
      const uint8_t* q = blk.qs + 32 * (s / 2);
      uint8x16_t u0 = vld1q_u8(q), u1 = vld1q_u8(q + 16);
      if (s & 1) {
        u0 = vshrq_n_u8(u0, 4);
        u1 = vshrq_n_u8(u1, 4);
      } else {
        u0 = vandq_u8(u0, m4);
        u1 = vandq_u8(u1, m4);
      }
      if constexpr (Q5) {
        const uint8x16_t bit = vdupq_n_u8(static_cast<uint8_t>(1 << s)), sixteen = vdupq_n_u8(16);
        u0 = vorrq_u8(u0, vandq_u8(vtstq_u8(qh0, bit), sixteen));
        u1 = vorrq_u8(u1, vandq_u8(vtstq_u8(qh1, bit), sixteen));
      }
      const int8x16_t w0 = vreinterpretq_s8_u8(u0), w1 = vreinterpretq_s8_u8(u1);
      for (int r = 0; r < R; ++r) isum[r] = vmlaq_n_s32(isum[r], dot32(w0, w1, ra.a[r] + i * 256 + 32 * s), sc[s]);
    }
    const float d = fp16_to_f32(blk.d), dmin = fp16_to_f32(blk.dmin);
    for (int r = 0; r < R; ++r) {
      const float da = ra.d[r][i];
      acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(isum[r]), d * da);
      const int32_t* s32 = ra.s32[r] + i * 8;
      int32_t m = 0;
      for (int s = 0; s < 8; ++s) m += mn[s] * s32[s];
      mins[r] += dmin * da * static_cast<float>(m);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = vaddvq_f32(acc[r]) - mins[r];
}

// Q6_K: codes 0..63 minus 32 (signed, so no offset term), int8 scales per 16 elements.
template <int R>
void row_q6_k(const void* row, int64_t k, const NeonRows& ra, float* out) {
  const BlockQ6K* b = static_cast<const BlockQ6K*>(row);
  float32x4_t acc[R];
  for (int r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0);
  const uint8x16_t m4 = vdupq_n_u8(15), m30 = vdupq_n_u8(0x30);
  const int8x16_t m32 = vdupq_n_s8(32);
  for (int64_t i = 0; i < k / 256; ++i) {
    const BlockQ6K& blk = b[i];
    __builtin_prefetch(reinterpret_cast<const char*>(&blk) + 1024);
    __builtin_prefetch(reinterpret_cast<const char*>(&blk) + 1088);
    __builtin_prefetch(reinterpret_cast<const char*>(&blk) + 1152);
    int32x4_t isum[R];
    for (int r = 0; r < R; ++r) isum[r] = vdupq_n_s32(0);
    for (int h = 0; h < 2; ++h) {
      for (int half = 0; half < 2; ++half) {  // elements 0..15 and 16..31 of each sub-block
        const int o = 16 * half;
        const uint8x16_t l0 = vld1q_u8(blk.ql + 64 * h + o), l1 = vld1q_u8(blk.ql + 64 * h + 32 + o);
        const uint8x16_t qh = vld1q_u8(blk.qh + 32 * h + o);
        uint8x16_t u[4];
        u[0] = vorrq_u8(vandq_u8(l0, m4), vandq_u8(vshlq_n_u8(qh, 4), m30));
        u[1] = vorrq_u8(vandq_u8(l1, m4), vandq_u8(vshlq_n_u8(qh, 2), m30));
        u[2] = vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(qh, m30));
        u[3] = vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(qh, 2), m30));
        for (int q = 0; q < 4; ++q) {
          const int s = 4 * h + q;
          const int8x16_t w = vsubq_s8(vreinterpretq_s8_u8(u[q]), m32);
          const int32_t scale = blk.scales[2 * s + half];
          for (int r = 0; r < R; ++r)
            isum[r] = vmlaq_n_s32(isum[r], dot16(vdupq_n_s32(0), w, vld1q_s8(ra.a[r] + i * 256 + 32 * s + o)), scale);
        }
      }
    }
    const float d = fp16_to_f32(blk.d);
    for (int r = 0; r < R; ++r) acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(isum[r]), d * ra.d[r][i]);
  }
  for (int r = 0; r < R; ++r) out[r] = vaddvq_f32(acc[r]);
}

// Float weights: 8 elements a step, F16 by FCVTL, BF16 by a 16-bit shift; two accumulators.
template <int R>
void row_float(DType t, const void* row, int64_t k, const float* x, float* out) {
  float32x4_t acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = vdupq_n_f32(0);
  const float* w32 = static_cast<const float*>(row);
  const uint16_t* w16 = static_cast<const uint16_t*>(row);
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    float32x4_t w0, w1;
    if (t == DType::F32) {
      w0 = vld1q_f32(w32 + i);
      w1 = vld1q_f32(w32 + i + 4);
    } else if (t == DType::F16) {
      const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(w16 + i));
      w0 = vcvt_f32_f16(vget_low_f16(h));
      w1 = vcvt_high_f32_f16(h);
    } else {
      const uint16x8_t h = vld1q_u16(w16 + i);
      w0 = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
      w1 = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
    }
    for (int r = 0; r < R; ++r) {
      acc0[r] = vfmaq_f32(acc0[r], w0, vld1q_f32(x + r * k + i));
      acc1[r] = vfmaq_f32(acc1[r], w1, vld1q_f32(x + r * k + i + 4));
    }
  }
  float tail[R] = {};
  for (; i < k; ++i) {
    const float w = t == DType::F32 ? w32[i] : t == DType::F16 ? fp16_to_f32(w16[i]) : bf16_to_f32(w16[i]);
    for (int r = 0; r < R; ++r) tail[r] += w * x[r * k + i];
  }
  for (int r = 0; r < R; ++r) out[r] = vaddvq_f32(vaddq_f32(acc0[r], acc1[r])) + tail[r];
}

// Q2_K (Q3 false) / Q3_K (Q3 true): the 2-bit codes of sub-block s are crumb s % 4 of 32 qs
// bytes; Q3_K adds bit s of each hmask byte as 4 and subtracts the offset 4 in the int8 codes, so
// its dot products are signed and need no correction. The halves' integer scales multiply the
// s32 dot products; Q2_K's mins come back through the activation sums over 16.
template <int R, bool Q3>
void row_q23_k(const void* row, int64_t k, const NeonRows& ra, float* out) {
  using Block = std::conditional_t<Q3, BlockQ3K, BlockQ2K>;
  const Block* b = static_cast<const Block*>(row);
  float32x4_t acc[R];
  float mins[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = vdupq_n_f32(0);
    mins[r] = 0;
  }
  const uint8x16_t m3 = vdupq_n_u8(3), one = vdupq_n_u8(1);
  for (int64_t i = 0; i < k / 256; ++i) {
    const Block& blk = b[i];
    __builtin_prefetch(reinterpret_cast<const char*>(&blk) + 1024);
    __builtin_prefetch(reinterpret_cast<const char*>(&blk) + 1088);
    int32_t sc[16], mn[16] = {};
    if constexpr (Q3) {
      int8_t s8[16];
      unpack_q3_k_scales(blk.scales, s8);
      for (int j = 0; j < 16; ++j) sc[j] = s8[j];
    } else {
      for (int j = 0; j < 16; ++j) {
        sc[j] = blk.scales[j] & 15;
        mn[j] = blk.scales[j] >> 4;
      }
    }
    uint8x16_t hm0 = vdupq_n_u8(0), hm1 = vdupq_n_u8(0);
    if constexpr (Q3) {
      hm0 = vld1q_u8(blk.hmask);
      hm1 = vld1q_u8(blk.hmask + 16);
    }
    int32x4_t isum[R];
    for (int r = 0; r < R; ++r) isum[r] = vdupq_n_s32(0);
    for (int s = 0; s < 8; ++s) {
      const uint8_t* q = blk.qs + 32 * (s / 4);
      const int8x16_t sh = vdupq_n_s8(static_cast<int8_t>(-2 * (s % 4)));  // (a negative vshl is a right shift)
      uint8x16_t u0 = vandq_u8(vshlq_u8(vld1q_u8(q), sh), m3), u1 = vandq_u8(vshlq_u8(vld1q_u8(q + 16), sh), m3);
      int8x16_t w0, w1;
      if constexpr (Q3) {
        const int8x16_t hs = vdupq_n_s8(static_cast<int8_t>(-s));
        u0 = vorrq_u8(u0, vshlq_n_u8(vandq_u8(vshlq_u8(hm0, hs), one), 2));
        u1 = vorrq_u8(u1, vshlq_n_u8(vandq_u8(vshlq_u8(hm1, hs), one), 2));
        w0 = vsubq_s8(vreinterpretq_s8_u8(u0), vdupq_n_s8(4));
        w1 = vsubq_s8(vreinterpretq_s8_u8(u1), vdupq_n_s8(4));
      } else {
        w0 = vreinterpretq_s8_u8(u0);
        w1 = vreinterpretq_s8_u8(u1);
      }
      for (int r = 0; r < R; ++r) {
        const int8_t* a = ra.a[r] + i * 256 + 32 * s;
        isum[r] = vmlaq_n_s32(isum[r], dot16(vdupq_n_s32(0), w0, vld1q_s8(a)), sc[2 * s]);
        isum[r] = vmlaq_n_s32(isum[r], dot16(vdupq_n_s32(0), w1, vld1q_s8(a + 16)), sc[2 * s + 1]);
      }
    }
    const float d = fp16_to_f32(blk.d);
    for (int r = 0; r < R; ++r) {
      const float da = ra.d[r][i];
      acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(isum[r]), d * da);
      if constexpr (!Q3) {
        const int32_t* s16 = ra.s16[r] + i * 16;
        int32_t m = 0;
        for (int j = 0; j < 16; ++j) m += mn[j] * s16[j];
        mins[r] += fp16_to_f32(blk.dmin) * da * static_cast<float>(m);
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r] = vaddvq_f32(acc[r]) - mins[r];
}

// IQ4_XS: the nibbles of sub-block s (qs[16 s..]) index IQ4_NL's levels (TBL), the s32 dot
// product times the sub-block's integer scale ls - 32, in s32 over the super-block.
template <int R>
void row_iq4_xs(const void* row, int64_t k, const NeonRows& ra, float* out) {
  const BlockIQ4XS* b = static_cast<const BlockIQ4XS*>(row);
  const int8x16_t levels = vld1q_s8(kIq4nlValues);
  float32x4_t acc[R];
  for (int r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0);
  for (int64_t i = 0; i < k / 256; ++i) {
    const BlockIQ4XS& blk = b[i];
    __builtin_prefetch(reinterpret_cast<const char*>(&blk) + 1024);
    __builtin_prefetch(reinterpret_cast<const char*>(&blk) + 1088);
    int32x4_t isum[R];
    for (int r = 0; r < R; ++r) isum[r] = vdupq_n_s32(0);
    for (int s = 0; s < 8; ++s) {
      const uint8x16_t raw = vld1q_u8(blk.qs + 16 * s);
      const int8x16_t w0 = vqtbl1q_s8(levels, vandq_u8(raw, vdupq_n_u8(15))), w1 = vqtbl1q_s8(levels, vshrq_n_u8(raw, 4));
      const int ls = iq4_xs_scale(blk.scales_h, blk.scales_l, s) - 32;
      for (int r = 0; r < R; ++r) isum[r] = vmlaq_n_s32(isum[r], dot32(w0, w1, ra.a[r] + i * 256 + 32 * s), ls);
    }
    const float d = fp16_to_f32(blk.d);
    for (int r = 0; r < R; ++r) acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(isum[r]), d * ra.d[r][i]);
  }
  for (int r = 0; r < R; ++r) out[r] = vaddvq_f32(acc[r]);
}

// MXFP4: the nibbles index the doubled E2M1 values (TBL); the power-of-two scale in f32 per block.
template <int R>
void row_mxfp4(const void* row, int64_t k, const NeonRows& ra, float* out) {
  const BlockMXFP4* b = static_cast<const BlockMXFP4*>(row);
  const int8x16_t levels = vld1q_s8(kMxfp4Values);
  float32x4_t acc[R];
  for (int r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0);
  for (int64_t i = 0; i < k / 32; ++i) {
    __builtin_prefetch(reinterpret_cast<const char*>(b + i) + 1024);
    const uint8x16_t raw = vld1q_u8(b[i].qs);
    const int8x16_t w0 = vqtbl1q_s8(levels, vandq_u8(raw, vdupq_n_u8(15))), w1 = vqtbl1q_s8(levels, vshrq_n_u8(raw, 4));
    const float dw = mxfp4_scale(b[i].e);
    for (int r = 0; r < R; ++r)
      acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(dot32(w0, w1, ra.a[r] + i * 32)), dw * ra.d[r][i]);
  }
  for (int r = 0; r < R; ++r) out[r] = vaddvq_f32(acc[r]);
}

// TQ2_0 (Q1 false) / TQ1_0 (Q1 true): signed codes t - 1 in {-1, 0, 1} from the trits t. TQ2_0's
// trits are crumbs as Q2_K's codes; TQ1_0's trit n of byte b is ((uint8_t)(b * 3^n) * 3) >> 8:
// MUL on bytes, UMULL by 3, and the high bytes of the products (UZP2).
inline int8x16_t tq1_codes(uint8x16_t x, uint8x16_t p) {
  const uint8x16_t q = vmulq_u8(x, p);
  const uint16x8_t lo = vmull_u8(vget_low_u8(q), vdup_n_u8(3)), hi = vmull_high_u8(q, vdupq_n_u8(3));
  return vsubq_s8(vreinterpretq_s8_u8(vuzp2q_u8(vreinterpretq_u8_u16(lo), vreinterpretq_u8_u16(hi))), vdupq_n_s8(1));
}

template <int R, bool Q1>
void row_tq(const void* row, int64_t k, const NeonRows& ra, float* out) {
  using Block = std::conditional_t<Q1, BlockTQ1_0, BlockTQ2_0>;
  const Block* b = static_cast<const Block*>(row);
  static constexpr uint8_t kQhPow[16] = {1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27};
  const uint8x16_t m3 = vdupq_n_u8(3), qh_pow = vld1q_u8(kQhPow);
  float32x4_t acc[R];
  for (int r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0);
  for (int64_t i = 0; i < k / 256; ++i) {
    const Block& blk = b[i];
    __builtin_prefetch(reinterpret_cast<const char*>(&blk) + 1024);
    int32x4_t isum[R];
    for (int r = 0; r < R; ++r) isum[r] = vdupq_n_s32(0);
    for (int s = 0; s < 8; ++s) {
      int8x16_t w0, w1;
      if constexpr (Q1) {
        static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
        if (s < 5) {
          const uint8x16_t p = vdupq_n_u8(kPow3[s]);
          w0 = tq1_codes(vld1q_u8(blk.qs), p);
          w1 = tq1_codes(vld1q_u8(blk.qs + 16), p);
        } else if (s < 7) {
          const uint8x16_t x = vld1q_u8(blk.qs + 32);
          w0 = tq1_codes(x, vdupq_n_u8(kPow3[2 * (s - 5)]));
          w1 = tq1_codes(x, vdupq_n_u8(kPow3[2 * (s - 5) + 1]));
        } else {
          uint32_t qh;
          std::memcpy(&qh, blk.qh, 4);
          w0 = tq1_codes(vld1q_u8(blk.qs + 32), vdupq_n_u8(81));
          w1 = tq1_codes(vreinterpretq_u8_u32(vdupq_n_u32(qh)), qh_pow);
        }
      } else {
        const uint8_t* q = blk.qs + 32 * (s / 4);
        const int8x16_t sh = vdupq_n_s8(static_cast<int8_t>(-2 * (s % 4)));
        w0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(vshlq_u8(vld1q_u8(q), sh), m3)), vdupq_n_s8(1));
        w1 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(vshlq_u8(vld1q_u8(q + 16), sh), m3)), vdupq_n_s8(1));
      }
      for (int r = 0; r < R; ++r) isum[r] = vaddq_s32(isum[r], dot32(w0, w1, ra.a[r] + i * 256 + 32 * s));
    }
    const float d = fp16_to_f32(blk.d);
    for (int r = 0; r < R; ++r) acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(isum[r]), d * ra.d[r][i]);
  }
  for (int r = 0; r < R; ++r) out[r] = vaddvq_f32(acc[r]);
}

// The codebook types IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S: each sub-block decoded
// to its 32 signed codes through the codebook (core/iq_grids.h), dotted with SDOT / the widening
// multiplies (each half of 16 apart where the scales are per half), times its odd integer scales
// (x = d * kIqScale * L[h] * q).
template <int R, DType T>
void row_iq(const void* row, int64_t k, const NeonRows& ra, float* out) {
  using Block = typename WTraits<T>::Block;
  const Block* b = static_cast<const Block*>(row);
  float32x4_t acc[R];
  for (int r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0);
  for (int64_t i = 0; i < k / 256; ++i) {
    const Block& blk = b[i];
    __builtin_prefetch(reinterpret_cast<const char*>(&blk) + 1024);
    int32x4_t isum[R];
    for (int r = 0; r < R; ++r) isum[r] = vdupq_n_s32(0);
    for (int s = 0; s < 8; ++s) {
      alignas(16) int8_t q[32];
      int L[2];
      iq_sub_codes<T>(blk, s, q, L);
      const int8x16_t w0 = vld1q_s8(q), w1 = vld1q_s8(q + 16);
      for (int r = 0; r < R; ++r) {
        const int8_t* a = ra.a[r] + i * 256 + 32 * s;
        if constexpr (WTraits<T>::kSplit) {
          isum[r] = vmlaq_n_s32(isum[r], dot16(vdupq_n_s32(0), w0, vld1q_s8(a)), L[0]);
          isum[r] = vmlaq_n_s32(isum[r], dot16(vdupq_n_s32(0), w1, vld1q_s8(a + 16)), L[1]);
        } else {
          isum[r] = vmlaq_n_s32(isum[r], dot32(w0, w1, a), L[0]);
        }
      }
    }
    const float d = iq_block_d(blk) * kIqScale<T>;
    for (int r = 0; r < R; ++r) acc[r] = vfmaq_n_f32(acc[r], vcvtq_f32_s32(isum[r]), d * ra.d[r][i]);
  }
  for (int r = 0; r < R; ++r) out[r] = vaddvq_f32(acc[r]);
}

template <int R>
void row_dispatch(const WeightView& w, const void* row, const float* x, const NeonRows& ra, float* out) {
  const int64_t k = w.cols;
  switch (w.type) {
    case DType::Q8_0: return row_b32<R, DType::Q8_0>(row, k, ra, out);
    case DType::Q4_0: return row_b32<R, DType::Q4_0>(row, k, ra, out);
    case DType::Q5_0: return row_b32<R, DType::Q5_0>(row, k, ra, out);
    case DType::Q4_1: return row_b32<R, DType::Q4_1>(row, k, ra, out);
    case DType::Q5_1: return row_b32<R, DType::Q5_1>(row, k, ra, out);
    case DType::IQ4_NL: return row_b32<R, DType::IQ4_NL>(row, k, ra, out);
    case DType::Q4_K: return row_q45_k<R, false>(row, k, ra, out);
    case DType::Q5_K: return row_q45_k<R, true>(row, k, ra, out);
    case DType::Q6_K: return row_q6_k<R>(row, k, ra, out);
    case DType::Q2_K: return row_q23_k<R, false>(row, k, ra, out);
    case DType::Q3_K: return row_q23_k<R, true>(row, k, ra, out);
    case DType::IQ4_XS: return row_iq4_xs<R>(row, k, ra, out);
    case DType::MXFP4: return row_mxfp4<R>(row, k, ra, out);
    case DType::TQ1_0: return row_tq<R, true>(row, k, ra, out);
    case DType::TQ2_0: return row_tq<R, false>(row, k, ra, out);
    case DType::IQ1_S: return row_iq<R, DType::IQ1_S>(row, k, ra, out);
    case DType::IQ1_M: return row_iq<R, DType::IQ1_M>(row, k, ra, out);
    case DType::IQ2_XXS: return row_iq<R, DType::IQ2_XXS>(row, k, ra, out);
    case DType::IQ2_XS: return row_iq<R, DType::IQ2_XS>(row, k, ra, out);
    case DType::IQ2_S: return row_iq<R, DType::IQ2_S>(row, k, ra, out);
    case DType::IQ3_XXS: return row_iq<R, DType::IQ3_XXS>(row, k, ra, out);
    case DType::IQ3_S: return row_iq<R, DType::IQ3_S>(row, k, ra, out);
    case DType::F32: case DType::F16: case DType::BF16: return row_float<R>(w.type, row, k, x + ra.r0 * k, out);
    default: fail(ErrorKind::Internal, "matmul", std::string("no NEON row kernel for ") + dtype_name(w.type));
  }
}

// y[:, n0:n1) by the row kernels, activation rows 4 at a time.
inline void neon_rows_range(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1,
                            float* y) {
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
  thread_local std::vector<NeonRows> tiles;
  tiles.clear();
  for (int64_t r0 = 0; r0 < m; r0 += 4) tiles.emplace_back(qa, r0, std::min<int64_t>(4, m - r0));
  float out[4];
  for (int64_t n = n0; n < n1; ++n) {
    const void* row = base + n * w.row_stride;
    for (const NeonRows& ra : tiles) {
      const int64_t r0 = ra.r0, rr = std::min<int64_t>(4, m - r0);
      switch (rr) {
        case 4: row_dispatch<4>(w, row, x, ra, out); break;
        case 3: row_dispatch<3>(w, row, x, ra, out); break;
        case 2: row_dispatch<2>(w, row, x, ra, out); break;
        default: row_dispatch<1>(w, row, x, ra, out); break;
      }
      for (int64_t r = 0; r < rr; ++r) y[(r0 + r) * w.rows + n] = out[r];
    }
  }
}

#if defined(__ARM_FEATURE_MATMUL_INT8)
// Two weight rows decoded for SMMLA: for every 8 elements c, 16 bytes (row 0's 8 signed codes,
// then row 1's); per 32-element sub-block the scale of each row per 16 (ws) and its min (wm).
struct PairCodes {
  std::vector<int8_t> q;     // [k / 8][2][8]
  std::vector<float> ws;     // [k / 16][2]
  std::vector<float> wm;     // [k / 32][2]
};

template <DType T>
void decode_pair(const WeightView& w, int64_t n, PairCodes& pc) {
  using Tr = WTraits<T>;
  using Block = typename Tr::Block;
  const int64_t k = w.cols, nsub = k / 32;
  pc.q.resize(static_cast<size_t>(2 * k));
  pc.ws.resize(static_cast<size_t>(2 * (k / 16)));
  pc.wm.resize(static_cast<size_t>(2 * nsub));
  Codes c;
  for (int j = 0; j < 2; ++j) {
    const Block* blocks = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w.data) + (n + j) * w.row_stride);
    for (int64_t sb = 0; sb < nsub; ++sb) {
      decode_sub<T>(blocks[sb / Tr::kSub], static_cast<int>(sb % Tr::kSub), c);
      int8_t* dst = pc.q.data() + sb * 64 + 8 * j;
      for (int e = 0; e < 32; ++e) dst[(e / 8) * 16 + e % 8] = static_cast<int8_t>(static_cast<int>(c.u[e]) - Tr::kOff);
      pc.ws[(2 * sb) * 2 + j] = c.ws[0];
      pc.ws[(2 * sb + 1) * 2 + j] = c.ws[1];
      pc.wm[sb * 2 + j] = c.wm;
    }
  }
}

// y[r, n], y[r, n+1], y[r+1, n], y[r+1, n+1] for every activation row pair (an odd last row
// is paired with itself and its duplicate discarded).
template <DType T>
void pair_rows(const PairCodes& pc, const QuantActs& qa, int64_t m, int64_t n, int64_t ldy, float* y) {
  using Tr = WTraits<T>;
  const int64_t k = qa.k, nsub = k / 32, ng = qa.groups(), subs_per_group = qa.group / 32;
  for (int64_t r = 0; r < m; r += 2) {
    const int64_t r1 = r + 1 < m ? r + 1 : r;
    const int8_t* a0 = qa.q + r * k;
    const int8_t* a1 = qa.q + r1 * k;
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t gi = 0; gi < ng; ++gi) {
      // lanes: (act r, w n), (r, n+1), (r+1, n), (r+1, n+1)
      const float32x4_t da = vcombine_f32(vdup_n_f32(qa.d[r * ng + gi]), vdup_n_f32(qa.d[r1 * ng + gi]));
      float32x4_t gsum = vdupq_n_f32(0);
      for (int64_t sb = gi * subs_per_group; sb < (gi + 1) * subs_per_group; ++sb) {
        const int8_t* wq = pc.q.data() + sb * 64;
        const int8_t* x0 = a0 + sb * 32;
        const int8_t* x1 = a1 + sb * 32;
        int32x4_t p0 = vdupq_n_s32(0), p1 = vdupq_n_s32(0);
        p0 = vmmlaq_s32(p0, vcombine_s8(vld1_s8(x0), vld1_s8(x1)), vld1q_s8(wq));
        p0 = vmmlaq_s32(p0, vcombine_s8(vld1_s8(x0 + 8), vld1_s8(x1 + 8)), vld1q_s8(wq + 16));
        p1 = vmmlaq_s32(p1, vcombine_s8(vld1_s8(x0 + 16), vld1_s8(x1 + 16)), vld1q_s8(wq + 32));
        p1 = vmmlaq_s32(p1, vcombine_s8(vld1_s8(x0 + 24), vld1_s8(x1 + 24)), vld1q_s8(wq + 48));
        const float32x2_t s0 = vld1_f32(pc.ws.data() + 4 * sb), s1 = vld1_f32(pc.ws.data() + 4 * sb + 2);
        if constexpr (Tr::kSplit) {  // Q6_K: a scale per 16
          gsum = vfmaq_f32(gsum, vcvtq_f32_s32(p0), vcombine_f32(s0, s0));
          gsum = vfmaq_f32(gsum, vcvtq_f32_s32(p1), vcombine_f32(s1, s1));
        } else {
          gsum = vfmaq_f32(gsum, vcvtq_f32_s32(vaddq_s32(p0, p1)), vcombine_f32(s0, s0));
        }
        if constexpr (Tr::kMins) {
          const float32x2_t wm = vld1_f32(pc.wm.data() + 2 * sb);
          const float32x4_t sums = vcombine_f32(vdup_n_f32(qa.fs32[r * nsub + sb]), vdup_n_f32(qa.fs32[r1 * nsub + sb]));
          gsum = vfmsq_f32(gsum, vcombine_f32(wm, wm), sums);
        }
      }
      acc = vfmaq_f32(acc, gsum, da);
    }
    float o[4];
    vst1q_f32(o, acc);
    y[r * ldy + n] = o[0];
    y[r * ldy + n + 1] = o[1];
    if (r1 != r) {
      y[r1 * ldy + n] = o[2];
      y[r1 * ldy + n + 1] = o[3];
    }
  }
}

template <DType T>
void i8mm_quant_range(const WeightView& w, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y) {
  thread_local PairCodes pc;
  for (int64_t n = n0; n + 1 < n1; n += 2) {
    decode_pair<T>(w, n, pc);
    pair_rows<T>(pc, qa, m, n, w.rows, y);
  }
}

// Quantized weights with two or more activation rows go through SMMLA; the rest (float weights,
// a single row, an odd last weight row) through the row kernels.
inline void neon_i8mm_range(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1,
                            float* y) {
  if (m < 2 || !traits(w.type).quantized) return neon_rows_range(w, x, qa, m, n0, n1, y);
  switch (w.type) {
    case DType::Q8_0: i8mm_quant_range<DType::Q8_0>(w, qa, m, n0, n1, y); break;
    case DType::Q4_0: i8mm_quant_range<DType::Q4_0>(w, qa, m, n0, n1, y); break;
    case DType::Q5_0: i8mm_quant_range<DType::Q5_0>(w, qa, m, n0, n1, y); break;
    case DType::Q4_1: i8mm_quant_range<DType::Q4_1>(w, qa, m, n0, n1, y); break;
    case DType::Q5_1: i8mm_quant_range<DType::Q5_1>(w, qa, m, n0, n1, y); break;
    case DType::IQ4_NL: i8mm_quant_range<DType::IQ4_NL>(w, qa, m, n0, n1, y); break;
    case DType::Q4_K: i8mm_quant_range<DType::Q4_K>(w, qa, m, n0, n1, y); break;
    case DType::Q5_K: i8mm_quant_range<DType::Q5_K>(w, qa, m, n0, n1, y); break;
    case DType::Q6_K: i8mm_quant_range<DType::Q6_K>(w, qa, m, n0, n1, y); break;
    case DType::TQ1_0: i8mm_quant_range<DType::TQ1_0>(w, qa, m, n0, n1, y); break;
    case DType::TQ2_0: i8mm_quant_range<DType::TQ2_0>(w, qa, m, n0, n1, y); break;
    default: return neon_rows_range(w, x, qa, m, n0, n1, y);
  }
  if ((n1 - n0) % 2 == 1) neon_rows_range(w, x, qa, m, n1 - 1, n1, y);
}
#endif

}  // namespace
}  // namespace ptn::mm
