// Perplexity of a text under a program, computed the way llama.cpp's llama-perplexity does:
//  - the whole text is tokenized once (BOS first when the model adds one);
//  - it is cut into chunks of n_ctx consecutive tokens (the tail that does not fill a chunk is
//    dropped); the text must hold at least 2 * n_ctx tokens;
//  - each chunk runs from an empty cache, its first token replaced by BOS when the model adds BOS;
//  - only the second half of each chunk is scored: for j in [n_ctx/2, n_ctx - 2] the logits at
//    position j predict token j + 1, so every scored token has at least n_ctx/2 tokens of context;
//  - PPL = exp(mean NLL); its standard error is PPL * sqrt(var(NLL) / (count - 1)) (first-order
//    propagation of the standard error of the mean NLL).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace ptn {

class Session;

struct PerplexityOptions {
  int64_t n_ctx = 512;                 // tokens per chunk (>= 4)
  int64_t max_chunks = 0;              // 0: every full chunk of the text
  std::optional<int32_t> bos;          // replaces each chunk's first token when set
};

struct PerplexityResult {
  int64_t chunks = 0;                  // chunks evaluated
  int64_t count = 0;                   // tokens scored
  double mean_nll = 0.0;               // nats per scored token
  double ppl = 0.0;                    // exp(mean_nll)
  double ppl_stderr = 0.0;             // standard error of ppl (0 when count < 2 or no spread)
  std::vector<double> running_ppl;     // after each chunk: exp(mean NLL of chunks 1..k)
};

// -log softmax(logits)[target] in double precision (max-subtracted). logits: [vocab].
// Throws InvalidArgument when target is outside [0, vocab).
double token_nll(const float* logits, int64_t vocab, int32_t target);

// Adds up per-token NLLs: sum and sum of squares, as llama.cpp keeps them.
class NllAccumulator {
 public:
  void add(double nll);
  int64_t count() const { return count_; }
  double mean() const;         // 0 when empty
  double ppl() const;          // exp(mean())
  double ppl_stderr() const;   // ppl() * sqrt((E[x^2] - E[x]^2) / (count - 1)); 0 when undefined

 private:
  double sum_ = 0.0, sum2_ = 0.0;
  int64_t count_ = 0;
};

// Runs one chunk from an empty cache and calls on_logits(i, logits[vocab]) for every position
// i of `chunk` (at least for i >= n_ctx/2; earlier positions are ignored).
using ChunkEvaluator = std::function<void(const std::vector<int32_t>& chunk,
                                          const std::function<void(int64_t, const float*)>& on_logits)>;

// The number of chunks a text of n_tokens gives; throws InvalidArgument (with the numbers) for
// a chunk size below 4, a negative max_chunks, or a text shorter than 2 * n_ctx tokens.
int64_t perplexity_chunks(int64_t n_tokens, const PerplexityOptions& opt);

// The core: validates the options against the text (InvalidArgument with the numbers when the
// text is too short), evaluates the chunks in order and calls on_chunk(k, running_ppl) after
// chunk k (1-based). Token ids must be in [0, vocab).
PerplexityResult compute_perplexity(const std::vector<int32_t>& tokens, int64_t vocab, const PerplexityOptions& opt,
                                    const ChunkEvaluator& eval,
                                    const std::function<void(int64_t, double)>& on_chunk = {});

// compute_perplexity with chunks run on `session` (reset before each chunk). n_ctx must fit
// the session's context.
PerplexityResult session_perplexity(Session& session, const std::vector<int32_t>& tokens, const PerplexityOptions& opt,
                                    const std::function<void(int64_t, double)>& on_chunk = {});

}  // namespace ptn
