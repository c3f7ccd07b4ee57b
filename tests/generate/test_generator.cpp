// The Generator and its stop rules on the stories260K tokenizer with made-up logits: each step's
// logits put one chosen token on top, so the expected tokens and text are known exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/error.h"
#include "generate/generator.h"
#include "generate/stop_strings.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer.h"

using namespace ptn;
using namespace ptn::gen;

namespace {

TEST(StopStrings, HoldsBackPossibleStarts) {
  StopStrings f({"\nUser:"});
  bool hit = false;
  EXPECT_EQ(f.push("Hello", &hit), "Hello");
  EXPECT_EQ(f.push(" there\n", &hit), " there");  // "\n" may start the stop text
  EXPECT_EQ(f.push("Us", &hit), "");
  EXPECT_EQ(f.push("ually", &hit), "\nUsually");  // it did not
  EXPECT_FALSE(hit);
  EXPECT_EQ(f.push(" ok.\nUse", &hit), " ok.");
  EXPECT_EQ(f.push("r: and more", &hit), "");
  EXPECT_TRUE(hit);
  hit = false;
  EXPECT_EQ(f.push("later", &hit), "");  // nothing after a hit
  EXPECT_TRUE(hit);

  StopStrings h({"\nUser:"});
  hit = false;
  EXPECT_EQ(h.push("tail\nUs", &hit), "tail");
  EXPECT_EQ(h.finish(), "\nUs");  // the stream ended: the held text is shown
  StopStrings none(std::vector<std::string>{});
  EXPECT_EQ(none.push("\nUser:", &hit), "\nUser:");
  StopStrings empty_only({""});
  EXPECT_TRUE(empty_only.empty());
}

TEST(StopStrings, EarliestOfSeveralAndLongestHold) {
  StopStrings f({"world", "lo w"});
  bool hit = false;
  EXPECT_EQ(f.push("hello world", &hit), "hel");  // "lo w" starts before "world"
  EXPECT_TRUE(hit);
  StopStrings g({"ab", "xyz"});
  hit = false;
  EXPECT_EQ(g.push("1xy", &hit), "1");  // "xy" may grow into "xyz"
  EXPECT_EQ(g.push("a", &hit), "xy");    // "a" may grow into "ab"
  EXPECT_EQ(g.push("b", &hit), "");
  EXPECT_TRUE(hit);
}

class GeneratorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tok_ = Tokenizer::create(load_hf_tokenizer(std::string(PTN_SOURCE_DIR) + "/models/stories260K/hf/tokenizer.json"))
               .release();
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  static int64_t vocab() { return tok_->vocab_size(); }
  // Logits with `id` on top (10) and everything else at 0.
  static std::vector<float> onehot(int32_t id) {
    std::vector<float> l(static_cast<size_t>(vocab()), 0.0f);
    l[static_cast<size_t>(id)] = 10.0f;
    return l;
  }
  static GenerationParams greedy() {
    GenerationParams p;
    p.sampling.temperature = 0;
    return p;
  }
  // Feeds one-hot logits for `ids` until the generator stops; returns the text.
  static std::string run(Generator& g, const std::vector<int32_t>& ids, std::vector<StepResult>* steps = nullptr) {
    std::string text;
    for (int32_t id : ids) {
      if (g.done()) break;
      StepResult r = g.next(onehot(id).data());
      text += r.text;
      if (steps) steps->push_back(r);
    }
    return text;
  }
  static inline Tokenizer* tok_ = nullptr;
};

TEST_F(GeneratorTest, TextOfTheDrawnTokensAndMaxTokens) {
  const std::vector<int32_t> ids = tok_->encode("Once upon a time there was", false, false);
  ASSERT_GE(ids.size(), 4u);
  GenerationParams p = greedy();
  p.stop.max_tokens = static_cast<int64_t>(ids.size());
  Generator g(*tok_, vocab(), p, 100);
  std::vector<StepResult> steps;
  // A continuation: the first piece keeps its leading space.
  EXPECT_EQ(run(g, ids, &steps), " Once upon a time there was");
  EXPECT_EQ(g.tokens(), ids);
  EXPECT_EQ(g.finish(), Finish::MaxTokens);
  EXPECT_EQ(steps.back().finish, Finish::MaxTokens);
  for (size_t i = 0; i + 1 < steps.size(); ++i) EXPECT_EQ(steps[i].finish, Finish::None);
  EXPECT_THROW(g.next(onehot(ids[0]).data()), Error);  // after the end
}

