// moe_ffn: the optimized op (rows grouped by expert, optimized matmuls) against the reference
// (token by token, reference matmuls) for every expert weight type, with and without
// renormalised top-k and a shared expert, on steps where several rows choose the same expert
// and some experts get no row; and the routing against its definition (softmax, and Llama 4's
// sigmoid scores applied to the experts' inputs). The optimized op runs both ways (all experts'
// products as one batch, and expert by expert) with the same result.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/error.h"
#include "core/quant.h"
#include "kernel_test_util.h"
#include "kernels/moe.h"

namespace ptn {
namespace {

using test::nmse;

struct Mat {
  DType type;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  WeightView view() const { return {type, rows, cols, bytes.data(), row_bytes(type, cols)}; }
};

// Uniform values of standard deviation `sd`, stored as type t.
Mat make_mat(DType t, int64_t rows, int64_t cols, std::mt19937_64& rng, double sd) {
  Mat m{t, rows, cols, std::vector<uint8_t>(row_bytes(t, cols) * static_cast<size_t>(rows))};
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = static_cast<float>(std::sqrt(3.0) * sd * u(rng));
    quantize_row(t, row.data(), m.bytes.data() + static_cast<size_t>(r) * row_bytes(t, cols), cols);
  }
  return m;
}

struct Layer {
  Mat router;
  std::vector<Mat> gate, up, down;
  bool shared = false;
  Mat sg, su, sd, sr;
  MoeWeights views() const {
    MoeWeights w;
    w.router = router.view();
    for (size_t e = 0; e < gate.size(); ++e) {
      w.gate.push_back(gate[e].view());
      w.up.push_back(up[e].view());
      w.down.push_back(down[e].view());
    }
    w.shared = shared;
    if (shared) {
      w.shared_gate = sg.view();
      w.shared_up = su.view();
      w.shared_down = sd.view();
      w.shared_router = sr.view();
    }
    return w;
  }
};

constexpr int64_t kH = 256, kF = 256, kE = 8;
constexpr int64_t kShunned = kE - 1;  // the expert no row chooses (see make_x)

// Experts of type t; the router stays f32 (the exporter and llama.cpp's files keep it so).
// Router row kShunned has a large negative weight on column 0, which make_x sets high in
// every row: no row picks that expert.
Layer make_layer(DType t, bool shared, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Layer l;
  l.router = make_mat(DType::F32, kE, kH, rng, 3.0 / std::sqrt(double(kH)));
  float* r7 = reinterpret_cast<float*>(l.router.bytes.data()) + kShunned * kH;
  r7[0] = -20.0f;
  for (int64_t e = 0; e < kE; ++e) {
    l.gate.push_back(make_mat(t, kF, kH, rng, 1.0 / std::sqrt(double(kH))));
    l.up.push_back(make_mat(t, kF, kH, rng, 1.0 / std::sqrt(double(kH))));
    l.down.push_back(make_mat(t, kH, kF, rng, 1.0 / std::sqrt(double(kF))));
  }
  l.shared = shared;
  if (shared) {
    const int64_t Fs = 512;
    l.sg = make_mat(t, Fs, kH, rng, 1.0 / std::sqrt(double(kH)));
    l.su = make_mat(t, Fs, kH, rng, 1.0 / std::sqrt(double(kH)));
    l.sd = make_mat(t, kH, Fs, rng, 1.0 / std::sqrt(double(Fs)));
    l.sr = make_mat(DType::F32, 1, kH, rng, 1.0 / std::sqrt(double(kH)));
  }
  return l;
}

std::vector<float> make_x(int64_t T, uint64_t seed) {
  std::vector<float> x = test::random_vec(static_cast<size_t>(T * kH), seed);
  for (int64_t t = 0; t < T; ++t) x[static_cast<size_t>(t * kH)] = 2.0f;
  return x;
}

// How many rows chose each expert (by the reference routing).
std::vector<int> expert_rows(const Layer& l, const MoeParams& p, const std::vector<float>& x, int64_t T) {
  std::vector<int> n(kE, 0);
  std::vector<float> logits(kE), w(static_cast<size_t>(p.top_k));
  std::vector<int32_t> e(static_cast<size_t>(p.top_k));
  for (int64_t t = 0; t < T; ++t) {
    ref::matmul(l.router.view(), x.data() + t * kH, 1, logits.data());
    moe_route(logits.data(), kE, p, e.data(), w.data());
    for (int32_t k : e) ++n[static_cast<size_t>(k)];
  }
  return n;
}

// The optimized op both ways, every expert's products as one batch and expert by expert: one
// result, bit for bit (kF is a multiple of 16). Returns it.
std::vector<float> both_ways(const MoeWeights& w, const MoeParams& p, const std::vector<float>& x, int64_t T,
                             ThreadPool& pool, const std::string& label) {
  MoeScratch batched, per_expert;
  batched.batched_rows = std::numeric_limits<int32_t>::max();
  per_expert.batched_rows = 0;
  std::vector<float> a(static_cast<size_t>(T * kH), 1.0f), b(a.size(), -1.0f);
  moe_ffn(w, p, x.data(), T, a.data(), batched, pool);
  moe_ffn(w, p, x.data(), T, b.data(), per_expert, pool);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << label << ": batched and expert by expert differ";
  return a;
}

double threshold(DType t) {
  if (t == DType::F32 || t == DType::F16) return 1e-7;
  if (t == DType::BF16) return 5e-5;  // AVX-512 BF16 dot products round the activations
  return 5e-4;                        // 8-bit activations against the reference's f32
}

TEST(MoeFfn, OptimizedMatchesReferenceForEveryWeightType) {
  const DType types[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K};
  uint64_t seed = 1;
  for (DType t : types) {
    for (bool shared : {false, true}) {
      const Layer l = make_layer(t, shared, ++seed);
      const MoeWeights w = l.views();
      for (bool norm : {true, false}) {
        const MoeParams p{2, norm};
        for (int64_t T : {1, 3, 37}) {
          SCOPED_TRACE(std::string(dtype_name(t)) + (shared ? " shared" : "") + (norm ? " norm" : "") + " T=" + std::to_string(T));
          const std::vector<float> x = make_x(T, seed * 31 + static_cast<uint64_t>(T));
          if (T == 37) {  // the step this test is about: shared experts and an idle one
            const std::vector<int> n = expert_rows(l, p, x, T);
            EXPECT_EQ(n[kShunned], 0);
            EXPECT_GE(*std::max_element(n.begin(), n.end()), 2);
          }
          std::vector<float> want(static_cast<size_t>(T * kH));
          ref::moe_ffn(w, p, x.data(), T, want.data());
          test::for_each_config([&](ThreadPool& pool, const std::string& label) {
            MoeScratch scratch;
            std::vector<float> got(want.size(), 123.0f);
            moe_ffn(w, p, x.data(), T, got.data(), scratch, pool);
            const double e = nmse(want, got);
            EXPECT_LT(e, threshold(t)) << label;
            // Scratch from a larger step is reused as it is.
            std::vector<float> again(want.size(), -5.0f);
            moe_ffn(w, p, x.data(), T, again.data(), scratch, pool);
            EXPECT_EQ(std::memcmp(again.data(), got.data(), got.size() * 4), 0) << label;
            EXPECT_LT(nmse(want, both_ways(w, p, x, T, pool, label)), threshold(t)) << label;
          });
        }
      }
    }
  }
}

// The reference against a direct formula, for one row with experts in f32: the combination
// weights are softmax-then-top-k (optionally renormalised), and with renormalisation they are
// Mixtral's softmax over the top-k logits.
TEST(MoeFfn, ReferenceFollowsTheDefinition) {
  const Layer l = make_layer(DType::F32, true, 99);
  const MoeWeights w = l.views();
  const std::vector<float> x = make_x(1, 5);
  auto lin = [](const Mat& m, const std::vector<double>& v) {
    std::vector<double> out(static_cast<size_t>(m.rows));
    const float* d = reinterpret_cast<const float*>(m.bytes.data());
    for (int64_t r = 0; r < m.rows; ++r)
      for (int64_t c = 0; c < m.cols; ++c) out[static_cast<size_t>(r)] += double(d[r * m.cols + c]) * v[static_cast<size_t>(c)];
    return out;
  };
  auto mlp = [&](const Mat& g, const Mat& u, const Mat& dn, const std::vector<double>& v) {
    std::vector<double> a = lin(g, v), b = lin(u, v);
    for (size_t i = 0; i < a.size(); ++i) a[i] = a[i] / (1 + std::exp(-a[i])) * b[i];
    return lin(dn, a);
  };
  const std::vector<double> xd(x.begin(), x.end());
  const std::vector<double> logits = lin(l.router, xd);
  std::vector<int> idx(kE);
  for (int i = 0; i < kE; ++i) idx[static_cast<size_t>(i)] = i;
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)]; });
  for (int64_t k : {1, 2, 3}) {
    for (bool norm : {true, false}) {
      double z = 0, zk = 0;
      for (double v : logits) z += std::exp(v);
      for (int64_t j = 0; j < k; ++j) zk += std::exp(logits[static_cast<size_t>(idx[static_cast<size_t>(j)])]);
      std::vector<double> want(kH, 0.0);
      for (int64_t j = 0; j < k; ++j) {
        const int e = idx[static_cast<size_t>(j)];
        const double wt = std::exp(logits[static_cast<size_t>(e)]) / (norm ? zk : z);  // Mixtral form when norm
        const std::vector<double> o = mlp(l.gate[static_cast<size_t>(e)], l.up[static_cast<size_t>(e)], l.down[static_cast<size_t>(e)], xd);
        for (int64_t c = 0; c < kH; ++c) want[static_cast<size_t>(c)] += wt * o[static_cast<size_t>(c)];
      }
      const double sl = lin(l.sr, xd)[0];
      const std::vector<double> so = mlp(l.sg, l.su, l.sd, xd);
      for (int64_t c = 0; c < kH; ++c) want[static_cast<size_t>(c)] += so[static_cast<size_t>(c)] / (1 + std::exp(-sl));
      std::vector<float> got(kH);
      ref::moe_ffn(w, MoeParams{k, norm}, x.data(), 1, got.data());
      const std::vector<float> wf(want.begin(), want.end());
      EXPECT_LT(nmse(wf, got), 1e-12) << "k=" << k << " norm=" << norm;
    }
  }
}

