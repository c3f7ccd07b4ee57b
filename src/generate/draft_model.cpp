#include "generate/draft_model.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace ptn::gen {

std::vector<int32_t> LookupDrafter::draft(const std::vector<int32_t>& history, int64_t max) {
  std::vector<int32_t> d = lookup_draft(history, o_);
  if (static_cast<int64_t>(d.size()) > max) d.resize(static_cast<size_t>(std::max<int64_t>(max, 0)));
  return d;
}

ModelDrafter::ModelDrafter(std::shared_ptr<const Program> program, const Tokenizer& target,
                           const SessionOptions& options, const char* flag) {
  const ProgramMeta& meta = program->meta();
  if (!meta.tokenizer) fail(ErrorKind::InvalidArgument, flag, "the draft model has no tokenizer to compare with the model's");
  auto tok = Tokenizer::create(*meta.tokenizer);
  if (tok->vocab_size() != target.vocab_size())
    fail(ErrorKind::InvalidArgument, flag,
         "the draft model's vocabulary has " + std::to_string(tok->vocab_size()) + " tokens, the model's " +
             std::to_string(target.vocab_size()) + ": drafts need the same tokenizer");
  for (int32_t id = 0; id < tok->vocab_size(); ++id)
    if (tok->token_piece(id) != target.token_piece(id))
      fail(ErrorKind::InvalidArgument, flag,
           "token " + std::to_string(id) + " is '" + tok->token_piece(id).substr(0, 32) + "' in the draft model and '" +
               target.token_piece(id).substr(0, 32) + "' in the model: drafts need the same tokenizer");
  vocab_ = std::min<int64_t>(meta.spec.vocab_size, target.vocab_size());  // never a padding id
  session_ = std::make_unique<Session>(std::move(program), options);
}

const float* ModelDrafter::sync(const std::vector<int32_t>& history, size_t n) {
  size_t keep = 0;
  const size_t common = std::min(fed_.size(), n);
  while (keep < common && fed_[keep] == history[keep]) ++keep;
  if (keep == n) --keep;  // the logits after history[n-1] are needed: feed it again
  if (keep < fed_.size()) {
    const KVCache* c = session_->cache();
    // A window layer may have released what this rewind needs: then start from the beginning.
    const bool can = c == nullptr || c->rewind_floor(0) <= static_cast<int64_t>(keep);
    session_->rewind(can ? static_cast<int64_t>(keep) : 0);
    if (!can) keep = 0;
    fed_.resize(keep);
  }
  const std::vector<int32_t> rest(history.begin() + static_cast<std::ptrdiff_t>(keep),
                                  history.begin() + static_cast<std::ptrdiff_t>(n));
  const float* logits = session_->feed(rest);
  fed_.insert(fed_.end(), rest.begin(), rest.end());
  ++steps_;
  return logits;
}

std::vector<int32_t> ModelDrafter::draft(const std::vector<int32_t>& history, int64_t max) {
  std::vector<int32_t> d;
  if (history.empty() || max <= 0) return d;
  // Room in the draft's own cache: it holds the history and all but the last draft token.
  const int64_t room = session_->context() - static_cast<int64_t>(history.size());
  max = std::min(max, room);
  if (max <= 0) return d;
  const float* logits = sync(history, history.size());
  for (;;) {
    const int32_t t = static_cast<int32_t>(std::max_element(logits, logits + vocab_) - logits);
    d.push_back(t);
    if (static_cast<int64_t>(d.size()) >= max) break;
    logits = session_->feed({t});
    fed_.push_back(t);
    ++steps_;
  }
  return d;
}

}  // namespace ptn::gen
