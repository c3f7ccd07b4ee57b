// Row conversions between f32 and the GGUF element/block types (core/dtype.h, core/blocks.h).
//
// Dequantization is ggml's formula with the same float operations in the same order, so the
// floats are bit-identical to ggml's reference dequantizers built for baseline x86-64 (quant_*.cpp
// forbid FMA contraction, so this holds whatever -march the build uses; tested with g++/clang++). Quantization follows ggml's reference quantizers (the ones
// llama-quantize uses when no importance matrix is given): round-to-nearest for Q4_0/Q4_1/Q5_0/
// Q5_1/Q8_0/Q8_K, and the iterative scale searches for the K-quants, reproducing llama.cpp's
// bytes. IQ4_NL and IQ4_XS are written as llama-quantize writes them without an importance matrix
// (ggml's quantize_iq4_nl / quantize_iq4_xs, a weighted scale search).
// Q2_K and Q3_K are written as ggml's reference quantizers write them; MXFP4, TQ1_0 and TQ2_0
// likewise (the ternary types round each weight to -1, 0 or 1 times the block's absolute maximum).
//
// Non-finite input never crashes or throws, and only the blocks holding it are affected:
// in Q4_0/Q5_0/Q8_0/Q8_K a NaN weight takes the code of zero and does not influence the scale
// (in Q4_1/Q5_1 it takes code 0, the block's minimum, and influences neither d nor m),
// while +-inf makes the block's scale infinite (it dequantizes to inf/NaN); in the other K-quants
// a super-block holding NaN or inf dequantizes to unspecified values. Scales are f16 (except
// Q8_K's f32): a block whose scale exceeds 65504 stores inf, as ggml does.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace ptn {

// True if quantize_row can produce type t (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4,
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, TQ1_0, TQ2_0, IQ4_NL, IQ4_XS).
bool can_quantize(DType t);
// True if dequantize_row can read type t (the above plus F64 and the integer types
// I8..I64).
bool can_dequantize(DType t);

// dst[0..n) = the values of src (n elements of type t). Throws InvalidArgument if n is negative
// or not a multiple of t's block size, Unsupported if t cannot be read as floats.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

// Quantizes n floats into row_bytes(t, n) bytes at dst. Throws as dequantize_row.
void quantize_row(DType t, const float* src, void* dst, int64_t n);

// A row-major matrix [rows, cols] of floats -> rows * row_bytes(t, cols) bytes at dst, rows
// split over default_pool(). Returns the bytes written.
size_t quantize_matrix(DType t, const float* src, void* dst, int64_t rows, int64_t cols);

// One row of n elements of type `from` -> type `to` (through f32; a plain copy if the types are
// equal). n must be a multiple of both block sizes.
void convert_row(DType from, const void* src, DType to, void* dst, int64_t n);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block from its packed
// scales[12]: sub-blocks 0..3 in the low 6 bits of bytes j and j+4; 4..7 split between the low
// and high nibbles of bytes j+4 and the top 2 bits of bytes j-4 (scale) and j (min).
inline void unpack_scale_min_k4(const uint8_t* scales, int j, uint8_t& sc, uint8_t& m) {
  if (j < 4) {
    sc = scales[j] & 63;
    m = scales[j + 4] & 63;
  } else {
    sc = static_cast<uint8_t>((scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4));
    m = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// The 16 signed 6-bit scales (sc - 32) of a Q3_K super-block from its packed scales[12]: the low
// 4 bits of scale j in nibble j/8 of byte j%8, the high 2 bits in bits 2(j/4).. of byte 8 + j%4.
inline void unpack_q3_k_scales(const uint8_t* packed, int8_t* sc) {
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? packed[j] & 0x0f : packed[j - 8] >> 4;
    const int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    sc[j] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

// IQ4_XS: the 6-bit scale (0..63, used as ls - 32) of sub-block j (0..7).
inline int iq4_xs_scale(uint16_t scales_h, const uint8_t* scales_l, int j) {
  return ((scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) | (((scales_h >> (2 * j)) & 3) << 4);
}

// MXFP4's E8M0 exponent e as the scale of its doubled E2M1 values: 2^(e - 128), as a float
// bit pattern (e = 0 and 1 are the subnormals 2^-128 and 2^-127).
inline float mxfp4_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// TQ1_0: the trit (0..2) of element e (0..255) of a block, from its qs[48] and qh[4] (blocks.h).
inline int tq1_0_trit(const uint8_t* qs, const uint8_t* qh, int e) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  uint8_t b;
  int n;
  if (e < 160) {
    b = qs[e % 32];
    n = e / 32;
  } else if (e < 240) {
    b = qs[32 + (e - 160) % 16];
    n = (e - 160) / 16;
  } else {
    b = qh[(e - 240) % 4];
    n = (e - 240) / 4;
  }
  const uint8_t q = static_cast<uint8_t>(b * kPow3[n]);
  return (q * 3) >> 8;
}

}  // namespace ptn
