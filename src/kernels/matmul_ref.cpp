// Reference matmul: dequantize each weight row with core/quant.h, accumulate in double.
#include <cstring>
#include <string>
#include <vector>

#include "core/blocks.h"
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
  if (w.layout == WeightLayout::Q4KX16) {
    if (w.type != DType::Q4_K || w.rows % kX16Rows != 0)
      fail(ErrorKind::InvalidArgument, op,
           "an interleaved (16-row) weight must be q4_k with rows a multiple of 16 (" + shapes() + ")");
  } else if (w.layout != WeightLayout::Rows) {
    fail(ErrorKind::InvalidArgument, op, "unknown weight layout (" + shapes() + ")");
  } else if (w.rows > 1 && w.row_stride < rb)
    fail(ErrorKind::InvalidArgument, op,
         "row_stride " + std::to_string(w.row_stride) + " < row bytes " + std::to_string(rb) + " (" + shapes() + ")");
  if (w.rows > 0 && w.cols > 0 && w.data == nullptr)
    fail(ErrorKind::InvalidArgument, op, "null weight data (" + shapes() + ")");
  if (m > 0 && w.cols > 0 && x == nullptr) fail(ErrorKind::InvalidArgument, op, "null x (" + shapes() + ")");
  if (m > 0 && w.rows > 0 && y == nullptr) fail(ErrorKind::InvalidArgument, op, "null y (" + shapes() + ")");
}

// ---- Q4_K interleaved 16 rows -----------------------------------------------------------------

namespace {
constexpr size_t kX16Scales = 64, kX16Codes = 256;  // byte offsets in a tile (see matmul.h)
static_assert(kX16Codes + 16 * sizeof(BlockQ4K::qs) == kX16TileBytes && 16 * sizeof(BlockQ4K) == kX16TileBytes);

// Byte offset in a tile of row r's qs[j] (j < 128): pair t = j / 32, quad q = (j % 32) / 4.
inline size_t x16_code_at(int64_t r, int j) {
  return kX16Codes + 64 * static_cast<size_t>(j / 4) + 4 * static_cast<size_t>(r) + static_cast<size_t>(j % 4);
}
}  // namespace

bool can_interleave_q4_k(const WeightView& w) {
  return w.type == DType::Q4_K && w.layout == WeightLayout::Rows && w.rows > 0 && w.rows % kX16Rows == 0 &&
         w.cols > 0 && w.cols % QK_K == 0 && w.data != nullptr && w.row_stride >= row_bytes(DType::Q4_K, w.cols);
}

WeightView interleave_q4_k(const WeightView& w, void* dst) {
  if (!can_interleave_q4_k(w))
    fail(ErrorKind::InvalidArgument, "interleave_q4_k",
         "needs q4_k rows in a multiple of 16 with K a multiple of 256, got " + std::to_string(w.rows) + " x " +
             std::to_string(w.cols) + " " + dtype_name(w.type));
  const int64_t nsb = w.cols / QK_K;
  uint8_t* out = static_cast<uint8_t*>(dst);
  for (int64_t g = 0; g < w.rows / kX16Rows; ++g)
    for (int64_t i = 0; i < nsb; ++i) {
      uint8_t* tile = out + static_cast<size_t>(g * nsb + i) * kX16TileBytes;
      for (int64_t r = 0; r < kX16Rows; ++r) {
        const BlockQ4K& b = reinterpret_cast<const BlockQ4K*>(static_cast<const uint8_t*>(w.data) +
                                                             static_cast<size_t>(g * kX16Rows + r) * w.row_stride)[i];
        std::memcpy(tile + 2 * r, &b.d, 2);
        std::memcpy(tile + 32 + 2 * r, &b.dmin, 2);
        for (int j = 0; j < K_SCALE_SIZE; ++j) tile[kX16Scales + 16 * j + r] = b.scales[j];
        for (int j = 0; j < QK_K / 2; ++j) tile[x16_code_at(r, j)] = b.qs[j];
      }
    }
  WeightView v = w;
  v.data = dst;
  v.row_stride = row_bytes(DType::Q4_K, w.cols);
  v.layout = WeightLayout::Q4KX16;
  return v;
}

void deinterleave_q4_k_row(const WeightView& w, int64_t n, void* dst) {
  const int64_t nsb = w.cols / QK_K, g = n / kX16Rows, r = n % kX16Rows;
  BlockQ4K* blocks = static_cast<BlockQ4K*>(dst);
  for (int64_t i = 0; i < nsb; ++i) {
    const uint8_t* tile = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(g * nsb + i) * kX16TileBytes;
    BlockQ4K& b = blocks[i];
    std::memcpy(&b.d, tile + 2 * r, 2);
    std::memcpy(&b.dmin, tile + 32 + 2 * r, 2);
    for (int j = 0; j < K_SCALE_SIZE; ++j) b.scales[j] = tile[kX16Scales + 16 * j + r];
    for (int j = 0; j < QK_K / 2; ++j) b.qs[j] = tile[x16_code_at(r, j)];
  }
}

namespace ref {

void matmul(const WeightView& w, const float* x, int64_t m, float* y) {
  matmul_check("ref::matmul", w, x, m, y);
  const int64_t n = w.rows, k = w.cols;
  std::vector<float> row(static_cast<size_t>(k));
  std::vector<uint8_t> blocks(w.layout == WeightLayout::Q4KX16 ? row_bytes(DType::Q4_K, k) : 0);
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* src = static_cast<const uint8_t*>(w.data) + j * w.row_stride;
    if (w.layout == WeightLayout::Q4KX16) {
      deinterleave_q4_k_row(w, j, blocks.data());
      src = blocks.data();
    }
    dequantize_row(w.type, src, row.data(), k);
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
