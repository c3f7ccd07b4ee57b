// Attention (reference and optimized) against an explicit dense masked softmax built here, for
// every policy (full, window, chunk), GQA ratios, T > 1 with positions not starting at 0, every
// SIMD level and 1/2 threads; the online-softmax block API with f32/f16/bf16/q8_0 K/V.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/blocks.h"
#include "core/error.h"
#include "core/fp16.h"
#include "core/quant.h"
#include "kernel_test_util.h"
#include "kernels/attention.h"

namespace ptn {
namespace {

using test::for_each_config;
using test::nmse;
using test::random_vec;

struct Problem {
  int64_t T, S, Hq, Hkv, D, Dv;
  std::vector<float> q, k, v;
  std::vector<int32_t> q_pos, kv_pos;
};

// kv positions start..start+S-1; the T queries are the last T of them.
Problem make_problem(int64_t T, int64_t S, int64_t Hq, int64_t Hkv, int64_t D, int64_t Dv,
                     int32_t start, uint64_t seed) {
  Problem p{T, S, Hq, Hkv, D, Dv, {}, {}, {}, {}, {}};
  p.q = random_vec(T * Hq * D, seed, -1, 1);
  p.k = random_vec(S * Hkv * D, seed + 1, -1, 1);
  p.v = random_vec(S * Hkv * Dv, seed + 2, -1, 1);
  for (int64_t s = 0; s < S; ++s) p.kv_pos.push_back(start + static_cast<int32_t>(s));
  for (int64_t t = 0; t < T; ++t) p.q_pos.push_back(start + static_cast<int32_t>(S - T + t));
  return p;
}

// The mask written out from the policy's definition (non-negative positions).
bool allowed(int64_t qp, int64_t kp, AttnKind kind, int64_t span) {
  if (kp > qp) return false;
  if (kind == AttnKind::Window) return kp >= qp - span + 1;
  if (kind == AttnKind::Chunk) return kp / span == qp / span;
  return true;
}

// Dense: scores [T, Hq, S] with -inf where masked, softmax over S, times V.
std::vector<float> dense(const Problem& p, const AttentionParams& a, const std::vector<float>& k,
                         const std::vector<float>& v) {
  std::vector<float> out(p.T * p.Hq * p.Dv, 0.0f);
  const int64_t group = p.Hq / p.Hkv;
  for (int64_t t = 0; t < p.T; ++t) {
    for (int64_t h = 0; h < p.Hq; ++h) {
      std::vector<double> sc(p.S, -INFINITY);
      for (int64_t s = 0; s < p.S; ++s) {
        if (!allowed(p.q_pos[t], p.kv_pos[s], a.kind, a.span)) continue;
        double d = 0;
        for (int64_t i = 0; i < p.D; ++i) d += double{p.q[(t * p.Hq + h) * p.D + i]} * k[(s * p.Hkv + h / group) * p.D + i];
        d *= a.scale;
        if (a.softcap > 0) d = a.softcap * std::tanh(d / a.softcap);
        sc[s] = d;
      }
      const double m = *std::max_element(sc.begin(), sc.end());
      if (m == -INFINITY) continue;
      double z = 0;
      for (double& x : sc) z += (x = std::exp(x - m));
      for (int64_t s = 0; s < p.S; ++s)
        for (int64_t i = 0; i < p.Dv; ++i)
          out[(t * p.Hq + h) * p.Dv + i] += static_cast<float>(sc[s] / z * v[(s * p.Hkv + h / group) * p.Dv + i]);
    }
  }
  return out;
}

std::vector<AttentionParams> policies(int64_t D) {
  std::vector<AttentionParams> out;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  out.push_back({scale, 0.0f, AttnKind::Full, 0});
  out.push_back({scale * 4, 5.0f, AttnKind::Full, 0});  // soft-capped, sharp scores
  for (int64_t w : {1, 2, 7, 64}) out.push_back({scale, 0.0f, AttnKind::Window, w});
  for (int64_t c : {4, 16}) out.push_back({scale, 0.0f, AttnKind::Chunk, c});
  return out;
}

TEST(Attention, VisibilityRules) {
  const AttentionParams full{1, 0, AttnKind::Full, 0}, win{1, 0, AttnKind::Window, 3},
      chunk{1, 0, AttnKind::Chunk, 4};
  EXPECT_TRUE(attn_visible(10, 0, full));
  EXPECT_FALSE(attn_visible(10, 11, full));  // causal
  EXPECT_TRUE(attn_visible(10, 8, win));     // 8, 9, 10
  EXPECT_FALSE(attn_visible(10, 7, win));
  EXPECT_TRUE(attn_visible(7, 4, chunk));    // chunk 4..7
  EXPECT_FALSE(attn_visible(8, 7, chunk));   // 8 starts a new chunk
  EXPECT_TRUE(attn_visible(-1, -4, chunk));  // floor division: chunk -4..-1
  EXPECT_FALSE(attn_visible(-1, -5, chunk));
}

TEST(Attention, MatchesDenseMaskedSoftmax) {
  struct Shape { int64_t T, S, Hq, Hkv, D, Dv; int32_t start; };
  const Shape shapes[] = {
      {1, 1, 1, 1, 16, 16, 0},      {1, 20, 4, 4, 16, 16, 3},   {5, 20, 4, 2, 37, 37, 9},
      {17, 70, 8, 2, 64, 64, 100},  {3, 150, 4, 1, 64, 24, 7},  {7, 33, 2, 2, 8, 8, 0},
      {17, 17, 4, 4, 20, 20, 1000}, {2, 90, 8, 4, 128, 128, 5},
  };
  for (const Shape& s : shapes) {
    const Problem p = make_problem(s.T, s.S, s.Hq, s.Hkv, s.D, s.Dv, s.start, s.T * 100 + s.S);
    for (const AttentionParams& a : policies(s.D)) {
      const std::string what = "T=" + std::to_string(s.T) + " S=" + std::to_string(s.S) + " Hq=" +
                               std::to_string(s.Hq) + " Hkv=" + std::to_string(s.Hkv) + " D=" +
                               std::to_string(s.D) + " kind=" + std::to_string(int(a.kind)) +
                               " span=" + std::to_string(a.span) + " cap=" + std::to_string(a.softcap);
      const std::vector<float> want = dense(p, a, p.k, p.v);
      std::vector<float> got(want.size(), 123.0f);
      ref::attention(p.q.data(), p.k.data(), p.v.data(), p.q_pos.data(), p.kv_pos.data(), p.T, p.S,
                     p.Hq, p.Hkv, p.D, p.Dv, a, got.data());
      EXPECT_LT(nmse(want, got), 1e-12) << "ref " << what;
      for_each_config([&](ThreadPool& pool, const std::string& cfg) {
        std::vector<float> opt(want.size(), 123.0f);
        attention(p.q.data(), p.k.data(), p.v.data(), p.q_pos.data(), p.kv_pos.data(), p.T, p.S,
                  p.Hq, p.Hkv, p.D, p.Dv, a, opt.data(), pool);
        EXPECT_LT(nmse(want, opt), 1e-10) << cfg << " " << what;
      });
    }
  }
}

// Attention sinks (gpt-oss): the dense softmax with one more score per head, the sink, whose
// value row is zero. Sinks far below, near and far above the scores; the optimized op at every
// SIMD level and thread count; a query that sees no row gives zeros, with or without a sink.
TEST(Attention, SinksAreOneMoreScoreWithAZeroValueRow) {
  struct Shape { int64_t T, S, Hq, Hkv, D; int32_t start; };
  const Shape shapes[] = {{1, 1, 1, 1, 16, 0}, {5, 20, 4, 2, 37, 9}, {17, 70, 8, 2, 64, 100}, {2, 90, 8, 4, 128, 5}};
  for (const Shape& s : shapes) {
    Problem p = make_problem(s.T, s.S, s.Hq, s.Hkv, s.D, s.D, s.start, s.T * 7 + s.S);
    for (float level : {-30.0f, 0.0f, 0.7f, 25.0f}) {
      std::vector<float> sinks(static_cast<size_t>(s.Hq));
      for (int64_t h = 0; h < s.Hq; ++h) sinks[static_cast<size_t>(h)] = level + 0.37f * static_cast<float>(h % 3) - 0.3f;
      for (AttentionParams a : policies(s.D)) {
        a.sinks = sinks.data();
        // Dense with the sink: softmax over (visible scores, sink), the sink's share dropped.
        const int64_t group = s.Hq / s.Hkv;
        std::vector<float> want(static_cast<size_t>(s.T * s.Hq * s.D), 0.0f);
        for (int64_t t = 0; t < s.T; ++t)
          for (int64_t h = 0; h < s.Hq; ++h) {
            std::vector<double> sc;
            std::vector<int64_t> rows;
            for (int64_t j = 0; j < s.S; ++j) {
              if (!allowed(p.q_pos[t], p.kv_pos[j], a.kind, a.span)) continue;
              double d = 0;
              for (int64_t i = 0; i < s.D; ++i) d += double{p.q[(t * s.Hq + h) * s.D + i]} * p.k[(j * s.Hkv + h / group) * s.D + i];
              d *= a.scale;
              if (a.softcap > 0) d = a.softcap * std::tanh(d / a.softcap);
              sc.push_back(d);
              rows.push_back(j);
            }
            if (sc.empty()) continue;
            const double sink = sinks[static_cast<size_t>(h)];
            const double m = std::max(*std::max_element(sc.begin(), sc.end()), sink);
            double z = std::exp(sink - m);
            for (double& x : sc) z += (x = std::exp(x - m));
            for (size_t r = 0; r < sc.size(); ++r)
              for (int64_t i = 0; i < s.D; ++i)
                want[(t * s.Hq + h) * s.D + i] += static_cast<float>(sc[r] / z * p.v[(rows[r] * s.Hkv + h / group) * s.D + i]);
          }
        const std::string what = "T=" + std::to_string(s.T) + " S=" + std::to_string(s.S) + " sinks~" +
                                 std::to_string(level) + " kind=" + std::to_string(int(a.kind)) + " span=" + std::to_string(a.span);
        std::vector<float> got(want.size(), 123.0f);
        ref::attention(p.q.data(), p.k.data(), p.v.data(), p.q_pos.data(), p.kv_pos.data(), s.T, s.S, s.Hq, s.Hkv, s.D,
                       s.D, a, got.data());
        EXPECT_LT(nmse(want, got), 1e-12) << "ref " << what;
        for_each_config([&](ThreadPool& pool, const std::string& cfg) {
          std::vector<float> opt(want.size(), 123.0f);
          attention(p.q.data(), p.k.data(), p.v.data(), p.q_pos.data(), p.kv_pos.data(), s.T, s.S, s.Hq, s.Hkv, s.D,
                    s.D, a, opt.data(), pool);
          EXPECT_LT(nmse(want, opt), 1e-10) << cfg << " " << what;
        });
        // A sink far above the scores takes almost all the weight: the output shrinks towards 0.
        if (level == 25.0f && a.softcap == 0.0f && a.kind == AttnKind::Full) {
          double sum2 = 0;
          for (float x : got) sum2 += double{x} * x;
          EXPECT_LT(sum2, 1e-6 * static_cast<double>(got.size())) << what;
        }
      }
    }
  }
  // No visible row (kv after the query): zeros, the sink does not invent a value.
  Problem p = make_problem(1, 4, 2, 1, 16, 16, 0, 5);
  p.q_pos = {-1};
  const std::vector<float> sinks = {0.5f, -2.0f};
  AttentionParams a{0.25f, 0.0f, AttnKind::Full, 0, sinks.data()};
  std::vector<float> out(32, 9.0f), opt(32, 9.0f);
  ref::attention(p.q.data(), p.k.data(), p.v.data(), p.q_pos.data(), p.kv_pos.data(), 1, 4, 2, 1, 16, 16, a, out.data());
  attention(p.q.data(), p.k.data(), p.v.data(), p.q_pos.data(), p.kv_pos.data(), 1, 4, 2, 1, 16, 16, a, opt.data());
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(out[static_cast<size_t>(i)], 0.0f);
    EXPECT_EQ(opt[static_cast<size_t>(i)], 0.0f);
  }
  // A sink that is not finite is refused by name.
  const std::vector<float> bad = {0.5f, NAN};
  a.sinks = bad.data();
  p.q_pos = {3};
  try {
    attention(p.q.data(), p.k.data(), p.v.data(), p.q_pos.data(), p.kv_pos.data(), 1, 4, 2, 1, 16, 16, a, opt.data());
    ADD_FAILURE() << "a NaN sink was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sink of head 1"), std::string::npos) << e.what();
  }
}

