// Tests of core/quant.h: block decoding against hand-written element formulas, round-trip
// error bounds (ggml's test-quantize-fns metric), edge cases, and bytes written by llama.cpp's
// own quantizer (models/stories260K/quantized/*.gguf) against our quantizer and dequantizer.
#include "core/quant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/blocks.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/reader.h"
#include "core/threadpool.h"

namespace ptn {
namespace {

const DType kQuantTypes[] = {DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K,
                             DType::Q8_K, DType::Q4_1, DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::MXFP4,
                             DType::TQ1_0, DType::TQ2_0, DType::IQ4_NL, DType::IQ4_XS};

std::vector<float> randn(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::vector<uint8_t> quantize(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(t, static_cast<int64_t>(x.size())));
  quantize_row(t, x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

std::vector<float> dequantize(DType t, const std::vector<uint8_t>& q, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  dequantize_row(t, q.data(), y.data(), n);
  return y;
}

// Sets a random but finite half-float scale (exponent limited so no inf/NaN) in a block.
uint16_t finite_half(std::mt19937& rng) {
  uint16_t h = static_cast<uint16_t>(rng());
  if (((h >> 10) & 0x1f) == 0x1f) h = static_cast<uint16_t>(h & ~0x4000u);  // clear top exponent bit
  return h;
}

// quantize_row refuses t by name (ErrorKind::Unsupported, the message names the type).
void expect_unsupported_quantize(DType t, const float* x, void* q) {
  try {
    quantize_row(t, x, q, 32);
    ADD_FAILURE() << "no error for " << dtype_name(t);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find(dtype_name(t)), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// Dequantization against element-by-element formulas written from the format description
// (GGUF / ggml block layouts), independent of the block-loop structure in quant_*.cpp.

TEST(Dequantize, Q4_0ElementFormula) {
  std::mt19937 rng(1);
  std::vector<BlockQ4_0> b(8);
  auto raw = random_bytes(sizeof(BlockQ4_0) * b.size(), 2);
  std::memcpy(b.data(), raw.data(), raw.size());
  for (auto& blk : b) blk.d = finite_half(rng);
  std::vector<float> y(b.size() * 32);
  dequantize_row(DType::Q4_0, b.data(), y.data(), static_cast<int64_t>(y.size()));
  for (size_t e = 0; e < y.size(); ++e) {
    const BlockQ4_0& blk = b[e / 32];
    const int j = static_cast<int>(e % 32);
    const int q = j < 16 ? (blk.qs[j] & 15) : (blk.qs[j - 16] >> 4);
    EXPECT_EQ(y[e], static_cast<float>(q - 8) * fp16_to_f32(blk.d)) << "element " << e;
  }
}

TEST(Dequantize, Q5_0ElementFormula) {
  std::mt19937 rng(3);
  std::vector<BlockQ5_0> b(8);
  auto raw = random_bytes(sizeof(BlockQ5_0) * b.size(), 4);
  std::memcpy(b.data(), raw.data(), raw.size());
  for (auto& blk : b) blk.d = finite_half(rng);
  std::vector<float> y(b.size() * 32);
  dequantize_row(DType::Q5_0, b.data(), y.data(), static_cast<int64_t>(y.size()));
  for (size_t e = 0; e < y.size(); ++e) {
    const BlockQ5_0& blk = b[e / 32];
    const int j = static_cast<int>(e % 32);
    const int lo = j < 16 ? (blk.qs[j] & 15) : (blk.qs[j - 16] >> 4);
    const int hi = (blk.qh[j / 8] >> (j % 8)) & 1;  // qh is a little-endian 32-bit mask
    EXPECT_EQ(y[e], static_cast<float>(lo + 16 * hi - 16) * fp16_to_f32(blk.d)) << "element " << e;
  }
}

// Q4_1 / Q5_1: x = q * d + m in f32 (two roundings, as ggml's x0*d + m), q as Q4_0 / Q5_0 without offset.
TEST(Dequantize, Q4_1AndQ5_1ElementFormula) {
  std::mt19937 rng(31);
  std::vector<BlockQ4_1> b4(8);
  std::vector<BlockQ5_1> b5(8);
  auto raw = random_bytes(sizeof(BlockQ4_1) * b4.size(), 32);
  std::memcpy(b4.data(), raw.data(), raw.size());
  raw = random_bytes(sizeof(BlockQ5_1) * b5.size(), 33);
  std::memcpy(b5.data(), raw.data(), raw.size());
  for (auto& blk : b4) blk.d = finite_half(rng), blk.m = finite_half(rng);
  for (auto& blk : b5) blk.d = finite_half(rng), blk.m = finite_half(rng);
  std::vector<float> y4(256), y5(256);
  dequantize_row(DType::Q4_1, b4.data(), y4.data(), 256);
  dequantize_row(DType::Q5_1, b5.data(), y5.data(), 256);
  for (size_t e = 0; e < 256; ++e) {
    const int j = static_cast<int>(e % 32);
    const BlockQ4_1& a = b4[e / 32];
    const int q4 = j < 16 ? (a.qs[j] & 15) : (a.qs[j - 16] >> 4);
    volatile float p4 = static_cast<float>(q4) * fp16_to_f32(a.d);  // volatile: no fused multiply-add
    EXPECT_EQ(y4[e], p4 + fp16_to_f32(a.m)) << "q4_1 element " << e;
    const BlockQ5_1& c = b5[e / 32];
    const int q5 = (j < 16 ? (c.qs[j] & 15) : (c.qs[j - 16] >> 4)) + 16 * ((c.qh[j / 8] >> (j % 8)) & 1);
    volatile float p5 = static_cast<float>(q5) * fp16_to_f32(c.d);
    EXPECT_EQ(y5[e], p5 + fp16_to_f32(c.m)) << "q5_1 element " << e;
  }
}

// IQ4_NL: x = d * level[q], the 16 levels of ggml's kvalues_iq4nl, nibbles as Q4_0.
TEST(Dequantize, IQ4_NLElementFormula) {
  const int levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  std::mt19937 rng(35);
  std::vector<BlockIQ4_NL> b(8);
  auto raw = random_bytes(sizeof(BlockIQ4_NL) * b.size(), 36);
  std::memcpy(b.data(), raw.data(), raw.size());
  for (auto& blk : b) blk.d = finite_half(rng);
  std::vector<float> y(256);
  dequantize_row(DType::IQ4_NL, b.data(), y.data(), 256);
  for (size_t e = 0; e < 256; ++e) {
    const BlockIQ4_NL& blk = b[e / 32];
    const int j = static_cast<int>(e % 32);
    const int q = j < 16 ? (blk.qs[j] & 15) : (blk.qs[j - 16] >> 4);
    EXPECT_EQ(y[e], fp16_to_f32(blk.d) * static_cast<float>(levels[q])) << "element " << e;
  }
  EXPECT_TRUE(can_quantize(DType::IQ4_NL));
  EXPECT_TRUE(can_dequantize(DType::IQ4_NL));
  // A type read but never written is refused by name.
  EXPECT_FALSE(can_quantize(DType::F64));
  std::vector<uint8_t> q(256);
  expect_unsupported_quantize(DType::F64, y.data(), q.data());
}

TEST(Dequantize, Q8_0ElementFormula) {
  std::mt19937 rng(5);
  std::vector<BlockQ8_0> b(8);
  auto raw = random_bytes(sizeof(BlockQ8_0) * b.size(), 6);
  std::memcpy(b.data(), raw.data(), raw.size());
  for (auto& blk : b) blk.d = finite_half(rng);
  std::vector<float> y(b.size() * 32);
  dequantize_row(DType::Q8_0, b.data(), y.data(), static_cast<int64_t>(y.size()));
  for (size_t e = 0; e < y.size(); ++e)
    EXPECT_EQ(y[e], static_cast<float>(b[e / 32].qs[e % 32]) * fp16_to_f32(b[e / 32].d));
}

// 6-bit scale/min of sub-block j of a Q4_K/Q5_K block, read bit by bit from the 96-bit field
// as the format describes it: sub-blocks 0-3 keep scale and min in the low 6 bits of bytes
// 0-3 / 4-7; sub-blocks 4-7 keep the low 4 bits in the nibbles of bytes 8-11 and the high 2
// bits in the top 2 bits of bytes 0-3 (scale) / 4-7 (min).
void scale_min_bits(const uint8_t* s, int j, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] % 64;
    m = s[4 + j] % 64;
  } else {
    sc = (s[8 + (j - 4)] % 16) + 16 * (s[j - 4] / 64);
    m = (s[8 + (j - 4)] / 16) + 16 * (s[j] / 64);
  }
}

TEST(Dequantize, Q4_KElementFormula) {
  std::mt19937 rng(7);
  std::vector<BlockQ4K> b(4);
  auto raw = random_bytes(sizeof(BlockQ4K) * b.size(), 8);
  std::memcpy(b.data(), raw.data(), raw.size());
  for (auto& blk : b) blk.d = finite_half(rng), blk.dmin = finite_half(rng);
  std::vector<float> y(b.size() * 256);
  dequantize_row(DType::Q4_K, b.data(), y.data(), static_cast<int64_t>(y.size()));
  for (size_t e = 0; e < y.size(); ++e) {
    const BlockQ4K& blk = b[e / 256];
    const int k = static_cast<int>(e % 256), sub = k / 32;
    const uint8_t byte = blk.qs[32 * (k / 64) + k % 32];
    const int q = (sub % 2 == 0) ? (byte & 15) : (byte >> 4);
    int sc, m;
    scale_min_bits(blk.scales, sub, sc, m);
    const float expect = fp16_to_f32(blk.d) * static_cast<float>(sc) * static_cast<float>(q) -
                         fp16_to_f32(blk.dmin) * static_cast<float>(m);
    EXPECT_EQ(y[e], expect) << "element " << e;
  }
}

TEST(Dequantize, Q5_KElementFormula) {
  std::mt19937 rng(9);
  std::vector<BlockQ5K> b(4);
  auto raw = random_bytes(sizeof(BlockQ5K) * b.size(), 10);
  std::memcpy(b.data(), raw.data(), raw.size());
  for (auto& blk : b) blk.d = finite_half(rng), blk.dmin = finite_half(rng);
  std::vector<float> y(b.size() * 256);
  dequantize_row(DType::Q5_K, b.data(), y.data(), static_cast<int64_t>(y.size()));
  for (size_t e = 0; e < y.size(); ++e) {
    const BlockQ5K& blk = b[e / 256];
    const int k = static_cast<int>(e % 256), sub = k / 32;
    const uint8_t byte = blk.qs[32 * (k / 64) + k % 32];
    const int lo = (sub % 2 == 0) ? (byte & 15) : (byte >> 4);
    const int hi = (blk.qh[k % 32] >> sub) & 1;  // bit `sub` of qh[k % 32]
    int sc, m;
    scale_min_bits(blk.scales, sub, sc, m);
    const float expect = fp16_to_f32(blk.d) * static_cast<float>(sc) * static_cast<float>(lo + 16 * hi) -
                         fp16_to_f32(blk.dmin) * static_cast<float>(m);
    EXPECT_EQ(y[e], expect) << "element " << e;
  }
}

TEST(Dequantize, Q6_KElementFormula) {
  std::mt19937 rng(11);
  std::vector<BlockQ6K> b(4);
  auto raw = random_bytes(sizeof(BlockQ6K) * b.size(), 12);
  std::memcpy(b.data(), raw.data(), raw.size());
  for (auto& blk : b) blk.d = finite_half(rng);
  std::vector<float> y(b.size() * 256);
  dequantize_row(DType::Q6_K, b.data(), y.data(), static_cast<int64_t>(y.size()));
  for (size_t e = 0; e < y.size(); ++e) {
    const BlockQ6K& blk = b[e / 256];
    const int k = static_cast<int>(e % 256);
    const int half = k / 128, r = k % 128, quarter = r / 32, l = r % 32;
    // ql: 64 bytes per half; quarters 0/1 use low nibbles of bytes l / l+32, quarters 2/3 the high.
    const uint8_t qlb = blk.ql[64 * half + l + (quarter % 2) * 32];
    const int low = quarter < 2 ? (qlb & 15) : (qlb >> 4);
    const int high = (blk.qh[32 * half + l] >> (2 * quarter)) & 3;
    const int q = low + 16 * high - 32;
    const float expect = fp16_to_f32(blk.d) * static_cast<float>(blk.scales[k / 16]) * static_cast<float>(q);
    EXPECT_EQ(y[e], expect) << "element " << e;
  }
}

TEST(Dequantize, Q8_KAndPlainTypes) {
  BlockQ8K b{};
  b.d = 0.25f;
  for (int j = 0; j < 256; ++j) b.qs[j] = static_cast<int8_t>(j - 128);
  std::vector<float> y(256);
  dequantize_row(DType::Q8_K, &b, y.data(), 256);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(y[j], 0.25f * static_cast<float>(j - 128));

  const uint16_t halves[3] = {0x3c00, 0xc000, 0x0001};  // 1, -2, smallest subnormal
  float h[3];
  dequantize_row(DType::F16, halves, h, 3);
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_EQ(h[1], -2.0f);
  EXPECT_EQ(h[2], std::ldexp(1.0f, -24));
  const uint16_t bf[2] = {0x3f80, 0xc0a0};  // 1, -5
  dequantize_row(DType::BF16, bf, h, 2);
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_EQ(h[1], -5.0f);
  const int32_t ints[2] = {-7, 1 << 20};
  dequantize_row(DType::I32, ints, h, 2);
  EXPECT_EQ(h[0], -7.0f);
  EXPECT_EQ(h[1], 1048576.0f);
}

// ---------------------------------------------------------------------------------------------
// Argument checking.

TEST(QuantArgs, RowLengthMustBeWholeBlocks) {
  std::vector<float> x(300, 1.0f), y(300);
  std::vector<uint8_t> q(4096);
  for (DType t : kQuantTypes) {
    const int64_t bs = traits(t).block_size;
    try {
      quantize_row(t, x.data(), q.data(), bs + 1);
      FAIL() << "no error for " << dtype_name(t);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    }
    EXPECT_THROW(dequantize_row(t, q.data(), y.data(), bs - 1), Error);
    EXPECT_THROW(dequantize_row(t, q.data(), y.data(), -bs), Error);
    EXPECT_THROW(quantize_matrix(t, x.data(), q.data(), 1, bs + 2), Error);
    EXPECT_THROW(convert_row(DType::F32, x.data(), t, q.data(), bs / 2), Error);
  }
  // Zero-length rows are fine and touch nothing.
  EXPECT_NO_THROW(quantize_row(DType::Q4_K, nullptr, nullptr, 0));
  EXPECT_NO_THROW(dequantize_row(DType::Q6_K, nullptr, nullptr, 0));
  EXPECT_THROW(quantize_row(DType::Q8_0, nullptr, q.data(), 32), Error);
  // Types without a quantizer.
  try {
    quantize_row(DType::I32, x.data(), q.data(), 4);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  }
  EXPECT_THROW(dequantize_row(static_cast<DType>(99), q.data(), y.data(), 4), Error);
}


// ---------------------------------------------------------------------------------------------
// Round-trip error.

// The format whose blocks a weight type is multiplied with (ggml's vec_dot_type).
DType dot_partner(DType t) {
  return traits(t).block_size == 32 ? DType::Q8_0 : DType::Q8_K;
}

double rel_rms(const std::vector<float>& x, const std::vector<float>& y) {
  double se = 0, sx = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    se += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    sx += double(x[i]) * x[i];
  }
  return std::sqrt(se / sx);
}

// ggml's tests/test-quantize-fns.cpp measures, on 4096 values 0.1 + 2 cos(i + offset):
// "rmse" = sqrt(sum of squared errors) / n (so an error of e per value scores e / sqrt(n)),
// allowed below 0.002; and the dot product of the quantized pair (weights in type t,
// activations in its dot partner) minus the f32 dot, divided by n, allowed below 0.02.
std::vector<float> ggml_test_pattern(float offset, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(0.1 + 2 * std::cos(static_cast<float>(i) + offset));
  return v;
}

class RoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(RoundTrip, GgmlMetricOnTheCosinePattern) {
  const DType t = GetParam();
  const size_t n = 32 * 128;
  const auto a = ggml_test_pattern(0.0f, n), b = ggml_test_pattern(1.0f, n);
  const auto qa = dequantize(t, quantize(t, a), static_cast<int64_t>(n));
  double se = 0;
  for (size_t i = 0; i < n; ++i) se += (double(a[i]) - qa[i]) * (double(a[i]) - qa[i]);
  const double total_error = std::sqrt(se) / static_cast<double>(n);
  RecordProperty("ggml_total_error", std::to_string(total_error));
  // ggml's test-quantize-fns bounds: 0.002, and 0.0075 / 0.004 / 0.01 for its 2-bit, 3-bit and
  // ternary types (measured here: Q2_K 0.00467, Q3_K 0.00251, TQ1_0 = TQ2_0 0.00868).
  const bool ternary = t == DType::TQ1_0 || t == DType::TQ2_0;
  const double bound = t == DType::Q2_K ? 0.0075 : t == DType::Q3_K ? 0.004 : ternary ? 0.01 : 0.002;
  EXPECT_LT(total_error, bound) << dtype_name(t);

  const DType p = dot_partner(t);
  const auto qb = dequantize(p, quantize(p, b), static_cast<int64_t>(n));
  double dq = 0, dref = 0;
  for (size_t i = 0; i < n; ++i) {
    dq += double(qa[i]) * qb[i];
    dref += double(a[i]) * b[i];
  }
  RecordProperty("ggml_dot_error", std::to_string(std::fabs(dq - dref) / static_cast<double>(n)));
  // (ggml allows its ternary types 0.15; measured 0.141.)
  EXPECT_LT(std::fabs(dq - dref) / static_cast<double>(n), ternary ? 0.15 : 0.02) << dtype_name(t);
}

TEST_P(RoundTrip, RelativeRmsOnGaussianData) {
  // Expected relative RMS error for N(0,1) weights: a uniform rounding error of step/sqrt(12),
  // the step being the block's range over its number of levels. Upper bounds with ~25% margin
  // over the measured values (in parentheses).
  const DType t = GetParam();
  const std::map<DType, double> bound = {
      {DType::Q4_0, 0.107},   // (0.0858)
      {DType::Q5_0, 0.053},   // (0.0426)
      {DType::Q4_1, 0.097},   // (0.0778)
      {DType::Q5_1, 0.048},   // (0.0381)
      {DType::Q8_0, 0.0067},  // (0.00536)
      {DType::Q4_K, 0.089},   // (0.0712)
      {DType::Q5_K, 0.045},   // (0.0361)
      {DType::Q6_K, 0.022},   // (0.0176)
      {DType::Q8_K, 0.0085},  // (0.0068)
      {DType::Q2_K, 0.37},    // (0.297)
      {DType::Q3_K, 0.19},    // (0.151)
      {DType::MXFP4, 0.143},  // (0.114)
      {DType::TQ1_0, 0.85},  // (0.795: N(0,1) rounded to -1, 0, 1 times a max of ~3)
      {DType::TQ2_0, 0.85},  // (0.795, the same values)
      {DType::IQ4_NL, 0.095},  // (0.0762)
      {DType::IQ4_XS, 0.095},  // (0.0767)
  };
  const auto x = randn(256 * 64, 42);
  const auto y = dequantize(t, quantize(t, x), static_cast<int64_t>(x.size()));
  const double e = rel_rms(x, y);
  RecordProperty("rel_rms", std::to_string(e));
  EXPECT_LT(e, bound.at(t)) << dtype_name(t);
  // Scale invariance: the same data times 2^10 quantizes to the same codes with scales x 2^10.
  std::vector<float> big(x);
  for (auto& v : big) v *= 1024.0f;
  const auto yb = dequantize(t, quantize(t, big), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(yb[i], y[i] * 1024.0f) << dtype_name(t) << " element " << i;
}

TEST_P(RoundTrip, ZeroAndConstantBlocks) {
  const DType t = GetParam();
  const int64_t n = 512;
  const std::vector<float> zeros(n, 0.0f);
  const auto qz = quantize(t, zeros);
  for (float v : dequantize(t, qz, n)) ASSERT_EQ(v, 0.0f) << dtype_name(t);
  // (Small magnitudes lose precision in the f16 scales: Q6_K's d is about absmax / 4096, subnormal
  // below absmax ~0.25, as in ggml.)
  for (float c : {0.5f, -3.0f, 100.0f}) {
    const std::vector<float> x(n, c);
    // MXFP4's scale is the power of two 2^(floor(log2 |c|) - 2), so the largest level (6, the
    // E2M1 maximum) times it covers |c| only up to 1.5 of that power: 100 = 1.5625 * 64 takes
    // 6 * 16 = 96. Its other constants are levels times the scale, exact.
    const float want = t == DType::MXFP4 && c == 100.0f ? 96.0f : c;
    for (float v : dequantize(t, quantize(t, x), n))
      ASSERT_NEAR(v, want, std::fabs(c) * 2e-3) << dtype_name(t) << " constant " << c;
  }
}

TEST_P(RoundTrip, NonFiniteInputDoesNotCrash) {
  // Documented behaviour (quant.h): no crash, no exception; blocks holding NaN/inf come back
  // with non-finite or meaningless values, other blocks are unaffected.
  const DType t = GetParam();
  auto x = randn(768, 7);
  x[3] = std::numeric_limits<float>::quiet_NaN();    // super-block 0
  x[300] = std::numeric_limits<float>::infinity();   // super-block 1
  x[301] = -std::numeric_limits<float>::infinity();
  std::vector<float> y;
  ASSERT_NO_THROW(y = dequantize(t, quantize(t, x), 768));
  auto clean = x;
  clean[3] = clean[300] = clean[301] = 0.0f;
  const auto yc = dequantize(t, quantize(t, clean), 768);
  for (int i = 512; i < 768; ++i) ASSERT_EQ(y[i], yc[i]) << dtype_name(t) << " element " << i;
  if (traits(t).block_size == 32) {
    for (int i = 32; i < 288; ++i) ASSERT_EQ(y[i], yc[i]) << dtype_name(t) << " element " << i;
  }
  if (t == DType::Q4_1 || t == DType::Q5_1) {
    // A NaN weight takes code 0 (the block's minimum m) and moves neither d nor m: the block is
    // the one where that weight was the minimum of the others.
    auto same = clean;
    same[3] = std::min(*std::min_element(x.begin(), x.begin() + 3), *std::min_element(x.begin() + 4, x.begin() + 32));
    const auto ys = dequantize(t, quantize(t, same), 768);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], ys[i]) << dtype_name(t) << " element " << i;
  } else if ((traits(t).block_size == 32 && t != DType::IQ4_NL) || t == DType::Q8_K) {
    // Round-to-nearest types give a NaN weight the code of zero; its block is otherwise unharmed
    // (the scale comes from the finite values). (IQ4_NL's scale search takes the NaN into its
    // sums: that block is unspecified, as a K-quant super-block is.)
    for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], i == 3 ? 0.0f : yc[i]) << dtype_name(t) << " element " << i;
  }
}