// Llama 4's experts: sigmoid scores of the selected logits, the weight applied to the expert's
// input, an ungated shared expert; the reference against a direct formula in double (one row,
// f32), then the optimized op against the reference for several weight types and steps.
TEST(MoeFfn, Llama4SigmoidScoresScaleTheInput) {
  Layer l = make_layer(DType::F32, true, 123);
  MoeWeights w = l.views();
  w.shared_router = WeightView{};  // ungated
  const std::vector<float> x = make_x(1, 9);
  auto lin = [](const Mat& m, const std::vector<double>& v) {
    std::vector<double> out(static_cast<size_t>(m.rows));
    const float* d = reinterpret_cast<const float*>(m.bytes.data());
    for (int64_t r = 0; r < m.rows; ++r)
      for (int64_t c = 0; c < m.cols; ++c) out[static_cast<size_t>(r)] += double(d[r * m.cols + c]) * v[static_cast<size_t>(c)];
    return out;
  };
  auto mlp = [&](const Mat& g, const Mat& u, const Mat& dn, const std::vector<double>& v) {
    std::vector<double> a = lin(g, v), b = lin(u, v);
    for (size_t i = 0; i < a.size(); ++i) a[i] = a[i] / (1 + std::exp(-a[i])) * b[i];
    return lin(dn, a);
  };
  const std::vector<double> xd(x.begin(), x.end());
  const std::vector<double> logits = lin(l.router, xd);
  std::vector<int> idx(kE);
  for (int i = 0; i < kE; ++i) idx[static_cast<size_t>(i)] = i;
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)]; });
  for (int64_t k : {1, 2}) {
    std::vector<double> want = mlp(l.sg, l.su, l.sd, xd);  // the shared expert, ungated
    for (int64_t j = 0; j < k; ++j) {
      const int e = idx[static_cast<size_t>(j)];
      const double score = 1.0 / (1.0 + std::exp(-logits[static_cast<size_t>(e)]));
      std::vector<double> xin = xd;
      for (double& v : xin) v = static_cast<double>(static_cast<float>(score) * static_cast<float>(v));
      const std::vector<double> o = mlp(l.gate[static_cast<size_t>(e)], l.up[static_cast<size_t>(e)], l.down[static_cast<size_t>(e)], xin);
      for (int64_t c = 0; c < kH; ++c) want[static_cast<size_t>(c)] += o[static_cast<size_t>(c)];
    }
    MoeParams p{k, false};
    p.scoring = MoeScoring::Sigmoid;
    p.weight_input = true;
    std::vector<float> got(kH);
    ref::moe_ffn(w, p, x.data(), 1, got.data());
    const std::vector<float> wf(want.begin(), want.end());
    EXPECT_LT(nmse(wf, got), 1e-12) << "k=" << k;
    // Scaling the output instead, or gating the shared expert, is a different function.
    MoeParams out_scaled = p;
    out_scaled.weight_input = false;
    std::vector<float> other(kH);
    ref::moe_ffn(w, out_scaled, x.data(), 1, other.data());
    EXPECT_GT(nmse(wf, other), 1e-6);
    ref::moe_ffn(l.views(), p, x.data(), 1, other.data());
    EXPECT_GT(nmse(wf, other), 1e-6);
  }
  uint64_t seed = 500;
  for (DType t : {DType::F32, DType::Q8_0, DType::Q4_K}) {
    Layer lt = make_layer(t, true, ++seed);
    MoeWeights wt = lt.views();
    wt.shared_router = WeightView{};
    for (int64_t k : {1, 2}) {
      MoeParams p{k, false};
      p.scoring = MoeScoring::Sigmoid;
      p.weight_input = true;
      for (int64_t T : {1, 37}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " k=" + std::to_string(k) + " T=" + std::to_string(T));
        const std::vector<float> xt = make_x(T, seed + static_cast<uint64_t>(T));
        std::vector<float> want(static_cast<size_t>(T * kH));
        ref::moe_ffn(wt, p, xt.data(), T, want.data());
        test::for_each_config([&](ThreadPool& pool, const std::string& label) {
          MoeScratch scratch;
          std::vector<float> got(want.size(), 7.0f);
          moe_ffn(wt, p, xt.data(), T, got.data(), scratch, pool);
          EXPECT_LT(nmse(want, got), threshold(t)) << label;
          EXPECT_LT(nmse(want, both_ways(wt, p, xt, T, pool, label)), threshold(t)) << label;
        });
      }
    }
  }
  // Sigmoid routing: the largest logits, each weight its own sigmoid (renormalised on request).
  const float lg[4] = {0.5f, 2.0f, -1.0f, 1.0f};
  int32_t e[2];
  float wts[2];
  MoeParams p{2, false};
  p.scoring = MoeScoring::Sigmoid;
  moe_route(lg, 4, p, e, wts);
  EXPECT_EQ(e[0], 1);
  EXPECT_EQ(e[1], 3);
  EXPECT_NEAR(wts[0], 1.0 / (1.0 + std::exp(-2.0)), 1e-7);
  EXPECT_NEAR(wts[1], 1.0 / (1.0 + std::exp(-1.0)), 1e-7);
  p.norm_topk_prob = true;
  moe_route(lg, 4, p, e, wts);
  EXPECT_NEAR(wts[0] + wts[1], 1.0, 1e-6);
}

