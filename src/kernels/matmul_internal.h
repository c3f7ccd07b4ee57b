// Internal to kernels/matmul*.cpp: the quantized-activation format, the per-type decoding of a
// 32-element sub-block into unsigned codes, and the per-SIMD-level entry points.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/blocks.h"
#include "core/fp16.h"
#include "core/iq_grids.h"
#include "core/quant.h"
#include "kernels/matmul.h"

namespace ptn::mm {

// Activations x[m, K] quantized per row: q[r*K + k] int8, one scale per group of `group`
// elements (x ~= d * q), plus the sums of q over every 16 and every 32 elements (the offset and
// min corrections of the weight formats need them).
struct QuantActs {
  int64_t m = 0, k = 0, group = 0;
  int8_t* q = nullptr;       // [m][k]
  float* d = nullptr;        // [m][k / group]
  int32_t* s16 = nullptr;    // [m][k / 16]
  int32_t* s32 = nullptr;    // [m][k / 32]
  float* fs32 = nullptr;     // [m][k / 32], s32 as float
  int16_t* h32 = nullptr;    // [m][k / 32], s32 as int16 (|s32| <= 32 * 127)
  // BF16 weights with BF16 dot products: x as bf16 pairs, converted once for all threads (and
  // all the matrices of a matmul_multi); null otherwise (the kernels then convert themselves).
  uint32_t* xb = nullptr;    // [m][(k + 1) / 2], element 2i in the low half of pair i
  int64_t groups() const { return k / group; }
};

// Activation group size: one scale per weight block, as ggml's Q8_0 (32-element types) and
// Q8_K (K-quants, 256) activation formats.
inline int64_t act_group(DType t) { return traits(t).block_size; }

// A 32-element sub-block of a quantized weight row as unsigned codes:
//   w[i] = ws[i / 16] * (u[i] - off) - (i < 16 || kMins < 2 ? wm : wm_hi)
// off is a constant of the type (128 for Q8_0, IQ4_NL, IQ4_XS and MXFP4, 8 for Q4_0, 16 for
// Q5_0, 32 for Q6_K, 4 for Q3_K, 1 for TQ1_0/TQ2_0, 0 for Q4_1/Q5_1/Q2_K/Q4_K/Q5_K); ws[0] == ws[1] except for the
// types whose scales are per 16 (Q2_K, Q3_K, Q6_K, IQ2_XS, IQ2_S, IQ1_M: kSplit); wm != 0 only for the types with mins
// (Q4_K/Q5_K: wm = dmin * m_j; Q4_1/Q5_1: wm = -m, their x = d*q + m; Q2_K: a min per 16, wm for
// the first 16 elements and wm_hi for the second, kMins == 2). IQ4_NL's and IQ4_XS's codes are
// their table's levels plus 128 (1..241), MXFP4's its doubled E2M1 values plus 128 (116..140).
struct Codes {
  alignas(32) uint8_t u[32];
  float ws[2];
  float wm;
  float wm_hi;  // kMins == 2 only
};

// IQ4_NL's levels as unsigned codes (level + 128), 16-byte aligned for a table lookup.
struct Iq4nlCodes {
  alignas(16) uint8_t u[16] = {};
  constexpr Iq4nlCodes() {
    for (int i = 0; i < 16; ++i) u[i] = static_cast<uint8_t>(kIq4nlValues[i] + 128);
  }
};
inline constexpr Iq4nlCodes kIq4nlCodes{};

template <DType T> struct WTraits;
template <> struct WTraits<DType::Q8_0> { using Block = BlockQ8_0; static constexpr int kSub = 1, kOff = 128, kSplit = 0, kMins = 0; };
template <> struct WTraits<DType::Q4_0> { using Block = BlockQ4_0; static constexpr int kSub = 1, kOff = 8, kSplit = 0, kMins = 0; };
template <> struct WTraits<DType::Q5_0> { using Block = BlockQ5_0; static constexpr int kSub = 1, kOff = 16, kSplit = 0, kMins = 0; };
template <> struct WTraits<DType::Q4_1> { using Block = BlockQ4_1; static constexpr int kSub = 1, kOff = 0, kSplit = 0, kMins = 1; };
template <> struct WTraits<DType::Q5_1> { using Block = BlockQ5_1; static constexpr int kSub = 1, kOff = 0, kSplit = 0, kMins = 1; };
template <> struct WTraits<DType::IQ4_NL> { using Block = BlockIQ4_NL; static constexpr int kSub = 1, kOff = 128, kSplit = 0, kMins = 0; };
// K-quants and IQ4_XS: kSub 32-element sub-blocks per block. kSplit: a scale per 16 elements;
// kMins: 1 a min per sub-block, 2 a min per 16 elements.
template <> struct WTraits<DType::Q4_K> { using Block = BlockQ4K; static constexpr int kSub = 8, kOff = 0, kSplit = 0, kMins = 1; };
template <> struct WTraits<DType::Q5_K> { using Block = BlockQ5K; static constexpr int kSub = 8, kOff = 0, kSplit = 0, kMins = 1; };
template <> struct WTraits<DType::Q6_K> { using Block = BlockQ6K; static constexpr int kSub = 8, kOff = 32, kSplit = 1, kMins = 0; };
template <> struct WTraits<DType::Q2_K> { using Block = BlockQ2K; static constexpr int kSub = 8, kOff = 0, kSplit = 1, kMins = 2; };
template <> struct WTraits<DType::Q3_K> { using Block = BlockQ3K; static constexpr int kSub = 8, kOff = 4, kSplit = 1, kMins = 0; };
template <> struct WTraits<DType::IQ4_XS> { using Block = BlockIQ4XS; static constexpr int kSub = 8, kOff = 128, kSplit = 0, kMins = 0; };
template <> struct WTraits<DType::MXFP4> { using Block = BlockMXFP4; static constexpr int kSub = 1, kOff = 128, kSplit = 0, kMins = 0; };
// The ternary types: codes 0..2 (the trit), offset 1, one scale per 256.
template <> struct WTraits<DType::TQ1_0> { using Block = BlockTQ1_0; static constexpr int kSub = 8, kOff = 1, kSplit = 0, kMins = 0; };
template <> struct WTraits<DType::TQ2_0> { using Block = BlockTQ2_0; static constexpr int kSub = 8, kOff = 1, kSplit = 0, kMins = 0; };
// The IQ1 and IQ2 codebook types: codes 8 * value +- 1 (IQ1) or signed magnitudes 8, 25, 43 (IQ2)
// plus 128, a scale per half.
template <> struct WTraits<DType::IQ1_S> { using Block = BlockIQ1S; static constexpr int kSub = 8, kOff = 128, kSplit = 0, kMins = 0; };
template <> struct WTraits<DType::IQ1_M> { using Block = BlockIQ1M; static constexpr int kSub = 8, kOff = 128, kSplit = 1, kMins = 0; };
template <> struct WTraits<DType::IQ2_XXS> { using Block = BlockIQ2XXS; static constexpr int kSub = 8, kOff = 128, kSplit = 0, kMins = 0; };
template <> struct WTraits<DType::IQ2_XS> { using Block = BlockIQ2XS; static constexpr int kSub = 8, kOff = 128, kSplit = 1, kMins = 0; };
template <> struct WTraits<DType::IQ2_S> { using Block = BlockIQ2S; static constexpr int kSub = 8, kOff = 128, kSplit = 1, kMins = 0; };
// The IQ3 codebook types: signed magnitudes plus 128 (66..190 for IQ3_XXS, 113..143 for IQ3_S).
template <> struct WTraits<DType::IQ3_XXS> { using Block = BlockIQ3XXS; static constexpr int kSub = 8, kOff = 128, kSplit = 0, kMins = 0; };
template <> struct WTraits<DType::IQ3_S> { using Block = BlockIQ3S; static constexpr int kSub = 8, kOff = 128, kSplit = 0, kMins = 0; };

// Decodes 32-element sub-block `s` (0..kSub-1) of block `b` into c.
template <DType T>
inline void decode_sub(const typename WTraits<T>::Block& b, int s, Codes& c);

template <>
inline void decode_sub<DType::Q8_0>(const BlockQ8_0& b, int, Codes& c) {
  for (int i = 0; i < 32; ++i) c.u[i] = static_cast<uint8_t>(b.qs[i] + 128);
  c.ws[0] = c.ws[1] = fp16_to_f32(b.d);
  c.wm = 0;
}
template <>
inline void decode_sub<DType::Q4_0>(const BlockQ4_0& b, int, Codes& c) {
  for (int i = 0; i < 16; ++i) {
    c.u[i] = b.qs[i] & 15;
    c.u[i + 16] = b.qs[i] >> 4;
  }
  c.ws[0] = c.ws[1] = fp16_to_f32(b.d);
  c.wm = 0;
}
template <>
inline void decode_sub<DType::Q5_0>(const BlockQ5_0& b, int, Codes& c) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (int i = 0; i < 16; ++i) {
    c.u[i] = static_cast<uint8_t>((b.qs[i] & 15) | (((qh >> i) & 1) << 4));
    c.u[i + 16] = static_cast<uint8_t>((b.qs[i] >> 4) | (((qh >> (i + 16)) & 1) << 4));
  }
  c.ws[0] = c.ws[1] = fp16_to_f32(b.d);
  c.wm = 0;
}
template <>
inline void decode_sub<DType::Q4_1>(const BlockQ4_1& b, int, Codes& c) {
  for (int i = 0; i < 16; ++i) {
    c.u[i] = b.qs[i] & 15;
    c.u[i + 16] = b.qs[i] >> 4;
  }
  c.ws[0] = c.ws[1] = fp16_to_f32(b.d);
  c.wm = -fp16_to_f32(b.m);
}
template <>
inline void decode_sub<DType::Q5_1>(const BlockQ5_1& b, int, Codes& c) {
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (int i = 0; i < 16; ++i) {
    c.u[i] = static_cast<uint8_t>((b.qs[i] & 15) | (((qh >> i) & 1) << 4));
    c.u[i + 16] = static_cast<uint8_t>((b.qs[i] >> 4) | (((qh >> (i + 16)) & 1) << 4));
  }
  c.ws[0] = c.ws[1] = fp16_to_f32(b.d);
  c.wm = -fp16_to_f32(b.m);
}
template <>
inline void decode_sub<DType::IQ4_NL>(const BlockIQ4_NL& b, int, Codes& c) {
  for (int i = 0; i < 16; ++i) {
    c.u[i] = kIq4nlCodes.u[b.qs[i] & 15];
    c.u[i + 16] = kIq4nlCodes.u[b.qs[i] >> 4];
  }
  c.ws[0] = c.ws[1] = fp16_to_f32(b.d);
  c.wm = 0;
}
template <>
inline void decode_sub<DType::Q4_K>(const BlockQ4K& b, int s, Codes& c) {
  const uint8_t* q = b.qs + 32 * (s / 2);
  const int sh = (s & 1) * 4;
  for (int i = 0; i < 32; ++i) c.u[i] = (q[i] >> sh) & 15;
  uint8_t sc, mn;
  unpack_scale_min_k4(b.scales, s, sc, mn);
  c.ws[0] = c.ws[1] = fp16_to_f32(b.d) * sc;
  c.wm = fp16_to_f32(b.dmin) * mn;
}
template <>
inline void decode_sub<DType::Q5_K>(const BlockQ5K& b, int s, Codes& c) {
  const uint8_t* q = b.qs + 32 * (s / 2);
  const int sh = (s & 1) * 4;
  for (int i = 0; i < 32; ++i) c.u[i] = static_cast<uint8_t>(((q[i] >> sh) & 15) | (((b.qh[i] >> s) & 1) << 4));
  uint8_t sc, mn;
  unpack_scale_min_k4(b.scales, s, sc, mn);
  c.ws[0] = c.ws[1] = fp16_to_f32(b.d) * sc;
  c.wm = fp16_to_f32(b.dmin) * mn;
}
template <>
inline void decode_sub<DType::Q6_K>(const BlockQ6K& b, int s, Codes& c) {
  // Elements 128h + 32i + l (h = s/4, i = s%4): low 4 bits from ql (nibble i/2 of byte
  // 64h + 32(i%2) + l), high 2 bits from bits 2i..2i+1 of qh[32h + l].
  const int h = s / 4, i = s % 4;
  const uint8_t* ql = b.ql + 64 * h + 32 * (i % 2);
  const uint8_t* qh = b.qh + 32 * h;
  const int lsh = (i / 2) * 4, hsh = 2 * i;
  for (int l = 0; l < 32; ++l)
    c.u[l] = static_cast<uint8_t>(((ql[l] >> lsh) & 15) | (((qh[l] >> hsh) & 3) << 4));
  const float d = fp16_to_f32(b.d);
  c.ws[0] = d * b.scales[2 * s];
  c.ws[1] = d * b.scales[2 * s + 1];
  c.wm = 0;
}

