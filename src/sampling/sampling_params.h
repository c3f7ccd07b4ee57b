// Per-request sampling settings (the OpenAI request fields plus top_k / min_p / repetition
// penalty), their validation, and the sampler chain they describe.
#pragma once
#include <cstdint>
#include <map>
#include <memory>

#include "sampling/sampler.h"

namespace ptn {

struct SamplingParams {
  float temperature = 1.0f;         // >= 0; 0 = greedy (argmax), the other fields but
                                    // logit_bias and the penalties are then ignored
  int64_t top_k = 0;                // 0 = off; > vocab is clamped to the vocab
  float top_p = 1.0f;               // (0, 1]; 1 = off. Values > 1 are rejected, as OpenAI does
  float min_p = 0.0f;               // [0, 1]; 0 = off
  float repetition_penalty = 1.0f;  // > 0; 1 = off (CTRL / HF semantics)
  float presence_penalty = 0.0f;    // [-2, 2] as OpenAI
  float frequency_penalty = 0.0f;   // [-2, 2] as OpenAI
  int64_t penalty_last_n = 0;       // penalties look at the last n generated tokens; 0 = all
  std::map<int32_t, float> logit_bias;  // token id -> bias in [-100, 100], or -inf to ban
  uint64_t seed = 0;                // the random draw replays exactly for the same seed
};

// Checks every field; throws ptn::Error (InvalidArgument) whose `where` is "sampling.<field>"
// for NaN / infinite / out-of-range values and for logit_bias ids outside [0, n_vocab).
// Returns the params with top_k clamped to n_vocab.
SamplingParams validate_sampling_params(const SamplingParams& p, int64_t n_vocab);

// validate_sampling_params, then the chain, in the order Hugging Face and vLLM apply them:
//   logit_bias -> penalties -> (temperature 0: greedy)
//                              else temperature -> top_k -> top_p -> min_p -> dist(seed)
// Samplers that would do nothing (bias empty, penalties neutral, filters off) are left out.
std::unique_ptr<SamplerChain> make_sampler_chain(const SamplingParams& p, int64_t n_vocab);

}  // namespace ptn
