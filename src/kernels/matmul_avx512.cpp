// AVX-512 level (F, BW, VL, DQ, VNNI; BF16 when simd_has_bf16()).
#include <immintrin.h>

#include "core/cpu.h"
#include "kernels/matmul_generic.h"

namespace ptn::mm {

void quantize_acts_avx512(const float* x, int64_t r0, int64_t r1, QuantActs& qa) {
  generic_quantize_acts(x, r0, r1, qa);
}

void matmul_range_avx512(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1,
                         float* y) {
  generic_matmul_range(w, x, qa, m, n0, n1, y);
}

}  // namespace ptn::mm
