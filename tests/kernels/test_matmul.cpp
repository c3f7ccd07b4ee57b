// matmul: the reference against independent expectations, then the optimized kernels (every
// SIMD level of this machine, 1 and 2 threads, odd shapes) against the reference by NMSE.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/blocks.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/quant.h"
#include "kernels/matmul.h"
#include "kernel_test_util.h"

namespace ptn {
namespace {

struct Matrix {
  DType type;
  int64_t rows, cols;
  size_t stride;
  std::vector<uint8_t> bytes;
  std::vector<float> source;  // the floats the rows were quantized from
  WeightView view() const { return {type, rows, cols, bytes.data(), stride}; }
};

// Random weights N(0, 1) of type t, rows padded by `pad` bytes.
Matrix make_weights(DType t, int64_t n, int64_t k, uint32_t seed, size_t pad = 0) {
  Matrix w{t, n, k, row_bytes(t, k) + pad, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  w.source.resize(static_cast<size_t>(n * k));
  for (auto& v : w.source) v = dist(rng);
  if (t == DType::TQ1_0 || t == DType::TQ2_0) {
    // Ternary weights, as BitNet b1.58 / TriLM checkpoints hold them: -s, 0 or s with s a
    // per-row f16-exact scale, so the format holds them exactly (every trit equally likely).
    std::uniform_int_distribution<int> trit(-1, 1);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j)
        w.source[i * k + j] = static_cast<float>(trit(rng)) * (0.5f + 0.25f * static_cast<float>(i % 4));
  }
  w.bytes.assign(w.stride * static_cast<size_t>(n) + 1, 0xEE);
  if (!can_quantize(t)) {
    // A type ptn only reads (the IQ2 and IQ3 types): random blocks, every byte a valid code, with the
    // f16 scale d at the block's start set to 2^-6; the source is what they dequantize to.
    std::uniform_int_distribution<int> byte(0, 255);
    const size_t bb = traits(t).block_bytes;
    for (int64_t i = 0; i < n; ++i) {
      uint8_t* row = w.bytes.data() + i * w.stride;
      for (size_t j = 0; j < row_bytes(t, k); ++j) row[j] = static_cast<uint8_t>(byte(rng));
      for (int64_t b = 0; b < k / traits(t).block_size; ++b) {
        const uint16_t d = f32_to_fp16(1.0f / 64);
        if (t == DType::IQ1_M) {  // d is the top nibbles of the four scale words (bytes 49, 51, 53, 55)
          uint8_t* top = row + b * bb + offsetof(BlockIQ1M, scales) + 1;
          for (int w = 0; w < 4; ++w) top[2 * w] = static_cast<uint8_t>((top[2 * w] & 0x0F) | (((d >> (4 * w)) & 15) << 4));
        } else {
          std::memcpy(row + b * bb, &d, 2);
        }
      }
      dequantize_row(t, row, w.source.data() + i * k, k);
    }
    return w;
  }
  for (int64_t i = 0; i < n; ++i) quantize_row(t, w.source.data() + i * k, w.bytes.data() + i * w.stride, k);
  return w;
}

std::vector<float> make_x(int64_t m, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (auto& v : x) v = dist(rng);
  // A few outliers per row, as real activations have.
  for (int64_t r = 0; r < m; ++r) x[r * k + (r * 7) % k] *= 8.f;
  return x;
}

double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = static_cast<double>(got[i]) - want[i];
    num += e * e;
    den += static_cast<double>(want[i]) * want[i];
  }
  return den > 0 ? num / den : num;
}

// Squared error of y = x · W^T relative to the power a dot product of x's and W's rows has when
// they are unrelated: sum ||x_r||^2 ||w_n||^2 / K. Unlike plain NMSE this stays meaningful
// when a few outputs happen to cancel to nearly zero (n = 1, m = 1 shapes).
double rel_error(const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& x,
                 const std::vector<float>& wsrc, int64_t m, int64_t n, int64_t k) {
  double xs = 0, ws = 0, num = 0;
  for (float v : x) xs += static_cast<double>(v) * v;
  for (float v : wsrc) ws += static_cast<double>(v) * v;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = static_cast<double>(got[i]) - want[i];
    num += e * e;
  }
  const double den = xs * ws / static_cast<double>(k);
  return den > 0 ? num / den : num;
}

std::vector<SimdLevel> levels() { return ptn::test::simd_levels(); }

struct SimdCapReset {
  ~SimdCapReset() { reset_simd_cap(); }
};

const DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q5_0,   DType::Q8_0,
                           DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q4_1, DType::Q5_1,   DType::IQ4_NL,
                           DType::Q2_K, DType::Q3_K, DType::IQ4_XS, DType::MXFP4, DType::TQ1_0, DType::TQ2_0,
                           DType::IQ3_XXS, DType::IQ3_S, DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ1_S, DType::IQ1_M};

