// KV cache benchmarks (needs ptn_kvcache linked).
//
// 1. Memory: K/V bytes for 8 sequences of lengths 37, 120, 511, 1000, 64, 2048, 300, 5 on a
//    Llama-3.2-1B-shaped spec (16 layers, 8 kv heads, head dim 64, context 2048): the paged
//    cache with blocks of 16 tokens vs a static cache of 8 x 2048 positions vs the tokens
//    actually stored, per cache dtype. Printed before the timings.
// 2. Time: one decode step of one attention layer (32 q heads over 8 kv heads, D 64) for 1, 4,
//    16 sequences at context 512 and 2048, paged (f32, f16, q8_0, q4_0, one thread) vs reference.
//    Each iteration prepares the step, attends, and rolls back, so the context never grows.
//    Then prefill at depth: a chunk of 128 prompt tokens of one sequence after 512 or 4096
//    cached tokens (f16 and q8_0 cache, one layer, one thread).
// 3. Window memory: K/V bytes of one sequence at 8k context on a Gemma-3-1B-shaped spec (26
//    layers, 5 local : 1 global, window 512, 1 kv head, head dim 256) in the paged cache (the
//    local layers' group releases blocks out of the window) against the same spec cached in full
//    (every layer holds all 8192 positions). Printed before the timings.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <vector>

#include "core/threadpool.h"
#include "kvcache/paged_cache.h"
#include "kvcache/reference_cache.h"

using namespace ptn;

