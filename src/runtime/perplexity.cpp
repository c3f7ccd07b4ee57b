#include "runtime/perplexity.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "runtime/session.h"

namespace ptn {

double token_nll(const float* logits, int64_t vocab, int32_t target) {
  if (vocab <= 0 || target < 0 || target >= vocab)
    fail(ErrorKind::InvalidArgument, "perplexity",
         "token id " + std::to_string(target) + " is outside the vocabulary of " + std::to_string(vocab));
  double mx = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  if (!std::isfinite(mx)) fail(ErrorKind::Internal, "perplexity", "the logits are not finite");
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  return -(static_cast<double>(logits[target]) - mx - std::log(sum));
}

void NllAccumulator::add(double nll) {
  sum_ += nll;
  sum2_ += nll * nll;
  ++count_;
}

double NllAccumulator::mean() const { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }

double NllAccumulator::ppl() const { return std::exp(mean()); }

double NllAccumulator::ppl_stderr() const {
  if (count_ < 2) return 0.0;
  const double m = mean();
  const double var = sum2_ / static_cast<double>(count_) - m * m;
  if (!(var > 0.0)) return 0.0;
  return ppl() * std::sqrt(var / static_cast<double>(count_ - 1));
}

int64_t perplexity_chunks(int64_t n_tok, const PerplexityOptions& opt) {
  const int64_t n_ctx = opt.n_ctx;
  if (n_ctx < 4) fail(ErrorKind::InvalidArgument, "--ctx", "must be at least 4 tokens (got " + std::to_string(n_ctx) + ")");
  if (opt.max_chunks < 0) fail(ErrorKind::InvalidArgument, "--chunks", "must be >= 0");
  if (n_tok / 2 < n_ctx)  // n_tok < 2 * n_ctx without overflow
    fail(ErrorKind::InvalidArgument, "perplexity",
         "the text tokenizes to " + std::to_string(n_tok) + " tokens; a context of " + std::to_string(n_ctx) +
             " needs at least " +
             (n_ctx <= INT64_MAX / 2 ? std::to_string(2 * n_ctx) : "2 x " + std::to_string(n_ctx)) +
             " (use a longer text or a smaller --ctx)");
  const int64_t n_chunks = n_tok / n_ctx;
  return opt.max_chunks > 0 ? std::min(n_chunks, opt.max_chunks) : n_chunks;
}

PerplexityResult compute_perplexity(const std::vector<int32_t>& tokens, int64_t vocab, const PerplexityOptions& opt,
                                    const ChunkEvaluator& eval, const std::function<void(int64_t, double)>& on_chunk) {
  const int64_t n_ctx = opt.n_ctx;
  const int64_t n_chunks = perplexity_chunks(static_cast<int64_t>(tokens.size()), opt);
  if (opt.bos && (*opt.bos < 0 || *opt.bos >= vocab))
    fail(ErrorKind::InvalidArgument, "perplexity", "BOS id " + std::to_string(*opt.bos) + " is outside the vocabulary");

  const int64_t first = n_ctx / 2;  // scored positions: first .. n_ctx-2 (each predicts the next token)
  NllAccumulator acc;
  PerplexityResult res;
  std::vector<int32_t> chunk(static_cast<size_t>(n_ctx));
  std::vector<char> seen(static_cast<size_t>(n_ctx));
  for (int64_t k = 0; k < n_chunks; ++k) {
    const int64_t start = k * n_ctx;
    std::copy(tokens.begin() + start, tokens.begin() + start + n_ctx, chunk.begin());
    if (opt.bos) chunk[0] = *opt.bos;
    std::fill(seen.begin(), seen.end(), 0);
    eval(chunk, [&](int64_t i, const float* logits) {
      if (i < first || i >= n_ctx - 1) return;
      if (seen[static_cast<size_t>(i)]) fail(ErrorKind::Internal, "perplexity", "position " + std::to_string(i) + " scored twice");
      seen[static_cast<size_t>(i)] = 1;
      // the original text token, not the BOS substitute (only position 0 is substituted anyway)
      acc.add(token_nll(logits, vocab, tokens[static_cast<size_t>(start + i + 1)]));
    });
    for (int64_t i = first; i < n_ctx - 1; ++i)
      if (!seen[static_cast<size_t>(i)])
        fail(ErrorKind::Internal, "perplexity", "the evaluator gave no logits for position " + std::to_string(i));
    res.running_ppl.push_back(acc.ppl());
    if (on_chunk) on_chunk(k + 1, acc.ppl());
  }
  res.chunks = n_chunks;
  res.count = acc.count();
  res.mean_nll = acc.mean();
  res.ppl = acc.ppl();
  res.ppl_stderr = acc.ppl_stderr();
  return res;
}

PerplexityResult session_perplexity(Session& session, const std::vector<int32_t>& tokens, const PerplexityOptions& opt,
                                    const std::function<void(int64_t, double)>& on_chunk) {
  if (opt.n_ctx > session.context())
    fail(ErrorKind::InvalidArgument, "--ctx",
         std::to_string(opt.n_ctx) + " is more than the session's context of " + std::to_string(session.context()));
  const int64_t vocab = session.program().meta().spec.vocab_size;
  return compute_perplexity(
      tokens, vocab, opt,
      [&](const std::vector<int32_t>& chunk, const std::function<void(int64_t, const float*)>& on_logits) {
        session.reset();
        session.feed(chunk, on_logits);
      },
      on_chunk);
}

}  // namespace ptn
