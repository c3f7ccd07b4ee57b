// AVX-512 panel kernels for quantized weights (the prefill case, many activation rows): 32 weight
// rows at a time, a chunk of their K range decoded once into L1, multiplied with every
// activation row 4 at a time (see the panel section of matmul_avx512_internal.h).
#include "kernels/matmul_avx512_internal.h"
#include "core/error.h"

#include <vector>

namespace ptn::mm::avx512 {
namespace {

constexpr int kNR = 32;                // columns (weight rows) per panel
constexpr int64_t kQuantChunk = 512;   // K elements per decoded quantized chunk (16 KB of codes)
struct QPanel {
  uint8_t* q;   // [nsb][8][32][4]
  float* ws;    // [nsb][2][32]   (the two 16-element halves; equal unless a scale per 16)
  float* wm;    // [nsb][32]
  float* wmh;   // [nsb][32]      (the second half's min where there is a min per 16: Q2_K)
};

// Unsigned codes of sub-block `sb` of a weight row as one ymm, with its scales (see Codes). By
// default through the type's decode_sub (Q3_K, IQ4_XS, MXFP4, the ternary and the IQ codebook
// types); the types below have their own vector decoders.
template <DType T>
inline __m256i codes32(const uint8_t* row, int64_t sb, float ws[2], float& wm, float& wmh) {
  using Tr = WTraits<T>;
  const auto* b = reinterpret_cast<const typename Tr::Block*>(row) + sb / Tr::kSub;
  Codes c;
  decode_sub<T>(*b, static_cast<int>(sb % Tr::kSub), c);
  ws[0] = c.ws[0];
  ws[1] = c.ws[1];
  wm = c.wm;
  wmh = Tr::kMins == 2 ? c.wm_hi : c.wm;
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(c.u));
}
// The types with vector decoders have one min (or none) per sub-block.
template <DType T>
inline __m256i codes32(const uint8_t* row, int64_t sb, float ws[2], float& wm);

template <>
inline __m256i codes32<DType::Q8_0>(const uint8_t* row, int64_t sb, float ws[2], float& wm) {
  const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(row) + sb;
  ws[0] = ws[1] = h2f(b->d);
  wm = 0;
  return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qs)), _mm256_set1_epi8(-128));
}
template <DType T>
inline __m256i codes32_q45_0(const uint8_t* row, int64_t sb, float ws[2], float& wm) {
  constexpr bool q5 = T == DType::Q5_0;
  const uint8_t* blk = row + sb * (q5 ? sizeof(BlockQ5_0) : sizeof(BlockQ4_0));
  uint16_t dh;
  std::memcpy(&dh, blk, 2);
  ws[0] = ws[1] = h2f(dh);
  wm = 0;
  const __m128i m4 = _mm_set1_epi8(15);
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + (q5 ? 6 : 2)));
  __m256i u = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4));
  if (q5) {
    uint32_t qh;
    std::memcpy(&qh, blk + 2, 4);
    u = _mm256_mask_add_epi8(u, static_cast<__mmask32>(qh), u, _mm256_set1_epi8(16));
  }
  return u;
}
template <>
inline __m256i codes32<DType::Q4_0>(const uint8_t* row, int64_t sb, float ws[2], float& wm) {
  return codes32_q45_0<DType::Q4_0>(row, sb, ws, wm);
}
template <>
inline __m256i codes32<DType::Q5_0>(const uint8_t* row, int64_t sb, float ws[2], float& wm) {
  return codes32_q45_0<DType::Q5_0>(row, sb, ws, wm);
}
template <DType T>
inline __m256i codes32_b32(const uint8_t* row, int64_t sb, float ws[2], float& wm) {
  float d, m;
  const __m256i u = codes_b32<T>(row + sb * sizeof(typename WTraits<T>::Block), d, m);
  ws[0] = ws[1] = d;
  wm = -m;  // x = d u + m = d u - wm
  return u;
}
template <>
inline __m256i codes32<DType::Q4_1>(const uint8_t* row, int64_t sb, float ws[2], float& wm) {
  return codes32_b32<DType::Q4_1>(row, sb, ws, wm);
}
template <>
inline __m256i codes32<DType::Q5_1>(const uint8_t* row, int64_t sb, float ws[2], float& wm) {
  return codes32_b32<DType::Q5_1>(row, sb, ws, wm);
}
template <>
inline __m256i codes32<DType::IQ4_NL>(const uint8_t* row, int64_t sb, float ws[2], float& wm) {
  return codes32_b32<DType::IQ4_NL>(row, sb, ws, wm);
}
template <DType T>
inline __m256i codes32_q45_k(const uint8_t* row, int64_t sb, float ws[2], float& wm) {
  constexpr bool q5 = T == DType::Q5_K;
  const uint8_t* blk = row + (sb / 8) * (q5 ? sizeof(BlockQ5K) : sizeof(BlockQ4K));
  const int s = static_cast<int>(sb % 8);
  uint16_t dh, mh;
  std::memcpy(&dh, blk, 2);
  std::memcpy(&mh, blk + 2, 2);
  uint8_t sc, mn;
  unpack_scale_min_k4(blk + 4, s, sc, mn);
  ws[0] = ws[1] = h2f(dh) * sc;
  wm = h2f(mh) * mn;
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + (q5 ? 48 : 16) + 32 * (s / 2)));
  __m256i u = _mm256_and_si256(s & 1 ? _mm256_srli_epi16(raw, 4) : raw, _mm256_set1_epi8(15));
  if (q5) {
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16));
    u = _mm256_mask_add_epi8(u, _mm256_test_epi8_mask(qh, _mm256_set1_epi8(static_cast<char>(1 << s))), u,
                             _mm256_set1_epi8(16));
  }
  return u;
}
template <>
inline __m256i codes32<DType::Q4_K>(const uint8_t* row, int64_t sb, float ws[2], float& wm) {
  return codes32_q45_k<DType::Q4_K>(row, sb, ws, wm);
}
template <>
inline __m256i codes32<DType::Q5_K>(const uint8_t* row, int64_t sb, float ws[2], float& wm) {
  return codes32_q45_k<DType::Q5_K>(row, sb, ws, wm);
}
template <>
inline __m256i codes32<DType::Q6_K>(const uint8_t* row, int64_t sb, float ws[2], float& wm) {
  const BlockQ6K* b = reinterpret_cast<const BlockQ6K*>(row) + sb / 8;
  const int s = static_cast<int>(sb % 8), h = s / 4, q = s % 4;
  const float d = h2f(b->d);
  ws[0] = d * b->scales[2 * s];
  ws[1] = d * b->scales[2 * s + 1];
  wm = 0;
  const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->ql + 64 * h + 32 * (q % 2)));
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh + 32 * h));
  const __m256i lo = _mm256_and_si256(q / 2 ? _mm256_srli_epi16(l, 4) : l, _mm256_set1_epi8(15));
  // bits 2q..2q+1 of qh to bits 4..5: shift left by 4 - 2q (q < 2) or right by 2q - 4.
  __m256i hb;
  switch (q) {
    case 0: hb = _mm256_slli_epi16(qh, 4); break;
    case 1: hb = _mm256_slli_epi16(qh, 2); break;
    case 2: hb = qh; break;
    default: hb = _mm256_srli_epi16(qh, 2); break;
  }
  return _mm256_or_si256(lo, _mm256_and_si256(hb, _mm256_set1_epi8(0x30)));
}

