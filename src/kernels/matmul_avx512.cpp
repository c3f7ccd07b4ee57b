// AVX-512 level (F, BW, VL, DQ, VNNI; BF16 dot products when simd_has_bf16()).
//
// Two kinds of kernels:
//   * row kernels (few activation rows, the decode case): one weight row at a time, decoded in
//     registers and dotted with up to 4 activation rows; the weights stream from memory once.
//   * panel kernels (many activation rows, the prefill case): see the panel section below.

// GCC 12 reports its own AVX-512 intrinsic headers (the undefined-value idiom of the
// reductions and casts) as reading uninitialized variables; the pragma must precede them.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cpu.h"
#include "core/fp16.h"
#include "kernels/matmul_internal.h"

namespace ptn::mm {
namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float hsum4(__m128 s) {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

// ---- activation quantization ---------------------------------------------------------------

void quantize_row(const float* x, int64_t k, int64_t g, int8_t* q, float* d, int32_t* s16) {
  const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  for (int64_t g0 = 0; g0 < k; g0 += g) {
    __m512 mx = _mm512_setzero_ps();
    for (int64_t i = g0; i < g0 + g; i += 16) mx = _mm512_max_ps(mx, _mm512_and_ps(_mm512_loadu_ps(x + i), absmask));
    const float amax = _mm512_reduce_max_ps(mx);
    const float dd = amax / 127.f;
    const float id = dd > 0 ? 1.f / dd : 0.f;
    d[g0 / g] = dd;
    const __m512 vid = _mm512_set1_ps(id);
    for (int64_t i = g0; i < g0 + g; i += 16) {
      // cvtps rounds to nearest even, as the portable quantizer; |x * id| <= 127 (NaN -> -128).
      __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), vid));
      v = _mm512_max_epi32(_mm512_min_epi32(v, _mm512_set1_epi32(127)), _mm512_set1_epi32(-127));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtepi32_epi8(v));
      s16[i / 16] = _mm512_reduce_add_epi32(v);
    }
  }
}

}  // namespace

void quantize_acts_avx512(const float* x, int64_t r0, int64_t r1, QuantActs& qa) {
  const int64_t k = qa.k;
  for (int64_t r = r0; r < r1; ++r) {
    int32_t* s16 = qa.s16 + r * (k / 16);
    quantize_row(x + r * k, k, qa.group, qa.q + r * k, qa.d + r * qa.groups(), s16);
    for (int64_t b = 0; b < k / 32; ++b) {
      const int32_t s = s16[2 * b] + s16[2 * b + 1];
      qa.s32[r * (k / 32) + b] = s;
      qa.fs32[r * (k / 32) + b] = static_cast<float>(s);
      qa.h32[r * (k / 32) + b] = static_cast<int16_t>(s);
    }
  }
}

namespace {

// ---- row kernels ------------------------------------------------------------------------------
// Each computes out[r] = dot(weight row, activation row r) for R rows (R = 1..4); `row` points
// at the weight row, qa/r0 select the activation rows r0..r0+R-1.

struct RowArgs {
  // Per-row base pointers, computed once per row tile (not per block: the index arithmetic
  // includes a division by the group size).
  static constexpr int kMax = 8;  // rows per tile: 8 for Q4_K / Q5_K, else 4
  const int8_t* a_[kMax] = {};
  const float* d_[kMax] = {};
  const int32_t* s16_[kMax] = {};
  const int32_t* s32_[kMax] = {};
  const int16_t* h32_[kMax] = {};
  const float* fs32_[kMax] = {};
  int64_t r0 = 0, rows = 0;
  RowArgs() = default;
  RowArgs(const QuantActs* qa, int64_t first, int64_t n) : r0(first), rows(std::min<int64_t>(n, kMax)) {
    if (qa->q == nullptr) return;  // float weights: no quantized activations
    const int64_t k = qa->k, ng = qa->groups();
    for (int64_t r = 0; r < rows; ++r) {
      a_[r] = qa->q + (r0 + r) * k;
      d_[r] = qa->d + (r0 + r) * ng;
      s16_[r] = qa->s16 + (r0 + r) * (k / 16);
      s32_[r] = qa->s32 + (r0 + r) * (k / 32);
      h32_[r] = qa->h32 + (r0 + r) * (k / 32);
      fs32_[r] = qa->fs32 + (r0 + r) * (k / 32);
    }
  }
  const int8_t* a(int r) const { return a_[r]; }
  const float* d(int r) const { return d_[r]; }
  const int32_t* s16(int r) const { return s16_[r]; }
  const int32_t* s32(int r) const { return s32_[r]; }
  const int16_t* h32(int r) const { return h32_[r]; }
  const float* fs32(int r) const { return fs32_[r]; }
};

// Hint the weight bytes `ahead` bytes on into L1 (the hardware prefetcher alone leaves some
// of the read bandwidth unused). 8 KB ahead measured best on Zen 5 (1.5 KB: ~15% slower);
// prefetches past the end of the matrix are harmless (they never fault).
inline void prefetch_ahead(const void* p, size_t ahead) {
  _mm_prefetch(static_cast<const char*>(p) + ahead, _MM_HINT_T0);
}
constexpr size_t kAhead = 8192;

inline int32_t load4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Q8_0: signed codes; the dot product uses |w| (unsigned) against sign(a, w). Two accumulators
// per row (even / odd blocks) so the FMA latency does not bound the loop.
template <int R>
[[gnu::always_inline]] inline void q8_0_block(const BlockQ8_0& b, int64_t i, const RowArgs& ra, __m256* acc) {
  const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  const __m256i aw = _mm256_abs_epi8(w);
  const float dw = h2f(b.d);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ra.a(r) + i * 32));
    const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, _mm256_sign_epi8(a, w));
    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * ra.d(r)[i]), acc[r]);
  }
}

// Pairs of blocks in one zmm: lanes 0-7 hold block i's partial dot products, 8-15 block i+1's.
// The two f32 block scales dw[0..1] (as an xmm) times the activation scales da[0..1], spread to
// lanes 0-7 and 8-15. da need not be 8-byte aligned (_mm_loadl_epi64 is an unaligned load).
inline __m512 pair_scale(__m128 dw, const float* da) {
  const __m128 s = _mm_mul_ps(dw, _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(da))));
  const __m512i idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(s));
}
inline __m128 two_halves(uint16_t a, uint16_t b) {
  return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(a | (static_cast<uint32_t>(b) << 16))));
}

template <int R>
[[gnu::always_inline]] inline void q8_0_pair(const BlockQ8_0* b, int64_t i, const RowArgs& ra, __m512* acc) {
  const __m512i w = _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[0].qs))),
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[1].qs)), 1);
  const __m512i aw = _mm512_abs_epi8(w);
  const __mmask64 neg = _mm512_movepi8_mask(w);
  const __m128 dw = two_halves(b[0].d, b[1].d);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const __m512i a = _mm512_loadu_si512(ra.a(r) + i * 32);
    const __m512i sa = _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a);  // a * sign(w)
    const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), aw, sa);
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), pair_scale(dw, ra.d(r) + i), acc[r]);
  }
}

template <int R>
void row_q8_0(const void* row, int64_t k, const RowArgs& ra, float* out) {
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(row);
  const int64_t nb = k / 32;
  __m512 acc0[R], acc1[R];
  __m256 tail[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    acc0[r] = acc1[r] = _mm512_setzero_ps();
    tail[r] = _mm256_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4) {
    prefetch_ahead(b + i, kAhead);
    prefetch_ahead(b + i, kAhead + 64);
    q8_0_pair<R>(b + i, i, ra, acc0);
    q8_0_pair<R>(b + i + 2, i + 2, ra, acc1);
  }
  for (; i < nb; ++i) q8_0_block<R>(b[i], i, ra, tail);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r])) + hsum(tail[r]);
}

