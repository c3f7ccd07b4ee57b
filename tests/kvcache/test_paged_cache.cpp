// PagedCache against SequenceReferenceCache: single and batched ragged steps, fork with
// copy-on-write, rewind, prefix reuse, LRU eviction, capacity failures, cache dtypes, SIMD
// levels and threads.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/cpu.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "kv_test_util.h"
#include "kvcache/kv_common.h"
#include "kvcache/kv_record.h"
#include "kvcache/paged_cache.h"
#include "kvcache/prefix_index.h"
#include "kvcache/reference_cache.h"

using namespace ptn;
using namespace kvt;

namespace {

constexpr int64_t kHq = 4;  // GQA 2 over 2 kv heads

CacheOptions opts(int64_t capacity_tokens, int64_t block_size = 16, DType dt = DType::F32) {
  CacheOptions o;
  o.capacity_tokens = capacity_tokens;
  o.block_size = block_size;
  o.dtype = dt;
  return o;
}

// 3 layers, 2 kv heads, Dk 24 / Dv 40 (sizes that leave SIMD tails), one windowed layer.
CacheSpec spec3() { return small_spec(3, 2, 24, 40, {{AttnKind::Full, 0}, {AttnKind::Window, 9}, {AttnKind::Full, 0}}); }

struct Pair {
  Pair(const CacheSpec& spec, const CacheOptions& o, ThreadPool* pool = nullptr)
      : paged(spec, o, pool), ref(spec, CacheOptions{}) {}
  void add(SeqId s) {
    paged.add_sequence(s);
    ref.add_sequence(s);
  }
  // Runs the same step on both and returns the NMSE of paged vs reference.
  double step(const StepBatch& b, AttentionParams p = AttentionParams{0.2f, 0.0f}) {
    return nmse(run_step(paged, b, kHq, p), run_step(ref, b, kHq, p));
  }
  PagedCache paged;
  SequenceReferenceCache ref;
};

}  // namespace

