// Draft-model speculative decoding (as llama.cpp's --model-draft and vLLM's draft models): a
// smaller model with the same tokenizer runs on a Session of its own and proposes the next few
// tokens greedily; the target model verifies them in one step (generate_on_session with a
// Drafter, Generator::verify), so the output is the target's own, whatever the draft says.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "generate/lookup_draft.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace ptn::gen {

// A source of draft tokens for speculative decoding.
class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to `max` tokens likely to follow `history` (everything the target holds and the token
  // just drawn, which it does not hold yet). May be empty.
  virtual std::vector<int32_t> draft(const std::vector<int32_t>& history, int64_t max) = 0;
};

// Prompt lookup (lookup_draft.h).
class LookupDrafter final : public Drafter {
 public:
  explicit LookupDrafter(const LookupOptions& o) : o_(o) {}
  std::vector<int32_t> draft(const std::vector<int32_t>& history, int64_t max) override;

 private:
  LookupOptions o_;
};

// A draft model: greedy tokens of `program`, whose session keeps the longest prefix of the
// history it has already computed (rewound past rejected drafts, never recomputed from the start
// unless a window layer released what a rewind needs).
class ModelDrafter final : public Drafter {
 public:
  // Throws ptn::Error (InvalidArgument, naming `flag`) when the draft model's vocabulary is not
  // the target's token for token, or it has no tokenizer; `context` caps its cache (0: its own).
  ModelDrafter(std::shared_ptr<const Program> program, const Tokenizer& target, const SessionOptions& options,
               const char* flag);
  std::vector<int32_t> draft(const std::vector<int32_t>& history, int64_t max) override;
  // Draft-model steps run (its prompt feed counts once).
  int64_t steps() const { return steps_; }

 private:
  // Makes the session hold history[0, n) with logits after it: keeps the common prefix, feeds
  // the rest. Returns the logits.
  const float* sync(const std::vector<int32_t>& history, size_t n);

  std::unique_ptr<Session> session_;
  int64_t vocab_ = 0;         // ids a draft may take: the shared tokenizer's
  std::vector<int32_t> fed_;  // what the session holds
  int64_t steps_ = 0;
};

}  // namespace ptn::gen
