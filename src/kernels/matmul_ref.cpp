// Reference matmul: dequantize each weight row with core/quant.h, accumulate in double.
#include <string>
#include <vector>

#include "core/error.h"
#include "core/quant.h"
#include "kernels/matmul.h"

namespace ptn {

bool matmul_supports(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q4_0: case DType::Q5_0:
    case DType::Q8_0: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
      return true;
    default:
      return false;
  }
}

void matmul_check(const char* op, const WeightView& w, const float* x, int64_t m, const float* y) {
  const auto shapes = [&] {
    auto tr = dtype_traits(static_cast<uint32_t>(w.type));
    return std::string("W[") + std::to_string(w.rows) + ", " + std::to_string(w.cols) + "] " +
           (tr ? tr->name : "?") + ", x[" + std::to_string(m) + ", " + std::to_string(w.cols) + "]";
  };
  if (!matmul_supports(w.type))
    fail(ErrorKind::Unsupported, op,
         "weight type id " + std::to_string(static_cast<uint32_t>(w.type)) + " not supported (" + shapes() + ")");
  if (w.rows < 0 || w.cols < 0 || m < 0)
    fail(ErrorKind::InvalidArgument, op, "negative size (" + shapes() + ")");
  constexpr int64_t kMax = INT64_C(1) << 50;  // far beyond any memory; keeps m*K, m*N, N*K exact
  if (w.rows > kMax || w.cols > kMax || m > kMax || (w.cols > 0 && (m > kMax / w.cols || w.rows > kMax / w.cols)) ||
      (w.rows > 0 && m > kMax / w.rows))
    fail(ErrorKind::InvalidArgument, op, "sizes too large (" + shapes() + ")");
  const DTypeTraits& tr = traits(w.type);
  if (w.cols % tr.block_size != 0)
    fail(ErrorKind::InvalidArgument, op,
         "K = " + std::to_string(w.cols) + " is not a multiple of the " + tr.name + " block size " +
             std::to_string(tr.block_size) + " (" + shapes() + ")");
  const size_t rb = row_bytes(w.type, w.cols, op);
  if (w.rows > 1 && w.row_stride < rb)
    fail(ErrorKind::InvalidArgument, op,
         "row_stride " + std::to_string(w.row_stride) + " < row bytes " + std::to_string(rb) + " (" + shapes() + ")");
  if (w.rows > 0 && w.cols > 0 && w.data == nullptr)
    fail(ErrorKind::InvalidArgument, op, "null weight data (" + shapes() + ")");
  if (m > 0 && w.cols > 0 && x == nullptr) fail(ErrorKind::InvalidArgument, op, "null x (" + shapes() + ")");
  if (m > 0 && w.rows > 0 && y == nullptr) fail(ErrorKind::InvalidArgument, op, "null y (" + shapes() + ")");
}

namespace ref {

void matmul(const WeightView& w, const float* x, int64_t m, float* y) {
  matmul_check("ref::matmul", w, x, m, y);
  const int64_t n = w.rows, k = w.cols;
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t j = 0; j < n; ++j) {
    dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + j * w.row_stride, row.data(), k);
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * k;
      double acc = 0;
      for (int64_t t = 0; t < k; ++t) acc += static_cast<double>(xi[t]) * row[t];
      y[i * n + j] = static_cast<float>(acc);
    }
  }
}

}  // namespace ref
}  // namespace ptn
