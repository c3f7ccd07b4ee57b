// The row kernels of ops_impl.h compiled for aarch64 Advanced SIMD (NeonV, 4 lanes); every
// NEON level shares them (f32 arithmetic needs neither dot products nor matrix multiplies).
#include "kernels/ops_impl.h"

namespace ptn::kdetail {

const OpsKernels& ops_kernels_neon() {
  static constexpr OpsKernels k = make_ops_kernels<NeonV>();
  return k;
}

}  // namespace ptn::kdetail
