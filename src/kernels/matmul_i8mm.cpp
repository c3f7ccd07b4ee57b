// aarch64 NEON + dotprod + i8mm level: SMMLA (vmmlaq_s32) on pairs of weight rows against pairs
// of activation rows for quantized weights and m >= 2 (prefill, batched decode); SDOT row
// kernels otherwise. Compiled with -march=armv8.2-a+dotprod+i8mm.
#include "kernels/matmul_neon_impl.h"

#if !defined(__ARM_FEATURE_MATMUL_INT8) || !defined(__ARM_FEATURE_DOTPROD)
#error "matmul_i8mm.cpp needs the i8mm flags (CMakeLists.txt PTN_I8MM_FLAGS)"
#endif

namespace ptn::mm {

void matmul_range_neon_i8mm(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0,
                            int64_t n1, float* y) {
  neon_i8mm_range(w, x, qa, m, n0, n1, y);
}

}  // namespace ptn::mm
