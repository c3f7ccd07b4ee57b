#include "generate/generator.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace ptn::gen {

const char* finish_name(Finish f) {
  switch (f) {
    case Finish::None: return "";
    case Finish::EndToken: return "eog";
    case Finish::Bos: return "bos";
    case Finish::StopString: return "stop_string";
    case Finish::MaxTokens: return "max_tokens";
    case Finish::Context: return "context";
  }
  return "";
}

const char* openai_finish_reason(Finish f) {
  return f == Finish::EndToken || f == Finish::Bos || f == Finish::StopString ? "stop" : "length";
}

Generator::Generator(const Tokenizer& tokenizer, int64_t n_vocab, const GenerationParams& params, int64_t room)
    : tok_(tokenizer), n_vocab_(n_vocab), params_(params), room_(room), stops_(params.stop.stop) {
  if (n_vocab_ < 1 || tokenizer.vocab_size() > n_vocab_)
    fail(ErrorKind::InvalidArgument, "generate",
         "the tokenizer has " + std::to_string(tokenizer.vocab_size()) + " tokens, the model's logits " +
             std::to_string(n_vocab_));
  if (room_ < 1) fail(ErrorKind::Capacity, "generate", "the context has no room for a generated token");
  if (params_.stop.max_tokens < 0) fail(ErrorKind::InvalidArgument, "generate", "max_tokens must be >= 0");
  if (params_.logprobs < -1 || params_.logprobs > kMaxTopLogprobs)
    fail(ErrorKind::InvalidArgument, "generate", "logprobs must be -1..20");
  chain_ = make_sampler_chain(params_.sampling, n_vocab_);
  decoder_ = std::make_unique<StreamDecoder>(tok_, /*skip_special=*/!params_.keep_special, /*text_start=*/false);
}

Generator::~Generator() = default;

std::string Generator::flush() {
  bool hit = false;
  std::string s = stops_.push(decoder_->finish(), &hit);
  if (!hit) s += stops_.finish();
  return s;
}

StepResult Generator::next(const float* logits) {
  if (done()) fail(ErrorKind::Internal, "generate", "next() after the generation ended");
  const float* draw_from = logits;
  if (processor_) {
    masked_.assign(logits, logits + n_vocab_);
    processor_->apply(masked_.data(), n_vocab_);
    draw_from = masked_.data();
  }
  StepResult r;
  r.token.id = chain_->sample(draw_from, n_vocab_);
  chain_->accept(r.token.id);
  if (processor_) processor_->accept(r.token.id);
  if (params_.logprobs >= 0) {
    r.token.logprob = token_logprob(logits, n_vocab_, r.token.id);
    r.token.top = top_logprobs(logits, n_vocab_, params_.logprobs);
  }
  const int32_t id = r.token.id;
  tokens_.push_back(id);
  const int64_t n = static_cast<int64_t>(tokens_.size());

  if (tok_.is_eog(id)) {
    r.finish = Finish::EndToken;
  } else if (params_.stop.stop_at_bos && tok_.bos() && id == *tok_.bos()) {
    r.finish = Finish::Bos;
  } else {
    bool hit = false;
    // Ids past the tokenizer (a model vocabulary padded beyond it) decode to nothing.
    r.text = stops_.push(id < tok_.vocab_size() ? decoder_->push(id) : std::string(), &hit);
    if (hit) {
      finish_ = r.finish = Finish::StopString;
      return r;
    }
    if (params_.stop.max_tokens > 0 && n >= params_.stop.max_tokens)
      r.finish = Finish::MaxTokens;
    else if (n >= room_)
      r.finish = Finish::Context;
  }
  if (r.finish != Finish::None) {
    finish_ = r.finish;
    r.text += flush();
  }
  return r;
}

std::vector<StepResult> Generator::verify(const std::vector<int32_t>& draft, const float* rows) {
  std::vector<StepResult> steps;
  for (size_t i = 0; i <= draft.size() && !done(); ++i) {
    steps.push_back(next(rows + static_cast<int64_t>(i) * n_vocab_));
    if (i == draft.size() || steps.back().token.id != draft[i]) break;
  }
  return steps;
}

}  // namespace ptn::gen