// 16 columns x 8 dwords -> 8 x 16: on entry z[i] holds slots 2i and 2i + 1 (8 dwords each), on
// return z[t] holds dword t of the 16 columns. Three stages each swap one bit of the register
// index with the same bit of the lane index (slot bits s3 s2 s1 | s0 t2 t1 t0 become
// t2 t1 t0 | s0 s3 s2 s1), so column c must sit in slot transpose_slot(c) for lane c to hold it.
inline int transpose_slot(int c) { return ((c & 7) << 1) | (c >> 3); }

inline void transpose_16x8(__m512i z[8]) {
  struct Idx {
    alignas(64) int32_t lo[3][16], hi[3][16];
    Idx() {
      for (int b = 0; b < 3; ++b)
        for (int l = 0; l < 16; ++l) {
          const bool set = (l >> b) & 1;
          lo[b][l] = set ? 16 + (l & ~(1 << b)) : l;
          hi[b][l] = set ? 16 + l : (l | (1 << b));
        }
    }
  };
  static const Idx idx;
#pragma GCC unroll 3
  for (int b = 2; b >= 0; --b) {
    const __m512i lo = _mm512_load_si512(idx.lo[b]), hi = _mm512_load_si512(idx.hi[b]);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      if ((i >> b) & 1) continue;
      const int j = i | (1 << b);
      const __m512i x = _mm512_permutex2var_epi32(z[i], lo, z[j]);
      z[j] = _mm512_permutex2var_epi32(z[i], hi, z[j]);
      z[i] = x;
    }
  }
}

