#include "kernels/attention_paged.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"

namespace ptn {

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
                        int64_t hi, float scale, float softcap, float* out, const float* sinks) {
  thread_local std::vector<AttnAccumulator> states;  // one per query head of the group
  states.resize(static_cast<size_t>(group));
  for (int64_t g = 0; g < group; ++g) attn_begin(states[static_cast<size_t>(g)], out + g * view.dv, view.dv);
  paged_accumulate_group(view, kv_head, q, group, lo, hi, lo / view.block_size, hi / view.block_size + 1, scale,
                         softcap, states.data());
  for (int64_t g = 0; g < group; ++g)
    attn_finish(states[static_cast<size_t>(g)], out + g * view.dv, sinks ? sinks[g] : -INFINITY);
}

void paged_attend_tile(const PagedLayerView& view, int64_t kv_head, const float* const* q, const int64_t* lo,
                       const int64_t* hi, int64_t nq, float scale, float softcap, float* const* out,
                       const float* sinks) {
  const PagedTileRows t{q, lo, hi, nq, out, sinks};
  paged_attend_tiles(view, kv_head, &t, 1, scale, softcap);
}

void paged_attend_tiles(const PagedLayerView& view, int64_t kv_head, const PagedTileRows* tiles, int64_t n_tiles,
                        float scale, float softcap) {
  thread_local std::vector<float> buf, kf, vf;
  thread_local std::vector<AttnTile> state;
  const size_t per_tile = attn_tile_floats(view.dk, view.dv);
  buf.resize(per_tile * static_cast<size_t>(n_tiles));
  state.assign(static_cast<size_t>(n_tiles), AttnTile{});
  const int64_t bs = view.block_size;
  int64_t first = INT64_MAX, last = -1;
  for (int64_t ti = 0; ti < n_tiles; ++ti) {
    const PagedTileRows& r = tiles[ti];
    attn_tile_begin(state[static_cast<size_t>(ti)], r.q, r.nq, view.dk, view.dv, scale, softcap,
                    buf.data() + per_tile * static_cast<size_t>(ti));
    for (int64_t i = 0; i < r.nq; ++i)
      if (r.lo[i] <= r.hi[i]) {
        first = std::min(first, r.lo[i]);
        last = std::max(last, r.hi[i]);
      }
  }
  const bool convert = view.dtype != DType::F32;
  if (convert) {
    kf.resize(static_cast<size_t>(bs * view.dk));
    vf.resize(static_cast<size_t>(bs * view.dv));
  }
  const size_t k_head = static_cast<size_t>(kv_head) * static_cast<size_t>(bs) * view.k_row;
  const size_t v_head = static_cast<size_t>(kv_head) * static_cast<size_t>(bs) * view.v_row;
  int32_t slo[kAttnTileMax], shi[kAttnTileMax];
  for (int64_t bi = last < 0 ? 1 : first / bs; bi <= last / bs && last >= 0; ++bi) {
    const uint8_t* blk = view.base + static_cast<size_t>(view.table[bi]) * view.block_bytes;
    KvRows k{blk + view.k_off + k_head, view.dtype, static_cast<int64_t>(view.k_row)};
    KvRows v{blk + view.v_off + v_head, view.dtype, static_cast<int64_t>(view.v_row)};
    int64_t converted = 0;  // rows of this block in kf / vf
    for (int64_t ti = 0; ti < n_tiles; ++ti) {
      // Row i of the tile sees slots [slo, shi) of this block.
      const PagedTileRows& r = tiles[ti];
      int64_t n = 0;
      for (int64_t i = 0; i < r.nq; ++i) {
        const int64_t a = std::max(r.lo[i], bi * bs), b = std::min(r.hi[i], bi * bs + bs - 1);
        slo[i] = static_cast<int32_t>(a - bi * bs);
        shi[i] = static_cast<int32_t>(a <= b ? b - bi * bs + 1 : a - bi * bs);
        if (a <= b) n = std::max(n, b - bi * bs + 1);
      }
      if (n == 0) continue;
      if (convert && n > converted) {
        // Rows [converted, n) join the f32 copy; the tiles that follow need at most the block.
        const KvRows kc{static_cast<const uint8_t*>(k.data) + converted * k.stride, k.type, k.stride};
        const KvRows vc{static_cast<const uint8_t*>(v.data) + converted * v.stride, v.type, v.stride};
        attn_rows_to_f32(kc, n - converted, view.dk, kf.data() + converted * view.dk);
        attn_rows_to_f32(vc, n - converted, view.dv, vf.data() + converted * view.dv);
        converted = n;
      }
      const KvRows kt = convert ? KvRows{kf.data(), DType::F32, view.dk * 4} : k;
      const KvRows vt = convert ? KvRows{vf.data(), DType::F32, view.dv * 4} : v;
      attn_tile_block(state[static_cast<size_t>(ti)], kt, vt, n, slo, shi);
    }
  }
  for (int64_t ti = 0; ti < n_tiles; ++ti)
    attn_tile_finish(state[static_cast<size_t>(ti)], tiles[ti].out, tiles[ti].sinks);
}

