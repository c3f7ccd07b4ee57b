// The perplexity core: token NLL against a log-softmax computed here, the chunking / scoring
// rule against a fake evaluator with hand-chosen logits, and stories260K end to end (the
// program is exported with the ptn binary; skipped when it has not been built).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "runtime/perplexity.h"
#include "runtime/program.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using namespace ptn;

namespace {

TEST(Perplexity, TokenNllIsMinusLogSoftmax) {
  const float logits[3] = {1.0f, 2.0f, 3.0f};
  const double denom = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(token_nll(logits, 3, 2), -std::log(std::exp(3.0) / denom), 1e-12);
  EXPECT_NEAR(token_nll(logits, 3, 0), -std::log(std::exp(1.0) / denom), 1e-12);
  // large logits do not overflow (max-subtracted)
  const float big[2] = {1000.0f, 1000.0f};
  EXPECT_NEAR(token_nll(big, 2, 1), std::log(2.0), 1e-12);
  EXPECT_THROW(token_nll(logits, 3, 3), Error);
  EXPECT_THROW(token_nll(logits, 3, -1), Error);
}

TEST(Perplexity, AccumulatorStatistics) {
  NllAccumulator acc;
  EXPECT_EQ(acc.ppl_stderr(), 0.0);
  const double xs[4] = {0.5, 1.0, 2.0, 1.5};
  for (double x : xs) acc.add(x);
  const double mean = 5.0 / 4.0;
  double var = 0;  // population variance
  for (double x : xs) var += (x - mean) * (x - mean);
  var /= 4.0;
  EXPECT_NEAR(acc.mean(), mean, 1e-12);
  EXPECT_NEAR(acc.ppl(), std::exp(mean), 1e-12);
  EXPECT_NEAR(acc.ppl_stderr(), std::exp(mean) * std::sqrt(var / 3.0), 1e-12);
}

// vocab 4, n_ctx 6: positions 3 and 4 of each chunk are scored (predicting tokens 4 and 5).
// The fake model puts logit (chunk + 1) * (pos + 1) on token (pos % 4) and 0 elsewhere.
TEST(Perplexity, ChunksBosAndSecondHalfScoring) {
  const int64_t vocab = 4, n_ctx = 6;
  std::vector<int32_t> tokens = {1, 2, 3, 0, 1, 2, 3, 3, 2, 1, 0, 3, 2, 1, 0};  // 15 tokens: 2 chunks + 3 dropped
  PerplexityOptions opt;
  opt.n_ctx = n_ctx;
  opt.bos = 3;
  std::vector<std::vector<int32_t>> seen_chunks;
  int64_t chunk_no = 0;
  auto eval = [&](const std::vector<int32_t>& chunk, const std::function<void(int64_t, const float*)>& on_logits) {
    seen_chunks.push_back(chunk);
    for (int64_t i = 0; i < static_cast<int64_t>(chunk.size()); ++i) {
      float l[4] = {0, 0, 0, 0};
      l[i % 4] = static_cast<float>((chunk_no + 1) * (i + 1));
      on_logits(i, l);
    }
    ++chunk_no;
  };
  std::vector<std::pair<int64_t, double>> running;
  PerplexityResult r = compute_perplexity(tokens, vocab, opt, eval, [&](int64_t k, double p) { running.push_back({k, p}); });

  ASSERT_EQ(seen_chunks.size(), 2u);
  EXPECT_EQ(seen_chunks[0], (std::vector<int32_t>{3, 2, 3, 0, 1, 2}));  // first token -> BOS
  EXPECT_EQ(seen_chunks[1], (std::vector<int32_t>{3, 3, 2, 1, 0, 3}));
  // expected NLLs by hand: -log softmax with one hot logit a at index h, target t
  auto nll = [](double a, int h, int t) {
    const double denom = std::exp(a) + 3.0;
    return -std::log((t == h ? std::exp(a) : 1.0) / denom);
  };
  // chunk 0 (scale 1): pos 3 (hot 3, a=4) predicts tokens[4]=1; pos 4 (hot 0, a=5) predicts tokens[5]=2
  // chunk 1 (scale 2): pos 3 (hot 3, a=8) predicts tokens[10]=0; pos 4 (hot 0, a=10) predicts tokens[11]=3
  const double x[4] = {nll(4, 3, 1), nll(5, 0, 2), nll(8, 3, 0), nll(10, 0, 3)};
  const double m01 = (x[0] + x[1]) / 2, m = (x[0] + x[1] + x[2] + x[3]) / 4;
  double var = 0;
  for (double v : x) var += (v - m) * (v - m);
  var /= 4;
  EXPECT_EQ(r.chunks, 2);
  EXPECT_EQ(r.count, 4);
  EXPECT_NEAR(r.mean_nll, m, 1e-9);
  EXPECT_NEAR(r.ppl, std::exp(m), 1e-9);
  EXPECT_NEAR(r.ppl_stderr, std::exp(m) * std::sqrt(var / 3), 1e-9);
  ASSERT_EQ(running.size(), 2u);
  EXPECT_EQ(running[0].first, 1);
  EXPECT_NEAR(running[0].second, std::exp(m01), 1e-9);
  EXPECT_NEAR(running[1].second, std::exp(m), 1e-9);
  EXPECT_EQ(r.running_ppl, (std::vector<double>{running[0].second, running[1].second}));

  // --chunks 1 stops after the first chunk
  chunk_no = 0;
  seen_chunks.clear();
  opt.max_chunks = 1;
  PerplexityResult r1 = compute_perplexity(tokens, vocab, opt, eval);
  EXPECT_EQ(r1.chunks, 1);
  EXPECT_NEAR(r1.ppl, std::exp(m01), 1e-9);

  // without BOS the chunk is the text itself
  chunk_no = 0;
  seen_chunks.clear();
  opt.bos.reset();
  compute_perplexity(tokens, vocab, opt, eval);
  EXPECT_EQ(seen_chunks[0], (std::vector<int32_t>{1, 2, 3, 0, 1, 2}));
}

TEST(Perplexity, RejectsBadInput) {
  auto eval = [](const std::vector<int32_t>& chunk, const std::function<void(int64_t, const float*)>& on_logits) {
    float l[2] = {0, 0};
    for (int64_t i = 0; i < static_cast<int64_t>(chunk.size()); ++i) on_logits(i, l);
  };
  PerplexityOptions opt;
  opt.n_ctx = 4;
  EXPECT_THROW(compute_perplexity(std::vector<int32_t>(7, 0), 2, opt, eval), Error);  // < 2 * n_ctx
  EXPECT_NO_THROW(compute_perplexity(std::vector<int32_t>(8, 0), 2, opt, eval));
  EXPECT_THROW(compute_perplexity(std::vector<int32_t>(8, 5), 2, opt, eval), Error);  // id outside vocab
  opt.n_ctx = 3;
  EXPECT_THROW(compute_perplexity(std::vector<int32_t>(100, 0), 2, opt, eval), Error);
  opt.n_ctx = 4;
  opt.bos = 9;
  EXPECT_THROW(compute_perplexity(std::vector<int32_t>(8, 0), 2, opt, eval), Error);
  opt.bos.reset();
  EXPECT_EQ(perplexity_chunks(8, opt), 2);
  EXPECT_EQ(perplexity_chunks(11, opt), 2);  // the tail that does not fill a chunk is dropped
  opt.max_chunks = 1;
  EXPECT_EQ(perplexity_chunks(100, opt), 1);
  opt.max_chunks = -1;
  EXPECT_THROW(perplexity_chunks(100, opt), Error);
  opt.max_chunks = 0;
  opt.n_ctx = INT64_MAX;
  EXPECT_THROW(perplexity_chunks(100, opt), Error);
  opt.n_ctx = 4;
  // an evaluator that skips a scored position is caught
  auto lazy = [](const std::vector<int32_t>&, const std::function<void(int64_t, const float*)>&) {};
  EXPECT_THROW(compute_perplexity(std::vector<int32_t>(8, 0), 2, opt, lazy), Error);
}

// Stories260K on a short story of our own: finite, plausible (the model's TinyStories
// validation loss is about 1.3 nats, PPL ~3.7), and the same as scoring each chunk by hand
// with one-token steps.
TEST(Perplexity, Stories260K) {
  if (!fs::exists(PTN_BINARY)) GTEST_SKIP() << "ptn binary not built: " << PTN_BINARY;
  const fs::path dir = fs::temp_directory_path() / ("ptn_ppl_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string out = (dir / "s.ptn").string();
  const std::string cmd = std::string("'") + PTN_BINARY + "' export --model '" + PTN_SOURCE_DIR +
                          "/models/stories260K/hf' --max-seq-length 64 --samples 1 --output '" + out + "' > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto program = Program::load(out);
  auto tok = Tokenizer::create(*program->meta().tokenizer);
  const std::string text =
      "Once upon a time, there was a little boy named Tom. Tom liked to play with his red car in the garden. "
      "One day, his car went under a big bush and Tom could not find it. He was sad. His sister Sue came to "
      "help him. She looked under the bush and saw the car. \"Here it is!\" she said. Tom was very happy and "
      "gave Sue a big hug. They played with the car together until it was time for dinner.";
  std::vector<int32_t> tokens = {*tok->bos()};
  auto body = tok->encode(text, false, false);
  tokens.insert(tokens.end(), body.begin(), body.end());
  ASSERT_GE(tokens.size(), 64u);

  SessionOptions so;
  so.cache_kind = "reference";
  Session session(program, so);
  PerplexityOptions opt;
  opt.n_ctx = 32;
  opt.bos = tok->bos();
  PerplexityResult r = session_perplexity(session, tokens, opt);
  EXPECT_EQ(r.chunks, static_cast<int64_t>(tokens.size()) / 32);
  EXPECT_EQ(r.count, r.chunks * 15);
  EXPECT_TRUE(std::isfinite(r.ppl));
  EXPECT_GT(r.ppl, 1.5);
  EXPECT_LT(r.ppl, 15.0);
  EXPECT_GT(r.ppl_stderr, 0.0);

  // independent path: one token per step, NLL from a log-softmax computed here
  const int64_t vocab = program->meta().spec.vocab_size;
  double sum = 0;
  int64_t n = 0;
  for (int64_t c = 0; c < r.chunks; ++c) {
    session.reset();
    for (int64_t i = 0; i < 31; ++i) {
      const int32_t t = i == 0 ? *tok->bos() : tokens[static_cast<size_t>(c * 32 + i)];
      const float* l = session.feed({t});
      if (i < 16) continue;
      double mx = l[0], s = 0;
      for (int64_t v = 1; v < vocab; ++v) mx = std::max(mx, static_cast<double>(l[v]));
      for (int64_t v = 0; v < vocab; ++v) s += std::exp(l[v] - mx);
      sum += -(l[tokens[static_cast<size_t>(c * 32 + i + 1)]] - mx - std::log(s));
      ++n;
    }
  }
  ASSERT_EQ(n, r.count);
  EXPECT_NEAR(r.ppl, std::exp(sum / static_cast<double>(n)), 1e-3 * r.ppl);

  // a context larger than the session's is refused
  opt.n_ctx = session.context() + 1;
  EXPECT_THROW(session_perplexity(session, tokens, opt), Error);
  fs::remove_all(dir);
}

}  // namespace