TEST(PagedCache, OneSequencePrefillChunksThenDecode) {
  Pair c(spec3(), opts(1024));
  c.add(0);
  int32_t tok = 1;
  for (int64_t n : {37, 16, 5, 1, 1, 1, 11, 1}) {
    StepBatch b;
    append_rows(c.paged, 0, tokens_range(tok, n), &b);
    tok += static_cast<int32_t>(n);
    EXPECT_LT(c.step(b), 1e-10) << "at length " << c.paged.length(0);
  }
  EXPECT_EQ(c.paged.length(0), 73);
  // Two layer groups: the full layers 0 and 2 (group 0) and the window-9 layer 1 (group 1).
  ASSERT_EQ(c.paged.n_groups(), 2);
  EXPECT_EQ(c.paged.group_layers(0), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(c.paged.group_of_layer(1), 1);
  EXPECT_EQ(c.paged.stats(0).used, 5);  // ceil(73 / 16)
  // The window group holds only block 4 (positions 64..72): the next query sees 65..73.
  EXPECT_EQ(c.paged.stats(1).used, 1);
  EXPECT_EQ(c.paged.stats().used, 6);
  EXPECT_EQ(c.paged.bytes_used(), 5 * c.paged.block_bytes(0) + c.paged.block_bytes(1));
  // 16 tokens x 2 heads x (24 + 40) x 4 bytes, per layer
  EXPECT_EQ(c.paged.block_bytes(0), 16u * 2 * 2 * 64 * 4);
  EXPECT_EQ(c.paged.block_bytes(1), 16u * 1 * 2 * 64 * 4);
  EXPECT_EQ(c.paged.block_bytes(), 16u * 3 * 2 * 64 * 4);
}

TEST(PagedCache, BatchedRaggedSequencesInterleaved) {
  Pair c(spec3(), opts(2048, 8));
  for (SeqId s : {0, 1, 2, 5}) c.add(s);
  // Step 1: ragged prefills; rows of different sequences interleaved.
  StepBatch b1;
  const std::vector<std::pair<SeqId, int64_t>> lens = {{0, 3}, {1, 17}, {2, 1}, {5, 9}};
  for (int64_t i = 0; i < 17; ++i)
    for (auto [s, n] : lens)
      if (i < n) b1.rows.push_back({s, static_cast<int32_t>(i), static_cast<int32_t>(s * 100 + i)});
  EXPECT_LT(c.step(b1), 1e-10);
  // Then mixed steps: some sequences prefill a chunk while others decode.
  for (int round = 0; round < 12; ++round) {
    StepBatch b;
    for (SeqId s : {5, 0, 2, 1}) {
      if ((round + s) % 3 == 0) continue;  // not every sequence in every step
      const int64_t n = (s == 2 && round % 4 == 1) ? 7 : 1;
      append_rows(c.paged, s, tokens_range(1000 + round * 10 + s, n), &b);
    }
    EXPECT_LT(c.step(b), 1e-10) << "round " << round;
  }
  for (SeqId s : {0, 1, 2, 5}) EXPECT_EQ(c.paged.length(s), c.ref.length(s));
}

TEST(PagedCache, ForkSharesBlocksAndCopiesOnWrite) {
  Pair c(spec3(), opts(1024));
  c.add(0);
  StepBatch b;
  append_rows(c.paged, 0, tokens_range(1, 40), &b);  // 2 full blocks + 8 tokens
  EXPECT_LT(c.step(b), 1e-10);
  c.paged.fork(0, 1);
  c.ref.fork(0, 1);
  BlockStats st = c.paged.stats(0);
  EXPECT_EQ(st.used, 3);
  EXPECT_EQ(st.shared, 3);
  EXPECT_EQ(c.paged.block_table(0), c.paged.block_table(1));
  // Diverge: both sequences append different tokens in one step.
  StepBatch d;
  append_rows(c.paged, 0, {500, 501}, &d);
  append_rows(c.paged, 1, {900}, &d);
  EXPECT_LT(c.step(d), 1e-10);
  st = c.paged.stats(0);
  // Both copied the shared partial block (it was shared when the step was prepared); the
  // original was released at commit. The two full blocks stay shared.
  EXPECT_EQ(st.used, 4);
  EXPECT_EQ(st.shared, 2);
  const auto t0 = c.paged.block_table(0), t1 = c.paged.block_table(1);
  EXPECT_EQ(t0[0], t1[0]);
  EXPECT_EQ(t0[1], t1[1]);
  EXPECT_NE(t0[2], t1[2]);
  for (int i = 0; i < 20; ++i) {
    StepBatch s;
    append_rows(c.paged, 0, {600 + i}, &s);
    append_rows(c.paged, 1, {700 + 2 * i}, &s);
    EXPECT_LT(c.step(s), 1e-10);
  }
  // Each branch equals a fresh single-sequence run of its own history.
  for (SeqId s : {0, 1}) {
    SequenceReferenceCache fresh(spec3(), CacheOptions{});
    fresh.add_sequence(0);
    std::vector<int32_t> hist = tokens_range(1, 40);
    if (s == 0) {
      hist.push_back(500), hist.push_back(501);
      for (int i = 0; i < 20; ++i) hist.push_back(600 + i);
    } else {
      hist.push_back(900);
      for (int i = 0; i < 20; ++i) hist.push_back(700 + 2 * i);
    }
    StepBatch all;
    append_rows(fresh, 0, std::vector<int32_t>(hist.begin(), hist.end() - 1), &all);
    run_step(fresh, all, kHq, AttentionParams{0.2f, 0.0f});
    StepBatch last{{{0, static_cast<int32_t>(hist.size() - 1), hist.back()}}};
    StepBatch last_p{{{s, static_cast<int32_t>(hist.size() - 1), hist.back()}}};
    c.paged.rewind(s, static_cast<int64_t>(hist.size()) - 1);
    EXPECT_LT(nmse(run_step(c.paged, last_p, kHq, AttentionParams{0.2f, 0.0f}),
                   run_step(fresh, last, kHq, AttentionParams{0.2f, 0.0f})),
              1e-10)
        << "branch " << s;
  }
  c.paged.clear(1);
  EXPECT_EQ(c.paged.stats(0).shared, 0);
}

TEST(PagedCache, RewindThenContinueEqualsFreshRun) {
  // Window 64 (> 50 tokens): the window group releases nothing, every rewind is allowed.
  // Window 9: at length 50 the window group released positions < 32 (2 blocks), so lengths
  // below rewind_floor 40 (40 - 9 + 1 = 32) are refused and change nothing.
  for (int64_t window : {64, 9})
  for (int64_t keep : {21, 32, 0, 49}) {
    const CacheSpec spec =
        small_spec(3, 2, 24, 40, {{AttnKind::Full, 0}, {AttnKind::Window, window}, {AttnKind::Full, 0}});
    PagedCache p(spec, opts(512));
    p.add_sequence(0);
    StepBatch b;
    append_rows(p, 0, tokens_range(1, 50), &b);
    run_step(p, b, kHq, AttentionParams{});
    EXPECT_EQ(p.rewind_floor(0), window == 64 ? 0 : 40);
    if (keep < p.rewind_floor(0)) {
      const BlockStats before = p.stats();
      const auto t1 = p.block_table(0, 1);
      EXPECT_THROW(p.rewind(0, keep), Error);
      EXPECT_EQ(p.length(0), 50);
      EXPECT_EQ(p.block_table(0, 1), t1);
      EXPECT_EQ(p.stats().used, before.used);
      continue;
    }
    p.rewind(0, keep);
    EXPECT_EQ(p.length(0), keep);
    EXPECT_EQ(p.stats(0).used, (keep + 15) / 16);
    StepBatch more;
    append_rows(p, 0, tokens_range(300, 15), &more);
    const auto got = run_step(p, more, kHq, AttentionParams{});

    SequenceReferenceCache fresh(spec, CacheOptions{});
    fresh.add_sequence(0);
    if (keep > 0) {
      StepBatch pre;
      append_rows(fresh, 0, tokens_range(1, keep), &pre);
      run_step(fresh, pre, kHq, AttentionParams{});
    }
    EXPECT_LT(nmse(got, run_step(fresh, more, kHq, AttentionParams{})), 1e-10) << "window " << window << " keep " << keep;

    // The original prefix blocks were not overwritten by the new tokens (an indexed block that
    // the rewind made partial is copied before it is written): a new sequence reusing the
    // original prompt computes what a fresh run computes.
    p.add_sequence(1);
    const int64_t reused = p.reuse_prefix(1, tokens_range(1, 50));
    EXPECT_EQ(reused, 48) << "window " << window << " keep " << keep;
    StepBatch rest;
    append_rows(p, 1, tokens_range(1 + static_cast<int32_t>(reused), 50 - reused), &rest);
    SequenceReferenceCache orig(spec, CacheOptions{});
    orig.add_sequence(1);
    StepBatch pre;
    append_rows(orig, 1, tokens_range(1, reused), &pre);
    run_step(orig, pre, kHq, AttentionParams{});
    EXPECT_LT(nmse(run_step(p, rest, kHq, AttentionParams{}), run_step(orig, rest, kHq, AttentionParams{})), 1e-10)
        << "window " << window << " keep " << keep;
  }
}

TEST(PagedCache, PrefixReuseAllocatesOnlyNewBlocks) {
  const auto prompt_a = tokens_range(1, 53);  // 3 full blocks + 5
  std::vector<int32_t> prompt_b(prompt_a.begin(), prompt_a.begin() + 48);
  for (int32_t t : tokens_range(800, 10)) prompt_b.push_back(t);

  PagedCache p(spec3(), opts(512));
  p.add_sequence(0);
  StepBatch a;
  append_rows(p, 0, prompt_a, &a);
  run_step(p, a, kHq, AttentionParams{});
  EXPECT_EQ(p.stats(0).indexed, 3);
  EXPECT_EQ(p.stats(0).used, 4);

  p.add_sequence(1);
  EXPECT_EQ(p.reuse_prefix(1, prompt_b), 48);
  EXPECT_EQ(p.length(1), 48);
  EXPECT_EQ(p.stats(0).used, 4);    // nothing allocated yet
  EXPECT_EQ(p.stats(0).shared, 3);  // the prefix blocks
  StepBatch b;
  append_rows(p, 1, std::vector<int32_t>(prompt_b.begin() + 48, prompt_b.end()), &b);
  const auto with_reuse = run_step(p, b, kHq, AttentionParams{});
  EXPECT_EQ(p.stats(0).used, 5);  // one new block for positions 48..57

  // Same outputs as computing the whole prompt without reuse.
  SequenceReferenceCache fresh(spec3(), CacheOptions{});
  fresh.add_sequence(1);
  StepBatch pre;
  append_rows(fresh, 1, std::vector<int32_t>(prompt_b.begin(), prompt_b.begin() + 48), &pre);
  run_step(fresh, pre, kHq, AttentionParams{});
  EXPECT_LT(nmse(with_reuse, run_step(fresh, b, kHq, AttentionParams{})), 1e-10);

  // At most tokens.size() - 1 tokens are reused, whole blocks only.
  p.add_sequence(2);
  EXPECT_EQ(p.reuse_prefix(2, std::vector<int32_t>(prompt_a.begin(), prompt_a.begin() + 48)), 32);
  p.add_sequence(3);
  EXPECT_EQ(p.reuse_prefix(3, std::vector<int32_t>(prompt_a.begin(), prompt_a.begin() + 49)), 48);
  p.add_sequence(4);
  std::vector<int32_t> other = prompt_a;
  other[20] = 9999;  // differs in block 1: only block 0 matches
  EXPECT_EQ(p.reuse_prefix(4, other), 16);
  EXPECT_THROW(p.reuse_prefix(4, other), Error);  // not empty any more
  // Different extra keys never share.
  p.add_sequence(6);
  p.set_prefix_keys(6, {42});
  EXPECT_EQ(p.reuse_prefix(6, prompt_a), 0);

  // Blocks of a cleared sequence stay reusable while nothing needs them.
  for (SeqId s : {0, 1, 2, 3, 4}) p.clear(s);
  EXPECT_EQ(p.stats(0).used, 0);
  EXPECT_EQ(p.stats(0).cached, 3);  // A's 3 full blocks; the partial tails became free
  EXPECT_EQ(p.stats(0).free, p.stats(0).total - 3);
  p.add_sequence(7);
  EXPECT_EQ(p.reuse_prefix(7, prompt_a), 48);
  EXPECT_EQ(p.stats(0).cached, 0);
  EXPECT_EQ(p.stats(0).used, 3);
}

TEST(PagedCache, PrefixCachingOffSharesNothing) {
  CacheOptions o = opts(512);
  o.prefix_caching = false;
  PagedCache p(spec3(), o);
  p.add_sequence(0);
  StepBatch a;
  append_rows(p, 0, tokens_range(1, 40), &a);
  run_step(p, a, kHq, AttentionParams{});
  EXPECT_EQ(p.stats(0).indexed, 0);
  p.add_sequence(1);
  EXPECT_EQ(p.reuse_prefix(1, tokens_range(1, 40)), 0);
  p.clear(0);
  EXPECT_EQ(p.stats(0).cached, 0);
  EXPECT_EQ(p.stats(0).free, p.stats(0).total);
}

TEST(PagedCache, EvictsCachedBlocksInLruOrder) {
  // 8 blocks of 4 tokens.
  PagedCache p(spec3(), opts(32, 4));
  const auto A = tokens_range(1, 9), B = tokens_range(100, 9), C = tokens_range(200, 9);
  for (auto [s, toks] : {std::pair{0, A}, std::pair{1, B}, std::pair{2, C}}) {
    p.add_sequence(s);
    StepBatch b;
    append_rows(p, s, std::vector<int32_t>(toks.begin(), toks.end() - 1), &b);  // 8 tokens: 2 full blocks
    run_step(p, b, kHq, AttentionParams{});
  }
  // Release A, then C, then B: LRU order A1 A0 C1 C0 B1 B0 (tails before heads).
  p.clear(0);
  p.clear(2);
  p.clear(1);
  EXPECT_EQ(p.stats(0).cached, 6);
  EXPECT_EQ(p.stats(0).free, 2);
  // A sequence needing 5 blocks takes the 2 free ones and evicts A1, A0, C1.
  p.add_sequence(3);
  StepBatch big;
  append_rows(p, 3, tokens_range(5000, 20), &big);
  run_step(p, big, kHq, AttentionParams{});
  EXPECT_EQ(p.stats(0).cached, 3);
  p.add_sequence(10);
  p.add_sequence(11);
  p.add_sequence(12);
  EXPECT_EQ(p.reuse_prefix(10, A), 0);  // evicted
  EXPECT_EQ(p.reuse_prefix(11, C), 4);  // head survived, tail evicted
  EXPECT_EQ(p.reuse_prefix(12, B), 8);  // most recently released: intact
}

TEST(PagedCache, StepBeyondCapacityFailsAndChangesNothing) {
  Pair c(spec3(), opts(64, 16));  // 4 blocks
  c.add(0);
  c.add(1);
  StepBatch b;
  append_rows(c.paged, 0, tokens_range(1, 40), &b);  // 3 blocks
  append_rows(c.paged, 1, tokens_range(50, 5), &b);  // 1 block
  EXPECT_LT(c.step(b), 1e-10);
  c.paged.fork(0, 2);
  c.ref.fork(0, 2);
  const BlockStats before = c.paged.stats(0);
  const size_t used = c.paged.bytes_used();
  EXPECT_EQ(before.free + before.cached, 0);
  EXPECT_FALSE(c.paged.can_extend(2, 1));  // would copy the shared partial block
  EXPECT_TRUE(c.paged.can_extend(1, 11));  // fits its own partial block
  StepBatch over;
  append_rows(c.paged, 1, {7}, &over);  // fits in place...
  append_rows(c.paged, 2, {8}, &over);  // ...but this needs a copy-on-write block
  try {
    c.paged.prepare(over);
    FAIL() << "expected Capacity";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Capacity);
    EXPECT_NE(std::string(e.what()).find("blocks"), std::string::npos) << e.what();
  }
  const BlockStats after = c.paged.stats(0);
  EXPECT_EQ(after.used, before.used);
  EXPECT_EQ(after.shared, before.shared);
  EXPECT_EQ(after.free, before.free);
  EXPECT_EQ(c.paged.bytes_used(), used);
  for (SeqId s : {0, 1, 2}) EXPECT_EQ(c.paged.length(s), c.ref.length(s));
  EXPECT_EQ(c.paged.block_table(0), c.paged.block_table(2));
  // What fits still works and matches the reference.
  StepBatch ok;
  append_rows(c.paged, 1, {7, 8, 9}, &ok);
  EXPECT_LT(c.step(ok), 1e-10);
  c.paged.clear(0);  // now seq 2 holds its blocks alone and can grow in place
  c.ref.clear(0);
  StepBatch ok2;
  append_rows(c.paged, 2, {8}, &ok2);
  EXPECT_LT(c.step(ok2), 1e-10);
}

