// aarch64 NEON level (baseline Advanced SIMD): the activation format of every NEON level and
// the row kernels of matmul_neon_impl.h with SMULL/SADALP integer dot products.
#include "kernels/matmul_neon_impl.h"

namespace ptn::mm {

void quantize_acts_neon(const float* x, int64_t r0, int64_t r1, QuantActs& qa) {
  generic_quantize_acts(x, r0, r1, qa);
}

void matmul_range_neon(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1,
                       float* y) {
  neon_rows_range(w, x, qa, m, n0, n1, y);
}

}  // namespace ptn::mm
