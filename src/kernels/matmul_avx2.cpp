// AVX2 level (AVX2 + FMA + F16C): row kernels for every weight type. One weight row at a time
// is decoded in registers and dotted with up to 4 activation rows (8 for Q8_0, Q4_0, Q4_K, Q5_K
// and Q6_K: tile_rows), so the weights stream from memory once per 4 (8) rows. Integer dot
// products use maddubs (u8 x s8 -> s16 pairs) and madd (s16 -> s32, times the sub-block scale
// where the format has an integer one). The pair sums cannot saturate: unsigned operands are at
// most 128 (|q| of Q8_0) and activations at most 127.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/cpu.h"
#include "core/error.h"
#include "kernels/matmul_codes_x86.h"
#include "kernels/matmul_generic.h"

namespace ptn::mm {

void quantize_acts_avx2(const float* x, int64_t r0, int64_t r1, QuantActs& qa) {
  generic_quantize_acts(x, r0, r1, qa);
}

namespace {

inline float hsum4(__m128 s) {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float h2f(uint16_t h) { return _cvtsh_ss(h); }
inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Activation rows per row tile: 8 for the types whose kernels keep 8 rows' sums in registers
// (batched decode: the weight row is decoded once for 8 sequences), else 4.
constexpr int kMaxTile = 8;
inline int tile_rows(DType t) {
  return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K ? 8 : 4;
}

struct RowArgs {
  // Per-row base pointers, computed once per row tile (the index arithmetic divides).
  const int8_t* a_[kMaxTile] = {};
  const float* d_[kMaxTile] = {};
  const int32_t* s16_[kMaxTile] = {};
  const int32_t* s32_[kMaxTile] = {};
  const int16_t* h32_[kMaxTile] = {};
  int64_t r0 = 0;
  int rows = 0;
  RowArgs() = default;
  RowArgs(const QuantActs* qa, int64_t first, int64_t n) : r0(first), rows(static_cast<int>(n)) {
    if (qa->q == nullptr) return;  // float weights: no quantized activations
    const int64_t k = qa->k, ng = qa->groups();
    for (int64_t r = 0; r < n && r < kMaxTile; ++r) {
      a_[r] = qa->q + (r0 + r) * k;
      d_[r] = qa->d + (r0 + r) * ng;
      s16_[r] = qa->s16 + (r0 + r) * (k / 16);
      s32_[r] = qa->s32 + (r0 + r) * (k / 32);
      h32_[r] = qa->h32 + (r0 + r) * (k / 32);
    }
  }
  const int8_t* a(int r) const { return a_[r]; }
  const float* d(int r) const { return d_[r]; }
  const int32_t* s16(int r) const { return s16_[r]; }
  const int32_t* s32(int r) const { return s32_[r]; }
  const int16_t* h32(int r) const { return h32_[r]; }
};

// sum over 32 bytes of q * a for signed codes q (|q| <= 128) and activations a, as 8 s32 lanes.
inline __m256i dot_signed(__m256i q, __m256i a) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// Q8_0 / Q4_0 / Q5_0: 32-element blocks, signed codes, one f32 scale per block. With one or two
// activation rows the FMA into the row's accumulator is the loop's only carried chain: even and
// odd blocks then go to two accumulators so its latency is not the bound (decode, m = 1).
template <int R, DType T>
void row_q_32(const void* row, int64_t k, const RowArgs& ra, float* out) {
  const uint8_t* base = static_cast<const uint8_t*>(row);
  const size_t bs = traits(T).block_bytes;
  constexpr int kChains = R <= 2 ? 2 : 1;
  __m256 acc[kChains][R];
#pragma GCC unroll 16
  for (int c = 0; c < kChains; ++c)
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[c][r] = _mm256_setzero_ps();
  const __m128i m4 = _mm_set1_epi8(15);
  auto block = [&](int64_t i, __m256* a) {
    const uint8_t* blk = base + i * bs;
    _mm_prefetch(reinterpret_cast<const char*>(blk) + 4096, _MM_HINT_T0);
    uint16_t dh;
    std::memcpy(&dh, blk, 2);
    __m256i q;
    if (T == DType::Q8_0) {
      q = load32(blk + 2);
    } else {
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + (T == DType::Q5_0 ? 6 : 2)));
      q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4));
      if (T == DType::Q5_0) {
        // Bit j of qh -> byte j: spread the 4 bytes of qh over 8-byte groups, test one bit each.
        uint32_t qh;
        std::memcpy(&qh, blk + 2, 4);
        const __m256i spread = _mm256_shuffle_epi8(
            _mm256_set1_epi32(static_cast<int>(qh)),
            _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
        const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
        const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
        q = _mm256_or_si256(q, _mm256_and_si256(set, _mm256_set1_epi8(16)));
        q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
      } else {
        q = _mm256_sub_epi8(q, _mm256_set1_epi8(8));
      }
    }
    const float dw = h2f(dh);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m256i p = dot_signed(q, load32(ra.a(r) + i * 32));
      a[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * ra.d(r)[i]), a[r]);
    }
  };
  const int64_t nb = k / 32;
  int64_t i = 0;
  for (; i + kChains <= nb; i += kChains)
