#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace ptn {

namespace {

// max and log(sum exp(l - max)) over the finite-or--inf logits (NaN as -inf), in double.
void log_normaliser(const float* logits, int64_t n_vocab, const char* who, double* max, double* lse) {
  if (n_vocab < 1 || logits == nullptr)
    fail(ErrorKind::InvalidArgument, who, "need logits for at least one token, got n_vocab=" + std::to_string(n_vocab));
  double m = -INFINITY;
  for (int64_t i = 0; i < n_vocab; ++i)
    if (!std::isnan(logits[i])) m = std::max(m, double{logits[i]});
  if (m == -INFINITY || m == INFINITY)
    fail(ErrorKind::InvalidArgument, who, "logits are all -inf / NaN or contain +inf: no distribution");
  const float mf = static_cast<float>(m);
  double z = 0;  // exp in float, sum in double
  for (int64_t i = 0; i < n_vocab; ++i)
    if (!std::isnan(logits[i])) z += std::exp(logits[i] - mf);
  *max = m;
  *lse = std::log(z);
}

float logprob_of(float l, double m, double lse) {
  if (std::isnan(l) || l == -INFINITY) return -INFINITY;
  return static_cast<float>(l - m - lse);
}

}  // namespace

std::vector<TokenLogprob> top_logprobs(const float* logits, int64_t n_vocab, int n) {
  if (n < 0 || n > kMaxTopLogprobs)
    fail(ErrorKind::InvalidArgument, "top_logprobs", "n must be in [0, 20], got " + std::to_string(n));
  double m, lse;
  log_normaliser(logits, n_vocab, "top_logprobs", &m, &lse);
  const int64_t k = std::min<int64_t>(n, n_vocab);
  std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
  for (int64_t i = 0; i < n_vocab; ++i) ids[i] = static_cast<int32_t>(i);
  auto key = [&](int32_t i) { return std::isnan(logits[i]) ? -INFINITY : logits[i]; };
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return key(a) > key(b) || (key(a) == key(b) && a < b);
  });
  std::vector<TokenLogprob> out;
  for (int64_t i = 0; i < k; ++i) out.push_back({ids[i], logprob_of(logits[ids[i]], m, lse)});
  return out;
}

float token_logprob(const float* logits, int64_t n_vocab, int32_t token) {
  if (token < 0 || token >= n_vocab)
    fail(ErrorKind::InvalidArgument, "token_logprob",
         "token " + std::to_string(token) + " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
  double m, lse;
  log_normaliser(logits, n_vocab, "token_logprob", &m, &lse);
  return logprob_of(logits[token], m, lse);
}

}  // namespace ptn
