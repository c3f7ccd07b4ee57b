// Internal to kernels/matmul_quant_panels_{avx2,avxvnni,vnni_avx512}.cpp: the x86 panel kernels
// for quantized weights, compiled once per int8 dot product. Define PTN_PANEL_DOT before the
// include: 0 maddubs (AVX2), 1 AVX-VNNI's VEX vpdpbusd on ymm, 2 AVX512-VNNI's EVEX vpdpbusd on
// ymm (AVX512VL; it computes the same as the VEX form and stands in for it on CPUs with
// AVX-512 but no AVX-VNNI). PTN_PANEL_ENTRY names the entry point.
//
// AVX2 panel kernels for quantized weights (the prefill case, many activation rows), designed
// as the AVX-512 ones (matmul_quant_panels_avx512.cpp) for a machine with 16 ymm registers and
// no VNNI: 8 weight rows (output columns) at a time, a chunk of their K range decoded once into
// L1 as unsigned or signed codes transposed so that one ymm load holds 4 consecutive k of the 8
// columns, then multiplied with every activation row, 4 rows at a time, the f32 accumulators of
// the 4 x 8 tile staying in registers across the chunk.
//
// The int8 dot product is maddubs (u8 x s8 -> s16 pair sums, saturating) then madd with ones
// (s16 pairs -> s32). maddubs cannot saturate here because the pair sums are bounded by the
// codes: |a| <= 127 (the activation quantizer clamps to +-127), so one quad (4 codes) of an
// unsigned code u <= U adds at most 2 * U * 127 to a 16-bit lane, and QG quads may be summed in
// 16 bits before the madd while QG * 2 * U * 127 <= 32767:
//   TQ1_0 / TQ2_0 / Q2_K / Q3_K / Q4_0 / Q4_1 / Q4_K (U = 2, 3, 7, 15): 8 quads, the whole sub-block, one madd per
//   32 codes; Q5_0 / Q5_1 / Q5_K (U = 31): 4; Q6_K (U = 63): 2.
// Q8_0, IQ4_NL, IQ4_XS and MXFP4 codes are signed (|q| <= 128) and go through the sign trick
// maddubs(|q|, sign(a, q)), one quad per madd.
// With VNNI (PTN_PANEL_DOT 1, 2) every code is unsigned (Q8_0 and IQ4_NL: q + 128) and one
// vpdpbusd per quad and activation row adds 4 products into s32 lanes, no saturation.
// The codes' constant offset and the formats' mins are one correction per sub-block (or
// 16-element half, Q6_K): w = ws * u - c, and sum(w * a) = ws * dot(u, a) - c * sum(a).
// Q4_K, Q5_K and Q6_K instead keep their integer sub-block scales and sum the scaled dot
// products in s32 over a super-block (PanelTraits::kIntScales, panel_kernel_int), their codes
// unpacked with SIMD (codes32, store_transposed).
#pragma once
#ifndef PTN_PANEL_DOT
#error "define PTN_PANEL_DOT and PTN_PANEL_ENTRY before including matmul_quant_panels_x86.h"
#endif
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "kernels/matmul_codes_x86.h"
#include "kernels/matmul_internal.h"

