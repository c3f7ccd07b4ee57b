// Dispatch of the row conversions by dtype, plain (non-block) types, whole matrices and
// type-to-type conversion. The block formats live in quant_legacy.cpp (the 32-element types) and
// quant_k.cpp (Q2_K/Q3_K/Q4_K/Q5_K/Q6_K/Q8_K), quant_nonlinear.cpp (IQ4_XS, MXFP4),
// quant_ternary.cpp (TQ1_0, TQ2_0), quant_iq.cpp (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
// IQ3_S: dequantization only).
#include "core/quant.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/fp16.h"
#include "core/quant_blocks.h"
#include "core/threadpool.h"

namespace ptn {

using namespace quant_detail;

namespace {

// Validates a row call and returns the number of blocks (elements for plain types).
int64_t check_row(const char* op, DType t, const void* a, const void* b, int64_t n) {
  auto tr = dtype_traits(static_cast<uint32_t>(t));
  if (!tr) fail(ErrorKind::Unsupported, op, "unknown dtype id " + std::to_string(static_cast<uint32_t>(t)));
  if (n < 0 || n % tr->block_size != 0)
    fail(ErrorKind::InvalidArgument, op,
         std::string("row of ") + std::to_string(n) + " elements is not a multiple of the " + tr->name +
             " block size " + std::to_string(tr->block_size));
  if (n > 0 && (a == nullptr || b == nullptr)) fail(ErrorKind::InvalidArgument, op, "null data pointer");
  return n / tr->block_size;
}

template <class T>
void ints_to_f32(const void* src, float* dst, int64_t n) {
  const T* s = static_cast<const T*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
}

}  // namespace

bool can_quantize(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q4_0: case DType::Q4_1:
    case DType::Q5_0: case DType::Q5_1: case DType::Q8_0: case DType::Q4_K: case DType::Q5_K:
    case DType::Q6_K: case DType::Q8_K: case DType::Q2_K: case DType::Q3_K: case DType::MXFP4:
    case DType::TQ1_0: case DType::TQ2_0: case DType::IQ4_NL: case DType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

bool can_dequantize(DType t) {
  switch (t) {
    case DType::F64: case DType::I8: case DType::I16: case DType::I32: case DType::I64:
    case DType::IQ1_S: case DType::IQ1_M: case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S:
    case DType::IQ3_XXS: case DType::IQ3_S:  // read from llama.cpp's files, never written
      return true;
    default:
      return can_quantize(t);
  }
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  const int64_t nb = check_row("dequantize_row", t, src, dst, n);
  if (nb == 0) return;
  switch (t) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case DType::F16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(s[i]);
      return;
    }
    case DType::BF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::F64: ints_to_f32<double>(src, dst, n); return;
    case DType::I8: ints_to_f32<int8_t>(src, dst, n); return;
    case DType::I16: ints_to_f32<int16_t>(src, dst, n); return;
    case DType::I32: ints_to_f32<int32_t>(src, dst, n); return;
    case DType::I64: ints_to_f32<int64_t>(src, dst, n); return;
    case DType::Q4_0: dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb); return;
    case DType::Q4_1: dequantize_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb); return;
    case DType::Q5_0: dequantize_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb); return;
    case DType::Q5_1: dequantize_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb); return;
    case DType::IQ4_NL: dequantize_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, nb); return;
    case DType::Q8_0: dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb); return;
    case DType::Q4_K: dequantize_q4_k(static_cast<const BlockQ4K*>(src), dst, nb); return;
    case DType::Q5_K: dequantize_q5_k(static_cast<const BlockQ5K*>(src), dst, nb); return;
    case DType::Q6_K: dequantize_q6_k(static_cast<const BlockQ6K*>(src), dst, nb); return;
    case DType::Q8_K: dequantize_q8_k(static_cast<const BlockQ8K*>(src), dst, nb); return;
    case DType::Q2_K: dequantize_q2_k(static_cast<const BlockQ2K*>(src), dst, nb); return;
    case DType::Q3_K: dequantize_q3_k(static_cast<const BlockQ3K*>(src), dst, nb); return;
    case DType::IQ4_XS: dequantize_iq4_xs(static_cast<const BlockIQ4XS*>(src), dst, nb); return;
    case DType::MXFP4: dequantize_mxfp4(static_cast<const BlockMXFP4*>(src), dst, nb); return;
    case DType::TQ1_0: dequantize_tq1_0(static_cast<const BlockTQ1_0*>(src), dst, nb); return;
    case DType::TQ2_0: dequantize_tq2_0(static_cast<const BlockTQ2_0*>(src), dst, nb); return;
    case DType::IQ1_S: dequantize_iq1_s(static_cast<const BlockIQ1S*>(src), dst, nb); return;
    case DType::IQ1_M: dequantize_iq1_m(static_cast<const BlockIQ1M*>(src), dst, nb); return;
    case DType::IQ2_XXS: dequantize_iq2_xxs(static_cast<const BlockIQ2XXS*>(src), dst, nb); return;
    case DType::IQ2_XS: dequantize_iq2_xs(static_cast<const BlockIQ2XS*>(src), dst, nb); return;
    case DType::IQ2_S: dequantize_iq2_s(static_cast<const BlockIQ2S*>(src), dst, nb); return;
    case DType::IQ3_XXS: dequantize_iq3_xxs(static_cast<const BlockIQ3XXS*>(src), dst, nb); return;
    case DType::IQ3_S: dequantize_iq3_s(static_cast<const BlockIQ3S*>(src), dst, nb); return;
  }
  fail(ErrorKind::Unsupported, "dequantize_row", std::string("cannot read ") + dtype_name(t) + " as floats");
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  const int64_t nb = check_row("quantize_row", t, src, dst, n);
  if (!can_quantize(t))
    fail(ErrorKind::Unsupported, "quantize_row", std::string("cannot quantize to ") + dtype_name(t));
  if (nb == 0) return;
  switch (t) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case DType::F16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_fp16(src[i]);
      return;
    }
    case DType::BF16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::Q4_0: quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), nb); return;
    case DType::Q4_1: quantize_q4_1(src, static_cast<BlockQ4_1*>(dst), nb); return;
    case DType::Q5_0: quantize_q5_0(src, static_cast<BlockQ5_0*>(dst), nb); return;
    case DType::Q5_1: quantize_q5_1(src, static_cast<BlockQ5_1*>(dst), nb); return;
    case DType::Q8_0: quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), nb); return;
    case DType::Q4_K: quantize_q4_k(src, static_cast<BlockQ4K*>(dst), nb); return;
    case DType::Q5_K: quantize_q5_k(src, static_cast<BlockQ5K*>(dst), nb); return;
    case DType::Q6_K: quantize_q6_k(src, static_cast<BlockQ6K*>(dst), nb); return;
    case DType::Q8_K: quantize_q8_k(src, static_cast<BlockQ8K*>(dst), nb); return;
    case DType::Q2_K: quantize_q2_k(src, static_cast<BlockQ2K*>(dst), nb); return;
    case DType::Q3_K: quantize_q3_k(src, static_cast<BlockQ3K*>(dst), nb); return;
    case DType::MXFP4: quantize_mxfp4(src, static_cast<BlockMXFP4*>(dst), nb); return;
    case DType::TQ1_0: quantize_tq1_0(src, static_cast<BlockTQ1_0*>(dst), nb); return;
    case DType::TQ2_0: quantize_tq2_0(src, static_cast<BlockTQ2_0*>(dst), nb); return;
    case DType::IQ4_NL: quantize_iq4_nl(src, static_cast<BlockIQ4_NL*>(dst), nb); return;
    case DType::IQ4_XS: quantize_iq4_xs(src, static_cast<BlockIQ4XS*>(dst), nb); return;
    default: break;
  }
  fail(ErrorKind::Internal, "quantize_row", std::string("no quantizer for ") + dtype_name(t));
}