// Q2_K / Q3_K sub-block s: its 32 elements are crumb s % 4 (bits 2(s%4)..) of qs[32(s/4) + l].
template <>
inline void decode_sub<DType::Q2_K>(const BlockQ2K& b, int s, Codes& c) {
  const uint8_t* q = b.qs + 32 * (s / 4);
  const int sh = 2 * (s % 4);
  for (int i = 0; i < 32; ++i) c.u[i] = (q[i] >> sh) & 3;
  const float d = fp16_to_f32(b.d), dmin = fp16_to_f32(b.dmin);
  const uint8_t s0 = b.scales[2 * s], s1 = b.scales[2 * s + 1];
  c.ws[0] = d * static_cast<float>(s0 & 15);
  c.ws[1] = d * static_cast<float>(s1 & 15);
  c.wm = dmin * static_cast<float>(s0 >> 4);
  c.wm_hi = dmin * static_cast<float>(s1 >> 4);
}
// The signed scale (sc - 32) of Q3_K sub-block j (0..15) from its packed scales[12].
inline int q3_k_scale(const uint8_t* packed, int j) {
  const int lo = j < 8 ? packed[j] & 0x0f : packed[j - 8] >> 4;
  return (lo | (((packed[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}
template <>
inline void decode_sub<DType::Q3_K>(const BlockQ3K& b, int s, Codes& c) {
  const uint8_t* q = b.qs + 32 * (s / 4);
  const int sh = 2 * (s % 4);
  for (int i = 0; i < 32; ++i) c.u[i] = static_cast<uint8_t>(((q[i] >> sh) & 3) | (((b.hmask[i] >> s) & 1) << 2));
  const float d = fp16_to_f32(b.d);
  c.ws[0] = d * static_cast<float>(q3_k_scale(b.scales, 2 * s));
  c.ws[1] = d * static_cast<float>(q3_k_scale(b.scales, 2 * s + 1));
  c.wm = 0;
}
template <>
inline void decode_sub<DType::IQ4_XS>(const BlockIQ4XS& b, int s, Codes& c) {
  const uint8_t* q = b.qs + 16 * s;
  for (int i = 0; i < 16; ++i) {
    c.u[i] = kIq4nlCodes.u[q[i] & 15];
    c.u[i + 16] = kIq4nlCodes.u[q[i] >> 4];
  }
  c.ws[0] = c.ws[1] = fp16_to_f32(b.d) * static_cast<float>(iq4_xs_scale(b.scales_h, b.scales_l, s) - 32);
  c.wm = 0;
}
template <>
inline void decode_sub<DType::MXFP4>(const BlockMXFP4& b, int, Codes& c) {
  for (int i = 0; i < 16; ++i) {
    c.u[i] = static_cast<uint8_t>(kMxfp4Values[b.qs[i] & 15] + 128);
    c.u[i + 16] = static_cast<uint8_t>(kMxfp4Values[b.qs[i] >> 4] + 128);
  }
  c.ws[0] = c.ws[1] = mxfp4_scale(b.e);
  c.wm = 0;
}
template <>
inline void decode_sub<DType::TQ1_0>(const BlockTQ1_0& b, int s, Codes& c) {
  for (int i = 0; i < 32; ++i) c.u[i] = static_cast<uint8_t>(tq1_0_trit(b.qs, b.qh, 32 * s + i));
  c.ws[0] = c.ws[1] = fp16_to_f32(b.d);
  c.wm = 0;
}
template <>
inline void decode_sub<DType::TQ2_0>(const BlockTQ2_0& b, int s, Codes& c) {
  const uint8_t* q = b.qs + 32 * (s / 4);
  const int sh = 2 * (s % 4);
  for (int i = 0; i < 32; ++i) c.u[i] = static_cast<uint8_t>((q[i] >> sh) & 3);
  c.ws[0] = c.ws[1] = fp16_to_f32(b.d);
  c.wm = 0;
}

// The codebook types' (IQ1, IQ2, IQ3) sub-block s as signed codes q and the halves' odd integer
// scales L, x = d * kIqScale * L[h] * q, and their blocks' scale d.
template <DType T>
constexpr float kIqScale = T == DType::IQ3_S ? 1.0f : T == DType::IQ3_XXS ? 0.25f : 0.125f;

template <DType T, class Block>
inline void iq_sub_codes(const Block& b, int s, int8_t q[32], int L[2]) {
  if constexpr (T == DType::IQ3_S) {
    iq3s_sub_codes(b, s, q, L);
    L[1] = L[0];
  } else if constexpr (T == DType::IQ3_XXS) {
    iq3xxs_sub_codes(b, s, q, L);
    L[1] = L[0];
  } else if constexpr (T == DType::IQ1_S) {
    iq1s_sub_codes(b, s, q, L);
  } else if constexpr (T == DType::IQ1_M) {
    iq1m_sub_codes(b, s, q, L);
  } else if constexpr (T == DType::IQ2_XXS) {
    iq2xxs_sub_codes(b, s, q, L);
  } else if constexpr (T == DType::IQ2_XS) {
    iq2xs_sub_codes(b, s, q, L);
  } else {
    iq2s_sub_codes(b, s, q, L);
  }
}
template <class Block>
inline float iq_block_d(const Block& b) { return fp16_to_f32(b.d); }
inline float iq_block_d(const BlockIQ1M& b) { return fp16_to_f32(iq1m_d_bits(b)); }

// The codebook types: the sub-block's codes plus 128, each half's scale d * kIqScale * L[h].
template <DType T, class Block>
inline void decode_iq_sub(const Block& b, int s, Codes& c) {
  int8_t q[32];
  int L[2];
  iq_sub_codes<T>(b, s, q, L);
  for (int i = 0; i < 32; ++i) c.u[i] = static_cast<uint8_t>(q[i] + 128);
  const float d = iq_block_d(b) * kIqScale<T>;
  c.ws[0] = d * static_cast<float>(L[0]);
  c.ws[1] = d * static_cast<float>(L[1]);
  c.wm = 0;
}
template <>
inline void decode_sub<DType::IQ1_S>(const BlockIQ1S& b, int s, Codes& c) { decode_iq_sub<DType::IQ1_S>(b, s, c); }
template <>
inline void decode_sub<DType::IQ1_M>(const BlockIQ1M& b, int s, Codes& c) { decode_iq_sub<DType::IQ1_M>(b, s, c); }
template <>
inline void decode_sub<DType::IQ2_XXS>(const BlockIQ2XXS& b, int s, Codes& c) { decode_iq_sub<DType::IQ2_XXS>(b, s, c); }
template <>
inline void decode_sub<DType::IQ2_XS>(const BlockIQ2XS& b, int s, Codes& c) { decode_iq_sub<DType::IQ2_XS>(b, s, c); }
template <>
inline void decode_sub<DType::IQ2_S>(const BlockIQ2S& b, int s, Codes& c) { decode_iq_sub<DType::IQ2_S>(b, s, c); }
template <>
inline void decode_sub<DType::IQ3_XXS>(const BlockIQ3XXS& b, int s, Codes& c) { decode_iq_sub<DType::IQ3_XXS>(b, s, c); }
template <>
inline void decode_sub<DType::IQ3_S>(const BlockIQ3S& b, int s, Codes& c) { decode_iq_sub<DType::IQ3_S>(b, s, c); }

// The correction of half h (0, 1) of a decoded sub-block: w = ws[h] * u - half_correction, so
// sum(w * a) = ws[h] * dot(u, a) - half_correction * sum(a) over the half's 16 elements.
template <DType T>
inline float half_correction(const Codes& c, int h) {
  return c.ws[h] * static_cast<float>(WTraits<T>::kOff) + (WTraits<T>::kMins == 2 && h == 1 ? c.wm_hi : c.wm);
}

// Per-level entry points. quantize_acts fills rows [r0, r1) of qa from x (row stride qa.k).
// matmul_range computes y[:, n0:n1) (y row stride w.rows) from x (float types) or qa.
void quantize_acts_scalar(const float* x, int64_t r0, int64_t r1, QuantActs& qa);
void quantize_acts_avx2(const float* x, int64_t r0, int64_t r1, QuantActs& qa);
void quantize_acts_avx512(const float* x, int64_t r0, int64_t r1, QuantActs& qa);
void matmul_range_scalar(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y);
void matmul_range_avx2(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y);
void matmul_range_avx512(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y);
// AVX2 panels for quantized weights in rows (matmul_quant_panels_avx2.cpp), the prefill case.
void qpanel_range_avx2(const WeightView& w, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y);
// The same with vpdpbusd on ymm (level avx2-vnni): the VEX AVX-VNNI form, and the EVEX
// AVX512-VNNI form that computes the same on CPUs with AVX512VL + VNNI but no AVX-VNNI.
void qpanel_range_avxvnni(const WeightView& w, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y);
void qpanel_range_vnni_evex(const WeightView& w, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y);
// Q2_K, Q3_K, IQ4_XS, MXFP4, TQ1_0 and TQ2_0 have no panels of their own at any x86 level: their prefill goes
// through these ymm panels (decode_sub), their decode through matmul_codes_x86.h's row kernels.
// AVX2 level with AVX-VNNI (SimdLevel::AVX2VNNI): the AVX2 row kernels, the VNNI panels.
void matmul_range_avx2vnni(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y);
// aarch64: one activation format for every NEON level; row kernels per level (matmul_neon.cpp,
// matmul_dotprod.cpp, matmul_i8mm.cpp, written once in matmul_neon_impl.h).
void quantize_acts_neon(const float* x, int64_t r0, int64_t r1, QuantActs& qa);
void matmul_range_neon(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y);
void matmul_range_neon_dotprod(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y);
void matmul_range_neon_i8mm(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y);
// Interleaved weights (X16, P32) multiplied by `range` from their rows: up to 32 rows at a time
// back in their blocks, then range on those rows (a level with no kernels for the layout, or a
// layout some kernels of a level do not read). n0 and n1 are multiples of 32 or the end.
using RangeFn = void (*)(const WeightView&, const float*, const QuantActs&, int64_t, int64_t, int64_t, float*);
void deinterleaved_range(RangeFn range, const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0,
                         int64_t n1, float* y);
// Rows [r0, r1) of x [.., k] as bf16 pairs (round to nearest even; an odd k pairs the last
// element with zero) into xb [.., (k + 1) / 2]. AVX-512 with BF16 only (simd_has_bf16()).
void bf16_pairs_avx512(const float* x, int64_t r0, int64_t r1, int64_t k, uint32_t* xb);
// Whether matmul_range_avx512 multiplies BF16 weights with m activation rows by BF16 dot
// products from QuantActs::xb (the panel path on a CPU with BF16).
bool avx512_uses_bf16_pairs(DType t, int64_t m);

}  // namespace ptn::mm
