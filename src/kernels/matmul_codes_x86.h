// Internal to kernels/matmul_avx2.cpp and kernels/matmul_rows_avx512.cpp: the row kernel of the
// weight types that x86 multiplies through decode_sub (decoded_by_sub: Q2_K, Q3_K, IQ4_XS,
// MXFP4), with AVX2 integer dot products. Internal linkage, as matmul_generic.h: each including
// file compiles its own copy with its own instruction set flags (decode_sub's loops vectorize).
//
// One weight row at a time, dotted with up to R activation rows while its codes sit in L1: per
// 32-element sub-block, decode_sub gives 32 codes and the scales of its two 16-element halves;
// the codes are dotted with each activation row (maddubs for the small unsigned codes of Q2_K and
// Q3_K, which cannot saturate: 2 * 7 * 127 < 32767; the sign trick on u - 128 for the table
// types, |u - 128| <= 127), which leaves 8 s32 lanes: lanes 0..3 the first half, 4..7 the second.
// Those are scaled by the half's scale times the activation scale in f32. The offset and mins
// are one correction per half through the activation sums over 16 (half_correction).
#pragma once
#include <immintrin.h>

#include "kernels/matmul_internal.h"

namespace ptn::mm {
namespace {

inline float codes_hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// RA: the including file's row arguments (a(r), d(r), s16(r) of activation row r of the tile).
template <int R, DType T, class RA>
void row_codes(const void* row, int64_t k, const RA& ra, float* out) {
  using Tr = WTraits<T>;
  using Block = typename Tr::Block;
  constexpr bool kSigned = Tr::kOff == 128;
  const Block* b = static_cast<const Block*>(row);
  const int64_t nsub = k / 32, gsub = traits(T).block_size / 32;  // sub-blocks per activation scale
  __m256 acc[R];
  float corr[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    corr[r] = 0;
  }
  const __m256i ones = _mm256_set1_epi16(1);
  Codes c;
  for (int64_t sb = 0; sb < nsub; ++sb) {
    if (sb % Tr::kSub == 0) _mm_prefetch(reinterpret_cast<const char*>(b + sb / Tr::kSub) + 2048, _MM_HINT_T0);
    decode_sub<T>(b[sb / Tr::kSub], static_cast<int>(sb % Tr::kSub), c);
    __m256i u = _mm256_load_si256(reinterpret_cast<const __m256i*>(c.u));
    if (kSigned) u = _mm256_xor_si256(u, _mm256_set1_epi8(-128));  // u - 128 as int8
    const __m256 sv = _mm256_set_m128(_mm_set1_ps(c.ws[1]), _mm_set1_ps(c.ws[0]));
    const float c0 = kSigned ? 0.f : half_correction<T>(c, 0), c1 = kSigned ? 0.f : half_correction<T>(c, 1);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ra.a(r) + sb * 32));
      __m256i p;
      if (kSigned) p = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(u, u), _mm256_sign_epi8(a, u)), ones);
      else p = _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), ones);
      const float da = ra.d(r)[sb / gsub];
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(sv, _mm256_set1_ps(da)), acc[r]);
      if (!kSigned) {
        const int32_t* s16 = ra.s16(r) + 2 * sb;
        corr[r] += da * (c0 * static_cast<float>(s16[0]) + c1 * static_cast<float>(s16[1]));
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) out[r] = codes_hsum8(acc[r]) - corr[r];
}

// The row kernel of a decoded_by_sub type (false for any other type).
template <int R, class RA>
bool row_codes_dispatch(DType t, const void* row, int64_t k, const RA& ra, float* out) {
  switch (t) {
    case DType::Q2_K: row_codes<R, DType::Q2_K>(row, k, ra, out); return true;
    case DType::Q3_K: row_codes<R, DType::Q3_K>(row, k, ra, out); return true;
    case DType::IQ4_XS: row_codes<R, DType::IQ4_XS>(row, k, ra, out); return true;
    case DType::MXFP4: row_codes<R, DType::MXFP4>(row, k, ra, out); return true;
    default: return false;
  }
}

}  // namespace
}  // namespace ptn::mm