// Q4_0 / Q5_0: unsigned codes u = q + off; sum (u - off) a = dot(u, a) - off * sum(a), with the
// correction put into lane 0 of the integer accumulator before the dot product.
template <int R, bool Q5>
[[gnu::always_inline]] inline void q45_0_block(const uint8_t* blk, int64_t i, const RowArgs& ra, __m256* acc) {
  constexpr int off = Q5 ? 16 : 8;
  const __m128i m4 = _mm_set1_epi8(15);
  uint16_t dh;
  std::memcpy(&dh, blk, 2);
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + (Q5 ? 6 : 2)));
  __m256i u = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4));
  if (Q5) {
    uint32_t qh;
    std::memcpy(&qh, blk + 2, 4);
    u = _mm256_mask_add_epi8(u, static_cast<__mmask32>(qh), u, _mm256_set1_epi8(16));
  }
  const float dw = h2f(dh);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ra.a(r) + i * 32));
    const __m256i init = _mm256_zextsi128_si256(_mm_cvtsi32_si128(-off * ra.s32(r)[i]));
    const __m256i p = _mm256_dpbusd_epi32(init, u, a);
    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * ra.d(r)[i]), acc[r]);
  }
}

template <int R, bool Q5>
[[gnu::always_inline]] inline void q45_0_pair(const uint8_t* blk, size_t bs, int64_t i, const RowArgs& ra, __m512* acc) {
  constexpr int off = Q5 ? 16 : 8;
  const uint8_t* b1 = blk + bs;
  const int qo = Q5 ? 6 : 2;
  // [qs0, qs0, qs1, qs1] -> low nibbles of 128-bit lanes 0 and 2, high nibbles of lanes 1 and 3:
  // block i's 32 codes then block i+1's, in element order.
  __m512i raw = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + qo)));
  raw = _mm512_mask_broadcast_i32x4(raw, 0xFF00, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b1 + qo)));
  constexpr int64_t f = 0x0004000400040004;  // 16-bit shift counts 4
  const __m512i shifts = _mm512_set_epi64(f, f, 0, 0, f, f, 0, 0);
  __m512i u = _mm512_and_si512(_mm512_srlv_epi16(raw, shifts), _mm512_set1_epi8(15));
  if (Q5) {
    uint32_t h0, h1;
    std::memcpy(&h0, blk + 2, 4);
    std::memcpy(&h1, b1 + 2, 4);
    u = _mm512_mask_add_epi8(u, static_cast<__mmask64>(h0) | (static_cast<__mmask64>(h1) << 32), u, _mm512_set1_epi8(16));
  }
  uint16_t d0, d1;
  std::memcpy(&d0, blk, 2);
  std::memcpy(&d1, b1, 2);
  const __m128 dw = two_halves(d0, d1);
  // Signed codes q = u - off; dot(q, a) = dot(|q|, a * sign(q)) as for Q8_0.
  const __m512i q = _mm512_sub_epi8(u, _mm512_set1_epi8(off));
  const __m512i aq = _mm512_abs_epi8(q);
  const __mmask64 neg = _mm512_movepi8_mask(q);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const __m512i a = _mm512_loadu_si512(ra.a(r) + i * 32);
    const __m512i sa = _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a);
    const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), aq, sa);
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), pair_scale(dw, ra.d(r) + i), acc[r]);
  }
}

template <int R, bool Q5>
void row_q45_0(const void* row, int64_t k, const RowArgs& ra, float* out) {
  const size_t bs = Q5 ? sizeof(BlockQ5_0) : sizeof(BlockQ4_0);
  const uint8_t* base = static_cast<const uint8_t*>(row);
  const int64_t nb = k / 32;
  __m512 acc0[R], acc1[R];
  __m256 tail[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    acc0[r] = acc1[r] = _mm512_setzero_ps();
    tail[r] = _mm256_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4) {
    prefetch_ahead(base + i * bs, kAhead);
    prefetch_ahead(base + i * bs, kAhead + 64);
    q45_0_pair<R, Q5>(base + i * bs, bs, i, ra, acc0);
    q45_0_pair<R, Q5>(base + (i + 2) * bs, bs, i + 2, ra, acc1);
  }
  for (; i < nb; ++i) q45_0_block<R, Q5>(base + i * bs, i, ra, tail);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r])) + hsum(tail[r]);
}

// The 6-bit scales and mins of a Q4_K / Q5_K super-block as 8 bytes each (byte j = sub-block
// j), kept in registers (storing them as two words and reloading 8 bytes would stall on
// store forwarding).
inline void k4_scales(const uint8_t* s, uint64_t& sc, uint64_t& mn) {
  uint32_t a0, a1, a2;
  std::memcpy(&a0, s, 4);
  std::memcpy(&a1, s + 4, 4);
  std::memcpy(&a2, s + 8, 4);
  const uint32_t sc0 = a0 & 0x3f3f3f3f, mn0 = a1 & 0x3f3f3f3f;
  const uint32_t sc1 = (a2 & 0x0f0f0f0f) | (((a0 >> 6) & 0x03030303) << 4);
  const uint32_t mn1 = ((a2 >> 4) & 0x0f0f0f0f) | (((a1 >> 6) & 0x03030303) << 4);
  sc = sc0 | (static_cast<uint64_t>(sc1) << 32);
  mn = mn0 | (static_cast<uint64_t>(mn1) << 32);
}

// Q4_K / Q5_K: per super-block, sum_j sc_j * dot(u_j, a_j) in int32 (maddubs to int16 pairs,
// then dpwssd with the scale), times d * d_a; the mins term dmin * d_a * sum_j m_j * sum(a_j)
// is accumulated lane-wise in `mins`.
template <int R, bool Q5>
void row_q45_k(const void* row, int64_t k, const RowArgs& ra, float* out) {
  // Up to 4 rows: two integer accumulators per row (even / odd j) so the dpwssd latency does
  // not bound the loop; 8 rows have enough independent chains with one (and need the registers).
  constexpr bool kTwo = R <= 4;
  const size_t bs = Q5 ? sizeof(BlockQ5K) : sizeof(BlockQ4K);
  const uint8_t* base = static_cast<const uint8_t*>(row);
  const __m512i m4 = _mm512_set1_epi8(15);
  constexpr int64_t f4 = 0x0004000400040004;  // 16-bit shift counts 4 for the upper 256 bits
  const __m512i shifts = _mm512_set_epi64(f4, f4, f4, f4, 0, 0, 0, 0);
  __m512 acc[R];
  __m128 mins[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm512_setzero_ps();
    mins[r] = _mm_setzero_ps();
  }
  for (int64_t i = 0; i < k / 256; ++i) {
    const uint8_t* blk = base + i * bs;
    prefetch_ahead(blk, kAhead);
    prefetch_ahead(blk, kAhead + 64);
    if (Q5) prefetch_ahead(blk, kAhead + 128);
    uint16_t dh, mh;
    std::memcpy(&dh, blk, 2);
    std::memcpy(&mh, blk + 2, 2);
    uint64_t sc, mn;
    k4_scales(blk + 4, sc, mn);
    const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc))));
    const uint8_t* qs = blk + (Q5 ? 48 : 16);
    __m512i qh = _mm512_setzero_si512();
    if (Q5) qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16)));
    __m512i isum[R], isum2[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) isum[r] = isum2[r] = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int j = 0; j < 4; ++j) {
      // Sub-blocks 2j (low nibbles, lower 256 bits) and 2j+1 (high nibbles, upper 256 bits):
      // 64 codes in the order of the 64 activations at 64j.
      const __m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * j)));
      __m512i u = _mm512_and_si512(_mm512_srlv_epi16(raw, shifts), m4);
      if (Q5) {
        const __m512i bits = _mm512_mask_blend_epi8(0xFFFFFFFF00000000ull, _mm512_set1_epi8(static_cast<char>(1 << (2 * j))),
                                                    _mm512_set1_epi8(static_cast<char>(2 << (2 * j))));
        u = _mm512_mask_add_epi8(u, _mm512_test_epi8_mask(qh, bits), u, _mm512_set1_epi8(16));
      }
      const __m512i idx = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(static_cast<int16_t>(2 * j)),
                                                  _mm512_set1_epi16(static_cast<int16_t>(2 * j + 1)));
      const __m512i scs = _mm512_permutexvar_epi16(idx, sc16);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512i a = _mm512_loadu_si512(ra.a(r) + i * 256 + 64 * j);
        const __m512i p = _mm512_maddubs_epi16(u, a);
        if (kTwo && j % 2) isum2[r] = _mm512_dpwssd_epi32(isum2[r], p, scs);
        else isum[r] = _mm512_dpwssd_epi32(isum[r], p, scs);
      }
    }
    const float d = h2f(dh), dmin = h2f(mh);
    // sum_j m_j * sum(a_j): int16 pairs (madd) of the mins and the activation sums.
    const __m128i mv = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mn)));
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const float da = ra.d(r)[i];
      const __m512i is = kTwo ? _mm512_add_epi32(isum[r], isum2[r]) : isum[r];
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_set1_ps(d * da), acc[r]);
      const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ra.h32(r) + i * 8));
      mins[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_madd_epi16(mv, s)), _mm_set1_ps(dmin * da), mins[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(acc[r]) - hsum4(mins[r]);
}