// ---- reference ------------------------------------------------------------------------------

TEST(MatmulRef, F32SmallIntegersExact) {
  // W = [[1,2,3],[4,5,6]], x = [[1,0,-1],[2,1,0]] -> y = [[-2,-2],[4,13]].
  const float wd[] = {1, 2, 3, 4, 5, 6};
  const float x[] = {1, 0, -1, 2, 1, 0};
  float y[4] = {};
  ref::matmul({DType::F32, 2, 3, wd, 12}, x, 2, y);
  EXPECT_EQ(y[0], -2.f);
  EXPECT_EQ(y[1], -2.f);
  EXPECT_EQ(y[2], 4.f);
  EXPECT_EQ(y[3], 13.f);
}

TEST(MatmulRef, Q8_0MatchesHandDecodedBlocks) {
  // Build Q8_0 blocks by hand: row i, element j has q = (i * 37 + j * 11) % 255 - 127, d = 0.5 + i.
  const int64_t n = 3, k = 64;
  std::vector<BlockQ8_0> blocks(static_cast<size_t>(n * k / 32));
  std::vector<float> dense(static_cast<size_t>(n * k));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t b = 0; b < k / 32; ++b) {
      BlockQ8_0& blk = blocks[i * (k / 32) + b];
      blk.d = f32_to_fp16(0.5f + static_cast<float>(i));
      for (int j = 0; j < 32; ++j) {
        const int q = static_cast<int>((i * 37 + (b * 32 + j) * 11) % 255) - 127;
        blk.qs[j] = static_cast<int8_t>(q);
        dense[i * k + b * 32 + j] = (0.5f + static_cast<float>(i)) * static_cast<float>(q);
      }
    }
  const std::vector<float> x = make_x(2, k, 5);
  std::vector<float> y(6);
  ref::matmul({DType::Q8_0, n, k, blocks.data(), (k / 32) * sizeof(BlockQ8_0)}, x.data(), 2, y.data());
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t i = 0; i < n; ++i) {
      double want = 0;
      for (int64_t j = 0; j < k; ++j) want += static_cast<double>(x[r * k + j]) * dense[i * k + j];
      EXPECT_NEAR(y[r * n + i], want, 1e-4 * std::fabs(want) + 1e-4) << "r=" << r << " i=" << i;
    }
}

TEST(MatmulRef, EveryTypeApproximatesTheFloatProduct) {
  // The quantized weights differ from their source floats by the format's rounding only.
  // (TQ1_0's and TQ2_0's source floats are ternary, the IQ2 and IQ3 types' the dequantized random
  // blocks: only the accumulation differs.)
  const double tol[] = {1e-12, 1e-6, 1e-4, 2e-2, 8e-3, 1e-4, 2e-2, 8e-3, 2e-3, 2e-2, 8e-3, 1.2e-2,
                        0.25, 0.05, 1.2e-2, 0.03, 1e-12, 1e-12, 1e-12, 1e-12, 1e-12, 1e-12, 1e-12, 1e-12, 1e-12};  // IQ4_NL 0.0069, Q2_K 0.150, Q3_K 0.0263, IQ4_XS 0.0082, MXFP4 0.0151 measured
  int idx = 0;
  for (DType t : kAllTypes) {
    const int64_t k = 512, n = 8, m = 2;
    Matrix w = make_weights(t, n, k, 11);
    const std::vector<float> x = make_x(m, k, 12);
    std::vector<float> y(m * n), want(m * n);
    ref::matmul(w.view(), x.data(), m, y.data());
    ref::matmul({DType::F32, n, k, w.source.data(), static_cast<size_t>(k) * 4}, x.data(), m, want.data());
    EXPECT_LT(nmse(y, want), tol[idx]) << dtype_name(t);
    ++idx;
  }
}

// ---- optimized against reference ----------------------------------------------------------

double threshold(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: return 1e-10;
    case DType::BF16: return 1e-4;  // AVX-512 BF16 dot products round activations to bf16
    case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: case DType::Q2_K: case DType::Q3_K: case DType::IQ4_XS:
    case DType::TQ1_0: case DType::TQ2_0: case DType::IQ3_XXS: case DType::IQ3_S: case DType::IQ2_XXS:
    case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ1_S: case DType::IQ1_M:
      return 1.5e-3;  // 8-bit activations, one scale per 256 (the x rows have 8x outliers)
    default: return 5e-4;  // 8-bit activations, one scale per 32
  }
}

