// AVX-512 kernels for few activation rows against Q4_K / Q8_0 / Q4_0 / IQ4_NL / MXFP4 weights interleaved 16 rows at a
// time (WeightLayout::X16, kernels/matmul.h): one VNNI instruction works on 16 weight rows.
#include "kernels/matmul_avx512_internal.h"

#include <vector>

namespace ptn::mm::avx512 {
namespace {

// ---- rows interleaved 16 at a time (WeightLayout::X16: Q4_K, Q8_0, Q4_0, IQ4_NL, MXFP4) -----------------------------

// One 64-byte load holds 4 columns of 16 weight rows: the low nibbles (sub-block 2t) and the
// high nibbles kept in place (sub-block 2t + 1, 16 x the code, undone in its scale) each go
// through one VNNI dot product with 4 activation bytes broadcast, one int32 lane per weight row.
// The 6-bit scales and mins come as byte planes (byte b of all 16 rows together), unpacked 16
// rows at a time.


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

// Q4_0, IQ4_NL, MXFP4 (one 32-column block per tile): the nibbles become unsigned codes for
// VNNI, code = level + off: Q4_0 the nibble itself (off 8), IQ4_NL its level + 128 and MXFP4 its
// E2M1 level (doubled, as kMxfp4Values) + 12 by one vpshufb per 16 columns; the off is taken out
// by starting the sum at -off * sum(a). Scales: the 16 rows' f16 d, or MXFP4's exponent bytes in
// one step (2^(e - 1 - 127) as float bits; e < 2 gives the subnormals 2^-128 and 2^-127, as
// mxfp4_scale).
template <int R, DType T>
void x16_rows_nib32(const uint8_t* g, int64_t nb, const RowArgs& ra, float (*out)[16]) {
  constexpr int NA = R <= 2 ? 2 : 1;
  constexpr bool kMx = T == DType::MXFP4, kLut = T != DType::Q4_0;
  constexpr int32_t kOff = T == DType::Q4_0 ? 8 : kMx ? 12 : 128;
  constexpr size_t kHead = kMx ? 16 : 32, kTile = kHead + 256;
  alignas(16) uint8_t lut[16];
  for (int i = 0; i < 16; ++i) lut[i] = static_cast<uint8_t>((kMx ? kMxfp4Values[i] : kIq4nlValues[i]) + kOff);
  const __m512i levels = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(lut)));
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i one = _mm512_set1_epi32(1), two = _mm512_set1_epi32(2), sub = _mm512_set1_epi32(0x00200000);
  __m512 acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* tile = g + static_cast<size_t>(i) * kTile;
#pragma GCC unroll 5
    for (int l = 0; l < 5; ++l) prefetch_ahead(tile + 64 * l, kAhead);
    __m512 dw;
    if constexpr (kMx) {
      const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile)));
      dw = _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmpge_epu32_mask(e, two), _mm512_sllv_epi32(sub, e),
                                                       _mm512_slli_epi32(_mm512_sub_epi32(e, one), 23)));
    } else {
      dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile)));
    }
    __m512i ai[R][NA];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      ai[r][0] = _mm512_set1_epi32(-kOff * ra.s32(r)[i]);
      if (NA == 2) ai[r][NA - 1] = _mm512_setzero_si512();
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512i raw = _mm512_loadu_si512(tile + kHead + 64 * j);
      __m512i lo = _mm512_and_si512(raw, m4), hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
      if constexpr (kLut) {
        lo = _mm512_shuffle_epi8(levels, lo);
        hi = _mm512_shuffle_epi8(levels, hi);
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const int8_t* a = ra.a(r) + i * 32 + 4 * j;
        ai[r][j % NA] = _mm512_dpbusd_epi32(ai[r][j % NA], lo, _mm512_set1_epi32(load4(a)));
        ai[r][(j + 1) % NA] = _mm512_dpbusd_epi32(ai[r][(j + 1) % NA], hi, _mm512_set1_epi32(load4(a + 16)));
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512i sum = NA == 2 ? _mm512_add_epi32(ai[r][0], ai[r][NA - 1]) : ai[r][0];
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(dw, _mm512_set1_ps(ra.d(r)[i])), acc[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(out[r], acc[r]);
}

template <int R>
inline void x16_dispatch(DType t, const uint8_t* g, int64_t nb, const RowArgs& ra, float (*out)[16]) {
  if (t == DType::Q4_K) x16_rows<R>(g, nb, ra, out);
  else if (t == DType::MXFP4) x16_rows_nib32<R, DType::MXFP4>(g, nb, ra, out);
  else if (t == DType::Q4_0) x16_rows_nib32<R, DType::Q4_0>(g, nb, ra, out);
  else if (t == DType::IQ4_NL) x16_rows_nib32<R, DType::IQ4_NL>(g, nb, ra, out);
  else x16_rows_q8<R>(g, nb, ra, out);
}

}  // namespace

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

}  // namespace ptn::mm::avx512