// Q6_K: 6-bit codes u (0..63), w = d * sc16 * (u - 32); the -32 term is sum_j sc_j * sum16(a_j).
template <int R>
void row_q6_k(const void* row, int64_t k, const RowArgs& ra, float* out) {
  const BlockQ6K* b = static_cast<const BlockQ6K*>(row);
  const __m512i m4z = _mm512_set1_epi8(15), m30z = _mm512_set1_epi8(0x30);
  // 16-bit shift counts per 256-bit half: qh << 4 | qh << 2 (sub-blocks 4h, 4h+1), qh >> 0 |
  // qh >> 2 (4h+2, 4h+3); sel picks scale 0, 1, 2, 3 for each 8 int16 pairs (16 elements).
  constexpr int64_t c4 = 0x0004000400040004, c2 = 0x0002000200020002;
  const __m512i shl01 = _mm512_set_epi64(c2, c2, c2, c2, c4, c4, c4, c4);
  const __m512i shr23 = _mm512_set_epi64(c2, c2, c2, c2, 0, 0, 0, 0);
  const __m512i sel = _mm512_set_epi64(0x0003000300030003, 0x0003000300030003, 0x0002000200020002, 0x0002000200020002,
                                       0x0001000100010001, 0x0001000100010001, 0, 0);
  __m512 acc[R];
  __m512 off[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm512_setzero_ps();
    off[r] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < k / 256; ++i) {
    const BlockQ6K& blk = b[i];
    prefetch_ahead(&blk, kAhead);
    prefetch_ahead(&blk, kAhead + 64);
    prefetch_ahead(&blk, kAhead + 128);
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
    const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
    __m512i isum[R], isum2[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) isum[r] = isum2[r] = _mm512_setzero_si512();
    // Two 32-element sub-blocks per zmm: half h of the super-block holds sub-blocks 4h..4h+3;
    // ql bytes 64h..64h+63 carry the low nibbles of 4h (bytes 0-31) and 4h+1 (32-63) and the
    // high nibbles of 4h+2 and 4h+3; qh bits 0-1 / 2-3 / 4-5 / 6-7 are the top bits of 4h..4h+3.
    const __m512i sc16z = _mm512_castsi256_si512(sc16);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i l = _mm512_loadu_si512(blk.ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h)));
      __m512i u[2];
      u[0] = _mm512_or_si512(_mm512_and_si512(l, m4z), _mm512_and_si512(_mm512_sllv_epi16(qh, shl01), m30z));
      u[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4z), _mm512_and_si512(_mm512_srlv_epi16(qh, shr23), m30z));
#pragma GCC unroll 2
      for (int q = 0; q < 2; ++q) {
        const int s = 4 * h + 2 * q;  // sub-blocks s, s + 1: 16-element scales 2s .. 2s + 3
        const __m512i scs = _mm512_permutexvar_epi16(_mm512_add_epi16(sel, _mm512_set1_epi16(static_cast<int16_t>(2 * s))), sc16z);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const __m512i a = _mm512_loadu_si512(ra.a(r) + i * 256 + 32 * s);
          if (q) isum2[r] = _mm512_dpwssd_epi32(isum2[r], _mm512_maddubs_epi16(u[q], a), scs);
          else isum[r] = _mm512_dpwssd_epi32(isum[r], _mm512_maddubs_epi16(u[q], a), scs);
        }
      }
    }
    const float d = h2f(blk.d);
    const __m512i sc32 = _mm512_cvtepi8_epi32(sc8);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const float dd = d * ra.d(r)[i];
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(isum[r], isum2[r])), _mm512_set1_ps(dd), acc[r]);
      const __m512i s = _mm512_loadu_si512(ra.s16(r) + i * 16);
      off[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_mullo_epi32(sc32, s)), _mm512_set1_ps(32.f * dd), off[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(_mm512_sub_ps(acc[r], off[r]));
}

// Float weights: f32 FMA over the row, F16 through vcvtph2ps, BF16 by a 16-bit shift.
template <int R>
void row_float(DType t, const void* row, int64_t k, const float* x, float* out) {
  const size_t esize = t == DType::F32 ? 4 : 2;
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  auto load16 = [&](int64_t at) -> __m512 {
    if (t == DType::F32) return _mm512_loadu_ps(static_cast<const float*>(row) + at);
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(row) + at));
    if (t == DType::F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  };
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    prefetch_ahead(static_cast<const uint8_t*>(row) + i * esize, kAhead);
    if (t == DType::F32) prefetch_ahead(static_cast<const uint8_t*>(row) + i * esize, kAhead + 64);
    const __m512 w0 = load16(i), w1 = load16(i + 16);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      acc0[r] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + r * k + i), acc0[r]);
      acc1[r] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + r * k + i + 16), acc1[r]);
    }
  }
  float tail[R] = {};
  if (i < k) {
    const float* w32 = static_cast<const float*>(row);
    const uint16_t* w16 = static_cast<const uint16_t*>(row);
    for (; i < k; ++i) {
      const float w = t == DType::F32 ? w32[i] : t == DType::F16 ? fp16_to_f32(w16[i]) : bf16_to_f32(w16[i]);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) tail[r] += w * x[r * k + i];
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r])) + tail[r];
}

template <int R>
void row_dispatch(const WeightView& w, const void* row, const float* x, const RowArgs& ra, float* out) {
  const int64_t k = w.cols;
  switch (w.type) {
    case DType::Q8_0: return row_q8_0<R>(row, k, ra, out);
    case DType::Q4_0: return row_q45_0<R, false>(row, k, ra, out);
    case DType::Q5_0: return row_q45_0<R, true>(row, k, ra, out);
    case DType::Q4_K: return row_q45_k<R, false>(row, k, ra, out);
    case DType::Q5_K: return row_q45_k<R, true>(row, k, ra, out);
    case DType::Q6_K: return row_q6_k<R>(row, k, ra, out);
    default: return row_float<R>(w.type, row, k, x + ra.r0 * k, out);
  }
}

