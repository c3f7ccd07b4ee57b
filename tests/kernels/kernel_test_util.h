// Helpers shared by the kernel tests: NMSE, random data, and a loop over every SIMD level this
// CPU has (forced with set_simd_cap) and over 1 and 2 threads.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/cpu.h"
#include "core/threadpool.h"

namespace ptn::test {

// sum (a - b)^2 / sum a^2 (a is the reference); 0 when both are all zero.
inline double nmse(const std::vector<float>& ref, const std::vector<float>& got) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double{ref[i]} - got[i];
    num += d * d;
    den += double{ref[i]} * ref[i];
  }
  if (den == 0) return num;
  return num / den;
}

inline std::vector<float> random_vec(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// The SIMD levels this CPU has (scalar always). A level it lacks is reported for the running
// test - a "skipped_levels" property in the XML report and a line in its output - rather than
// dropped silently.
inline std::vector<SimdLevel> simd_levels() {
  std::vector<SimdLevel> out{SimdLevel::Scalar};
  std::string skipped;
  for (SimdLevel l : {SimdLevel::AVX2, SimdLevel::AVX2VNNI, SimdLevel::AVX512}) {
    if (detected_simd_level() >= l)
      out.push_back(l);
    else
      skipped += std::string(skipped.empty() ? "" : ", ") + simd_level_name(l);
  }
  if (!skipped.empty() && ::testing::UnitTest::GetInstance()->current_test_info() != nullptr) {
    ::testing::Test::RecordProperty("skipped_levels", skipped + " (this CPU lacks them)");
    std::printf("[ SKIPPED  ] the %s part: this CPU lacks it (detected %s)\n", skipped.c_str(),
                simd_level_name(detected_simd_level()));
  }
  return out;
}

// Restores the uncapped level when a test ends.
struct SimdCapGuard {
  ~SimdCapGuard() { set_simd_cap(SimdLevel::AVX512); }
};

// Runs fn(pool, label) for every SIMD level present and 1 and 2 threads.
inline void for_each_config(const std::function<void(ThreadPool&, const std::string&)>& fn) {
  SimdCapGuard guard;
  static ThreadPool pool1(1), pool2(2);
  for (SimdLevel level : simd_levels()) {
    set_simd_cap(level);
    for (ThreadPool* pool : {&pool1, &pool2}) {
      const std::string label =
          std::string(simd_level_name(level)) + " threads=" + std::to_string(pool->size());
      fn(*pool, label);
    }
  }
}

}  // namespace ptn::test