#pragma GCC unroll 2
    for (int c = 0; c < kChains; ++c) block(i + c, acc[c]);
  for (; i < nb; ++i) block(i, acc[0]);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) out[r] = hsum8(kChains == 2 ? _mm256_add_ps(acc[0][r], acc[kChains - 1][r]) : acc[0][r]);
}

// Q4_1 / Q5_1: unsigned codes u (0..31), x = d u + m: d dot(u, a) by maddubs (u <= 31 cannot
// saturate the pair sums) plus m sum(a), kept in a float per row. IQ4_NL: the table's signed
// levels (|q| <= 127) looked up by the nibbles, then as Q4_0.
template <int R, DType T>
void row_b32(const void* row, int64_t k, const RowArgs& ra, float* out) {
  constexpr size_t bs = T == DType::Q5_1 ? sizeof(BlockQ5_1) : T == DType::Q4_1 ? sizeof(BlockQ4_1) : sizeof(BlockIQ4_NL);
  constexpr int qs = T == DType::Q5_1 ? 8 : T == DType::Q4_1 ? 4 : 2;  // offset of the nibbles
  const uint8_t* base = static_cast<const uint8_t*>(row);
  __m256 acc[R];
  float mins[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    mins[r] = 0;
  }
  const __m128i m4 = _mm_set1_epi8(15);
  const __m256i levels = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  for (int64_t i = 0; i < k / 32; ++i) {
    const uint8_t* blk = base + i * bs;
    _mm_prefetch(reinterpret_cast<const char*>(blk) + 4096, _MM_HINT_T0);
    uint16_t dh, mh = 0;
    std::memcpy(&dh, blk, 2);
    if (T != DType::IQ4_NL) std::memcpy(&mh, blk + 2, 2);
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + qs));
    __m256i u = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4));
    if (T == DType::Q5_1) {
      uint32_t qh;  // bit j of qh -> bit 4 of byte j, as for Q5_0
      std::memcpy(&qh, blk + 4, 4);
      const __m256i spread = _mm256_shuffle_epi8(
          _mm256_set1_epi32(static_cast<int>(qh)),
          _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
      const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
      const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
      u = _mm256_or_si256(u, _mm256_and_si256(set, _mm256_set1_epi8(16)));
    }
    const float dw = h2f(dh), mw = h2f(mh);
    if (T == DType::IQ4_NL) u = _mm256_shuffle_epi8(levels, u);  // signed levels
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m256i a = load32(ra.a(r) + i * 32);
      const __m256i p = T == DType::IQ4_NL ? dot_signed(u, a) : _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1));
      const float da = ra.d(r)[i];
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * da), acc[r]);
      if (T != DType::IQ4_NL) mins[r] += mw * da * static_cast<float>(ra.s32(r)[i]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) out[r] = hsum8(acc[r]) + mins[r];
}

// The 6-bit scales and mins of a Q4_K / Q5_K super-block, 8 bytes each (byte j = sub-block j).
inline void k4_scales(const uint8_t* s, uint64_t& sc, uint64_t& mn) {
  uint32_t a0, a1, a2;
  std::memcpy(&a0, s, 4);
  std::memcpy(&a1, s + 4, 4);
  std::memcpy(&a2, s + 8, 4);
  const uint32_t sc1 = (a2 & 0x0f0f0f0f) | (((a0 >> 6) & 0x03030303) << 4);
  const uint32_t mn1 = ((a2 >> 4) & 0x0f0f0f0f) | (((a1 >> 6) & 0x03030303) << 4);
  sc = (a0 & 0x3f3f3f3f) | (static_cast<uint64_t>(sc1) << 32);
  mn = (a1 & 0x3f3f3f3f) | (static_cast<uint64_t>(mn1) << 32);
}