// 3, 6, 13, 17: full and partial 4-row tiles of the row kernels (AVX2: 8-row tiles for Q8_0, Q4_0
// and the Q4_K/Q5_K/Q6_K family, 13 = 8 + 4 + 1, 17 = 8 + 8 + 1); 23, 64: the panel kernels (m >= 20)
void check_type(DType t, const std::vector<int64_t>& ks, const std::vector<int64_t>& ns = {1, 67, 96},
                const std::vector<int64_t>& ms = {1, 3, 6, 13, 17, 23, 64}, uint32_t seed = 100) {
  SimdCapReset reset;
  ThreadPool pool1(1), pool2(2);
  for (int64_t k : ks)
    for (int64_t n : ns) {
      Matrix w = make_weights(t, n, k, seed++, n == 67 ? 48 : 0);
      for (int64_t m : ms) {
        const std::vector<float> x = make_x(m, k, seed++);
        std::vector<float> want(static_cast<size_t>(m * n));
        ref::matmul(w.view(), x.data(), m, want.data());
        for (SimdLevel level : levels()) {
          set_simd_cap(level);
          for (ThreadPool* pool : {&pool1, &pool2}) {
            std::vector<float> got(static_cast<size_t>(m * n), -1.f);
            matmul(w.view(), x.data(), m, got.data(), *pool);
            EXPECT_LT(rel_error(got, want, x, w.source, m, n, k), threshold(t))
                << dtype_name(t) << " " << simd_level_name(level) << " threads=" << pool->size() << " m=" << m
                << " n=" << n << " k=" << k;
            // Called twice: scratch reuse must not change the result.
            std::vector<float> again(static_cast<size_t>(m * n), -2.f);
            matmul(w.view(), x.data(), m, again.data(), *pool);
            EXPECT_EQ(0, std::memcmp(got.data(), again.data(), got.size() * 4)) << dtype_name(t);
          }
        }
      }
    }
}

// Float weights with several 4-row activation tiles go through the row kernels in blocks of
// weight rows (about 256 KB each): k = 2048 makes blocks of 32 (f32) / 64 (f16, bf16) rows, so
// n = 200 spans several blocks and a partial last one.
TEST(Matmul, FloatRowKernelBlocksOfWeightRows) {
  uint32_t seed = 900;
  for (DType t : {DType::F32, DType::F16, DType::BF16}) check_type(t, {2048}, {200}, {5, 8, 13}, seed += 10);
}

// The AVX2 quantized panels decode K in chunks of 64 sub-blocks (2048 columns): a K of 65 or
// 72 sub-blocks makes a second, partial chunk; n = 67 ends in a partial 8-column panel.
TEST(Matmul, QuantPanelsOverSeveralChunks) {
  uint32_t seed = 1900;
  for (DType t : kAllTypes) {
    if (!traits(t).quantized) continue;
    check_type(t, {traits(t).block_size == 256 ? 2304 : 2080}, {67}, {23}, seed += 10);
  }
}

TEST(Matmul, F32) { check_type(DType::F32, {1, 7, 300}); }
TEST(Matmul, F16) { check_type(DType::F16, {1, 33, 520}); }
TEST(Matmul, BF16) { check_type(DType::BF16, {1, 35, 520}); }
TEST(Matmul, Q8_0) { check_type(DType::Q8_0, {32, 160, 512}); }
TEST(Matmul, Q4_0) { check_type(DType::Q4_0, {32, 160, 512}); }
TEST(Matmul, Q5_0) { check_type(DType::Q5_0, {32, 160, 512}); }
TEST(Matmul, Q4_1) { check_type(DType::Q4_1, {32, 160, 512}); }
TEST(Matmul, Q5_1) { check_type(DType::Q5_1, {32, 160, 512}); }
TEST(Matmul, IQ4_NL) { check_type(DType::IQ4_NL, {32, 160, 512}); }
TEST(Matmul, Q4_K) { check_type(DType::Q4_K, {256, 768}); }
TEST(Matmul, Q5_K) { check_type(DType::Q5_K, {256, 768}); }
TEST(Matmul, Q6_K) { check_type(DType::Q6_K, {256, 768}); }
TEST(Matmul, Q2_K) { check_type(DType::Q2_K, {256, 768}); }
TEST(Matmul, Q3_K) { check_type(DType::Q3_K, {256, 768}); }
TEST(Matmul, IQ4_XS) { check_type(DType::IQ4_XS, {256, 768}); }
TEST(Matmul, MXFP4) { check_type(DType::MXFP4, {32, 160, 512}); }
TEST(Matmul, TQ1_0) { check_type(DType::TQ1_0, {256, 768}); }
TEST(Matmul, TQ2_0) { check_type(DType::TQ2_0, {256, 768}); }
TEST(Matmul, IQ3_XXS) { check_type(DType::IQ3_XXS, {256, 768}); }
TEST(Matmul, IQ3_S) { check_type(DType::IQ3_S, {256, 768}); }
TEST(Matmul, IQ2_XXS) { check_type(DType::IQ2_XXS, {256, 768}); }
TEST(Matmul, IQ2_XS) { check_type(DType::IQ2_XS, {256, 768}); }
TEST(Matmul, IQ2_S) { check_type(DType::IQ2_S, {256, 768}); }
TEST(Matmul, IQ1_S) { check_type(DType::IQ1_S, {256, 768}); }
TEST(Matmul, IQ1_M) { check_type(DType::IQ1_M, {256, 768}); }

