// The attend kernel of attention_impl.h compiled for aarch64 Advanced SIMD (NeonV, 4 lanes); every
// NEON level shares them (f32 arithmetic needs neither dot products nor matrix multiplies).
#include "kernels/attention_impl.h"

namespace ptn::kdetail {

const AttnKernels& attn_kernels_neon() {
  static constexpr AttnKernels k = make_attn_kernels<NeonV>();
  return k;
}

}  // namespace ptn::kdetail
