// Windowed and chunked attention in both caches: masks against an independent dense attention
// with an explicit visibility predicate (W in {1, 2, 7, 64}, C in {4, 16}, prefill chunks that
// straddle window / chunk / block boundaries, batched sequences), bounded memory of window
// groups next to a growing full group (a Gemma-3-like 5:1 spec over 10x the window), rewind
// floors, prefix reuse with window layers, and the reference cache's rings.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>

#include "core/error.h"
#include "kv_test_util.h"
#include "kvcache/kv_common.h"
#include "kvcache/paged_cache.h"
#include "kvcache/reference_cache.h"

using namespace ptn;
using namespace kvt;

namespace {

constexpr int64_t kHq = 4, kHkv = 2, kDk = 16, kDv = 24;
const AttentionParams kParams{0.25f, 0.0f};

CacheOptions opts(int64_t capacity_tokens, int64_t block_size, int64_t max_step = 0) {
  CacheOptions o;
  o.capacity_tokens = capacity_tokens;
  o.block_size = block_size;
  o.max_step_tokens = max_step;
  return o;
}

bool visible(const LayerCacheSpec& L, int64_t qp, int64_t j) {
  if (j > qp) return false;
  if (L.kind == AttnKind::Window) return qp - j < L.span;
  if (L.kind == AttnKind::Chunk) return j / L.span == qp / L.span;
  return true;
}

// The dense expectation of one step: every sequence's full token history (including this
// step's rows), K/V regenerated from (layer, position, token) as run_step makes them.
class Dense {
 public:
  explicit Dense(CacheSpec spec) : spec_(std::move(spec)) {}
  void rewind(SeqId s, int64_t n) { hist_[s].resize(static_cast<size_t>(n)); }
  void fork(SeqId src, SeqId dst) { hist_[dst] = hist_[src]; }
  StepOut step(const StepBatch& b) {
    for (const StepRow& r : b.rows) {
      EXPECT_EQ(static_cast<int64_t>(hist_[r.seq].size()), r.pos);
      hist_[r.seq].push_back(r.token);
    }
    StepOut res;
    const int64_t T = static_cast<int64_t>(b.rows.size());
    for (size_t l = 0; l < spec_.layers.size(); ++l) {
      const LayerCacheSpec& L = spec_.layers[l];
      std::vector<float> out(static_cast<size_t>(T * kHq * L.head_dim_v));
      for (int64_t t = 0; t < T; ++t) {
        const StepRow& r = b.rows[static_cast<size_t>(t)];
        const std::vector<int32_t>& h = hist_[r.seq];
        std::vector<float> q(static_cast<size_t>(kHq * L.head_dim_k));
        make_row(static_cast<int64_t>(l), r.pos, r.token, kHq, L.head_dim_k, 7 * 1000 + 1, 2.0f, q.data());
        std::vector<std::vector<float>> kk(static_cast<size_t>(L.n_kv_heads * (r.pos + 1))),
            vv(kk.size());  // [kv head][position]
        for (int32_t j = 0; j <= r.pos; ++j) {
          std::vector<float> krow(static_cast<size_t>(L.n_kv_heads * L.head_dim_k)),
              vrow(static_cast<size_t>(L.n_kv_heads * L.head_dim_v));
          make_row(static_cast<int64_t>(l), j, h[static_cast<size_t>(j)], L.n_kv_heads, L.head_dim_k, 2, 1.0f, krow.data());
          make_row(static_cast<int64_t>(l), j, h[static_cast<size_t>(j)], L.n_kv_heads, L.head_dim_v, 3, 1.0f, vrow.data());
          for (int64_t kh = 0; kh < L.n_kv_heads; ++kh) {
            kk[static_cast<size_t>(kh * (r.pos + 1) + j)].assign(krow.begin() + kh * L.head_dim_k,
                                                                  krow.begin() + (kh + 1) * L.head_dim_k);
            vv[static_cast<size_t>(kh * (r.pos + 1) + j)].assign(vrow.begin() + kh * L.head_dim_v,
                                                                  vrow.begin() + (kh + 1) * L.head_dim_v);
          }
        }
        const int64_t group = kHq / L.n_kv_heads;
        for (int64_t hq = 0; hq < kHq; ++hq) {
          const int64_t kh = hq / group;
          const std::vector<std::vector<float>> keys(kk.begin() + kh * (r.pos + 1), kk.begin() + (kh + 1) * (r.pos + 1));
          const std::vector<std::vector<float>> vals(vv.begin() + kh * (r.pos + 1), vv.begin() + (kh + 1) * (r.pos + 1));
          dense_attend(q.data() + hq * L.head_dim_k, keys, vals, r.pos, kParams.scale,
                       [&](int64_t qp, int64_t j) { return visible(L, qp, j); },
                       out.data() + (t * kHq + hq) * L.head_dim_v);
        }
      }
      res.per_layer.push_back(std::move(out));
    }
    return res;
  }