TEST(Matmul, LargerPrefillShapeEveryType) {
  // Enough rows and columns for the blocked paths to use several K chunks and row tiles, with
  // a partial last chunk (K chunks are 512 quantized, 256 bf16 and 128 f32 elements; K is a
  // multiple of 256 only for the K-quants).
  SimdCapReset reset;
  ThreadPool pool(2);
  for (DType t : kAllTypes) {
    const int64_t m = 70, n = 100, k = traits(t).block_size == 256 ? 2816 : 2912;
    Matrix w = make_weights(t, n, k, 7);
    const std::vector<float> x = make_x(m, k, 8);
    std::vector<float> want(m * n), got(m * n);
    ref::matmul(w.view(), x.data(), m, want.data());
    for (SimdLevel level : levels()) {
      set_simd_cap(level);
      matmul(w.view(), x.data(), m, got.data(), pool);
      EXPECT_LT(nmse(got, want), threshold(t)) << dtype_name(t) << " " << simd_level_name(level);
      EXPECT_LT(rel_error(got, want, x, w.source, m, n, k), threshold(t)) << dtype_name(t);
    }
  }
}

TEST(Matmul, NonFiniteActivationsStayInTheirRow) {
  // A NaN / inf in one activation row must not crash or leak into the other rows' outputs.
  SimdCapReset reset;
  ThreadPool pool(2);
  for (DType t : kAllTypes) {
    const int64_t m = 23, n = 40, k = 512;
    Matrix w = make_weights(t, n, k, 21);
    std::vector<float> x = make_x(m, k, 22);
    x[0 * k + 3] = std::numeric_limits<float>::quiet_NaN();
    x[1 * k + 100] = std::numeric_limits<float>::infinity();
    std::vector<float> want(m * n);
    ref::matmul(w.view(), x.data(), m, want.data());
    for (SimdLevel level : levels()) {
      set_simd_cap(level);
      for (int64_t rows : {int64_t{3}, m}) {  // the row kernels (3 rows) and the panel kernels (23)
        std::vector<float> got(rows * n);
        matmul(w.view(), x.data(), rows, got.data(), pool);
        // Rows 0 and 1 hold the non-finite values; rows 2.. must match the reference.
        const std::vector<float> g(got.begin() + 2 * n, got.end());
        const std::vector<float> e(want.begin() + 2 * n, want.begin() + rows * n);
        const std::vector<float> xs(x.begin() + 2 * k, x.begin() + rows * k);
        EXPECT_LT(rel_error(g, e, xs, w.source, rows - 2, n, k), threshold(t))
            << dtype_name(t) << " " << simd_level_name(level) << " rows=" << rows;
      }
    }
  }
}

TEST(Matmul, EmptyShapes) {
  ThreadPool pool(2);
  const float wd[4] = {1, 2, 3, 4};
  float y[2] = {5, 5};
  matmul({DType::F32, 2, 0, wd, 0}, wd, 1, y, pool);  // K = 0: y = 0
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[1], 0.f);
  matmul({DType::F32, 2, 2, wd, 8}, wd, 0, y, pool);  // m = 0: nothing to do
}

void expect_error(const WeightView& w, const float* x, int64_t m, float* y, const std::string& needle) {
  ThreadPool pool(1);
  for (int pass = 0; pass < 2; ++pass) {
    try {
      if (pass == 0) matmul(w, x, m, y, pool);
      else ref::matmul(w, x, m, y);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("matmul"), std::string::npos) << msg;
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    }
  }
}