// The types without a vector decoder above, decoded through decode_sub.
template <DType T>
constexpr bool kDecodedBySub = !(T == DType::Q8_0 || T == DType::Q4_0 || T == DType::Q5_0 || T == DType::Q4_1 ||
                                 T == DType::Q5_1 || T == DType::IQ4_NL || T == DType::Q4_K || T == DType::Q5_K ||
                                 T == DType::Q6_K);

// Decodes sub-blocks [sb0, sb0 + nsb) of weight rows n0..n0+ncols-1 into p (columns >= ncols
// are zero).
template <DType T>
void decode_qpanel(const WeightView& w, int64_t n0, int ncols, int64_t sb0, int64_t nsb, QPanel& p) {
  alignas(64) uint32_t tmp[kNR][8];  // [slot][dword]
  for (int64_t b = 0; b < nsb; ++b) {
    float* ws = p.ws + b * 2 * kNR;
    float* wm = p.wm + b * kNR;
    float* wmh = p.wmh + b * kNR;
    for (int c = 0; c < kNR; ++c) {
      uint32_t* slot = tmp[(c & 16) | transpose_slot(c & 15)];
      if (c < ncols) {
        const uint8_t* row = static_cast<const uint8_t*>(w.data) + (n0 + c) * w.row_stride;
        float s2[2], m1, m2 = 0;
        __m256i u;
        if constexpr (kDecodedBySub<T>) u = codes32<T>(row, sb0 + b, s2, m1, m2);
        else u = codes32<T>(row, sb0 + b, s2, m1);
        _mm256_store_si256(reinterpret_cast<__m256i*>(slot), u);
        ws[c] = s2[0];
        ws[kNR + c] = s2[1];
        wm[c] = m1;
        wmh[c] = m2;
      } else {
        _mm256_store_si256(reinterpret_cast<__m256i*>(slot), _mm256_setzero_si256());
        ws[c] = ws[kNR + c] = wm[c] = wmh[c] = 0;
      }
    }
    // tmp[slot][quad] -> q[quad][col], 16 columns at a time.
    uint32_t* q = reinterpret_cast<uint32_t*>(p.q + b * 1024);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m512i z[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) z[i] = _mm512_load_si512(tmp[16 * h + 2 * i]);
      transpose_16x8(z);
#pragma GCC unroll 8
      for (int t = 0; t < 8; ++t) _mm512_store_si512(q + t * kNR + 16 * h, z[t]);
    }
  }
}

