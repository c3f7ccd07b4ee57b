// Internal to the AVX-512 matmul files (kernels/matmul_*avx512.cpp, each compiled with the
// AVX-512 flags): what the strategies share, and each strategy's entry point. Include it first:
// the pragmas below must come before <immintrin.h>.
//
//   matmul_avx512.cpp               activation conversion (int8 groups, bf16 pairs), the choice of strategy
//   matmul_rows_avx512.cpp          row kernels: few activation rows, weights as GGUF rows (decode)
//   matmul_interleaved_avx512.cpp   few rows against Q4_K / Q8_0 / Q4_0 / IQ4_NL / MXFP4 interleaved 16 rows at a time (X16)
//   matmul_quant_panels_avx512.cpp  many rows, quantized weights: 32-row panels decoded into L1 (prefill)
//   matmul_float_panels_avx512.cpp  many rows, f32 / f16 / bf16 weights; BF16 32-row panels (P32)
//
// Only AVX-512 files may include this header: its inline functions are compiled with the
// AVX-512 flags, and their names live in ptn::mm::avx512 so that no other level's copy can be
// confused with them at link time.
#pragma once

// GCC 12 reports its own AVX-512 intrinsic headers (the undefined-value idiom of the
// reductions and casts) as reading uninitialized variables; the pragma must precede them.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/matmul_internal.h"

namespace ptn::mm::avx512 {

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

// ---- activation rows of a row tile -------------------------------------------------------------
// The row kernels (and the interleaved ones) compute out[r] = dot(weight row, activation row r)
// for R rows (R = 1..4, or 8); qa/r0 select the activation rows r0..r0+R-1.

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

// ---- Q4_1 / Q5_1 / IQ4_NL blocks ---------------------------------------------------------------
// The 32 unsigned codes of one block in element order (Codes::u: Q4_1 0..15, Q5_1 0..31, IQ4_NL
// its level + 128), with its scale d and (Q4_1 / Q5_1) its minimum m (x = d * u + m). Read by the
// row kernels and the quantized panels' decoder.
template <DType T>
inline __m256i codes_b32(const uint8_t* blk, float& d, float& m) {
  static_assert(T == DType::Q4_1 || T == DType::Q5_1 || T == DType::IQ4_NL);
  uint16_t dh, mh = 0;
  std::memcpy(&dh, blk, 2);
  if constexpr (T != DType::IQ4_NL) std::memcpy(&mh, blk + 2, 2);
  d = h2f(dh);
  m = h2f(mh);
  constexpr int qs = T == DType::Q5_1 ? 8 : T == DType::Q4_1 ? 4 : 2;  // offset of the nibbles
  const __m128i m4 = _mm_set1_epi8(15);
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + qs));
  __m256i u = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4));
  if constexpr (T == DType::Q5_1) {
    uint32_t qh;
    std::memcpy(&qh, blk + 4, 4);
    u = _mm256_mask_add_epi8(u, static_cast<__mmask32>(qh), u, _mm256_set1_epi8(16));
  } else if constexpr (T == DType::IQ4_NL) {
    // The table (levels + 128) in both 128-bit lanes; each nibble picks its byte.
    const __m128i levels = _mm_load_si128(reinterpret_cast<const __m128i*>(kIq4nlCodes.u));
    u = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(levels), u);
  }
  return u;
}

// ---- Q4_K / Q8_0 / Q4_0 / IQ4_NL / MXFP4 interleaved 16 rows at a time (WeightLayout::X16) -----------------------------
// Read by the interleaved row kernels and by the quantized panels' decoder.
constexpr size_t kQ4KTile = kX16Rows * sizeof(BlockQ4K);  // 2304 bytes: 256 columns of 16 rows
constexpr size_t kQ80Tile = 2 * kX16Rows * sizeof(BlockQ8_0);  // 1088 bytes: 64 columns (2 blocks) of 16 rows

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

// ---- what the panel kernels share --------------------------------------------------------------
// For many activation rows. The weight rows are taken 32 at a time (a panel = 32 output
// columns). A chunk of the panel's K range is decoded once into a transposed layout that fits
// in L1, then multiplied with every activation row, MR rows at a time:
//   quantized: 32-element sub-block b holds codes[8 quads][32 cols][4 bytes] (1 KB) so that one
//              zmm load gives 16 columns x 4 consecutive k, dotted (VNNI dpbusd) with 4 bytes
//              of one activation row broadcast; per (sub-block, column) f32 scale ws and min wm.
//   f32 / f16: floats [k][32 cols]; bf16 with BF16 dot products: bf16 pairs [k/2][32 cols][2].

constexpr int kNR = 32;  // columns (weight rows) per panel

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

// ---- the strategies' entry points -----------------------------------------------------------------
// Each computes y[:, n0:n1) (y row stride w.rows) for m activation rows.

// Row kernels, weights in GGUF rows (WeightLayout::Rows), any type: x for float weights, qa for
// quantized ones.
void rows_range(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y);
// Q4_K / Q8_0 / Q4_0 / IQ4_NL / MXFP4 interleaved 16 rows at a time (WeightLayout::X16); n0, n1
// multiples of 16.
void x16_rows_range(const WeightView& w, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y);
// Quantized panels, any quantized type in rows, or Q4_K / Q8_0 in X16.
void qpanel_range(const WeightView& w, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y);
// f32 / f16 / bf16 rows, multiplied in f32.
void fpanel_range(const WeightView& w, const float* x, int64_t m, int64_t n0, int64_t n1, float* y);
// BF16 rows with BF16 dot products; xb: the activations as bf16 pairs (QuantActs::xb), or null
// to convert them here.
void bpanel_range(const WeightView& w, const float* x, const uint32_t* xb, int64_t m, int64_t n0, int64_t n1, float* y);
// BF16 in 32-row panels (WeightLayout::P32), many rows (BF16 dot products) and few rows (f32).
void bpanel_range_p32(const WeightView& w, const float* x, const uint32_t* xb, int64_t m, int64_t n0, int64_t n1,
                      float* y);
void p32_rows_range(const WeightView& w, const float* x, int64_t m, int64_t n0, int64_t n1, float* y);

}  // namespace ptn::mm::avx512
