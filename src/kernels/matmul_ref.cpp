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
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q4_0: case DType::Q4_1:
    case DType::Q5_0: case DType::Q5_1: case DType::Q8_0: case DType::IQ4_NL: case DType::Q4_K:
    case DType::Q5_K: case DType::Q6_K: case DType::Q2_K: case DType::Q3_K: case DType::IQ4_XS:
    case DType::MXFP4: case DType::TQ1_0: case DType::TQ2_0: case DType::IQ3_XXS: case DType::IQ3_S:
    case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ1_S: case DType::IQ1_M:
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
    const bool x16_type = w.type == DType::Q4_K || w.type == DType::Q8_0 || w.type == DType::MXFP4 ||
                          w.type == DType::Q4_0 || w.type == DType::IQ4_NL;
    if (!x16_type || w.rows % kX16Rows != 0 || (w.type == DType::Q8_0 && w.cols % 64 != 0))
      fail(ErrorKind::InvalidArgument, op,
           "an interleaved (16-row) weight must be q4_k, q8_0 (K a multiple of 64), q4_0, iq4_nl or mxfp4 with rows a "
           "multiple of 16 (" + shapes() + ")");
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
// The placement of a block's bytes in its tile is written once, as a list of moves, and used
// both ways: interleave_rows copies block -> tile, deinterleave_row tile -> block.

namespace {
// Calls move(offset in the tile, offset in the block, bytes, xor) for the bytes of one block of
// row r (r < 16) of a group; the xor (Q8_0 codes are stored unsigned) undoes itself.
template <class Move>
void q4k_moves(int64_t r, Move&& move) {
  const size_t rr = static_cast<size_t>(r);
  move(2 * rr, 0, 2, 0u);        // d
  move(32 + 2 * rr, 2, 2, 0u);   // dmin
  for (size_t j = 0; j < K_SCALE_SIZE; ++j) move(64 + 16 * j + rr, 4 + j, 1, 0u);
  for (size_t c = 0; c < QK_K / 8; ++c) move(256 + 64 * c + 4 * rr, 16 + 4 * c, 4, 0u);  // qs, 4 bytes per quad
}
// e: which of the tile's two blocks (columns 0-31 or 32-63 of the tile).
template <class Move>
void q8_0_moves(int64_t r, size_t e, Move&& move) {
  const size_t rr = static_cast<size_t>(r);
  move(32 * e + 2 * rr, 0, 2, 0u);  // d
  for (size_t q = 0; q < QK8_0 / 4; ++q) move(64 + 512 * e + 64 * q + 4 * rr, 2 + 4 * q, 4, 0x80808080u);
}
// Q4_0, IQ4_NL and MXFP4 (one block per tile): the scale of row r (h bytes: the f16 d, or
// MXFP4's exponent) at h r, then for nibble-byte quad j (0..3) 64 bytes at 16 h + 64 j whose
// bytes 4r..4r+3 are row r's qs[4j..4j+3].
template <class Move>
void nib32_moves(int64_t r, size_t h, Move&& move) {
  const size_t rr = static_cast<size_t>(r);
  move(h * rr, 0, h, 0u);
  for (size_t j = 0; j < 4; ++j) move(16 * h + 64 * j + 4 * rr, h + 4 * j, 4, 0u);
}
static_assert(sizeof(BlockQ4K) == 144 && sizeof(BlockQ8_0) == 34 && sizeof(BlockMXFP4) == 17 &&
              sizeof(BlockQ4_0) == 18 && sizeof(BlockIQ4_NL) == 18);

// Offset in its group of the tile that holds block i (a Q8_0 tile holds two blocks).
size_t x16_tile_offset(DType t, int64_t i) {
  if (t == DType::Q4_K) return static_cast<size_t>(i) * kX16Rows * sizeof(BlockQ4K);
  if (t == DType::MXFP4 || t == DType::Q4_0 || t == DType::IQ4_NL) return static_cast<size_t>(i) * kX16Rows * traits(t).block_bytes;
  return static_cast<size_t>(i / 2) * 2 * kX16Rows * sizeof(BlockQ8_0);
}

// Copies block i of group row r from `from` to `to`: the block into its tile when kToTile, else
// the tile back into the block.
template <bool kToTile>
void move_block(DType t, int64_t r, int64_t i, const uint8_t* from, uint8_t* to) {
  auto move = [&](size_t at, size_t j, size_t n, uint32_t flip) {
    uint32_t v = 0;
    std::memcpy(&v, from + (kToTile ? j : at), n);
    v ^= flip;
    std::memcpy(to + (kToTile ? at : j), &v, n);
  };
  if (t == DType::Q4_K) q4k_moves(r, move);
  else if (t == DType::MXFP4) nib32_moves(r, 1, move);
  else if (t == DType::Q4_0 || t == DType::IQ4_NL) nib32_moves(r, 2, move);
  else q8_0_moves(r, static_cast<size_t>(i % 2), move);
}

// BF16 panels: the dword of pair i (columns 2i, 2i + 1) of row r of a panel, counted from the
// panel's start (kp pairs per row).
inline size_t p32_dword(int64_t i, int64_t r) { return static_cast<size_t>(i * kP32Rows + r); }
}  // namespace

