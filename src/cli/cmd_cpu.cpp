// `ptn cpu`: what this machine offers the kernels.
#include <cstdio>

#include "cli/command.h"
#include "core/cpu.h"
#include "core/threadpool.h"

namespace {

std::function<int()> setup(CLI::App& app) {
  app.add_subcommand("cpu", "Show the CPU features and the SIMD level the kernels will use");
  return [] {
    const auto& f = ptn::cpu_features();
    std::printf("simd level: %s (detected %s)\n", ptn::simd_level_name(ptn::simd_level()),
                ptn::simd_level_name(ptn::detected_simd_level()));
#if defined(__aarch64__)
    std::printf("asimd %d asimddp %d i8mm %d asimdhp %d\n", f.asimd, f.asimddp, f.i8mm, f.fphp);
#else
    std::printf("avx2 %d fma %d f16c %d avx512f %d bw %d vl %d dq %d vnni %d bf16 %d avx-vnni %d\n",
                f.avx2, f.fma, f.f16c, f.avx512f, f.avx512bw, f.avx512vl, f.avx512dq, f.avx512vnni,
                f.avx512bf16, f.avxvnni);
    if (ptn::simd_level() == ptn::SimdLevel::AVX2VNNI)
      std::printf("avx2-vnni dot products: %s\n", f.avxvnni ? "AVX-VNNI (VEX vpdpbusd ymm)"
                                                              : "AVX512-VNNI + VL (EVEX vpdpbusd ymm, the same computation)");
#endif
    std::printf("levels: %s\n", ptn::simd_level_names().c_str());
    std::printf("threads: %d\n", ptn::default_threads());
    return 0;
  };
}

PTN_COMMAND("cpu", setup);

}  // namespace
