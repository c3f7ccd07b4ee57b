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
#pragma once
#ifndef PTN_PANEL_DOT
#error "define PTN_PANEL_DOT and PTN_PANEL_ENTRY before including matmul_quant_panels_x86.h"
#endif
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
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
  static_assert(kVnni || kSigned || kQG * 2 * kMaxCode * 127 <= 32767, "16-bit sums could saturate");
};

// A decoded chunk of 8 weight rows.
struct Panel {
  uint8_t* q;  // [nsb][8 quads][8 cols][4 bytes]: codes (unsigned, or signed as int8)
  float* ws;   // [nsb][2 halves][8 cols]: scale of each 16-element half (equal unless Q6_K)
  float* wc;   // [nsb][2 halves][8 cols]: correction c (per sub-block in half 0, per half if split)
};

// Decodes sub-blocks [sb0, sb0 + nsb) of weight rows n0..n0+ncols-1 into p (columns >= ncols
// are zero, so they contribute nothing).
template <DType T>
void decode_panel(const WeightView& w, int64_t n0, int ncols, int64_t sb0, int64_t nsb, Panel& p) {
  using Tr = WTraits<T>;
  using P = PanelTraits<T>;
  using Block = typename Tr::Block;
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
template <DType T, int MR>
[[gnu::always_inline]] inline void dot_quads(__m256i (&acc32)[MR], const uint8_t* pq, const int8_t* const (&a)[MR],
                                             int t0, int n, bool first) {
  using P = PanelTraits<T>;
  if constexpr (kVnni) {
#pragma GCC unroll 8
    for (int t = t0; t < t0 + n; ++t) {
      const __m256i wq = _mm256_load_si256(reinterpret_cast<const __m256i*>(pq + 32 * t));
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        int32_t a4;
        std::memcpy(&a4, a[r] + 4 * t, 4);
        acc32[r] = dpbusd(first && t == t0 ? _mm256_setzero_si256() : acc32[r], wq, _mm256_set1_epi32(a4));
      }
    }
    return;
  }
  const __m256i ones = _mm256_set1_epi16(1);
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
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256i s32 = _mm256_madd_epi16(s16[r], ones);
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

template <DType T>
void panel_range_of(const WeightView& w, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y) {
  const int64_t nsub = w.cols / 32;
  thread_local std::vector<uint8_t> buf;
  thread_local std::vector<float> acc;
  const size_t qbytes = static_cast<size_t>(kChunkSub) * 256, fbytes = static_cast<size_t>(kChunkSub) * 2 * kCols * 4;
  buf.resize(qbytes + 2 * fbytes + 64);
  acc.resize(static_cast<size_t>(m) * kCols);
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t{63});
  Panel p{base, reinterpret_cast<float*>(base + qbytes), reinterpret_cast<float*>(base + qbytes + fbytes)};
  for (int64_t c0 = n0; c0 < n1; c0 += kCols) {
    const int ncols = static_cast<int>(std::min<int64_t>(kCols, n1 - c0));
    std::fill(acc.begin(), acc.end(), 0.f);
    for (int64_t sb0 = 0; sb0 < nsub; sb0 += kChunkSub) {
      const int64_t nsb = std::min(kChunkSub, nsub - sb0);
      decode_panel<T>(w, c0, ncols, sb0, nsb, p);
      int64_t r0 = 0;
      for (; r0 + kMR <= m; r0 += kMR) panel_kernel<T, kMR>(p, sb0, nsb, qa, r0, acc.data() + r0 * kCols);
      for (; r0 < m; ++r0) panel_kernel<T, 1>(p, sb0, nsb, qa, r0, acc.data() + r0 * kCols);
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