// The same from interleaved weights (WeightLayout::X16; n0 and ncols multiples of 16): each
// 16-column half of the panel is one tile's codes (Q4_K: nibbles split) and scales.
template <DType T>
void decode_qpanel_x16(const WeightView& w, int64_t n0, int ncols, int64_t sb0, int64_t nsb, QPanel& p) {
  constexpr bool k4 = T == DType::Q4_K;
  constexpr size_t tile_bytes = k4 ? kQ4KTile : kQ80Tile;
  constexpr int64_t subs = k4 ? 8 : 2;  // 32-column sub-blocks per tile
  const int64_t tiles_per_group = w.cols / (32 * subs);
  const __m512i m4 = _mm512_set1_epi8(15);
  for (int c = 0; c < kNR / kX16Rows; ++c) {
    const uint8_t* group = static_cast<const uint8_t*>(w.data) +
                           static_cast<size_t>((n0 / kX16Rows + c) * tiles_per_group) * tile_bytes;
    for (int64_t b = 0; b < nsb; ++b) {
      uint8_t* q = p.q + b * 1024 + 64 * c;
      float* ws = p.ws + b * 2 * kNR + 16 * c;
      float* wm = p.wm + b * kNR + 16 * c;
      if (16 * c >= ncols) {
#pragma GCC unroll 8
        for (int t = 0; t < 8; ++t) _mm512_store_si512(q + t * 128, _mm512_setzero_si512());
        _mm512_storeu_ps(ws, _mm512_setzero_ps());
        _mm512_storeu_ps(ws + kNR, _mm512_setzero_ps());
        _mm512_storeu_ps(wm, _mm512_setzero_ps());
        continue;
      }
      const int64_t s = sb0 + b, j = s % subs;
      const uint8_t* tile = group + static_cast<size_t>(s / subs) * tile_bytes;
      const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + (k4 ? 0 : 32 * j))));
      if constexpr (k4) {
        const uint8_t* codes = tile + 256 + 512 * (j / 2);
#pragma GCC unroll 8
        for (int t = 0; t < 8; ++t) {
          const __m512i raw = _mm512_loadu_si512(codes + 64 * t);
          _mm512_store_si512(q + t * 128, _mm512_and_si512(j % 2 ? _mm512_srli_epi16(raw, 4) : raw, m4));
        }
        __m128i sc[8], mn[8];
        x16_scales(tile, sc, mn);
        const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + 32)));
        const __m512 sv = x16_float(sc[j], d);
        _mm512_storeu_ps(ws, sv);
        _mm512_storeu_ps(ws + kNR, sv);
        _mm512_storeu_ps(wm, x16_float(mn[j], dmin));
      } else {
#pragma GCC unroll 8
        for (int t = 0; t < 8; ++t) _mm512_store_si512(q + t * 128, _mm512_loadu_si512(tile + 64 + 512 * j + 64 * t));
        _mm512_storeu_ps(ws, d);
        _mm512_storeu_ps(ws + kNR, d);
        _mm512_storeu_ps(wm, _mm512_setzero_ps());
      }
    }
  }
}

// ai[r][0..1] += the VNNI dot products of NQ quads (4 codes, starting at quad q0) of one
// decoded sub-block pq (32 columns) with activation row r's bytes at sub-block b.
template <int MR, int NQ>
[[gnu::always_inline]] inline void dot_quads(__m512i (&ai)[MR][2], const uint8_t* pq, const int8_t* const (&a)[MR],
                                             int64_t b, int q0) {
#pragma GCC unroll 8
  for (int t = q0; t < q0 + NQ; ++t) {
    const __m512i w0 = _mm512_load_si512(pq + t * 128);
    const __m512i w1 = _mm512_load_si512(pq + t * 128 + 64);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512i av = _mm512_set1_epi32(load4(a[r] + b * 32 + 4 * t));
      ai[r][0] = _mm512_dpbusd_epi32(ai[r][0], w0, av);
      ai[r][1] = _mm512_dpbusd_epi32(ai[r][1], w1, av);
    }
  }
}

