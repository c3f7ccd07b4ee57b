// CPU features and the SIMD level kernels may use. The level is detected at run time and may
// be capped (environment variable PTN_SIMD=scalar|avx2|avx2-vnni|avx512, or set_simd_cap) so
// that a machine with AVX-512 still tests its AVX2 and scalar paths.
#pragma once
#include <string>

namespace ptn {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false, bmi2 = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false, avxvnni = false;
};
const CpuFeatures& cpu_features();

// Scalar: portable C++. AVX2: AVX2 + FMA + F16C. AVX2VNNI ("avx2-vnni"): AVX2 with 256-bit
// vpdpbusd, from AVX-VNNI or (the same computation, EVEX-encoded) AVX512-VNNI + VL, so every
// AVX-512 CPU can run it too. AVX512: F, BW, VL, DQ and VNNI. Each level includes the lower.
enum class SimdLevel { Scalar = 0, AVX2 = 1, AVX2VNNI = 2, AVX512 = 3 };

SimdLevel detected_simd_level();
SimdLevel simd_level();  // min(detected, cap)
void set_simd_cap(SimdLevel cap);
const char* simd_level_name(SimdLevel level);
// Accepts the names of simd_level_name, and "avxvnni" for avx2-vnni.
bool parse_simd_level(const std::string& name, SimdLevel* out);
// True when the AVX-512 path may also use BF16 dot products (avx512_bf16 present, level AVX512).
bool simd_has_bf16();

}  // namespace ptn
