// AVX2 level: the portable kernels compiled with AVX2/FMA/F16C (auto-vectorized).
#include "kernels/matmul_generic.h"

namespace ptn::mm {

void quantize_acts_avx2(const float* x, int64_t r0, int64_t r1, QuantActs& qa) {
  generic_quantize_acts(x, r0, r1, qa);
}

void matmul_range_avx2(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1,
                       float* y) {
  generic_matmul_range(w, x, qa, m, n0, n1, y);
}

}  // namespace ptn::mm