// y[:, n0:n1) by row kernels: each weight row is read once and dotted with 4 x rows at a time.
void rows_range(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y) {
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
  // The activation row tiles (4 rows each), set up once rather than once per weight row.
  thread_local std::vector<RowArgs> tiles;
  tiles.clear();
  // Q4_K / Q5_K: 8-row tiles while 8 rows remain (each super-block decoded once for 8 rows).
  const bool k4 = w.type == DType::Q4_K || w.type == DType::Q5_K;
  for (int64_t r0 = 0; r0 < m;) {
    const int64_t n = k4 && m - r0 >= 8 ? 8 : std::min<int64_t>(4, m - r0);
    tiles.emplace_back(&qa, r0, n);
    r0 += n;
  }
  float out[RowArgs::kMax];
  // With several tiles of f32 activation rows (float weights, 8 KB per row at k = 2048), all
  // tiles together overflow L1 when each weight row visits every tile in turn. Then the weight
  // rows go in blocks of about 256 KB (they stay in L2) and each tile sweeps a whole block while
  // its activations stay in L1. Quantized activations are 4x smaller and keep the simple order.
  const bool float_acts = w.type == DType::F32 || w.type == DType::F16 || w.type == DType::BF16;
  const int64_t row_bytes = std::max<int64_t>(1, static_cast<int64_t>(w.row_stride));
  const int64_t block = tiles.size() > 1 && float_acts ? std::max<int64_t>(1, (256 << 10) / row_bytes) : 1;
  // One weight row dotted with one tile; y gets the tile's outputs of column n.
  auto dot_tile = [&](int64_t n, const RowArgs& ra) {
    const void* row = base + n * w.row_stride;
    const int64_t rr = ra.rows;
    switch (rr) {
      case 8:
        if (w.type == DType::Q5_K) row_q45_k<8, true>(row, w.cols, ra, out);
        else row_q45_k<8, false>(row, w.cols, ra, out);
        break;
      case 4: row_dispatch<4>(w, row, x, ra, out); break;
      case 3: row_dispatch<3>(w, row, x, ra, out); break;
      case 2: row_dispatch<2>(w, row, x, ra, out); break;
      default: row_dispatch<1>(w, row, x, ra, out); break;
    }
    for (int64_t r = 0; r < rr; ++r) y[(ra.r0 + r) * w.rows + n] = out[r];
  };
  // block == 1: each weight row visits every tile in turn.
  for (int64_t nb = n0; nb < n1; nb += block) {
    const int64_t ne = std::min(n1, nb + block);
    for (const RowArgs& ra : tiles)
      for (int64_t n = nb; n < ne; ++n) dot_tile(n, ra);
  }
}

// ---- rows interleaved 16 at a time (WeightLayout::X16: Q4_K and Q8_0) -----------------------------
constexpr size_t kQ4KTile = kX16Rows * sizeof(BlockQ4K);  // 2304 bytes: 256 columns of 16 rows
constexpr size_t kQ80Tile = 2 * kX16Rows * sizeof(BlockQ8_0);  // 1088 bytes: 64 columns (2 blocks) of 16 rows

// One 64-byte load holds 4 columns of 16 weight rows: the low nibbles (sub-block 2t) and the
// high nibbles kept in place (sub-block 2t + 1, 16 x the code, undone in its scale) each go
// through one VNNI dot product with 4 activation bytes broadcast, one int32 lane per weight row.
// The 6-bit scales and mins come as byte planes (byte b of all 16 rows together), unpacked 16
// rows at a time.

// Scales (sc) and mins (mn) of sub-blocks 0..7 of a tile's 16 rows, one byte per row.
inline void x16_scales(const uint8_t* tile, __m128i sc[8], __m128i mn[8]) {
  const __m128i m63 = _mm_set1_epi8(63), m15 = _mm_set1_epi8(15), m48 = _mm_set1_epi8(48);
  __m128i p[12];
#pragma GCC unroll 12
  for (int b = 0; b < 12; ++b) p[b] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + 64 + 16 * b));
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    sc[j] = _mm_and_si128(p[j], m63);
    mn[j] = _mm_and_si128(p[4 + j], m63);
    // The top two bits of bytes j and 4 + j are bits 4-5 of sub-block 4 + j's scale and min.
    sc[4 + j] = _mm_or_si128(_mm_and_si128(p[8 + j], m15), _mm_and_si128(_mm_srli_epi16(p[j], 2), m48));
    mn[4 + j] = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(p[8 + j], 4), m15), _mm_and_si128(_mm_srli_epi16(p[4 + j], 2), m48));
  }
}

inline __m512 x16_float(__m128i bytes, __m512 mul) { return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes)), mul); }

// out[r][0..16) = the 16 weight rows of group `g` (nsb super-blocks) dotted with activation
// rows ra.r0 + r, r < R. R = 1 keeps two accumulators per sub-block so that the dot product
// latency does not bound the loop.
template <int R>
void x16_rows(const uint8_t* g, int64_t nsb, const RowArgs& ra, float (*out)[16]) {
  constexpr int NA = R == 1 ? 2 : 1;
  const __m512i lo_mask = _mm512_set1_epi8(0x0F), hi_mask = _mm512_set1_epi8(static_cast<char>(0xF0));
  __m512 acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nsb; ++i) {
    const uint8_t* tile = g + i * kQ4KTile;
#pragma GCC unroll 4
    for (int l = 0; l < 4; ++l) prefetch_ahead(tile + 64 * l, kAhead);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile)));
    const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + 32)));
    const __m512 d16 = _mm512_mul_ps(d, _mm512_set1_ps(1.f / 16));
    __m128i sc[8], mn[8];
    x16_scales(tile, sc, mn);
    __m512 fs[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) fs[r] = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) {
      __m512i lo[R][NA], hi[R][NA];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
        for (int e = 0; e < NA; ++e) lo[r][e] = hi[r][e] = _mm512_setzero_si512();
      const uint8_t* codes = tile + 256 + 512 * t;
#pragma GCC unroll 8
      for (int q = 0; q < 8; ++q) {
        prefetch_ahead(codes + 64 * q, kAhead);
        const __m512i raw = _mm512_loadu_si512(codes + 64 * q);
        const __m512i wl = _mm512_and_si512(raw, lo_mask), wh = _mm512_and_si512(raw, hi_mask);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const int8_t* a = ra.a(r) + i * 256 + 64 * t + 4 * q;
          lo[r][q % NA] = _mm512_dpbusd_epi32(lo[r][q % NA], wl, _mm512_set1_epi32(load4(a)));
          hi[r][q % NA] = _mm512_dpbusd_epi32(hi[r][q % NA], wh, _mm512_set1_epi32(load4(a + 32)));
        }
      }
      const __m512 sl = x16_float(sc[2 * t], d), sh = x16_float(sc[2 * t + 1], d16);
      const __m512 ml = x16_float(mn[2 * t], dmin), mh = x16_float(mn[2 * t + 1], dmin);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        __m512i l = lo[r][0], h = hi[r][0];
        if (NA == 2) {
          l = _mm512_add_epi32(l, lo[r][NA - 1]);
          h = _mm512_add_epi32(h, hi[r][NA - 1]);
        }
        const float* s32 = ra.fs32(r) + i * 8 + 2 * t;
        fs[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(l), sl, fs[r]);
        fs[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(h), sh, fs[r]);
        fs[r] = _mm512_fnmadd_ps(ml, _mm512_set1_ps(s32[0]), fs[r]);
        fs[r] = _mm512_fnmadd_ps(mh, _mm512_set1_ps(s32[1]), fs[r]);
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r] = _mm512_fmadd_ps(fs[r], _mm512_set1_ps(ra.d(r)[i]), acc[r]);
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(out[r], acc[r]);
}