namespace ptn::mm {
namespace {

constexpr bool kVnni = PTN_PANEL_DOT != 0;

// acc + the 4-byte dot products of unsigned codes u and signed activations a, per s32 lane.
[[gnu::always_inline]] inline __m256i dpbusd(__m256i acc, __m256i u, __m256i a) {
#if PTN_PANEL_DOT == 1
  return _mm256_dpbusd_avx_epi32(acc, u, a);
#elif PTN_PANEL_DOT == 2
  return _mm256_dpbusd_epi32(acc, u, a);
#else
  (void)u;
  (void)a;
  return acc;  // (not used by the maddubs build)
#endif
}

constexpr int kCols = 8;           // weight rows (output columns) per panel: one ymm of int32 lanes
constexpr int64_t kChunkSub = 64;  // 32-element sub-blocks per decoded chunk (2048 k: 16 KB of codes)
constexpr int kMR = 4;             // activation rows per micro-tile

// How a type's codes go through maddubs.
template <DType T> struct PanelTraits {
  using Tr = WTraits<T>;
  // Signed codes (u - 128) with the sign trick, for the types whose unsigned codes exceed 63.
  static constexpr bool kSigned = !kVnni && Tr::kOff == 128;
  static constexpr int kMaxCode = T == DType::Q6_K ? 63 : (T == DType::Q5_0 || T == DType::Q5_1 || T == DType::Q5_K) ? 31
                                 : T == DType::Q3_K ? 7 : T == DType::Q2_K ? 3
                                 : T == DType::TQ1_0 || T == DType::TQ2_0 ? 2 : 15;
  // Quads summed in 16 bits before one madd (see the file comment); at most the 4 quads of a
  // 16-element half where the scales are per half (kSplit), since each half is summed apart.
  static constexpr int kQG = kSigned ? 1
                             : 32767 / (2 * kMaxCode * 127) >= 8 && !Tr::kSplit ? 8
                             : 32767 / (2 * kMaxCode * 127) >= 4 ? 4 : 2;
  static constexpr bool kSplit = Tr::kSplit;  // per-16 scales (Q6_K)
  static constexpr int kGroupSub = Tr::kSub;  // sub-blocks per activation scale group (1 or 8)
  // Q4_K / Q5_K / Q6_K: the integer sub-block (Q6_K: half) scales multiply the s32 dot
  // products - with maddubs, as the madd's multiplier of the 16-bit sums (in place of ones);
  // with VNNI, by a 32-bit multiply of vpdpbusd's sums - the products add up in s32 over the
  // whole super-block, and the float work (d, the activation scale, the mins or Q6_K's offset 32
  // through the activations' sums) is done once per 256 elements instead of once per 32.
  // Bounds: a madd lane is at most 2 * 31496 * 63 (Q5_K: 4 quads of 5-bit codes, 6-bit scales)
  // or 2 * 32004 * 128 (Q6_K: 2 quads of 6-bit codes, 8-bit signed scales), a scaled VNNI lane
  // 32 * 63 * 127 * 128; a super-block adds 16 or 32 of the first or 16 of the second: < 5.3e8,
  // below 2^31.
  static constexpr bool kIntScales = T == DType::Q4_K || T == DType::Q5_K || T == DType::Q6_K;
  static_assert(kVnni || kSigned || kQG * 2 * kMaxCode * 127 <= 32767, "16-bit sums could saturate");
};

// A decoded chunk of 8 weight rows.
struct Panel {
  uint8_t* q;  // [nsb][8 quads][8 cols][4 bytes]: codes (unsigned, or signed as int8)
  float* ws;   // [nsb][2 halves][8 cols]: scale of each 16-element half (equal unless Q6_K)
  float* wc;   // [nsb][2 halves][8 cols]: correction c (per sub-block in half 0, per half if split)
  // kIntScales only (ws and wc unused):
  int16_t* isc;  // [nsb][8 cols][2]: the sub-block's integer scale, twice (one madd lane);
                 // Q6_K: [nsb][2 halves][8 cols][2]; with VNNI one int32 per column instead
                 // of the pair (the same bytes)
  int16_t* imn;  // [nsb / 8][4 pairs][8 cols][2]: the mins of sub-blocks 2p and 2p + 1;
                 // Q6_K: [nsb][8 cols][2], the scales of the sub-block's two halves
  float* sd;     // [nsb / 8][8 cols]: the super-block's d
  float* sm;     // [nsb / 8][8 cols]: the super-block's dmin (not Q6_K)
};
// Bytes of the parts of a Panel for kChunkSub sub-blocks (each a multiple of 32).
constexpr size_t kPanelCodeBytes = kChunkSub * 256, kPanelScaleBytes = kChunkSub * 2 * kCols * 4,
                 kPanelIscBytes = kChunkSub * 2 * kCols * 2 * 2, kPanelImnBytes = kChunkSub * kCols * 2 * 2,
                 kPanelSdBytes = kChunkSub / 8 * kCols * 4;

// Types whose 32 codes of a sub-block are unpacked with SIMD (the K-quants of the Q4_K_M and
// Q5_K_M mixes); the others go through the portable decode_sub.
template <DType T>
constexpr bool kSimdCodes = T == DType::Q4_K || T == DType::Q5_K || T == DType::Q6_K;

[[gnu::always_inline]] inline __m256i shift_right_16(__m256i v, int n) {
  return _mm256_srl_epi16(v, _mm_cvtsi32_si128(n));
}

// The 32 unsigned codes of sub-block s of b (as decode_sub's c.u).
template <DType T>
[[gnu::always_inline]] inline __m256i codes32(const typename WTraits<T>::Block& b, int s) {
  const __m256i m4 = _mm256_set1_epi8(15);
  if constexpr (T == DType::Q4_K) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * (s / 2)));
    return _mm256_and_si256(shift_right_16(q, (s & 1) * 4), m4);
  } else if constexpr (T == DType::Q5_K) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * (s / 2)));
    const __m256i lo = _mm256_and_si256(shift_right_16(q, (s & 1) * 4), m4);
    const __m256i h = _mm256_and_si256(shift_right_16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)), s),
                                       _mm256_set1_epi8(1));
    return _mm256_or_si256(lo, _mm256_slli_epi16(h, 4));
  } else {
    static_assert(T == DType::Q6_K);
    const int h = s / 4, i = s % 4;
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32 * (i % 2)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
    const __m256i lo = _mm256_and_si256(shift_right_16(ql, (i / 2) * 4), m4);
    const __m256i hi = _mm256_and_si256(shift_right_16(qh, 2 * i), _mm256_set1_epi8(3));
    return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
  }
}