// pshufb controls that pick one 16-bit element of each 128-bit lane into the whole lane:
// kPick16[i] takes element i of both lanes; kPick16Pair[q] takes element 2q in the low lane
// and 2q + 1 in the high one.
struct alignas(32) Pick16 {
  uint8_t b[8][32];
  constexpr explicit Pick16(bool pair) : b{} {
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 32; j += 2) {
        const int e = pair ? (i % 4) * 2 + (j >= 16 ? 1 : 0) : i;
        b[i][j] = static_cast<uint8_t>(2 * e);
        b[i][j + 1] = static_cast<uint8_t>(2 * e + 1);
      }
  }
};
constexpr Pick16 kPick16{false}, kPick16Pair{true};
inline __m256i pick16(const Pick16& p, int i) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p.b[i])); }

// Q4_K / Q5_K: unsigned codes (0..31); sum_j sc_j * dot_j in s32 via madd with the scale.
template <int R, bool Q5>
void row_q45_k(const void* row, int64_t k, const RowArgs& ra, float* out) {
  const size_t bs = Q5 ? sizeof(BlockQ5K) : sizeof(BlockQ4K);
  const uint8_t* base = static_cast<const uint8_t*>(row);
  const __m256i m4 = _mm256_set1_epi8(15);
  __m256 acc[R];
  __m128 mins[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    mins[r] = _mm_setzero_ps();
  }
  for (int64_t i = 0; i < k / 256; ++i) {
    const uint8_t* blk = base + i * bs;
    _mm_prefetch(reinterpret_cast<const char*>(blk) + 4096, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(blk) + 4160, _MM_HINT_T0);
    uint16_t dh, mh;
    std::memcpy(&dh, blk, 2);
    std::memcpy(&mh, blk + 2, 2);
    uint64_t sc, mn;
    k4_scales(blk + 4, sc, mn);
    // The mins as int16, for the mins term; the scales as int16 in both lanes, one picked per
    // sub-block by a byte shuffle.
    const __m128i mn16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mn)));
    const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc))));
    const uint8_t* qs = blk + (Q5 ? 48 : 16);
    const __m256i qh = Q5 ? load32(blk + 16) : _mm256_setzero_si256();
    __m256i isum[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const __m256i raw = load32(qs + 32 * (s / 2));
      __m256i u = _mm256_and_si256(s & 1 ? _mm256_srli_epi16(raw, 4) : raw, m4);
      if (Q5) {
        const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << s));
        u = _mm256_or_si256(u, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit), _mm256_set1_epi8(16)));
      }
      const __m256i scv = _mm256_shuffle_epi8(sc16, pick16(kPick16, s));
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m256i p = _mm256_maddubs_epi16(u, load32(ra.a(r) + i * 256 + 32 * s));
        isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(p, scv));
        keep_chain(isum[r]);
      }
    }
    const float d = h2f(dh), dmin = h2f(mh);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const float da = ra.d(r)[i];
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_set1_ps(d * da), acc[r]);
      // sum_j m_j * sum(a_j) through int16 pairs.
      const __m128i p = _mm_madd_epi16(mn16, _mm_loadu_si128(reinterpret_cast<const __m128i*>(ra.h32(r) + i * 8)));
      mins[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(p), _mm_set1_ps(dmin * da), mins[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) out[r] = hsum8(acc[r]) - hsum4(mins[r]);
}

