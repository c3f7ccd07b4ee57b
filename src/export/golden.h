// Golden samples: prompts and greedy continuations run through the *reference* executor with
// the reference cache (an independent path from the optimized kernels and the paged cache),
// whose logits `ptn verify` later compares against.
#pragma once
#include <functional>
#include <map>
#include <memory>

#include "runtime/program.h"

namespace ptn {

struct GoldenOptions {
  int samples = 2;
  int64_t prompt_tokens = 24;  // prompt of sample 0; later samples use shorter prompts
  int decode_tokens = 6;       // at least 4
  uint64_t seed = 1;
};

// Returns the samples; their logits tensors ("golden.N.logits", f32 [1 + decode, vocab]) are
// added to `tensors`.
std::vector<GoldenSample> compute_golden_samples(std::shared_ptr<const Program> program, const GoldenOptions& o,
                                                 std::map<std::string, Tensor>& tensors,
                                                 const std::function<void(int)>& on_sample = {});

}  // namespace ptn