// Stores the codes of 8 columns (v[c]: 32 codes of column c) as the panel wants them, quad t of
// every column in one ymm: an 8 x 8 transpose of 32-bit words.
[[gnu::always_inline]] inline void store_transposed(const __m256i (&v)[kCols], uint8_t* q) {
  __m256i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {  // columns 4i .. 4i + 3
    u[4 * i + 0] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int j = 0; j < 4; ++j) {  // u[j]: quads j | j + 4 of columns 0-3; u[4 + j]: of columns 4-7
    _mm256_store_si256(reinterpret_cast<__m256i*>(q + 32 * j), _mm256_permute2x128_si256(u[j], u[4 + j], 0x20));
    _mm256_store_si256(reinterpret_cast<__m256i*>(q + 32 * (j + 4)), _mm256_permute2x128_si256(u[j], u[4 + j], 0x31));
  }
}

// Column c's integer scale in a Panel::isc vector of 8 columns: an int16 pair for madd, or one
// int32 for the VNNI builds' 32-bit multiply.
inline void set_scale(int16_t* v, int c, int16_t sc) {
  if constexpr (kVnni) {
    const int32_t w = sc;
    std::memcpy(v + 2 * c, &w, 4);
  } else {
    v[2 * c] = v[2 * c + 1] = sc;
  }
}

// Decodes sub-blocks [sb0, sb0 + nsb) of weight rows n0..n0+ncols-1 into p (columns >= ncols
// are zero, so they contribute nothing).
template <DType T>
void decode_panel(const WeightView& w, int64_t n0, int ncols, int64_t sb0, int64_t nsb, Panel& p) {
  using Tr = WTraits<T>;
  using P = PanelTraits<T>;
  using Block = typename Tr::Block;
  if constexpr (kSimdCodes<T>) {
    static_assert(P::kIntScales, "the SIMD-unpacked types all take the integer-scale path");
    const Block* rows[kCols];
    for (int c = 0; c < kCols; ++c)
      rows[c] = c < ncols ? reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w.data) + (n0 + c) * w.row_stride)
                          : nullptr;
    for (int64_t b = 0; b < nsb; ++b) {
      const int64_t s = sb0 + b;
      const int j = static_cast<int>(s % Tr::kSub);
      __m256i v[kCols];
      for (int c = 0; c < kCols; ++c) {
        const Block* blk = rows[c] ? rows[c] + s / Tr::kSub : nullptr;
        v[c] = blk ? codes32<T>(*blk, j) : _mm256_setzero_si256();
        if constexpr (T == DType::Q6_K) {
          for (int h = 0; h < 2; ++h) {
            const int16_t sc = blk ? blk->scales[2 * j + h] : 0;
            set_scale(p.isc + b * 32 + h * 16, c, sc);
            p.imn[b * 16 + 2 * c + h] = sc;
          }
          if (j == 0) p.sd[(b / 8) * kCols + c] = blk ? fp16_to_f32(blk->d) : 0.f;
        } else {
          uint8_t sc = 0, mn = 0;
          if (blk) unpack_scale_min_k4(blk->scales, j, sc, mn);
          set_scale(p.isc + b * 16, c, sc);
          p.imn[(b / 8) * 64 + (j / 2) * 16 + 2 * c + (j & 1)] = mn;
          if (j == 0) {
            p.sd[(b / 8) * kCols + c] = blk ? fp16_to_f32(blk->d) : 0.f;
            p.sm[(b / 8) * kCols + c] = blk ? fp16_to_f32(blk->dmin) : 0.f;
          }
        }
      }
      store_transposed(v, p.q + b * 256);
    }
    return;
  }
  for (int c = 0; c < kCols; ++c) {
    const Block* row =
        c < ncols ? reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w.data) + (n0 + c) * w.row_stride) : nullptr;
    for (int64_t b = 0; b < nsb; ++b) {
      uint8_t* q = p.q + b * 256 + 4 * c;
      float* ws = p.ws + b * 2 * kCols + c;
      float* wc = p.wc + b * 2 * kCols + c;
      if (!row) {
        for (int t = 0; t < 8; ++t) std::memset(q + 32 * t, 0, 4);
        ws[0] = ws[kCols] = wc[0] = wc[kCols] = 0;
        continue;
      }
      const int64_t s = sb0 + b;
      Codes cd;
      decode_sub<T>(row[s / Tr::kSub], static_cast<int>(s % Tr::kSub), cd);
      if constexpr (P::kSigned)
        for (int i = 0; i < 32; ++i) cd.u[i] = static_cast<uint8_t>(cd.u[i] - 128);
      for (int t = 0; t < 8; ++t) std::memcpy(q + 32 * t, cd.u + 4 * t, 4);
      ws[0] = cd.ws[0];
      ws[kCols] = cd.ws[1];
      if constexpr (P::kSigned) {
        wc[0] = cd.wm;  // (0 for both signed types)
        wc[kCols] = 0;
      } else if constexpr (P::kSplit) {
        wc[0] = half_correction<T>(cd, 0);
        wc[kCols] = half_correction<T>(cd, 1);
      } else {
        wc[0] = cd.ws[0] * Tr::kOff + cd.wm;
        wc[kCols] = 0;
      }
    }
  }
}

