#include "generate/session_generate.h"

#include "generate/draft_model.h"
#include "runtime/session.h"

namespace ptn::gen {

Finish generate_on_session(Session& session, Generator& gen, const float* logits,
                           const std::function<void(const StepResult&)>& on_step) {
  while (!gen.done()) {
    StepResult r = gen.next(logits);
    if (on_step) on_step(r);
    if (!gen.done()) logits = session.feed({r.token.id});
  }
  return gen.finish();
}

Finish generate_on_session(Session& session, Generator& gen, const float* logits,
                           const std::function<void(const StepResult&)>& on_step, const LookupOptions& lookup,
                           const std::vector<int32_t>& prompt, SpeculationStats* stats) {
  if (lookup.draft_tokens <= 0) return generate_on_session(session, gen, logits, on_step);
  LookupDrafter drafter(lookup);
  return generate_on_session(session, gen, logits, on_step, drafter, lookup.draft_tokens, prompt, stats);
}

Finish generate_on_session(Session& session, Generator& gen, const float* logits,
                           const std::function<void(const StepResult&)>& on_step, Drafter& drafter, int64_t max_draft,
                           const std::vector<int32_t>& prompt, SpeculationStats* stats) {
  const int64_t vocab = session.program().meta().spec.vocab_size;
  std::vector<int32_t> history = prompt;  // the prompt, then every token drawn
  std::vector<float> rows;
  StepResult r = gen.next(logits);
  if (stats) ++stats->steps;
  for (;;) {
    if (on_step) on_step(r);
    history.push_back(r.token.id);
    if (gen.done()) break;
    // Room for the drawn token and the draft in the cache.
    const int64_t room = std::min(session.context() - session.position() - 1, max_draft);
    std::vector<int32_t> draft = room > 0 ? drafter.draft(history, room) : std::vector<int32_t>{};
    if (static_cast<int64_t>(draft.size()) > room) draft.resize(static_cast<size_t>(std::max<int64_t>(room, 0)));
    if (draft.empty()) {
      logits = session.feed({r.token.id});
      r = gen.next(logits);
      if (stats) ++stats->steps;
      continue;
    }
    std::vector<int32_t> feed = {r.token.id};
    feed.insert(feed.end(), draft.begin(), draft.end());
    const int64_t before = session.position();
    rows.resize(feed.size() * static_cast<size_t>(vocab));
    session.feed(feed, [&](int64_t i, const float* row) {
      std::copy(row, row + vocab, rows.begin() + i * vocab);
    });
    std::vector<StepResult> steps = gen.verify(draft, rows.data());
    // Kept: the drawn token and the draft tokens accepted (every step but the last drew one).
    session.rewind(before + static_cast<int64_t>(steps.size()));
    if (stats) {
      ++stats->steps;
      stats->drafted += static_cast<int64_t>(draft.size());
      stats->accepted += static_cast<int64_t>(steps.size()) - 1;
    }
    for (size_t i = 0; i + 1 < steps.size(); ++i) {
      if (on_step) on_step(steps[i]);
      history.push_back(steps[i].token.id);
    }
    r = std::move(steps.back());
  }
  return gen.finish();
}

int64_t session_room(const Session& session) { return session.context() - session.position(); }

}  // namespace ptn::gen