TEST_F(GeneratorTest, EndOfContext) {
  const std::vector<int32_t> ids = tok_->encode("Once upon a time there was", false, false);
  Generator g(*tok_, vocab(), greedy(), 3);  // room for 3 tokens, no max_tokens
  run(g, ids);
  EXPECT_EQ(g.tokens().size(), 3u);
  EXPECT_EQ(g.finish(), Finish::Context);
  EXPECT_STREQ(openai_finish_reason(g.finish()), "length");
  EXPECT_THROW(Generator(*tok_, vocab(), greedy(), 0), Error);  // no room at all
}

TEST_F(GeneratorTest, EndTokenIsCountedButAddsNoText) {
  ASSERT_TRUE(tok_->eos());
  std::vector<int32_t> ids = tok_->encode("Hi there", false, false);
  ids.push_back(*tok_->eos());
  ids.push_back(ids[0]);  // never drawn
  Generator g(*tok_, vocab(), greedy(), 100);
  EXPECT_EQ(run(g, ids), " Hi there");
  EXPECT_EQ(g.finish(), Finish::EndToken);
  EXPECT_EQ(g.tokens().size(), ids.size() - 1);
  EXPECT_EQ(g.tokens().back(), *tok_->eos());
  EXPECT_STREQ(openai_finish_reason(g.finish()), "stop");
}

TEST_F(GeneratorTest, BosPolicy) {
  ASSERT_TRUE(tok_->bos());
  std::vector<int32_t> ids = tok_->encode("The end.", false, false);
  const size_t n_text = ids.size();
  ids.push_back(*tok_->bos());
  const std::vector<int32_t> more = tok_->encode("Once", false, false);
  ids.insert(ids.end(), more.begin(), more.end());
  {
    Generator g(*tok_, vocab(), greedy(), 100);
    EXPECT_EQ(run(g, ids), " The end.");
    EXPECT_EQ(g.finish(), Finish::Bos);
    EXPECT_EQ(g.tokens().size(), n_text + 1);
  }
  {
    GenerationParams p = greedy();
    p.stop.stop_at_bos = false;
    p.stop.max_tokens = static_cast<int64_t>(ids.size());
    Generator g(*tok_, vocab(), p, 100);
    run(g, ids);
    EXPECT_EQ(g.finish(), Finish::MaxTokens);
    EXPECT_EQ(g.tokens(), ids);
  }
}

TEST_F(GeneratorTest, StopStringAcrossTokensIsCut) {
  const std::vector<int32_t> ids = tok_->encode("Once upon a time there was a girl", false, false);
  GenerationParams p = greedy();
  p.stop.stop = {"time th"};
  Generator g(*tok_, vocab(), p, 100);
  std::vector<StepResult> steps;
  EXPECT_EQ(run(g, ids, &steps), " Once upon a ");
  EXPECT_EQ(g.finish(), Finish::StopString);
  EXPECT_EQ(steps.back().finish, Finish::StopString);
  EXPECT_LT(g.tokens().size(), ids.size());
  // Text that only looked like a start of the stop string is shown when the generation ends.
  GenerationParams q = greedy();
  q.stop.stop = {" upon a mo"};
  q.stop.max_tokens = 3;  // " Once upon a" : " upon a" is held back until the end
  Generator h(*tok_, vocab(), q, 100);
  std::vector<StepResult> hs;
  EXPECT_EQ(run(h, ids, &hs), " Once upon a");
  EXPECT_EQ(hs[1].text, "");
  EXPECT_EQ(h.finish(), Finish::MaxTokens);
}

TEST_F(GeneratorTest, SampledDrawsReplayForTheSameSeed) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<std::vector<float>> rows(40, std::vector<float>(static_cast<size_t>(vocab())));
  for (auto& r : rows)
    for (auto& x : r) x = nd(rng);
  GenerationParams p;
  p.sampling.temperature = 0.8f;
  p.sampling.top_k = 40;
  p.stop.stop_at_bos = false;
  auto draw = [&](uint64_t seed) {
    p.sampling.seed = seed;
    Generator g(*tok_, vocab(), p, 1000);
    for (auto& r : rows)
      if (!g.done()) g.next(r.data());
    return g.tokens();
  };
  EXPECT_EQ(draw(11), draw(11));
  EXPECT_NE(draw(11), draw(12));
}

class BanTop : public LogitProcessor {
 public:
  void apply(float* logits, int64_t n) override {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i)
      if (logits[i] > logits[best]) best = i;
    logits[best] = -INFINITY;
    ++applied;
  }
  void accept(int32_t t) override { accepted.push_back(t); }
  int applied = 0;
  std::vector<int32_t> accepted;
};