// s32 sums of the codes of quads [t0, t0 + n) of one decoded sub-block pq times activation
// row r's bytes, for MR rows; added into acc32 (first: overwrite).
// Without VNNI the 16-bit sums go through madd with `mul`: ones, or a sub-block's integer
// scale in every lane (kIntScales).
template <DType T, int MR>
[[gnu::always_inline]] inline void dot_quads(__m256i (&acc32)[MR], const uint8_t* pq, const int8_t* const (&a)[MR],
                                             int t0, int n, bool first, __m256i mul = _mm256_set1_epi16(1)) {
  using P = PanelTraits<T>;
  if constexpr (kVnni) {
    // Two accumulators per row, the even quads in acc32 and the odd ones in odd: vpdpbusd adds
    // into its destination, so one accumulator makes a chain of its latency (several cycles)
    // per quad, and MR = 4 such chains cannot keep two vpdpbusd a cycle busy.
    __m256i odd[MR];
#pragma GCC unroll 8
    for (int t = t0; t < t0 + n; ++t) {
      const __m256i wq = _mm256_load_si256(reinterpret_cast<const __m256i*>(pq + 32 * t));
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        int32_t a4;
        std::memcpy(&a4, a[r] + 4 * t, 4);
        const __m256i av = _mm256_set1_epi32(a4);
        if ((t - t0) % 2 == 0)
          acc32[r] = dpbusd(first && t == t0 ? _mm256_setzero_si256() : acc32[r], wq, av);
        else
          odd[r] = dpbusd(t == t0 + 1 ? _mm256_setzero_si256() : odd[r], wq, av);
      }
    }
    if (n > 1) {
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) acc32[r] = _mm256_add_epi32(acc32[r], odd[r]);
    }
    return;
  }
  for (int g = t0; g < t0 + n; g += P::kQG) {
    __m256i s16[MR];
#pragma GCC unroll 8
    for (int t = g; t < g + P::kQG; ++t) {
      const __m256i wq = _mm256_load_si256(reinterpret_cast<const __m256i*>(pq + 32 * t));
      const __m256i wu = P::kSigned ? _mm256_sign_epi8(wq, wq) : wq;
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        int32_t a4;
        std::memcpy(&a4, a[r] + 4 * t, 4);
        __m256i av = _mm256_set1_epi32(a4);
        if (P::kSigned) av = _mm256_sign_epi8(av, wq);
        const __m256i pr = _mm256_maddubs_epi16(wu, av);
        s16[r] = t == g ? pr : _mm256_add_epi16(s16[r], pr);
        keep_chain(s16[r]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256i s32 = _mm256_madd_epi16(s16[r], mul);
      acc32[r] = first && g == t0 ? s32 : _mm256_add_epi32(acc32[r], s32);
    }
  }
}