TEST(PagedCache, RollbackReturnsBlocks) {
  Pair c(spec3(), opts(256, 8));
  c.add(0);
  StepBatch b;
  append_rows(c.paged, 0, tokens_range(1, 12), &b);
  EXPECT_LT(c.step(b), 1e-10);
  c.paged.fork(0, 1);
  c.ref.fork(0, 1);
  const BlockStats before = c.paged.stats(0);
  {
    StepBatch s;
    append_rows(c.paged, 1, tokens_range(70, 30), &s);
    auto txn = c.paged.prepare(s);
    EXPECT_GT(c.paged.stats(0).used, before.used);  // the copy and new blocks are held by the step
  }  // destroyed uncommitted: rolled back
  const BlockStats after = c.paged.stats(0);
  EXPECT_EQ(after.used, before.used);
  EXPECT_EQ(after.shared, before.shared);
  EXPECT_EQ(after.free, before.free);
  StepBatch s;
  append_rows(c.paged, 1, tokens_range(80, 3), &s);
  append_rows(c.paged, 0, tokens_range(90, 2), &s);
  EXPECT_LT(c.step(s), 1e-10);
}

TEST(PagedCache, ReleasesBlocksOutOfEveryWindow) {
  // Every layer windowed or chunked: blocks below the first visible position are released,
  // so 100+ tokens run in pools (one per layer group) of 16 blocks of 4 tokens.
  const CacheSpec spec = small_spec(2, 2, 16, 16, {{AttnKind::Window, 6}, {AttnKind::Chunk, 8}});
  Pair c(spec, opts(64, 4));
  c.add(0);
  StepBatch pre;
  append_rows(c.paged, 0, tokens_range(1, 10), &pre);
  EXPECT_LT(c.step(pre), 1e-10);
  for (int32_t i = 0; i < 90; ++i) {
    StepBatch d;
    append_rows(c.paged, 0, {100 + i}, &d);
    ASSERT_LT(c.step(d), 1e-10) << "length " << c.paged.length(0);
    EXPECT_LE(c.paged.stats().used, 4) << "length " << c.paged.length(0);
  }
  EXPECT_EQ(c.paged.length(0), 100);
  // Length 100: window 6 starts at 95, chunk 8 at 96 -> blocks of positions < 92 released.
  const auto table = c.paged.block_table(0);
  EXPECT_EQ(std::count(table.begin(), table.end(), -1), 23);
  EXPECT_THROW(c.paged.rewind(0, 90), Error);  // would need position 85
  // Floor: the first length whose window (6) and chunk (8) starts are both >= 92 is 97.
  EXPECT_EQ(c.paged.rewind_floor(0), 97);
  EXPECT_THROW(c.paged.rewind(0, 96), Error);
  EXPECT_EQ(c.ref.rewind_floor(0), 0);
  c.paged.rewind(0, 99);
  c.ref.rewind(0, 99);
  c.paged.fork(0, 1);
  c.ref.fork(0, 1);
  for (int32_t i = 0; i < 12; ++i) {
    StepBatch d;
    append_rows(c.paged, 0, {500 + i}, &d);
    append_rows(c.paged, 1, {700 + i}, &d);
    ASSERT_LT(c.step(d), 1e-10) << "step " << i;
  }
  c.paged.clear(0);
  c.paged.clear(1);
  EXPECT_EQ(c.paged.stats().used, 0);
  for (int g = 0; g < 2; ++g) EXPECT_EQ(c.paged.stats(g).free + c.paged.stats(g).cached, 16) << "group " << g;
}

