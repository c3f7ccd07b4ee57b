#include "kvcache/paged_attention.h"

#include <algorithm>
#include <vector>

#include "kernels/attention.h"

namespace ptn::kv {

void paged_accumulate_group(const PagedLayerView& view, int64_t kv_head, const float* q, int64_t group, int64_t lo,
                            int64_t hi, int64_t block_begin, int64_t block_end, float scale, float softcap,
                            AttnAccumulator* states) {
  const int64_t bs = view.block_size;
  const size_t k_head = static_cast<size_t>(kv_head) * static_cast<size_t>(bs) * view.k_row;
  const size_t v_head = static_cast<size_t>(kv_head) * static_cast<size_t>(bs) * view.v_row;
  for (int64_t bi = std::max(block_begin, lo / bs); bi < block_end && bi <= hi / bs; ++bi) {
    // The visible run of this block: positions t0..t1, slots t0 - bi*bs ..
    const int64_t t0 = std::max(lo, bi * bs), t1 = std::min(hi, bi * bs + bs - 1);
    const size_t slot = static_cast<size_t>(t0 - bi * bs);
    const uint8_t* blk = view.base + static_cast<size_t>(view.table[bi]) * view.block_bytes;
    const KvRows k{blk + view.k_off + k_head + slot * view.k_row, view.dtype, static_cast<int64_t>(view.k_row)};
    const KvRows v{blk + view.v_off + v_head + slot * view.v_row, view.dtype, static_cast<int64_t>(view.v_row)};
    attend_block_group(states, q, group, view.dk, k, v, t1 - t0 + 1, scale, softcap);
  }
}

void paged_attend_group(const PagedLayerView& view, int64_t kv_head, const float* q, int64_t group, int64_t lo,
                        int64_t hi, float scale, float softcap, float* out) {
  thread_local std::vector<AttnAccumulator> states;  // one per query head of the group
  states.resize(static_cast<size_t>(group));
  for (int64_t g = 0; g < group; ++g) attn_begin(states[static_cast<size_t>(g)], out + g * view.dv, view.dv);
  paged_accumulate_group(view, kv_head, q, group, lo, hi, lo / view.block_size, hi / view.block_size + 1, scale,
                         softcap, states.data());
  for (int64_t g = 0; g < group; ++g) attn_finish(states[static_cast<size_t>(g)], out + g * view.dv);
}

}  // namespace ptn::kv