// acc[MR rows][8 cols] += activation rows r0.. (quantized) times the decoded chunk (nsb
// sub-blocks from sb0, which starts an activation scale group).
template <DType T, int MR>
void panel_kernel(const Panel& p, int64_t sb0, int64_t nsb, const QuantActs& qa, int64_t r0, float* acc_io) {
  using P = PanelTraits<T>;
  const int64_t k = qa.k, nsub = k / 32, ng = qa.groups();
  const int8_t* a0[MR];
  const float *dr[MR], *fsr[MR];
  const int32_t* s16r[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    a0[r] = qa.q + (r0 + r) * k + sb0 * 32;
    dr[r] = qa.d + (r0 + r) * ng + sb0 / P::kGroupSub;
    fsr[r] = qa.fs32 + (r0 + r) * nsub + sb0;
    s16r[r] = qa.s16 + (r0 + r) * (k / 16) + 2 * sb0;
  }
  __m256 acc[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) acc[r] = _mm256_loadu_ps(acc_io + r * kCols);
  for (int64_t b = 0; b < nsb; ++b) {
    const uint8_t* pq = p.q + b * 256;
    const float* ws = p.ws + b * 2 * kCols;
    const float* wc = p.wc + b * 2 * kCols;
    const int8_t* a[MR];
    float da[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      a[r] = a0[r] + b * 32;
      da[r] = dr[r][b / P::kGroupSub];
    }
    constexpr int halves = P::kSplit ? 2 : 1;
#pragma GCC unroll 2
    for (int h = 0; h < halves; ++h) {
      __m256i i32[MR];
      dot_quads<T, MR>(i32, pq, a, 4 * h, 8 / halves, true);
      const __m256 sv = _mm256_load_ps(ws + h * kCols);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r)
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i32[r]), _mm256_mul_ps(sv, _mm256_set1_ps(da[r])), acc[r]);
      if constexpr (!P::kSigned) {
        const __m256 cv = _mm256_load_ps(wc + h * kCols);
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
          const float sa = P::kSplit ? static_cast<float>(s16r[r][2 * b + h]) : fsr[r][b];
          acc[r] = _mm256_fnmadd_ps(cv, _mm256_set1_ps(sa * da[r]), acc[r]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) _mm256_storeu_ps(acc_io + r * kCols, acc[r]);
}

// i32 (+)= the dot products of quads [t0, t0 + n) scaled by sc (Panel::isc's vector).
template <DType T, int MR>
[[gnu::always_inline]] inline void scaled_dot(__m256i (&i32)[MR], const uint8_t* pq, const int8_t* const (&a)[MR], int t0,
                                              int n, bool first, __m256i sc) {
  if constexpr (kVnni) {
    __m256i t32[MR];
    dot_quads<T, MR>(t32, pq, a, t0, n, true);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256i m = _mm256_mullo_epi32(t32[r], sc);
      i32[r] = first ? m : _mm256_add_epi32(i32[r], m);
    }
  } else {
    dot_quads<T, MR>(i32, pq, a, t0, n, first, sc);
  }
}

