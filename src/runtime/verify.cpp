#include "runtime/verify.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "kvcache/factory.h"

namespace ptn {

namespace {
std::vector<int64_t> topk(const float* x, int64_t n, int64_t k) {
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  k = std::min(k, n);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t a, int64_t b) { return x[a] > x[b]; });
  idx.resize(static_cast<size_t>(k));
  return idx;
}
}  // namespace

LogitComparison compare_logits(const float* got, const float* want, int64_t steps, int64_t vocab) {
  LogitComparison c;
  double num = 0, den = 0;
  double top1 = 0, top5 = 0;
  for (int64_t s = 0; s < steps; ++s) {
    const float* a = got + s * vocab;
    const float* b = want + s * vocab;
    for (int64_t i = 0; i < vocab; ++i) {
      double d = static_cast<double>(a[i]) - b[i];
      if (std::isnan(d)) d = INFINITY;
      c.max_abs_err = std::max(c.max_abs_err, std::fabs(d));
      num += d * d;
      den += static_cast<double>(b[i]) * b[i];
    }
    auto ta = topk(a, vocab, 5), tb = topk(b, vocab, 5);
    top1 += ta[0] == tb[0];
    int overlap = 0;
    for (int64_t x : ta) overlap += std::count(tb.begin(), tb.end(), x) > 0;
    top5 += static_cast<double>(overlap) / static_cast<double>(ta.size());
  }
  c.nmse = den > 0 ? num / den : (num > 0 ? INFINITY : 0);
  c.top1 = steps ? top1 / static_cast<double>(steps) : 0;
  c.top5 = steps ? top5 / static_cast<double>(steps) : 0;
  return c;
}

std::vector<SampleCheck> verify_samples(std::shared_ptr<const Program> program, const VerifyOptions& options,
                                        ThreadPool* pool) {
  const ProgramMeta& meta = program->meta();
  const int64_t vocab = meta.spec.vocab_size;
  std::vector<SampleCheck> out;
  if (meta.samples.empty()) return out;
  int64_t max_prompt = 1, max_total = 1;
  for (const auto& s : meta.samples) {
    max_prompt = std::max<int64_t>(max_prompt, static_cast<int64_t>(s.prompt.size()));
    max_total = std::max<int64_t>(max_total, static_cast<int64_t>(s.prompt.size() + s.decode.size()));
  }
  if (max_prompt > meta.max_seq_length)
    fail(ErrorKind::Corrupt, program->name(), "a golden sample's prompt is longer than max_seq_length");
  Executor exec(program, options.mode, max_prompt, pool);
  for (size_t si = 0; si < meta.samples.size(); ++si) {
    const GoldenSample& gs = meta.samples[si];
    const Tensor& want = program->tensor(gs.logits_tensor);
    const int64_t steps = 1 + static_cast<int64_t>(gs.decode.size());
    std::vector<float> got(static_cast<size_t>(steps * vocab));
    std::unique_ptr<KVCache> cache;
    std::unique_ptr<CacheScope> scope;
    if (!meta.static_cache) {
      CacheOptions co = options.cache;
      co.capacity_tokens = std::max<int64_t>(co.capacity_tokens, max_total + co.block_size * 2);
      cache = make_cache(options.cache_kind, meta.cache_spec, co);
      scope = std::make_unique<CacheScope>(exec, *cache);
      cache->add_sequence(0);
    } else {
      exec.reset_static_cache();
    }
    StepBatch b;
    for (size_t i = 0; i < gs.prompt.size(); ++i)
      b.rows.push_back({0, static_cast<int32_t>(i), gs.prompt[i]});
    int64_t n = 0;
    const float* logits = exec.step(b, OutputRows::LastPerSequence, &n);
    std::copy(logits, logits + vocab, got.begin());
    int32_t p = static_cast<int32_t>(gs.prompt.size());
    for (size_t d = 0; d < gs.decode.size(); ++d) {
      StepBatch one;
      one.rows.push_back({0, p++, gs.decode[d]});
      logits = exec.step(one, OutputRows::LastPerSequence, &n);
      std::copy(logits, logits + vocab, got.begin() + static_cast<long>((d + 1) * vocab));
    }
    SampleCheck c;
    c.sample = static_cast<int>(si);
    c.prompt_tokens = static_cast<int64_t>(gs.prompt.size());
    c.decode_tokens = static_cast<int64_t>(gs.decode.size());
    c.cmp = compare_logits(got.data(), want.data_as<float>(), steps, vocab);
    c.pass = c.cmp.nmse <= options.max_nmse && std::isfinite(c.cmp.max_abs_err);
    out.push_back(c);
  }
  return out;
}

}  // namespace ptn