TEST_P(RoundTrip, ScalesBeyondHalfRangeSaturate) {
  // d is an f16 (except Q8_K's f32): a block whose scale exceeds 65504 stores d = inf (as ggml);
  // blocks within range are unaffected. Q8_0 reaches that at |x| ~ 65504 * 127.
  const DType t = GetParam();
  auto x = randn(512, 9);
  for (int i = 0; i < 256; ++i) x[i] *= 1e12f;
  std::vector<float> y;
  ASSERT_NO_THROW(y = dequantize(t, quantize(t, x), 512));
  bool any_nonfinite = false;
  for (int i = 0; i < 256; ++i) any_nonfinite |= !std::isfinite(y[i]);
  // (Q8_K's f32 scale and MXFP4's E8M0 exponent, up to 2^127, hold it.)
  EXPECT_EQ(any_nonfinite, t != DType::Q8_K && t != DType::MXFP4) << dtype_name(t);
  const std::vector<float> tail(x.begin() + 256, x.end());
  const auto yt = dequantize(t, quantize(t, tail), 256);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(y[256 + i], yt[i]) << dtype_name(t);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, RoundTrip, ::testing::ValuesIn(kQuantTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(RoundTrip, ExactlyRepresentableValuesComeBackExactly) {
  // Q8_0 with d = 1/127 * 127 = 1: integers -127..127 scaled by a power of two are exact.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>((j * 37) % 255 - 127) * 0.25f;
  x[5] = 127 * 0.25f;  // pin the absmax so d = 0.25 exactly
  auto y = dequantize(DType::Q8_0, quantize(DType::Q8_0, x), 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x[j]) << j;
  // Q4_0: d = max / -8; codes -8..7 times d.
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j % 16 - 8) * 0.5f;  // min -4 is the absmax
  y = dequantize(DType::Q4_0, quantize(DType::Q4_0, x), 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x[j]) << j;
}

TEST(RoundTrip, Q8KScaleAndBlockSums) {
  const auto x = randn(512, 11, 3.0f);
  std::vector<BlockQ8K> b(2);
  quantize_row(DType::Q8_K, x.data(), b.data(), 512);
  for (int i = 0; i < 2; ++i) {
    const float* xb = x.data() + 256 * i;
    int arg = 0;
    for (int j = 1; j < 256; ++j) if (std::fabs(xb[j]) > std::fabs(xb[arg])) arg = j;
    // d = 1 / (-127 / max): the element of largest magnitude maps to -127 and d has the opposite sign.
    EXPECT_EQ(b[i].d, 1.0f / (-127.0f / xb[arg]));
    EXPECT_EQ(b[i].qs[arg], -127);
    for (int j = 0; j < 256; ++j) {
      ASSERT_GE(b[i].qs[j], -127);
      ASSERT_LE(b[i].qs[j], 127);
      ASSERT_LE(std::fabs(b[i].d * b[i].qs[j] - xb[j]), std::fabs(b[i].d) * 0.5001f) << j;
    }
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int k = 0; k < 16; ++k) sum += b[i].qs[16 * g + k];
      EXPECT_EQ(b[i].bsums[g], sum) << "group " << g;
    }
  }
  // All zero: d = 0, codes and sums zero.
  std::vector<float> z(256, 0.0f);
  std::memset(b.data(), 0x5a, sizeof(BlockQ8K));
  quantize_row(DType::Q8_K, z.data(), b.data(), 256);
  EXPECT_EQ(b[0].d, 0.0f);
  for (int g = 0; g < 16; ++g) EXPECT_EQ(b[0].bsums[g], 0);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(b[0].qs[j], 0);
}

