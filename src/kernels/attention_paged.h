// Paged attention: queries against K/V rows read in place from the blocks of a block pool
// (the paged KV cache's storage), with the online-softmax primitives of kernels/attention.h
// (attend_block_group: each K/V row read once for a whole query group; query tiles; converted
// from f16/bf16/q8_0 on the fly, SIMD per simd_level()). Nothing is gathered into a contiguous
// copy. paged_attention is the whole op for a step's rows, split over the threads here; the
// functions below it are its pieces for one query group or tile.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/threadpool.h"
#include "kernels/attention.h"

namespace ptn {

// Where one layer's K/V rows of a sequence live. Inside a block the layer's K region is
// [Hkv][block_size][k_row bytes], its V region [Hkv][block_size][v_row bytes].
struct PagedLayerView {
  const uint8_t* base = nullptr;  // pool storage
  size_t block_bytes = 0;         // bytes per block
  const int32_t* table = nullptr; // block ids, table[i] holds positions i*block_size ..
  int64_t block_size = 0;
  size_t k_off = 0, v_off = 0;    // offsets of this layer's K and V regions inside a block
  size_t k_row = 0, v_row = 0;    // bytes of one head row of K (Dk elements) and V (Dv)
  int64_t dk = 0, dv = 0;
  DType dtype = DType::F32;
};

// One query row of a step: the block table of its sequence and the positions it sees. Rows of
// one sequence pass the same table pointer (that is how consecutive rows are recognised as one
// sequence's, to be attended as query tiles).
struct PagedQuery {
  const int32_t* table = nullptr;  // block ids: table[i] holds positions i*block_size ..
  int64_t lo = 0, hi = 0;          // visible positions lo..hi (inclusive), lo <= hi
};

// out [T, Hq, dv] for q [T, Hq, dk] (Hq = n_q_heads, a multiple of n_kv_heads = Hkv; head h
// reads kv head h / (Hq / Hkv)): row t attends to positions rows[t].lo..rows[t].hi of its table.
// `view` gives the storage and layout (view.table is not read). Work is split over `pool`:
// prompts as query tiles (consecutive rows of one sequence), otherwise one item per (row, kv
// head), and with fewer items than threads (decoding few sequences) each item's blocks in
// shares merged by the online softmax. sinks: null, or one sink logit per query head [n_q_heads]
// (AttentionParams::sinks). Must not be called from inside a job of `pool`.
void paged_attention(const PagedLayerView& view, const PagedQuery* rows, int64_t T, const float* q,
                     int64_t n_q_heads, int64_t n_kv_heads, float scale, float softcap, float* out,
                     ThreadPool& pool, const float* sinks = nullptr);

// out[g][0..dv) = softmax_j(cap(scale * q[g]·k_j)) · v_j over positions j = lo..hi (inclusive)
// of kv head `kv_head`, for the `group` query heads q[group][dk] (out [group][dv]).
// table[lo / block_size .. hi / block_size] must be valid blocks. sinks: null or [group].
void paged_attend_group(const PagedLayerView& view, int64_t kv_head, const float* q, int64_t group, int64_t lo,
                        int64_t hi, float scale, float softcap, float* out, const float* sinks = nullptr);

// Folds the visible positions lo..hi that lie in blocks [block_begin, block_end) into the
// group's begun accumulators states[group] (one share of a span split over threads; merge the
// shares with attn_merge). An empty block range leaves the states unchanged.
void paged_accumulate_group(const PagedLayerView& view, int64_t kv_head, const float* q, int64_t group, int64_t lo,
                            int64_t hi, int64_t block_begin, int64_t block_end, float scale, float softcap,
                            AttnAccumulator* states);

// A tile of nq (<= attn_tile_width()) query rows of kv head `kv_head`, all of one sequence:
// row i (q[i] [dk], out[i] [dv]) sees positions lo[i]..hi[i] (inclusive). Each block from the
// lowest lo to the highest hi is read once for all rows (kernels/attention.h, query tiles).
// Every block in that range must be valid. sinks: null or row i's sink logit sinks[i].
void paged_attend_tile(const PagedLayerView& view, int64_t kv_head, const float* const* q, const int64_t* lo,
                       const int64_t* hi, int64_t nq, float scale, float softcap, float* const* out,
                       const float* sinks = nullptr);

// One tile's rows for paged_attend_tiles, as paged_attend_tile takes them: nq (1..attn_tile_width())
// rows of one sequence, row i (q[i] [dk], out[i] [dv]) seeing positions lo[i]..hi[i] (inclusive);
// sinks null or [nq].
struct PagedTileRows {
  const float* const* q = nullptr;
  const int64_t* lo = nullptr;
  const int64_t* hi = nullptr;
  int64_t nq = 0;
  float* const* out = nullptr;
  const float* sinks = nullptr;
};

// Several tiles of one sequence and kv head in flash-attention's loop order: block by block, each
// block's K/V rows read from the pool once for every tile that sees it (and converted to f32 once
// when the cache holds f16, bf16 or q8_0), while the tiles' states stay in cache. A prompt over a
// long cache reads the cache once per n_tiles tiles instead of once per tile. Results equal
// paged_attend_tile per tile.
void paged_attend_tiles(const PagedLayerView& view, int64_t kv_head, const PagedTileRows* tiles, int64_t n_tiles,
                        float scale, float softcap);

}  // namespace ptn
