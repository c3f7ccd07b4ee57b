// The row kernels of ops_impl.h compiled for AVX2 + FMA + F16C (this file gets those flags).
#include "kernels/ops_impl.h"

namespace ptn::kdetail {

const OpsKernels& ops_kernels_avx2() {
  static constexpr OpsKernels k = make_ops_kernels<Avx2V>();
  return k;
}

}  // namespace ptn::kdetail
