// AVX-512 kernels for float weights: f32 / f16 / bf16 rows in 32-row panels decoded to f32 in L1
// (many activation rows), bf16 pairs with BF16 dot products on a CPU that has them, and BF16
// weights already laid out in 32-row panels (WeightLayout::P32) for few and many rows.
#include "kernels/matmul_avx512_internal.h"

#include <vector>

#include "core/fp16.h"

namespace ptn::mm::avx512 {
namespace {

constexpr int64_t kFloatChunk = 128;   // K elements per decoded f32 chunk (16 KB)

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

}  // namespace

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

namespace {

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

}  // namespace


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

}  // namespace ptn::mm::avx512
