#include "core/cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define PTN_CPU_X86 1
#elif defined(__aarch64__)
#include <sys/auxv.h>
#define PTN_CPU_ARM64 1
#endif

#include <atomic>
#include <cstdint>
#include <cstdlib>

namespace ptn {

#if defined(PTN_CPU_X86)
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
#elif defined(PTN_CPU_ARM64)
// The Linux HWCAP bits (asm/hwcap.h), spelled out so that an older libc's headers still build.
constexpr unsigned long kHwcapAsimd = 1ul << 1, kHwcapAsimdhp = 1ul << 10, kHwcapAsimddp = 1ul << 20;
constexpr unsigned long kHwcap2I8mm = 1ul << 13;

static CpuFeatures detect() {
  CpuFeatures f;
  const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
  f.asimd = (hw & kHwcapAsimd) != 0;
  f.fphp = (hw & kHwcapAsimdhp) != 0;
  f.asimddp = (hw & kHwcapAsimddp) != 0;
  f.i8mm = (hw2 & kHwcap2I8mm) != 0;
  return f;
}
#else
static CpuFeatures detect() { return CpuFeatures{}; }
#endif

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

SimdLevel detected_simd_level() {
  const CpuFeatures& f = cpu_features();
#if defined(PTN_CPU_X86)
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni && f.fma && f.f16c)
    return SimdLevel::AVX512;
  if (f.avx2 && f.fma && f.f16c && (f.avxvnni || (f.avx512vnni && f.avx512vl))) return SimdLevel::AVX2VNNI;
  if (f.avx2 && f.fma && f.f16c) return SimdLevel::AVX2;
#elif defined(PTN_CPU_ARM64)
  if (f.asimd && f.asimddp && f.i8mm) return SimdLevel::NeonI8mm;
  if (f.asimd && f.asimddp) return SimdLevel::NeonDotprod;
  if (f.asimd) return SimdLevel::Neon;
#endif
  return SimdLevel::Scalar;
}

const std::vector<SimdLevel>& simd_levels_of_arch() {
#if defined(PTN_CPU_X86)
  static const std::vector<SimdLevel> v{SimdLevel::Scalar, SimdLevel::AVX2, SimdLevel::AVX2VNNI, SimdLevel::AVX512};
#elif defined(PTN_CPU_ARM64)
  static const std::vector<SimdLevel> v{SimdLevel::Scalar, SimdLevel::Neon, SimdLevel::NeonDotprod,
                                        SimdLevel::NeonI8mm};
#else
  static const std::vector<SimdLevel> v{SimdLevel::Scalar};
#endif
  return v;
}

static bool of_arch(SimdLevel l) {
  for (SimdLevel a : simd_levels_of_arch())
    if (a == l) return true;
  return false;
}

static constexpr int kNoCap = 1 << 20;
static std::atomic<int> g_cap{-1};

static int env_cap() {
  const char* e = std::getenv("PTN_SIMD");
  SimdLevel l;
  if (e && parse_simd_level(e, &l)) return static_cast<int>(l);
  return kNoCap;  // unset; an invalid value is refused by simd_env_error() before any run
}

SimdLevel simd_level() {
  int cap = g_cap.load(std::memory_order_relaxed);
  if (cap < 0) {
    cap = env_cap();
    g_cap.store(cap, std::memory_order_relaxed);
  }
  const int det = static_cast<int>(detected_simd_level());
  return static_cast<SimdLevel>(cap < det ? cap : det);
}

void set_simd_cap(SimdLevel cap) {
  g_cap.store(of_arch(cap) ? static_cast<int>(cap) : kNoCap, std::memory_order_relaxed);
}
void reset_simd_cap() { g_cap.store(kNoCap, std::memory_order_relaxed); }

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::Scalar: return "scalar";
    case SimdLevel::AVX2: return "avx2";
    case SimdLevel::AVX2VNNI: return "avx2-vnni";
    case SimdLevel::AVX512: return "avx512";
    case SimdLevel::Neon: return "neon";
    case SimdLevel::NeonDotprod: return "neon-dotprod";
    case SimdLevel::NeonI8mm: return "neon-i8mm";
  }
  return "?";
}

bool parse_simd_level(const std::string& name, SimdLevel* out) {
  for (SimdLevel l : simd_levels_of_arch()) {
    if (name == simd_level_name(l) || (l == SimdLevel::AVX2VNNI && name == "avxvnni")) {
      *out = l;
      return true;
    }
  }
  return false;
}

std::string simd_level_names() {
  std::string s;
  for (SimdLevel l : simd_levels_of_arch()) s += std::string(s.empty() ? "" : "|") + simd_level_name(l);
  return s;
}

std::string simd_env_error() {
  const char* e = std::getenv("PTN_SIMD");
  SimdLevel l;
  if (e == nullptr || parse_simd_level(e, &l)) return "";
  return std::string("PTN_SIMD='") + e + "' is not a SIMD level of this build (" + simd_level_names() + ")";
}

bool simd_has_bf16() { return simd_level() == SimdLevel::AVX512 && cpu_features().avx512bf16; }

}  // namespace ptn