TEST(RoundTrip, PlainTypes) {
  const auto x = randn(1000, 13);
  const auto f16 = quantize(DType::F16, x);
  const auto bf16 = quantize(DType::BF16, x);
  const auto f32 = quantize(DType::F32, x);
  ASSERT_EQ(f16.size(), 2000u);
  ASSERT_EQ(bf16.size(), 2000u);
  for (size_t i = 0; i < x.size(); ++i) {
    uint16_t h, b;
    std::memcpy(&h, f16.data() + 2 * i, 2);
    std::memcpy(&b, bf16.data() + 2 * i, 2);
    EXPECT_EQ(h, f32_to_fp16(x[i]));
    EXPECT_EQ(b, f32_to_bf16(x[i]));
  }
  EXPECT_EQ(std::memcmp(f32.data(), x.data(), 4000), 0);
}

// ---------------------------------------------------------------------------------------------
// Whole matrices and conversions.

TEST(QuantizeMatrix, EqualsRowByRowOnEveryThreadCount) {
  const int64_t rows = 97, cols = 512;
  const auto x = randn(static_cast<size_t>(rows * cols), 17);
  for (DType t : {DType::Q4_K, DType::Q8_0, DType::F16}) {
    std::vector<uint8_t> expect(row_bytes(t, cols) * rows);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(t, x.data() + r * cols, expect.data() + r * row_bytes(t, cols), cols);
    for (int threads : {1, 3, 4}) {
      set_default_threads(threads);
      std::vector<uint8_t> got(expect.size(), 0xee);
      EXPECT_EQ(quantize_matrix(t, x.data(), got.data(), rows, cols), expect.size());
      EXPECT_EQ(got, expect) << dtype_name(t) << " threads " << threads;
    }
  }
  std::vector<uint8_t> none(1);
  EXPECT_EQ(quantize_matrix(DType::Q4_K, x.data(), none.data(), 0, 256), 0u);
  EXPECT_THROW(quantize_matrix(DType::Q4_K, x.data(), none.data(), -1, 256), Error);
  EXPECT_THROW(quantize_matrix(DType::I8, x.data(), none.data(), 1, 256), Error);
}

