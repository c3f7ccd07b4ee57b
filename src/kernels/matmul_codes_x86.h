// Internal to kernels/matmul_avx2.cpp and kernels/matmul_rows_avx512.cpp (the panels of
// matmul_quant_panels_x86.h take only keep_chain from here): the row kernels (the
// decode case: one weight row at a time, dotted with up to R activation rows while it sits in
// registers) of Q2_K, Q3_K, IQ4_XS, MXFP4, TQ1_0 and TQ2_0 with AVX2 integer dot products. Internal linkage,
// as matmul_generic.h: each including file compiles its own copy with its own instruction set
// flags. (Their panels, the prefill case, are matmul_quant_panels_x86.h's, through decode_sub.)
//
// Q2_K / Q3_K: codes unsigned (Q2_K 0..3; Q3_K 0..7, the stored value plus 4), maddubs with the
// activations cannot saturate (2 * 7 * 127 < 32767), then madd with the 16-element halves' integer
// scales into s32 for the whole super-block; Q3_K's offset 4 and Q2_K's mins come back through
// the activation sums over 16 (QuantActs::s16), one integer dot product of 16 per super-block.
// IQ4_XS / MXFP4: the nibbles index the type's signed levels (pshufb), dotted by the sign trick
// (maddubs(|q|, sign(a, q)): |q| <= 127, so 2 * 127 * 127 < 32767); IQ4_XS's integer sub-block
// scale multiplies in the madd, MXFP4's power-of-two scale in f32 per block.
#pragma once
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "kernels/matmul_internal.h"

namespace ptn::mm {
namespace {

// Keeps an integer sum a chain of adds: gcc otherwise reassociates the unrolled adds into a tree
// whose operands are live at once, more ymm values than there are registers (objdump: with 8
// rows, row_q45_k<8>'s sub-block products went to the stack; the Q4_K panel loop of
// matmul_quant_panels_x86.h spilled 24 of its 16-bit sums).
[[gnu::always_inline]] inline void keep_chain(__m256i& v) { asm("" : "+x"(v)); }

// The sum of the 8 lanes of v.
inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline __m256i codes_load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// The 16 signed scales (sc - 32) of a Q3_K super-block as int16, from its packed scales[12]
// (quant.h's unpack_q3_k_scales, four scales per 32-bit word).
inline __m256i q3_k_scales16(const uint8_t* p) {
  uint32_t a0, a1, a2;
  std::memcpy(&a0, p, 4);
  std::memcpy(&a1, p + 4, 4);
  std::memcpy(&a2, p + 8, 4);
  const uint32_t lo = 0x0f0f0f0f, hi = 0x03030303;
  const __m128i v = _mm_set_epi32(static_cast<int>(((a1 >> 4) & lo) | (((a2 >> 6) & hi) << 4)),
                                  static_cast<int>(((a0 >> 4) & lo) | (((a2 >> 4) & hi) << 4)),
                                  static_cast<int>((a1 & lo) | (((a2 >> 2) & hi) << 4)),
                                  static_cast<int>((a0 & lo) | ((a2 & hi) << 4)));
  return _mm256_cvtepi8_epi16(_mm_sub_epi8(v, _mm_set1_epi8(32)));
}

// Sixteen int32 sums s16[0..16) as int16, in order (|s| <= 16 * 127).
inline __m256i sums16_as_i16(const int32_t* s16) {
  const __m256i p = _mm256_packs_epi32(codes_load32(s16), codes_load32(s16 + 8));
  return _mm256_permute4x64_epi64(p, 0xD8);
}

// Q2_K (Q3 false) / Q3_K (Q3 true). RA: the including file's row arguments (a(r), d(r), s16(r)).
template <int R, bool Q3, class RA>
void row_q23_k(const void* row, int64_t k, const RA& ra, float* out) {
  using Block = std::conditional_t<Q3, BlockQ3K, BlockQ2K>;
  const Block* b = static_cast<const Block*>(row);
  const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  // Sub-block s's scales: dword s of the 16 int16 scales holds (sc[2s], sc[2s+1]); spread word 0
  // over the low 128 bits and word 1 over the high 128 bits.
  const __m256i spread = _mm256_set_epi8(3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2,
                                         1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0);
  __m256 acc[R], corr[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = corr[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k / 256; ++i) {
    const Block& blk = b[i];
    _mm_prefetch(reinterpret_cast<const char*>(&blk) + 2048, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(&blk) + 2048 + 64, _MM_HINT_T0);
    // The halves' integer scales (Q3_K: sc - 32; Q2_K: the low nibbles) and what multiplies the
    // activation sums over 16 (Q3_K: the scales, for the offset 4; Q2_K: the mins, high nibbles).
    __m256i sc16, cw16;
    if constexpr (Q3) {
      sc16 = cw16 = q3_k_scales16(blk.scales);
    } else {
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
      sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(raw, _mm_set1_epi8(15)));
      cw16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(15)));
    }
    __m256i hm = _mm256_setzero_si256();
    if constexpr (Q3) hm = codes_load32(blk.hmask);
    __m256i isum[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i q = codes_load32(blk.qs + 32 * h);
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const int s = 4 * h + c;  // sub-block: elements 32 s .. 32 s + 31
        __m256i u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * c), m3);
        if constexpr (Q3)  // bit s of each hmask byte as 4
          u = _mm256_or_si256(u, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, s), one), 2));
        const __m256i scs = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(s)), spread);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m256i p = _mm256_maddubs_epi16(u, codes_load32(ra.a(r) + i * 256 + 32 * s));
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(p, scs));
        }
      }
    }
    const float d = fp16_to_f32(blk.d);
    float cf = 4.f * d;  // Q3_K: the offset 4 times d; Q2_K: dmin
    if constexpr (!Q3) cf = fp16_to_f32(blk.dmin);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float da = ra.d(r)[i];
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_set1_ps(d * da), acc[r]);
      const __m256i o = _mm256_madd_epi16(cw16, sums16_as_i16(ra.s16(r) + i * 16));
      corr[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(o), _mm256_set1_ps(cf * da), corr[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) out[r] = hsum8(_mm256_sub_ps(acc[r], corr[r]));
}

