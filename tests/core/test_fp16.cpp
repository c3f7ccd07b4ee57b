// Tests of core/fp16.h against slow references written from the IEEE-754 definitions (double
// arithmetic, ldexp/frexp): every one of the 65536 halves and bfloat16s decoded, and the
// encoders checked at every rounding boundary (midpoints between neighbouring representable
// values, and one float ulp either side), on random floats, and on specials.
#include "core/fp16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace ptn {
namespace {

// binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
double ref_half_value(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
  double v;
  if (exp == 0) v = std::ldexp(static_cast<double>(mant), -24);                   // subnormal
  else if (exp == 31) v = mant ? std::numeric_limits<double>::quiet_NaN() : HUGE_VAL;
  else v = std::ldexp(static_cast<double>(1024 + mant), exp - 25);
  return sign ? -v : v;
}

// Round |x| (finite, as double) to binary16 with ties to even, by counting quanta.
uint16_t ref_f32_to_half(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return sign | 0x7e00;
  const double a = std::fabs(static_cast<double>(f));
  if (std::isinf(f)) return sign | 0x7c00;
  // Quantum of the binade holding a: 2^-24 below 2^-14 (subnormals), else 2^(e-10).
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int q_exp = (a < std::ldexp(1.0, -14)) ? -24 : (e - 1) - 10;
  const double n = std::ldexp(a, -q_exp);  // exact: a has 24 significant bits
  double r = std::floor(n);
  const double frac = n - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
  const double v = std::ldexp(r, q_exp);
  if (v >= 65536.0) return sign | 0x7c00;  // rounded beyond the largest finite half (65504)
  if (v < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(r);  // subnormal (or zero)
  int ve;
  const double m = std::frexp(v, &ve);  // v = m * 2^ve
  const int exp = ve - 1 + 15;
  const int mant = static_cast<int>(std::ldexp(m, 11)) - 1024;
  return sign | static_cast<uint16_t>((exp << 10) | mant);
}

// bfloat16: the top 16 bits of a binary32.
uint16_t ref_f32_to_bf16(float f) {
  uint32_t u = f32_to_bits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  const uint32_t lower = u & 0xffff, upper = u >> 16;
  if (lower > 0x8000 || (lower == 0x8000 && (upper & 1))) return static_cast<uint16_t>(upper + 1);
  return static_cast<uint16_t>(upper);
}

TEST(Fp16, DecodesEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = fp16_to_f32(static_cast<uint16_t>(h));
    const double want = ref_half_value(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
      // The payload is kept (shifted into the float's mantissa), so NaN -> half -> NaN survives.
      ASSERT_EQ((f32_to_bits(got) >> 13) & 0x3ff, h & 0x3ff) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << std::hex << h;
      ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << h;  // -0 stays -0
    }
  }
}

TEST(Fp16, EveryNonNanHalfRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;  // NaN
    ASSERT_EQ(f32_to_fp16(fp16_to_f32(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(Fp16, RoundsToNearestEvenAtEveryBoundary) {
  // Between each pair of neighbouring non-negative halves (including 65504 -> "65536" = inf):
  // the exact midpoint (a float: halves have 11 significant bits) and one float ulp either side.
  int checked = 0;
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const double lo = ref_half_value(static_cast<uint16_t>(h));
    const double hi = h + 1 == 0x7c00 ? 65536.0 : ref_half_value(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((lo + hi) / 2);
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    const float below = std::nextafter(mid, 0.0f), above = std::nextafter(mid, 1e30f);
    const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
    for (float sgn : {1.0f, -1.0f}) {
      const uint16_t s = sgn < 0 ? 0x8000 : 0;
      ASSERT_EQ(f32_to_fp16(sgn * mid), s | even) << "midpoint above half " << std::hex << h;
      ASSERT_EQ(f32_to_fp16(sgn * below), s | h) << "below midpoint above half " << std::hex << h;
      ASSERT_EQ(f32_to_fp16(sgn * above), s | (h + 1)) << "above midpoint above half " << std::hex << h;
      ASSERT_EQ(ref_f32_to_half(sgn * mid), s | even);
      ASSERT_EQ(ref_f32_to_half(sgn * above), s | (h + 1));
      checked += 3;
    }
  }
  EXPECT_EQ(checked, 0x7c00 * 6);
}

TEST(Fp16, MatchesReferenceOnRandomFloats) {
  std::mt19937 rng(123);
  // Random bit patterns (all exponents) and random values within and around the half range.
  std::uniform_real_distribution<float> near(-70000.0f, 70000.0f);
  std::uniform_int_distribution<int> small_exp(-30, 16);
  for (int i = 0; i < 2000000; ++i) {
    float f;
    switch (i % 3) {
      case 0: f = bits_to_f32(static_cast<uint32_t>(rng())); break;
      case 1: f = near(rng); break;
      default: f = std::ldexp(near(rng) / 70000.0f, small_exp(rng)); break;
    }
    ASSERT_EQ(f32_to_fp16(f), ref_f32_to_half(f)) << std::hexfloat << f;
  }
}

TEST(Fp16, Specials) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_fp16(inf), 0x7c00);
  EXPECT_EQ(f32_to_fp16(-inf), 0xfc00);
  EXPECT_EQ(f32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_fp16(65519.996f), 0x7bff);
  EXPECT_EQ(f32_to_fp16(65520.0f), 0x7c00);  // the tie goes to "even" = infinity
  EXPECT_EQ(f32_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);   // smallest subnormal
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);   // half of it: tie to even (0)
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);   // 1.5 quanta: tie to even (2)
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.0f, -14)), 0x0400);   // smallest normal
  EXPECT_EQ(f32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie: stays at even 1.0
  EXPECT_EQ(f32_to_fp16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie: up to even
  // NaN stays NaN (quiet), with its sign.
  const uint16_t n = f32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(n & 0x7c00, 0x7c00);
  EXPECT_NE(n & 0x3ff, 0);
  const uint16_t sn = f32_to_fp16(bits_to_f32(0xff800001u));  // negative signalling NaN
  EXPECT_EQ(sn & 0xfc00, 0xfc00);
  EXPECT_NE(sn & 0x3ff, 0);
  EXPECT_TRUE(std::isnan(fp16_to_f32(sn)));
}

TEST(Bf16, DecodesEveryValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = bf16_to_f32(static_cast<uint16_t>(h));
    ASSERT_EQ(f32_to_bits(got), h << 16) << std::hex << h;
    if (!std::isnan(got)) {
      ASSERT_EQ(f32_to_bf16(got), h) << std::hex << h;  // round trip
    }
  }
}