// panel_kernel for kIntScales: per super-block (8 sub-blocks, one activation scale),
//   Q4_K / Q5_K: acc += da * (d * sum_j sc_j * dot_j(u, a) - dmin * sum_j m_j * sum_j(a))
//   Q6_K:        acc += da * d * sum_h sc_h * (dot_h(u, a) - 32 * sum_h(a))   (h: the 16 halves)
// with the sums over j (h) in s32 (the mins' and the offset's through madd of pairs of
// sub-blocks (halves) against the activations' sums per 32 (16)). The float tile stays in acc_io:
// it is touched once per super-block, and the registers go to the s32 sums.
template <DType T, int MR>
void panel_kernel_int(const Panel& p, int64_t sb0, int64_t nsb, const QuantActs& qa, int64_t r0, float* acc_io) {
  const int64_t k = qa.k, nsub = k / 32, ng = qa.groups();
  constexpr bool q6 = T == DType::Q6_K;
  const int8_t* a0[MR];
  const float* dr[MR];
  const int16_t* hr[MR];
  const int32_t* s16r[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    a0[r] = qa.q + (r0 + r) * k + sb0 * 32;
    dr[r] = qa.d + (r0 + r) * ng + sb0 / 8;
    hr[r] = qa.h32 + (r0 + r) * nsub + sb0;
    s16r[r] = qa.s16 + (r0 + r) * (k / 16) + 2 * sb0;
  }
  for (int64_t sb = 0; sb < nsb / 8; ++sb) {
    __m256i i32[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) i32[r] = _mm256_setzero_si256();  // (overwritten by j == 0)
    for (int j = 0; j < 8; ++j) {
      const int64_t b = 8 * sb + j;
      const int8_t* a[MR];
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) a[r] = a0[r] + b * 32;
      if constexpr (q6) {
        const __m256i* sc = reinterpret_cast<const __m256i*>(p.isc + b * 32);
        scaled_dot<T, MR>(i32, p.q + b * 256, a, 0, 4, j == 0, _mm256_load_si256(sc));
        scaled_dot<T, MR>(i32, p.q + b * 256, a, 4, 4, false, _mm256_load_si256(sc + 1));
      } else {
        const __m256i sc = _mm256_load_si256(reinterpret_cast<const __m256i*>(p.isc + b * 16));
        scaled_dot<T, MR>(i32, p.q + b * 256, a, 0, 8, j == 0, sc);
      }
    }
    const __m256 dv = _mm256_load_ps(p.sd + sb * kCols);
    if constexpr (q6) {
      const __m256i* sc2 = reinterpret_cast<const __m256i*>(p.imn + sb * 128);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const int32_t* h = s16r[r] + 16 * sb;
        __m256i o32 = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {  // |sum over 16| <= 2032 fits an int16
          const uint32_t h2 = static_cast<uint16_t>(h[2 * j]) | static_cast<uint32_t>(static_cast<uint16_t>(h[2 * j + 1])) << 16;
          o32 = _mm256_add_epi32(o32, _mm256_madd_epi16(_mm256_load_si256(sc2 + j), _mm256_set1_epi32(static_cast<int32_t>(h2))));
        }
        const __m256i tot = _mm256_sub_epi32(i32[r], _mm256_slli_epi32(o32, 5));  // offset 32
        __m256 acc = _mm256_loadu_ps(acc_io + r * kCols);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), _mm256_mul_ps(dv, _mm256_set1_ps(dr[r][sb])), acc);
        _mm256_storeu_ps(acc_io + r * kCols, acc);
      }
      continue;
    }
    const __m256i* mn = reinterpret_cast<const __m256i*>(p.imn + sb * 64);
    const __m256 mv = _mm256_load_ps(p.sm + sb * kCols);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const int16_t* h = hr[r] + 8 * sb;
      __m256i m32 = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        int32_t h2;
        std::memcpy(&h2, h + 2 * q, 4);
        m32 = _mm256_add_epi32(m32, _mm256_madd_epi16(_mm256_load_si256(mn + q), _mm256_set1_epi32(h2)));
      }
      const __m256 da = _mm256_set1_ps(dr[r][sb]);
      __m256 acc = _mm256_loadu_ps(acc_io + r * kCols);
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i32[r]), _mm256_mul_ps(dv, da), acc);
      acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m32), _mm256_mul_ps(mv, da), acc);
      _mm256_storeu_ps(acc_io + r * kCols, acc);
    }
  }
}

