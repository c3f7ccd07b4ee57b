// The samplers of sampler.h.
#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"

namespace ptn {

namespace {

bool higher(const TokenCandidate& a, const TokenCandidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

[[noreturn]] void bad(const std::string& who, const std::string& msg) {
  fail(ErrorKind::InvalidArgument, who, msg);
}

// Applies fn(logit&) to the candidate with token id `id`, if present. Candidates built by
// from_logits and not yet reordered hold id i at index i, which makes this O(1); otherwise
// it scans.
template <class F>
void with_token(Candidates& c, int32_t id, F fn) {
  if (id >= 0 && static_cast<size_t>(id) < c.items.size() && c.items[id].id == id) {
    fn(c.items[id].logit);
    return;
  }
  for (auto& t : c.items)
    if (t.id == id) fn(t.logit);
}

}  // namespace

// ---- Candidates ----

Candidates Candidates::from_logits(const float* logits, int64_t n_vocab) {
  Candidates c;
  c.assign_logits(logits, n_vocab);
  return c;
}

void Candidates::assign_logits(const float* logits, int64_t n_vocab) {
  if (n_vocab < 1 || logits == nullptr)
    bad("sampling", "need logits for at least one token, got n_vocab=" + std::to_string(n_vocab));
  if (n_vocab > std::numeric_limits<int32_t>::max())
    bad("sampling", "n_vocab=" + std::to_string(n_vocab) + " does not fit token ids");
  items.resize(static_cast<size_t>(n_vocab));
  for (int64_t i = 0; i < n_vocab; ++i) {
    const float l = logits[i];
    items[i] = {static_cast<int32_t>(i), std::isnan(l) ? -INFINITY : l};
  }
  sorted = false;
  selected = -1;
}

void Candidates::sort_desc() {
  if (!sorted) std::sort(items.begin(), items.end(), higher);
  sorted = true;
}

std::vector<double> Candidates::probs(const char* who) const {
  std::vector<double> p;
  probs(who, &p);
  return p;
}

void Candidates::probs(const char* who, std::vector<double>* out) const {
  std::vector<double>& p = *out;
  p.assign(items.size(), 0.0);
  float m = -INFINITY;
  for (const auto& t : items) m = std::max(m, t.logit);
  if (items.empty() || m == -INFINITY)
    bad(who, "no token can be sampled: every candidate has probability 0 (all banned?)");
  if (m == INFINITY) {  // +inf logits share the mass
    size_t n = 0;
    for (const auto& t : items) n += t.logit == INFINITY;
    for (size_t i = 0; i < items.size(); ++i) p[i] = items[i].logit == INFINITY ? 1.0 / n : 0.0;
    return;
  }
  // exp in float (relative error ~1e-7, far below any sampling tolerance), sums in double.
  double z = 0;
  for (size_t i = 0; i < items.size(); ++i) z += (p[i] = std::exp(items[i].logit - m));
  for (double& x : p) x /= z;
}

// ---- samplers ----

void GreedySampler::apply(Candidates& c) {
  if (c.items.empty()) bad("greedy", "no candidates");
  size_t best = 0;
  for (size_t i = 1; i < c.items.size(); ++i)
    if (higher(c.items[i], c.items[best])) best = i;
  if (c.items[best].logit == -INFINITY) bad("greedy", "no token can be sampled: every candidate is banned");
  c.selected = static_cast<int64_t>(best);
}

TemperatureSampler::TemperatureSampler(float t) : t_(t) {
  if (!std::isfinite(t) || t <= 0) bad("temperature", "must be finite and > 0, got " + std::to_string(t));
}

void TemperatureSampler::apply(Candidates& c) {
  // (l - max) / t: the same distribution as l / t, but a tiny t cannot push every logit to
  // -inf (all negative logits) or several to +inf; the best token stays at 0.
  float m = -INFINITY;
  for (const auto& t : c.items) m = std::max(m, t.logit);
  const float shift = std::isfinite(m) ? m : 0.0f;
  for (auto& t : c.items) t.logit = (t.logit - shift) / t_;
}

TopKSampler::TopKSampler(int64_t k) : k_(k) {
  if (k < 1) bad("top_k", "must be >= 1, got " + std::to_string(k));
}

void TopKSampler::apply(Candidates& c) {
  if (static_cast<int64_t>(c.items.size()) <= k_) return;
  if (!c.sorted) std::partial_sort(c.items.begin(), c.items.begin() + k_, c.items.end(), higher);
  c.items.resize(static_cast<size_t>(k_));
  c.sorted = true;
}

TopPSampler::TopPSampler(float p) : p_(p) {
  if (!(p > 0 && p <= 1)) bad("top_p", "must be in (0, 1], got " + std::to_string(p));
}

void TopPSampler::apply(Candidates& c) {
  if (p_ >= 1.0f || c.items.size() <= 1) return;
  // Softmax normaliser over all candidates, then a sorted prefix grown until it holds p.
  double m = -INFINITY;
  for (const auto& t : c.items) m = std::max(m, double{t.logit});
  if (m == -INFINITY || m == INFINITY) return;  // nothing meaningful to cut; the draw decides
  double z = 0;
  for (const auto& t : c.items) z += std::exp(t.logit - m);
  size_t k = std::min<size_t>(c.items.size(), 256);
  for (;;) {
    if (!c.sorted) std::partial_sort(c.items.begin(), c.items.begin() + k, c.items.end(), higher);
    double cum = 0;
    for (size_t i = 0; i < k; ++i) {
      cum += std::exp(c.items[i].logit - m) / z;
      if (cum >= p_) {
        c.items.resize(i + 1);
        c.sorted = true;
        return;
      }
    }
    if (k == c.items.size()) return;  // rounding kept the sum below p: keep everything
    k = std::min(c.items.size(), k * 4);
  }
}

MinPSampler::MinPSampler(float p) : p_(p) {
  if (!(p >= 0 && p <= 1)) bad("min_p", "must be in [0, 1], got " + std::to_string(p));
}

void MinPSampler::apply(Candidates& c) {
  if (p_ <= 0.0f || c.items.empty()) return;
  double m = -INFINITY;
  for (const auto& t : c.items) m = std::max(m, double{t.logit});
  if (m == -INFINITY || m == INFINITY) return;
  // p_i / p_max = exp(l_i - max) >= min_p  <=>  l_i >= max + ln(min_p)
  const double cut = m + std::log(double{p_});
  std::erase_if(c.items, [&](const TokenCandidate& t) { return double{t.logit} < cut; });
}

PenaltySampler::PenaltySampler(float repetition, float presence, float frequency, int64_t last_n)
    : repetition_(repetition), presence_(presence), frequency_(frequency), last_n_(last_n) {
  if (!std::isfinite(repetition) || repetition <= 0)
    bad("repetition_penalty", "must be finite and > 0, got " + std::to_string(repetition));
  if (!std::isfinite(presence)) bad("presence_penalty", "must be finite");
  if (!std::isfinite(frequency)) bad("frequency_penalty", "must be finite");
  if (last_n < 0) bad("penalty_last_n", "must be >= 0 (0 = all tokens), got " + std::to_string(last_n));
}

void PenaltySampler::apply(Candidates& c) {
  for (const auto& entry : count_) {  // not a structured binding: clang 14 cannot capture those
    const int32_t id = entry.first;
    const auto n = entry.second;
    if (n <= 0) continue;
    with_token(c, id, [&](float& l) {
      if (repetition_ != 1.0f) l = l > 0 ? l / repetition_ : l * repetition_;
      l -= static_cast<float>(n) * frequency_ + presence_;
    });
  }
}

void PenaltySampler::accept(int32_t token) {
  ++count_[token];
  if (last_n_ == 0) return;  // all tokens count: the counts are all that is needed
  history_.push_back(token);
  if (static_cast<int64_t>(history_.size()) > last_n_) {
    const int32_t old = history_.front();
    history_.pop_front();
    if (--count_[old] == 0) count_.erase(old);
  }
}

void PenaltySampler::reset() {
  history_.clear();
  count_.clear();
}

LogitBiasSampler::LogitBiasSampler(std::map<int32_t, float> bias) : bias_(std::move(bias)) {
  for (const auto& [id, b] : bias_)
    if (std::isnan(b) || b == INFINITY)
      bad("logit_bias", "bias for token " + std::to_string(id) + " must be finite or -inf");
}

void LogitBiasSampler::apply(Candidates& c) {
  for (const auto& entry : bias_) {
    const float b = entry.second;
    with_token(c, entry.first, [&](float& l) { l += b; });
  }
}

DistSampler::DistSampler(uint64_t seed) : seed_(seed), rng_(seed) {}

void DistSampler::reset() { rng_.seed(seed_); }

void DistSampler::apply(Candidates& c) {
  c.probs("dist", &p_);
  const std::vector<double>& p = p_;
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;  // uniform in [0, 1)
  double cum = 0;
  int64_t last = -1;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) continue;
    last = static_cast<int64_t>(i);
    cum += p[i];
    if (u < cum) {
      c.selected = last;
      return;
    }
  }
  c.selected = last;  // u beyond a sum rounded below 1
}

// ---- chain ----

void SamplerChain::add(std::unique_ptr<Sampler> s) {
  if (!s) bad("sampler chain", "null sampler");
  samplers_.push_back(std::move(s));
}

std::string SamplerChain::name() const {
  std::string n = "chain(";
  for (size_t i = 0; i < samplers_.size(); ++i) n += (i ? "," : "") + samplers_[i]->name();
  return n + ")";
}

void SamplerChain::apply(Candidates& c) {
  for (auto& s : samplers_) s->apply(c);
}

void SamplerChain::accept(int32_t token) {
  for (auto& s : samplers_) s->accept(token);
}

void SamplerChain::reset() {
  for (auto& s : samplers_) s->reset();
}

int32_t SamplerChain::sample(const float* logits, int64_t n_vocab) {
  Candidates& c = scratch_;
  c.assign_logits(logits, n_vocab);
  apply(c);
  if (c.selected < 0 || c.selected >= static_cast<int64_t>(c.items.size()))
    fail(ErrorKind::InvalidArgument, "sampler chain",
         name() + " selected no token: end the chain with greedy or dist");
  return c.items[static_cast<size_t>(c.selected)].id;
}

}  // namespace ptn
