// Log probabilities for the OpenAI `logprobs` / `top_logprobs` fields: log-softmax of the
// model's unmodified logits (before temperature, penalties or filters).
#pragma once
#include <cstdint>
#include <vector>

namespace ptn {

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0.0f;  // log softmax(logits)[id]; -inf for a token of probability 0
};

constexpr int kMaxTopLogprobs = 20;

// The n (0..20) most probable tokens, most probable first (ties: lower id first). NaN logits
// count as -inf. Throws InvalidArgument for n outside [0, 20], n_vocab < 1, or logits that
// are all -inf / NaN.
std::vector<TokenLogprob> top_logprobs(const float* logits, int64_t n_vocab, int n);
// log softmax(logits)[token]; throws InvalidArgument for a token outside [0, n_vocab).
float token_logprob(const float* logits, int64_t n_vocab, int32_t token);

}  // namespace ptn
