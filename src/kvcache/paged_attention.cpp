#include "kvcache/paged_attention.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"

namespace ptn::kv {

void paged_accumulate_group(const PagedLayerView& view, int64_t kv_head, const float* q, int64_t group, int64_t lo,
                            int64_t hi, int64_t block_begin, int64_t block_end, float scale, float softcap,
                            AttnAccumulator* states) {
  const int64_t bs = view.block_size;
  const size_t k_head = static_cast<size_t>(kv_head) * static_cast<size_t>(bs) * view.k_row;
  const size_t v_head = static_cast<size_t>(kv_head) * static_cast<size_t>(bs) * view.v_row;
  const int64_t last = std::min(block_end - 1, hi / bs);
  for (int64_t bi = std::max(block_begin, lo / bs); bi <= last; ++bi) {
    // The visible run of this block: positions t0..t1, slots t0 - bi*bs ..
    const int64_t t0 = std::max(lo, bi * bs), t1 = std::min(hi, bi * bs + bs - 1);
    const size_t slot = static_cast<size_t>(t0 - bi * bs);
    const uint8_t* blk = view.base + static_cast<size_t>(view.table[bi]) * view.block_bytes;
    if (bi < last) {
      // Blocks lie anywhere in the pool: start fetching the next one's K and V rows of this
      // head while this one is attended (in decoding they come from memory, not cache).
      const uint8_t* nb = view.base + static_cast<size_t>(view.table[bi + 1]) * view.block_bytes;
      const size_t kb = static_cast<size_t>(bs) * view.k_row, vb = static_cast<size_t>(bs) * view.v_row;
      for (size_t off = 0; off < kb; off += 64) __builtin_prefetch(nb + view.k_off + k_head + off, 0, 3);
      for (size_t off = 0; off < vb; off += 64) __builtin_prefetch(nb + view.v_off + v_head + off, 0, 3);
    }
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

void paged_attend_tile(const PagedLayerView& view, int64_t kv_head, const float* const* q, const int64_t* lo,
                       const int64_t* hi, int64_t nq, float scale, float softcap, float* const* out) {
  thread_local std::vector<float> buf;
  buf.resize(attn_tile_floats(view.dk, view.dv));
  AttnTile tile;
  attn_tile_begin(tile, q, nq, view.dk, view.dv, scale, softcap, buf.data());
  const int64_t bs = view.block_size;
  int64_t first = INT64_MAX, last = -1;
  for (int64_t i = 0; i < nq; ++i)
    if (lo[i] <= hi[i]) {
      first = std::min(first, lo[i]);
      last = std::max(last, hi[i]);
    }
  const size_t k_head = static_cast<size_t>(kv_head) * static_cast<size_t>(bs) * view.k_row;
  const size_t v_head = static_cast<size_t>(kv_head) * static_cast<size_t>(bs) * view.v_row;
  int32_t slo[kAttnTileMax], shi[kAttnTileMax];
  for (int64_t bi = last < 0 ? 1 : first / bs; bi <= last / bs && last >= 0; ++bi) {
    // Row i sees slots [slo, shi) of this block.
    int64_t n = 0;
    for (int64_t i = 0; i < nq; ++i) {
      const int64_t a = std::max(lo[i], bi * bs), b = std::min(hi[i], bi * bs + bs - 1);
      slo[i] = static_cast<int32_t>(a - bi * bs);
      shi[i] = static_cast<int32_t>(a <= b ? b - bi * bs + 1 : a - bi * bs);
      if (a <= b) n = std::max(n, b - bi * bs + 1);
    }
    if (n == 0) continue;
    const uint8_t* blk = view.base + static_cast<size_t>(view.table[bi]) * view.block_bytes;
    const KvRows k{blk + view.k_off + k_head, view.dtype, static_cast<int64_t>(view.k_row)};
    const KvRows v{blk + view.v_off + v_head, view.dtype, static_cast<int64_t>(view.v_row)};
    attn_tile_block(tile, k, v, n, slo, shi);
  }
  attn_tile_finish(tile, out);
}

}  // namespace ptn::kv