// Q8_0: per 32-column block, 8 loads of unsigned codes (q + 128), each one VNNI dot product per
// activation row; the +128 is taken out by starting the sum at -128 * sum(a). A tile holds two
// blocks (nb is even).
template <int R>
void x16_rows_q8(const uint8_t* g, int64_t nb, const RowArgs& ra, float (*out)[16]) {
  constexpr int NA = R <= 2 ? 2 : 1;
  __m512 acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* tile = g + (i / 2) * kQ80Tile;
    const int e = static_cast<int>(i % 2);
    const uint8_t* codes = tile + 64 + 512 * e;
#pragma GCC unroll 8
    for (int l = 0; l < 8; ++l) prefetch_ahead(codes + 64 * l, kAhead);
    if (e == 0) prefetch_ahead(tile, kAhead);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + 32 * e)));
    __m512i ai[R][NA];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      ai[r][0] = _mm512_set1_epi32(-128 * ra.s32(r)[i]);
      if (NA == 2) ai[r][NA - 1] = _mm512_setzero_si512();
    }
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) {
      const __m512i c = _mm512_loadu_si512(codes + 64 * q);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
        ai[r][q % NA] = _mm512_dpbusd_epi32(ai[r][q % NA], c, _mm512_set1_epi32(load4(ra.a(r) + i * 32 + 4 * q)));
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512i sum = NA == 2 ? _mm512_add_epi32(ai[r][0], ai[r][NA - 1]) : ai[r][0];
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(d, _mm512_set1_ps(ra.d(r)[i])), acc[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(out[r], acc[r]);
}

template <int R>
inline void x16_dispatch(DType t, const uint8_t* g, int64_t nb, const RowArgs& ra, float (*out)[16]) {
  if (t == DType::Q4_K) x16_rows<R>(g, nb, ra, out);
  else x16_rows_q8<R>(g, nb, ra, out);
}

// y[:, n0:n1) for interleaved weights (n0, n1 multiples of 16) by 16-row groups, each dotted
// with the activation rows 4 at a time (a group of 16 rows is at most 72 KB (Q4_K) or 136 KB
// (Q8_0) at K = 8192, so the second and later visits read it from L2).
void x16_rows_range(const WeightView& w, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y) {
  const int64_t nb = w.cols / traits(w.type).block_size;
  const size_t group_bytes = static_cast<size_t>(nb) * kX16Rows * traits(w.type).block_bytes;
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
  thread_local std::vector<RowArgs> tiles;
  tiles.clear();
  for (int64_t r0 = 0; r0 < m; r0 += 4) tiles.emplace_back(&qa, r0, std::min<int64_t>(4, m - r0));
  alignas(64) float out[4][16];
  for (int64_t g = n0 / kX16Rows; g < n1 / kX16Rows; ++g) {
    const uint8_t* gp = base + static_cast<size_t>(g) * group_bytes;
    for (const RowArgs& ra : tiles) {
      switch (ra.rows) {
        case 4: x16_dispatch<4>(w.type, gp, nb, ra, out); break;
        case 3: x16_dispatch<3>(w.type, gp, nb, ra, out); break;
        case 2: x16_dispatch<2>(w.type, gp, nb, ra, out); break;
        default: x16_dispatch<1>(w.type, gp, nb, ra, out); break;
      }
      for (int64_t r = 0; r < ra.rows; ++r)
        std::memcpy(y + (ra.r0 + r) * w.rows + g * kX16Rows, out[r], sizeof(out[r]));
    }
  }
}

// ---- panel kernels ----------------------------------------------------------------------------
// For many activation rows. The weight rows are taken 32 at a time (a panel = 32 output
// columns). A chunk of the panel's K range is decoded once into a transposed layout that fits
// in L1, then multiplied with every activation row, MR rows at a time:
//   quantized: 32-element sub-block b holds codes[8 quads][32 cols][4 bytes] (1 KB) so that one
//              zmm load gives 16 columns x 4 consecutive k, dotted (VNNI dpbusd) with 4 bytes
//              of one activation row broadcast; per (sub-block, column) f32 scale ws and min wm.
//   f32 / f16: floats [k][32 cols]; bf16 with BF16 dot products: bf16 pairs [k/2][32 cols][2].

constexpr int kNR = 32;                // columns (weight rows) per panel
constexpr int64_t kQuantChunk = 512;   // K elements per decoded quantized chunk (16 KB of codes)
constexpr int64_t kFloatChunk = 128;   // K elements per decoded f32 chunk (16 KB)

// The f32 accumulators of an MR x 32 micro-tile (rows kNR floats apart) in and out of registers.
template <int MR>
[[gnu::always_inline]] inline void load_tile(__m512 (&acc)[MR][2], const float* src) {
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    acc[r][0] = _mm512_loadu_ps(src + r * kNR);
    acc[r][1] = _mm512_loadu_ps(src + r * kNR + 16);
  }
}
template <int MR>
[[gnu::always_inline]] inline void store_tile(float* dst, const __m512 (&acc)[MR][2]) {
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    _mm512_storeu_ps(dst + r * kNR, acc[r][0]);
    _mm512_storeu_ps(dst + r * kNR + 16, acc[r][1]);
  }
}

// While a panel chunk is multiplied, the next chunk's weight rows (up to 32 rows, `bytes` each
// from byte `offset` of rows nc0..) are pulled into L1 (16 KB; into L2 only was 2-5% slower),
// a share of the lines before each row tile: 32 short strided runs defeat the hardware
// prefetcher, and the decode would otherwise wait on memory for each of them.
class NextChunkPrefetch {
 public:
  NextChunkPrefetch(const WeightView& w, int64_t nc0, int64_t n1, int64_t offset, int64_t bytes, int64_t tiles)
      : NextChunkPrefetch(static_cast<const uint8_t*>(w.data) +
                              (nc0 < n1 ? nc0 * static_cast<int64_t>(w.row_stride) + offset : 0),
                          std::min<int64_t>(kNR, n1 - nc0), static_cast<int64_t>(w.row_stride), bytes, tiles) {}
  // `runs` runs of `bytes` bytes, `stride` apart from `first` (none if runs <= 0).
  NextChunkPrefetch(const uint8_t* first, int64_t runs, int64_t stride, int64_t bytes, int64_t tiles)
      : next_(first), stride_(stride), row_lines_(std::max<int64_t>(1, (bytes + 63) / 64)) {
    lines_ = runs > 0 ? runs * row_lines_ : 0;
    per_tile_ = (lines_ + std::max<int64_t>(1, tiles) - 1) / std::max<int64_t>(1, tiles);
  }
  void step() {
    for (const int64_t e = std::min(lines_, line_ + per_tile_); line_ < e; ++line_)
      _mm_prefetch(reinterpret_cast<const char*>(next_ + (line_ / row_lines_) * stride_ + (line_ % row_lines_) * 64),
                   _MM_HINT_T0);
  }

 private:
  const uint8_t* next_ = nullptr;
  int64_t stride_, row_lines_, lines_ = 0, per_tile_ = 0, line_ = 0;
};

struct QPanel {
  uint8_t* q;   // [nsb][8][32][4]
  float* ws;    // [nsb][2][32]   (the two 16-element halves; equal unless Q6_K)
  float* wm;    // [nsb][32]
};

// Unsigned codes of sub-block `sb` of a weight row as one ymm, with its scales (see Codes).
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