// gpt-oss's experts: router and expert biases and the clamped SwiGLU, against a direct formula
// in double (one row, f32 experts, with gate and up values beyond the limit so both clamps act),
// then the optimized op against the reference for its MXFP4 experts and others.
TEST(MoeFfn, GptOssBiasesAndClampedSwiGLU) {
  std::mt19937_64 rng(77);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  auto vec = [&](int64_t n, double amp) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = static_cast<float>(amp * u(rng));
    return v;
  };
  const float limit = 1.5f, alpha = 1.702f;
  const std::vector<float> rb = vec(kE, 2.0);
  std::vector<std::vector<float>> gb, ub, db;
  for (int64_t e = 0; e < kE; ++e) {
    gb.push_back(vec(kF, 1.0));
    ub.push_back(vec(kF, 1.0));
    db.push_back(vec(kH, 0.5));
  }
  auto with_biases = [&](const Layer& l) {
    MoeWeights w = l.views();
    w.router_bias = rb.data();
    for (int64_t e = 0; e < kE; ++e) {
      w.gate_bias.push_back(gb[static_cast<size_t>(e)].data());
      w.up_bias.push_back(ub[static_cast<size_t>(e)].data());
      w.down_bias.push_back(db[static_cast<size_t>(e)].data());
    }
    return w;
  };
  MoeParams p{2, true, MoeActivation::SwiGLUOai, alpha, limit};

  // The definition, for one row.
  {
    const Layer l = make_layer(DType::F32, false, 123);
    const MoeWeights w = with_biases(l);
    std::vector<float> x = make_x(1, 9);
    for (float& v : x) v *= 3.0f;  // gate and up products beyond +-limit
    auto lin = [](const Mat& m, const std::vector<double>& v, const std::vector<float>& b) {
      std::vector<double> out(static_cast<size_t>(m.rows));
      const float* d = reinterpret_cast<const float*>(m.bytes.data());
      for (int64_t r = 0; r < m.rows; ++r) {
        out[static_cast<size_t>(r)] = b[static_cast<size_t>(r)];
        for (int64_t c = 0; c < m.cols; ++c) out[static_cast<size_t>(r)] += double(d[r * m.cols + c]) * v[static_cast<size_t>(c)];
      }
      return out;
    };
    const std::vector<double> xd(x.begin(), x.end());
    const std::vector<double> logits = lin(l.router, xd, rb);
    std::vector<int> idx(kE);
    for (int i = 0; i < kE; ++i) idx[static_cast<size_t>(i)] = i;
    std::sort(idx.begin(), idx.end(), [&](int a, int b) { return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)]; });
    const double z = std::exp(logits[static_cast<size_t>(idx[0])]) + std::exp(logits[static_cast<size_t>(idx[1])]);
    std::vector<double> want(kH, 0.0);
    int clamped_gate = 0, clamped_up = 0;
    for (int j = 0; j < 2; ++j) {
      const size_t e = static_cast<size_t>(idx[static_cast<size_t>(j)]);
      std::vector<double> g = lin(l.gate[e], xd, gb[e]), up = lin(l.up[e], xd, ub[e]);
      for (size_t i = 0; i < g.size(); ++i) {
        clamped_gate += g[i] > limit;
        clamped_up += std::abs(up[i]) > limit;
        const double gi = std::min<double>(g[i], limit), ui = std::max<double>(-limit, std::min<double>(up[i], limit));
        g[i] = (ui + 1) * gi / (1 + std::exp(-alpha * gi));
      }
      const std::vector<double> o = lin(l.down[e], g, db[e]);
      const double wt = std::exp(logits[e]) / z;
      for (int64_t c = 0; c < kH; ++c) want[static_cast<size_t>(c)] += wt * o[static_cast<size_t>(c)];
    }
    EXPECT_GT(clamped_gate, 10);
    EXPECT_GT(clamped_up, 10);
    std::vector<float> got(kH);
    ref::moe_ffn(w, p, x.data(), 1, got.data());
    EXPECT_LT(nmse(std::vector<float>(want.begin(), want.end()), got), 1e-12);
    // Without the clamp (plain SwiGLU) the result differs: the test sees the activation.
    std::vector<float> plain(kH);
    ref::moe_ffn(w, MoeParams{2, true}, x.data(), 1, plain.data());
    EXPECT_GT(nmse(got, plain), 1e-2);
  }
  // Optimized against the reference, MXFP4 experts as gpt-oss ships them.
  uint64_t seed = 500;
  for (DType t : {DType::F32, DType::MXFP4, DType::Q8_0}) {
    const Layer l = make_layer(t, false, ++seed);
    const MoeWeights w = with_biases(l);
    for (int64_t T : {1, 3, 37}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + " T=" + std::to_string(T));
      std::vector<float> x = make_x(T, seed + static_cast<uint64_t>(T));
      for (float& v : x) v *= 3.0f;
      std::vector<float> want(static_cast<size_t>(T * kH));
      ref::moe_ffn(w, p, x.data(), T, want.data());
      test::for_each_config([&](ThreadPool& pool, const std::string& label) {
        MoeScratch scratch;
        std::vector<float> got(want.size(), 123.0f);
        moe_ffn(w, p, x.data(), T, got.data(), scratch, pool);
        EXPECT_LT(nmse(want, got), threshold(t == DType::MXFP4 ? DType::Q4_0 : t)) << label;
        EXPECT_LT(nmse(want, both_ways(w, p, x, T, pool, label)), threshold(t == DType::MXFP4 ? DType::Q4_0 : t)) << label;
      });
    }
  }
  // Biases for some experts only, or a limit that is not > 0: refused.
  const Layer l = make_layer(DType::F32, false, 5);
  MoeWeights w = with_biases(l);
  w.up_bias.pop_back();
  const std::vector<float> x = make_x(1, 1);
  std::vector<float> y(kH);
  EXPECT_THROW(ref::moe_ffn(w, p, x.data(), 1, y.data()), Error);
  MoeParams zero = p;
  zero.limit = 0.0f;
  EXPECT_THROW(ref::moe_ffn(with_biases(l), zero, x.data(), 1, y.data()), Error);
}