TEST(ConvertRow, GoesThroughF32) {
  const int64_t n = 8192 + 512;  // more than one internal chunk
  const auto x = randn(static_cast<size_t>(n), 19);
  const auto f16 = quantize(DType::F16, x);
  const auto via = dequantize(DType::F16, f16, n);
  for (DType to : {DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::BF16, DType::F32}) {
    std::vector<uint8_t> got(row_bytes(to, n));
    convert_row(DType::F16, f16.data(), to, got.data(), n);
    EXPECT_EQ(got, quantize(to, via)) << dtype_name(to);
  }
  // Same type: a byte copy. Quantized source: dequantized first.
  std::vector<uint8_t> copy(f16.size());
  convert_row(DType::F16, f16.data(), DType::F16, copy.data(), n);
  EXPECT_EQ(copy, f16);
  const auto q = quantize(DType::Q4_K, x);
  std::vector<float> back(static_cast<size_t>(n));
  convert_row(DType::Q4_K, q.data(), DType::F32, back.data(), n);
  EXPECT_EQ(back, dequantize(DType::Q4_K, q, n));
  // Both block sizes must divide n; integer targets are refused.
  std::vector<uint8_t> out(1 << 16);
  EXPECT_THROW(convert_row(DType::Q8_0, q.data(), DType::Q4_K, out.data(), 32), Error);
  EXPECT_THROW(convert_row(DType::F32, x.data(), DType::I32, out.data(), 32), Error);
}