size_t quantize_matrix(DType t, const float* src, void* dst, int64_t rows, int64_t cols) {
  const char* op = "quantize_matrix";
  if (rows < 0 || cols < 0)
    fail(ErrorKind::InvalidArgument, op,
         "negative shape [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
  if (!can_quantize(t))
    fail(ErrorKind::Unsupported, op, std::string("cannot quantize to ") + dtype_name(t));
  const size_t rb = row_bytes(t, cols, op);
  const size_t total = static_cast<size_t>(checked_mul(static_cast<uint64_t>(rows), rb, op));
  checked_mul(static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), op);  // src + r * cols
  if (total == 0) return 0;
  if (src == nullptr || dst == nullptr) fail(ErrorKind::InvalidArgument, op, "null data pointer");
  // Rows per task: enough work (~64K elements) per task to amortise the dispatch.
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(cols, 1));
  auto work = [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r)
      quantize_row(t, src + r * cols, static_cast<uint8_t*>(dst) + static_cast<size_t>(r) * rb, cols);
  };
  if (rows <= grain) work(0, rows, 0);
  else default_pool().parallel_for(rows, grain, work);
  return total;
}

void convert_row(DType from, const void* src, DType to, void* dst, int64_t n) {
  const char* op = "convert_row";
  check_row(op, from, src, dst, n);
  check_row(op, to, src, dst, n);
  if (!can_dequantize(from))
    fail(ErrorKind::Unsupported, op, std::string("cannot read ") + dtype_name(from) + " as floats");
  if (!can_quantize(to))
    fail(ErrorKind::Unsupported, op, std::string("cannot quantize to ") + dtype_name(to));
  if (n == 0) return;
  if (from == to) {
    std::memcpy(dst, src, row_bytes(from, n, op));
    return;
  }
  if (from == DType::F32) {
    quantize_row(to, static_cast<const float*>(src), dst, n);
    return;
  }
  if (to == DType::F32) {
    dequantize_row(from, src, static_cast<float*>(dst), n);
    return;
  }
  // Chunks of 4096 elements: a multiple of every block size (32 and 256).
  constexpr int64_t kChunk = 4096;
  float buf[kChunk];  // 16 KiB
  const size_t in_step = row_bytes(from, kChunk, op), out_step = row_bytes(to, kChunk, op);
  const uint8_t* s = static_cast<const uint8_t*>(src);
  uint8_t* d = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t m = std::min(kChunk, n - i);
    dequantize_row(from, s, buf, m);
    quantize_row(to, buf, d, m);
    s += in_step;
    d += out_step;
  }
}

}  // namespace ptn
