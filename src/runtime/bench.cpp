#include "runtime/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <set>

#include "core/error.h"
#include "core/json_number.h"
#include "core/membw.h"
#include "kvcache/factory.h"
#include "runtime/executor.h"

namespace ptn {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void summarize(BenchResult& r) {
  double sum = 0;
  for (double v : r.samples) sum += v;
  r.mean_tps = r.samples.empty() ? 0 : sum / static_cast<double>(r.samples.size());
  double var = 0;
  for (double v : r.samples) var += (v - r.mean_tps) * (v - r.mean_tps);
  r.std_tps = r.samples.size() > 1 ? std::sqrt(var / static_cast<double>(r.samples.size() - 1)) : 0;
}

}  // namespace

BenchReport run_bench(std::shared_ptr<const Program> program, const BenchOptions& o, ThreadPool& pool) {
  const ProgramMeta& meta = program->meta();
  if (meta.static_cache) fail(ErrorKind::InvalidArgument, "ptn bench", "benchmarks run off-graph programs");
  if (o.n_prompt < 0 || o.n_gen < 0 || o.reps < 1 || o.reps > 100)
    fail(ErrorKind::InvalidArgument, "ptn bench", "-p and -n must be >= 0, -r 1..100");
  int64_t max_batch = 1;
  for (int64_t b : o.batches) {
    if (b < 1 || b > 256) fail(ErrorKind::InvalidArgument, "--batch", "batch sizes must be 1..256");
    max_batch = std::max(max_batch, b);
  }
  const int64_t vocab = meta.spec.vocab_size;
  const int64_t chunk = meta.max_seq_length;
  const int64_t max_rows = std::max<int64_t>(chunk, max_batch);
  if (o.depths.empty()) fail(ErrorKind::InvalidArgument, "-d", "give at least one depth");
  int64_t max_depth = 0;
  for (int64_t d : o.depths) {
    if (d < 0 || d > (int64_t{1} << 20)) fail(ErrorKind::InvalidArgument, "-d", "depths must be 0..1048576");
    max_depth = std::max(max_depth, d);
  }
  const int64_t ctx_needed = std::max({max_depth + std::max(o.n_prompt, o.n_gen), o.batch_context + o.batch_steps}) + 1;
  if (meta.spec.max_position_embeddings > 0 && ctx_needed > meta.spec.max_position_embeddings)
    fail(ErrorKind::InvalidArgument, "ptn bench", "the test needs more positions than the model's context");
  Executor exec(program, ExecMode::Optimized, max_rows, &pool);
  CacheOptions co;
  co.dtype = o.cache_dtype;
  co.block_size = 16;
  co.capacity_tokens = (ctx_needed + 16) * max_batch + 64;
  auto cache = make_cache("paged", meta.cache_spec, co, &pool);
  CacheScope scope(exec, *cache);
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab - 1));

  BenchReport rep;
  // Weight bytes one decode step streams: every matrix of a linear op, one embedding row, and
  // of a moe_ffn node the router, the shared expert and top_k of its E routed experts (a layer's
  // experts all have one shape and type, so that is top_k / E of their bytes).
  std::set<std::string> seen;
  for (const Node& n : meta.graph.nodes) {
    const int64_t experts = n.op == OpType::MoeFfn ? json_integer<int64_t>(n.attrs.value("experts", nlohmann::json())).value_or(0) : 0;
    const double used = experts > 0 ? static_cast<double>(json_integer<int64_t>(n.attrs.value("top_k", nlohmann::json())).value_or(0)) / static_cast<double>(experts) : 1.0;
    for (size_t k = 0; k < n.weights.size(); ++k) {
      const std::string& w = n.weights[k];
      if (!seen.insert(w + (n.op == OpType::Embedding ? "#row" : "")).second) continue;
      const Tensor& t = program->tensor(w);
      const bool routed = experts > 0 && k >= 1 && k <= static_cast<size_t>(3 * experts);
      rep.weight_bytes_per_token += n.op == OpType::Embedding ? static_cast<double>(t.row_bytes())
                                                              : static_cast<double>(t.nbytes()) * (routed ? used : 1.0);
    }
  }

  auto run_prompt = [&](SeqId seq, int64_t n, int64_t start = 0) {
    int64_t pos = start, out = 0;
    n += start;
    while (pos < n) {
      StepBatch b;
      for (int64_t i = 0; i < std::min(chunk, n - pos); ++i)
        b.rows.push_back({seq, static_cast<int32_t>(pos + i), tok(rng)});
      exec.step(b, OutputRows::LastPerSequence, &out);
      pos += static_cast<int64_t>(b.rows.size());
    }
  };
  auto run_decode = [&](SeqId seq, int64_t start, int64_t n) {
    int64_t out = 0;
    for (int64_t i = 0; i < n; ++i) {
      StepBatch b;
      b.rows.push_back({seq, static_cast<int32_t>(start + i), tok(rng)});
      exec.step(b, OutputRows::LastPerSequence, &out);
    }
  };

  // Warm-up: page the weights in and size every buffer once.
  cache->add_sequence(0);
  run_prompt(0, std::min<int64_t>(std::max<int64_t>(o.n_prompt, 1), chunk));
  run_decode(0, cache->length(0), 2);
  cache->clear(0);
  rep.read_bandwidth_gbs = measure_read_bandwidth(pool);

  // Sequence 0 holding `depth` tokens: the depth is computed once per depth and each repetition
  // rewinds to it (a windowed cache that cannot rewind that far computes it again).
  auto at_depth = [&](int64_t depth) {
    if (cache->has_sequence(0) && depth > 0 && cache->length(0) >= depth && cache->rewind_floor(0) <= depth) {
      cache->rewind(0, depth);
      return;
    }
    if (cache->has_sequence(0)) cache->clear(0);
    cache->add_sequence(0);
    if (depth > 0) run_prompt(0, depth);
  };
  auto suffix = [](int64_t depth) { return depth > 0 ? " @ d" + std::to_string(depth) : std::string(); };
  for (int64_t depth : o.depths) {
    if (o.n_prompt > 0) {
      BenchResult r{"pp" + std::to_string(o.n_prompt) + suffix(depth), depth, o.n_prompt, 0, 0, {}, {}};
      for (int i = 0; i < o.reps; ++i) {
        at_depth(depth);
        const double t0 = now_s();
        run_prompt(0, o.n_prompt, depth);
        r.samples.push_back(static_cast<double>(o.n_prompt) / (now_s() - t0));
        r.kv_bytes = cache->bytes_used();
      }
      summarize(r);
      rep.results.push_back(r);
    }
    if (o.n_gen > 0) {
      BenchResult r{"tg" + std::to_string(o.n_gen) + suffix(depth), depth, o.n_gen, 0, 0, {}, {}};
      for (int i = 0; i < o.reps; ++i) {
        at_depth(depth);
        const double t0 = now_s();
        run_decode(0, depth, o.n_gen);
        r.samples.push_back(static_cast<double>(o.n_gen) / (now_s() - t0));
        r.kv_bytes = cache->bytes_used();
      }
      summarize(r);
      rep.results.push_back(r);
      rep.read_bandwidth_gbs = std::max(rep.read_bandwidth_gbs, measure_read_bandwidth(pool));
    }
    if (cache->has_sequence(0)) cache->clear(0);
  }
  for (int64_t B : o.batches) {
    BenchResult r{"batch" + std::to_string(B), o.batch_context, B * o.batch_steps, 0, 0, {}, {}};
    for (int i = 0; i < o.reps; ++i) {
      for (SeqId s = 0; s < B; ++s) {
        cache->add_sequence(s);
        run_prompt(s, o.batch_context);
      }
      int64_t out = 0;
      const double t0 = now_s();
      for (int64_t step = 0; step < o.batch_steps; ++step) {
        StepBatch b;
        for (SeqId s = 0; s < B; ++s) b.rows.push_back({s, static_cast<int32_t>(o.batch_context + step), tok(rng)});
        exec.step(b, OutputRows::LastPerSequence, &out);
      }
      r.samples.push_back(static_cast<double>(B * o.batch_steps) / (now_s() - t0));
      r.kv_bytes = cache->bytes_used();
      for (SeqId s = 0; s < B; ++s) cache->clear(s);
    }
    summarize(r);
    rep.results.push_back(r);
  }
  return rep;
}

}  // namespace ptn