// ---------------------------------------------------------------------------------------------
// Reading the repository's fixtures.

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Just enough of GGUF v3 to pull tensors out of the bundled stories260K files (no GGUF reader
// is visible from core's tests): header, KV pairs skipped by type, tensor infos, aligned data.
struct GgufTensor {
  DType type;
  std::vector<int64_t> dims;  // GGUF order: fastest-varying first
  const uint8_t* data;
  int64_t numel;
};

struct GgufFile {
  std::vector<uint8_t> bytes;
  std::map<std::string, GgufTensor> tensors;
};

void skip_gguf_value(ByteReader& r, uint32_t type, int depth) {
  static const int sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  if (type == 8) {
    r.skip(r.read<uint64_t>("string length"), "string");
  } else if (type == 9) {
    if (depth > 2) r.corrupt("array", "nested too deep");
    const uint32_t et = r.read<uint32_t>("array type");
    const uint64_t n = r.read<uint64_t>("array length");
    if (n > r.remaining()) r.corrupt("array", "length exceeds the file");
    for (uint64_t i = 0; i < n; ++i) skip_gguf_value(r, et, depth + 1);
  } else if (type < 13) {
    r.skip(static_cast<uint64_t>(sizes[type]), "value");
  } else {
    r.corrupt("value type", "unknown GGUF value type " + std::to_string(type));
  }
}

GgufFile load_gguf(const std::string& path) {
  GgufFile g;
  g.bytes = read_file(path);
  ByteReader r(g.bytes.data(), g.bytes.size(), path);
  if (r.read<uint32_t>("magic") != 0x46554747u) r.corrupt("magic", "not GGUF");
  if (r.read<uint32_t>("version") != 3) r.corrupt("version", "expected GGUF v3");
  const uint64_t n_tensors = r.read<uint64_t>("tensor count");
  const uint64_t n_kv = r.read<uint64_t>("kv count");
  uint64_t alignment = 32;
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string key(r.string(r.read<uint64_t>("key length"), 256, "key"));
    const uint32_t type = r.read<uint32_t>("value type");
    if (key == "general.alignment" && type == 4) alignment = r.read<uint32_t>("alignment");
    else skip_gguf_value(r, type, 0);
  }
  struct Info {
    std::string name;
    GgufTensor t;
    uint64_t offset;
  };
  std::vector<Info> infos;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    Info in;
    in.name = std::string(r.string(r.read<uint64_t>("name length"), 256, "tensor name"));
    const uint32_t nd = r.read<uint32_t>("n_dims");
    if (nd < 1 || nd > 4) r.corrupt("n_dims", "bad dimension count");
    in.t.numel = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      in.t.dims.push_back(static_cast<int64_t>(r.read<uint64_t>("dim")));
      in.t.numel *= in.t.dims.back();
    }
    in.t.type = static_cast<DType>(r.read<uint32_t>("type"));
    in.offset = r.read<uint64_t>("offset");
    infos.push_back(in);
  }
  r.align(alignment, "data start");
  const size_t base = r.pos();
  for (auto& in : infos) {
    const size_t nbytes = row_bytes(in.t.type, in.t.numel, in.name);
    if (in.offset > g.bytes.size() - base || nbytes > g.bytes.size() - base - in.offset)
      throw std::runtime_error(path + ": tensor " + in.name + " leaves the file");
    in.t.data = g.bytes.data() + base + in.offset;
    g.tensors[in.name] = in.t;
  }
  return g;
}