// acc[MR rows][32 cols] += x_q rows r0.. · panel chunk (sub-blocks sb0.. of the row, nsb of them,
// starting on an activation group boundary). OFF: the codes' constant offset; SPLIT: per-16
// scales (Q6_K, Q2_K, Q3_K, ...); MINS: 1 a min per sub-block (Q4_K/Q5_K), 2 a min per 16 (Q2_K).
template <int MR, int OFF, bool SPLIT, int MINS>
void qpanel_kernel(const QPanel& p, int64_t sb0, int64_t nsb, const QuantActs& qa, int64_t r0, float* acc_out) {
  const int64_t k = qa.k, nsub = k / 32, gsub = qa.group / 32, ng = qa.groups();
  // Per-row pointers at this chunk's first sub-block / group.
  const int8_t* a[MR];
  const float *dr[MR], *fsr[MR];
  const int32_t *s32r[MR], *s16r[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    a[r] = qa.q + (r0 + r) * k + sb0 * 32;
    dr[r] = qa.d + (r0 + r) * ng + sb0 / gsub;
    fsr[r] = qa.fs32 + (r0 + r) * nsub + sb0;
    s32r[r] = qa.s32 + (r0 + r) * nsub + sb0;
    s16r[r] = qa.s16 + (r0 + r) * (k / 16) + 2 * sb0;
  }
  __m512 acc[MR][2];
  load_tile<MR>(acc, acc_out);
  for (int64_t g0 = 0; g0 < nsb; g0 += gsub) {
    __m512 tmp[MR][2];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) tmp[r][0] = tmp[r][1] = _mm512_setzero_ps();
    for (int64_t b = g0; b < g0 + gsub; ++b) {
      const uint8_t* pq = p.q + b * 1024;
      const float* ws = p.ws + b * 2 * kNR;
      constexpr int halves = SPLIT ? 2 : 1;
#pragma GCC unroll 16
      for (int h = 0; h < halves; ++h) {
        __m512i ai[MR][2];
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
          int32_t init = 0;
          if (OFF) {
            init = SPLIT ? -OFF * s16r[r][2 * b + h] : -OFF * s32r[r][b];
          }
          ai[r][0] = ai[r][1] = _mm512_set1_epi32(init);
        }
        if constexpr (SPLIT) dot_quads<MR, 4>(ai, pq, a, b, 4 * h);
        else dot_quads<MR, 8>(ai, pq, a, b, 0);
        const __m512 s0 = _mm512_load_ps(ws + h * kNR), s1 = _mm512_load_ps(ws + h * kNR + 16);
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
          tmp[r][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai[r][0]), s0, tmp[r][0]);
          tmp[r][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai[r][1]), s1, tmp[r][1]);
        }
      }
      if constexpr (MINS == 1) {
        const __m512 m0 = _mm512_load_ps(p.wm + b * kNR), m1 = _mm512_load_ps(p.wm + b * kNR + 16);
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
          const __m512 sv = _mm512_set1_ps(fsr[r][b]);
          tmp[r][0] = _mm512_fnmadd_ps(sv, m0, tmp[r][0]);
          tmp[r][1] = _mm512_fnmadd_ps(sv, m1, tmp[r][1]);
        }
      } else if constexpr (MINS == 2) {
        const __m512 m0 = _mm512_load_ps(p.wm + b * kNR), m1 = _mm512_load_ps(p.wm + b * kNR + 16);
        const __m512 h0 = _mm512_load_ps(p.wmh + b * kNR), h1 = _mm512_load_ps(p.wmh + b * kNR + 16);
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
          const __m512 lo = _mm512_set1_ps(static_cast<float>(s16r[r][2 * b]));
          const __m512 hi = _mm512_set1_ps(static_cast<float>(s16r[r][2 * b + 1]));
          tmp[r][0] = _mm512_fnmadd_ps(hi, h0, _mm512_fnmadd_ps(lo, m0, tmp[r][0]));
          tmp[r][1] = _mm512_fnmadd_ps(hi, h1, _mm512_fnmadd_ps(lo, m1, tmp[r][1]));
        }
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 da = _mm512_set1_ps(*dr[r]++);
      acc[r][0] = _mm512_fmadd_ps(tmp[r][0], da, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(tmp[r][1], da, acc[r][1]);
    }
  }
  store_tile<MR>(acc_out, acc);
}

