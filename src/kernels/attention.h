// Causal attention with grouped-query heads and the HF attention policies (full, sliding
// window, chunked), over contiguous K/V — the definition the KV caches are tested against —
// and the online-softmax building block a paged cache uses to attend block by block with K/V
// read in place (f32, f16, bf16, q8_0 or q4_0 rows).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "core/threadpool.h"
#include "core/attention_policy.h"

namespace ptn {

// AttentionParams, AttnKind and attn_visible: core/attention_policy.h.

// out[t, h, :] = sum_s softmax_s(score(t, h, s)) * v[s, h / (Hq / Hkv), :] over the kv rows s
// visible from q_pos[t] (attn_visible(q_pos[t], kv_pos[s])), where
// score = scale * q[t, h, :] · k[s, h / (Hq / Hkv), :], soft-capped when softcap > 0.
//   q [T, Hq, D], k [S, Hkv, D], v [S, Hkv, Dv], q_pos [T], kv_pos [S], out [T, Hq, Dv].
// kv_pos need not be sorted. A query that sees no kv row gets zeros. out must not alias q/k/v.
// Throws InvalidArgument naming the op and shapes (Hq not a multiple of Hkv, sizes <= 0,
// Window/Chunk without a span >= 1, non-finite scale or a negative softcap).
void attention(const float* q, const float* k, const float* v, const int32_t* q_pos,
               const int32_t* kv_pos, int64_t T, int64_t S, int64_t Hq, int64_t Hkv, int64_t D,
               int64_t Dv, const AttentionParams& p, float* out,
               ThreadPool& pool = default_pool());

namespace ref {
// The same in plain loops: explicit scores, max-subtracted softmax and weighted sum in double.
void attention(const float* q, const float* k, const float* v, const int32_t* q_pos,
               const int32_t* kv_pos, int64_t T, int64_t S, int64_t Hq, int64_t Hkv, int64_t D,
               int64_t Dv, const AttentionParams& p, float* out);
}  // namespace ref

// ---- online softmax building block ----------------------------------------------------------
//
// Attention of ONE query head over any number of K/V spans, one span at a time, without
// holding all scores: the state keeps the running maximum m of the scores seen, the running
// sum l = sum exp(s - m) and acc = sum exp(s - m) * v. A new span with a larger maximum m'
// rescales l and acc by exp(m - m'). The result acc / l equals softmax attention over the
// union of the spans, in any order of spans. A paged cache calls, per query head:
//
//   float acc[Dv];  AttnAccumulator st;  attn_begin(st, acc, Dv);
//   for each block (or the visible part of it, all rows of a span must be visible):
//     attend_block(st, q_head, D, KvRows{k_block_row0, dtype, k_stride}, KvRows{v_...}, n,
//                  scale, softcap);
//   attn_finish(st, out_head);
//
// Masking is the caller's: pass only rows the query may see (a window or chunk cuts a block
// into one contiguous run when positions within a block are consecutive).

// n rows of K or V for one kv head: row j starts at data + j * stride (bytes) and holds the
// head's D (or Dv) values in `type`: F32, F16, BF16, Q8_0 or Q4_0 (then D must be a multiple of
// 32; row j is D / 32 consecutive BlockQ8_0 / BlockQ4_0). E.g. a cache block [tokens, Hkv, D] of f16:
// data = base + h * D * 2, stride = Hkv * D * 2.
struct KvRows {
  const void* data = nullptr;
  DType type = DType::F32;
  int64_t stride = 0;  // bytes from row j to row j + 1; at least the row's size
};

bool attn_kv_type_supported(DType t);  // F32, F16, BF16, Q8_0, Q4_0

struct AttnAccumulator {
  float max = -INFINITY;  // m: running maximum score (after scale and softcap)
  float sum = 0.0f;       // l: sum of exp(score - m)
  float* acc = nullptr;   // [dv] caller-owned: sum of exp(score - m) * v
  int64_t dv = 0;
};

// Resets st to "nothing seen" and zeroes acc [dv].
void attn_begin(AttnAccumulator& st, float* acc, int64_t dv);
// Folds n rows into st: scores s_j = scale * q·k_j (then softcap * tanh(s_j / softcap) when
// softcap > 0), weights exp(s_j - m). q: [d] f32. SIMD per simd_level(), single thread.
// Throws InvalidArgument for an unsupported type, a q8_0/q4_0 row length not a multiple of 32, a
// stride smaller than the row, or n < 0.
void attend_block(AttnAccumulator& st, const float* q, int64_t d, const KvRows& k,
                  const KvRows& v, int64_t n, float scale, float softcap);
// The same for the G query heads that share one kv head (GQA): q [G, d] contiguous, states[G]
// each begun with its own accumulator. Every K/V row is read once for all G heads, which is
// what makes grouped-query decoding cheap; prefer it to G calls of attend_block.
void attend_block_group(AttnAccumulator* states, const float* q, int64_t G, int64_t d,
                        const KvRows& k, const KvRows& v, int64_t n, float scale, float softcap);
// Folds `other` (same dv, e.g. another thread's share of the spans) into `into`.
void attn_merge(AttnAccumulator& into, const AttnAccumulator& other);
// out [dv] = acc / l, or zeros when no row was seen. out may be st.acc. With a sink logit
// (AttentionParams::sinks; -inf: none): acc / (l + exp(sink - m)), the sink being one more
// score whose value row is zero. Throws InvalidArgument for a NaN or +inf sink.
void attn_finish(const AttnAccumulator& st, float* out, float sink = -INFINITY);


// ---- query tiles ------------------------------------------------------------------------------
//
// In a prompt, consecutive tokens of one sequence read the same cached K/V blocks. A tile holds
// up to attn_tile_width() query rows (e.g. 4 tokens x the 4 query heads of one kv head) in one
// online-softmax state laid out lane-wise: tile row i is vector lane i. Scores, the softmax and
// the weighted sum of V are then vector operations across the rows (no horizontal sums), and
// each K/V element is loaded once per tile instead of once per query row. Each row keeps its own
// visible range per block (causality, windows, chunks):
//
//   AttnTile t;  std::vector<float> buf(attn_tile_floats(d, dv));
//   attn_tile_begin(t, q_rows, nq, d, dv, scale, softcap, buf.data());
//   for each block: attn_tile_block(t, k, v, n, lo, hi);   // row i folds rows [lo[i], hi[i])
//   attn_tile_finish(t, out_rows);
//
// The result per row equals attend_block over the same rows (summation order differs). Rows a
// tile row does not see get weight 0 through a -inf score, so every row in [min lo, max hi) must
// hold finite values for the rows that do not see it to stay finite (a paged cache's rows in
// that range are the sequence's own, already written).
constexpr int64_t kAttnTileMax = 16;

struct AttnTile {
  int64_t w = 0;   // lanes: attn_tile_width() when begun
  int64_t nq = 0, d = 0, dv = 0;
  float scale = 1.0f, softcap = 0.0f;
  float* qt = nullptr;    // [d][w]  query rows, transposed
  float* acct = nullptr;  // [dv][w] sum of exp(s - max) * v, transposed
  float max[kAttnTileMax] = {};
  float sum[kAttnTileMax] = {};
};

// Query rows per tile at the current SIMD level: 16 (AVX-512), 8 (AVX2), 1 (scalar).
int64_t attn_tile_width();
// Floats of the buffer attn_tile_begin needs: (d + dv) * attn_tile_width().
size_t attn_tile_floats(int64_t d, int64_t dv);
// Begins a tile of nq (1..attn_tile_width()) query rows q[i] [d]; buf holds attn_tile_floats.
// Throws InvalidArgument for nq out of range, d or dv < 1, null rows or buffer, a non-finite
// scale or a negative / non-finite softcap.
void attn_tile_begin(AttnTile& t, const float* const* q, int64_t nq, int64_t d, int64_t dv, float scale,
                     float softcap, float* buf);
// Folds n K/V rows into the tile; row i of the tile sees rows [lo[i], hi[i]) (clamped to
// [0, n); empty when lo >= hi). K/V types and strides as for attend_block.
void attn_tile_block(AttnTile& t, const KvRows& k, const KvRows& v, int64_t n, const int32_t* lo,
                     const int32_t* hi);
// out[i] [dv] = row i's result (zeros when it saw no row); sinks: null, or row i's sink logit
// sinks[i] (as attn_finish's).
void attn_tile_finish(const AttnTile& t, float* const* out, const float* sinks = nullptr);

// n rows of r (types and strides as for attend_block) as f32 into out [n][d], SIMD per
// simd_level(): a block of an f16 / bf16 / q8_0 / q4_0 cache converted once and then attended by many
// tiles as f32 rows (attn_tile_block would otherwise convert it once per tile). Throws as
// attend_block for bad rows, or for a null out with n > 0.
void attn_rows_to_f32(const KvRows& r, int64_t n, int64_t d, float* out);

}  // namespace ptn
