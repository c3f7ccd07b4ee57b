// AVX-512 row primitives of the paged attention kernel (see paged_attention.h): 16 lanes,
// masked loads for tails, so any n works without a scalar loop.
// GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm512_undefined_* placeholders.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "core/blocks.h"
#include "core/fp16.h"
#include "kvcache/paged_attention.h"

namespace ptn::kv {

namespace {

inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
}
inline __m512 load_f16(const uint16_t* p, __mmask16 k) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, p));
}
inline __m512 load_bf16(const uint16_t* p, __mmask16 k) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
inline __m512 load_i8(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

float dot_f32(const float* q, const void* row, int64_t n) {
  const float* r = static_cast<const float*>(row);
  __m512 a = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, q + i), _mm512_maskz_loadu_ps(k, r + i), a);
  }
  return _mm512_reduce_add_ps(a);
}
void axpy_f32(float* acc, float w, const void* row, int64_t n) {
  const float* r = static_cast<const float*>(row);
  const __m512 vw = _mm512_set1_ps(w);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    _mm512_mask_storeu_ps(acc + i, k,
                          _mm512_fmadd_ps(vw, _mm512_maskz_loadu_ps(k, r + i), _mm512_maskz_loadu_ps(k, acc + i)));
  }
}

float dot_f16(const float* q, const void* row, int64_t n) {
  const uint16_t* r = static_cast<const uint16_t*>(row);
  __m512 a = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, q + i), load_f16(r + i, k), a);
  }
  return _mm512_reduce_add_ps(a);
}
void axpy_f16(float* acc, float w, const void* row, int64_t n) {
  const uint16_t* r = static_cast<const uint16_t*>(row);
  const __m512 vw = _mm512_set1_ps(w);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    _mm512_mask_storeu_ps(acc + i, k, _mm512_fmadd_ps(vw, load_f16(r + i, k), _mm512_maskz_loadu_ps(k, acc + i)));
  }
}

float dot_bf16(const float* q, const void* row, int64_t n) {
  const uint16_t* r = static_cast<const uint16_t*>(row);
  __m512 a = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, q + i), load_bf16(r + i, k), a);
  }
  return _mm512_reduce_add_ps(a);
}
void axpy_bf16(float* acc, float w, const void* row, int64_t n) {
  const uint16_t* r = static_cast<const uint16_t*>(row);
  const __m512 vw = _mm512_set1_ps(w);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    _mm512_mask_storeu_ps(acc + i, k, _mm512_fmadd_ps(vw, load_bf16(r + i, k), _mm512_maskz_loadu_ps(k, acc + i)));
  }
}

float dot_q8_0(const float* q, const void* row, int64_t n) {
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(row);
  __m512 a = _mm512_setzero_ps();
  for (int64_t j = 0; j < n / QK8_0; ++j, q += QK8_0) {
    __m512 s = _mm512_mul_ps(_mm512_loadu_ps(q), load_i8(b[j].qs));
    s = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16), load_i8(b[j].qs + 16), s);
    a = _mm512_fmadd_ps(_mm512_set1_ps(fp16_to_f32(b[j].d)), s, a);
  }
  return _mm512_reduce_add_ps(a);
}
void axpy_q8_0(float* acc, float w, const void* row, int64_t n) {
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(row);
  for (int64_t j = 0; j < n / QK8_0; ++j, acc += QK8_0) {
    const __m512 wd = _mm512_set1_ps(w * fp16_to_f32(b[j].d));
    _mm512_storeu_ps(acc, _mm512_fmadd_ps(wd, load_i8(b[j].qs), _mm512_loadu_ps(acc)));
    _mm512_storeu_ps(acc + 16, _mm512_fmadd_ps(wd, load_i8(b[j].qs + 16), _mm512_loadu_ps(acc + 16)));
  }
}

}  // namespace

KvRowOps kv_row_ops_avx512(DType dtype) {
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