// ---- the op for a step's rows, split over the threads -----------------------------------------

namespace {

// The shapes of one paged_attention call, shared by its three ways of splitting the work.
struct PagedStep {
  const PagedLayerView& view;
  const PagedQuery* rows;
  int64_t T;
  const float* q;
  int64_t hq, hkv, group;  // query heads, kv heads, query heads per kv head
  float scale, softcap;
  float* out;
  const float* sinks;  // [hq] or null

  const float* sinks_of(int64_t head) const { return sinks ? sinks + head : nullptr; }
  float sink_of(int64_t head) const { return sinks ? sinks[head] : -INFINITY; }

  PagedLayerView view_of(int64_t t) const {
    PagedLayerView v = view;
    v.table = rows[t].table;
    return v;
  }
  const float* q_of(int64_t t, int64_t head) const { return q + (t * hq + head) * view.dk; }
  float* out_of(int64_t t, int64_t head) const { return out + (t * hq + head) * view.dv; }
};

// Prompts: consecutive rows of one sequence read the same blocks, so they are attended as query
// tiles (kernels/attention.h) of up to `tile_rows` rows x the query heads of a kv head, and runs
// of up to kMaxRunTiles tiles of one sequence go block by block together (paged_attend_tiles),
// so that a long cache is read once per run rather than once per tile. Items are (run, kv head,
// share of the group's heads). tile_start: the first row of each tile, then T.
void attend_tiles(const PagedStep& s, const std::vector<int64_t>& tile_start, int64_t heads_per_tile,
                  ThreadPool& pool) {
  constexpr int64_t kMaxRunTiles = 16;
  const int64_t hkv = s.hkv, group = s.group;
  const int64_t n_tiles = static_cast<int64_t>(tile_start.size()) - 1;
  const int64_t head_shares = (group + heads_per_tile - 1) / heads_per_tile;
  // Runs short enough to leave each thread about 4 items (the later rows of a causal prompt cost more).
  const int64_t want_items = 4 * static_cast<int64_t>(pool.size());
  const int64_t run_len =
      std::clamp<int64_t>(n_tiles * hkv * head_shares / std::max<int64_t>(1, want_items), 1, kMaxRunTiles);
  std::vector<int64_t> run_start;  // first tile of each run, then n_tiles
  for (int64_t ti = 0; ti < n_tiles;) {
    run_start.push_back(ti);
    int64_t e = ti + 1;
    while (e < n_tiles && e - ti < run_len &&
           s.rows[tile_start[static_cast<size_t>(e)]].table == s.rows[tile_start[static_cast<size_t>(ti)]].table)
      ++e;
    ti = e;
  }
  run_start.push_back(n_tiles);
  const int64_t n_runs = static_cast<int64_t>(run_start.size()) - 1;
  pool.parallel_for_dynamic(n_runs * hkv * head_shares, 1, [&](int64_t b, int64_t e, int) {
    const float* qrows[kMaxRunTiles][kAttnTileMax];
    float* orows[kMaxRunTiles][kAttnTileMax];
    float srows[kMaxRunTiles][kAttnTileMax];
    int64_t lo[kMaxRunTiles][kAttnTileMax], hi[kMaxRunTiles][kAttnTileMax];
    PagedTileRows tiles[kMaxRunTiles];
    for (int64_t item = b; item < e; ++item) {
      const int64_t run = item / (hkv * head_shares), h = item / head_shares % hkv, share = item % head_shares;
      const int64_t r0 = run_start[static_cast<size_t>(run)], r1 = run_start[static_cast<size_t>(run) + 1];
      const int64_t g0 = share * heads_per_tile, g1 = std::min(group, g0 + heads_per_tile);
      const int64_t t0 = tile_start[static_cast<size_t>(r0)];
      if (r1 - r0 == 1 && tile_start[static_cast<size_t>(r0) + 1] - t0 == 1) {
        // A lone row: the group kernel (full-width dot products) is faster.
        paged_attend_group(s.view_of(t0), h, s.q_of(t0, h * group + g0), g1 - g0, s.rows[t0].lo, s.rows[t0].hi,
                           s.scale, s.softcap, s.out_of(t0, h * group + g0), s.sinks_of(h * group + g0));
        continue;
      }
      for (int64_t ti = r0; ti < r1; ++ti) {
        const int64_t k = ti - r0;
        int64_t nq = 0;
        for (int64_t t = tile_start[static_cast<size_t>(ti)]; t < tile_start[static_cast<size_t>(ti) + 1]; ++t)
          for (int64_t g = g0; g < g1; ++g, ++nq) {
            qrows[k][nq] = s.q_of(t, h * group + g);
            orows[k][nq] = s.out_of(t, h * group + g);
            srows[k][nq] = s.sink_of(h * group + g);
            lo[k][nq] = s.rows[t].lo;
            hi[k][nq] = s.rows[t].hi;
          }
        tiles[k] = PagedTileRows{qrows[k], lo[k], hi[k], nq, orows[k], s.sinks ? srows[k] : nullptr};
      }
      paged_attend_tiles(s.view_of(t0), h, tiles, r1 - r0, s.scale, s.softcap);
    }
  });
}

// Items are (row, kv head) in row order; a causal prompt's later rows cost more, so the threads
// take items in turn (contiguous halves were 1 : 3 in a 512-token prefill).
void attend_items(const PagedStep& s, ThreadPool& pool) {
  const int64_t hkv = s.hkv, group = s.group;
  pool.parallel_for_dynamic(s.T * hkv, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t item = b; item < e; ++item) {
      const int64_t t = item / hkv, h = item % hkv;
      paged_attend_group(s.view_of(t), h, s.q_of(t, h * group), group, s.rows[t].lo, s.rows[t].hi, s.scale, s.softcap,
                         s.out_of(t, h * group), s.sinks_of(h * group));
    }
  });
}