template <DType T>
void panel_range_of(const WeightView& w, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y) {
  const int64_t nsub = w.cols / 32;
  thread_local std::vector<uint8_t> buf;
  thread_local std::vector<float> acc;
  buf.resize(kPanelCodeBytes + 2 * kPanelScaleBytes + kPanelIscBytes + kPanelImnBytes + 2 * kPanelSdBytes + 64);
  acc.resize(static_cast<size_t>(m) * kCols);
  uint8_t* at = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t{63});
  auto part = [&at](size_t bytes) {
    uint8_t* r = at;
    at += bytes;
    return r;
  };
  Panel p{part(kPanelCodeBytes),
          reinterpret_cast<float*>(part(kPanelScaleBytes)),
          reinterpret_cast<float*>(part(kPanelScaleBytes)),
          reinterpret_cast<int16_t*>(part(kPanelIscBytes)),
          reinterpret_cast<int16_t*>(part(kPanelImnBytes)),
          reinterpret_cast<float*>(part(kPanelSdBytes)),
          reinterpret_cast<float*>(part(kPanelSdBytes))};
  for (int64_t c0 = n0; c0 < n1; c0 += kCols) {
    const int ncols = static_cast<int>(std::min<int64_t>(kCols, n1 - c0));
    std::fill(acc.begin(), acc.end(), 0.f);
    for (int64_t sb0 = 0; sb0 < nsub; sb0 += kChunkSub) {
      const int64_t nsb = std::min(kChunkSub, nsub - sb0);
      decode_panel<T>(w, c0, ncols, sb0, nsb, p);
      int64_t r0 = 0;
      if constexpr (PanelTraits<T>::kIntScales) {
        for (; r0 + kMR <= m; r0 += kMR) panel_kernel_int<T, kMR>(p, sb0, nsb, qa, r0, acc.data() + r0 * kCols);
        for (; r0 < m; ++r0) panel_kernel_int<T, 1>(p, sb0, nsb, qa, r0, acc.data() + r0 * kCols);
      } else {
        for (; r0 + kMR <= m; r0 += kMR) panel_kernel<T, kMR>(p, sb0, nsb, qa, r0, acc.data() + r0 * kCols);
        for (; r0 < m; ++r0) panel_kernel<T, 1>(p, sb0, nsb, qa, r0, acc.data() + r0 * kCols);
      }
    }
    for (int64_t r = 0; r < m; ++r) std::memcpy(y + r * w.rows + c0, acc.data() + r * kCols, ncols * sizeof(float));
  }
}

}  // namespace

void PTN_PANEL_ENTRY(const WeightView& w, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y) {
  switch (w.type) {
    case DType::Q8_0: return panel_range_of<DType::Q8_0>(w, qa, m, n0, n1, y);
    case DType::Q4_0: return panel_range_of<DType::Q4_0>(w, qa, m, n0, n1, y);
    case DType::Q5_0: return panel_range_of<DType::Q5_0>(w, qa, m, n0, n1, y);
    case DType::Q4_1: return panel_range_of<DType::Q4_1>(w, qa, m, n0, n1, y);
    case DType::Q5_1: return panel_range_of<DType::Q5_1>(w, qa, m, n0, n1, y);
    case DType::IQ4_NL: return panel_range_of<DType::IQ4_NL>(w, qa, m, n0, n1, y);
    case DType::Q4_K: return panel_range_of<DType::Q4_K>(w, qa, m, n0, n1, y);
    case DType::Q5_K: return panel_range_of<DType::Q5_K>(w, qa, m, n0, n1, y);
    case DType::Q6_K: return panel_range_of<DType::Q6_K>(w, qa, m, n0, n1, y);
    case DType::Q2_K: return panel_range_of<DType::Q2_K>(w, qa, m, n0, n1, y);
    case DType::Q3_K: return panel_range_of<DType::Q3_K>(w, qa, m, n0, n1, y);
    case DType::IQ4_XS: return panel_range_of<DType::IQ4_XS>(w, qa, m, n0, n1, y);
    case DType::MXFP4: return panel_range_of<DType::MXFP4>(w, qa, m, n0, n1, y);
    case DType::TQ1_0: return panel_range_of<DType::TQ1_0>(w, qa, m, n0, n1, y);
    case DType::TQ2_0: return panel_range_of<DType::TQ2_0>(w, qa, m, n0, n1, y);
    case DType::IQ1_S: return panel_range_of<DType::IQ1_S>(w, qa, m, n0, n1, y);
    case DType::IQ1_M: return panel_range_of<DType::IQ1_M>(w, qa, m, n0, n1, y);
    case DType::IQ2_XXS: return panel_range_of<DType::IQ2_XXS>(w, qa, m, n0, n1, y);
    case DType::IQ2_XS: return panel_range_of<DType::IQ2_XS>(w, qa, m, n0, n1, y);
    case DType::IQ2_S: return panel_range_of<DType::IQ2_S>(w, qa, m, n0, n1, y);
    case DType::IQ3_XXS: return panel_range_of<DType::IQ3_XXS>(w, qa, m, n0, n1, y);
    case DType::IQ3_S: return panel_range_of<DType::IQ3_S>(w, qa, m, n0, n1, y);
    default: fail(ErrorKind::Internal, "matmul", std::string("no AVX2 quantized panels for ") + dtype_name(w.type));
  }
}

}  // namespace ptn::mm
