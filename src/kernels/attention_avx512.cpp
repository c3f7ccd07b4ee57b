// The attend kernel of attention_impl.h compiled for AVX512 (this file gets those flags).
#include "kernels/attention_impl.h"

namespace ptn::kdetail {

const AttnKernels& attn_kernels_avx512() {
  static constexpr AttnKernels k = make_attn_kernels<Avx512V>();
  return k;
}

}  // namespace ptn::kdetail