TEST(PrefixHash, ChainsParentsTokensAndExtraKeys) {
  const std::vector<int32_t> a = {1, 2, 3, 4}, b = {1, 2, 4, 3};
  const uint64_t root = kv::prefix_root();
  EXPECT_EQ(kv::hash_block(root, a.data(), 4), kv::hash_block(root, a.data(), 4));
  EXPECT_NE(kv::hash_block(root, a.data(), 4), kv::hash_block(root, b.data(), 4));   // order matters
  EXPECT_NE(kv::hash_block(root, a.data(), 4), kv::hash_block(root + 1, a.data(), 4));  // parent matters
  EXPECT_NE(kv::hash_block(root, a.data(), 3), kv::hash_block(root, a.data(), 4));
  EXPECT_NE(kv::prefix_root({}), kv::prefix_root({0}));
  EXPECT_NE(kv::prefix_root({1, 2}), kv::prefix_root({2, 1}));
  // The index compares parent and tokens, so a (forced) hash collision attaches nothing.
  kv::PrefixIndex idx;
  EXPECT_TRUE(idx.insert(77, root, a.data(), 4, 5));
  EXPECT_FALSE(idx.insert(77, root, b.data(), 4, 6));
  EXPECT_EQ(idx.find(77, root, a.data(), 4), 5);
  EXPECT_EQ(idx.find(77, root, b.data(), 4), -1);
  EXPECT_EQ(idx.find(77, root + 1, a.data(), 4), -1);
  EXPECT_EQ(idx.find(78, root, a.data(), 4), -1);
}