// The same for 32-element types without mins (Q8_0 / Q4_0 / Q5_0 / IQ4_NL: one activation
// scale per sub-block, no split scales; Q4_1 / Q5_1 take qpanel_kernel for their mins): each sub-block's int32 sums go straight into the f32 accumulators,
// acc += cvt(sum) * (ws * da), one FMA per 8 dpbusd instead of two plus a zeroed temporary.
template <int MR, int OFF>
void qpanel_kernel_b32(const QPanel& p, int64_t sb0, int64_t nsb, const QuantActs& qa, int64_t r0, float* acc_out) {
  const int64_t k = qa.k, nsub = k / 32;
  const int8_t* a[MR];
  const float* dr[MR];
  const int32_t* s32r[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    a[r] = qa.q + (r0 + r) * k + sb0 * 32;
    dr[r] = qa.d + (r0 + r) * nsub + sb0;
    s32r[r] = qa.s32 + (r0 + r) * nsub + sb0;
  }
  __m512 acc[MR][2];
  load_tile<MR>(acc, acc_out);
  for (int64_t b = 0; b < nsb; ++b) {
    const uint8_t* pq = p.q + b * 1024;
    __m512i ai[MR][2];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) ai[r][0] = ai[r][1] = _mm512_set1_epi32(-OFF * s32r[r][b]);
    dot_quads<MR, 8>(ai, pq, a, b, 0);
    const __m512 s0 = _mm512_load_ps(p.ws + b * 2 * kNR), s1 = _mm512_load_ps(p.ws + b * 2 * kNR + 16);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 da = _mm512_set1_ps(dr[r][b]);
      acc[r][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai[r][0]), _mm512_mul_ps(s0, da), acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai[r][1]), _mm512_mul_ps(s1, da), acc[r][1]);
    }
  }
  store_tile<MR>(acc_out, acc);
}

constexpr int kQMR = 4;  // activation rows per quantized micro-tile

template <DType T>
void qpanel_range_of(const WeightView& w, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y) {
  using Tr = WTraits<T>;
  constexpr int off = Tr::kOff;
  constexpr bool split = Tr::kSplit;
  constexpr int mins = Tr::kMins;
  const int64_t k = w.cols, nsub = k / 32, csub = kQuantChunk / 32;
  thread_local std::vector<uint8_t, std::allocator<uint8_t>> qbuf;
  thread_local std::vector<float> fbuf, acc;
  qbuf.resize(static_cast<size_t>(csub) * 1024 + 64);
  fbuf.resize(static_cast<size_t>(csub) * 4 * kNR + 16);
  acc.resize(static_cast<size_t>(m) * kNR);
  uint8_t* qa64 = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(qbuf.data()) + 63) & ~uintptr_t{63});
  float* fa64 = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(fbuf.data()) + 63) & ~uintptr_t{63});
  QPanel p{qa64, fa64, fa64 + csub * 2 * kNR, fa64 + csub * 3 * kNR};
  for (int64_t c0 = n0; c0 < n1; c0 += kNR) {
    const int ncols = static_cast<int>(std::min<int64_t>(kNR, n1 - c0));
    std::fill(acc.begin(), acc.end(), 0.f);
    for (int64_t sb0 = 0; sb0 < nsub; sb0 += csub) {
      const int64_t nsb = std::min(csub, nsub - sb0);
      const bool last_k = sb0 + csub >= nsub;
      const int64_t nc0 = last_k ? c0 + kNR : c0, nsb0 = last_k ? 0 : sb0 + csub;
      const int64_t next_bytes = static_cast<int64_t>(row_bytes(T, std::min(csub, nsub - nsb0) * 32));
      constexpr bool x16_type = T == DType::Q4_K || T == DType::Q8_0;
      const bool x16 = x16_type && w.layout == WeightLayout::X16;
      if constexpr (x16_type) {
        if (x16) decode_qpanel_x16<T>(w, c0, ncols, sb0, nsb, p);
        else decode_qpanel<T>(w, c0, ncols, sb0, nsb, p);
      } else {
        decode_qpanel<T>(w, c0, ncols, sb0, nsb, p);
      }
      // Interleaved: the next chunk is a run of tiles in each of (up to) two 16-row groups.
      // (Per 32-column sub-block, 16 rows: the tiles of Q4_K hold 8 of them, of Q8_0 2.)
      const int64_t tile = static_cast<int64_t>(kX16Rows * traits(T).block_bytes), subs = Tr::kSub;
      const int64_t group_bytes = w.cols / (32 * subs) * tile;
      NextChunkPrefetch pf = x16 ? NextChunkPrefetch(static_cast<const uint8_t*>(w.data) +
                                                         (nc0 < n1 ? nc0 / kX16Rows * group_bytes + nsb0 / subs * tile : 0),
                                                     std::min<int64_t>(kNR, n1 - nc0) / kX16Rows, group_bytes,
                                                     next_bytes * kX16Rows, m / kQMR)
                                 : NextChunkPrefetch(w, nc0, n1, static_cast<int64_t>(row_bytes(T, nsb0 * 32)), next_bytes,
                                                     m / kQMR);
      int64_t r0 = 0;
      if constexpr (Tr::kSub == 1 && !mins) {
        for (; r0 + kQMR <= m; r0 += kQMR) {
          pf.step();
          qpanel_kernel_b32<kQMR, off>(p, sb0, nsb, qa, r0, acc.data() + r0 * kNR);
        }
        for (; r0 < m; ++r0) qpanel_kernel_b32<1, off>(p, sb0, nsb, qa, r0, acc.data() + r0 * kNR);
      } else {
        for (; r0 + kQMR <= m; r0 += kQMR) {
          pf.step();
          qpanel_kernel<kQMR, off, split, mins>(p, sb0, nsb, qa, r0, acc.data() + r0 * kNR);
        }
        for (; r0 < m; ++r0) qpanel_kernel<1, off, split, mins>(p, sb0, nsb, qa, r0, acc.data() + r0 * kNR);
      }
    }
    for (int64_t r = 0; r < m; ++r) std::memcpy(y + r * w.rows + c0, acc.data() + r * kNR, ncols * sizeof(float));
  }
}

}  // namespace