TEST(Matmul, BadShapesThrow) {
  std::vector<uint8_t> buf(4096);
  std::vector<float> x(1024), y(64);
  expect_error({DType::Q8_0, 2, 33, buf.data(), 64}, x.data(), 1, y.data(), "K = 33");
  expect_error({DType::Q4_K, 2, 128, buf.data(), 144}, x.data(), 1, y.data(), "K = 128");
  expect_error({DType::Q8_0, 2, 64, nullptr, 68}, x.data(), 1, y.data(), "null weight data");
  expect_error({DType::F32, 2, 64, buf.data(), 256}, nullptr, 1, y.data(), "null x");
  expect_error({DType::F32, 2, 64, buf.data(), 256}, x.data(), 1, nullptr, "null y");
  expect_error({DType::F32, 2, 64, buf.data(), 100}, x.data(), 1, y.data(), "row_stride");
  expect_error({DType::Q8_K, 2, 256, buf.data(), 292}, x.data(), 1, y.data(), "not supported");
  expect_error({DType::F32, -1, 64, buf.data(), 256}, x.data(), 1, y.data(), "negative");
  expect_error({DType::F32, int64_t{1} << 40, int64_t{1} << 40, buf.data(), 256}, x.data(), 1, y.data(), "too large");
}

// matmul_multi against independent matmul calls (bitwise: every output is computed by the same
// kernel on the same rows, only the split over the threads differs) and against the reference.
void check_multi(const std::vector<DType>& types, const std::vector<int64_t>& ns, int64_t k) {
  SimdCapReset reset;
  ThreadPool pool1(1), pool2(2);
  std::vector<Matrix> ws;
  for (size_t i = 0; i < types.size(); ++i)
    ws.push_back(make_weights(types[i], ns[i], k, 300 + static_cast<uint32_t>(i), i == 1 ? 16 : 0));
  for (int64_t m : {1, 4, 23}) {
    const std::vector<float> x = make_x(m, k, 400 + static_cast<uint32_t>(m));
    for (SimdLevel level : levels()) {
      set_simd_cap(level);
      for (ThreadPool* pool : {&pool1, &pool2}) {
        std::vector<std::vector<float>> got(ws.size()), want(ws.size()), ref_y(ws.size());
        std::vector<WeightView> views;
        std::vector<float*> ys;
        for (size_t i = 0; i < ws.size(); ++i) {
          const size_t sz = static_cast<size_t>(m * ws[i].rows);
          got[i].assign(sz, -1.f);
          want[i].assign(sz, -2.f);
          ref_y[i].assign(sz, 0.f);
          views.push_back(ws[i].view());
          ys.push_back(got[i].data());
          matmul(ws[i].view(), x.data(), m, want[i].data(), *pool);
          ref::matmul(ws[i].view(), x.data(), m, ref_y[i].data());
        }
        matmul_multi(views.data(), ys.data(), static_cast<int>(ws.size()), x.data(), m, *pool);
        for (size_t i = 0; i < ws.size(); ++i) {
          EXPECT_EQ(0, std::memcmp(got[i].data(), want[i].data(), got[i].size() * 4))
              << "matrix " << i << " " << dtype_name(types[i]) << " m=" << m << " " << simd_level_name(level)
              << " threads=" << pool->size();
          EXPECT_LT(rel_error(got[i], ref_y[i], x, ws[i].source, m, ws[i].rows, k), threshold(types[i]))
              << "matrix " << i << " " << dtype_name(types[i]) << " m=" << m;
        }
      }
    }
  }
}

// q/k/v-like shapes: a wide matrix and two narrow ones, boundaries inside and between them.
TEST(MatmulMulti, QuantizedSameActivationFormat) {
  check_multi({DType::Q4_K, DType::Q6_K, DType::Q4_K}, {200, 67, 96}, 512);
  check_multi({DType::Q8_0, DType::Q8_0}, {300, 300}, 256);
  check_multi({DType::Q5_1, DType::IQ4_NL, DType::Q4_1, DType::Q5_0}, {96, 67, 40, 33}, 288);
}
TEST(MatmulMulti, FloatWeights) { check_multi({DType::F16, DType::F32, DType::BF16}, {96, 40, 70}, 288); }
// Differing activation formats fall back to one call each; the results are the same.
TEST(MatmulMulti, MixedFormatsFallBack) {
  check_multi({DType::Q8_0, DType::Q4_K, DType::F16}, {64, 64, 33}, 512);
}

