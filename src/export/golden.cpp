#include "export/golden.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "core/error.h"
#include "kvcache/reference_cache.h"
#include "runtime/executor.h"

namespace ptn {

std::vector<GoldenSample> compute_golden_samples(std::shared_ptr<const Program> program, const GoldenOptions& o,
                                                 std::map<std::string, Tensor>& tensors,
                                                 const std::function<void(int)>& on_sample) {
  const ProgramMeta& meta = program->meta();
  const int64_t vocab = meta.spec.vocab_size;
  std::mt19937_64 rng(o.seed);
  std::vector<GoldenSample> out;
  Executor exec(program, ExecMode::Reference, std::max<int64_t>(1, o.prompt_tokens));
  for (int s = 0; s < o.samples; ++s) {
    // Sample 0 uses the full prompt; the others shorter ones, so prefill lengths vary.
    const int64_t len = std::max<int64_t>(1, s == 0 ? o.prompt_tokens : o.prompt_tokens / (s + 1) + s);
    GoldenSample gs;
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
    for (int64_t i = 0; i < std::min(len, o.prompt_tokens); ++i) gs.prompt.push_back(pick(rng));
    Tensor logits = Tensor::zeros(DType::F32, {1 + o.decode_tokens, vocab});
    CacheSpec cs = meta.cache_spec;
    CacheOptions co;
    co.capacity_tokens = 0;  // unlimited: the reference cache grows with the sequence
    std::unique_ptr<SequenceReferenceCache> cache;
    std::unique_ptr<CacheScope> scope;
    if (!meta.static_cache) {
      cache = std::make_unique<SequenceReferenceCache>(cs, co);
      scope = std::make_unique<CacheScope>(exec, *cache);
      cache->add_sequence(0);
    } else {
      exec.reset_static_cache();
    }
    StepBatch b;
    for (size_t i = 0; i < gs.prompt.size(); ++i) b.rows.push_back({0, static_cast<int32_t>(i), gs.prompt[i]});
    int64_t n = 0;
    const float* l = exec.step(b, OutputRows::LastPerSequence, &n);
    std::memcpy(logits.row_ptr(0), l, static_cast<size_t>(vocab) * 4);
    int32_t pos = static_cast<int32_t>(gs.prompt.size());
    for (int d = 0; d < o.decode_tokens; ++d) {
      // Greedy continuation from the reference logits.
      const float* prev = reinterpret_cast<const float*>(logits.row_ptr(d));
      const int32_t next = static_cast<int32_t>(std::max_element(prev, prev + vocab) - prev);
      gs.decode.push_back(next);
      StepBatch one;
      one.rows.push_back({0, pos++, next});
      l = exec.step(one, OutputRows::LastPerSequence, &n);
      std::memcpy(logits.row_ptr(d + 1), l, static_cast<size_t>(vocab) * 4);
    }
    gs.logits_tensor = "golden." + std::to_string(s) + ".logits";
    tensors[gs.logits_tensor] = logits;
    out.push_back(std::move(gs));
    if (on_sample) on_sample(s + 1);
  }
  return out;
}

}  // namespace ptn