class PagedDtype : public ::testing::TestWithParam<DType> {};

TEST_P(PagedDtype, WithinNmse1e3OfF32) {
  const CacheSpec spec = small_spec(2, 2, 64, 32, {{AttnKind::Full, 0}, {AttnKind::Chunk, 16}});
  PagedCache p(spec, opts(1024, 16, GetParam()));
  SequenceReferenceCache r(spec, CacheOptions{});
  for (SeqId s : {0, 1}) {
    p.add_sequence(s);
    r.add_sequence(s);
  }
  StepBatch b;
  append_rows(p, 0, tokens_range(1, 45), &b);
  append_rows(p, 1, tokens_range(400, 20), &b);
  const AttentionParams params{0.125f, 0.0f};
  double worst = nmse(run_step(p, b, kHq, params), run_step(r, b, kHq, params));
  for (int i = 0; i < 10; ++i) {
    StepBatch d;
    append_rows(p, 0, {i}, &d);
    append_rows(p, 1, {i + 7}, &d);
    worst = std::max(worst, nmse(run_step(p, d, kHq, params), run_step(r, d, kHq, params)));
  }
  EXPECT_LT(worst, GetParam() == DType::Q4_0 ? 3e-2 : 1e-3) << dtype_name(GetParam());
  EXPECT_GT(worst, 0.0) << "a reduced-precision cache should not be bit-exact";
  // Storage per block shrinks with the dtype: 16 tokens x 2 layers x 2 heads x row bytes(64 + 32).
  const size_t rows = 16 * 2 * 2;
  const size_t want = GetParam() == DType::Q8_0   ? rows * (2 * 34 + 34)
                      : GetParam() == DType::Q4_0 ? rows * (2 * 18 + 18)
                                                  : rows * (64 + 32) * 2;
  EXPECT_EQ(p.block_bytes(), want);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PagedDtype, ::testing::Values(DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Every SIMD level and dtype gives the same result as the scalar definition.
TEST(PagedCache, SimdLevelsAgreeWithScalar) {
  const CacheSpec spec = small_spec(2, 2, 96, 32, {{AttnKind::Window, 20}});
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    std::vector<StepOut> outs;
    for (SimdLevel lvl : {SimdLevel::Scalar, SimdLevel::AVX2, SimdLevel::AVX2VNNI, SimdLevel::AVX512}) {
      if (lvl > detected_simd_level()) continue;
      set_simd_cap(lvl);
      PagedCache p(spec, opts(512, 16, dt));
      p.add_sequence(0);
      StepBatch b;
      append_rows(p, 0, tokens_range(3, 70), &b);
      outs.push_back(run_step(p, b, 6, AttentionParams{0.1f, 0.0f}));
    }
    set_simd_cap(SimdLevel::AVX512);
    for (size_t i = 1; i < outs.size(); ++i) EXPECT_LT(nmse(outs[i], outs[0]), 1e-10) << dtype_name(dt) << " level " << i;
  }
}

TEST(PagedCache, ThreadPoolSplitGivesSameResult) {
  ThreadPool two(2);
  Pair c(spec3(), opts(1024, 8), &two);
  for (SeqId s : {0, 1, 2}) c.add(s);
  StepBatch b;
  append_rows(c.paged, 0, tokens_range(1, 30), &b);
  append_rows(c.paged, 1, tokens_range(40, 3), &b);
  append_rows(c.paged, 2, tokens_range(50, 17), &b);
  EXPECT_LT(c.step(b), 1e-10);
  StepBatch d;
  for (SeqId s : {0, 1, 2}) append_rows(c.paged, s, {s}, &d);
  EXPECT_LT(c.step(d), 1e-10);
}

// Decoding one sequence on more threads than (row, kv head) pairs splits each span into shares
// that are merged; the result is the same.
TEST(PagedCache, LongSpanSplitOverThreadsGivesSameResult) {
  for (int threads : {3, 4, 8}) {
    ThreadPool pool(threads);
    Pair c(spec3(), opts(1024, 8), &pool);
    c.add(0);
    StepBatch b;
    append_rows(c.paged, 0, tokens_range(1, 300), &b);
    EXPECT_LT(c.step(b), 1e-10);
    for (int i = 0; i < 3; ++i) {
      StepBatch d;
      append_rows(c.paged, 0, {7 + i}, &d);  // 1 row x 2 kv heads: fewer items than threads
      EXPECT_LT(c.step(d), 1e-10) << threads << " threads";
    }
  }
}

// Attention sinks (gpt-oss): the paged cache's every way of splitting the work (query tiles in a
// prompt, one item per row and kv head when batching, shares merged when decoding one sequence
// on many threads) against the reference cache, at every cache dtype; a layer's spec decides
// whether sinks must be given.
TEST(PagedCache, SinksMatchTheReferenceCache) {
  CacheSpec spec = spec3();
  for (auto& l : spec.layers) l.sinks = true;
  const std::vector<float> sinks = {0.3f, -1.5f, 2.5f, 0.0f};  // one per query head (kHq)
  AttentionParams p{0.2f, 0.0f};
  p.sinks = sinks.data();
  {  // the sinks take a visible share: the same step without them differs
    SequenceReferenceCache with(spec, CacheOptions{}), without(spec3(), CacheOptions{});
    with.add_sequence(0);
    without.add_sequence(0);
    StepBatch b;
    append_rows(with, 0, tokens_range(1, 40), &b);
    EXPECT_GT(nmse(run_step(with, b, kHq, p), run_step(without, b, kHq, AttentionParams{0.2f, 0.0f})), 1e-3);
  }
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    Pair c(spec, opts(1024, 8), &pool);
    for (SeqId s : {0, 1}) c.add(s);
    StepBatch b;
    append_rows(c.paged, 0, tokens_range(1, 120), &b);
    append_rows(c.paged, 1, tokens_range(40, 5), &b);
    EXPECT_LT(c.step(b, p), 1e-10) << threads << " threads, prompt";
    for (int i = 0; i < 3; ++i) {
      StepBatch d;
      append_rows(c.paged, 0, {7 + i}, &d);
      EXPECT_LT(c.step(d, p), 1e-10) << threads << " threads, decode one";
      StepBatch e;
      for (SeqId s : {0, 1}) append_rows(c.paged, s, {s + 3}, &e);
      EXPECT_LT(c.step(e, p), 1e-10) << threads << " threads, decode two";
    }
  }
  for (DType dt : {DType::F16, DType::BF16, DType::Q8_0}) {
    CacheSpec s2 = small_spec(2, 2, 64, 64, {{AttnKind::Window, 20}});
    for (auto& l : s2.layers) l.sinks = true;
    PagedCache paged(s2, opts(512, 16, dt));
    SequenceReferenceCache ref(s2, CacheOptions{});
    paged.add_sequence(0);
    ref.add_sequence(0);
    StepBatch b;
    append_rows(paged, 0, tokens_range(3, 70), &b);
    EXPECT_LT(nmse(run_step(paged, b, kHq, p), run_step(ref, b, kHq, p)), 1e-3) << dtype_name(dt);
  }
  // Sinks where the spec has none, and none where it has them: refused, nothing attended.
  Pair plain(spec3(), opts(256, 8));
  plain.add(0);
  StepBatch b;
  append_rows(plain.paged, 0, tokens_range(1, 4), &b);
  EXPECT_THROW(run_step(plain.paged, b, kHq, p), Error);
  EXPECT_THROW(run_step(plain.ref, b, kHq, p), Error);
  Pair with(spec, opts(256, 8));
  with.add(0);
  EXPECT_THROW(run_step(with.paged, b, kHq, AttentionParams{0.2f, 0.0f}), Error);
  EXPECT_THROW(run_step(with.ref, b, kHq, AttentionParams{0.2f, 0.0f}), Error);
}

