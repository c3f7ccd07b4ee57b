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
  if (w.layout == WeightLayout::X16) {
    if ((w.type != DType::Q4_K && w.type != DType::Q8_0) || w.rows % kX16Rows != 0)
      fail(ErrorKind::InvalidArgument, op,
           "an interleaved (16-row) weight must be q4_k or q8_0 with rows a multiple of 16 (" + shapes() + ")");
  } else if (w.layout == WeightLayout::P32) {
    if (w.type != DType::BF16 || w.rows % kP32Rows != 0 || w.cols % 2 != 0)
      fail(ErrorKind::InvalidArgument, op,
           "a paneled (32-row) weight must be bf16 with rows a multiple of 32 and K even (" + shapes() + ")");
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

// ---- rows interleaved 16 at a time --------------------------------------------------------------

namespace {
// Where byte j of row r's block (r < 16) goes in its tile, and what it becomes there.
struct X16Map {
  static size_t q4k(int64_t r, int j) {  // BlockQ4K byte j
    if (j < 4) return 32 * static_cast<size_t>(j / 2) + 2 * static_cast<size_t>(r) + j % 2;  // d, dmin
    if (j < 16) return 64 + 16 * static_cast<size_t>(j - 4) + static_cast<size_t>(r);    // scales
    const int c = j - 16;  // qs[c]: pair c / 32, quad (c % 32) / 4
    return 256 + 64 * static_cast<size_t>(c / 4) + 4 * static_cast<size_t>(r) + c % 4;
  }
  static size_t q8_0(int64_t r, int j, int64_t e) {  // BlockQ8_0 byte j of block 2i + e
    if (j < 2) return 32 * static_cast<size_t>(e) + 2 * static_cast<size_t>(r) + j;  // d
    const int c = j - 2;
    return 64 + 512 * static_cast<size_t>(e) + 64 * static_cast<size_t>(c / 4) + 4 * static_cast<size_t>(r) + c % 4;
  }
};
static_assert(sizeof(BlockQ4K) == 144 && sizeof(BlockQ8_0) == 34);

// Offset in its group of the tile that holds block i (a Q8_0 tile holds two blocks).
size_t x16_tile_offset(DType t, int64_t i) {
  if (t == DType::Q4_K) return static_cast<size_t>(i) * kX16Rows * sizeof(BlockQ4K);
  return static_cast<size_t>(i / 2) * 2 * kX16Rows * sizeof(BlockQ8_0);
}

// Calls f(block byte j, its offset in the tile, flip) for every byte of block i of row r
// (r < 16); flip is the value XORed in the tile (Q8_0 codes are stored unsigned).
template <class F>
void for_each_x16_byte(DType t, int64_t r, int64_t i, F&& f) {
  if (t == DType::Q4_K) {
    for (int j = 0; j < static_cast<int>(sizeof(BlockQ4K)); ++j) f(j, X16Map::q4k(r, j), uint8_t{0});
  } else {
    for (int j = 0; j < static_cast<int>(sizeof(BlockQ8_0)); ++j)
      f(j, X16Map::q8_0(r, j, i % 2), static_cast<uint8_t>(j < 2 ? 0 : 0x80));
  }
}
}  // namespace

bool can_interleave(const WeightView& w) {
  if (w.layout != WeightLayout::Rows || w.rows <= 0 || w.cols <= 0 || w.data == nullptr ||
      w.row_stride < row_bytes(w.type, w.cols))
    return false;
  switch (w.type) {
    case DType::Q4_K: return w.rows % kX16Rows == 0 && w.cols % QK_K == 0;
    case DType::Q8_0: return w.rows % kX16Rows == 0 && w.cols % (2 * QK8_0) == 0;  // 64 columns per tile
    case DType::BF16: return w.rows % kP32Rows == 0 && w.cols % 2 == 0;
    default: return false;
  }
}

namespace {
// BF16 panels: element (row n, column c) at dword (n / 32) * (K / 2) * 32 + (c / 2) * 32 + n % 32,
// half c % 2.
inline size_t p32_index(int64_t n, int64_t c, int64_t k) {
  return (static_cast<size_t>(n / kP32Rows) * static_cast<size_t>(k / 2) * kP32Rows +
          static_cast<size_t>(c / 2) * kP32Rows + static_cast<size_t>(n % kP32Rows)) * 2 +
         static_cast<size_t>(c % 2);
}
}  // namespace

WeightView interleave_rows(const WeightView& w, void* dst) {
  if (!can_interleave(w))
    fail(ErrorKind::InvalidArgument, "interleave_rows",
         "needs q4_k or q8_0 rows in a multiple of 16, or bf16 rows in a multiple of 32, got " +
             std::to_string(w.rows) + " x " + std::to_string(w.cols) + " " + dtype_name(w.type));
  // The same placement as X16Map / p32_index (which deinterleave_row reads back), 4 bytes at a
  // time: a load-time copy of a whole model should take a moment, not seconds.
  const uint8_t* src = static_cast<const uint8_t*>(w.data);
  uint8_t* out = static_cast<uint8_t*>(dst);
  WeightView v = w;
  v.data = dst;
  v.row_stride = row_bytes(w.type, w.cols);
  if (w.type == DType::BF16) {
    const int64_t kp = w.cols / 2;
    for (int64_t p = 0; p < w.rows / kP32Rows; ++p) {
      uint8_t* panel = out + static_cast<size_t>(p * kp) * kP32Rows * 4;
      const uint8_t* rows = src + static_cast<size_t>(p * kP32Rows) * w.row_stride;
      // Written in order; the 32 source rows are read side by side (one cache line each).
      for (int64_t i = 0; i < kp; ++i)
        for (int64_t r = 0; r < kP32Rows; ++r) std::memcpy(panel + (i * kP32Rows + r) * 4, rows + r * w.row_stride + 4 * i, 4);
    }
    v.layout = WeightLayout::P32;
    return v;
  }
  const DTypeTraits& tr = traits(w.type);
  const int64_t nb = w.cols / tr.block_size;
  const size_t group = static_cast<size_t>(nb) * tr.block_bytes * kX16Rows;
  for (int64_t g = 0; g < w.rows / kX16Rows; ++g)
    for (int64_t r = 0; r < kX16Rows; ++r) {
      const uint8_t* row = src + static_cast<size_t>(g * kX16Rows + r) * w.row_stride;
      for (int64_t i = 0; i < nb; ++i) {
        const uint8_t* blk = row + i * tr.block_bytes;
        uint8_t* t = out + g * group + x16_tile_offset(w.type, i);
        if (w.type == DType::Q4_K) {
          const BlockQ4K& b = *reinterpret_cast<const BlockQ4K*>(blk);
          std::memcpy(t + 2 * r, &b.d, 2);
          std::memcpy(t + 32 + 2 * r, &b.dmin, 2);
          for (int j = 0; j < K_SCALE_SIZE; ++j) t[64 + 16 * j + r] = b.scales[j];
          for (int c = 0; c < QK_K / 8; ++c) std::memcpy(t + 256 + 64 * c + 4 * r, b.qs + 4 * c, 4);
        } else {
          const BlockQ8_0& b = *reinterpret_cast<const BlockQ8_0*>(blk);
          const size_t e = static_cast<size_t>(i % 2);
          std::memcpy(t + 32 * e + 2 * r, &b.d, 2);
          for (int q = 0; q < QK8_0 / 4; ++q) {
            uint32_t c;
            std::memcpy(&c, b.qs + 4 * q, 4);
            c ^= 0x80808080u;  // stored unsigned
            std::memcpy(t + 64 + 512 * e + 64 * q + 4 * r, &c, 4);
          }
        }
      }
    }
  v.layout = WeightLayout::X16;
  return v;
}

void deinterleave_row(const WeightView& w, int64_t n, void* dst) {
  if (w.layout == WeightLayout::P32) {
    const uint16_t* in = static_cast<const uint16_t*>(w.data);
    uint16_t* row = static_cast<uint16_t*>(dst);
    for (int64_t c = 0; c < w.cols; ++c) row[c] = in[p32_index(n, c, w.cols)];
    return;
  }
  const DTypeTraits& tr = traits(w.type);
  const int64_t nb = w.cols / tr.block_size, g = n / kX16Rows, r = n % kX16Rows;
  const uint8_t* t = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(g * nb) * tr.block_bytes * kX16Rows;
  uint8_t* row = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t* blk = row + i * tr.block_bytes;
    const uint8_t* tile = t + x16_tile_offset(w.type, i);
    for_each_x16_byte(w.type, r, i, [&](int j, size_t at, uint8_t flip) { blk[j] = tile[at] ^ flip; });
  }
}

namespace ref {

void matmul(const WeightView& w, const float* x, int64_t m, float* y) {
  matmul_check("ref::matmul", w, x, m, y);
  const int64_t n = w.rows, k = w.cols;
  std::vector<float> row(static_cast<size_t>(k));
  std::vector<uint8_t> blocks(w.layout != WeightLayout::Rows ? row_bytes(w.type, k) : 0);
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* src = static_cast<const uint8_t*>(w.data) + j * w.row_stride;
    if (w.layout != WeightLayout::Rows) {
      deinterleave_row(w, j, blocks.data());
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
