// Internal to core/quant*.cpp: per-type row functions over whole blocks (nb = number of blocks)
// and the rounding helpers they share. Callers outside core use core/quant.h.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/blocks.h"

namespace ptn::quant_detail {

// Round to nearest, ties to even, as ggml's nearest_int: adding 1.5 * 2^23 leaves the rounded
// integer in the low mantissa bits. Exact for |f| <= 2^22; larger magnitudes saturate and NaN
// gives 0 (ggml asserts instead), so no input reaches undefined behaviour.
inline int nearest_int(float f) {
  if (!(std::fabs(f) <= 4194303.f)) return std::isnan(f) ? 0 : (f > 0 ? 4194303 : -4194303);
  const float v = f + 12582912.f;
  int32_t i;
  std::memcpy(&i, &v, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// C's float -> integer conversion (truncation toward zero) for values expected in [lo, hi];
// out-of-range values clamp and NaN gives if_nan, instead of being undefined.
inline int trunc_clamped(float f, int lo, int hi, int if_nan) {
  if (std::isnan(f)) return if_nan;
  if (f <= static_cast<float>(lo)) return lo;
  if (f >= static_cast<float>(hi)) return hi;
  return static_cast<int>(f);
}

void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb);
void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb);
void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb);
void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb);
void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb);
void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb);
void dequantize_q4_k(const BlockQ4K* x, float* y, int64_t nb);
void dequantize_q5_k(const BlockQ5K* x, float* y, int64_t nb);
void dequantize_q6_k(const BlockQ6K* x, float* y, int64_t nb);
void dequantize_q8_k(const BlockQ8K* x, float* y, int64_t nb);
void dequantize_q2_k(const BlockQ2K* x, float* y, int64_t nb);
void dequantize_q3_k(const BlockQ3K* x, float* y, int64_t nb);
void dequantize_iq4_xs(const BlockIQ4XS* x, float* y, int64_t nb);
void dequantize_mxfp4(const BlockMXFP4* x, float* y, int64_t nb);
void dequantize_tq1_0(const BlockTQ1_0* x, float* y, int64_t nb);
void dequantize_tq2_0(const BlockTQ2_0* x, float* y, int64_t nb);
void dequantize_iq1_s(const BlockIQ1S* x, float* y, int64_t nb);  // quant_iq.cpp (read only)
void dequantize_iq1_m(const BlockIQ1M* x, float* y, int64_t nb);
void dequantize_iq2_xxs(const BlockIQ2XXS* x, float* y, int64_t nb);
void dequantize_iq2_xs(const BlockIQ2XS* x, float* y, int64_t nb);
void dequantize_iq2_s(const BlockIQ2S* x, float* y, int64_t nb);
void dequantize_iq3_xxs(const BlockIQ3XXS* x, float* y, int64_t nb);
void dequantize_iq3_s(const BlockIQ3S* x, float* y, int64_t nb);

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb);
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb);
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb);
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb);
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb);
void quantize_q4_k(const float* x, BlockQ4K* y, int64_t nb);
void quantize_q5_k(const float* x, BlockQ5K* y, int64_t nb);
void quantize_q6_k(const float* x, BlockQ6K* y, int64_t nb);
void quantize_q8_k(const float* x, BlockQ8K* y, int64_t nb);
void quantize_q2_k(const float* x, BlockQ2K* y, int64_t nb);
void quantize_q3_k(const float* x, BlockQ3K* y, int64_t nb);
void quantize_mxfp4(const float* x, BlockMXFP4* y, int64_t nb);
void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb);
void quantize_iq4_xs(const float* x, BlockIQ4XS* y, int64_t nb);
void quantize_tq1_0(const float* x, BlockTQ1_0* y, int64_t nb);
void quantize_tq2_0(const float* x, BlockTQ2_0* y, int64_t nb);

}  // namespace ptn::quant_detail