TEST(Attention, WindowOfOneReturnsOwnValue) {
  // W = 1: each query sees only its own position, so out = v at that position.
  const Problem p = make_problem(4, 10, 4, 2, 16, 16, 50, 9);
  AttentionParams a{0.25f, 0.0f, AttnKind::Window, 1};
  std::vector<float> out(p.T * p.Hq * p.Dv);
  attention(p.q.data(), p.k.data(), p.v.data(), p.q_pos.data(), p.kv_pos.data(), p.T, p.S, p.Hq,
            p.Hkv, p.D, p.Dv, a, out.data());
  for (int64_t t = 0; t < p.T; ++t)
    for (int64_t h = 0; h < p.Hq; ++h)
      for (int64_t i = 0; i < p.Dv; ++i)
        EXPECT_NEAR(out[(t * p.Hq + h) * p.Dv + i], p.v[((p.S - p.T + t) * p.Hkv + h / 2) * p.Dv + i], 1e-6);
}

TEST(Attention, UnsortedKvAndInvisibleQueries) {
  Problem p = make_problem(3, 40, 4, 2, 32, 32, 0, 21);
  // Shuffle the kv rows (positions move with their rows): the result must not change.
  std::vector<int64_t> perm(p.S);
  for (int64_t i = 0; i < p.S; ++i) perm[i] = (i * 17) % p.S;  // 17 is coprime to 40
  Problem sh = p;
  for (int64_t i = 0; i < p.S; ++i) {
    sh.kv_pos[i] = p.kv_pos[perm[i]];
    std::copy_n(&p.k[perm[i] * p.Hkv * p.D], p.Hkv * p.D, &sh.k[i * p.Hkv * p.D]);
    std::copy_n(&p.v[perm[i] * p.Hkv * p.Dv], p.Hkv * p.Dv, &sh.v[i * p.Hkv * p.Dv]);
  }
  sh.q_pos = {39, 5, -1};  // the last query sees nothing: zeros
  for (const AttentionParams& a : policies(p.D)) {
    const std::vector<float> want = dense(sh, a, sh.k, sh.v);
    for_each_config([&](ThreadPool& pool, const std::string& cfg) {
      std::vector<float> got(want.size(), 5.0f);
      attention(sh.q.data(), sh.k.data(), sh.v.data(), sh.q_pos.data(), sh.kv_pos.data(), sh.T, sh.S,
                sh.Hq, sh.Hkv, sh.D, sh.Dv, a, got.data(), pool);
      EXPECT_LT(nmse(want, got), 1e-10) << cfg;
      for (int64_t i = 2 * sh.Hq * sh.Dv; i < 3 * sh.Hq * sh.Dv; ++i) ASSERT_EQ(got[i], 0.0f) << cfg;
    });
  }
}

