// Reference attention (ptn::ref::attention): every score written out, masked by attn_visible,
// a max-subtracted softmax (with the head's sink as one more score when given) and the weighted
// sum of V, all in double.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention.h"
#include "kernels/ops_internal.h"

namespace ptn::ref {

void attention(const float* q, const float* k, const float* v, const int32_t* q_pos,
               const int32_t* kv_pos, int64_t T, int64_t S, int64_t Hq, int64_t Hkv, int64_t D,
               int64_t Dv, const AttentionParams& p, float* out) {
  kdetail::check_attention("attention", q, k, v, q_pos, kv_pos, T, S, Hq, Hkv, D, Dv, p, out);
  const int64_t group = Hq / Hkv;  // query heads per kv head
  std::vector<double> score(static_cast<size_t>(S));
  std::vector<double> o(static_cast<size_t>(Dv));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kvh = h / group;
      const float* qh = q + (t * Hq + h) * D;
      double m = -INFINITY;
      for (int64_t s = 0; s < S; ++s) {
        if (!attn_visible(q_pos[t], kv_pos[s], p)) {
          score[s] = -INFINITY;
          continue;
        }
        const float* ks = k + (s * Hkv + kvh) * D;
        double dot = 0;
        for (int64_t i = 0; i < D; ++i) dot += double{qh[i]} * ks[i];
        double sc = dot * p.scale;
        if (p.softcap > 0) sc = p.softcap * std::tanh(sc / p.softcap);
        score[s] = sc;
        m = std::max(m, sc);
      }
      std::fill(o.begin(), o.end(), 0.0);
      double total = 0;
      if (m != -INFINITY && p.sinks != nullptr) {
        // The sink is one more score with a zero value row: it raises the maximum when larger
        // and adds its weight to the denominator only.
        const double sink = p.sinks[h];
        m = std::max(m, sink);
        total = std::exp(sink - m);
      }
      if (m != -INFINITY) {
        for (int64_t s = 0; s < S; ++s) {
          if (score[s] == -INFINITY) continue;
          const double w = std::exp(score[s] - m);
          total += w;
          const float* vs = v + (s * Hkv + kvh) * Dv;
          for (int64_t i = 0; i < Dv; ++i) o[i] += w * vs[i];
        }
      }
      float* oh = out + (t * Hq + h) * Dv;
      for (int64_t i = 0; i < Dv; ++i) oh[i] = total > 0 ? static_cast<float>(o[i] / total) : 0.0f;
    }
  }
}

}  // namespace ptn::ref
