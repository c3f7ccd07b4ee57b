// AVX-512 row kernels (the decode case, few activation rows; weights in GGUF rows): one weight
// row at a time, decoded in registers and dotted with up to 4 activation rows (8 for Q4_K /
// Q5_K); the weights stream from memory once.
#include "kernels/matmul_avx512_internal.h"
#include "kernels/matmul_codes_x86.h"

#include <string>
#include <vector>

#include "core/error.h"

namespace ptn::mm::avx512 {
namespace {

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

// Q4_1 / Q5_1 / IQ4_NL: unsigned codes u (codes_b32). Q4_1 / Q5_1 (x = d u + m): the block's
// dot product is d dot(u, a) + m sum(a), the min term kept in a float per row. IQ4_NL
// (x = d (u - 128)): the -128 sum(a) goes into lane 0 of the integer accumulator, as for Q4_0.
// Two f32 accumulators per row (even / odd blocks) so the FMA latency does not bound the loop.
template <int R, DType T>
[[gnu::always_inline]] inline void b32_block(const uint8_t* blk, int64_t i, const RowArgs& ra, __m256* acc, float* mins) {
  using Tr = WTraits<T>;
  float dw, mw;
  const __m256i u = codes_b32<T>(blk, dw, mw);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ra.a(r) + i * 32));
    const __m256i init = Tr::kOff ? _mm256_zextsi128_si256(_mm_cvtsi32_si128(-Tr::kOff * ra.s32(r)[i])) : _mm256_setzero_si256();
    const __m256i p = _mm256_dpbusd_epi32(init, u, a);
    const float da = ra.d(r)[i];
    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * da), acc[r]);
    if (Tr::kMins) mins[r] += mw * da * ra.fs32(r)[i];
  }
}

template <int R, DType T>
void row_b32(const void* row, int64_t k, const RowArgs& ra, float* out) {
  constexpr size_t bs = sizeof(typename WTraits<T>::Block);
  const uint8_t* base = static_cast<const uint8_t*>(row);
  const int64_t nb = k / 32;
  __m256 acc0[R], acc1[R];
  float mins[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    acc0[r] = acc1[r] = _mm256_setzero_ps();
    mins[r] = 0;
  }
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    prefetch_ahead(base + i * bs, kAhead);
    b32_block<R, T>(base + i * bs, i, ra, acc0, mins);
    b32_block<R, T>(base + (i + 1) * bs, i + 1, ra, acc1, mins);
  }
  if (i < nb) b32_block<R, T>(base + i * bs, i, ra, acc0, mins);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) out[r] = hsum(_mm256_add_ps(acc0[r], acc1[r])) + mins[r];
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
    case DType::Q4_1: return row_b32<R, DType::Q4_1>(row, k, ra, out);
    case DType::Q5_1: return row_b32<R, DType::Q5_1>(row, k, ra, out);
    case DType::IQ4_NL: return row_b32<R, DType::IQ4_NL>(row, k, ra, out);
    case DType::Q4_K: return row_q45_k<R, false>(row, k, ra, out);
    case DType::Q5_K: return row_q45_k<R, true>(row, k, ra, out);
    case DType::Q6_K: return row_q6_k<R>(row, k, ra, out);
    case DType::F32: case DType::F16: case DType::BF16: return row_float<R>(w.type, row, k, x + ra.r0 * k, out);
    default:
      if (row_codes_dispatch<R>(w.type, row, k, ra, out)) return;
      fail(ErrorKind::Internal, "matmul", std::string("no AVX-512 row kernel for ") + dtype_name(w.type));
  }
}

}  // namespace

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

}  // namespace ptn::mm::avx512