TEST(Attention, NegativePositionsMatchReference) {
  // Consecutive kv positions -30..-11, queries at -16..-11 (the optimized path computes the
  // visible run directly; chunks need floor division).
  const Problem p = make_problem(6, 20, 4, 2, 16, 16, -30, 31);
  for (const AttentionParams& a : policies(p.D)) {
    std::vector<float> want(p.T * p.Hq * p.Dv);
    ref::attention(p.q.data(), p.k.data(), p.v.data(), p.q_pos.data(), p.kv_pos.data(), p.T, p.S, p.Hq,
                   p.Hkv, p.D, p.Dv, a, want.data());
    for_each_config([&](ThreadPool& pool, const std::string& cfg) {
      std::vector<float> got(want.size());
      attention(p.q.data(), p.k.data(), p.v.data(), p.q_pos.data(), p.kv_pos.data(), p.T, p.S, p.Hq,
                p.Hkv, p.D, p.Dv, a, got.data(), pool);
      EXPECT_LT(nmse(want, got), 1e-10) << cfg << " kind=" << int(a.kind) << " span=" << a.span;
    });
  }
}

// ---- online softmax over K/V blocks in place ----

// Rows [S, Hkv, D] stored as `type`; returns the bytes and writes the decoded floats to `back`.
std::vector<uint8_t> encode(const std::vector<float>& x, DType type, int64_t D, std::vector<float>& back) {
  const int64_t rows = static_cast<int64_t>(x.size()) / D;
  back.resize(x.size());
  std::vector<uint8_t> out;
  if (type == DType::F32) {
    out.resize(x.size() * 4);
    std::memcpy(out.data(), x.data(), out.size());
    back = x;
  } else if (type == DType::F16 || type == DType::BF16) {
    out.resize(x.size() * 2);
    auto* h = reinterpret_cast<uint16_t*>(out.data());
    for (size_t i = 0; i < x.size(); ++i) {
      h[i] = type == DType::F16 ? f32_to_fp16(x[i]) : f32_to_bf16(x[i]);
      back[i] = type == DType::F16 ? fp16_to_f32(h[i]) : bf16_to_f32(h[i]);
    }
  } else if (type == DType::Q4_0) {  // ggml's q4_0 through core/quant
    out.resize(static_cast<size_t>(rows * D / 32) * sizeof(BlockQ4_0));
    for (int64_t r = 0; r < rows; ++r) {
      quantize_row(type, &x[r * D], out.data() + r * (D / 32) * sizeof(BlockQ4_0), D);
      dequantize_row(type, out.data() + r * (D / 32) * sizeof(BlockQ4_0), &back[r * D], D);
    }
  } else {  // Q8_0: d = max|x| / 127 per 32, q = round(x / d)
    out.resize(static_cast<size_t>(rows * D / 32) * sizeof(BlockQ8_0));
    auto* b = reinterpret_cast<BlockQ8_0*>(out.data());
    for (int64_t blk = 0; blk < rows * D / 32; ++blk) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[blk * 32 + i]));
      b[blk].d = f32_to_fp16(amax / 127);
      const float d = fp16_to_f32(b[blk].d);
      for (int i = 0; i < 32; ++i) {
        b[blk].qs[i] = static_cast<int8_t>(d == 0 ? 0 : std::lround(x[blk * 32 + i] / d));
        back[blk * 32 + i] = d * b[blk].qs[i];
      }
    }
  }
  return out;
}

