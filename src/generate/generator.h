// The generation of one sequence, the same for `ptn run`, `ptn chat` and the server: sampling
// (the sampler chain), the stop rules, streaming detokenization and logprobs. A Generator does
// not run the model: its caller feeds tokens to a Session or packs them into a batch step, and
// hands it the logits of each position; it answers with the token, the text that can be shown
// now, and whether the generation ended.
//
// The stop rules (docs/cli.md "How generation stops"), checked in this order for each token:
//   1. an end-of-generation token of the model (Tokenizer::is_eog: eos, eot, the extra ids of
//      config.json's eos_token_id list, end-of-turn markers)       -> Finish::EndToken
//   2. BOS, when stop_at_bos (the default: a model that writes BOS starts a new document,
//      as stories260K does after each story)                         -> Finish::Bos
//   3. a stop string in the text (cut, with the text after it)       -> Finish::StopString
//   4. max_tokens sampled tokens (when > 0)                          -> Finish::MaxTokens
//   5. the context is full: `room` tokens sampled                    -> Finish::Context
// The token that ends a generation is counted (tokens(), usage) but adds no text. Text held
// back because it may start a stop string, and bytes of an unfinished UTF-8 character, are
// flushed when the generation ends any other way than by a stop string.
//
// Hooks for what builds on it:
//   - a LogitProcessor (constrained decoding) changes the logits before each draw;
//   - verify() checks drafted tokens (speculative decoding) against the logits of one step.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "generate/stop_strings.h"
#include "sampling/logprobs.h"
#include "sampling/sampling_params.h"

namespace ptn {
class Tokenizer;
class StreamDecoder;
}  // namespace ptn

namespace ptn::gen {

enum class Finish { None, EndToken, Bos, StopString, MaxTokens, Context };
// "eog", "bos", "stop_string", "max_tokens", "context" ("" for None).
const char* finish_name(Finish f);
// The OpenAI finish_reason: "stop" for an end token, BOS or a stop string, "length" otherwise.
const char* openai_finish_reason(Finish f);

struct StopPolicy {
  int64_t max_tokens = 0;          // 0: no limit but the context
  std::vector<std::string> stop;   // stop strings (empty ones are ignored)
  bool stop_at_bos = true;
};

struct GenerationParams {
  SamplingParams sampling;
  StopPolicy stop;
  int logprobs = -1;  // -1: none; else report the token's logprob and this many alternatives (0..20)
  bool keep_special = false;  // control tokens appear in the text (a reply format that marks its parts with them)
};

struct GeneratedToken {
  int32_t id = 0;
  float logprob = 0.0f;           // log softmax of the unmodified logits; when logprobs >= 0
  std::vector<TokenLogprob> top;  // the `logprobs` most probable alternatives
};

struct StepResult {
  GeneratedToken token;
  std::string text;               // what can be shown now (often "", never part of a stop string)
  Finish finish = Finish::None;   // not None: this token ended the generation
};

// Changes the logits before each draw (e.g. -inf for tokens a grammar does not allow next).
class LogitProcessor {
 public:
  virtual ~LogitProcessor() = default;
  virtual void apply(float* logits, int64_t n_vocab) = 0;
  virtual void accept(int32_t /*token*/) {}  // the token drawn after apply()
};

class Generator {
 public:
  // n_vocab: the model's logit width; `room`: how many tokens the sequence can still take
  // (context - prompt tokens), >= 1. The sampling params are validated (ptn::Error names
  // "sampling.<field>").
  Generator(const Tokenizer& tokenizer, int64_t n_vocab, const GenerationParams& params, int64_t room);
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  // Not owned; it must outlive the generation. nullptr removes it.
  void set_logit_processor(LogitProcessor* p) { processor_ = p; }

  // Draws the next token from logits [n_vocab] (the model's output after the last token fed)
  // and applies the stop rules. Throws ptn::Error (InvalidArgument) when no token can be drawn
  // (every token banned) and (Internal) when called after the generation ended.
  StepResult next(const float* logits);

  // Speculative decoding: rows holds draft.size() + 1 logit rows of one step, row i being the
  // logits after draft[i-1] (row 0: after the last token already accepted). Draws from row 0,
  // 1, ... while the drawn token equals the draft token, and stops after the first one that
  // differs (it replaces the draft), after a bonus token from the last row, or when the
  // generation ends. Drawing from p and keeping the draft token only when they agree is exactly
  // the acceptance rule of speculative sampling for a draft without probabilities, so the
  // output is distributed as next() would make it (and equal at temperature 0). The caller
  // keeps in its cache the accepted tokens only: steps.size() - 1 draft tokens.
  std::vector<StepResult> verify(const std::vector<int32_t>& draft, const float* rows);

  bool done() const { return finish_ != Finish::None; }
  Finish finish() const { return finish_; }
  // Finish::StopString: the stop string that ended the generation.
  const std::string& stop_string() const { return stops_.matched(); }
  // Every token drawn, the one that ended the generation included.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  const GenerationParams& params() const { return params_; }

 private:
  std::string flush();  // the decoder's and the stop filter's held text

  const Tokenizer& tok_;
  int64_t n_vocab_ = 0;
  GenerationParams params_;
  int64_t room_ = 0;
  std::unique_ptr<SamplerChain> chain_;
  std::unique_ptr<StreamDecoder> decoder_;
  StopStrings stops_;
  LogitProcessor* processor_ = nullptr;
  std::vector<float> masked_;  // the processor's copy of the logits
  std::vector<int32_t> tokens_;
  Finish finish_ = Finish::None;
};

}  // namespace ptn::gen
