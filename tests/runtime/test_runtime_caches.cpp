// The Executor with the runtime-supplied caches: the paged cache reproduces the reference
// cache (one sequence, batched ragged steps, fork, rewind, prefix reuse), a step that does not
// fit fails without changing anything, reduced-precision caches stay close to f32, and the
// CacheScope installs a cache only for its lifetime.
#include <gtest/gtest.h>

#include "kvcache/paged_cache.h"
#include "program_test_util.h"
#include "runtime/session.h"

namespace ptn {
namespace {

using namespace ptn::testing;
using Rows = std::vector<std::vector<float>>;

std::shared_ptr<const Program> stories() {
  static auto p = stories_program(64);
  return p;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Logits of the last row of a step, per sequence (LastPerSequence order = first appearance).
std::map<SeqId, std::vector<float>> step_logits(Executor& exec, const StepBatch& b) {
  int64_t n = 0;
  const float* l = exec.step(b, OutputRows::LastPerSequence, &n);
  std::vector<SeqId> order;
  for (const auto& r : b.rows)
    if (std::find(order.begin(), order.end(), r.seq) == order.end()) order.push_back(r.seq);
  EXPECT_EQ(n, static_cast<int64_t>(order.size()));
  std::map<SeqId, std::vector<float>> out;
  const int64_t V = exec.vocab_size();
  for (size_t i = 0; i < order.size(); ++i) out[order[i]].assign(l + i * V, l + (i + 1) * V);
  return out;
}

TEST(RuntimeCaches, PagedEqualsReferenceOneSequence) {
  auto p = stories();
  const auto prompt = some_tokens(20, 512, 1), decode = some_tokens(30, 512, 2);
  Rows ref = run_sequence(p, ExecMode::Optimized, "reference", DType::F32, prompt, decode);
  Rows paged = run_sequence(p, ExecMode::Optimized, "paged", DType::F32, prompt, decode);
  EXPECT_LT(nmse(paged, ref), 1e-10);
  // And the optimized executor with the paged cache against the reference executor + cache.
  Rows oracle = run_sequence(p, ExecMode::Reference, "reference", DType::F32, prompt, decode);
  EXPECT_LT(nmse(paged, oracle), 1e-8);
}

// Three sequences of different lengths, prefilled in one interleaved step, then decoded
// together (and once with only two of them): each equals its own run.
TEST(RuntimeCaches, BatchedRaggedStepsEqualSeparateRuns) {
  auto p = stories();
  const std::vector<std::vector<int32_t>> prompts = {some_tokens(7, 512, 3), some_tokens(3, 512, 4),
                                                     some_tokens(12, 512, 5)};
  const std::vector<std::vector<int32_t>> decodes = {some_tokens(6, 512, 6), some_tokens(6, 512, 7),
                                                     some_tokens(5, 512, 8)};
  Executor exec(p, ExecMode::Optimized, 64);
  auto cache = make_cache("paged", p->meta().cache_spec, cache_options(DType::F32, 256, 4));
  CacheScope scope(exec, *cache);
  for (SeqId s = 0; s < 3; ++s) cache->add_sequence(s);
  // Prefill: rows of the sequences interleaved (each sequence's own rows stay in order).
  StepBatch pre;
  size_t idx[3] = {0, 0, 0};
  for (bool more = true; more;) {
    more = false;
    for (SeqId s = 0; s < 3; ++s)
      if (idx[s] < prompts[s].size()) {
        pre.rows.push_back({s, static_cast<int32_t>(idx[s]), prompts[s][idx[s]]});
        ++idx[s];
        more = true;
      }
  }
  std::vector<Rows> got(3);
  for (auto& [s, l] : step_logits(exec, pre)) got[s].push_back(l);
  for (size_t d = 0; d < 6; ++d) {
    StepBatch b;
    for (SeqId s : {2, 0, 1}) {  // a different order than in the prefill
      if (d >= decodes[s].size()) continue;
      b.rows.push_back({s, static_cast<int32_t>(prompts[s].size() + d), decodes[s][d]});
    }
    for (auto& [s, l] : step_logits(exec, b)) got[s].push_back(l);
  }
  for (SeqId s = 0; s < 3; ++s) {
    EXPECT_EQ(cache->length(s), static_cast<int64_t>(prompts[s].size() + decodes[s].size()));
    Rows want = run_sequence(p, ExecMode::Optimized, "reference", DType::F32, prompts[s], decodes[s]);
    EXPECT_LT(nmse(got[s], want), 1e-10) << "sequence " << s;
    EXPECT_LT(max_abs_diff(got[s], want), 1e-3) << "sequence " << s;
  }
}

TEST(RuntimeCaches, ForkSharesBlocksAndDivergingSequencesMatchTheirRuns) {
  auto p = stories();
  const auto prompt = some_tokens(18, 512, 9);  // block 4: 4 full blocks + 2 tokens
  const auto da = some_tokens(8, 512, 10), db = some_tokens(8, 512, 11);
  Executor exec(p, ExecMode::Optimized, 64);
  auto cache = std::make_unique<PagedCache>(p->meta().cache_spec, cache_options(DType::F32, 256, 4));
  CacheScope scope(exec, *cache);
  cache->add_sequence(0);
  StepBatch pre;
  for (size_t i = 0; i < prompt.size(); ++i) pre.rows.push_back({0, static_cast<int32_t>(i), prompt[i]});
  auto first = step_logits(exec, pre);
  const int64_t used_before = cache->stats().used;
  cache->fork(0, 1);
  EXPECT_EQ(cache->stats().used, used_before) << "fork must not copy blocks";
  EXPECT_EQ(cache->stats().shared, used_before);
  EXPECT_EQ(cache->block_table(0), cache->block_table(1));
  Rows got_a{first[0]}, got_b{first[0]};
  for (size_t d = 0; d < da.size(); ++d) {
    StepBatch b;
    const int32_t pos = static_cast<int32_t>(prompt.size() + d);
    b.rows.push_back({0, pos, da[d]});
    b.rows.push_back({1, pos, db[d]});
    auto l = step_logits(exec, b);
    got_a.push_back(l[0]);
    got_b.push_back(l[1]);
  }
  // The full blocks of the prompt are still shared; the partial one was copied on write.
  const auto ta = cache->block_table(0), tb = cache->block_table(1);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(ta[i], tb[i]) << "block " << i;
  EXPECT_NE(ta[4], tb[4]);
  EXPECT_LT(nmse(got_a, run_sequence(p, ExecMode::Optimized, "reference", DType::F32, prompt, da)), 1e-10);
  EXPECT_LT(nmse(got_b, run_sequence(p, ExecMode::Optimized, "reference", DType::F32, prompt, db)), 1e-10);
}

TEST(RuntimeCaches, RewindThenContinueEqualsFreshRun) {
  auto p = stories();
  const auto prompt = some_tokens(10, 512, 12), first = some_tokens(12, 512, 13), second = some_tokens(9, 512, 14);
  for (const char* kind : {"paged", "reference"}) {
    Executor exec(p, ExecMode::Optimized, 64);
    auto cache = make_cache(kind, p->meta().cache_spec, cache_options(DType::F32, 256, 4));
    CacheScope scope(exec, *cache);
    cache->add_sequence(0);
    StepBatch pre;
    for (size_t i = 0; i < prompt.size(); ++i) pre.rows.push_back({0, static_cast<int32_t>(i), prompt[i]});
    step_logits(exec, pre);
    for (size_t d = 0; d < first.size(); ++d)
      step_logits(exec, StepBatch{{{0, static_cast<int32_t>(prompt.size() + d), first[d]}}});
    // Keep the prompt and 3 tokens of `first` (a position inside a block), then continue.
    const int64_t keep = static_cast<int64_t>(prompt.size()) + 3;
    cache->rewind(0, keep);
    EXPECT_EQ(cache->length(0), keep);
    Rows got;
    for (size_t d = 0; d < second.size(); ++d)
      got.push_back(step_logits(exec, StepBatch{{{0, static_cast<int32_t>(keep + static_cast<int64_t>(d)), second[d]}}})[0]);
    std::vector<int32_t> fresh_prompt = concat(prompt, {first[0], first[1], first[2], second[0]});
    std::vector<int32_t> fresh_decode(second.begin() + 1, second.end());
    Rows want = run_sequence(p, ExecMode::Optimized, "reference", DType::F32, fresh_prompt, fresh_decode);
    EXPECT_LT(nmse(got, want), 1e-10) << kind;
  }
}

TEST(RuntimeCaches, PrefixReuseAllocatesOnlyNewBlocks) {
  auto p = stories();
  const auto shared = some_tokens(12, 512, 15);  // 3 blocks of 4
  const auto a = concat(shared, some_tokens(3, 512, 16)), b = concat(shared, some_tokens(5, 512, 17));
  Executor exec(p, ExecMode::Optimized, 64);
  auto cache = std::make_unique<PagedCache>(p->meta().cache_spec, cache_options(DType::F32, 256, 4));
  CacheScope scope(exec, *cache);
  cache->add_sequence(0);
  StepBatch sa;
  for (size_t i = 0; i < a.size(); ++i) sa.rows.push_back({0, static_cast<int32_t>(i), a[i]});
  step_logits(exec, sa);
  const auto stats_a = cache->stats();
  EXPECT_EQ(stats_a.used, 4);  // 15 tokens
  cache->add_sequence(1);
  EXPECT_EQ(cache->reuse_prefix(1, b), 12);
  EXPECT_EQ(cache->stats().used, 4) << "reused blocks are shared, not copied";
  EXPECT_EQ(cache->stats().shared, 3);
  StepBatch sb;
  for (size_t i = 12; i < b.size(); ++i) sb.rows.push_back({1, static_cast<int32_t>(i), b[i]});
  auto got = step_logits(exec, sb)[1];
  EXPECT_EQ(cache->stats().used, 4 + 2) << "17 tokens = 3 reused + 2 new blocks";
  Rows want = run_sequence(p, ExecMode::Optimized, "reference", DType::F32, b, {});
  EXPECT_LT(nmse(Rows{got}, want), 1e-10);
  // A sequence whose prefix differs inside the second block reuses only the first.
  cache->add_sequence(2);
  auto c = shared;
  c[5] = (c[5] + 1) % 512;
  EXPECT_EQ(cache->reuse_prefix(2, c), 4);
}

TEST(RuntimeCaches, StepBeyondCapacityFailsAndChangesNothing) {
  auto p = stories();
  // 8 blocks of 4 tokens. Sequence 0 holds 10 tokens (3 blocks), sequence 1 holds 6 (2 blocks).
  Executor exec(p, ExecMode::Optimized, 64);
  auto cache = std::make_unique<PagedCache>(p->meta().cache_spec, cache_options(DType::F32, 32, 4));
  CacheScope scope(exec, *cache);
  const auto p0 = some_tokens(10, 512, 18), p1 = some_tokens(6, 512, 19);
  cache->add_sequence(0);
  cache->add_sequence(1);
  StepBatch pre;
  for (size_t i = 0; i < p0.size(); ++i) pre.rows.push_back({0, static_cast<int32_t>(i), p0[i]});
  for (size_t i = 0; i < p1.size(); ++i) pre.rows.push_back({1, static_cast<int32_t>(i), p1[i]});
  step_logits(exec, pre);
  const auto before = cache->stats();
  const auto t0 = cache->block_table(0), t1 = cache->block_table(1);
  // 3 blocks are free. 2 more tokens for sequence 0 fit its third block; 16 more for sequence 1
  // (22 tokens: 6 blocks) need 4 new blocks: the step must fail as a whole.
  const auto more0 = some_tokens(2, 512, 20), more1 = some_tokens(16, 512, 21);
  StepBatch big;
  for (size_t i = 0; i < more0.size(); ++i) big.rows.push_back({0, static_cast<int32_t>(10 + i), more0[i]});
  for (size_t i = 0; i < more1.size(); ++i) big.rows.push_back({1, static_cast<int32_t>(6 + i), more1[i]});
  EXPECT_EQ(before.free + before.cached, 3);
  EXPECT_TRUE(cache->can_extend(1, 14));
  EXPECT_FALSE(cache->can_extend(1, 16));
  try {
    int64_t n = 0;
    exec.step(big, OutputRows::LastPerSequence, &n);
    ADD_FAILURE() << "a step needing more blocks than free succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Capacity) << e.what();
    EXPECT_NE(std::string(e.what()).find("block"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache->length(0), 10);
  EXPECT_EQ(cache->length(1), 6);
  EXPECT_EQ(cache->block_table(0), t0);
  EXPECT_EQ(cache->block_table(1), t1);
  EXPECT_EQ(cache->stats().used, before.used);
  EXPECT_EQ(cache->stats().free + cache->stats().cached, before.free + before.cached);
  // Both sequences continue exactly as if the failed step never happened.
  auto l = step_logits(exec, StepBatch{{{0, 10, more0[0]}, {1, 6, more1[0]}}});
  Rows w0 = run_sequence(p, ExecMode::Optimized, "reference", DType::F32, concat(p0, {more0[0]}), {});
  Rows w1 = run_sequence(p, ExecMode::Optimized, "reference", DType::F32, concat(p1, {more1[0]}), {});
  EXPECT_LT(nmse(Rows{l[0]}, w0), 1e-10);
  EXPECT_LT(nmse(Rows{l[1]}, w1), 1e-10);
}

TEST(RuntimeCaches, BadRowsFailWithoutChangingTheCache) {
  auto p = stories();
  Executor exec(p, ExecMode::Optimized, 8);
  auto cache = make_cache("paged", p->meta().cache_spec, cache_options(DType::F32, 64, 4));
  CacheScope scope(exec, *cache);
  cache->add_sequence(0);
  int64_t n = 0;
  exec.step(StepBatch{{{0, 0, 1}, {0, 1, 5}}}, OutputRows::All, &n);
  EXPECT_EQ(n, 2);
  expect_error([&] { exec.step(StepBatch{{{0, 3, 7}}}, OutputRows::All, &n); }, ErrorKind::InvalidArgument, {});
  expect_error([&] { exec.step(StepBatch{{{0, 2, 512}}}, OutputRows::All, &n); }, ErrorKind::InvalidArgument,
               {"token id 512"});
  expect_error([&] { exec.step(StepBatch{{{9, 0, 1}}}, OutputRows::All, &n); }, ErrorKind::InvalidArgument, {});
  expect_error([&] { exec.step(StepBatch{}, OutputRows::All, &n); }, ErrorKind::InvalidArgument, {"rows"});
  EXPECT_EQ(cache->length(0), 2);
}

// f16 cache on stories260K: close to f32 and the same 50 greedy tokens.
TEST(RuntimeCaches, F16CacheCloseToF32OnStories) {
  auto p = stories();
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};  // <s> Once upon a time
  std::vector<float> l32, l16;
  auto g32 = greedy(p, ExecMode::Optimized, "paged", DType::F32, prompt, 50, &l32);
  auto g16 = greedy(p, ExecMode::Optimized, "paged", DType::F16, prompt, 50, &l16);
  EXPECT_EQ(g16, g32);
  Rows r32 = run_sequence(p, ExecMode::Optimized, "paged", DType::F32, prompt, g32);
  Rows r16 = run_sequence(p, ExecMode::Optimized, "paged", DType::F16, prompt, g32);
  EXPECT_LT(nmse(r16, r32), 1e-3);
  EXPECT_GT(nmse(r16, r32), 0.0) << "the f16 cache should round something";
  // q8_0 needs head dims that are multiples of 32; stories260K's are 8.
  CacheOptions co = cache_options(DType::Q8_0, 64);
  expect_error([&] { make_cache("paged", p->meta().cache_spec, co); }, ErrorKind::InvalidArgument, {"32"});
}

// q8_0 (and f16, bf16) caches on a random tiny Llama with head_dim 32 (q8_0 blocks are 32
// wide; stories260K's head_dim 8 cannot use them).
TEST(RuntimeCaches, Q8CacheCloseToF32OnTinyLlama) {
  auto p = random_program(tiny_llama_config(128, 4, 2, 32, 256, 2), 7, 32);
  const auto prompt = some_tokens(16, 256, 22);
  auto g32 = greedy(p, ExecMode::Optimized, "paged", DType::F32, prompt, 50);
  Rows r32 = run_sequence(p, ExecMode::Optimized, "paged", DType::F32, prompt, g32);
  for (DType dt : {DType::Q8_0, DType::F16, DType::BF16}) {
    Rows rq = run_sequence(p, ExecMode::Optimized, "paged", dt, prompt, g32);
    const double e = nmse(rq, r32);
    EXPECT_LT(e, 1e-3) << dtype_name(dt);
    EXPECT_GT(e, 0.0) << dtype_name(dt);
    if (dt == DType::Q8_0) {
      EXPECT_EQ(greedy(p, ExecMode::Optimized, "paged", dt, prompt, 50), g32);
    }
  }
}

TEST(RuntimeCaches, CacheScopeInstallsOnlyForItsLifetime) {
  auto p = stories();
  Executor exec(p, ExecMode::Optimized, 8);
  auto c1 = make_cache("paged", p->meta().cache_spec, cache_options(DType::F32, 64));
  auto c2 = make_cache("reference", p->meta().cache_spec, cache_options(DType::F32, 64));
  EXPECT_EQ(exec.installed_cache(), nullptr);
  int64_t n = 0;
  expect_error([&] { exec.step(StepBatch{{{0, 0, 1}}}, OutputRows::All, &n); }, ErrorKind::InvalidArgument,
               {"no KV cache"});
  {
    CacheScope s(exec, *c1);
    EXPECT_EQ(exec.installed_cache(), c1.get());
    expect_error([&] { CacheScope second(exec, *c2); }, ErrorKind::InvalidArgument, {"already installed"});
    EXPECT_EQ(exec.installed_cache(), c1.get()) << "a refused second scope must not uninstall the first";
  }
  EXPECT_EQ(exec.installed_cache(), nullptr);
  try {
    CacheScope s(exec, *c2);
    EXPECT_EQ(exec.installed_cache(), c2.get());
    throw std::runtime_error("leave the scope by an exception");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(exec.installed_cache(), nullptr);
  // A cache sized for another spec is refused.
  CacheSpec other = p->meta().cache_spec;
  other.layers[0].n_kv_heads *= 2;
  auto c3 = make_cache("reference", other, cache_options(DType::F32, 64));
  expect_error([&] { CacheScope s(exec, *c3); }, ErrorKind::InvalidArgument, {"different cache spec"});
  EXPECT_EQ(exec.installed_cache(), nullptr);
}

// Session (what `ptn run` uses): prompts longer than max_seq_length go in chunks, and every
// token's logits equal those of one long step; rewind and the context limit.
TEST(RuntimeCaches, SessionChunksLongPromptsAndRewinds) {
  auto src = open_weights(stories_dir() + "/hf");
  auto p = program_from_source(*src, BuildOptions{}, 4, "max_seq 4");
  const auto toks = some_tokens(11, 512, 30);
  for (const char* kind : {"paged", "reference"}) {
    SessionOptions so;
    so.cache_kind = kind;
    so.context = 16;
    so.block_size = 4;
    Session s(p, so);
    EXPECT_EQ(s.context(), 16);
    Rows got;
    const float* last = s.feed(toks, [&](int64_t i, const float* l) {
      EXPECT_EQ(i, static_cast<int64_t>(got.size()));
      got.emplace_back(l, l + 512);
    });
    ASSERT_EQ(got.size(), toks.size());
    EXPECT_EQ(std::vector<float>(last, last + 512), got.back());
    EXPECT_EQ(s.position(), 11);
    // Reference: the whole prompt as one step of a program with room for it, every row out.
    auto big = program_from_source(*src, BuildOptions{}, 16, "max_seq 16");
    Executor exec(big, ExecMode::Reference, 16);
    auto cache = make_cache("reference", big->meta().cache_spec, cache_options(DType::F32, 64));
    CacheScope scope(exec, *cache);
    cache->add_sequence(0);
    StepBatch b;
    for (size_t i = 0; i < toks.size(); ++i) b.rows.push_back({0, static_cast<int32_t>(i), toks[i]});
    int64_t n = 0;
    const float* all = exec.step(b, OutputRows::All, &n);
    ASSERT_EQ(n, 11);
    Rows want;
    for (int64_t r = 0; r < n; ++r) want.emplace_back(all + r * 512, all + (r + 1) * 512);
    EXPECT_LT(nmse(got, want), 1e-10) << kind;
    // Rewind to 6 and feed the same tokens again: the same logits.
    s.rewind(6);
    const float* again = s.feed(std::vector<int32_t>(toks.begin() + 6, toks.end()));
    EXPECT_LT(nmse(Rows{std::vector<float>(again, again + 512)}, Rows{want.back()}), 1e-10) << kind;
    expect_error([&] { s.rewind(12); }, ErrorKind::InvalidArgument, {"rewind"});
    expect_error([&] { s.feed(some_tokens(6, 512, 31)); }, ErrorKind::Capacity, {"context of 16"});
    EXPECT_EQ(s.position(), 11) << "a refused feed changes nothing";
    expect_error([&] { s.feed({}); }, ErrorKind::InvalidArgument, {});
  }
}

// A model whose every layer is windowed (Mistral-style, window 8): the paged cache releases
// blocks behind the window; fork, batched decode and rewind (down to its floor) still agree
// with fresh reference runs.
TEST(RuntimeCaches, WindowedForkDecodeAndRewind) {
  nlohmann::json cfg = {{"architectures", {"MistralForCausalLM"}}, {"model_type", "mistral"}, {"vocab_size", 256},
                        {"hidden_size", 64}, {"intermediate_size", 128}, {"num_hidden_layers", 2},
                        {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"max_position_embeddings", 512},
                        {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0}, {"sliding_window", 8},
                        {"hidden_act", "silu"}};
  auto p = random_program(cfg, 9, 32);
  const auto prompt = some_tokens(30, 256, 70), da = some_tokens(12, 256, 71), db = some_tokens(12, 256, 72);
  Executor exec(p, ExecMode::Optimized, 32);
  auto cache = std::make_unique<PagedCache>(p->meta().cache_spec, cache_options(DType::F32, 128, 4));
  CacheScope scope(exec, *cache);
  cache->add_sequence(0);
  StepBatch pre;
  for (size_t i = 0; i < prompt.size(); ++i) pre.rows.push_back({0, static_cast<int32_t>(i), prompt[i]});
  auto first = step_logits(exec, pre);
  EXPECT_GT(cache->rewind_floor(0), 0) << "blocks wholly behind the window are released";
  const auto table = cache->block_table(0);
  EXPECT_EQ(table.front(), -1);
  cache->fork(0, 1);
  Rows got_a{first[0]}, got_b{first[0]};
  for (size_t d = 0; d < da.size(); ++d) {
    const int32_t pos = static_cast<int32_t>(prompt.size() + d);
    auto l = step_logits(exec, StepBatch{{{1, pos, db[d]}, {0, pos, da[d]}}});
    got_a.push_back(l[0]);
    got_b.push_back(l[1]);
  }
  EXPECT_LT(nmse(got_a, run_sequence(p, ExecMode::Reference, "reference", DType::F32, prompt, da)), 1e-8);
  EXPECT_LT(nmse(got_b, run_sequence(p, ExecMode::Reference, "reference", DType::F32, prompt, db)), 1e-8);
  // Rewind below the floor is refused (the positions are gone); at the floor or above it works.
  const int64_t floor = cache->rewind_floor(0);
  if (floor > 0) expect_error([&] { cache->rewind(0, floor - 1); }, ErrorKind::InvalidArgument, {});
  const int64_t keep = std::max<int64_t>(floor, static_cast<int64_t>(prompt.size()) + 4);
  cache->rewind(0, keep);
  std::vector<int32_t> hist = prompt;
  hist.insert(hist.end(), da.begin(), da.begin() + (keep - static_cast<int64_t>(prompt.size())));
  const int32_t t = 17;
  auto l = step_logits(exec, StepBatch{{{0, static_cast<int32_t>(keep), t}}});
  hist.push_back(t);
  EXPECT_LT(nmse(Rows{l[0]}, run_sequence(p, ExecMode::Reference, "reference", DType::F32, hist, {})), 1e-8);
}

// A session on a windowed model, reset after its cache released the first blocks (what
// perplexity does between chunks): it starts afresh and gives a fresh session's logits.
TEST(RuntimeCaches, WindowedSessionResetsAfterTheWindowPassed) {
  nlohmann::json cfg = {{"architectures", {"MistralForCausalLM"}}, {"model_type", "mistral"}, {"vocab_size", 256},
                        {"hidden_size", 64}, {"intermediate_size", 128}, {"num_hidden_layers", 2},
                        {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"max_position_embeddings", 512},
                        {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0}, {"sliding_window", 8},
                        {"hidden_act", "silu"}};
  auto p = random_program(cfg, 9, 32);
  const auto first = some_tokens(40, 256, 90), second = some_tokens(20, 256, 91);
  SessionOptions so;
  so.cache_kind = "paged";
  so.context = 128;
  so.block_size = 4;
  Session s(p, so), fresh(p, so);
  s.feed(first);
  s.reset();
  EXPECT_EQ(s.position(), 0);
  Rows got, want;
  s.feed(second, [&](int64_t, const float* l) { got.emplace_back(l, l + 256); });
  fresh.feed(second, [&](int64_t, const float* l) { want.emplace_back(l, l + 256); });
  ASSERT_EQ(got.size(), second.size());
  EXPECT_LT(nmse(got, want), 1e-12);
}

// A feed that fails part-way (a bad id in a later chunk, or the caller's callback throwing
// after the first chunk was computed) leaves the session exactly as before the call.
TEST(RuntimeCaches, FailedFeedLeavesTheSessionAsItWas) {
  auto src = open_weights(stories_dir() + "/hf");
  auto p = program_from_source(*src, BuildOptions{}, 4, "max_seq 4");
  const auto head = some_tokens(3, 512, 80), toks = some_tokens(10, 512, 81);
  for (const char* kind : {"paged", "reference"}) {
    SCOPED_TRACE(kind);
    SessionOptions so;
    so.cache_kind = kind;
    so.context = 64;
    so.block_size = 4;
    Session s(p, so);
    s.feed(head);
    auto bad = toks;
    bad[7] = 512;
    expect_error([&] { s.feed(bad); }, ErrorKind::InvalidArgument, {"token 7", "nothing was fed"});
    EXPECT_EQ(s.position(), 3);
    EXPECT_EQ(s.cache()->length(0), 3);
    EXPECT_THROW(s.feed(toks, [](int64_t i, const float*) {
      if (i == 5) throw std::runtime_error("caller gave up");
    }),
                 std::runtime_error);
    EXPECT_EQ(s.position(), 3);
    EXPECT_EQ(s.cache()->length(0), 3);
    const float* l = s.feed(toks);
    std::vector<int32_t> all = head;
    all.insert(all.end(), toks.begin(), toks.end());
    Rows want = run_sequence(p, ExecMode::Optimized, "reference", DType::F32,
                             std::vector<int32_t>(all.begin(), all.end() - 1), {all.back()});
    EXPECT_LT(nmse(Rows{std::vector<float>(l, l + 512)}, Rows{want.back()}), 1e-10);
  }
}

}  // namespace
}  // namespace ptn