TEST(Attention, BlocksWithReducedPrecisionKv) {
  const int64_t block = 16;
  for (DType kt : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    for (DType vt : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
      Problem p = make_problem(3, 75, 8, 2, 64, 64, 11, 77);
      std::vector<float> kback, vback;
      const std::vector<uint8_t> kb = encode(p.k, kt, p.D, kback), vb = encode(p.v, vt, p.Dv, vback);
      const int64_t krow = static_cast<int64_t>(kb.size()) / (p.S * p.Hkv);
      const int64_t vrow = static_cast<int64_t>(vb.size()) / (p.S * p.Hkv);
      for (const AttentionParams& a : policies(p.D)) {
        for_each_config([&](ThreadPool&, const std::string& cfg) {
          std::vector<float> got(p.T * p.Hq * p.Dv);
          std::vector<float> acc(p.Dv);
          for (int64_t t = 0; t < p.T; ++t) {
            for (int64_t h = 0; h < p.Hq; ++h) {
              const int64_t kvh = h / (p.Hq / p.Hkv);
              AttnAccumulator st;
              attn_begin(st, acc.data(), p.Dv);
              for (int64_t b0 = 0; b0 < p.S; b0 += block) {  // cache-like blocks, visible run only
                int64_t lo = b0, hi = std::min(p.S, b0 + block);
                while (lo < hi && !attn_visible(p.q_pos[t], p.kv_pos[lo], a)) ++lo;
                int64_t e = lo;
                while (e < hi && attn_visible(p.q_pos[t], p.kv_pos[e], a)) ++e;
                KvRows k{kb.data() + (lo * p.Hkv + kvh) * krow, kt, p.Hkv * krow};
                KvRows v{vb.data() + (lo * p.Hkv + kvh) * vrow, vt, p.Hkv * vrow};
                attend_block(st, &p.q[(t * p.Hq + h) * p.D], p.D, k, v, e - lo, a.scale, a.softcap);
              }
              attn_finish(st, &got[(t * p.Hq + h) * p.Dv]);
            }
          }
          const std::string what = std::string(dtype_name(kt)) + "/" + dtype_name(vt) + " " + cfg +
                                   " kind=" + std::to_string(int(a.kind)) + " span=" + std::to_string(a.span);
          EXPECT_LT(nmse(dense(p, a, kback, vback), got), 1e-10) << "vs decoded K/V " << what;
          // q4_0 rounds to 1/16 of a block's range: ~1e-2 of the values' energy.
          const double bound = kt == DType::F32 && vt == DType::F32               ? 1e-10
                               : kt == DType::Q4_0 || vt == DType::Q4_0 ? 3e-2
                                                                          : 1e-3;
          EXPECT_LT(nmse(dense(p, a, p.k, p.v), got), bound) << "vs f32 K/V " << what;
        });
      }
    }
  }
}

