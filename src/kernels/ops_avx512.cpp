// The row kernels of ops_impl.h compiled for AVX-512 (F, BW, DQ, VL; this file gets those flags).
#include "kernels/ops_impl.h"

namespace ptn::kdetail {

const OpsKernels& ops_kernels_avx512() {
  static constexpr OpsKernels k = make_ops_kernels<Avx512V>();
  return k;
}

}  // namespace ptn::kdetail