// matmul_jobs: products with their own activations (the experts of a decode step: different
// x, different row counts, different K, gate and up sharing one x, quantized and float weights
// in one batch, a job with no rows), bitwise against one matmul call per job at every level.
TEST(MatmulJobs, IndependentProductsMatchOneCallEach) {
  SimdCapReset reset;
  ThreadPool pool1(1), pool2(2);
  struct Spec {
    DType type;
    int64_t n, k, m;
    int x;  // which activation matrix
  };
  const Spec specs[] = {{DType::Q4_K, 96, 512, 1, 0},  {DType::Q4_K, 96, 512, 1, 0},  {DType::Q6_K, 64, 512, 3, 1},
                        {DType::Q8_0, 130, 256, 2, 2}, {DType::Q5_0, 33, 256, 2, 2},  {DType::F16, 70, 256, 1, 3},
                        {DType::BF16, 40, 256, 5, 3},  {DType::MXFP4, 64, 256, 4, 4}, {DType::Q4_K, 32, 512, 0, 5},
                        {DType::IQ4_XS, 48, 512, 6, 6}};
  const int n = static_cast<int>(std::size(specs));
  std::vector<Matrix> ws;
  std::vector<std::vector<float>> xs(7);
  for (int i = 0; i < n; ++i) {
    const Spec& sp = specs[i];
    ws.push_back(make_weights(sp.type, sp.n, sp.k, 700 + static_cast<uint32_t>(i), i == 3 ? 16 : 0));
    // 8 rows for every activation matrix: jobs that share one read it to different depths.
    if (xs[static_cast<size_t>(sp.x)].empty()) xs[static_cast<size_t>(sp.x)] = make_x(8, sp.k, 800 + static_cast<uint32_t>(i));
  }
  for (SimdLevel level : levels()) {
    set_simd_cap(level);
    for (ThreadPool* pool : {&pool1, &pool2}) {
      std::vector<std::vector<float>> got(n), want(n);
      std::vector<MatmulJob> jobs;
      for (int i = 0; i < n; ++i) {
        const Spec& sp = specs[i];
        const size_t sz = static_cast<size_t>(sp.m * sp.n);
        got[static_cast<size_t>(i)].assign(sz, -1.f);
        want[static_cast<size_t>(i)].assign(sz, -2.f);
        const float* x = xs[static_cast<size_t>(sp.x)].data();
        matmul(ws[static_cast<size_t>(i)].view(), x, sp.m, want[static_cast<size_t>(i)].data(), *pool);
        jobs.push_back({ws[static_cast<size_t>(i)].view(), x, sp.m, got[static_cast<size_t>(i)].data()});
      }
      matmul_jobs(jobs.data(), n, *pool);
      for (int i = 0; i < n; ++i)
        EXPECT_TRUE(got[static_cast<size_t>(i)].empty() ||  // (memcmp of an empty vector's null data is UB)
                    std::memcmp(got[static_cast<size_t>(i)].data(), want[static_cast<size_t>(i)].data(),
                                got[static_cast<size_t>(i)].size() * 4) == 0)
            << "job " << i << " " << dtype_name(specs[i].type) << " " << simd_level_name(level)
            << " threads=" << pool->size();
      // A product is what it is whatever else is in the batch: the first job alone.
      std::vector<float> alone(got[0].size(), -3.f);
      MatmulJob one = jobs[0];
      one.y = alone.data();
      matmul_jobs(&one, 1, *pool);
      EXPECT_EQ(0, std::memcmp(alone.data(), want[0].data(), alone.size() * 4));
    }
  }
  // Bad jobs are refused before anything is computed.
  ThreadPool pool(2);
  std::vector<float> x(512), y(96, 5.f);
  MatmulJob bad[2] = {{ws[0].view(), x.data(), 1, y.data()}, {ws[1].view(), nullptr, 1, y.data()}};
  EXPECT_THROW(matmul_jobs(bad, 2, pool), Error);
  EXPECT_EQ(y[0], 5.f);
  EXPECT_THROW(matmul_jobs(bad, -1, pool), Error);
  matmul_jobs(bad, 0, pool);  // nothing to do
}