// 32 nibbles (16 bytes: elements j and j + 16 in byte j) as the type's signed levels.
inline __m256i table_levels(const uint8_t* qs, __m256i levels) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m4 = _mm_set1_epi8(15);
  const __m256i u = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4));
  return _mm256_shuffle_epi8(levels, u);
}
// 16 s16 pair sums of q * a for signed q (|q| <= 127) and activations a.
inline __m256i dot_signed16(__m256i q, __m256i a) {
  return _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q));
}

template <int R, class RA>
void row_iq4_xs(const void* row, int64_t k, const RA& ra, float* out) {
  const BlockIQ4XS* b = static_cast<const BlockIQ4XS*>(row);
  const __m256i levels = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  __m256 acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k / 256; ++i) {
    const BlockIQ4XS& blk = b[i];
    _mm_prefetch(reinterpret_cast<const char*>(&blk) + 2048, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(&blk) + 2048 + 64, _MM_HINT_T0);
    __m256i isum[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const __m256i q = table_levels(blk.qs + 16 * s, levels);
      const __m256i ls = _mm256_set1_epi16(static_cast<int16_t>(iq4_xs_scale(blk.scales_h, blk.scales_l, s) - 32));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(dot_signed16(q, codes_load32(ra.a(r) + i * 256 + 32 * s)), ls));
    }
    const float d = fp16_to_f32(blk.d);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_set1_ps(d * ra.d(r)[i]), acc[r]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) out[r] = hsum8(acc[r]);
}

template <int R, class RA>
void row_mxfp4(const void* row, int64_t k, const RA& ra, float* out) {
  const BlockMXFP4* b = static_cast<const BlockMXFP4*>(row);
  const __m256i levels = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values)));
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k / 32; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(b + i) + 2048, _MM_HINT_T0);
    const __m256i q = table_levels(b[i].qs, levels);
    const float dw = mxfp4_scale(b[i].e);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256i p = _mm256_madd_epi16(dot_signed16(q, codes_load32(ra.a(r) + i * 32)), ones);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * ra.d(r)[i]), acc[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) out[r] = hsum8(acc[r]);
}