TEST(MoeFfn, RoutingPicksTheLargestAndBreaksTiesByIndex) {
  const float logits[5] = {0.5f, 2.0f, 2.0f, -1.0f, 1.0f};
  int32_t e[3];
  float w[3];
  moe_route(logits, 5, MoeParams{3, false}, e, w);
  EXPECT_EQ(e[0], 1);
  EXPECT_EQ(e[1], 2);
  EXPECT_EQ(e[2], 4);
  double z = 0;
  for (float v : logits) z += std::exp(double(v));
  EXPECT_NEAR(w[2], std::exp(1.0) / z, 1e-7);
  moe_route(logits, 5, MoeParams{3, true}, e, w);
  EXPECT_NEAR(w[0] + w[1] + w[2], 1.0, 1e-6);
  EXPECT_NEAR(w[0], std::exp(2.0) / (2 * std::exp(2.0) + std::exp(1.0)), 1e-7);
}

// DeepSeek's routing, worked by hand. V3: sigmoid scores chosen by score + bias within the best
// groups (a group's score the sum of its two best keys), weights the unbiased scores,
// renormalised, times routed_scale. V2: softmax scores within the groups of the best maxima.
TEST(MoeFfn, DeepSeekRoutingWithGroupsAndSelectionBias) {
  // 8 experts in 4 groups of 2.
  const float logits[8] = {2.0f, -3.0f, 0.1f, 0.0f, 1.5f, 1.4f, -1.0f, 3.0f};
  const float bias[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.9f, 0.0f};
  auto sg = [](double l) { return 1.0 / (1.0 + std::exp(-l)); };
  // keys: s(2)=.881, s(-3)=.047 | .525, .5 | .818, .802 | s(-1)+.9=1.169, .953
  // group sums: .928 | 1.025 | 1.620 | 2.122 -> groups 3 and 2 kept: experts 4, 5, 6, 7
  MoeParams p{3, true};
  p.scoring = MoeScoring::Sigmoid;
  p.selection_bias = bias;
  p.groups = 4;
  p.groups_used = 2;
  p.group_top2 = true;
  p.routed_scale = 2.5f;
  int32_t e[3];
  float w[3];
  moe_route(logits, 8, p, e, w);
  EXPECT_EQ(e[0], 6);  // key 1.169: chosen by its bias, weighted by its own sigmoid
  EXPECT_EQ(e[1], 7);
  EXPECT_EQ(e[2], 4);  // expert 0 (key .881) is in a dropped group
  const double sum = sg(-1.0) + sg(3.0) + sg(1.5);
  EXPECT_NEAR(w[0], 2.5 * sg(-1.0) / sum, 1e-6);
  EXPECT_NEAR(w[1], 2.5 * sg(3.0) / sum, 1e-6);
  EXPECT_NEAR(w[2], 2.5 * sg(1.5) / sum, 1e-6);
  // Groups by their best key alone: group 3 (1.169) and group 0 (.881) beat group 2 (.818).
  p.group_top2 = false;
  moe_route(logits, 8, p, e, w);
  EXPECT_EQ(e[0], 6);
  EXPECT_EQ(e[1], 7);
  EXPECT_EQ(e[2], 0);
  // V2: softmax over all, the best 2 of 4 groups by their best probability, not renormalised.
  MoeParams v2{2, false};
  v2.groups = 4;
  v2.groups_used = 2;
  v2.routed_scale = 1.5f;
  moe_route(logits, 8, v2, e, w);
  double z = 0;
  for (float v : logits) z += std::exp(double(v));
  EXPECT_EQ(e[0], 7);
  EXPECT_EQ(e[1], 0);  // group 0 (best 2.0) beats group 2 (best 1.5)
  EXPECT_NEAR(w[0], 1.5 * std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(w[1], 1.5 * std::exp(2.0) / z, 1e-6);
  // Groups that hold fewer experts than top_k, and a scale that is not finite, are refused.
  const Layer l = make_layer(DType::F32, false, 8);
  MoeParams bad{3, false};
  bad.groups = 4;
  bad.groups_used = 1;
  const MoeWeights w8 = l.views();
  std::vector<float> x(static_cast<size_t>(kH), 0.1f), y(x.size());
  EXPECT_THROW(ref::moe_ffn(w8, bad, x.data(), 1, y.data()), Error);
  bad.groups = 3;
  bad.groups_used = 3;
  EXPECT_THROW(ref::moe_ffn(w8, bad, x.data(), 1, y.data()), Error);
  MoeParams inf{2, false};
  inf.routed_scale = INFINITY;
  EXPECT_THROW(ref::moe_ffn(w8, inf, x.data(), 1, y.data()), Error);
  bad.groups = 4;
  bad.groups_used = 2;  // 4 experts in the groups used: enough for 3
  EXPECT_NO_THROW(ref::moe_ffn(w8, bad, x.data(), 1, y.data()));
}

TEST(MoeFfn, RefusesWeightsThatDoNotFit) {
  const Layer l = make_layer(DType::F32, false, 3);
  const std::vector<float> x = make_x(2, 1);
  std::vector<float> y(2 * kH);
  MoeScratch s;
  auto expect_refused = [&](const MoeWeights& w, const MoeParams& p, const char* what) {
    EXPECT_THROW(ref::moe_ffn(w, p, x.data(), 2, y.data()), Error) << what;
    EXPECT_THROW(moe_ffn(w, p, x.data(), 2, y.data(), s, default_pool()), Error) << what;
  };
  const MoeWeights ok = l.views();
  expect_refused(ok, MoeParams{0, true}, "top_k 0");
  expect_refused(ok, MoeParams{kE + 1, true}, "top_k above the experts");
  MoeWeights missing = ok;
  missing.down.pop_back();
  expect_refused(missing, MoeParams{2, true}, "an expert without down");
  MoeWeights narrow = ok;
  narrow.up[3].rows = kF / 2;
  expect_refused(narrow, MoeParams{2, true}, "an expert of another width");
  MoeWeights no_shared = ok;
  no_shared.shared = true;
  expect_refused(no_shared, MoeParams{2, true}, "a shared expert without weights");
}

}  // namespace
}  // namespace ptn
