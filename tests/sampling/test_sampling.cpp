// Samplers: exact kept sets for top-k / top-p / min-p, empirical frequencies against the
// renormalised probabilities, penalties and biases on exactly the right logits, seeded
// reproducibility, validation of every field, and log probabilities.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"
#include "sampling/sampling_params.h"

namespace ptn {
namespace {

// Logits log(p) for the given probabilities (which sum to 1).
std::vector<float> logits_of(const std::vector<double>& p) {
  std::vector<float> l;
  for (double x : p) l.push_back(static_cast<float>(std::log(x)));
  return l;
}

std::set<int32_t> kept_ids(Sampler& s, const std::vector<float>& logits) {
  Candidates c = Candidates::from_logits(logits.data(), static_cast<int64_t>(logits.size()));
  s.apply(c);
  std::set<int32_t> ids;
  for (const auto& t : c.items) ids.insert(t.id);
  return ids;
}

// Probabilities in a shuffled id order: id 3 -> 0.5, 0 -> 0.2, 4 -> 0.15, 1 -> 0.1, 2 -> 0.05.
const std::vector<double> kProbs = {0.2, 0.1, 0.05, 0.5, 0.15};

TEST(Sampling, GreedyPicksArgmaxLowestIdOnTies) {
  GreedySampler g;
  std::vector<float> l = {1, 5, 3, 5, -2};
  Candidates c = Candidates::from_logits(l.data(), 5);
  g.apply(c);
  EXPECT_EQ(c.items[c.selected].id, 1);
  SamplingParams p;
  p.temperature = 0;
  for (uint64_t seed : {1u, 2u, 3u}) {
    p.seed = seed;
    auto chain = make_sampler_chain(p, 5);
    EXPECT_EQ(chain->sample(l.data(), 5), 1);
  }
}

TEST(Sampling, TopKKeepsExactlyTheKHighest) {
  std::vector<float> l(100);
  for (int i = 0; i < 100; ++i) l[i] = static_cast<float>((i * 37) % 100);  // a permutation of 0..99
  for (int64_t k : {1, 2, 7, 99, 100}) {
    TopKSampler s(k);
    std::set<int32_t> want;
    for (int i = 0; i < 100; ++i)
      if (l[i] >= 100 - k) want.insert(i);
    EXPECT_EQ(kept_ids(s, l), want) << k;
  }
  TopKSampler big(1000);
  EXPECT_EQ(kept_ids(big, l).size(), 100u);
}

TEST(Sampling, TopPKeepsTheSmallestSetReachingP) {
  const auto l = logits_of(kProbs);
  const std::pair<float, std::set<int32_t>> cases[] = {
      {0.45f, {3}}, {0.69f, {3, 0}}, {0.71f, {3, 0, 4}}, {0.86f, {3, 0, 4, 1}}, {0.99f, {3, 0, 4, 1, 2}}, {1.0f, {0, 1, 2, 3, 4}}};
  for (const auto& [p, want] : cases) {
    TopPSampler s(p);
    EXPECT_EQ(kept_ids(s, l), want) << p;
  }
  // Flat over 1000 tokens: 0.3001 needs 301 of them (more than the first sorted prefix).
  std::vector<float> flat(1000, 0.0f);
  TopPSampler s(0.3001f);
  EXPECT_EQ(kept_ids(s, flat).size(), 301u);
}

TEST(Sampling, MinPKeepsTokensAboveFractionOfMax) {
  const auto l = logits_of(kProbs);
  MinPSampler a(0.25f);  // threshold 0.125
  EXPECT_EQ(kept_ids(a, l), (std::set<int32_t>{3, 0, 4}));
  MinPSampler b(0.35f);  // 0.175
  EXPECT_EQ(kept_ids(b, l), (std::set<int32_t>{3, 0}));
  MinPSampler c(1.0f);
  EXPECT_EQ(kept_ids(c, l), (std::set<int32_t>{3}));
  MinPSampler off(0.0f);
  EXPECT_EQ(kept_ids(off, l).size(), 5u);
}

// Frequencies of n draws from a chain over fixed logits.
std::vector<double> frequencies(const SamplingParams& p, const std::vector<float>& l, int n) {
  auto chain = make_sampler_chain(p, static_cast<int64_t>(l.size()));
  std::vector<double> f(l.size(), 0.0);
  for (int i = 0; i < n; ++i) f[chain->sample(l.data(), static_cast<int64_t>(l.size()))] += 1.0 / n;
  return f;
}

TEST(Sampling, EmpiricalFrequenciesMatchRenormalisedProbabilities) {
  const auto l = logits_of(kProbs);
  const int n = 40000;
  const double tol = 0.01;  // > 4 standard deviations of a frequency at n = 40000
  SamplingParams p;
  p.seed = 42;
  auto f = frequencies(p, l, n);
  for (size_t i = 0; i < kProbs.size(); ++i) EXPECT_NEAR(f[i], kProbs[i], tol) << i;

  p.top_k = 3;  // {3, 0, 4}: 0.5, 0.2, 0.15 renormalised by 0.85
  f = frequencies(p, l, n);
  EXPECT_NEAR(f[3], 0.5 / 0.85, tol);
  EXPECT_NEAR(f[0], 0.2 / 0.85, tol);
  EXPECT_NEAR(f[4], 0.15 / 0.85, tol);
  EXPECT_EQ(f[1] + f[2], 0.0);

  p.top_k = 0;
  p.top_p = 0.69f;  // {3, 0}
  f = frequencies(p, l, n);
  EXPECT_NEAR(f[3], 0.5 / 0.7, tol);
  EXPECT_NEAR(f[0], 0.2 / 0.7, tol);
  EXPECT_EQ(f[1] + f[2] + f[4], 0.0);

  p.top_p = 1.0f;
  p.min_p = 0.25f;  // {3, 0, 4}
  f = frequencies(p, l, n);
  EXPECT_NEAR(f[4], 0.15 / 0.85, tol);
  EXPECT_EQ(f[1] + f[2], 0.0);

  p.min_p = 0.0f;
  p.temperature = 2.0f;  // p^(1/2) renormalised
  double z = 0;
  for (double q : kProbs) z += std::sqrt(q);
  f = frequencies(p, l, n);
  for (size_t i = 0; i < kProbs.size(); ++i) EXPECT_NEAR(f[i], std::sqrt(kProbs[i]) / z, tol) << i;
}

TEST(Sampling, PenaltiesChangeExactlyTheSeenLogits) {
  std::vector<float> l = {0.5f, 2.0f, -1.0f, 3.0f, 0.0f, -4.0f};
  PenaltySampler s(1.5f, 0.5f, 0.25f, 0);
  for (int32_t t : {3, 3, 5}) s.accept(t);
  Candidates c = Candidates::from_logits(l.data(), 6);
  s.apply(c);
  EXPECT_EQ(c.items[0].logit, 0.5f);
  EXPECT_EQ(c.items[1].logit, 2.0f);
  EXPECT_EQ(c.items[2].logit, -1.0f);
  EXPECT_EQ(c.items[4].logit, 0.0f);
  EXPECT_FLOAT_EQ(c.items[3].logit, 3.0f / 1.5f - (2 * 0.25f + 0.5f));  // seen twice, positive
  EXPECT_FLOAT_EQ(c.items[5].logit, -4.0f * 1.5f - (0.25f + 0.5f));   // seen once, negative

  // Only the last 2 tokens count: history {3, 5}.
  PenaltySampler w(1.0f, 0.0f, 1.0f, 2);
  for (int32_t t : {3, 3, 5}) w.accept(t);
  Candidates c2 = Candidates::from_logits(l.data(), 6);
  w.apply(c2);
  EXPECT_FLOAT_EQ(c2.items[3].logit, 2.0f);
  EXPECT_FLOAT_EQ(c2.items[5].logit, -5.0f);
  EXPECT_EQ(c2.items[1].logit, 2.0f);
  w.reset();
  Candidates c3 = Candidates::from_logits(l.data(), 6);
  w.apply(c3);
  EXPECT_EQ(c3.items[3].logit, 3.0f);

  // Also correct after the candidates were reordered (no id == index shortcut).
  Candidates c4 = Candidates::from_logits(l.data(), 6);
  c4.sort_desc();
  s.apply(c4);
  for (const auto& t : c4.items) {
    if (t.id == 3) {
      EXPECT_FLOAT_EQ(t.logit, 1.0f);
    }
  }

  // Through the chain: accept() reaches the penalty sampler.
  SamplingParams p;
  p.temperature = 0;
  p.frequency_penalty = 2.0f;
  auto chain = make_sampler_chain(p, 6);
  EXPECT_EQ(chain->sample(l.data(), 6), 3);
  chain->accept(3);
  EXPECT_EQ(chain->sample(l.data(), 6), 1);  // 3 - 2 = 1 < 2
}

TEST(Sampling, LogitBiasAndBans) {
  std::vector<float> l = {1.0f, 2.0f, 3.0f};
  LogitBiasSampler b({{0, 5.0f}, {2, -INFINITY}});
  Candidates c = Candidates::from_logits(l.data(), 3);
  b.apply(c);
  EXPECT_EQ(c.items[0].logit, 6.0f);
  EXPECT_EQ(c.items[1].logit, 2.0f);
  EXPECT_EQ(c.items[2].logit, -INFINITY);
  SamplingParams p;
  p.logit_bias = {{2, -INFINITY}};
  p.seed = 7;
  const auto f = frequencies(p, l, 2000);
  EXPECT_EQ(f[2], 0.0);
  EXPECT_GT(f[1], 0.5);
  // Banning everything is an error, not a silent pick.
  p.logit_bias = {{0, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}};
  auto chain = make_sampler_chain(p, 3);
  EXPECT_THROW(chain->sample(l.data(), 3), Error);
  p.temperature = 0;
  auto greedy = make_sampler_chain(p, 3);
  EXPECT_THROW(greedy->sample(l.data(), 3), Error);
}

TEST(Sampling, ReproduciblePerSeed) {
  std::vector<float> l(50);
  for (int i = 0; i < 50; ++i) l[i] = static_cast<float>(std::sin(i));
  auto run = [&](uint64_t seed) {
    SamplingParams p;
    p.seed = seed;
    p.top_p = 0.95f;
    auto chain = make_sampler_chain(p, 50);
    std::vector<int32_t> out;
    for (int i = 0; i < 200; ++i) out.push_back(chain->sample(l.data(), 50));
    chain->reset();
    for (int i = 0; i < 200; ++i) EXPECT_EQ(chain->sample(l.data(), 50), out[i]) << "after reset";
    return out;
  };
  EXPECT_EQ(run(1234), run(1234));
  EXPECT_NE(run(1234), run(1235));
  // The first draws for seed 1 are pinned: the draw must not depend on the C++ library.
  SamplingParams p;
  p.seed = 1;
  std::vector<float> uniform(1000, 0.0f);
  auto chain = make_sampler_chain(p, 1000);
  std::mt19937_64 rng(1);
  for (int i = 0; i < 5; ++i) {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    EXPECT_EQ(chain->sample(uniform.data(), 1000), static_cast<int32_t>(u * 1000)) << i;
  }
}

TEST(Sampling, PathologicalLogits) {
  std::vector<float> l = {NAN, 1.0f, NAN, 0.5f};
  SamplingParams p;
  p.seed = 3;
  const auto f = frequencies(p, l, 1000);
  EXPECT_EQ(f[0] + f[2], 0.0);  // NaN is never drawn
  std::vector<float> inf = {1.0f, INFINITY, 2.0f, INFINITY};
  const auto g = frequencies(p, inf, 1000);
  EXPECT_EQ(g[0] + g[2], 0.0);
  EXPECT_NEAR(g[1], 0.5, 0.1);
  std::vector<float> all_nan = {NAN, NAN};
  auto chain = make_sampler_chain(p, 2);
  EXPECT_THROW(chain->sample(all_nan.data(), 2), Error);
  EXPECT_THROW(chain->sample(l.data(), 0), Error);
  // A tiny temperature with negative logits is (almost) greedy, not an overflow to all -inf.
  std::vector<float> neg = {-5.0f, -3.0f, -4.0f};
  SamplingParams cold;
  cold.temperature = 1e-30f;
  EXPECT_EQ(make_sampler_chain(cold, 3)->sample(neg.data(), 3), 1);
  cold.temperature = 1e30f;  // huge: uniform, still valid
  const auto hot = frequencies(cold, neg, 3000);
  for (double x : hot) EXPECT_NEAR(x, 1.0 / 3, 0.05);
  // A vocabulary of one token.
  std::vector<float> one = {-3.0f};
  p.top_k = 5;
  p.top_p = 0.1f;
  p.min_p = 0.9f;
  EXPECT_EQ(make_sampler_chain(p, 1)->sample(one.data(), 1), 0);
  // A chain without a final picker says so.
  SamplerChain bare;
  bare.add(std::make_unique<TopKSampler>(2));
  EXPECT_THROW(bare.sample(l.data(), 4), Error);
}

void expect_field_error(const SamplingParams& p, const char* field) {
  try {
    validate_sampling_params(p, 100);
    ADD_FAILURE() << "no error for " << field;
  } catch (const Error& e) {
    EXPECT_EQ(e.where(), std::string("sampling.") + field) << e.what();
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
  }
}

TEST(Sampling, ValidationNamesTheField) {
  auto with = [](auto set) {
    SamplingParams p;
    set(p);
    return p;
  };
  expect_field_error(with([](SamplingParams& p) { p.temperature = NAN; }), "temperature");
  expect_field_error(with([](SamplingParams& p) { p.temperature = -0.5f; }), "temperature");
  expect_field_error(with([](SamplingParams& p) { p.temperature = INFINITY; }), "temperature");
  expect_field_error(with([](SamplingParams& p) { p.top_p = 0.0f; }), "top_p");
  expect_field_error(with([](SamplingParams& p) { p.top_p = 1.5f; }), "top_p");
  expect_field_error(with([](SamplingParams& p) { p.top_p = NAN; }), "top_p");
  expect_field_error(with([](SamplingParams& p) { p.top_k = -1; }), "top_k");
  expect_field_error(with([](SamplingParams& p) { p.min_p = -0.1f; }), "min_p");
  expect_field_error(with([](SamplingParams& p) { p.min_p = 1.1f; }), "min_p");
  expect_field_error(with([](SamplingParams& p) { p.min_p = NAN; }), "min_p");
  expect_field_error(with([](SamplingParams& p) { p.repetition_penalty = 0.0f; }), "repetition_penalty");
  expect_field_error(with([](SamplingParams& p) { p.repetition_penalty = NAN; }), "repetition_penalty");
  expect_field_error(with([](SamplingParams& p) { p.presence_penalty = 2.5f; }), "presence_penalty");
  expect_field_error(with([](SamplingParams& p) { p.presence_penalty = NAN; }), "presence_penalty");
  expect_field_error(with([](SamplingParams& p) { p.frequency_penalty = -INFINITY; }), "frequency_penalty");
  expect_field_error(with([](SamplingParams& p) { p.penalty_last_n = -2; }), "penalty_last_n");
  expect_field_error(with([](SamplingParams& p) { p.logit_bias = {{100, 1.0f}}; }), "logit_bias");
  expect_field_error(with([](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; }), "logit_bias");
  expect_field_error(with([](SamplingParams& p) { p.logit_bias = {{5, NAN}}; }), "logit_bias");
  expect_field_error(with([](SamplingParams& p) { p.logit_bias = {{5, INFINITY}}; }), "logit_bias");
  expect_field_error(with([](SamplingParams& p) { p.logit_bias = {{5, 101.0f}}; }), "logit_bias");
  // Accepted edge values; top_k beyond the vocabulary is clamped.
  SamplingParams ok;
  ok.temperature = 0;
  ok.top_p = 1.0f;
  ok.min_p = 1.0f;
  ok.top_k = 1000000;
  ok.presence_penalty = -2;
  ok.logit_bias = {{99, -INFINITY}, {0, -100.0f}};
  EXPECT_EQ(validate_sampling_params(ok, 100).top_k, 100);
}

TEST(Sampling, ChainOrderAndNames) {
  SamplingParams p;
  p.logit_bias = {{1, 1.0f}};
  p.presence_penalty = 0.5f;
  p.temperature = 0.7f;
  p.top_k = 40;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  EXPECT_EQ(make_sampler_chain(p, 100)->name(),
            "chain(logit_bias,penalties,temperature,top_k,top_p,min_p,dist)");
  p.temperature = 0;
  EXPECT_EQ(make_sampler_chain(p, 100)->name(), "chain(logit_bias,penalties,greedy)");
  EXPECT_EQ(make_sampler_chain(SamplingParams{}, 100)->name(), "chain(dist)");
}

TEST(Logprobs, TopNOfUnmodifiedLogits) {
  std::vector<float> l = {0.1f, 2.0f, -1.0f, 2.0f, NAN, 0.7f};
  double z = 0;
  for (float x : l)
    if (!std::isnan(x)) z += std::exp(double{x});
  auto top = top_logprobs(l.data(), 6, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].id, 1);  // tie with 3: lower id first
  EXPECT_EQ(top[1].id, 3);
  EXPECT_EQ(top[2].id, 5);
  EXPECT_NEAR(top[0].logprob, 2.0 - std::log(z), 1e-6);
  EXPECT_NEAR(top[2].logprob, 0.7 - std::log(z), 1e-6);
  EXPECT_NEAR(token_logprob(l.data(), 6, 2), -1.0 - std::log(z), 1e-6);
  EXPECT_EQ(token_logprob(l.data(), 6, 4), -INFINITY);
  EXPECT_EQ(top_logprobs(l.data(), 6, 20).size(), 6u);  // at most the vocabulary
  EXPECT_TRUE(top_logprobs(l.data(), 6, 0).empty());
  // Probabilities of all tokens sum to 1.
  double s = 0;
  for (const auto& t : top_logprobs(l.data(), 6, 6)) s += std::exp(double{t.logprob});
  EXPECT_NEAR(s, 1.0, 1e-6);
  EXPECT_THROW(top_logprobs(l.data(), 6, 21), Error);
  EXPECT_THROW(top_logprobs(l.data(), 6, -1), Error);
  EXPECT_THROW(token_logprob(l.data(), 6, 6), Error);
  std::vector<float> bad = {-INFINITY, NAN};
  EXPECT_THROW(top_logprobs(bad.data(), 2, 1), Error);
}

}  // namespace
}  // namespace ptn