std::string model_path(const std::string& rel) {
  return std::string(PTN_SOURCE_DIR) + "/models/stories260K/" + rel;
}

std::vector<float> tensor_f32(const GgufTensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel));
  dequantize_row(t.type, t.data, v.data(), t.numel);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Bytes produced by ggml's reference quantizers (tests/data/quant, see README there): the same
// deterministic input through ours must give the same bytes.

// The fixture's synthetic input, 64 rows x 256 floats: Irwin-Hall approximate normals from a
// xorshift32 stream, with per-row scales and special rows (zero, constant, tiny sub-block,
// all-negative, large, outliers, all-positive, sparse). Exact float arithmetic only, so the C
// generator that made the fixture and this one agree bit for bit.
std::vector<float> synthetic_input() {
  uint32_t st = 0x12345678u;
  auto xs32 = [&st] {
    st ^= st << 13;
    st ^= st >> 17;
    st ^= st << 5;
    return st;
  };
  auto unif = [&] { return static_cast<float>(xs32() >> 8) * (1.0f / 16777216.0f); };
  auto gauss = [&] {
    float s = 0.0f;
    for (int i = 0; i < 12; ++i) s += unif();
    return s - 6.0f;
  };
  const float scales[5] = {1.0f, 0.02f, 30.0f, 0.001f, 0.1f};
  std::vector<float> x(64 * 256);
  for (int r = 0; r < 64; ++r) {
    for (int i = 0; i < 256; ++i) {
      const float g = gauss();
      float v;
      if (r == 8) v = 0.0f;
      else if (r == 16) v = 0.5f;
      else if (r == 24) v = i < 32 ? 1e-20f * g : g;
      else if (r == 32) v = -(std::fabs(g) + 0.25f);
      else if (r == 40) v = g * 20000.0f;
      else if (r % 8 == 5) v = (i % 37 == 0) ? 20.0f * g : g;
      else if (r % 8 == 6) v = std::fabs(g) + 0.25f;
      else if (r % 8 == 7) v = (i / 32 == 3) ? 0.0f : ((i % 5 == 0) ? g : 0.0f);
      else v = g * scales[r % 8];
      x[static_cast<size_t>(r) * 256 + i] = v;
    }
  }
  return x;
}

// Number of blocks of `ours` equal to those of `ref` (both rows of type t).
int64_t equal_blocks(DType t, const std::vector<uint8_t>& ours, const std::vector<uint8_t>& ref) {
  const size_t bb = traits(t).block_bytes;
  int64_t n = 0;
  for (size_t off = 0; off + bb <= ref.size(); off += bb)
    n += std::memcmp(ours.data() + off, ref.data() + off, bb) == 0;
  return n;
}

class GgmlFixture : public ::testing::TestWithParam<DType> {};

TEST_P(GgmlFixture, SyntheticBytesEqualGgmlReference) {
  const DType t = GetParam();
  const auto x = synthetic_input();
  const auto ref = read_file(std::string(PTN_TEST_DATA) + "/quant/synthetic_" + dtype_name(t) + ".bin");
  ASSERT_EQ(ref.size(), row_bytes(t, static_cast<int64_t>(x.size())));
  const auto ours = quantize(t, x);
  const int64_t nblocks = static_cast<int64_t>(ref.size() / traits(t).block_bytes);
  const int64_t same = equal_blocks(t, ours, ref);
  RecordProperty("equal_blocks", std::to_string(same) + "/" + std::to_string(nblocks));
  EXPECT_EQ(same, nblocks) << dtype_name(t) << ": " << same << " of " << nblocks << " blocks equal";
}

