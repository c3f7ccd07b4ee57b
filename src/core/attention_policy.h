// The attention policy of a layer (which earlier positions a query sees) and the one parameter
// struct of an attention op. Below every layer that needs them: formats (ModelSpec), kernels
// (attention) and kvcache (which blocks a layer still sees) include this header, none of them
// each other's.
#pragma once
#include <cstdint>

namespace ptn {

// Full: every position <= the query's. Window W: a query at p sees p-W+1..p (as HF's sliding
// window masks). Chunk C: a query at p sees the positions of its own chunk, p' / C == p / C.
enum class AttnKind { Full, Window, Chunk };

// One attention op's parameters.
//   kernels (attention, ref::attention): all four fields.
//   KVCache::update_and_attend: scale and softcap; the policy is the layer's own, from the
//   cache spec (CacheScope checks it equals the program's), so kind and span are not read.
struct AttentionParams {
  float scale = 1.0f;    // multiplies q·k (usually 1/sqrt(D))
  float softcap = 0.0f;  // scores = softcap * tanh(scores / softcap) after scaling; 0 = off
  AttnKind kind = AttnKind::Full;
  int64_t span = 0;      // Window: W >= 1; Chunk: C >= 1 (both <= 2^31-1); 0 for Full
  // Attention sinks (gpt-oss): null, or one finite logit per query head [Hq] that joins the
  // head's softmax as an extra score with a zero value row: softmax over (scores, sink), the
  // sink's weight dropped, so a head's weights sum to less than 1 and a query that sees no row
  // gets zeros. Read by every attention op and by KVCache::update_and_attend.
  const float* sinks = nullptr;
};

// The first position a query at `pos` (>= 0) sees under the policy: it sees first..pos.
inline int64_t attn_first_visible(AttnKind kind, int64_t span, int64_t pos) {
  switch (kind) {
    case AttnKind::Window: return pos - span + 1 > 0 ? pos - span + 1 : 0;
    case AttnKind::Chunk: return (pos / span) * span;
    case AttnKind::Full: break;
  }
  return 0;
}

// Whether a query at position qp sees the key at position kp: kp <= qp, and within the window
// (kp > qp - W) or the same chunk (floor(kp / C) == floor(qp / C)). Positions may be negative.
inline bool attn_visible(int64_t qp, int64_t kp, const AttentionParams& p) {
  if (kp > qp) return false;
  switch (p.kind) {
    case AttnKind::Full: return true;
    case AttnKind::Window: return qp - kp < p.span;
    case AttnKind::Chunk: {
      auto floor_div = [](int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
      return floor_div(kp, p.span) == floor_div(qp, p.span);
    }
  }
  return false;
}

}  // namespace ptn
