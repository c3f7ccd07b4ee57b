// CPU features and the SIMD level kernels may use. The level is detected at run time and may
// be capped (environment variable PTN_SIMD, or set_simd_cap) so that a machine with AVX-512
// (or with NEON dot products) still tests its lower paths. Each architecture has its own
// levels: x86-64 scalar|avx2|avx2-vnni|avx512, aarch64 scalar|neon|neon-dotprod|neon-i8mm.
#pragma once
#include <string>
#include <vector>

namespace ptn {

struct CpuFeatures {
  // x86-64 (cpuid)
  bool avx2 = false, fma = false, f16c = false, bmi2 = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false, avxvnni = false;
  // aarch64 (getauxval HWCAP / HWCAP2): Advanced SIMD, SDOT/UDOT, SMMLA, half-precision arithmetic.
  bool asimd = false, asimddp = false, i8mm = false, fphp = false;
};
const CpuFeatures& cpu_features();

// x86-64: Scalar: portable C++. AVX2: AVX2 + FMA + F16C. AVX2VNNI ("avx2-vnni"): AVX2 with
// 256-bit vpdpbusd, from AVX-VNNI or (the same computation, EVEX-encoded) AVX512-VNNI + VL, so
// every AVX-512 CPU can run it too. AVX512: F, BW, VL, DQ and VNNI. Each level includes the lower.
// aarch64: Neon: Advanced SIMD (every aarch64 CPU). NeonDotprod: + SDOT (vdotq_s32).
// NeonI8mm: + SMMLA (vmmlaq_s32). The ARM values sit apart from the x86 ones so that levels
// of one architecture compare in order and never alias the other's.
enum class SimdLevel { Scalar = 0, AVX2 = 1, AVX2VNNI = 2, AVX512 = 3, Neon = 16, NeonDotprod = 17, NeonI8mm = 18 };

SimdLevel detected_simd_level();
SimdLevel simd_level();  // min(detected, cap) within this architecture's levels
// Caps the level. A level of the other architecture caps nothing (tests restore "no cap" with
// set_simd_cap(SimdLevel::AVX512), which on aarch64 means the same); reset_simd_cap() says so.
void set_simd_cap(SimdLevel cap);
void reset_simd_cap();
// Every level of the architecture this binary was built for, lowest first (scalar first).
const std::vector<SimdLevel>& simd_levels_of_arch();
const char* simd_level_name(SimdLevel level);
// Accepts only the names of this architecture's levels (simd_levels_of_arch()), and "avxvnni"
// for avx2-vnni.
bool parse_simd_level(const std::string& name, SimdLevel* out);
// "scalar|avx2|avx2-vnni|avx512" or "scalar|neon|neon-dotprod|neon-i8mm": the names PTN_SIMD accepts here.
std::string simd_level_names();
// Checks PTN_SIMD: empty string when unset or valid, else what is wrong (callers refuse to run).
std::string simd_env_error();
// True when the AVX-512 path may also use BF16 dot products (avx512_bf16 present, level AVX512).
bool simd_has_bf16();

}  // namespace ptn
