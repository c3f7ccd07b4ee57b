// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL: blocks of 32 weights sharing one half-float scale d
// (and for Q4_1 / Q5_1 a half-float minimum m).
// Quantization is round-to-nearest against d = (signed absmax) / -8 (Q4_0), / -16 (Q5_0),
// absmax / 127 (Q8_0), or (max - min) / 15 (Q4_1) and / 31 (Q5_1) with m = min, exactly as
// ggml's reference quantizers. IQ4_NL is read only (ggml's quantizer for it is a scale search).
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "core/quant_blocks.h"

// Bit-exactness with ggml needs every a*b+c rounded twice, as written: forbid FMA contraction
// even when the build targets a CPU with FMA (g++ contracts by default in C++ modes).
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace ptn::quant_detail {

namespace {

// The element of largest magnitude, with its sign (the first one on ties); 0 for an all-zero
// block. NaN never wins the comparison, +-inf does.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// roundf (half away from zero) for |v| <= 127, without the libm call: v - trunc(v) is exact.
// NaN gives 0; anything beyond +-127 clamps.
int round_away_127(float v) {
  if (!(v > -127.0f)) return std::isnan(v) ? 0 : -127;
  if (!(v < 127.0f)) return 127;
  const int i = static_cast<int>(v);
  const float frac = v - static_cast<float>(i);
  return i + static_cast<int>(frac >= 0.5f) - static_cast<int>(frac <= -0.5f);  // branch-free
}

}  // namespace

void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK4_0) {
    const float d = fp16_to_f32(x[i].d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      const int lo = (x[i].qs[j] & 0x0f) - 8;
      const int hi = (x[i].qs[j] >> 4) - 8;
      y[j] = static_cast<float>(lo) * d;
      y[j + QK4_0 / 2] = static_cast<float>(hi) * d;
    }
  }
}

void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK5_0) {
    const float d = fp16_to_f32(x[i].d);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    for (int j = 0; j < QK5_0 / 2; ++j) {
      const int lo = ((x[i].qs[j] & 0x0f) | (((qh >> j) & 1u) << 4)) - 16;
      const int hi = ((x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - 16;
      y[j] = static_cast<float>(lo) * d;
      y[j + QK5_0 / 2] = static_cast<float>(hi) * d;
    }
  }
}

void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK4_1) {
    const float d = fp16_to_f32(x[i].d), m = fp16_to_f32(x[i].m);
    for (int j = 0; j < QK4_1 / 2; ++j) {
      y[j] = static_cast<float>(x[i].qs[j] & 0x0f) * d + m;
      y[j + QK4_1 / 2] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK5_1) {
    const float d = fp16_to_f32(x[i].d), m = fp16_to_f32(x[i].m);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    for (int j = 0; j < QK5_1 / 2; ++j) {
      const unsigned lo = (x[i].qs[j] & 0x0fu) | (((qh >> j) & 1u) << 4);
      const unsigned hi = (x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4);
      y[j] = static_cast<float>(lo) * d + m;
      y[j + QK5_1 / 2] = static_cast<float>(hi) * d + m;
    }
  }
}

void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK4_NL) {
    const float d = fp16_to_f32(x[i].d);
    for (int j = 0; j < QK4_NL / 2; ++j) {
      y[j] = d * static_cast<float>(kIq4nlValues[x[i].qs[j] & 0x0f]);
      y[j + QK4_NL / 2] = d * static_cast<float>(kIq4nlValues[x[i].qs[j] >> 4]);
    }
  }
}

void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += QK8_0) {
    const float d = fp16_to_f32(x[i].d);
    for (int j = 0; j < QK8_0; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK4_0) {
    const float d = signed_absmax(x, QK4_0) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      // x*id lies in [-8, 8]; +8.5 then truncation rounds to the code 0..16, capped at 15.
      // A NaN weight takes the code of zero (8).
      const int q0 = trunc_clamped(x[j] * id + 8.5f, 0, 15, 8);
      const int q1 = trunc_clamped(x[j + QK4_0 / 2] * id + 8.5f, 0, 15, 8);
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK5_0) {
    const float d = signed_absmax(x, QK5_0) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_0 / 2; ++j) {
      const int q0 = trunc_clamped(x[j] * id + 16.5f, 0, 31, 16);
      const int q1 = trunc_clamped(x[j + QK5_0 / 2] * id + 16.5f, 0, 31, 16);
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>(q0 >> 4) << j;
      qh |= static_cast<uint32_t>(q1 >> 4) << (j + QK5_0 / 2);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

namespace {

// The block's smallest and largest element (NaN never wins; an all-NaN block gives
// FLT_MAX / -FLT_MAX, as ggml's loop does, and its scale becomes -inf).
void min_max(const float* x, int n, float& min, float& max) {
  min = FLT_MAX;
  max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
}

}  // namespace

void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK4_1) {
    float min, max;
    min_max(x, QK4_1, min, max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    y[i].m = f32_to_fp16(min);
    for (int j = 0; j < QK4_1 / 2; ++j) {
      // (x - min) * id lies in [0, 15]; +0.5 then truncation rounds; a NaN weight takes code 0.
      const int q0 = trunc_clamped((x[j] - min) * id + 0.5f, 0, 15, 0);
      const int q1 = trunc_clamped((x[j + QK4_1 / 2] - min) * id + 0.5f, 0, 15, 0);
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK5_1) {
    float min, max;
    min_max(x, QK5_1, min, max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    y[i].m = f32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_1 / 2; ++j) {
      const int q0 = trunc_clamped((x[j] - min) * id + 0.5f, 0, 31, 0);
      const int q1 = trunc_clamped((x[j + QK5_1 / 2] - min) * id + 0.5f, 0, 31, 0);
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>(q0 >> 4) << j;
      qh |= static_cast<uint32_t>(q1 >> 4) << (j + QK5_1 / 2);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += QK8_0) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; ++j) {
      const float a = std::fabs(x[j]);
      if (a > amax) amax = a;  // NaN never wins
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    for (int j = 0; j < QK8_0; ++j) y[i].qs[j] = static_cast<int8_t>(round_away_127(x[j] * id));
  }
}

}  // namespace ptn::quant_detail