TEST(Attention, GroupOfHeadsEqualsOneHeadAtATime) {
  // 24 query heads over 1 kv head (more than one pass of the kernel's head batch), every K and V
  // type (the group path converts some of them once for all heads, the one-head path never).
  Problem p = make_problem(1, 50, 24, 1, 64, 64, 0, 8);
  const AttentionParams a{0.125f, 3.0f, AttnKind::Full, 0};
  for (DType kt : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    for (DType vt : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
      std::vector<float> kback, vback;
      const auto kb = encode(p.k, kt, p.D, kback), vb = encode(p.v, vt, p.Dv, vback);
      KvRows k{kb.data(), kt, static_cast<int64_t>(kb.size()) / p.S};
      KvRows v{vb.data(), vt, static_cast<int64_t>(vb.size()) / p.S};
      const std::string types = std::string(dtype_name(kt)) + "/" + dtype_name(vt);
      for_each_config([&](ThreadPool&, const std::string& cfg) {
        std::vector<float> acc(p.Hq * p.Dv), one(p.Hq * p.Dv), grouped(p.Hq * p.Dv);
        std::vector<AttnAccumulator> st(p.Hq);
        for (int64_t h = 0; h < p.Hq; ++h) {
          attn_begin(st[h], &acc[h * p.Dv], p.Dv);
          attend_block(st[h], &p.q[h * p.D], p.D, k, v, 20, a.scale, a.softcap);  // two spans
          attend_block(st[h], &p.q[h * p.D], p.D, KvRows{kb.data() + 20 * k.stride, k.type, k.stride},
                       KvRows{vb.data() + 20 * v.stride, v.type, v.stride}, 30, a.scale, a.softcap);
          attn_finish(st[h], &one[h * p.Dv]);
        }
        for (int64_t h = 0; h < p.Hq; ++h) attn_begin(st[h], &acc[h * p.Dv], p.Dv);
        attend_block_group(st.data(), p.q.data(), p.Hq, p.D, k, v, p.S, a.scale, a.softcap);
        for (int64_t h = 0; h < p.Hq; ++h) attn_finish(st[h], &grouped[h * p.Dv]);
        EXPECT_LT(nmse(one, grouped), 1e-12) << types << " " << cfg;
        EXPECT_LT(nmse(dense(p, a, kback, vback), grouped), 1e-10) << types << " " << cfg;
      });
    }
  }
}

