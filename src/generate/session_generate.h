// Generation on a single-sequence Session (`ptn run`, `ptn chat`): the Generator draws each
// token and the session feeds it, until a stop rule ends the generation. The server packs many
// sequences into one step instead and calls Generator::next itself (serve/engine.cpp).
#pragma once
#include <functional>

#include "generate/generator.h"
#include "generate/lookup_draft.h"

namespace ptn {
class Session;
}

namespace ptn::gen {

// `logits`: the session's output after its last token (the prompt). Every drawn token that does
// not end the generation is fed to the session, so afterwards the session holds the prompt and
// all of gen.tokens() but the last. on_step (optional) sees each step as it happens. Returns
// why the generation ended.
Finish generate_on_session(Session& session, Generator& gen, const float* logits,
                           const std::function<void(const StepResult&)>& on_step = {});

// The same with prompt-lookup speculation (lookup.draft_tokens > 0): each step feeds the drawn
// token and a draft looked up in `prompt` + the tokens generated, and Generator::verify keeps
// the draft tokens the model agrees with; the cache is rewound past the rest. The tokens drawn
// are the ones plain decoding draws from the same logits (at temperature 0 the same text, up to
// the rounding of a wider step; when sampling, the same distribution). `prompt` is what the
// session held before the generation.
Finish generate_on_session(Session& session, Generator& gen, const float* logits,
                           const std::function<void(const StepResult&)>& on_step, const LookupOptions& lookup,
                           const std::vector<int32_t>& prompt, SpeculationStats* stats = nullptr);

class Drafter;
// The same with any source of drafts (draft_model.h: prompt lookup or a draft model), at most
// `max_draft` tokens per step.
Finish generate_on_session(Session& session, Generator& gen, const float* logits,
                           const std::function<void(const StepResult&)>& on_step, Drafter& drafter, int64_t max_draft,
                           const std::vector<int32_t>& prompt, SpeculationStats* stats = nullptr);

// The room a Generator has on a session that holds its prompt: context - position.
int64_t session_room(const Session& session);

}  // namespace ptn::gen
