#include "sampling/sampling_params.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "core/error.h"

namespace ptn {

namespace {
[[noreturn]] void bad_field(const char* field, const std::string& msg) {
  fail(ErrorKind::InvalidArgument, std::string("sampling.") + field, msg);
}
std::string str(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
}  // namespace

SamplingParams validate_sampling_params(const SamplingParams& p, int64_t n_vocab) {
  if (n_vocab < 1) bad_field("n_vocab", "the vocabulary is empty");
  SamplingParams out = p;
  if (!std::isfinite(p.temperature) || p.temperature < 0)
    bad_field("temperature", "must be a finite number >= 0, got " + str(p.temperature));
  if (p.top_k < 0) bad_field("top_k", "must be >= 0 (0 = off), got " + std::to_string(p.top_k));
  if (p.top_k > n_vocab) out.top_k = n_vocab;
  if (!(p.top_p > 0 && p.top_p <= 1))  // also rejects NaN
    bad_field("top_p", "must be in (0, 1], got " + str(p.top_p));
  if (!(p.min_p >= 0 && p.min_p <= 1)) bad_field("min_p", "must be in [0, 1], got " + str(p.min_p));
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0)
    bad_field("repetition_penalty", "must be a finite number > 0, got " + str(p.repetition_penalty));
  if (!(p.presence_penalty >= -2 && p.presence_penalty <= 2))
    bad_field("presence_penalty", "must be in [-2, 2], got " + str(p.presence_penalty));
  if (!(p.frequency_penalty >= -2 && p.frequency_penalty <= 2))
    bad_field("frequency_penalty", "must be in [-2, 2], got " + str(p.frequency_penalty));
  if (p.penalty_last_n < 0)
    bad_field("penalty_last_n", "must be >= 0 (0 = all), got " + std::to_string(p.penalty_last_n));
  for (const auto& [id, b] : p.logit_bias) {
    if (id < 0 || id >= n_vocab)
      bad_field("logit_bias", "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                  std::to_string(n_vocab) + ")");
    if (!(b == -INFINITY || (b >= -100 && b <= 100)))
      bad_field("logit_bias", "bias " + str(b) + " for token " + std::to_string(id) +
                                  " must be in [-100, 100] or -inf");
  }
  return out;
}

std::unique_ptr<SamplerChain> make_sampler_chain(const SamplingParams& params, int64_t n_vocab) {
  const SamplingParams p = validate_sampling_params(params, n_vocab);
  auto chain = std::make_unique<SamplerChain>();
  if (!p.logit_bias.empty()) chain->add(std::make_unique<LogitBiasSampler>(p.logit_bias));
  if (p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f)
    chain->add(std::make_unique<PenaltySampler>(p.repetition_penalty, p.presence_penalty,
                                                p.frequency_penalty, p.penalty_last_n));
  if (p.temperature == 0.0f) {
    chain->add(std::make_unique<GreedySampler>());
    return chain;
  }
  if (p.temperature != 1.0f) chain->add(std::make_unique<TemperatureSampler>(p.temperature));
  if (p.top_k > 0 && p.top_k < n_vocab) chain->add(std::make_unique<TopKSampler>(p.top_k));
  if (p.top_p < 1.0f) chain->add(std::make_unique<TopPSampler>(p.top_p));
  if (p.min_p > 0.0f) chain->add(std::make_unique<MinPSampler>(p.min_p));
  chain->add(std::make_unique<DistSampler>(p.seed));
  return chain;
}

}  // namespace ptn