TEST(Attention, SixteenBitRowsWithOddHeadDims) {
  // D = 37 and Dv = 21 are not multiples of 8 or 16: the vector loops end in partial rows.
  for (DType t : {DType::F16, DType::BF16}) {
    Problem p = make_problem(2, 30, 4, 2, 37, 21, 3, 12);
    std::vector<float> kback, vback;
    const auto kb = encode(p.k, t, p.D, kback), vb = encode(p.v, t, p.Dv, vback);
    const AttentionParams a{0.2f, 0.0f, AttnKind::Window, 7};
    for_each_config([&](ThreadPool&, const std::string& cfg) {
      std::vector<float> got(p.T * p.Hq * p.Dv), acc(p.Dv);
      for (int64_t t2 = 0; t2 < p.T; ++t2) {
        for (int64_t h = 0; h < p.Hq; ++h) {
          const int64_t kvh = h / 2;
          int64_t lo = 0;
          while (!attn_visible(p.q_pos[t2], p.kv_pos[lo], a)) ++lo;
          int64_t hi = lo;
          while (hi < p.S && attn_visible(p.q_pos[t2], p.kv_pos[hi], a)) ++hi;
          AttnAccumulator st;
          attn_begin(st, acc.data(), p.Dv);
          attend_block(st, &p.q[(t2 * p.Hq + h) * p.D], p.D,
                       KvRows{kb.data() + (lo * p.Hkv + kvh) * p.D * 2, t, p.Hkv * p.D * 2},
                       KvRows{vb.data() + (lo * p.Hkv + kvh) * p.Dv * 2, t, p.Hkv * p.Dv * 2}, hi - lo,
                       a.scale, a.softcap);
          attn_finish(st, &got[(t2 * p.Hq + h) * p.Dv]);
        }
      }
      EXPECT_LT(nmse(dense(p, a, kback, vback), got), 1e-10) << dtype_name(t) << " " << cfg;
    });
  }
}