// Decodes sub-blocks [sb0, sb0 + nsb) of weight rows n0..n0+ncols-1 into p (columns >= ncols
// are zero).
template <DType T>
void decode_qpanel(const WeightView& w, int64_t n0, int ncols, int64_t sb0, int64_t nsb, QPanel& p) {
  alignas(64) uint32_t tmp[kNR][8];  // [slot][dword]
  for (int64_t b = 0; b < nsb; ++b) {
    float* ws = p.ws + b * 2 * kNR;
    float* wm = p.wm + b * kNR;
    for (int c = 0; c < kNR; ++c) {
      uint32_t* slot = tmp[(c & 16) | transpose_slot(c & 15)];
      if (c < ncols) {
        const uint8_t* row = static_cast<const uint8_t*>(w.data) + (n0 + c) * w.row_stride;
        float s2[2], m1;
        const __m256i u = codes32<T>(row, sb0 + b, s2, m1);
        _mm256_store_si256(reinterpret_cast<__m256i*>(slot), u);
        ws[c] = s2[0];
        ws[kNR + c] = s2[1];
        wm[c] = m1;
      } else {
        _mm256_store_si256(reinterpret_cast<__m256i*>(slot), _mm256_setzero_si256());
        ws[c] = ws[kNR + c] = wm[c] = 0;
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
// scales (Q6_K); MINS: per-sub-block mins (Q4_K/Q5_K).
template <int MR, int OFF, bool SPLIT, bool MINS>
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
      if (MINS) {
        const __m512 m0 = _mm512_load_ps(p.wm + b * kNR), m1 = _mm512_load_ps(p.wm + b * kNR + 16);
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
          const __m512 sv = _mm512_set1_ps(fsr[r][b]);
          tmp[r][0] = _mm512_fnmadd_ps(sv, m0, tmp[r][0]);
          tmp[r][1] = _mm512_fnmadd_ps(sv, m1, tmp[r][1]);
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

// The same for 32-element types (Q8_0 / Q4_0 / Q5_0: one activation scale per sub-block, no
// split scales, no mins): each sub-block's int32 sums go straight into the f32 accumulators,
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
void qpanel_range(const WeightView& w, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y) {
  using Tr = WTraits<T>;
  constexpr int off = Tr::kOff;
  constexpr bool split = Tr::kSplit, mins = Tr::kMins;
  const int64_t k = w.cols, nsub = k / 32, csub = kQuantChunk / 32;
  thread_local std::vector<uint8_t, std::allocator<uint8_t>> qbuf;
  thread_local std::vector<float> fbuf, acc;
  qbuf.resize(static_cast<size_t>(csub) * 1024 + 64);
  fbuf.resize(static_cast<size_t>(csub) * 3 * kNR + 16);
  acc.resize(static_cast<size_t>(m) * kNR);
  uint8_t* qa64 = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(qbuf.data()) + 63) & ~uintptr_t{63});
  float* fa64 = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(fbuf.data()) + 63) & ~uintptr_t{63});
  QPanel p{qa64, fa64, fa64 + csub * 2 * kNR};
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
      if constexpr (Tr::kSub == 1) {
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

// ---- float panels -------------------------------------------------------------------------------

constexpr int kFMR = 8;  // activation rows per float micro-tile

// In-register transpose of a 16 x 16 f32 tile: on return r[j] holds column j of the input.
// Pairs of rows are interleaved (ps), then pairs of pairs (pd): r[4g + e] lane l then holds
// rows 4g..4g+3 at column 4l + e; 128-bit lanes are regrouped last.
inline void transpose16(__m512 r[16]) {
  __m512d t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_castps_pd(_mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]));
    t[2 * i + 1] = _mm512_castps_pd(_mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]));
  }
  __m512 q[16];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    q[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t[4 * g], t[4 * g + 2]));
    q[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t[4 * g], t[4 * g + 2]));
    q[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t[4 * g + 1], t[4 * g + 3]));
    q[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t[4 * g + 1], t[4 * g + 3]));
  }
#pragma GCC unroll 4
  for (int e = 0; e < 4; ++e) {
    const __m512 u0 = _mm512_shuffle_f32x4(q[e], q[4 + e], 0x88), u1 = _mm512_shuffle_f32x4(q[e], q[4 + e], 0xDD);
    const __m512 u2 = _mm512_shuffle_f32x4(q[8 + e], q[12 + e], 0x88), u3 = _mm512_shuffle_f32x4(q[8 + e], q[12 + e], 0xDD);
    r[e] = _mm512_shuffle_f32x4(u0, u2, 0x88);
    r[4 + e] = _mm512_shuffle_f32x4(u1, u3, 0x88);
    r[8 + e] = _mm512_shuffle_f32x4(u0, u2, 0xDD);
    r[12 + e] = _mm512_shuffle_f32x4(u1, u3, 0xDD);
  }
}

// 16 elements of a float weight row as f32.
inline __m512 load_f16x(DType t, const uint8_t* row, int64_t k0) {
  if (t == DType::F32) return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k0);
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + k0));
  return t == DType::F16 ? _mm512_cvtph_ps(v) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

// Rows n0..n0+ncols-1, elements [k0, k0 + kc) as f32 [kc][32].
void decode_fpanel(const WeightView& w, int64_t n0, int ncols, int64_t k0, int64_t kc, float* out) {
  if (ncols == kNR && kc % 16 == 0) {
    // Full panel: 16 x 16 tiles converted and transposed in registers.
    const uint8_t* base = static_cast<const uint8_t*>(w.data) + n0 * w.row_stride;
    for (int cb = 0; cb < kNR; cb += 16)
      for (int64_t i = 0; i < kc; i += 16) {
        __m512 r[16];
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) r[j] = load_f16x(w.type, base + (cb + j) * w.row_stride, k0 + i);
        transpose16(r);
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) _mm512_store_ps(out + (i + j) * kNR + cb, r[j]);
      }
    return;
  }
  thread_local std::vector<float> rows;
  rows.resize(static_cast<size_t>(kNR * kFloatChunk));
  for (int c = 0; c < kNR; ++c) {
    float* dst = rows.data() + c * kFloatChunk;
    if (c >= ncols) {
      std::fill(dst, dst + kc, 0.f);
      continue;
    }
    const uint8_t* row = static_cast<const uint8_t*>(w.data) + (n0 + c) * w.row_stride;
    if (w.type == DType::F32) {
      std::memcpy(dst, reinterpret_cast<const float*>(row) + k0, kc * sizeof(float));
    } else {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(row) + k0;
      int64_t i = 0;
      for (; i + 16 <= kc; i += 16) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i));
        _mm512_storeu_ps(dst + i, w.type == DType::F16 ? _mm512_cvtph_ps(v)
                                                        : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16)));
      }
      for (; i < kc; ++i) dst[i] = w.type == DType::F16 ? fp16_to_f32(h[i]) : bf16_to_f32(h[i]);
    }
  }
  const __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                         _mm512_set1_epi32(static_cast<int>(kFloatChunk)));
  for (int64_t i = 0; i < kc; ++i) {
    _mm512_store_ps(out + i * kNR, _mm512_i32gather_ps(idx, rows.data() + i, 4));
    _mm512_store_ps(out + i * kNR + 16, _mm512_i32gather_ps(idx, rows.data() + 16 * kFloatChunk + i, 4));
  }
}

template <int MR>
void fpanel_kernel(const float* p, int64_t kc, const float* x, int64_t ldx, float* acc_out) {
  __m512 acc[MR][2];
  load_tile<MR>(acc, acc_out);
  for (int64_t i = 0; i < kc; ++i) {
    const __m512 w0 = _mm512_load_ps(p + i * kNR), w1 = _mm512_load_ps(p + i * kNR + 16);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 xv = _mm512_set1_ps(x[r * ldx + i]);
      acc[r][0] = _mm512_fmadd_ps(w0, xv, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(w1, xv, acc[r][1]);
    }
  }
  store_tile<MR>(acc_out, acc);
}

template <int MR>
void fpanel_rows(const float* p, int64_t kc, const float* x, int64_t ldx, int64_t r0, int64_t r1, float* acc) {
  if constexpr (MR > 0) {
    for (; r0 + MR <= r1; r0 += MR) fpanel_kernel<MR>(p, kc, x + r0 * ldx, ldx, acc + r0 * kNR);
    fpanel_rows<MR / 2>(p, kc, x, ldx, r0, r1, acc);
  }
}

void fpanel_range(const WeightView& w, const float* x, int64_t m, int64_t n0, int64_t n1, float* y) {
  const int64_t k = w.cols, esize = w.type == DType::F32 ? 4 : 2;
  thread_local std::vector<float> pbuf, acc;
  pbuf.resize(static_cast<size_t>(kFloatChunk * kNR + 16));
  acc.resize(static_cast<size_t>(m) * kNR);
  float* p = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(pbuf.data()) + 63) & ~uintptr_t{63});
  for (int64_t c0 = n0; c0 < n1; c0 += kNR) {
    const int ncols = static_cast<int>(std::min<int64_t>(kNR, n1 - c0));
    std::fill(acc.begin(), acc.end(), 0.f);
    for (int64_t k0 = 0; k0 < k; k0 += kFloatChunk) {
      const int64_t kc = std::min(kFloatChunk, k - k0);
      decode_fpanel(w, c0, ncols, k0, kc, p);
      const bool last_k = k0 + kFloatChunk >= k;
      const int64_t nc0 = last_k ? c0 + kNR : c0, nk0 = last_k ? 0 : k0 + kFloatChunk;
      NextChunkPrefetch pf(w, nc0, n1, nk0 * esize, std::min(kFloatChunk, k - nk0) * esize, m / kFMR);
      int64_t r0 = 0;
      for (; r0 + kFMR <= m; r0 += kFMR) {
        pf.step();
        fpanel_kernel<kFMR>(p, kc, x + k0 + r0 * k, k, acc.data() + r0 * kNR);
      }
      fpanel_rows<kFMR / 2>(p, kc, x + k0, k, r0, m, acc.data());
    }
    for (int64_t r = 0; r < m; ++r) std::memcpy(y + r * w.rows + c0, acc.data() + r * kNR, ncols * sizeof(float));
  }
}