TEST_P(GgmlFixture, Stories260KEmbeddingBytesEqualGgmlReference) {
  const DType t = GetParam();
  const GgufFile f32 = load_gguf(model_path("stories260K.gguf"));
  const auto x = tensor_f32(f32.tensors.at("token_embd.weight"));
  ASSERT_EQ(x.size(), 32768u);
  const auto ref = read_file(std::string(PTN_TEST_DATA) + "/quant/token_embd_" + dtype_name(t) + ".bin");
  ASSERT_EQ(ref.size(), row_bytes(t, static_cast<int64_t>(x.size())));
  const auto ours = quantize(t, x);
  const int64_t nblocks = static_cast<int64_t>(ref.size() / traits(t).block_bytes);
  const int64_t same = equal_blocks(t, ours, ref);
  EXPECT_EQ(same, nblocks) << dtype_name(t) << ": " << same << " of " << nblocks << " blocks equal";
  // And our dequantization of ggml's bytes equals our dequantization of ours where they agree;
  // where they differ, both must be close to the input.
  const auto a = dequantize(t, ours, 32768), b = dequantize(t, ref, 32768);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 0.1f) << "element " << i;
}

// Blocks of xorshift32 bytes (the top byte of each draw) with the f16 scales at half_offsets made
// finite (exponent 31 -> 15), and Q8_K's f32 d likewise (exponent 255 -> 127); the same generator
// as random_blocks() in tests/data/quant/make_fixtures.c.
std::vector<uint8_t> random_blocks(DType t, int nblocks, uint32_t seed) {
  const size_t bb = traits(t).block_bytes;
  std::vector<uint8_t> q(bb * static_cast<size_t>(nblocks));
  uint32_t st = seed;
  for (auto& b : q) {
    st ^= st << 13;
    st ^= st >> 17;
    st ^= st << 5;
    b = static_cast<uint8_t>(st >> 24);
  }
  std::vector<size_t> halves;
  if (t == DType::Q4_K || t == DType::Q5_K || t == DType::Q4_1 || t == DType::Q5_1) halves = {0, 2};
  else if (t == DType::Q6_K) halves = {offsetof(BlockQ6K, d)};
  else if (t == DType::Q2_K) halves = {offsetof(BlockQ2K, d), offsetof(BlockQ2K, dmin)};
  else if (t == DType::Q3_K) halves = {offsetof(BlockQ3K, d)};
  else if (t == DType::TQ1_0) halves = {offsetof(BlockTQ1_0, d)};
  else if (t == DType::TQ2_0) halves = {offsetof(BlockTQ2_0, d)};
  else if (t != DType::Q8_K && t != DType::MXFP4 && t != DType::IQ1_M) halves = {0};  // (MXFP4's E8M0 byte is any exponent)
  for (int i = 0; i < nblocks; ++i) {
    uint8_t* blk = q.data() + bb * static_cast<size_t>(i);
    for (size_t off : halves) {
      uint16_t h;
      std::memcpy(&h, blk + off, 2);
      if (((h >> 10) & 31) == 31) h = static_cast<uint16_t>(h & ~0x4000u);
      std::memcpy(blk + off, &h, 2);
    }
    if (t == DType::IQ1_M) blk[55] = static_cast<uint8_t>(blk[55] & ~0x40u);  // d's exponent bit 14: d finite
    if (t == DType::Q8_K) {
      uint32_t u;
      std::memcpy(&u, blk, 4);
      if (((u >> 23) & 255) == 255) u &= ~0x40000000u;
      std::memcpy(blk, &u, 4);
    }
  }
  return q;
}

