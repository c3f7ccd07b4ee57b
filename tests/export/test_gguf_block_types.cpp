// GGUFs whose matrices are Q2_K, Q3_K, IQ4_XS and MXFP4 (fuzz/corpus/gguf/
// llama-micro-kquants-mxfp4.gguf) or TQ1_0, TQ2_0 and MXFP4 (llama-micro-ternary.gguf), random
// blocks written by fuzz/make_block_types_seed.py: each
// exports keeping every tensor's type and bytes, and its golden samples (the reference executor:
// every weight dequantized, double sums) verify through the optimized kernels of every SIMD level
// of this machine and every cache.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "core/cpu.h"
#include "export_test_util.h"
#include "formats/gguf.h"

namespace ptn {
namespace {

using namespace ptn::testing;

std::string seed_path(const char* name) { return std::string(PTN_SOURCE_DIR) + "/fuzz/corpus/gguf/" + name; }

// Exports the seed, checks every quantized tensor kept its type and bytes, counts the types
// (want), and verifies the golden samples at every SIMD level of this machine.
void export_and_verify(const std::string& seed, const std::map<DType, int>& want) {
  TempDir d;
  ExportOptions o = base_options(seed, d / "m.ptn");
  quiet_export(o);
  auto p = Program::load(o.output, VerifyLevel::Full);
  auto g = GgufFile::open(seed);
  std::map<DType, int> seen;
  for (const auto& t : g->tensors()) {
    const Tensor src = g->tensor(t.name);
    if (!traits(src.dtype()).quantized) continue;
    ++seen[src.dtype()];
    const Tensor& dst = p->tensor(t.name);
    EXPECT_EQ(dst.dtype(), src.dtype()) << t.name;
    ASSERT_EQ(dst.nbytes(), src.nbytes()) << t.name;
    // Q/K rows are permuted back to half-split order on import (a llama GGUF interleaves them),
    // so only the other matrices keep their byte order.
    if (t.name.find("attn_q") == std::string::npos && t.name.find("attn_k") == std::string::npos) {
      EXPECT_EQ(0, std::memcmp(dst.data(), src.data(), src.nbytes())) << t.name;
    }
  }
  EXPECT_EQ(seen, want);
  // The optimized matmul quantizes activations to 8 bits (NMSE about 2e-4..8e-4 here).
  for (SimdLevel level : simd_levels_of_arch()) {  // x86-64's or aarch64's
    if (level != SimdLevel::Scalar && level > detected_simd_level()) continue;
    SCOPED_TRACE(simd_level_name(level));
    set_simd_cap(level);
    expect_verifies(p, /*with_q8=*/false, 3e-3);
  }
  reset_simd_cap();
}

TEST(GgufBlockTypes, ExportKeepsTheBlocksAndVerifiesAtEveryLevel) {
  export_and_verify(seed_path("llama-micro-kquants-mxfp4.gguf"),
                    {{DType::Q2_K, 2}, {DType::Q3_K, 2}, {DType::IQ4_XS, 1}, {DType::MXFP4, 3}});
}

TEST(GgufBlockTypes, TernaryExportKeepsTheBlocksAndVerifiesAtEveryLevel) {
  export_and_verify(seed_path("llama-micro-ternary.gguf"), {{DType::TQ1_0, 3}, {DType::TQ2_0, 3}, {DType::MXFP4, 2}});
}

}  // namespace
}  // namespace ptn