TEST(MatmulMulti, BadArgumentsThrow) {
  ThreadPool pool(2);
  std::vector<uint8_t> buf(4096);
  std::vector<float> x(1024), y0(64), y1(64);
  const WeightView a{DType::F32, 2, 64, buf.data(), 256}, b{DType::F32, 2, 32, buf.data(), 128};
  WeightView pair[2] = {a, b};
  float* ys[2] = {y0.data(), y1.data()};
  try {
    matmul_multi(pair, ys, 2, x.data(), 1, pool);
    ADD_FAILURE() << "no error for differing K";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("K = 32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(matmul_multi(pair, ys, kMatmulMultiMax + 1, x.data(), 1, pool), Error);
  EXPECT_THROW(matmul_multi(pair, ys, -1, x.data(), 1, pool), Error);
  pair[1] = a;
  ys[1] = nullptr;
  EXPECT_THROW(matmul_multi(pair, ys, 2, x.data(), 1, pool), Error);  // null y of the second
  matmul_multi(pair, ys, 0, x.data(), 1, pool);                        // nothing to do
}


// ---- rows interleaved 16 at a time (WeightLayout::X16: Q4_K, Q8_0, Q4_0, IQ4_NL, MXFP4) ---------------------------

struct Interleaved {
  Matrix plain;
  std::vector<uint8_t> bytes;
  WeightView view;
};
Interleaved interleaved(DType t, int64_t n, int64_t k, uint32_t seed, size_t pad = 0) {
  Interleaved w{make_weights(t, n, k, seed, pad), {}, {}};
  w.bytes.assign(static_cast<size_t>(n) * row_bytes(t, k), 0xEE);
  w.view = interleave_rows(w.plain.view(), w.bytes.data());
  return w;
}

TEST(X16Interleaved, RowsComeBackAndTheReferenceAgrees) {
  for (DType t : {DType::Q4_K, DType::Q8_0, DType::Q4_0, DType::IQ4_NL, DType::MXFP4, DType::BF16}) {
    const Interleaved w = interleaved(t, t == DType::BF16 ? 64 : 48, 768, 7, 16);
    EXPECT_EQ(w.view.layout, t == DType::BF16 ? WeightLayout::P32 : WeightLayout::X16);
    const size_t rb = row_bytes(t, 768);
    std::vector<uint8_t> row(rb);
    for (int64_t n = 0; n < w.view.rows; ++n) {
      deinterleave_row(w.view, n, row.data());
      EXPECT_EQ(0, std::memcmp(row.data(), w.plain.bytes.data() + n * w.plain.stride, rb)) << dtype_name(t) << " row " << n;
    }
    const std::vector<float> x = make_x(3, 768, 8);
    std::vector<float> a(3 * w.view.rows), b(3 * w.view.rows);
    ref::matmul(w.plain.view(), x.data(), 3, a.data());
    ref::matmul(w.view, x.data(), 3, b.data());
    EXPECT_EQ(a, b) << dtype_name(t);
  }
}

// Q4_K tiles are the same bytes regrouped: the byte counts of plain and interleaved agree.
TEST(X16Interleaved, Q4KTilesHoldTheSameBytes) {
  const Interleaved w = interleaved(DType::Q4_K, 32, 512, 9);
  std::vector<int> count_plain(256), count_x16(256);
  for (uint8_t b : std::vector<uint8_t>(w.plain.bytes.begin(), w.plain.bytes.end() - 1)) ++count_plain[b];
  for (uint8_t b : w.bytes) ++count_x16[b];
  EXPECT_EQ(count_plain, count_x16);
}

// Every SIMD level (AVX-512: the interleaved kernels; the others de-interleave), 1 and 2
// threads, row-kernel sizes 1-19 (tiles of 4 and the partial ones) and panel sizes from 20, 16-row
// groups that do not fill the last 32-column panel (n = 48, 208).
void check_interleaved(DType t) {
  SimdCapReset reset;
  ThreadPool pool1(1), pool2(2);
  uint32_t seed = 1200;
  const bool bf16 = t == DType::BF16;
  const bool nib32 = t == DType::MXFP4 || t == DType::Q4_0 || t == DType::IQ4_NL;
  for (int64_t k : {bf16 ? 66 : 256, 768, 2048, nib32 ? 2880 : 0}) {
    if (k == 0) continue;
    for (int64_t n : {bf16 ? 32 : 16, 48, 96, 224}) {
      if (n % (bf16 ? 32 : 16) != 0) continue;
      const Interleaved w = interleaved(t, n, k, seed++);
      for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 13, 19, 20, 23, 64}) {
        if (k == 2048 && m > 8 && n > 48) continue;  // (the large shapes add time, not cases)
        const std::vector<float> x = make_x(m, k, seed++);
        std::vector<float> want(static_cast<size_t>(m * n));
        ref::matmul(w.plain.view(), x.data(), m, want.data());
        for (SimdLevel level : levels()) {
          set_simd_cap(level);
          for (ThreadPool* pool : {&pool1, &pool2}) {
            std::vector<float> got(static_cast<size_t>(m * n), -1.f);
            matmul(w.view, x.data(), m, got.data(), *pool);
            EXPECT_LT(rel_error(got, want, x, w.plain.source, m, n, k), threshold(t))
                << dtype_name(t) << " " << simd_level_name(level) << " threads=" << pool->size() << " m=" << m << " n=" << n << " k=" << k;
            // The same integer dot products as the row layout: the two differ by float rounding only.
            std::vector<float> plain(static_cast<size_t>(m * n));
            matmul(w.plain.view(), x.data(), m, plain.data(), *pool);
            EXPECT_LT(nmse(got, plain), 1e-10)
                << dtype_name(t) << " " << simd_level_name(level) << " m=" << m << " n=" << n << " k=" << k;
          }
        }
      }
    }
  }
}
TEST(X16Interleaved, Q4KMatchesTheReference) { check_interleaved(DType::Q4_K); }
TEST(X16Interleaved, Q8_0MatchesTheReference) { check_interleaved(DType::Q8_0); }
// The 32-column tiles: also K = 2880 (90 blocks, gpt-oss's).
TEST(X16Interleaved, Mxfp4MatchesTheReference) { check_interleaved(DType::MXFP4); }
TEST(X16Interleaved, Q4_0MatchesTheReference) { check_interleaved(DType::Q4_0); }
TEST(X16Interleaved, Iq4NlMatchesTheReference) { check_interleaved(DType::IQ4_NL); }
// BF16 in 32-row panels: from 8 rows the panels go straight into the BF16 dot products.
TEST(X16Interleaved, Bf16PanelsMatchTheReference) { check_interleaved(DType::BF16); }