uint64_t fnv1a(const void* p, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::map<std::string, uint64_t> read_hashes(const std::string& file) {
  std::ifstream f(std::string(PTN_TEST_DATA) + "/quant/" + file);
  if (!f) throw std::runtime_error("missing " + file);
  std::map<std::string, uint64_t> out;
  std::string name, hex;
  while (f >> name >> hex) out[name] = std::stoull(hex, nullptr, 16);
  return out;
}

TEST_P(GgmlFixture, DequantizedFloatsAreBitIdenticalToGgml) {
  // tests/data/quant/dequant_fnv1a.txt: FNV-1a of ggml's dequantize_row_<type> output (floats)
  // for 64 random blocks per type, seeds 101..116 in the order q4_0 q5_0 q8_0 q4_k q5_k q6_k q8_k
  // q4_1 q5_1 iq4_nl q2_k q3_k iq4_xs mxfp4 tq1_0 tq2_0.
  const DType t = GetParam();
  const std::map<DType, uint32_t> seed = {{DType::Q4_0, 101}, {DType::Q5_0, 102}, {DType::Q8_0, 103},
                                          {DType::Q4_K, 104}, {DType::Q5_K, 105}, {DType::Q6_K, 106},
                                          {DType::Q8_K, 107}, {DType::Q4_1, 108}, {DType::Q5_1, 109},
                                          {DType::Q2_K, 111}, {DType::Q3_K, 112}, {DType::MXFP4, 114},
                                          {DType::TQ1_0, 115}, {DType::TQ2_0, 116}, {DType::IQ4_NL, 110},
                                          {DType::IQ4_XS, 113}};
  auto want = read_hashes("dequant_fnv1a.txt");
  ASSERT_EQ(want.count(dtype_name(t)), 1u);
  const auto q = random_blocks(t, 64, seed.at(t));
  const int64_t n = 64 * traits(t).block_size;
  const auto y = dequantize(t, q, n);
  EXPECT_EQ(fnv1a(y.data(), y.size() * sizeof(float)), want[dtype_name(t)]) << dtype_name(t);
}

// The types ptn reads but does not write (IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M:
// seeds 117..123 of the same file).
TEST(GgmlDequant, ReadOnlyTypesAreBitIdenticalToGgml) {
  const auto want = read_hashes("dequant_fnv1a.txt");
  for (const auto& [t, seed] : std::map<DType, uint32_t>{
           {DType::IQ3_XXS, 117}, {DType::IQ3_S, 118}, {DType::IQ2_XXS, 119}, {DType::IQ2_XS, 120}, {DType::IQ2_S, 121},
           {DType::IQ1_S, 122}, {DType::IQ1_M, 123}}) {
    ASSERT_EQ(want.count(dtype_name(t)), 1u) << dtype_name(t);
    EXPECT_TRUE(can_dequantize(t));
    EXPECT_FALSE(can_quantize(t));
    const auto q = random_blocks(t, 64, seed);
    const auto y = dequantize(t, q, 64 * traits(t).block_size);
    EXPECT_EQ(fnv1a(y.data(), y.size() * sizeof(float)), want.at(dtype_name(t))) << dtype_name(t);
  }
}

TEST_P(GgmlFixture, WholeStories260KBytesEqualGgmlReference) {
  // tests/data/quant/model_fnv1a.txt: FNV-1a of the bytes ggml's reference quantizer writes for
  // every stories260K tensor whose size is a multiple of 256 (37 tensors, 292096 floats),
  // concatenated in name order and quantized as one row.
  const DType t = GetParam();
  const auto want = read_hashes("model_fnv1a.txt");
  ASSERT_EQ(want.count(dtype_name(t)), 1u);
  const GgufFile f32 = load_gguf(model_path("stories260K.gguf"));
  std::vector<float> x;
  int tensors = 0;
  for (const auto& [name, tensor] : f32.tensors) {  // std::map: name order
    if (tensor.numel % 256 != 0) continue;
    const auto v = tensor_f32(tensor);
    x.insert(x.end(), v.begin(), v.end());
    ++tensors;
  }
  ASSERT_EQ(tensors, 37);
  ASSERT_EQ(x.size(), 292096u);
  const auto q = quantize(t, x);
  EXPECT_EQ(fnv1a(q.data(), q.size()), want.at(dtype_name(t))) << dtype_name(t);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, GgmlFixture, ::testing::ValuesIn(kQuantTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// ---------------------------------------------------------------------------------------------
// Files written by llama.cpp's llama-quantize (no importance matrix). stories260K's rows are 64
// and 172 wide, too narrow for the 256-wide K-quants, so llama.cpp fell back to Q4_0, Q5_0, Q5_1,
// IQ4_NL, Q8_0, F16 (and kept the norms in F32): these files hold no K-quant tensor at all. The
// MXFP4 file was made with MXFP4 named for the attention, gate, up and embedding matrices.

// Every llama.cpp-made file of quantized/ (llama.cpp-reference.json lists their tensor types).
const char* const kLlamaCppFiles[] = {"stories260K-Q4_K_M.gguf", "stories260K-Q6_K.gguf",  "stories260K-F16.gguf",
                                      "stories260K-BF16.gguf",   "stories260K-Q2_K.gguf",  "stories260K-Q3_K_M.gguf",
                                      "stories260K-Q5_K_S.gguf", "stories260K-IQ4_XS.gguf", "stories260K-MXFP4.gguf"};

TEST(LlamaCppFiles, RequantizingTheF32ModelReproducesEveryTensor) {
  // Every tensor of every type, IQ4_NL (the 64-wide rows of the Q2_K and IQ4_XS mixes) included:
  // ptn's quantizers write llama-quantize's bytes.
  const GgufFile f32 = load_gguf(model_path("stories260K.gguf"));
  int64_t total_blocks = 0, total_equal = 0;
  std::map<DType, int> tensors_by_type;
  for (const char* name : kLlamaCppFiles) {
    const GgufFile q = load_gguf(model_path(std::string("quantized/") + name));
    ASSERT_EQ(q.tensors.size(), f32.tensors.size()) << name;
    for (const auto& [tname, qt] : q.tensors) {
      const GgufTensor& ft = f32.tensors.at(tname);
      ASSERT_EQ(ft.type, DType::F32) << tname;
      ASSERT_EQ(ft.dims, qt.dims) << tname;
      ++tensors_by_type[qt.type];
      if (!can_quantize(qt.type)) continue;
      const auto x = tensor_f32(ft);
      // Rows are the fastest dimension; quantize row by row through quantize_matrix.
      const int64_t cols = qt.dims[0], rows = qt.numel / cols;
      std::vector<uint8_t> ours(row_bytes(qt.type, cols) * static_cast<size_t>(rows));
      ASSERT_EQ(quantize_matrix(qt.type, x.data(), ours.data(), rows, cols), ours.size());
      const std::vector<uint8_t> ref(qt.data, qt.data + ours.size());
      const int64_t nb = static_cast<int64_t>(ours.size() / traits(qt.type).block_bytes);
      const int64_t same = equal_blocks(qt.type, ours, ref);
      total_blocks += nb;
      total_equal += same;
      EXPECT_EQ(same, nb) << name << ": " << tname << " (" << dtype_name(qt.type) << ")";
    }
  }
  EXPECT_EQ(total_equal, total_blocks);
  // The mix is what the file names promise (so this test does exercise the quantizers).
  for (DType t : {DType::Q4_0, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::F16, DType::BF16, DType::IQ4_NL, DType::MXFP4})
    EXPECT_GT(tensors_by_type[t], 0) << dtype_name(t);
}

TEST(LlamaCppFiles, DequantizedTensorsAreCloseToTheF32Originals) {
  const GgufFile f32 = load_gguf(model_path("stories260K.gguf"));
  for (const char* name : kLlamaCppFiles) {
    const GgufFile q = load_gguf(model_path(std::string("quantized/") + name));
    for (const auto& [tname, qt] : q.tensors) {
      const auto x = tensor_f32(f32.tensors.at(tname));
      const auto y = tensor_f32(qt);
      double se = 0, sx = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        se += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
        sx += double(x[i]) * x[i];
      }
      const double rel = std::sqrt(se / sx);  // relative RMS error
      // Rounding error is uniform over a step: rms = step/sqrt(12), step = absmax/16 (Q5_0),
      // absmax/127 (Q8_0), and absmax/rms of 32 weights is ~2.5-4; f16 keeps 11 bits. Measured:
      // Q5_0 0.035-0.050, Q5_1 0.032-0.042, Q4_0 0.072-0.096, IQ4_NL 0.069-0.084, Q8_0 0.0044-0.0062,
      // BF16 0.0016-0.0020 (8 bits), F16 2e-4, MXFP4 0.110-0.123 (E2M1 levels, a power-of-two scale).
      const std::map<DType, double> bounds = {{DType::F32, 0.0},    {DType::F16, 3e-4},  {DType::BF16, 3e-3},
                                              {DType::Q8_0, 0.009}, {DType::Q5_0, 0.07}, {DType::Q5_1, 0.06},
                                              {DType::Q4_0, 0.13},  {DType::IQ4_NL, 0.11}, {DType::MXFP4, 0.15}};
      ASSERT_EQ(bounds.count(qt.type), 1u) << dtype_name(qt.type);
      EXPECT_LE(rel, bounds.at(qt.type)) << name << ": " << tname << " (" << dtype_name(qt.type) << ")";
    }
  }
}

}  // namespace
}  // namespace ptn