void qpanel_range(const WeightView& w, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y) {
  switch (w.type) {
    case DType::Q8_0: return qpanel_range_of<DType::Q8_0>(w, qa, m, n0, n1, y);
    case DType::Q4_0: return qpanel_range_of<DType::Q4_0>(w, qa, m, n0, n1, y);
    case DType::Q5_0: return qpanel_range_of<DType::Q5_0>(w, qa, m, n0, n1, y);
    case DType::Q4_1: return qpanel_range_of<DType::Q4_1>(w, qa, m, n0, n1, y);
    case DType::Q5_1: return qpanel_range_of<DType::Q5_1>(w, qa, m, n0, n1, y);
    case DType::IQ4_NL: return qpanel_range_of<DType::IQ4_NL>(w, qa, m, n0, n1, y);
    case DType::Q4_K: return qpanel_range_of<DType::Q4_K>(w, qa, m, n0, n1, y);
    case DType::Q5_K: return qpanel_range_of<DType::Q5_K>(w, qa, m, n0, n1, y);
    case DType::Q6_K: return qpanel_range_of<DType::Q6_K>(w, qa, m, n0, n1, y);
    case DType::Q2_K: return qpanel_range_of<DType::Q2_K>(w, qa, m, n0, n1, y);
    case DType::Q3_K: return qpanel_range_of<DType::Q3_K>(w, qa, m, n0, n1, y);
    case DType::IQ4_XS: return qpanel_range_of<DType::IQ4_XS>(w, qa, m, n0, n1, y);
    case DType::MXFP4: return qpanel_range_of<DType::MXFP4>(w, qa, m, n0, n1, y);
    case DType::TQ1_0: return qpanel_range_of<DType::TQ1_0>(w, qa, m, n0, n1, y);
    case DType::TQ2_0: return qpanel_range_of<DType::TQ2_0>(w, qa, m, n0, n1, y);
    case DType::IQ1_S: return qpanel_range_of<DType::IQ1_S>(w, qa, m, n0, n1, y);
    case DType::IQ1_M: return qpanel_range_of<DType::IQ1_M>(w, qa, m, n0, n1, y);
    case DType::IQ2_XXS: return qpanel_range_of<DType::IQ2_XXS>(w, qa, m, n0, n1, y);
    case DType::IQ2_XS: return qpanel_range_of<DType::IQ2_XS>(w, qa, m, n0, n1, y);
    case DType::IQ2_S: return qpanel_range_of<DType::IQ2_S>(w, qa, m, n0, n1, y);
    case DType::IQ3_XXS: return qpanel_range_of<DType::IQ3_XXS>(w, qa, m, n0, n1, y);
    case DType::IQ3_S: return qpanel_range_of<DType::IQ3_S>(w, qa, m, n0, n1, y);
    default: fail(ErrorKind::Internal, "matmul", "no quantized panels for this type");
  }
}

}  // namespace ptn::mm::avx512
