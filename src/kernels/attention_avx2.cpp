// The attend kernel of attention_impl.h compiled for AVX2 (this file gets those flags).
#include "kernels/attention_impl.h"

namespace ptn::kdetail {

const AttnKernels& attn_kernels_avx2() {
  static constexpr AttnKernels k = make_attn_kernels<Avx2V>();
  return k;
}

}  // namespace ptn::kdetail
