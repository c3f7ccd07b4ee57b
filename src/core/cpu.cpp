#include "core/cpu.h"

#include <cpuid.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>

namespace ptn {

static uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

static CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  const bool avx = (c >> 28) & 1;
  f.fma = (c >> 12) & 1;
  f.f16c = (c >> 29) & 1;
  if (!osxsave || !avx) return CpuFeatures{};
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_ok = (xcr0 & 0x6) == 0x6;
  const bool zmm_ok = (xcr0 & 0xe6) == 0xe6;
  if (!ymm_ok) return CpuFeatures{};
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = (b >> 5) & 1;
    f.bmi2 = (b >> 8) & 1;
    if (zmm_ok) {
      f.avx512f = (b >> 16) & 1;
      f.avx512dq = (b >> 17) & 1;
      f.avx512bw = (b >> 30) & 1;
      f.avx512vl = (b >> 31) & 1;
      f.avx512vnni = (c >> 11) & 1;
    }
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
    f.avxvnni = (a >> 4) & 1;
    if (zmm_ok) f.avx512bf16 = (a >> 5) & 1;
  }
  return f;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

SimdLevel detected_simd_level() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni && f.fma && f.f16c)
    return SimdLevel::AVX512;
  if (f.avx2 && f.fma && f.f16c && (f.avxvnni || (f.avx512vnni && f.avx512vl))) return SimdLevel::AVX2VNNI;
  if (f.avx2 && f.fma && f.f16c) return SimdLevel::AVX2;
  return SimdLevel::Scalar;
}

static std::atomic<int> g_cap{-1};

static int env_cap() {
  const char* e = std::getenv("PTN_SIMD");
  SimdLevel l;
  if (e && parse_simd_level(e, &l)) return static_cast<int>(l);
  return static_cast<int>(SimdLevel::AVX512);
}

SimdLevel simd_level() {
  int cap = g_cap.load(std::memory_order_relaxed);
  if (cap < 0) {
    cap = env_cap();
    g_cap.store(cap, std::memory_order_relaxed);
  }
  int det = static_cast<int>(detected_simd_level());
  return static_cast<SimdLevel>(cap < det ? cap : det);
}

void set_simd_cap(SimdLevel cap) { g_cap.store(static_cast<int>(cap), std::memory_order_relaxed); }

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::Scalar: return "scalar";
    case SimdLevel::AVX2: return "avx2";
    case SimdLevel::AVX2VNNI: return "avx2-vnni";
    case SimdLevel::AVX512: return "avx512";
  }
  return "?";
}

bool parse_simd_level(const std::string& name, SimdLevel* out) {
  if (name == "scalar") *out = SimdLevel::Scalar;
  else if (name == "avx2") *out = SimdLevel::AVX2;
  else if (name == "avx2-vnni" || name == "avxvnni") *out = SimdLevel::AVX2VNNI;
  else if (name == "avx512") *out = SimdLevel::AVX512;
  else return false;
  return true;
}

bool simd_has_bf16() { return simd_level() == SimdLevel::AVX512 && cpu_features().avx512bf16; }

}  // namespace ptn
