// aarch64 NEON + dotprod level: the row kernels of matmul_neon_impl.h compiled with
// -march=armv8.2-a+dotprod, so every 16-byte integer dot product is one SDOT (vdotq_s32).
#include "kernels/matmul_neon_impl.h"

#if !defined(__ARM_FEATURE_DOTPROD)
#error "matmul_dotprod.cpp needs the dotprod flags (CMakeLists.txt PTN_DOTPROD_FLAGS)"
#endif

namespace ptn::mm {

void matmul_range_neon_dotprod(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0,
                               int64_t n1, float* y) {
  neon_rows_range(w, x, qa, m, n0, n1, y);
}

}  // namespace ptn::mm
