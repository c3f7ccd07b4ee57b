// Test helpers for the KV caches: deterministic synthetic q/k/v, a step driver, an explicit
// dense masked attention written independently of both caches, and NMSE.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "kvcache/cache.h"

namespace kvt {

using namespace ptn;

inline uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// A value in [-1, 1) determined by the key words.
inline float det_value(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  const uint64_t h = splitmix(splitmix(splitmix(splitmix(a) ^ b) ^ c) ^ d);
  return static_cast<float>(static_cast<double>(h >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

// K and V of a token depend on (layer, position, token id) only, so two sequences with the same
// prefix produce the same K/V (what prefix sharing relies on). Q additionally depends on `salt`.
inline void make_row(int64_t layer, int32_t pos, int32_t token, int64_t heads, int64_t dim, uint64_t what,
                     float amp, float* dst) {
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t d = 0; d < dim; ++d)
      dst[h * dim + d] = amp * det_value(what, static_cast<uint64_t>(layer) << 32 | static_cast<uint32_t>(pos),
                                         static_cast<uint32_t>(token), static_cast<uint64_t>(h * 65536 + d));
}

struct StepOut {
  std::vector<std::vector<float>> per_layer;  // [layer][T * Hq * Dv]
};

// Runs one step (prepare, update_and_attend on every layer, commit) and returns the outputs.
inline StepOut run_step(KVCache& cache, const StepBatch& batch, int64_t n_q_heads, const AttentionParams& params,
                        uint64_t q_salt = 7) {
  const auto& spec = cache.spec();
  StepOut res;
  auto txn = cache.prepare(batch);
  const int64_t T = static_cast<int64_t>(batch.rows.size());
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const auto& L = spec.layers[l];
    std::vector<float> q(T * n_q_heads * L.head_dim_k), k(T * L.n_kv_heads * L.head_dim_k),
        v(T * L.n_kv_heads * L.head_dim_v), out(T * n_q_heads * L.head_dim_v, -99.0f);
    for (int64_t t = 0; t < T; ++t) {
      const StepRow& r = batch.rows[t];
      make_row(l, r.pos, r.token, n_q_heads, L.head_dim_k, q_salt * 1000 + 1, 2.0f, &q[t * n_q_heads * L.head_dim_k]);
      make_row(l, r.pos, r.token, L.n_kv_heads, L.head_dim_k, 2, 1.0f, &k[t * L.n_kv_heads * L.head_dim_k]);
      if (L.v_in_k) {  // V is the start of each K row (the spec's promise)
        for (int64_t h = 0; h < L.n_kv_heads; ++h)
          for (int64_t d = 0; d < L.head_dim_v; ++d)
            v[(t * L.n_kv_heads + h) * L.head_dim_v + d] = k[(t * L.n_kv_heads + h) * L.head_dim_k + d];
      } else {
        make_row(l, r.pos, r.token, L.n_kv_heads, L.head_dim_v, 3, 1.0f, &v[t * L.n_kv_heads * L.head_dim_v]);
      }
    }
    cache.update_and_attend(txn, static_cast<int64_t>(l), q.data(), k.data(), v.data(), n_q_heads, params, out.data());
    res.per_layer.push_back(std::move(out));
  }
  cache.commit(txn);
  return res;
}

// Rows appending `tokens` to `seq` from its current length.
inline void append_rows(const KVCache& cache, SeqId seq, const std::vector<int32_t>& tokens, StepBatch* batch) {
  int32_t pos = static_cast<int32_t>(cache.length(seq));
  for (const StepRow& r : batch->rows)
    if (r.seq == seq) pos = r.pos + 1;
  for (int32_t t : tokens) batch->rows.push_back({seq, pos++, t});
}

inline std::vector<int32_t> tokens_range(int32_t first, int64_t n, int32_t stride = 1) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(first + static_cast<int32_t>(i) * stride);
  return t;
}

// Normalised mean squared error of `got` against `want`.
inline double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return den > 0 ? num / den : num;
}
inline double nmse(const StepOut& a, const StepOut& b) {
  double worst = 0;
  EXPECT_EQ(a.per_layer.size(), b.per_layer.size());
  for (size_t l = 0; l < a.per_layer.size() && l < b.per_layer.size(); ++l)
    worst = std::max(worst, nmse(a.per_layer[l], b.per_layer[l]));
  return worst;
}

// Independent dense attention for one head with an explicit visibility predicate.
// keys/values: [n][dim] of the sequence; query at position qp.
template <class Visible>
void dense_attend(const float* qh, const std::vector<std::vector<float>>& keys,
                  const std::vector<std::vector<float>>& values, int64_t qp, float scale, Visible visible,
                  float* out) {
  const size_t dv = values.empty() ? 0 : values[0].size();
  std::vector<double> w(keys.size(), 0.0);
  double mx = -1e300;
  for (size_t j = 0; j < keys.size(); ++j) {
    if (!visible(qp, static_cast<int64_t>(j))) continue;
    double s = 0;
    for (size_t d = 0; d < keys[j].size(); ++d) s += static_cast<double>(qh[d]) * keys[j][d];
    w[j] = s * scale;
    mx = std::max(mx, w[j]);
  }
  double sum = 0;
  for (size_t j = 0; j < keys.size(); ++j) {
    w[j] = visible(qp, static_cast<int64_t>(j)) ? std::exp(w[j] - mx) : 0.0;
    sum += w[j];
  }
  for (size_t d = 0; d < dv; ++d) {
    double acc = 0;
    for (size_t j = 0; j < keys.size(); ++j) acc += w[j] * values[j][d];
    out[d] = static_cast<float>(acc / sum);
  }
}

inline CacheSpec small_spec(int64_t n_layers, int64_t hkv, int64_t dk, int64_t dv,
                            std::vector<std::pair<AttnKind, int64_t>> kinds = {}, int64_t max_positions = 4096) {
  CacheSpec s;
  for (int64_t l = 0; l < n_layers; ++l) {
    LayerCacheSpec L;
    L.n_kv_heads = hkv;
    L.head_dim_k = dk;
    L.head_dim_v = dv;
    if (l < static_cast<int64_t>(kinds.size())) {
      L.kind = kinds[l].first;
      L.span = kinds[l].second;
    }
    s.layers.push_back(L);
  }
  s.max_positions = max_positions;
  return s;
}

}  // namespace kvt