// TQ2_0 (Q1 false) / TQ1_0 (Q1 true): the trits t become signed codes t - 1 in {-1, 0, 1}, dotted
// by the sign trick; the pair sums (|p| <= 2 * 127) of the 8 sub-blocks add up in int16 lanes
// (<= 2032) before one madd per super-block. TQ2_0's trits are crumbs as Q2_K's codes; TQ1_0's
// trit n of byte b is ((uint8_t)(b * 3^n) * 3) >> 8, computed per 16-bit lane for the even and
// the odd bytes: mullo by 3^n (the low byte is b * 3^n mod 256; the odd byte's product falls off
// in the shift), shifted to the high byte, mulhi by 3.
inline __m256i tq1_trits(__m256i x, __m256i p) {
  const __m256i three = _mm256_set1_epi16(3);
  const __m256i e = _mm256_mulhi_epu16(_mm256_slli_epi16(_mm256_mullo_epi16(x, p), 8), three);
  const __m256i o = _mm256_mulhi_epu16(_mm256_slli_epi16(_mm256_mullo_epi16(_mm256_srli_epi16(x, 8), p), 8), three);
  return _mm256_or_si256(e, _mm256_slli_epi16(o, 8));
}

template <int R, bool Q1, class RA>
void row_tq(const void* row, int64_t k, const RA& ra, float* out) {
  using Block = std::conditional_t<Q1, BlockTQ1_0, BlockTQ2_0>;
  const Block* b = static_cast<const Block*>(row);
  const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  // TQ1_0's multipliers per 16-bit lane: sub-blocks 0..4 take trit s of qs[0..31]; 5 and 6 trits
  // 0/1 and 2/3 of qs[32..47] (low / high 128 bits); 7 trit 4 of qs[32..47], then trit i / 4 of
  // qh[i % 4] for the 16 elements 240 + i (bytes 2j and 2j + 1 share 3^(j / 2)).
  const __m256i pw[8] = {_mm256_set1_epi16(1), _mm256_set1_epi16(3), _mm256_set1_epi16(9), _mm256_set1_epi16(27),
                         _mm256_set1_epi16(81),
                         _mm256_set_m128i(_mm_set1_epi16(3), _mm_set1_epi16(1)),
                         _mm256_set_m128i(_mm_set1_epi16(27), _mm_set1_epi16(9)),
                         _mm256_set_m128i(_mm_set_epi16(27, 27, 9, 9, 3, 3, 1, 1), _mm_set1_epi16(81))};
  __m256 acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k / 256; ++i) {
    const Block& blk = b[i];
    _mm_prefetch(reinterpret_cast<const char*>(&blk) + 2048, _MM_HINT_T0);
    __m256i isum[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
    __m256i q0, q1, x5, x7;
    if constexpr (Q1) {
      q0 = codes_load32(blk.qs);
      const __m128i tail = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs + 32));
      uint32_t qh;
      std::memcpy(&qh, blk.qh, 4);
      x5 = _mm256_set_m128i(tail, tail);
      x7 = _mm256_set_m128i(_mm_set1_epi32(static_cast<int>(qh)), tail);
    } else {
      q0 = codes_load32(blk.qs);
      q1 = codes_load32(blk.qs + 32);
    }
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      __m256i t;
      if constexpr (Q1)
        t = tq1_trits(s < 5 ? q0 : s < 7 ? x5 : x7, pw[s]);
      else
        t = _mm256_and_si256(_mm256_srli_epi16(s < 4 ? q0 : q1, 2 * (s % 4)), m3);
      const __m256i w = _mm256_sub_epi8(t, one);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        isum[r] = _mm256_add_epi16(isum[r], dot_signed16(w, codes_load32(ra.a(r) + i * 256 + 32 * s)));
    }
    const float d = fp16_to_f32(blk.d);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(isum[r], ones16)), _mm256_set1_ps(d * ra.d(r)[i]), acc[r]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) out[r] = hsum8(acc[r]);
}