TEST(Bf16, RoundsToNearestEvenAtEveryBoundary) {
  for (uint32_t h = 0; h < 0x7f80; ++h) {  // every finite non-negative bf16
    const uint32_t mid = (h << 16) | 0x8000;  // halfway to the next bf16
    const uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
    for (uint32_t s : {0u, 0x80000000u}) {
      const uint16_t hs = static_cast<uint16_t>(s >> 16);
      ASSERT_EQ(f32_to_bf16(bits_to_f32(s | mid)), hs | even) << std::hex << h;
      ASSERT_EQ(f32_to_bf16(bits_to_f32(s | (mid - 1))), hs | h) << std::hex << h;
      ASSERT_EQ(f32_to_bf16(bits_to_f32(s | (mid + 1))), hs | (h + 1)) << std::hex << h;
    }
  }
  // The largest finite bf16 rounds up to infinity past its midpoint.
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x7f7f8000u)), 0x7f80);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
}

TEST(Bf16, MatchesReferenceOnRandomFloatsAndKeepsNan) {
  std::mt19937 rng(321);
  for (int i = 0; i < 2000000; ++i) {
    const float f = bits_to_f32(static_cast<uint32_t>(rng()));
    const uint16_t got = f32_to_bf16(f);
    ASSERT_EQ(got, ref_f32_to_bf16(f)) << std::hexfloat << f;
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bf16_to_f32(got)));  // never rounds a NaN to inf
    }
  }
  // A signalling NaN whose payload lives only in the low 16 bits must stay NaN.
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(bits_to_f32(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(bits_to_f32(0xff800001u)))));
}

}  // namespace
}  // namespace ptn