TEST(X16Interleaved, InMatmulMultiWithRowLayouts) {
  SimdCapReset reset;
  ThreadPool pool(2);
  const int64_t k = 512;
  const Interleaved a = interleaved(DType::Q4_K, 208, k, 31);
  const Matrix b = make_weights(DType::Q6_K, 67, k, 32), c = make_weights(DType::Q4_K, 96, k, 33);
  for (int64_t m : {1, 4, 23}) {
    const std::vector<float> x = make_x(m, k, 40 + static_cast<uint32_t>(m));
    for (SimdLevel level : levels()) {
      set_simd_cap(level);
      std::vector<float> ya(m * 208), yb(m * 67), yc(m * 96), wa(m * 208), wb(m * 67), wc(m * 96);
      WeightView views[3] = {a.view, b.view(), c.view()};
      float* ys[3] = {ya.data(), yb.data(), yc.data()};
      matmul_multi(views, ys, 3, x.data(), m, pool);
      matmul(a.view, x.data(), m, wa.data(), pool);
      matmul(b.view(), x.data(), m, wb.data(), pool);
      matmul(c.view(), x.data(), m, wc.data(), pool);
      EXPECT_EQ(ya, wa) << simd_level_name(level) << " m=" << m;
      EXPECT_EQ(yb, wb) << simd_level_name(level) << " m=" << m;
      EXPECT_EQ(yc, wc) << simd_level_name(level) << " m=" << m;
    }
  }
}

TEST(X16Interleaved, BadInputsThrow) {
  std::vector<uint8_t> buf(16 * 144 * 2, 0);
  std::vector<float> x(512), y(64);
  const Matrix eight = make_weights(DType::Q4_K, 8, 256, 50);
  EXPECT_FALSE(can_interleave(eight.view()));  // rows not a multiple of 16
  EXPECT_THROW(interleave_rows(eight.view(), buf.data()), Error);
  const Matrix q6 = make_weights(DType::Q6_K, 16, 256, 51);
  EXPECT_FALSE(can_interleave(q6.view()));
  const Matrix bf = make_weights(DType::BF16, 16, 64, 53);  // panels of 32 rows
  EXPECT_FALSE(can_interleave(bf.view()));
  const Matrix bf_odd = make_weights(DType::BF16, 32, 63, 54);  // K must be even
  EXPECT_FALSE(can_interleave(bf_odd.view()));
  const Matrix q8 = make_weights(DType::Q8_0, 16, 96, 52);  // a Q8_0 tile is 64 columns
  EXPECT_FALSE(can_interleave(q8.view()));
  EXPECT_THROW(interleave_rows(q8.view(), buf.data()), Error);
  WeightView bad{DType::Q4_K, 8, 256, buf.data(), 144, WeightLayout::X16};
  expect_error(bad, x.data(), 1, y.data(), "multiple of 16");
  bad = {DType::Q6_K, 16, 256, buf.data(), 210, WeightLayout::X16};
  expect_error(bad, x.data(), 1, y.data(), "must be q4_k, q8_0 (K a multiple of 64), q4_0, iq4_nl or mxfp4");
  bad = {DType::Q8_0, 16, 96, buf.data(), 102, WeightLayout::X16};  // half a Q8_0 tile
  expect_error(bad, x.data(), 1, y.data(), "K a multiple of 64");
  const Matrix mx8 = make_weights(DType::MXFP4, 8, 64, 55);  // MXFP4 tiles are 32 columns, rows 16
  EXPECT_FALSE(can_interleave(mx8.view()));
  bad = {DType::BF16, 16, 64, buf.data(), 128, WeightLayout::P32};
  expect_error(bad, x.data(), 1, y.data(), "must be bf16 with rows a multiple of 32");
}

}  // namespace
}  // namespace ptn