// The codebook types IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S. Sub-block s of a block
// as 32 signed codes q and the odd integer scales L0, L1 of its halves, x = d * kIqScale * L * q:
// the groups gathered from the codebook (a 64-bit entry of 8 per IQ1/IQ2 group, a 32-bit entry of
// 4 per IQ3 group); IQ2/IQ3 signed by a byte mask expanded from the 32 sign bits, IQ1 as
// q = 8 * value + the delta's sign, per sub-block (IQ1_S) or group (IQ1_M).
inline __m256i sign_mask32(uint32_t bits) {  // byte i all ones where bit i of bits is set
  const __m256i pick = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL, 0x0101010101010101LL, 0);
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), pick);
  return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
}

template <DType T, class Block>
inline __m256i iq_sub_codes_x86(const Block& blk, int s, int* L0, int* L1) {
  alignas(32) uint64_t e[4];  // IQ1/IQ2: one entry per group of 8
  alignas(32) uint32_t e4[8];  // IQ3: one entry per group of 4
  uint32_t bits = 0;
  if constexpr (T == DType::IQ1_S || T == DType::IQ1_M) {
    alignas(32) int64_t delta[4];  // per group: 8 bytes of +1 or -1
    if constexpr (T == DType::IQ1_S) {
      const uint32_t h = blk.qh[2 * s] | (static_cast<uint32_t>(blk.qh[2 * s + 1]) << 8);
      for (int l = 0; l < 4; ++l) {
        e[l] = kIq1sGrid[blk.qs[4 * s + l] | (((h >> (3 * l)) & 7) << 8)];
        delta[l] = (h & 0x8000) ? -1 : 0x0101010101010101LL;
      }
      *L0 = *L1 = 2 * static_cast<int>((h >> 12) & 7) + 1;
    } else {
      const uint16_t w = iq1m_word(blk, s / 2);
      for (int l = 0; l < 4; ++l) {
        const int nib = (blk.qh[2 * s + l / 2] >> (4 * (l % 2))) & 15;
        e[l] = kIq1sGrid[blk.qs[4 * s + l] | ((nib & 7) << 8)];
        delta[l] = (nib & 8) ? -1 : 0x0101010101010101LL;
      }
      *L0 = 2 * ((w >> (6 * (s % 2))) & 7) + 1;
      *L1 = 2 * ((w >> (6 * (s % 2) + 3)) & 7) + 1;
    }
    const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(e));
    return _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), v), _mm256_load_si256(reinterpret_cast<const __m256i*>(delta)));
  } else {
    if constexpr (T == DType::IQ2_XXS) {
      uint32_t w;
      std::memcpy(&w, blk.qs + 8 * s + 4, 4);
      for (int l = 0; l < 4; ++l) {
        e[l] = kIq2xxsGrid[blk.qs[8 * s + l]];
        bits |= static_cast<uint32_t>(iq_even_signs((w >> (7 * l)) & 127)) << (8 * l);
      }
      *L0 = *L1 = 2 * static_cast<int>(w >> 28) + 1;
    } else if constexpr (T == DType::IQ2_XS || T == DType::IQ2_S) {
      if constexpr (T == DType::IQ2_XS) {
        for (int l = 0; l < 4; ++l) {
          const uint32_t v = blk.qs[8 * s + 2 * l] | (static_cast<uint32_t>(blk.qs[8 * s + 2 * l + 1]) << 8);
          e[l] = kIq2xsGrid[v & 511];
          bits |= static_cast<uint32_t>(iq_even_signs(v >> 9)) << (8 * l);
        }
      } else {
        for (int l = 0; l < 4; ++l) e[l] = kIq2sGrid[blk.qs[4 * s + l] | (((blk.qh[s] >> (2 * l)) & 3) << 8)];
        std::memcpy(&bits, blk.qs + 32 + 4 * s, 4);
      }
      *L0 = 2 * (blk.scales[s] & 15) + 1;
      *L1 = 2 * (blk.scales[s] >> 4) + 1;
    } else {
      if constexpr (T == DType::IQ3_S) {
        for (int g = 0; g < 8; ++g) e4[g] = kIq3sGrid[blk.qs[8 * s + g] | (((blk.qh[s] >> g) & 1) << 8)];
        std::memcpy(&bits, blk.signs + 4 * s, 4);
        *L0 = *L1 = 2 * ((blk.scales[s / 2] >> (4 * (s % 2))) & 15) + 1;
      } else {
        uint32_t w;
        std::memcpy(&w, blk.qs + 64 + 4 * s, 4);
        for (int g = 0; g < 8; ++g) e4[g] = kIq3xxsGrid[blk.qs[8 * s + g]];
        for (int l = 0; l < 4; ++l) bits |= static_cast<uint32_t>(iq_even_signs((w >> (7 * l)) & 127)) << (8 * l);
        *L0 = *L1 = 2 * static_cast<int>(w >> 28) + 1;
      }
    }
    constexpr bool iq3 = T == DType::IQ3_XXS || T == DType::IQ3_S;
    const __m256i mag = _mm256_load_si256(iq3 ? reinterpret_cast<const __m256i*>(e4) : reinterpret_cast<const __m256i*>(e));
    const __m256i mask = sign_mask32(bits);
    return _mm256_sub_epi8(_mm256_xor_si256(mag, mask), mask);
  }
}