// ---- bf16 panels (BF16 dot products) ----------------------------------------------------------

constexpr int64_t kBf16Chunk = 256;  // K elements per decoded chunk: 128 pairs x 32 cols x 4 B = 16 KB

// Rows n0..n0+ncols-1, elements [k0, k0 + kc) as bf16 pairs [kc/2][32 cols] (dwords); an odd
// last element is paired with zero.
void decode_bpanel(const WeightView& w, int64_t n0, int ncols, int64_t k0, int64_t kc, uint32_t* out) {
  if (ncols == kNR && kc % 32 == 0) {
    // Full panel: 16 rows x 16 pairs (dwords) at a time, transposed in registers as floats.
    const uint8_t* base = static_cast<const uint8_t*>(w.data) + n0 * w.row_stride + k0 * 2;
    for (int cb = 0; cb < kNR; cb += 16)
      for (int64_t i = 0; i < kc / 2; i += 16) {
        __m512 r[16];
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) r[j] = _mm512_loadu_ps(base + (cb + j) * w.row_stride + i * 4);
        transpose16(r);
#pragma GCC unroll 16
        for (int j = 0; j < 16; ++j) _mm512_store_ps(reinterpret_cast<float*>(out + (i + j) * kNR + cb), r[j]);
      }
    return;
  }
  thread_local std::vector<uint32_t> rows;
  const int64_t pairs = (kc + 1) / 2, cap = kBf16Chunk / 2;
  rows.resize(static_cast<size_t>(kNR * cap));
  for (int c = 0; c < kNR; ++c) {
    uint32_t* dst = rows.data() + c * cap;
    if (c >= ncols) {
      std::fill(dst, dst + pairs, 0u);
      continue;
    }
    const uint8_t* row = static_cast<const uint8_t*>(w.data) + (n0 + c) * w.row_stride + k0 * 2;
    std::memcpy(dst, row, static_cast<size_t>(kc) * 2);
    if (kc % 2) dst[pairs - 1] &= 0xffffu;  // the high half read past kc: zero it
  }
  const __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                         _mm512_set1_epi32(static_cast<int>(cap)));
  for (int64_t i = 0; i < pairs; ++i) {
    _mm512_store_si512(out + i * kNR, _mm512_i32gather_epi32(idx, rows.data() + i, 4));
    _mm512_store_si512(out + i * kNR + 16, _mm512_i32gather_epi32(idx, rows.data() + 16 * cap + i, 4));
  }
}

// acc[MR][32] += xb rows (bf16 pairs, row stride ldx dwords) · panel of `pairs` pairs.
template <int MR>
void bpanel_kernel(const uint32_t* p, int64_t pairs, const uint32_t* xb, int64_t ldx, float* acc_out) {
  __m512 acc[MR][2];
  load_tile<MR>(acc, acc_out);
  for (int64_t i = 0; i < pairs; ++i) {
    const __m512bh w0 = (__m512bh)_mm512_loadu_si512(p + i * kNR);
    const __m512bh w1 = (__m512bh)_mm512_loadu_si512(p + i * kNR + 16);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(static_cast<int>(xb[r * ldx + i]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], w0, xv);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], w1, xv);
    }
  }
  store_tile<MR>(acc_out, acc);
}

template <int MR>
void bpanel_rows(const uint32_t* p, int64_t pairs, const uint32_t* xb, int64_t ldx, int64_t r0, int64_t r1, float* acc) {
  if constexpr (MR > 0) {
    for (; r0 + MR <= r1; r0 += MR) bpanel_kernel<MR>(p, pairs, xb + r0 * ldx, ldx, acc + r0 * kNR);
    bpanel_rows<MR / 2>(p, pairs, xb, ldx, r0, r1, acc);
  }
}

}  // namespace

void bf16_pairs_avx512(const float* x, int64_t r0, int64_t r1, int64_t k, uint32_t* xb) {
  const int64_t kp = (k + 1) / 2;
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * k;
    uint32_t* dst = xb + r * kp;
    int64_t i = 0;
    for (; i + 32 <= k; i += 32) {
      const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(xr + i + 16), _mm512_loadu_ps(xr + i));
      _mm512_storeu_si512(dst + i / 2, (__m512i)v);
    }
    for (; i < k; i += 2) {
      const uint32_t lo = f32_to_bf16(xr[i]);
      const uint32_t hi = i + 1 < k ? f32_to_bf16(xr[i + 1]) : 0;
      dst[i / 2] = lo | (hi << 16);
    }
  }
}