// Query tiles: every row of a tile gets what attend_block gives it over the same rows, for
// each K/V type, partial tiles, rows that see nothing in some blocks (or at all), windows that
// start inside a block, soft-capping, and head dims that are not multiples of 8.
TEST(Attention, TileRowsEqualOneRowAtATime) {
  struct Case { int64_t d, dv; float softcap; };
  for (const Case& c : {Case{64, 64, 0.0f}, Case{64, 64, 4.0f}, Case{37, 21, 0.0f}}) {
    for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
      if ((type == DType::Q8_0 || type == DType::Q4_0) && (c.d % 32 || c.dv % 32)) continue;
      const int64_t S = 70, block = 16;  // 5 blocks, the last one partial
      std::vector<float> kf = random_vec(S * c.d, 3, -2, 2), vf = random_vec(S * c.dv, 4, -1, 1), kback, vback;
      const std::vector<uint8_t> kb = encode(kf, type, c.d, kback), vb = encode(vf, type, c.dv, vback);
      const int64_t krow = static_cast<int64_t>(kb.size()) / S, vrow = static_cast<int64_t>(vb.size()) / S;
      for_each_config([&](ThreadPool&, const std::string& cfg) {
        const int64_t w = attn_tile_width();
        for (int64_t nq : {int64_t{1}, std::max<int64_t>(1, w / 2 + 1), w}) {
          const std::vector<float> q = random_vec(nq * c.d, 100 + nq, -1, 1);
          // Row i sees positions [first[i], last[i]]: causal rows of a prompt with a window of
          // 23 on odd rows; the last row of a full tile sees nothing.
          std::vector<int64_t> first(nq), last(nq);
          for (int64_t i = 0; i < nq; ++i) {
            last[i] = S - 1 - (nq - 1 - i) * 3;
            first[i] = i % 2 ? std::max<int64_t>(0, last[i] - 22) : 0;
            if (nq > 1 && i == nq - 1) first[i] = last[i] + 1;
          }
          const float scale = 0.3f;
          std::vector<float> want(nq * c.dv), got(nq * c.dv), acc(c.dv);
          for (int64_t i = 0; i < nq; ++i) {
            AttnAccumulator st;
            attn_begin(st, acc.data(), c.dv);
            for (int64_t b0 = 0; b0 < S; b0 += block) {
              const int64_t lo = std::max(b0, first[i]), hi = std::min({S - 1, b0 + block - 1, last[i]});
              if (lo > hi) continue;
              attend_block(st, &q[i * c.d], c.d, KvRows{kb.data() + lo * krow, type, krow},
                           KvRows{vb.data() + lo * vrow, type, vrow}, hi - lo + 1, scale, c.softcap);
            }
            attn_finish(st, &want[i * c.dv]);
          }
          std::vector<const float*> qrows(nq);
          std::vector<float*> orows(nq);
          for (int64_t i = 0; i < nq; ++i) {
            qrows[i] = &q[i * c.d];
            orows[i] = &got[i * c.dv];
          }
          std::vector<float> buf(attn_tile_floats(c.d, c.dv));
          AttnTile tile;
          attn_tile_begin(tile, qrows.data(), nq, c.d, c.dv, scale, c.softcap, buf.data());
          for (int64_t b0 = 0; b0 < S; b0 += block) {
            const int64_t n = std::min(block, S - b0);
            std::vector<int32_t> lo(nq), hi(nq);
            for (int64_t i = 0; i < nq; ++i) {
              lo[i] = static_cast<int32_t>(first[i] - b0);   // may be < 0 or >= n: clamped
              hi[i] = static_cast<int32_t>(last[i] + 1 - b0);
            }
            attn_tile_block(tile, KvRows{kb.data() + b0 * krow, type, krow}, KvRows{vb.data() + b0 * vrow, type, vrow},
                            n, lo.data(), hi.data());
          }
          attn_tile_finish(tile, orows.data());
          const std::string what = std::string(dtype_name(type)) + " d=" + std::to_string(c.d) + " softcap=" +
                                   std::to_string(c.softcap) + " nq=" + std::to_string(nq) + " " + cfg;
          EXPECT_LT(nmse(want, got), 1e-10) << what;
          if (nq > 1) {
            for (int64_t e = 0; e < c.dv; ++e) EXPECT_EQ(got[(nq - 1) * c.dv + e], 0.0f) << "row that sees nothing, " << what;
          }
        }
      });
    }
  }
}

TEST(Attention, TileBadArgumentsThrow) {
  std::vector<float> q(64), buf(attn_tile_floats(64, 64));
  const float* rows[1] = {q.data()};
  AttnTile tile;
  EXPECT_THROW(attn_tile_begin(tile, rows, 0, 64, 64, 1.0f, 0.0f, buf.data()), Error);
  EXPECT_THROW(attn_tile_begin(tile, rows, attn_tile_width() + 1, 64, 64, 1.0f, 0.0f, buf.data()), Error);
  EXPECT_THROW(attn_tile_begin(tile, rows, 1, 64, 64, NAN, 0.0f, buf.data()), Error);
  EXPECT_THROW(attn_tile_begin(tile, rows, 1, 64, 64, 1.0f, 0.0f, nullptr), Error);
  const int32_t lo[1] = {0}, hi[1] = {1};
  EXPECT_THROW(attn_tile_block(tile, KvRows{q.data(), DType::F32, 256}, KvRows{q.data(), DType::F32, 256}, 1, lo, hi),
               Error);  // not begun
  attn_tile_begin(tile, rows, 1, 64, 64, 1.0f, 0.0f, buf.data());
  EXPECT_THROW(attn_tile_block(tile, KvRows{q.data(), DType::Q4_K, 256}, KvRows{q.data(), DType::F32, 256}, 1, lo, hi),
               Error);
  EXPECT_THROW(attn_tile_block(tile, KvRows{q.data(), DType::F32, 16}, KvRows{q.data(), DType::F32, 256}, 2, lo, hi),
               Error);
}