// Q6_K: codes 0..63 with per-16 int8 scales; the -32 offset through sum_j sc_j * sum16(a_j).
template <int R>
void row_q6_k(const void* row, int64_t k, const RowArgs& ra, float* out) {
  const BlockQ6K* b = static_cast<const BlockQ6K*>(row);
  const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
  __m256 acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k / 256; ++i) {
    const BlockQ6K& blk = b[i];
    _mm_prefetch(reinterpret_cast<const char*>(&blk) + 4096, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(&blk) + 4160, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(&blk) + 4224, _MM_HINT_T0);
    __m256i isum[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
    // The 16 scales as int16 (for the offset term), and per half the 8 of its 4 sub-blocks in
    // both lanes (one pair picked per sub-block by a byte shuffle).
    const __m256i sc_all = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i sch = _mm256_broadcastsi128_si256(h ? _mm256_extracti128_si256(sc_all, 1) : _mm256_castsi256_si128(sc_all));
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const int s = 4 * h + q;
        // Quad q's codes: low nibbles of ql (q = 0, 1) or high ones (2, 3), bits 2q..2q+1 of qh
        // as bits 4-5; loaded again per quad (L1) rather than kept, for the 8-row tile's registers.
        const __m256i l = load32(blk.ql + 64 * h + 32 * (q & 1)), qh = load32(blk.qh + 32 * h);
        const __m256i lo = _mm256_and_si256(q < 2 ? l : _mm256_srli_epi16(l, 4), m4);
        const __m256i hi = _mm256_and_si256(q == 0 ? _mm256_slli_epi16(qh, 4) : q == 1 ? _mm256_slli_epi16(qh, 2)
                                            : q == 2 ? qh : _mm256_srli_epi16(qh, 2), m30);
        const __m256i u = _mm256_or_si256(lo, hi);
        const __m256i scs = _mm256_shuffle_epi8(sch, pick16(kPick16Pair, q));
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const __m256i p = _mm256_maddubs_epi16(u, load32(ra.a(r) + i * 256 + 32 * s));
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(p, scs));
          keep_chain(isum[r]);
        }
      }
    }
    const float d = h2f(blk.d);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      // The offset: 32 * sum_j sc_j * sum16(a_j), the activations' sums (|s| <= 2032) packed to
      // int16 in element order (packs interleaves the lanes; the permute puts them back).
      const __m256i* s16 = reinterpret_cast<const __m256i*>(ra.s16(r) + i * 16);
      const __m256i a16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(_mm256_loadu_si256(s16), _mm256_loadu_si256(s16 + 1)), 0xd8);
      const __m256i tot = _mm256_sub_epi32(isum[r], _mm256_slli_epi32(_mm256_madd_epi16(sc_all, a16), 5));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), _mm256_set1_ps(d * ra.d(r)[i]), acc[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) out[r] = hsum8(acc[r]);
}

// Float weights: 8-wide FMA, F16 through F16C, BF16 by a 16-bit shift; two accumulators.
template <int R>
void row_float(DType t, const void* row, int64_t k, const float* x, float* out) {
  __m256 acc0[R], acc1[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  auto load8 = [&](int64_t at) -> __m256 {
    if (t == DType::F32) return _mm256_loadu_ps(static_cast<const float*>(row) + at);
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + at));
    if (t == DType::F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  };
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    const __m256 w0 = load8(i), w1 = load8(i + 8);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      acc0[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + r * k + i), acc0[r]);
      acc1[r] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + r * k + i + 8), acc1[r]);
    }
  }
  float tail[R] = {};
  const float* w32 = static_cast<const float*>(row);
  const uint16_t* w16 = static_cast<const uint16_t*>(row);
  for (; i < k; ++i) {
    const float w = t == DType::F32 ? w32[i] : t == DType::F16 ? fp16_to_f32(w16[i]) : bf16_to_f32(w16[i]);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) tail[r] += w * x[r * k + i];
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) out[r] = hsum8(_mm256_add_ps(acc0[r], acc1[r])) + tail[r];
}