namespace {

constexpr int64_t kLayers = 16, kHkv = 8, kHq = 32, kD = 64, kContext = 2048;

// Layers from 1 on get `kind` / `span` (layer 0 always attends fully).
CacheSpec llama_1b_spec(int64_t layers, AttnKind kind = AttnKind::Full, int64_t span = 0) {
  CacheSpec s;
  for (int64_t l = 0; l < layers; ++l) {
    LayerCacheSpec L;
    L.n_kv_heads = kHkv;
    L.head_dim_k = kD;
    L.head_dim_v = kD;
    L.kind = l == 0 ? AttnKind::Full : kind;
    L.span = l == 0 ? 0 : span;
    s.layers.push_back(L);
  }
  s.max_positions = kContext;
  return s;
}

float pseudo(uint64_t i) {
  i = (i ^ (i >> 31)) * 0x7fb5d329728ea185ull;
  i = (i ^ (i >> 27)) * 0x81dadef4bc2dd44dull;
  return static_cast<float>((i >> 40) & 0xffff) / 32768.0f - 1.0f;
}

// Appends n tokens to seq in one step on every layer, with n_q_heads query heads.
void fill(KVCache& c, SeqId seq, int64_t n, int64_t n_q_heads) {
  StepBatch b;
  const int32_t start = static_cast<int32_t>(c.length(seq));
  for (int64_t i = 0; i < n; ++i) b.rows.push_back({seq, start + static_cast<int32_t>(i), static_cast<int32_t>(i)});
  std::vector<float> q(n * n_q_heads * kD), kv(n * kHkv * kD), out(n * n_q_heads * kD);
  for (size_t i = 0; i < q.size(); ++i) q[i] = pseudo(i + 17 * seq);
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = pseudo(i * 3 + 1000003 * seq);
  auto txn = c.prepare(b);
  for (size_t l = 0; l < c.spec().layers.size(); ++l)
    c.update_and_attend(txn, static_cast<int64_t>(l), q.data(), kv.data(), kv.data(), n_q_heads,
                        AttentionParams{0.125f, 0.0f}, out.data());
  c.commit(txn);
}

void print_memory_figures() {
  const std::vector<int64_t> lengths = {37, 120, 511, 1000, 64, 2048, 300, 5};
  int64_t tokens = 0;
  for (int64_t n : lengths) tokens += n;
  std::printf("KV bytes, 8 sequences (%lld tokens) on a Llama-3.2-1B-shaped spec (16 layers, 8 kv heads, D 64):\n",
              static_cast<long long>(tokens));
  std::printf("  %-6s %14s %14s %14s %10s %10s\n", "dtype", "paged(bs 16)", "static 8x2048", "tokens held",
              "paged/held", "static/held");
  for (DType dt : {DType::F32, DType::F16, DType::Q8_0}) {
    // Window-1 layers 1..15 make the fill cheap; they form their own layer group (which releases
    // blocks), so the figure is the full group's (layer 0) bytes times 16 layers of that shape.
    CacheOptions o;
    o.block_size = 16;
    o.dtype = dt;
    o.capacity_tokens = 8 * kContext;
    o.prefix_caching = false;
    PagedCache paged(llama_1b_spec(kLayers, AttnKind::Window, 1), o);
    for (size_t s = 0; s < lengths.size(); ++s) {
      paged.add_sequence(static_cast<SeqId>(s));
      fill(paged, static_cast<SeqId>(s), lengths[s], kHkv);
    }
    const double token_bytes = static_cast<double>(paged.block_bytes(0)) * kLayers / 16.0;
    const double held = token_bytes * static_cast<double>(tokens);
    const double stat = token_bytes * 8.0 * kContext;
    const double used = static_cast<double>(paged.bytes_used(0)) * kLayers;
    std::printf("  %-6s %11.2f MiB %11.2f MiB %11.2f MiB %10.4f %10.3f\n", dtype_name(dt), used / 1048576.0,
                stat / 1048576.0, held / 1048576.0, used / held, stat / held);
  }
  std::fflush(stdout);
}

void print_window_figures() {
  constexpr int64_t layers = 26, window = 512, head_dim = 256, context = 8192, bs = 16, step = 512;
  CacheSpec spec, full;
  for (int64_t l = 0; l < layers; ++l) {
    LayerCacheSpec L;
    L.n_kv_heads = 1;
    L.head_dim_k = head_dim;
    L.head_dim_v = head_dim;
    full.layers.push_back(L);
    if ((l + 1) % 6 != 0) {  // Gemma 3: every 6th layer is global, the others local
      L.kind = AttnKind::Window;
      L.span = window;
    }
    spec.layers.push_back(L);
  }
  spec.max_positions = full.max_positions = context;
  std::printf("KV bytes of one sequence at %lld tokens, Gemma-3-1B-shaped spec (26 layers, 5 local : 1 global,\n"
              "window 512, 1 kv head, D 256), paged cache, blocks of %lld tokens:\n",
              static_cast<long long>(context), static_cast<long long>(bs));
  std::printf("  %-6s %14s %14s %8s %14s %14s\n", "dtype", "windowed", "all full", "ratio", "local group",
              "global group");
  for (DType dt : {DType::F32, DType::BF16}) {
    CacheOptions o;
    o.block_size = bs;
    o.dtype = dt;
    o.capacity_tokens = context;
    o.prefix_caching = false;
    PagedCache paged(spec, o);
    paged.add_sequence(0);
    // Prefill in steps of 512 rows (one query head: the memory does not depend on it).
    const int64_t hd = head_dim;
    std::vector<float> q(step * hd), kv(step * hd), out(step * hd);
    for (int64_t done = 0; done < context; done += step) {
      StepBatch b;
      for (int64_t i = 0; i < step; ++i) b.rows.push_back({0, static_cast<int32_t>(done + i), static_cast<int32_t>(i)});
      for (size_t i = 0; i < q.size(); ++i) q[i] = pseudo(i + static_cast<uint64_t>(done));
      for (size_t i = 0; i < kv.size(); ++i) kv[i] = pseudo(i * 7 + static_cast<uint64_t>(done));
      auto txn = paged.prepare(b);
      for (int64_t l = 0; l < layers; ++l)
        paged.update_and_attend(txn, l, q.data(), kv.data(), kv.data(), 1, AttentionParams{0.0625f, 0.0f}, out.data());
      paged.commit(txn);
    }
    // The same model cached in full: every layer holds ceil(context / bs) blocks (what a
    // PagedCache with 26 full layers holds for this sequence; computed, not filled: 26 full
    // layers at 8k would take minutes to attend).
    PagedCache all_full(full, o);
    const double full_bytes = static_cast<double>((context + bs - 1) / bs) * static_cast<double>(all_full.block_bytes());
    const int local = paged.group_of_layer(0), global = paged.group_of_layer(5);
    const double used = static_cast<double>(paged.bytes_used());
    std::printf("  %-6s %11.2f MiB %11.2f MiB %8.4f %11.2f MiB %11.2f MiB\n", dtype_name(dt), used / 1048576.0,
                full_bytes / 1048576.0, used / full_bytes, static_cast<double>(paged.bytes_used(local)) / 1048576.0,
                static_cast<double>(paged.bytes_used(global)) / 1048576.0);
  }
  // The local group holds the blocks spanning the window's 511 positions plus the next one:
  // between `window` and `window + bs - 1` tokens per local layer.
  std::printf("  expected ratio: global share 4/26 + 22/26 x (window .. window + bs - 1) / context = %.4f .. %.4f\n",
              4.0 / 26 + 22.0 / 26 * static_cast<double>(window) / static_cast<double>(context),
              4.0 / 26 + 22.0 / 26 * static_cast<double>(window + bs - 1) / static_cast<double>(context));
  std::fflush(stdout);
}

// Caches filled once per (kind, context), 16 sequences each, reused by every benchmark.
struct Filled {
  std::unique_ptr<KVCache> cache;
};
ThreadPool& one_thread() {
  static ThreadPool p(1);
  return p;
}

KVCache& filled_cache(const std::string& kind, int64_t context, DType dt) {
  static std::map<std::string, Filled> cache;
  const std::string key = kind + "/" + std::to_string(context) + "/" + dtype_name(dt);
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second.cache;
  const CacheSpec spec = llama_1b_spec(1);
  CacheOptions o;
  o.dtype = dt;
  o.block_size = 16;
  o.capacity_tokens = 16 * kContext;
  o.prefix_caching = false;
  Filled f;
  if (kind == "paged") {
    f.cache = std::make_unique<PagedCache>(spec, o, &one_thread());
    // Distinct blocks per sequence (no sharing), as after 16 different prompts.
    for (SeqId s = 0; s < 16; ++s) {
      f.cache->add_sequence(s);
      fill(*f.cache, s, context - 1, kHkv);
    }
  } else {
    f.cache = std::make_unique<SequenceReferenceCache>(spec, CacheOptions{});
    f.cache->add_sequence(0);
    fill(*f.cache, 0, context - 1, kHkv);
    for (SeqId s = 1; s < 16; ++s) f.cache->fork(0, s);  // the reference copies
  }
  return *cache.emplace(key, std::move(f)).first->second.cache;
}

// Times the step `b` on layer 0 of `c` (pseudo-random q / k / v from the two seeds): each
// iteration prepares it, attends, and rolls back, so the cache never grows.
void time_steps(benchmark::State& state, KVCache& c, const StepBatch& b, uint64_t q_seed, uint64_t kv_seed) {
  const int64_t rows = static_cast<int64_t>(b.rows.size());
  std::vector<float> q(rows * kHq * kD), kv(rows * kHkv * kD), out(rows * kHq * kD);
  for (size_t i = 0; i < q.size(); ++i) q[i] = pseudo(i + q_seed);
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = pseudo(i + kv_seed);
  for (auto _ : state) {
    auto txn = c.prepare(b);
    c.update_and_attend(txn, 0, q.data(), kv.data(), kv.data(), kHq, AttentionParams{0.125f, 0.0f}, out.data());
    c.rollback(txn);
    benchmark::DoNotOptimize(out.data());
  }
}

void decode_step(benchmark::State& state, const std::string& kind, DType dt) {
  const int64_t n_seqs = state.range(0), context = state.range(1);
  KVCache& c = filled_cache(kind, context, dt);
  StepBatch b;
  for (SeqId s = 0; s < n_seqs; ++s) b.rows.push_back({s, static_cast<int32_t>(context - 1), 1});
  time_steps(state, c, b, 5, 99);
  // K/V bytes the step reads (f32 equivalent for the reference).
  state.counters["ctx_tokens/s"] =
      benchmark::Counter(static_cast<double>(n_seqs * context), benchmark::Counter::kIsIterationInvariantRate);
}

// A prompt chunk of `new_tokens` tokens of one sequence after `depth` tokens already cached
// (prefill at depth: the query tiles of paged_attend_tiles), one layer, one thread.
void prefill_step(benchmark::State& state, DType dt) {
  const int64_t new_tokens = state.range(0), depth = state.range(1);
  static std::map<std::string, Filled> caches;
  const std::string key = std::to_string(depth) + "/" + dtype_name(dt);
  auto it = caches.find(key);
  if (it == caches.end()) {
    CacheSpec spec = llama_1b_spec(1);
    spec.max_positions = depth + new_tokens;
    CacheOptions o;
    o.dtype = dt;
    o.block_size = 16;
    o.capacity_tokens = depth + new_tokens;
    o.prefix_caching = false;
    Filled f;
    f.cache = std::make_unique<PagedCache>(spec, o, &one_thread());
    f.cache->add_sequence(0);
    fill(*f.cache, 0, depth, kHq);
    it = caches.emplace(key, std::move(f)).first;
  }
  KVCache& c = *it->second.cache;
  StepBatch b;
  for (int64_t i = 0; i < new_tokens; ++i)
    b.rows.push_back({0, static_cast<int32_t>(depth + i), static_cast<int32_t>(i)});
  time_steps(state, c, b, 7, 77);
  // Query rows x cached positions each attends to (about depth + new_tokens / 2).
  state.counters["q_x_kv/s"] = benchmark::Counter(
      static_cast<double>(new_tokens * kHq) * static_cast<double>(depth + new_tokens / 2),
      benchmark::Counter::kIsIterationInvariantRate);
}

void BM_DecodeAttention_Paged_F32(benchmark::State& s) { decode_step(s, "paged", DType::F32); }
void BM_DecodeAttention_Paged_F16(benchmark::State& s) { decode_step(s, "paged", DType::F16); }
void BM_DecodeAttention_Paged_Q8_0(benchmark::State& s) { decode_step(s, "paged", DType::Q8_0); }
void BM_DecodeAttention_Paged_Q4_0(benchmark::State& s) { decode_step(s, "paged", DType::Q4_0); }
void BM_DecodeAttention_Reference(benchmark::State& s) { decode_step(s, "reference", DType::F32); }

void decode_args(benchmark::internal::Benchmark* b) {
  for (int64_t ctx : {512, 2048})
    for (int64_t n : {1, 4, 16}) b->Args({n, ctx});
  b->ArgNames({"seqs", "ctx"})->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_DecodeAttention_Paged_F32)->Apply(decode_args);
BENCHMARK(BM_DecodeAttention_Paged_F16)->Apply(decode_args);
BENCHMARK(BM_DecodeAttention_Paged_Q8_0)->Apply(decode_args);
BENCHMARK(BM_DecodeAttention_Paged_Q4_0)->Apply(decode_args);
BENCHMARK(BM_DecodeAttention_Reference)->Apply(decode_args);

void BM_PrefillAttention_Paged_F16(benchmark::State& s) { prefill_step(s, DType::F16); }
void BM_PrefillAttention_Paged_Q8_0(benchmark::State& s) { prefill_step(s, DType::Q8_0); }
void prefill_args(benchmark::internal::Benchmark* b) {
  for (int64_t depth : {512, 4096}) b->Args({128, depth});
  b->ArgNames({"new", "depth"})->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_PrefillAttention_Paged_F16)->Apply(prefill_args);
BENCHMARK(BM_PrefillAttention_Paged_Q8_0)->Apply(prefill_args);

}  // namespace

int main(int argc, char** argv) {
  print_memory_figures();
  print_window_figures();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