// Dotted by the sign trick, then madd with the halves' scales.
template <int R, DType T, class RA>
void row_iq(const void* row, int64_t k, const RA& ra, float* out) {
  using Block = typename WTraits<T>::Block;
  const Block* b = static_cast<const Block*>(row);
  __m256 acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k / 256; ++i) {
    const Block& blk = b[i];
    _mm_prefetch(reinterpret_cast<const char*>(&blk) + 1024, _MM_HINT_T0);
    __m256i isum[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
    for (int s = 0; s < 8; ++s) {
      int L0, L1;
      const __m256i q = iq_sub_codes_x86<T>(blk, s, &L0, &L1);
      const __m256i ls = _mm256_setr_m128i(_mm_set1_epi16(static_cast<int16_t>(L0)), _mm_set1_epi16(static_cast<int16_t>(L1)));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(dot_signed16(q, codes_load32(ra.a(r) + i * 256 + 32 * s)), ls));
    }
    const float d = iq_block_d(blk) * kIqScale<T>;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_set1_ps(d * ra.d(r)[i]), acc[r]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) out[r] = hsum8(acc[r]);
}

// The row kernel of Q2_K, Q3_K, IQ4_XS, MXFP4, TQ1_0, TQ2_0, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS or IQ3_S (false for any other type).
template <int R, class RA>
bool row_codes_dispatch(DType t, const void* row, int64_t k, const RA& ra, float* out) {
  switch (t) {
    case DType::Q2_K: row_q23_k<R, false>(row, k, ra, out); return true;
    case DType::Q3_K: row_q23_k<R, true>(row, k, ra, out); return true;
    case DType::IQ4_XS: row_iq4_xs<R>(row, k, ra, out); return true;
    case DType::MXFP4: row_mxfp4<R>(row, k, ra, out); return true;
    case DType::TQ1_0: row_tq<R, true>(row, k, ra, out); return true;
    case DType::TQ2_0: row_tq<R, false>(row, k, ra, out); return true;
    case DType::IQ1_S: row_iq<R, DType::IQ1_S>(row, k, ra, out); return true;
    case DType::IQ1_M: row_iq<R, DType::IQ1_M>(row, k, ra, out); return true;
    case DType::IQ2_XXS: row_iq<R, DType::IQ2_XXS>(row, k, ra, out); return true;
    case DType::IQ2_XS: row_iq<R, DType::IQ2_XS>(row, k, ra, out); return true;
    case DType::IQ2_S: row_iq<R, DType::IQ2_S>(row, k, ra, out); return true;
    case DType::IQ3_XXS: row_iq<R, DType::IQ3_XXS>(row, k, ra, out); return true;
    case DType::IQ3_S: row_iq<R, DType::IQ3_S>(row, k, ra, out); return true;
    default: return false;
  }
}

}  // namespace
}  // namespace ptn::mm
