// Token samplers. A sampler transforms a candidate list (token ids with logits) in its one
// hook, apply(); a chain of samplers is itself a sampler. The last sampler of a chain picks a
// token (greedy or a seeded random draw) by setting Candidates::selected.
//
//   SamplerChain chain = make_sampler_chain(params, vocab);   // sampling_params.h
//   for each step:  int32_t tok = chain.sample(logits, vocab);  chain.accept(tok);
//
// Samplers that need the history (penalties) see every accepted token through accept();
// reset() forgets it (and reseeds the random draw) for a new request.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

namespace ptn {

struct TokenCandidate {
  int32_t id = 0;
  float logit = 0.0f;
};

struct Candidates {
  std::vector<TokenCandidate> items;  // the tokens still allowed (samplers may remove some)
  bool sorted = false;                // items sorted by logit, highest first
  int64_t selected = -1;              // index into items once a sampler has picked a token

  // All n_vocab tokens with their logits (NaN logits become -inf: never drawn).
  static Candidates from_logits(const float* logits, int64_t n_vocab);
  // The same in place, reusing the storage of items (no allocation after the first call).
  void assign_logits(const float* logits, int64_t n_vocab);
  void sort_desc();  // sorts by logit (ties: lower id first) and sets sorted
  // softmax of the current logits, in the order of items (double, max-subtracted). Entries of
  // -inf get 0; +inf entries share all the mass. Throws InvalidArgument (naming `who`) when
  // every candidate is -inf (e.g. every token banned).
  std::vector<double> probs(const char* who) const;
  void probs(const char* who, std::vector<double>* out) const;  // into a reused buffer
};

class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::string name() const = 0;
  virtual void apply(Candidates& c) = 0;
  virtual void accept(int32_t /*token*/) {}
  virtual void reset() {}
};

// Picks the highest logit (ties: the lowest id).
class GreedySampler : public Sampler {
 public:
  std::string name() const override { return "greedy"; }
  void apply(Candidates& c) override;
};

// Divides logits by t (t > 0), after subtracting the maximum logit (same distribution; keeps a
// tiny t from overflowing every logit).
class TemperatureSampler : public Sampler {
 public:
  explicit TemperatureSampler(float t);
  std::string name() const override { return "temperature"; }
  void apply(Candidates& c) override;

 private:
  float t_;
};

// Keeps the k highest logits (k >= 1; ties at the boundary broken by lower id).
class TopKSampler : public Sampler {
 public:
  explicit TopKSampler(int64_t k);
  std::string name() const override { return "top_k"; }
  void apply(Candidates& c) override;

 private:
  int64_t k_;
};

// Keeps the smallest set of most probable tokens whose probabilities sum to >= p (0 < p <= 1;
// always at least one token).
class TopPSampler : public Sampler {
 public:
  explicit TopPSampler(float p);
  std::string name() const override { return "top_p"; }
  void apply(Candidates& c) override;

 private:
  float p_;
};

// Keeps tokens whose probability is >= p * (the highest probability), 0 <= p <= 1.
class MinPSampler : public Sampler {
 public:
  explicit MinPSampler(float p);
  std::string name() const override { return "min_p"; }
  void apply(Candidates& c) override;

 private:
  float p_;
};

// Penalties over the tokens accepted so far (the last `last_n` of them; 0 = all), for a token
// seen c > 0 times:
//   repetition (CTRL / HF): logit > 0 ? logit / r : logit * r        (r = 1: off)
//   OpenAI: logit -= c * frequency + presence
class PenaltySampler : public Sampler {
 public:
  PenaltySampler(float repetition, float presence, float frequency, int64_t last_n);
  std::string name() const override { return "penalties"; }
  void apply(Candidates& c) override;
  void accept(int32_t token) override;
  void reset() override;

 private:
  float repetition_, presence_, frequency_;
  int64_t last_n_;
  std::deque<int32_t> history_;                // the last last_n accepted tokens (unused if 0)
  std::unordered_map<int32_t, int64_t> count_;  // counts over history_
};

// Adds a bias per token id; -inf bans a token.
class LogitBiasSampler : public Sampler {
 public:
  explicit LogitBiasSampler(std::map<int32_t, float> bias);
  std::string name() const override { return "logit_bias"; }
  void apply(Candidates& c) override;

 private:
  std::map<int32_t, float> bias_;
};

// Draws one token from the softmax of the current logits with a 64-bit Mersenne Twister
// seeded with `seed` (reset() reseeds, so a request replays exactly for the same seed). The
// uniform variate is (rng() >> 11) * 2^-53, so draws do not depend on the C++ library.
class DistSampler : public Sampler {
 public:
  explicit DistSampler(uint64_t seed);
  std::string name() const override { return "dist"; }
  void apply(Candidates& c) override;
  void reset() override;

 private:
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::vector<double> p_;  // probabilities of the last draw (kept to avoid reallocating)
};

class SamplerChain : public Sampler {
 public:
  SamplerChain() = default;
  void add(std::unique_ptr<Sampler> s);
  std::string name() const override;  // "chain(a,b,...)"
  void apply(Candidates& c) override;  // every sampler in order
  void accept(int32_t token) override;
  void reset() override;
  size_t size() const { return samplers_.size(); }

  // Candidates from the logits, apply(), and the selected token id. Throws InvalidArgument if
  // no sampler selected a token (a chain must end with GreedySampler or DistSampler).
  int32_t sample(const float* logits, int64_t n_vocab);

 private:
  std::vector<std::unique_ptr<Sampler>> samplers_;
  Candidates scratch_;  // reused by sample()
};

}  // namespace ptn
