// The SIMD levels of this build's architecture: names round-trip, the other architecture's
// names and typos are refused (PTN_SIMD is checked, never ignored), caps only lower the level.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/cpu.h"

using namespace ptn;

TEST(Cpu, LevelNamesRoundTripAndOtherArchitecturesAreRefused) {
  const auto& levels = simd_levels_of_arch();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), SimdLevel::Scalar);
  for (SimdLevel l : levels) {
    SimdLevel got = SimdLevel::Scalar;
    ASSERT_TRUE(parse_simd_level(simd_level_name(l), &got)) << simd_level_name(l);
    EXPECT_EQ(got, l);
  }
#if defined(__aarch64__)
  const char* foreign[] = {"avx2", "avx2-vnni", "avxvnni", "avx512"};
#else
  const char* foreign[] = {"neon", "neon-dotprod", "neon-i8mm"};
#endif
  SimdLevel l;
  for (const char* name : foreign) EXPECT_FALSE(parse_simd_level(name, &l)) << name;
  EXPECT_FALSE(parse_simd_level("AVX2", &l));
  EXPECT_FALSE(parse_simd_level("", &l));
}

TEST(Cpu, PtnSimdNamingNoLevelIsAnError) {
  ASSERT_EQ(setenv("PTN_SIMD", "avx3", 1), 0);
  const std::string err = simd_env_error();
  EXPECT_NE(err.find("avx3"), std::string::npos) << err;
  EXPECT_NE(err.find(simd_level_names()), std::string::npos) << err;
  ASSERT_EQ(setenv("PTN_SIMD", "scalar", 1), 0);
  EXPECT_EQ(simd_env_error(), "");
  unsetenv("PTN_SIMD");
  EXPECT_EQ(simd_env_error(), "");
}

TEST(Cpu, CapsLowerTheLevelWithinTheArchitecture) {
  for (SimdLevel l : simd_levels_of_arch()) {
    set_simd_cap(l);
    const SimdLevel want = static_cast<int>(l) < static_cast<int>(detected_simd_level()) ? l : detected_simd_level();
    EXPECT_EQ(simd_level(), want) << simd_level_name(l);
  }
  reset_simd_cap();
  EXPECT_EQ(simd_level(), detected_simd_level());
  // The other architecture's top level (the tests' old "uncapped" idiom) caps nothing.
  set_simd_cap(SimdLevel::Scalar);
  EXPECT_EQ(simd_level(), SimdLevel::Scalar);
#if defined(__aarch64__)
  set_simd_cap(SimdLevel::AVX512);
#else
  set_simd_cap(SimdLevel::NeonI8mm);
#endif
  EXPECT_EQ(simd_level(), detected_simd_level());
  reset_simd_cap();
}