TEST(Attention, MergeEqualsOneAccumulator) {
  const Problem p = make_problem(1, 100, 1, 1, 40, 24, 0, 5);
  std::vector<float> a1(p.Dv), a2(p.Dv), a3(p.Dv), one(p.Dv), merged(p.Dv);
  AttnAccumulator all, even, odd;
  attn_begin(all, a1.data(), p.Dv);
  attn_begin(even, a2.data(), p.Dv);
  attn_begin(odd, a3.data(), p.Dv);
  const float scale = 0.5f;
  for (int64_t b0 = 0; b0 < p.S; b0 += 10) {
    KvRows k{&p.k[b0 * p.D], DType::F32, p.D * 4}, v{&p.v[b0 * p.Dv], DType::F32, p.Dv * 4};
    attend_block(all, p.q.data(), p.D, k, v, 10, scale, 0.0f);
    attend_block((b0 / 10) % 2 ? odd : even, p.q.data(), p.D, k, v, 10, scale, 0.0f);
  }
  attn_finish(all, one.data());
  attn_merge(even, odd);
  attn_finish(even, merged.data());
  EXPECT_LT(nmse(one, merged), 1e-12);
  AttentionParams ap{scale, 0.0f, AttnKind::Full, 0};
  EXPECT_LT(nmse(dense(p, ap, p.k, p.v), one), 1e-10);
  // Nothing seen: zeros.
  AttnAccumulator empty;
  std::vector<float> e(p.Dv, 7.0f);
  attn_begin(empty, e.data(), p.Dv);
  attn_finish(empty, e.data());
  for (float x : e) EXPECT_EQ(x, 0.0f);
}

template <class F>
void expect_error(F fn, std::initializer_list<const char*> parts) {
  try {
    fn();
    ADD_FAILURE() << "no ptn::Error thrown";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const char* s : parts) EXPECT_NE(msg.find(s), std::string::npos) << msg << " lacks " << s;
  }
}

TEST(Attention, BadArgumentsThrow) {
  const Problem p = make_problem(2, 8, 4, 2, 16, 16, 0, 1);
  std::vector<float> out(2 * 4 * 16);
  AttentionParams a;
  auto call = [&](int64_t Hq, int64_t Hkv, const AttentionParams& ap) {
    attention(p.q.data(), p.k.data(), p.v.data(), p.q_pos.data(), p.kv_pos.data(), 2, 8, Hq, Hkv,
              16, 16, ap, out.data());
  };
  expect_error([&] { call(3, 2, a); }, {"attention", "Hq=3", "Hkv=2", "multiple"});
  expect_error([&] { ref::attention(p.q.data(), p.k.data(), p.v.data(), p.q_pos.data(), p.kv_pos.data(), 2, 8, 4, 0, 16, 16, a, out.data()); },
               {"attention", "Hkv=0"});
  expect_error([&] { call(4, 2, AttentionParams{1.0f, 0.0f, AttnKind::Window, 0}); }, {"attention", "window", "span"});
  expect_error([&] { call(4, 2, AttentionParams{1.0f, 0.0f, AttnKind::Chunk, -3}); }, {"attention", "chunk", "span"});
  expect_error([&] { call(4, 2, AttentionParams{1.0f, 0.0f, AttnKind::Window, int64_t{1} << 40}); },
               {"attention", "window", "span"});
  expect_error([&] { call(4, 2, AttentionParams{NAN, 0.0f, AttnKind::Full, 0}); }, {"attention", "scale"});
  expect_error([&] { call(4, 2, AttentionParams{1.0f, -1.0f, AttnKind::Full, 0}); }, {"attention", "softcap"});

  std::vector<float> acc(16);
  AttnAccumulator st;
  attn_begin(st, acc.data(), 16);
  std::vector<uint8_t> raw(4096);
  expect_error([&] { attend_block(st, p.q.data(), 16, KvRows{raw.data(), DType::Q8_0, 34}, KvRows{raw.data(), DType::F32, 64}, 2, 1.0f, 0.0f); },
               {"attend_block", "q8_0", "32"});
  expect_error([&] { attend_block(st, p.q.data(), 16, KvRows{raw.data(), DType::Q4_K, 64}, KvRows{raw.data(), DType::F32, 64}, 2, 1.0f, 0.0f); },
               {"attend_block", "q4_0"});
  expect_error([&] { attend_block(st, p.q.data(), 16, KvRows{raw.data(), DType::F16, 16}, KvRows{raw.data(), DType::F32, 64}, 2, 1.0f, 0.0f); },
               {"attend_block", "stride 16"});
  expect_error([&] { attend_block(st, p.q.data(), 16, KvRows{raw.data(), DType::F32, 64}, KvRows{raw.data(), DType::F32, 64}, -1, 1.0f, 0.0f); },
               {"attend_block", "n=-1"});
  AttnAccumulator fresh;  // never begun
  expect_error([&] { attend_block(fresh, p.q.data(), 16, KvRows{raw.data(), DType::F32, 64}, KvRows{raw.data(), DType::F32, 64}, 1, 1.0f, 0.0f); },
               {"attend_block", "attn_begin"});
  std::vector<float> acc8(8);
  AttnAccumulator other;
  attn_begin(other, acc8.data(), 8);
  expect_error([&] { attn_merge(st, other); }, {"attn_merge", "dv"});
}

}  // namespace
}  // namespace ptn
