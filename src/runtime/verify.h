// Re-runs a program's golden samples and compares the logits with the exporter's (which came
// from the reference ops and the reference cache).
#pragma once
#include <string>
#include <vector>

#include "kvcache/cache.h"
#include "runtime/executor.h"

namespace ptn {

struct LogitComparison {
  double max_abs_err = 0;
  double nmse = 0;       // sum (a-b)^2 / sum b^2 over every logit of every step
  double top1 = 0;       // fraction of steps whose argmax agrees
  double top5 = 0;       // mean overlap of the top-5 sets
};

struct SampleCheck {
  int sample = 0;
  int64_t prompt_tokens = 0;
  int64_t decode_tokens = 0;
  LogitComparison cmp;
  bool pass = false;
};

struct VerifyOptions {
  ExecMode mode = ExecMode::Optimized;
  std::string cache_kind = "paged";  // "paged" or "reference" (ignored by static programs)
  CacheOptions cache;                // dtype, block size; capacity is sized from the samples
  double max_nmse = 1e-3;            // pass threshold
};

// Runs every golden sample; returns one check per sample.
std::vector<SampleCheck> verify_samples(std::shared_ptr<const Program> program, const VerifyOptions& options,
                                        ThreadPool* pool = nullptr);

// Compares `got` against `want`, both [steps, vocab].
LogitComparison compare_logits(const float* got, const float* want, int64_t steps, int64_t vocab);

}  // namespace ptn