namespace {

// xb: the activations as bf16 pairs (QuantActs::xb), or null to convert them here.
void bpanel_range(const WeightView& w, const float* x, const uint32_t* xb, int64_t m, int64_t n0, int64_t n1, float* y) {
  const int64_t k = w.cols, kp = (k + 1) / 2;  // pairs per row
  thread_local std::vector<uint32_t> pbuf, xbuf;
  thread_local std::vector<float> acc;
  if (xb == nullptr) {
    xbuf.resize(static_cast<size_t>(m * kp));
    bf16_pairs_avx512(x, 0, m, k, xbuf.data());
    xb = xbuf.data();
  }
  pbuf.resize(static_cast<size_t>(kBf16Chunk / 2 * kNR + 16));
  acc.resize(static_cast<size_t>(m) * kNR);
  uint32_t* p = reinterpret_cast<uint32_t*>((reinterpret_cast<uintptr_t>(pbuf.data()) + 63) & ~uintptr_t{63});
  for (int64_t c0 = n0; c0 < n1; c0 += kNR) {
    const int ncols = static_cast<int>(std::min<int64_t>(kNR, n1 - c0));
    std::fill(acc.begin(), acc.end(), 0.f);
    for (int64_t k0 = 0; k0 < k; k0 += kBf16Chunk) {
      const int64_t kc = std::min(kBf16Chunk, k - k0);
      decode_bpanel(w, c0, ncols, k0, kc, p);
      const bool last_k = k0 + kBf16Chunk >= k;
      const int64_t nc0 = last_k ? c0 + kNR : c0, nk0 = last_k ? 0 : k0 + kBf16Chunk;
      NextChunkPrefetch pf(w, nc0, n1, nk0 * 2, std::min(kBf16Chunk, k - nk0) * 2, m / kFMR);
      int64_t r0 = 0;
      for (; r0 + kFMR <= m; r0 += kFMR) {
        pf.step();
        bpanel_kernel<kFMR>(p, (kc + 1) / 2, xb + k0 / 2 + r0 * kp, kp, acc.data() + r0 * kNR);
      }
      bpanel_rows<kFMR / 2>(p, (kc + 1) / 2, xb + k0 / 2, kp, r0, m, acc.data());
    }
    for (int64_t r = 0; r < m; ++r) std::memcpy(y + r * w.rows + c0, acc.data() + r * kNR, ncols * sizeof(float));
  }
}

// ---- BF16 in 32-row panels (WeightLayout::P32) ------------------------------------------------

// The panels are already in the kernel's layout: the weights are read where they lie.
void bpanel_range_p32(const WeightView& w, const float* x, const uint32_t* xb, int64_t m, int64_t n0, int64_t n1,
                      float* y) {
  const int64_t k = w.cols, kp = k / 2;
  thread_local std::vector<uint32_t> xbuf;
  thread_local std::vector<float> acc;
  if (xb == nullptr) {
    xbuf.resize(static_cast<size_t>(m * kp));
    bf16_pairs_avx512(x, 0, m, k, xbuf.data());
    xb = xbuf.data();
  }
  acc.resize(static_cast<size_t>(m) * kNR);
  for (int64_t c0 = n0; c0 < n1; c0 += kNR) {
    const uint32_t* panel = static_cast<const uint32_t*>(w.data) + c0 * kp;
    std::fill(acc.begin(), acc.end(), 0.f);
    // The whole K range per row tile: the accumulators stay in registers from the first pair to
    // the last, and the panel (64 bytes per column: 128 KB at K = 2048) is read from L2 by the tiles
    // after the first. Against 256-column chunks kept in L1 (the row layout's decoded panels),
    // BF16 pp512 of the 1B-shaped program 411-421 -> 428-433 tok/s (three pairs, alternated;
    // 4096-column chunks with the next chunk prefetched: the same 428-433).
    int64_t r0 = 0;
    for (; r0 + kFMR <= m; r0 += kFMR) bpanel_kernel<kFMR>(panel, kp, xb + r0 * kp, kp, acc.data() + r0 * kNR);
    bpanel_rows<kFMR / 2>(panel, kp, xb, kp, r0, m, acc.data());
    for (int64_t r = 0; r < m; ++r) std::memcpy(y + r * w.rows + c0, acc.data() + r * kNR, kNR * sizeof(float));
  }
}

// Few activation rows (f32, not rounded to bf16) against one panel: the bf16 pairs widened to
// f32 (column 2i: the low half shifted up, 2i + 1: the high half masked), two FMAs per pair.
// One row keeps separate even / odd accumulators so the FMA latency does not bound the loop.
template <int R>
void p32_rows(const uint32_t* p, int64_t kp, const float* x, int64_t ldx, float (*out)[kNR]) {
  constexpr int NA = R == 1 ? 2 : 1;
  const __m512i hi = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m512 acc[R][NA][2];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int e = 0; e < NA; ++e) acc[r][e][0] = acc[r][e][1] = _mm512_setzero_ps();
  for (int64_t i = 0; i < kp; ++i) {
    prefetch_ahead(p + i * kNR, kAhead);
    prefetch_ahead(p + i * kNR + 16, kAhead);
    const __m512i w0 = _mm512_loadu_si512(p + i * kNR), w1 = _mm512_loadu_si512(p + i * kNR + 16);
    const __m512 e0 = _mm512_castsi512_ps(_mm512_slli_epi32(w0, 16)), o0 = _mm512_castsi512_ps(_mm512_and_si512(w0, hi));
    const __m512 e1 = _mm512_castsi512_ps(_mm512_slli_epi32(w1, 16)), o1 = _mm512_castsi512_ps(_mm512_and_si512(w1, hi));
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 xe = _mm512_set1_ps(x[r * ldx + 2 * i]), xo = _mm512_set1_ps(x[r * ldx + 2 * i + 1]);
      acc[r][0][0] = _mm512_fmadd_ps(e0, xe, acc[r][0][0]);
      acc[r][0][1] = _mm512_fmadd_ps(e1, xe, acc[r][0][1]);
      acc[r][NA - 1][0] = _mm512_fmadd_ps(o0, xo, acc[r][NA - 1][0]);
      acc[r][NA - 1][1] = _mm512_fmadd_ps(o1, xo, acc[r][NA - 1][1]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    __m512 a0 = acc[r][0][0], a1 = acc[r][0][1];
    if (NA == 2) {
      a0 = _mm512_add_ps(a0, acc[r][NA - 1][0]);
      a1 = _mm512_add_ps(a1, acc[r][NA - 1][1]);
    }
    _mm512_storeu_ps(out[r], a0);
    _mm512_storeu_ps(out[r] + 16, a1);
  }
}

void p32_rows_range(const WeightView& w, const float* x, int64_t m, int64_t n0, int64_t n1, float* y) {
  const int64_t k = w.cols, kp = k / 2;
  alignas(64) float out[4][kNR];
  for (int64_t c0 = n0; c0 < n1; c0 += kNR) {
    const uint32_t* panel = static_cast<const uint32_t*>(w.data) + c0 * kp;
    for (int64_t r0 = 0; r0 < m; r0 += 4) {
      const int64_t rr = std::min<int64_t>(4, m - r0);
      const float* xr = x + r0 * k;
      switch (rr) {
        case 4: p32_rows<4>(panel, kp, xr, k, out); break;
        case 3: p32_rows<3>(panel, kp, xr, k, out); break;
        case 2: p32_rows<2>(panel, kp, xr, k, out); break;
        default: p32_rows<1>(panel, kp, xr, k, out); break;
      }
      for (int64_t r = 0; r < rr; ++r) std::memcpy(y + (r0 + r) * w.rows + c0, out[r], sizeof(out[r]));
    }
  }
}

// Activation rows from which the panel kernels take over from the row kernels. Measured where
// it matters, batched decoding of the 1B-shaped models with 2 threads (weights streamed from
// memory; `ptn bench --batch N`, aggregate tok/s, rows vs panels from 8 or 12 rows): q8_0 132
// vs 76 at 8 and 131 vs 122 at 16 sequences, q4_k_m 144 vs 105 and f16 86 vs 75 at 16: the row
// kernels (one weight row at a time, prefetched) win there. bf16 with BF16 dot products is the
// exception (its row kernel converts to f32): 69 vs 86 at 8, 89 vs 129 at 16, but 66 vs 51 at 4.
// (A weight matrix that stays in L3, as in bench_matmul, favours the panels from fewer rows.)
int64_t panel_min_rows(DType t) { return t == DType::BF16 && simd_has_bf16() ? 8 : 20; }

}  // namespace

bool avx512_uses_bf16_pairs(DType t, int64_t m) { return t == DType::BF16 && m >= panel_min_rows(t) && simd_has_bf16(); }

void matmul_range_avx512(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1,
                         float* y) {
  if (w.layout == WeightLayout::P32) {  // (with BF16 dot products only: see run_range)
    if (m < panel_min_rows(w.type)) return p32_rows_range(w, x, m, n0, n1, y);
    return bpanel_range_p32(w, x, qa.xb, m, n0, n1, y);
  }
  if (w.layout == WeightLayout::X16) {
    if (m < panel_min_rows(w.type)) return x16_rows_range(w, qa, m, n0, n1, y);
    if (w.type == DType::Q8_0) return qpanel_range<DType::Q8_0>(w, qa, m, n0, n1, y);
    return qpanel_range<DType::Q4_K>(w, qa, m, n0, n1, y);
  }
  if (m < panel_min_rows(w.type)) return rows_range(w, x, qa, m, n0, n1, y);
  switch (w.type) {
    case DType::Q8_0: return qpanel_range<DType::Q8_0>(w, qa, m, n0, n1, y);
    case DType::Q4_0: return qpanel_range<DType::Q4_0>(w, qa, m, n0, n1, y);
    case DType::Q5_0: return qpanel_range<DType::Q5_0>(w, qa, m, n0, n1, y);
    case DType::Q4_K: return qpanel_range<DType::Q4_K>(w, qa, m, n0, n1, y);
    case DType::Q5_K: return qpanel_range<DType::Q5_K>(w, qa, m, n0, n1, y);
    case DType::Q6_K: return qpanel_range<DType::Q6_K>(w, qa, m, n0, n1, y);
    case DType::BF16:
      if (simd_has_bf16()) return bpanel_range(w, x, qa.xb, m, n0, n1, y);
      return fpanel_range(w, x, m, n0, n1, y);
    default: return fpanel_range(w, x, m, n0, n1, y);
  }
}

}  // namespace ptn::mm
