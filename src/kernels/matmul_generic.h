// Internal to kernels/matmul.cpp and kernels/matmul_avx2.cpp: the portable matmul kernels, in
// an anonymous namespace so that each including file gets its own copy compiled with its own
// instruction set flags (the AVX2 file gets the compiler's auto-vectorized version).
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "kernels/matmul_internal.h"

namespace ptn::mm {
namespace {

// Round to nearest (ties to even, as the SIMD conversions), clamped to [-127, 127]; NaN -> 0.
inline int8_t round_q8(float v) {
  if (!(v == v)) return 0;
  v = std::min(127.f, std::max(-127.f, v));
  return static_cast<int8_t>(std::nearbyint(v));
}

inline void generic_quantize_acts(const float* x, int64_t r0, int64_t r1, QuantActs& qa) {
  const int64_t k = qa.k, g = qa.group, ng = qa.groups();
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * k;
    int8_t* q = qa.q + r * k;
    for (int64_t gi = 0; gi < ng; ++gi) {
      float amax = 0;
      for (int64_t i = 0; i < g; ++i) amax = std::max(amax, std::fabs(xr[gi * g + i]));
      const float d = amax / 127.f;
      const float id = d > 0 ? 1.f / d : 0.f;
      qa.d[r * ng + gi] = d;
      for (int64_t i = 0; i < g; ++i) q[gi * g + i] = round_q8(xr[gi * g + i] * id);
    }
    for (int64_t b = 0; b < k / 16; ++b) {
      int32_t s = 0;
      for (int i = 0; i < 16; ++i) s += q[b * 16 + i];
      qa.s16[r * (k / 16) + b] = s;
    }
    for (int64_t b = 0; b < k / 32; ++b) {
      const int32_t s = qa.s16[r * (k / 16) + 2 * b] + qa.s16[r * (k / 16) + 2 * b + 1];
      qa.s32[r * (k / 32) + b] = s;
      qa.fs32[r * (k / 32) + b] = static_cast<float>(s);
      qa.h32[r * (k / 32) + b] = static_cast<int16_t>(s);
    }
  }
}

template <DType T>
inline void generic_quant_range(const WeightView& w, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1, float* y) {
  using Tr = WTraits<T>;
  using Block = typename Tr::Block;
  const int64_t k = w.cols, nsub = k / 32, ng = qa.groups(), subs_per_group = qa.group / 32;
  thread_local std::vector<float> acc, gsum;
  acc.resize(static_cast<size_t>(m));
  gsum.resize(static_cast<size_t>(m));
  Codes c;
  for (int64_t n = n0; n < n1; ++n) {
    const Block* blocks = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w.data) + n * w.row_stride);
    std::fill(acc.begin(), acc.end(), 0.f);
    for (int64_t gi = 0; gi < ng; ++gi) {
      std::fill(gsum.begin(), gsum.end(), 0.f);
      for (int64_t sb = gi * subs_per_group; sb < (gi + 1) * subs_per_group; ++sb) {
        decode_sub<T>(blocks[sb / Tr::kSub], static_cast<int>(sb % Tr::kSub), c);
        for (int64_t r = 0; r < m; ++r) {
          const int8_t* a = qa.q + r * k + sb * 32;
          int32_t i0 = 0, i1 = 0;
          for (int i = 0; i < 16; ++i) i0 += static_cast<int32_t>(c.u[i]) * a[i];
          for (int i = 16; i < 32; ++i) i1 += static_cast<int32_t>(c.u[i]) * a[i];
          const int32_t* s16 = qa.s16 + r * (k / 16) + 2 * sb;
          float v = c.ws[0] * static_cast<float>(i0 - Tr::kOff * s16[0]) +
                    c.ws[1] * static_cast<float>(i1 - Tr::kOff * s16[1]);
          if (Tr::kMins == 1) v -= c.wm * qa.fs32[r * nsub + sb];
          if (Tr::kMins == 2) v -= c.wm * static_cast<float>(s16[0]) + c.wm_hi * static_cast<float>(s16[1]);
          gsum[r] += v;
        }
      }
      for (int64_t r = 0; r < m; ++r) acc[r] += qa.d[r * ng + gi] * gsum[r];
    }
    for (int64_t r = 0; r < m; ++r) y[r * w.rows + n] = acc[r];
  }
}