TEST_F(GeneratorTest, LogitProcessorChangesTheDrawNotTheLogprobs) {
  std::vector<float> l(static_cast<size_t>(vocab()), 0.0f);
  l[300] = 5.0f;
  l[301] = 4.0f;
  GenerationParams p = greedy();
  p.logprobs = 2;
  Generator g(*tok_, vocab(), p, 100);
  BanTop ban;
  g.set_logit_processor(&ban);
  StepResult r = g.next(l.data());
  EXPECT_EQ(r.token.id, 301);
  EXPECT_EQ(ban.applied, 1);
  EXPECT_EQ(ban.accepted, std::vector<int32_t>{301});
  EXPECT_EQ(l[300], 5.0f);  // the caller's logits are untouched
  ASSERT_EQ(r.token.top.size(), 2u);
  EXPECT_EQ(r.token.top[0].id, 300);  // logprobs describe the model's own distribution
  EXPECT_LT(r.token.logprob, r.token.top[0].logprob);
  g.set_logit_processor(nullptr);
  EXPECT_EQ(g.next(l.data()).token.id, 300);
}

TEST_F(GeneratorTest, VerifyAcceptsTheAgreeingDraftPrefix) {
  const std::vector<int32_t> ids = tok_->encode("Once upon a time there was", false, false);
  ASSERT_GE(ids.size(), 5u);
  // The model would say ids[0..4]; the draft says ids[0], ids[1], then something else.
  std::vector<int32_t> draft = {ids[0], ids[1], ids[4], ids[3]};
  std::vector<float> rows;
  for (int i = 0; i < 5; ++i) {
    auto r = onehot(ids[static_cast<size_t>(i)]);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  Generator g(*tok_, vocab(), greedy(), 100);
  std::vector<StepResult> steps = g.verify(draft, rows.data());
  ASSERT_EQ(steps.size(), 3u);  // two accepted, the third replaced by the model's token
  EXPECT_EQ(g.tokens(), (std::vector<int32_t>{ids[0], ids[1], ids[2]}));
  // A fully accepted draft gives a bonus token from the last row.
  Generator h(*tok_, vocab(), greedy(), 100);
  steps = h.verify({ids[0], ids[1], ids[2], ids[3]}, rows.data());
  EXPECT_EQ(steps.size(), 5u);
  EXPECT_EQ(h.tokens(), (std::vector<int32_t>(ids.begin(), ids.begin() + 5)));
  // The stop rules hold inside a draft: max_tokens 2 ends it after two tokens.
  GenerationParams p = greedy();
  p.stop.max_tokens = 2;
  Generator m(*tok_, vocab(), p, 100);
  steps = m.verify({ids[0], ids[1], ids[2], ids[3]}, rows.data());
  EXPECT_EQ(steps.size(), 2u);
  EXPECT_EQ(m.finish(), Finish::MaxTokens);
}

TEST_F(GeneratorTest, VerifyDrawsAsNextDoesWhenSampling) {
  // With the same seed, verify() over a step's rows gives the tokens next() would draw from the
  // same rows one at a time (the accepted ones and the replacement).
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  GenerationParams p;
  p.sampling.temperature = 1.0f;
  p.sampling.seed = 99;
  p.stop.stop_at_bos = false;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> rows(static_cast<size_t>(5 * vocab()));
    for (auto& x : rows) x = nd(rng);
    for (int i = 0; i < 5; ++i) rows[static_cast<size_t>(i * vocab() + 300 + i)] += 6.0f;  // a likely draft
    const std::vector<int32_t> draft = {300, 301, 302, 303};
    Generator a(*tok_, vocab(), p, 100), b(*tok_, vocab(), p, 100);
    const auto steps = a.verify(draft, rows.data());
    for (size_t i = 0; i < steps.size(); ++i) b.next(rows.data() + i * static_cast<size_t>(vocab()));
    EXPECT_EQ(a.tokens(), b.tokens()) << trial;
    for (size_t i = 0; i + 1 < steps.size(); ++i) EXPECT_EQ(steps[i].token.id, draft[i]);
  }
}

TEST_F(GeneratorTest, RefusesBadParams) {
  GenerationParams p = greedy();
  p.stop.max_tokens = -1;
  EXPECT_THROW(Generator(*tok_, vocab(), p, 10), Error);
  p = greedy();
  p.logprobs = 21;
  EXPECT_THROW(Generator(*tok_, vocab(), p, 10), Error);
  p = greedy();
  p.sampling.top_p = 2.0f;
  EXPECT_THROW(Generator(*tok_, vocab(), p, 10), Error);
  EXPECT_THROW(Generator(*tok_, vocab() - 1, greedy(), 10), Error);  // logits narrower than the tokenizer
}

}  // namespace
