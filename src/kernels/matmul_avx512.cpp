// AVX-512 level (F, BW, VL, DQ, VNNI; BF16 dot products when simd_has_bf16()): the activation
// formats (int8 groups, bf16 pairs) and the choice of kernel strategy per call. The strategies
// have a file each (see matmul_avx512_internal.h):
//   * row kernels (few activation rows, the decode case): one weight row at a time, decoded in
//     registers and dotted with up to 4 activation rows; the weights stream from memory once.
//   * panel kernels (many activation rows, the prefill case): 32 weight rows at a time, a chunk
//     decoded once into L1 and multiplied with every activation row.
//   * the load-time layouts (WeightLayout::X16, P32) have row and panel kernels of their own.
#include "kernels/matmul_avx512_internal.h"

#include "core/cpu.h"
#include "core/fp16.h"

namespace ptn::mm {
namespace {

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

using namespace avx512;

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
    // Q4_0, IQ4_NL, MXFP4: no panel decoder reads their tiles; the panels take them back as rows
    // (the panels decode every weight once per panel anyway; 32 rows' copy is small beside
    // their products with m >= 20 rows).
    if (w.type != DType::Q4_K && w.type != DType::Q8_0) return deinterleaved_range(matmul_range_avx512, w, x, qa, m, n0, n1, y);
    return qpanel_range(w, qa, m, n0, n1, y);
  }
  if (m < panel_min_rows(w.type)) return rows_range(w, x, qa, m, n0, n1, y);
  switch (w.type) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::IQ4_NL:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    // The types decoded through decode_sub: the same zmm panels, each sub-block decoded once per
    // 32-row panel and chunk and used by every activation row.
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::IQ4_XS:
    case DType::MXFP4:
    case DType::TQ1_0:
    case DType::TQ2_0:
    case DType::IQ1_S:
    case DType::IQ1_M:
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S: return qpanel_range(w, qa, m, n0, n1, y);
    case DType::BF16:
      if (simd_has_bf16()) return bpanel_range(w, x, qa.xb, m, n0, n1, y);
      return fpanel_range(w, x, m, n0, n1, y);
    default: return fpanel_range(w, x, m, n0, n1, y);
  }
}

}  // namespace ptn::mm