 private:
  CacheSpec spec_;
  std::map<SeqId, std::vector<int32_t>> hist_;
};

// One window layer, one chunk layer, one full layer.
CacheSpec mixed(int64_t window, int64_t chunk) {
  return small_spec(3, kHkv, kDk, kDv, {{AttnKind::Window, window}, {AttnKind::Chunk, chunk}, {AttnKind::Full, 0}});
}

}  // namespace

// Masks through both caches (paged with blocks of 4 and 16, reference with rings of W + 7 - 1
// and without) against the dense attention, three sequences with ragged step sizes that
// straddle window, chunk and block boundaries.
TEST(Windows, MasksMatchDenseReference) {
  const std::vector<int64_t> steps = {5, 3, 8, 1, 1, 7, 2, 1, 6, 4, 1, 1, 3, 7, 1, 5, 8, 2, 1, 1};  // 68 rows
  for (int64_t window : {1, 2, 7, 64})
    for (int64_t chunk : {4, 16})
      for (int64_t bs : {4, 16}) {
        const CacheSpec spec = mixed(window, chunk);
        PagedCache paged(spec, opts(3 * 80, bs));
        SequenceReferenceCache ring(spec, opts(0, 16, 8));
        SequenceReferenceCache whole(spec, opts(0, 16));
        Dense dense(spec);
        for (SeqId s : {0, 1, 2}) {
          paged.add_sequence(s);
          ring.add_sequence(s);
          whole.add_sequence(s);
        }
        for (size_t i = 0; i < steps.size(); ++i) {
          StepBatch b;
          // Sequence s takes the step size of entry i + s (rows of different sequences interleave).
          for (SeqId s : {0, 1, 2}) {
            const int64_t n = steps[(i + static_cast<size_t>(s)) % steps.size()];
            append_rows(paged, s, tokens_range(100 * (s + 1) + static_cast<int32_t>(paged.length(s)), n), &b);
          }
          const StepOut want = dense.step(b);
          const std::string at = "W " + std::to_string(window) + " C " + std::to_string(chunk) + " bs " +
                                 std::to_string(bs) + " step " + std::to_string(i);
          ASSERT_LT(nmse(run_step(paged, b, kHq, kParams), want), 1e-10) << at;
          const StepOut from_ring = run_step(ring, b, kHq, kParams), from_whole = run_step(whole, b, kHq, kParams);
          ASSERT_LT(nmse(from_whole, want), 1e-10) << at;
          // The rings and chunk tails change where rows live, not the arithmetic: bit-identical.
          ASSERT_EQ(from_ring.per_layer, from_whole.per_layer) << at;
          // The window and chunk groups hold only blocks their next query can see.
          for (SeqId s : {0, 1, 2}) {
            const int64_t len = paged.length(s);
            for (int g = 0; g < paged.n_groups(); ++g) {
              const auto table = paged.block_table(s, g);
              const LayerCacheSpec& L = spec.layers[static_cast<size_t>(paged.group_layers(g).front())];
              const int64_t first = kv::first_visible(L, len);
              for (size_t bi = 0; bi < table.size(); ++bi)
                ASSERT_EQ(table[bi] < 0, static_cast<int64_t>(bi + 1) * bs <= first)
                    << at << " seq " << s << " group " << g << " block " << bi;
            }
          }
        }
      }
}

