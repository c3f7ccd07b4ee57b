#include "generate/session_generate.h"

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

int64_t session_room(const Session& session) { return session.context() - session.position(); }

}  // namespace ptn::gen