// DeepSeek's latent attention: V is the start of each K row (v_in_k). The paged cache keeps the
// K rows only and reads V from them; the reference cache stores V apart. Both must agree at every
// cache dtype, the blocks must be the K rows' size, and a saved block must restore into a cache of
// the same identity (and be refused by one that stores V apart).
namespace {
template <class F>
void expect_error_kv(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(PagedCache, VInKStoresKOnlyAndMatchesTheReferenceCache) {
  CacheSpec spec = small_spec(2, 1, 96, 64, {{AttnKind::Full, 0}, {AttnKind::Window, 11}});
  for (auto& l : spec.layers) l.v_in_k = true;
  AttentionParams p{0.2f, 0.0f};
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    SCOPED_TRACE(dtype_name(dt));
    PagedCache paged(spec, opts(512, 8, dt));
    SequenceReferenceCache ref(spec, CacheOptions{});
    for (SeqId s : {0, 1}) {
      paged.add_sequence(s);
      ref.add_sequence(s);
    }
    const double tol = dt == DType::F32 ? 1e-10 : dt == DType::Q4_0 ? 2e-2 : 1e-3;
    StepBatch b;
    append_rows(paged, 0, tokens_range(1, 37), &b);
    append_rows(paged, 1, tokens_range(5, 6), &b);
    EXPECT_LT(nmse(run_step(paged, b, kHq, p).per_layer[0], run_step(ref, b, kHq, p).per_layer[0]), tol);
    for (int i = 0; i < 3; ++i) {
      StepBatch d;
      for (SeqId s : {0, 1}) append_rows(paged, s, {9 + i}, &d);
      const StepOut a = run_step(paged, d, kHq, p), r = run_step(ref, d, kHq, p);
      for (size_t l = 0; l < a.per_layer.size(); ++l) EXPECT_LT(nmse(a.per_layer[l], r.per_layer[l]), tol) << "layer " << l;
    }
    // Each layer's block holds K rows only: 1 head x 8 tokens x the row bytes of 96 values.
    size_t k_only = 0;
    for (int g = 0; g < paged.n_groups(); ++g) k_only += paged.block_bytes(g);
    EXPECT_EQ(k_only, 2 * 8 * kv::kv_row_bytes(dt, 96));
  }
  // A saved block goes into another cache of this identity, and not into one that keeps V apart.
  PagedCache a(spec, opts(256, 8));
  a.add_sequence(0);
  StepBatch b;
  append_rows(a, 0, tokens_range(1, 17), &b);
  run_step(a, b, kHq, p);
  kv::KvRecord rec;
  rec.id = a.identity(42);
  rec.blocks.push_back(a.save_block(0, 1));
  const std::vector<uint8_t> bytes = kv::encode_record(rec);
  const kv::KvRecord back = kv::decode_record(bytes.data(), bytes.size(), "v_in_k record");
  EXPECT_TRUE(back.id.layers[0].v_in_k);
  EXPECT_EQ(back.blocks[0].data, rec.blocks[0].data);
  PagedCache c(spec, opts(256, 8));
  kv::check_identity(back.id, c.identity(42), "v_in_k record");
  EXPECT_TRUE(c.restore_block(back.blocks[0]));
  CacheSpec apart = spec;
  for (auto& l : apart.layers) l.v_in_k = false;
  PagedCache other(apart, opts(256, 8));
  expect_error_kv([&] { kv::check_identity(back.id, other.identity(42), "v_in_k record"); }, "V in K");
  // A spec whose V would be longer than K is refused.
  CacheSpec bad = spec;
  bad.layers[0].head_dim_v = 128;
  EXPECT_THROW(PagedCache(bad, opts(64, 8)), Error);
}