// Each (row, kv head) item's blocks in `splits` shares accumulated separately, then merged:
// share s of item i accumulates into states[(i * splits + s) * group + g].
void attend_split(const PagedStep& s, int64_t splits, ThreadPool& pool) {
  const int64_t hkv = s.hkv, group = s.group, dv = s.view.dv, bs = s.view.block_size;
  const int64_t items = s.T * hkv, units = items * splits;
  std::vector<AttnAccumulator> states(static_cast<size_t>(units * group));
  std::vector<float> acc(static_cast<size_t>(units * group * dv));
  pool.parallel_for(units, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t item = u / splits, share = u % splits;
      const int64_t t = item / hkv, h = item % hkv;
      const int64_t lo = s.rows[t].lo, hi = s.rows[t].hi;
      const int64_t b0 = lo / bs, nb = hi / bs - b0 + 1;
      AttnAccumulator* st = states.data() + u * group;
      for (int64_t g = 0; g < group; ++g) attn_begin(st[g], acc.data() + (u * group + g) * dv, dv);
      paged_accumulate_group(s.view_of(t), h, s.q_of(t, h * group), group, lo, hi, b0 + share * nb / splits,
                             b0 + (share + 1) * nb / splits, s.scale, s.softcap, st);
    }
  });
  for (int64_t item = 0; item < items; ++item) {
    const int64_t t = item / hkv, h = item % hkv;
    for (int64_t g = 0; g < group; ++g) {
      AttnAccumulator& into = states[static_cast<size_t>(item * splits * group + g)];
      for (int64_t share = 1; share < splits; ++share)
        attn_merge(into, states[static_cast<size_t>((item * splits + share) * group + g)]);
      attn_finish(into, s.out_of(t, h * group + g), s.sink_of(h * group + g));
    }
  }
}

}  // namespace

void paged_attention(const PagedLayerView& view, const PagedQuery* rows, int64_t T, const float* q,
                     int64_t n_q_heads, int64_t n_kv_heads, float scale, float softcap, float* out,
                     ThreadPool& pool, const float* sinks) {
  const PagedStep s{view, rows, T, q, n_q_heads, n_kv_heads, n_q_heads / n_kv_heads, scale, softcap, out, sinks};
  const int64_t bs = view.block_size;
  // With fewer items than threads (decoding few sequences), each item's blocks are split into
  // `splits` shares (at least kMinBlocksPerShare blocks each).
  const int64_t items = T * n_kv_heads;
  int64_t max_blocks = 0;
  for (int64_t t = 0; t < T; ++t) max_blocks = std::max(max_blocks, rows[t].hi / bs - rows[t].lo / bs + 1);
  constexpr int64_t kMinBlocksPerShare = 4;
  int64_t splits = items > 0 && items < pool.size() ? (pool.size() + items - 1) / items : 1;
  splits = std::max<int64_t>(1, std::min(splits, max_blocks / kMinBlocksPerShare));
  if (splits > 1) return attend_split(s, splits, pool);

  const int64_t width = attn_tile_width();
  const int64_t heads_per_tile = std::min(s.group, width), tile_rows = std::max<int64_t>(1, width / heads_per_tile);
  if (tile_rows >= 2 && T >= 2) {
    std::vector<int64_t> tile_start;  // first row of each tile, then T
    for (int64_t t = 0; t < T;) {
      tile_start.push_back(t);
      int64_t e = t + 1;
      while (e < T && e - t < tile_rows && rows[e].table == rows[t].table) ++e;
      t = e;
    }
    tile_start.push_back(T);
    // Only when some tile has several rows (decoding many sequences keeps one row per item).
    if (static_cast<int64_t>(tile_start.size()) - 1 < T) return attend_tiles(s, tile_start, heads_per_tile, pool);
  }
  attend_items(s, pool);
}

}  // namespace ptn