template <int R>
void row_dispatch(const WeightView& w, const void* row, const float* x, const RowArgs& ra, float* out) {
  const int64_t k = w.cols;
  switch (w.type) {
    case DType::Q8_0: return row_q_32<R, DType::Q8_0>(row, k, ra, out);
    case DType::Q4_0: return row_q_32<R, DType::Q4_0>(row, k, ra, out);
    case DType::Q5_0: return row_q_32<R, DType::Q5_0>(row, k, ra, out);
    case DType::Q4_1: return row_b32<R, DType::Q4_1>(row, k, ra, out);
    case DType::Q5_1: return row_b32<R, DType::Q5_1>(row, k, ra, out);
    case DType::IQ4_NL: return row_b32<R, DType::IQ4_NL>(row, k, ra, out);
    case DType::Q4_K: return row_q45_k<R, false>(row, k, ra, out);
    case DType::Q5_K: return row_q45_k<R, true>(row, k, ra, out);
    case DType::Q6_K: return row_q6_k<R>(row, k, ra, out);
    case DType::F32: case DType::F16: case DType::BF16: return row_float<R>(w.type, row, k, x + ra.r0 * k, out);
    default:
      if (row_codes_dispatch<R>(w.type, row, k, ra, out)) return;
      fail(ErrorKind::Internal, "matmul", std::string("no AVX2 row kernel for ") + dtype_name(w.type));
  }
}

// The types of tile_rows' 8-row tiles.
void row_dispatch8(const WeightView& w, const void* row, const RowArgs& ra, float* out) {
  const int64_t k = w.cols;
  switch (w.type) {
    case DType::Q8_0: return row_q_32<8, DType::Q8_0>(row, k, ra, out);
    case DType::Q4_0: return row_q_32<8, DType::Q4_0>(row, k, ra, out);
    case DType::Q4_K: return row_q45_k<8, false>(row, k, ra, out);
    case DType::Q5_K: return row_q45_k<8, true>(row, k, ra, out);
    case DType::Q6_K: return row_q6_k<8>(row, k, ra, out);
    default: fail(ErrorKind::Internal, "matmul", std::string("no 8-row AVX2 kernel for ") + dtype_name(w.type));
  }
}

// Activation rows from which the quantized panels take over from the row kernels (the AVX-512
// level's threshold; below it the row kernels stream each weight row once per row tile).
constexpr int64_t kPanelMinRows = 20;

void rows_range(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y);

}  // namespace

void matmul_range_avx2(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1,
                       float* y) {
  // Many activation rows (prefill): quantized weights go through the panels, as on AVX-512.
  if (m >= kPanelMinRows && traits(w.type).quantized && w.layout == WeightLayout::Rows)
    return qpanel_range_avx2(w, qa, m, n0, n1, y);
  rows_range(w, x, qa, m, n0, n1, y);
}

void matmul_range_avx2vnni(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1,
                           float* y) {
  if (m >= kPanelMinRows && traits(w.type).quantized && w.layout == WeightLayout::Rows) {
    if (cpu_features().avxvnni) return qpanel_range_avxvnni(w, qa, m, n0, n1, y);
    if (cpu_features().avx512vnni && cpu_features().avx512vl) return qpanel_range_vnni_evex(w, qa, m, n0, n1, y);
    fail(ErrorKind::Internal, "matmul", "the avx2-vnni level on a CPU without AVX-VNNI");
  }
  rows_range(w, x, qa, m, n0, n1, y);
}

namespace {

// The AVX2 row kernels over weight rows [n0, n1).
void rows_range(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y) {
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
  // The activation row tiles (8 or 4 rows, then one tile of the rest), set up once rather than
  // once per weight row.
  const int tile = tile_rows(w.type);
  thread_local std::vector<RowArgs> tiles;
  tiles.clear();
  int64_t r0 = 0;
  for (; r0 + tile <= m; r0 += tile) tiles.emplace_back(&qa, r0, tile);
  if (m - r0 > 4) {
    tiles.emplace_back(&qa, r0, 4);
    r0 += 4;
  }
  if (r0 < m) tiles.emplace_back(&qa, r0, m - r0);
  float out[kMaxTile];
  for (int64_t n = n0; n < n1; ++n) {
    const void* row = base + n * w.row_stride;
    for (const RowArgs& ra : tiles) {
      switch (ra.rows) {
        case 8: row_dispatch8(w, row, ra, out); break;
        case 4: row_dispatch<4>(w, row, x, ra, out); break;
        case 3: row_dispatch<3>(w, row, x, ra, out); break;
        case 2: row_dispatch<2>(w, row, x, ra, out); break;
        default: row_dispatch<1>(w, row, x, ra, out); break;
      }
      for (int r = 0; r < ra.rows; ++r) y[(ra.r0 + r) * w.rows + n] = out[r];
    }
  }
}

}  // namespace

}  // namespace ptn::mm