bool can_interleave(const WeightView& w) {
  if (w.layout != WeightLayout::Rows || w.rows <= 0 || w.cols <= 0 || w.data == nullptr ||
      w.row_stride < row_bytes(w.type, w.cols))
    return false;
  switch (w.type) {
    case DType::Q4_K: return w.rows % kX16Rows == 0 && w.cols % QK_K == 0;
    case DType::Q8_0: return w.rows % kX16Rows == 0 && w.cols % (2 * QK8_0) == 0;  // 64 columns per tile
    case DType::Q4_0:
    case DType::IQ4_NL:
    case DType::MXFP4: return w.rows % kX16Rows == 0 && w.cols % 32 == 0;
    case DType::BF16: return w.rows % kP32Rows == 0 && w.cols % 2 == 0;
    default: return false;
  }
}

WeightView interleave_rows(const WeightView& w, void* dst) {
  if (!can_interleave(w))
    fail(ErrorKind::InvalidArgument, "interleave_rows",
         "needs q4_k, q8_0, q4_0, iq4_nl or mxfp4 rows in a multiple of 16, or bf16 rows in a multiple of 32, got " +
             std::to_string(w.rows) + " x " + std::to_string(w.cols) + " " + dtype_name(w.type));
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
        for (int64_t r = 0; r < kP32Rows; ++r) std::memcpy(panel + 4 * p32_dword(i, r), rows + r * w.row_stride + 4 * i, 4);
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
      for (int64_t i = 0; i < nb; ++i)
        move_block<true>(w.type, r, i, row + i * tr.block_bytes, out + g * group + x16_tile_offset(w.type, i));
    }
  v.layout = WeightLayout::X16;
  return v;
}

void deinterleave_row(const WeightView& w, int64_t n, void* dst) {
  uint8_t* row = static_cast<uint8_t*>(dst);
  if (w.layout == WeightLayout::P32) {
    const int64_t kp = w.cols / 2;
    const uint8_t* panel = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(n / kP32Rows * kp) * kP32Rows * 4;
    for (int64_t i = 0; i < kp; ++i) std::memcpy(row + 4 * i, panel + 4 * p32_dword(i, n % kP32Rows), 4);
    return;
  }
  const DTypeTraits& tr = traits(w.type);
  const int64_t nb = w.cols / tr.block_size, g = n / kX16Rows, r = n % kX16Rows;
  const uint8_t* t = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(g * nb) * tr.block_bytes * kX16Rows;
  for (int64_t i = 0; i < nb; ++i) move_block<false>(w.type, r, i, t + x16_tile_offset(w.type, i), row + i * tr.block_bytes);
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
