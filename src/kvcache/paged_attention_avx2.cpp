// AVX2 + FMA + F16C row primitives of the paged attention kernel (see paged_attention.h).
// Tails shorter than 8 elements use the scalar formula.
#include <immintrin.h>

#include "core/blocks.h"
#include "core/fp16.h"
#include "kvcache/paged_attention.h"

namespace ptn::kv {

namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load_bf16(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
inline __m256 load_i8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

float dot_f32(const float* q, const void* row, int64_t n) {
  const float* r = static_cast<const float*>(row);
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(r + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), _mm256_loadu_ps(r + i + 8), a1);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(r + i), a0);
  float s = hsum(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) s += q[i] * r[i];
  return s;
}
void axpy_f32(float* acc, float w, const void* row, int64_t n) {
  const float* r = static_cast<const float*>(row);
  const __m256 vw = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vw, _mm256_loadu_ps(r + i), _mm256_loadu_ps(acc + i)));
  for (; i < n; ++i) acc[i] += w * r[i];
}

float dot_f16(const float* q, const void* row, int64_t n) {
  const uint16_t* r = static_cast<const uint16_t*>(row);
  __m256 a = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load_f16(r + i), a);
  float s = hsum(a);
  for (; i < n; ++i) s += q[i] * fp16_to_f32(r[i]);
  return s;
}
void axpy_f16(float* acc, float w, const void* row, int64_t n) {
  const uint16_t* r = static_cast<const uint16_t*>(row);
  const __m256 vw = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vw, load_f16(r + i), _mm256_loadu_ps(acc + i)));
  for (; i < n; ++i) acc[i] += w * fp16_to_f32(r[i]);
}

float dot_bf16(const float* q, const void* row, int64_t n) {
  const uint16_t* r = static_cast<const uint16_t*>(row);
  __m256 a = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load_bf16(r + i), a);
  float s = hsum(a);
  for (; i < n; ++i) s += q[i] * bf16_to_f32(r[i]);
  return s;
}
void axpy_bf16(float* acc, float w, const void* row, int64_t n) {
  const uint16_t* r = static_cast<const uint16_t*>(row);
  const __m256 vw = _mm256_set1_ps(w);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vw, load_bf16(r + i), _mm256_loadu_ps(acc + i)));
  for (; i < n; ++i) acc[i] += w * bf16_to_f32(r[i]);
}

float dot_q8_0(const float* q, const void* row, int64_t n) {
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(row);
  __m256 a = _mm256_setzero_ps();
  for (int64_t j = 0; j < n / QK8_0; ++j, q += QK8_0) {
    __m256 s = _mm256_mul_ps(_mm256_loadu_ps(q), load_i8(b[j].qs));
    s = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8), load_i8(b[j].qs + 8), s);
    s = _mm256_fmadd_ps(_mm256_loadu_ps(q + 16), load_i8(b[j].qs + 16), s);
    s = _mm256_fmadd_ps(_mm256_loadu_ps(q + 24), load_i8(b[j].qs + 24), s);
    a = _mm256_fmadd_ps(_mm256_set1_ps(fp16_to_f32(b[j].d)), s, a);
  }
  return hsum(a);
}
void axpy_q8_0(float* acc, float w, const void* row, int64_t n) {
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(row);
  for (int64_t j = 0; j < n / QK8_0; ++j, acc += QK8_0) {
    const __m256 wd = _mm256_set1_ps(w * fp16_to_f32(b[j].d));
    for (int k = 0; k < QK8_0; k += 8)
      _mm256_storeu_ps(acc + k, _mm256_fmadd_ps(wd, load_i8(b[j].qs + k), _mm256_loadu_ps(acc + k)));
  }
}

}  // namespace

KvRowOps kv_row_ops_avx2(DType dtype) {
  switch (dtype) {
    case DType::F32: return {dot_f32, axpy_f32};
    case DType::F16: return {dot_f16, axpy_f16};
    case DType::BF16: return {dot_bf16, axpy_bf16};
    case DType::Q8_0: return {dot_q8_0, axpy_q8_0};
    default: break;
  }
  return kv_row_ops_scalar(dtype);
}

}  // namespace ptn::kv