// Float weights: each row converted to f32 once, then dotted with every x row (16 partial sums).
inline void generic_float_range(const WeightView& w, const float* x, int64_t m, int64_t n0, int64_t n1, float* y) {
  const int64_t k = w.cols;
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(k));
  for (int64_t n = n0; n < n1; ++n) {
    const void* src = static_cast<const uint8_t*>(w.data) + n * w.row_stride;
    const float* wr;
    if (w.type == DType::F32) {
      wr = static_cast<const float*>(src);
    } else {
      const uint16_t* h = static_cast<const uint16_t*>(src);
      if (w.type == DType::F16)
        for (int64_t i = 0; i < k; ++i) row[i] = fp16_to_f32(h[i]);
      else
        for (int64_t i = 0; i < k; ++i) row[i] = bf16_to_f32(h[i]);
      wr = row.data();
    }
    for (int64_t r = 0; r < m; ++r) {
      const float* xr = x + r * k;
      float part[16] = {};
      int64_t i = 0;
      for (; i + 16 <= k; i += 16)
        for (int j = 0; j < 16; ++j) part[j] += xr[i + j] * wr[i + j];
      for (; i < k; ++i) part[i & 15] += xr[i] * wr[i];
      float s = 0;
      for (int j = 0; j < 16; ++j) s += part[j];
      y[r * w.rows + n] = s;
    }
  }
}

inline void generic_matmul_range(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1,
                          float* y) {
  switch (w.type) {
    case DType::Q8_0: return generic_quant_range<DType::Q8_0>(w, qa, m, n0, n1, y);
    case DType::Q4_0: return generic_quant_range<DType::Q4_0>(w, qa, m, n0, n1, y);
    case DType::Q5_0: return generic_quant_range<DType::Q5_0>(w, qa, m, n0, n1, y);
    case DType::Q4_1: return generic_quant_range<DType::Q4_1>(w, qa, m, n0, n1, y);
    case DType::Q5_1: return generic_quant_range<DType::Q5_1>(w, qa, m, n0, n1, y);
    case DType::IQ4_NL: return generic_quant_range<DType::IQ4_NL>(w, qa, m, n0, n1, y);
    case DType::Q4_K: return generic_quant_range<DType::Q4_K>(w, qa, m, n0, n1, y);
    case DType::Q5_K: return generic_quant_range<DType::Q5_K>(w, qa, m, n0, n1, y);
    case DType::Q6_K: return generic_quant_range<DType::Q6_K>(w, qa, m, n0, n1, y);
    case DType::Q2_K: return generic_quant_range<DType::Q2_K>(w, qa, m, n0, n1, y);
    case DType::Q3_K: return generic_quant_range<DType::Q3_K>(w, qa, m, n0, n1, y);
    case DType::IQ4_XS: return generic_quant_range<DType::IQ4_XS>(w, qa, m, n0, n1, y);
    case DType::MXFP4: return generic_quant_range<DType::MXFP4>(w, qa, m, n0, n1, y);
    case DType::TQ1_0: return generic_quant_range<DType::TQ1_0>(w, qa, m, n0, n1, y);
    case DType::TQ2_0: return generic_quant_range<DType::TQ2_0>(w, qa, m, n0, n1, y);
    case DType::IQ1_S: return generic_quant_range<DType::IQ1_S>(w, qa, m, n0, n1, y);
    case DType::IQ1_M: return generic_quant_range<DType::IQ1_M>(w, qa, m, n0, n1, y);
    case DType::IQ2_XXS: return generic_quant_range<DType::IQ2_XXS>(w, qa, m, n0, n1, y);
    case DType::IQ2_XS: return generic_quant_range<DType::IQ2_XS>(w, qa, m, n0, n1, y);
    case DType::IQ2_S: return generic_quant_range<DType::IQ2_S>(w, qa, m, n0, n1, y);
    case DType::IQ3_XXS: return generic_quant_range<DType::IQ3_XXS>(w, qa, m, n0, n1, y);
    case DType::IQ3_S: return generic_quant_range<DType::IQ3_S>(w, qa, m, n0, n1, y);
    case DType::F32: case DType::F16: case DType::BF16: return generic_float_range(w, x, m, n0, n1, y);
    default: fail(ErrorKind::Internal, "matmul", std::string("no scalar kernel for ") + dtype_name(w.type));
  }
}

}  // namespace
}  // namespace ptn::mm