// A step of more rows than max_step_tokens is refused by both caches.
TEST(Windows, StepLargerThanMaxStepTokensRefused) {
  const CacheSpec spec = mixed(7, 4);
  SequenceReferenceCache ring(spec, opts(0, 16, 8));
  PagedCache paged(spec, opts(64, 4, 8));
  for (KVCache* c : {static_cast<KVCache*>(&ring), static_cast<KVCache*>(&paged)}) {
    c->add_sequence(0);
    StepBatch b;
    append_rows(*c, 0, tokens_range(1, 9), &b);
    EXPECT_THROW(c->prepare(b), Error) << c->name();
    EXPECT_EQ(c->length(0), 0);
    EXPECT_FALSE(c->can_extend(0, 9));
  }
}

// Gemma-3-like: 5 window layers (W 16) : 1 full, 160 tokens (10x the window) in ragged steps.
// The window group's memory stays bounded while the full group grows; outputs equal the dense
// attention, and the reference's rings are bounded too.
TEST(Windows, MixedSpecWindowGroupMemoryBounded) {
  constexpr int64_t W = 16, bs = 4, M = 8;
  std::vector<std::pair<AttnKind, int64_t>> kinds;
  for (int l = 0; l < 6; ++l) kinds.push_back(l % 6 == 5 ? std::make_pair(AttnKind::Full, int64_t{0})
                                                          : std::make_pair(AttnKind::Window, W));
  const CacheSpec spec = small_spec(6, kHkv, kDk, kDv, kinds);
  PagedCache paged(spec, opts(256, bs));
  SequenceReferenceCache ring(spec, opts(0, 16, M));
  Dense dense(spec);
  paged.add_sequence(0);
  ring.add_sequence(0);
  ASSERT_EQ(paged.n_groups(), 2);
  EXPECT_EQ(paged.group_layers(0), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(paged.group_layers(1), (std::vector<int64_t>{5}));
  const size_t layer_token_bytes = kHkv * (kDk + kDv) * sizeof(float);  // one layer, one token, f32
  const int64_t sizes[] = {7, 8, 1, 3, 8, 5, 1, 1, 2, 8};
  int64_t max_window_blocks = 0;
  for (int i = 0; paged.length(0) < 10 * W; ++i) {
    const int64_t n = std::min<int64_t>(sizes[i % 10], 10 * W - paged.length(0));
    StepBatch b;
    append_rows(paged, 0, tokens_range(static_cast<int32_t>(paged.length(0)) + 3, n), &b);
    const StepOut want = dense.step(b);
    ASSERT_LT(nmse(run_step(paged, b, kHq, kParams), want), 1e-10) << "length " << paged.length(0);
    ASSERT_LT(nmse(run_step(ring, b, kHq, kParams), want), 1e-10) << "length " << paged.length(0);
    const int64_t len = paged.length(0);
    // Full group: every position. Window group: at most the blocks spanning W - 1 positions.
    EXPECT_EQ(paged.stats(1).used, (len + bs - 1) / bs);
    EXPECT_LE(paged.stats(0).used, (W - 1 + bs - 1) / bs + 1) << "length " << len;
    max_window_blocks = std::max(max_window_blocks, paged.stats(0).used);
    EXPECT_EQ(paged.bytes_used(), paged.bytes_used(0) + paged.bytes_used(1));
    EXPECT_EQ(paged.bytes_used(0), static_cast<size_t>(paged.stats(0).used) * paged.block_bytes(0));
    EXPECT_EQ(paged.block_bytes(0), 5 * bs * layer_token_bytes);
    // Reference: the full layer holds len positions, each window layer at most W + M - 1.
    EXPECT_LE(ring.bytes_used(), (static_cast<size_t>(len) + 5 * static_cast<size_t>(std::min(len, W + M - 1))) *
                                     layer_token_bytes);
    EXPECT_EQ(ring.bytes_used() >= static_cast<size_t>(len) * layer_token_bytes, true);
  }
  EXPECT_EQ(paged.length(0), 160);
  EXPECT_LE(max_window_blocks, 5);
  // At 160 tokens the window group holds 5 of the 40 blocks a full-attention layer would.
  EXPECT_LT(paged.bytes_used(0) * 4, static_cast<size_t>(40) * paged.block_bytes(0));
}

// Rewind: below the floor refused and nothing changes; at or above it equals a fresh run.
TEST(Windows, RewindFloorRefusedBelowFreshAbove) {
  constexpr int64_t bs = 4;
  const CacheSpec spec = mixed(7, 16);
  for (int variant = 0; variant < 2; ++variant)  // 0: paged, 1: reference with rings
    for (int64_t keep : {-1, 103, 0}) {            // -1: below the floor; 0: at the floor
      std::unique_ptr<KVCache> c;
      if (variant == 0)
        c = std::make_unique<PagedCache>(spec, opts(256, bs));
      else
        c = std::make_unique<SequenceReferenceCache>(spec, opts(0, 16, 8));
      c->add_sequence(0);
      for (int i = 0; i < 13; ++i) {  // 13 x 8 = 104 tokens, token of position p is p + 1
        StepBatch b;
        append_rows(*c, 0, tokens_range(static_cast<int32_t>(c->length(0)) + 1, 8), &b);
        run_step(*c, b, kHq, kParams);
      }
      const int64_t floor = c->rewind_floor(0);
      // Length 104. Paged: the window group (7) released blocks of positions < 96 (its next
      // query sees 98..), so the floor is 96 + 6 = 102; the chunk group (16) keeps 96.., floor
      // 96. Reference: the ring of 7 + 8 - 1 = 14 holds 90..103 -> 96; the chunk tail 96.. -> 96.
      EXPECT_EQ(floor, variant == 0 ? 102 : 96) << c->name();
      if (keep < 0) {
        EXPECT_THROW(c->rewind(0, floor - 1), Error) << c->name();
        EXPECT_EQ(c->length(0), 104);
        keep = 104;  // the refused rewind changed nothing: the cache continues exactly
      } else if (keep == 0) {
        keep = floor;
      }
      c->rewind(0, keep);
      StepBatch more;
      append_rows(*c, 0, tokens_range(900, 8), &more);
      const StepOut got = run_step(*c, more, kHq, kParams);
      Dense fresh(spec);
      StepBatch pre;
      for (int32_t p = 0; p < keep; ++p) pre.rows.push_back({0, p, p + 1});
      fresh.step(pre);
      EXPECT_LT(nmse(got, fresh.step(more)), 1e-10) << c->name() << " keep " << keep;
    }
  // Window only (no chunk layer): floor = released positions + W - 1.
  const CacheSpec wspec = small_spec(2, kHkv, kDk, kDv, {{AttnKind::Window, 7}, {AttnKind::Full, 0}});
  PagedCache p(wspec, opts(256, bs));
  p.add_sequence(0);
  StepBatch b;
  append_rows(p, 0, tokens_range(1, 50), &b);
  run_step(p, b, kHq, kParams);
  // Length 50: window sees 44.. -> blocks below 44 (11 blocks) released -> floor 44 + 6 = 50.
  EXPECT_EQ(p.rewind_floor(0), 50);
  EXPECT_THROW(p.rewind(0, 49), Error);
  const auto t0 = p.block_table(0, 0);
  EXPECT_EQ(std::count(t0.begin(), t0.end(), -1), 11);
}

// Prefix reuse with window layers: a new sequence attaches the full group's blocks and only the
// window group's blocks its continuation can see; when cached blocks were evicted the reuse is
// shorter; either way the outputs equal a fresh run.
TEST(Windows, PrefixReuseWithWindowLayers) {
  constexpr int64_t bs = 4;
  const CacheSpec spec = small_spec(2, kHkv, kDk, kDv, {{AttnKind::Window, 7}, {AttnKind::Full, 0}});
  const std::vector<int32_t> prompt = tokens_range(10, 64);
  for (bool evict : {false, true}) {
    PagedCache p(spec, opts(20 * bs, bs));  // 20 blocks per group
    p.add_sequence(0);
    StepBatch a;
    append_rows(p, 0, std::vector<int32_t>(prompt.begin(), prompt.begin() + 60), &a);
    run_step(p, a, kHq, kParams);
    p.clear(0);  // 15 full blocks per group become cached
    EXPECT_EQ(p.stats(1).cached, 15);
    EXPECT_EQ(p.stats(0).cached, 15);
    if (evict) {
      // Another prompt of 36 tokens: the full group has 5 free blocks, so it evicts 4 cached
      // ones, the tail first (blocks 14, 13, 12, 11 of the first prompt).
      p.add_sequence(2);
      StepBatch c;
      append_rows(p, 2, tokens_range(5000, 36), &c);
      run_step(p, c, kHq, kParams);
    }
    p.add_sequence(1);
    const int64_t reused = p.reuse_prefix(1, prompt);
    // No eviction: 15 blocks (60 tokens) of the 63 reusable. Eviction: blocks 0..10 remain in
    // the full group -> 44 tokens (the window group still caches blocks 9 and 10 it needs).
    EXPECT_EQ(reused, evict ? 44 : 60);
    if (evict) p.clear(2);  // room for the rest of the prompt
    // The window group attached only blocks at or after the first position position `reused` sees.
    const auto wt = p.block_table(1, 0);
    ASSERT_EQ(static_cast<int64_t>(wt.size()), reused / bs);
    for (size_t bi = 0; bi < wt.size(); ++bi)
      EXPECT_EQ(wt[bi] < 0, static_cast<int64_t>(bi + 1) * bs <= reused - 7 + 1) << "block " << bi;
    // Window 7: released positions below ((reused - 6) / 4) * 4; the floor adds 6 to that.
    EXPECT_EQ(p.rewind_floor(1), ((reused - 6) / bs) * bs + 6);
    StepBatch rest;
    append_rows(p, 1, std::vector<int32_t>(prompt.begin() + reused, prompt.end()), &rest);
    Dense fresh(spec);
    StepBatch pre;
    for (int64_t i = 0; i < reused; ++i) pre.rows.push_back({1, static_cast<int32_t>(i), prompt[static_cast<size_t>(i)]});
    if (!pre.rows.empty()) fresh.step(pre);
    EXPECT_LT(nmse(run_step(p, rest, kHq, kParams), fresh.step(rest)), 1e-10) << "evict " << evict;
  }
}

// A capacity failure in a multi-group cache changes nothing in any group.
TEST(Windows, CapacityFailureChangesNoGroup) {
  const CacheSpec spec = small_spec(2, kHkv, kDk, kDv, {{AttnKind::Window, 5}, {AttnKind::Full, 0}});
  PagedCache p(spec, opts(8 * 4, 4));  // 8 blocks per group
  p.add_sequence(0);
  StepBatch a;
  append_rows(p, 0, tokens_range(1, 30), &a);
  run_step(p, a, kHq, kParams);
  const BlockStats s0 = p.stats(0), s1 = p.stats(1);
  const auto t0 = p.block_table(0, 0), t1 = p.block_table(0, 1);
  StepBatch b;
  append_rows(p, 0, tokens_range(100, 8), &b);  // the full group needs 2 more blocks, has 0 free
  EXPECT_FALSE(p.can_extend(0, 8));
  try {
    p.prepare(b);
    FAIL() << "expected a capacity error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Capacity);
  }
  EXPECT_EQ(p.stats(0).used, s0.used);
  EXPECT_EQ(p.stats(1).used, s1.used);
  EXPECT_EQ(p.stats(0).free, s0.free);
  EXPECT_EQ(p.block_table(0, 0), t0);
  EXPECT_EQ(p.block_table(0, 1), t1);
  EXPECT_EQ(p.length(0), 30);
  EXPECT_EQ(p.token_capacity(), 32);
}
