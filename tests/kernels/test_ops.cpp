// Optimized ops vs their references (every SIMD level present, 1 and 2 threads, odd shapes),
// RoPE against hand-computed values, and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "core/quant.h"
#include "kernel_test_util.h"
#include "kernels/ops.h"

namespace ptn {
namespace {

using test::for_each_config;
using test::nmse;
using test::random_vec;

const int64_t kRows[] = {1, 2, 3, 5, 8, 13, 17};
const int64_t kDims[] = {1, 7, 8, 15, 16, 17, 31, 33, 100, 257};
const int64_t kLens[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 100, 1000, 70001};

// Expects fn() to throw ptn::Error whose message contains every one of `parts`.
template <class F>
void expect_error(F fn, std::initializer_list<const char*> parts) {
  try {
    fn();
    ADD_FAILURE() << "no ptn::Error thrown (expected " << *parts.begin() << ")";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg << " lacks " << p;
  }
}

TEST(Ops, RmsNormMatchesReference) {
  for_each_config([](ThreadPool& pool, const std::string& cfg) {
    for (int64_t rows : kRows) {
      for (int64_t dim : kDims) {
        auto x = random_vec(rows * dim, rows * 1000 + dim, -3, 3);
        auto w = random_vec(dim, dim + 7);
        for (int mode = 0; mode < 3; ++mode) {  // weight, 1 + weight, no weight
          const float* wp = mode == 2 ? nullptr : w.data();
          std::vector<float> want(x.size()), got(x.size());
          ref::rms_norm(x.data(), wp, want.data(), rows, dim, 1e-5f, mode == 1);
          rms_norm(x.data(), wp, got.data(), rows, dim, 1e-5f, mode == 1, pool);
          EXPECT_LT(nmse(want, got), 1e-12) << cfg << " rows=" << rows << " dim=" << dim << " mode=" << mode;
        }
      }
    }
    // Large enough to be split over threads; in place.
    auto x = random_vec(17 * 4099, 5);
    auto w = random_vec(4099, 6);
    std::vector<float> want(x.size()), got = x;
    ref::rms_norm(x.data(), w.data(), want.data(), 17, 4099, 1e-6f, false);
    rms_norm(got.data(), w.data(), got.data(), 17, 4099, 1e-6f, false, pool);
    EXPECT_LT(nmse(want, got), 1e-12) << cfg;
  });
}

TEST(Ops, RmsNormDefinition) {
  // x = [3, 4]: mean square 12.5, so y = x / sqrt(12.5) * w.
  const float x[2] = {3, 4}, w[2] = {2, 0.5f};
  float y[2], y1[2];
  rms_norm(x, w, y, 1, 2, 0.0f, false);
  EXPECT_NEAR(y[0], 3 / std::sqrt(12.5) * 2, 1e-6);
  EXPECT_NEAR(y[1], 4 / std::sqrt(12.5) * 0.5, 1e-6);
  rms_norm(x, w, y1, 1, 2, 0.0f, true);  // Gemma: (1 + w)
  EXPECT_NEAR(y1[0], 3 / std::sqrt(12.5) * 3, 1e-6);
  EXPECT_NEAR(y1[1], 4 / std::sqrt(12.5) * 1.5, 1e-6);
}

TEST(Ops, LayerNormMatchesReference) {
  for_each_config([](ThreadPool& pool, const std::string& cfg) {
    for (int64_t rows : kRows) {
      for (int64_t dim : kDims) {
        auto x = random_vec(rows * dim, rows * 77 + dim, -2, 5);
        auto w = random_vec(dim, dim + 1);
        auto b = random_vec(dim, dim + 2);
        std::vector<float> want(x.size()), got(x.size());
        ref::layer_norm(x.data(), w.data(), b.data(), want.data(), rows, dim, 1e-5f);
        layer_norm(x.data(), w.data(), b.data(), got.data(), rows, dim, 1e-5f, pool);
        EXPECT_LT(nmse(want, got), 1e-10) << cfg << " rows=" << rows << " dim=" << dim;
        ref::layer_norm(x.data(), nullptr, nullptr, want.data(), rows, dim, 1e-5f);
        layer_norm(x.data(), nullptr, nullptr, got.data(), rows, dim, 1e-5f, pool);
        if (dim > 1) {
          EXPECT_LT(nmse(want, got), 1e-10) << cfg << " rows=" << rows << " dim=" << dim;
        }
      }
    }
    // Large enough to be split over threads.
    auto x = random_vec(13 * 5001, 9, -2, 5);
    auto w = random_vec(5001, 10);
    std::vector<float> want(x.size()), got(x.size());
    ref::layer_norm(x.data(), w.data(), nullptr, want.data(), 13, 5001, 1e-5f);
    layer_norm(x.data(), w.data(), nullptr, got.data(), 13, 5001, 1e-5f, pool);
    EXPECT_LT(nmse(want, got), 1e-10) << cfg;
  });
  // Definition: [1, 2, 3] -> mean 2, variance 2/3.
  const float x[3] = {1, 2, 3};
  float y[3];
  layer_norm(x, nullptr, nullptr, y, 1, 3, 0.0f);
  EXPECT_NEAR(y[0], -1 / std::sqrt(2.0 / 3), 1e-6);
  EXPECT_NEAR(y[1], 0, 1e-6);
  EXPECT_NEAR(y[2], 1 / std::sqrt(2.0 / 3), 1e-6);
}

TEST(Ops, SoftmaxMatchesReference) {
  for_each_config([](ThreadPool& pool, const std::string& cfg) {
    for (int64_t rows : kRows) {
      for (int64_t n : kDims) {
        auto x = random_vec(rows * n, rows * 31 + n, -20, 20);
        if (n > 3) x[2] = -INFINITY;  // a masked entry
        auto want = x, got = x;
        ref::softmax(want.data(), rows, n);
        softmax(got.data(), rows, n, pool);
        EXPECT_LT(nmse(want, got), 1e-12) << cfg << " rows=" << rows << " n=" << n;
        for (int64_t r = 0; r < rows; ++r) {
          double s = 0;
          for (int64_t i = 0; i < n; ++i) s += got[r * n + i];
          EXPECT_NEAR(s, 1.0, 1e-5) << cfg;
        }
        if (n > 3) {
          EXPECT_EQ(got[2], 0.0f);
        }
      }
    }
    {  // large enough to be split over threads
      auto x = random_vec(9 * 7777, 4, -30, 30);
      auto want = x, got = x;
      ref::softmax(want.data(), 9, 7777);
      softmax(got.data(), 9, 7777, pool);
      EXPECT_LT(nmse(want, got), 1e-10) << cfg;  // f32 sums of 7777 terms
    }
    // Large offsets do not overflow; an all -inf row becomes zeros.
    std::vector<float> x = {1e4f, 1e4f + 1, 1e4f - 1, -INFINITY, -INFINITY, -INFINITY};
    softmax(x.data(), 2, 3, pool);
    const double e = std::exp(1.0), z = 1 + e + 1 / e;
    EXPECT_NEAR(x[0], 1 / z, 1e-6) << cfg;
    EXPECT_NEAR(x[1], e / z, 1e-6) << cfg;
    EXPECT_NEAR(x[2], 1 / e / z, 1e-6) << cfg;
    EXPECT_EQ(x[3], 0.0f);
    EXPECT_EQ(x[5], 0.0f);
  });
}

using UnaryOp = void (*)(const float*, float*, int64_t, ThreadPool&);
using UnaryRef = void (*)(const float*, float*, int64_t);
using BinaryOp = void (*)(const float*, const float*, float*, int64_t, ThreadPool&);
using BinaryRef = void (*)(const float*, const float*, float*, int64_t);

TEST(Ops, ActivationsMatchReference) {
  struct U { const char* name; UnaryOp op; UnaryRef ref; };
  const U unary[] = {{"silu", silu, ref::silu}, {"gelu_tanh", gelu_tanh, ref::gelu_tanh},
                     {"gelu_erf", gelu_erf, ref::gelu_erf}};
  struct B { const char* name; BinaryOp op; BinaryRef ref; };
  const B binary[] = {{"swiglu", swiglu, ref::swiglu}, {"geglu", geglu, ref::geglu},
                      {"geglu_erf", geglu_erf, ref::geglu_erf}, {"add", add, ref::add}, {"mul", mul, ref::mul}};
  for_each_config([&](ThreadPool& pool, const std::string& cfg) {
    for (int64_t n : kLens) {
      auto x = random_vec(n, n, -8, 8);
      auto y = random_vec(n, n + 1, -3, 3);
      if (n > 4) {  // far tails: exp overflow / underflow must give the limits, not NaN
        x[0] = 95;
        x[1] = -95;
        x[2] = 1e-30f;
        x[3] = -0.0f;
      }
      for (const U& u : unary) {
        std::vector<float> want(n), got(n);
        u.ref(x.data(), want.data(), n);
        u.op(x.data(), got.data(), n, pool);
        EXPECT_LT(nmse(want, got), 1e-11) << u.name << " " << cfg << " n=" << n;
        for (float g : got) ASSERT_TRUE(std::isfinite(g)) << u.name << " " << cfg;
      }
      for (const B& b : binary) {
        std::vector<float> want(n), got(n);
        b.ref(x.data(), y.data(), want.data(), n);
        b.op(x.data(), y.data(), got.data(), n, pool);
        EXPECT_LT(nmse(want, got), 1e-11) << b.name << " " << cfg << " n=" << n;
      }
      std::vector<float> want(n), got(n);
      ref::scale(x.data(), -0.37f, want.data(), n);
      scale(x.data(), -0.37f, got.data(), n, pool);
      EXPECT_LT(nmse(want, got), 1e-14) << "scale " << cfg;
      for (float cap : {0.5f, 30.0f}) {
        auto w2 = x, g2 = x;
        ref::softcap(w2.data(), n, cap);
        softcap(g2.data(), n, cap, pool);
        EXPECT_LT(nmse(w2, g2), 1e-11) << "softcap " << cap << " " << cfg << " n=" << n;
      }
    }
  });
}

TEST(Ops, ActivationDefinitions) {
  // Values computed independently (Python math): silu(1) = 1/(1+e^-1); gelu_erf(1) =
  // 0.5 (1 + erf(1/sqrt 2)) = 0.8413447460685429; gelu_tanh(1) = 0.8411919906082768.
  const float x[3] = {1.0f, -2.0f, 0.0f};
  float y[3];
  silu(x, y, 3);
  EXPECT_NEAR(y[0], 0.7310585786300049, 1e-6);
  EXPECT_NEAR(y[1], -2 * 0.11920292202211755, 1e-6);
  EXPECT_EQ(y[2], 0.0f);
  gelu_erf(x, y, 3);
  EXPECT_NEAR(y[0], 0.8413447460685429, 1e-6);
  EXPECT_NEAR(y[1], -0.04550026389635842, 1e-6);
  gelu_tanh(x, y, 3);
  EXPECT_NEAR(y[0], 0.8411919906082768, 1e-6);
  EXPECT_NEAR(y[1], -0.04540230591222276, 1e-6);
  float c[2] = {100.0f, -1.0f};
  softcap(c, 2, 30.0f);
  EXPECT_NEAR(c[0], 30 * std::tanh(100.0 / 30), 1e-5);
  EXPECT_NEAR(c[1], 30 * std::tanh(-1.0 / 30), 1e-6);
}

// HF "gelu" is exact (erf), "gelu_pytorch_tanh" the approximation; GeGLU must keep them apart at
// every SIMD level, reference and optimized alike. Expected values from std::erf and std::tanh.
TEST(Ops, GegluErfIsExactGelu) {
  std::vector<float> gate, up;
  for (int i = 0; i < 67; ++i) {  // crosses vector widths; spans the region where the two differ most
    gate.push_back(-6.0f + 0.19f * static_cast<float>(i));
    up.push_back(0.5f + 0.01f * static_cast<float>(i));
  }
  const int64_t n = static_cast<int64_t>(gate.size());
  std::vector<double> exact(n), approx(n);
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    exact[i] = 0.5 * g * (1.0 + std::erf(g / std::sqrt(2.0))) * up[i];
    approx[i] = 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (g + 0.044715 * g * g * g))) * up[i];
  }
  double max_gap = 0;
  for (int64_t i = 0; i < n; ++i) max_gap = std::max(max_gap, std::fabs(exact[i] - approx[i]));
  ASSERT_GT(max_gap, 1e-4);  // the two definitions are distinguishable at this tolerance
  std::vector<float> got(n);
  ref::geglu_erf(gate.data(), up.data(), got.data(), n);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], exact[i], 1e-6 + 1e-6 * std::fabs(exact[i])) << "reference, gate " << gate[i];
  for_each_config([&](ThreadPool& pool, const std::string& cfg) {
    std::vector<float> y(n);
    geglu_erf(gate.data(), up.data(), y.data(), n, pool);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], exact[i], 2e-6 + 2e-6 * std::fabs(exact[i])) << cfg << ", gate " << gate[i];
  });
}

TEST(Ops, SoftcapDefinition) {
  float c[2] = {100.0f, -1.0f};
  softcap(c, 2, 30.0f);
  EXPECT_NEAR(c[0], 30 * std::tanh(100.0 / 30), 1e-5);
  EXPECT_NEAR(c[1], 30 * std::tanh(-1.0 / 30), 1e-6);
}

// ---- RoPE ----

std::vector<float> rope_input(int64_t rows, int64_t heads, int64_t hd, uint64_t seed) {
  return random_vec(rows * heads * hd, seed, -2, 2);
}

RopeParams params_for(RopePairing pairing, RopeFreqScaling s) {
  RopeParams p;
  p.theta = 10000;
  p.pairing = pairing;
  p.scaling = s;
  if (s == RopeFreqScaling::Linear) p.factor = 2;
  if (s == RopeFreqScaling::Llama3) {
    p.factor = 8;
    p.original_max_position = 1024;
    p.low_freq_factor = 1;
    p.high_freq_factor = 4;
  }
  if (s == RopeFreqScaling::Yarn) {
    p.factor = 4;
    p.original_max_position = 64;
  }
  return p;
}

TEST(Ops, RopeMatchesReference) {
  const RopePairing pairings[] = {RopePairing::Interleaved, RopePairing::HalfSplit};
  const RopeFreqScaling scalings[] = {RopeFreqScaling::None, RopeFreqScaling::Linear,
                                      RopeFreqScaling::Llama3, RopeFreqScaling::Yarn};
  struct Shape { int64_t rows, heads, hd, rd; };
  const Shape shapes[] = {{1, 1, 2, 2}, {3, 2, 8, 8}, {5, 3, 64, 64}, {17, 4, 96, 32},
                          {7, 2, 34, 34}, {2, 5, 128, 128}, {40, 8, 128, 128}};
  for_each_config([&](ThreadPool& pool, const std::string& cfg) {
    for (auto pr : pairings) {
      for (auto sc : scalings) {
        const RopeParams p = params_for(pr, sc);
        for (const Shape& s : shapes) {
          std::vector<int32_t> pos(s.rows);
          for (int64_t r = 0; r < s.rows; ++r) pos[r] = static_cast<int32_t>(r * 37 + 5 + (r % 3) * 1000);
          auto want = rope_input(s.rows, s.heads, s.hd, s.rows + s.hd);
          auto got = want;
          ref::rope(want.data(), pos.data(), s.rows, s.heads, s.hd, s.rd, p);
          rope(got.data(), pos.data(), s.rows, s.heads, s.hd, RopeTable(p, s.rd), pool);
          EXPECT_LT(nmse(want, got), 1e-12)
              << cfg << " pairing=" << int(pr) << " scaling=" << int(sc) << " hd=" << s.hd << " rd=" << s.rd;
        }
      }
    }
  });
}

// transformers' longrope: inv_freq[i] = 1 / (factor[i] * theta^(2i/d)), cos and sin times the
// attention factor.
TEST(Ops, RopeLongRopeDividesEachFrequencyByItsFactor) {
  for (int64_t rd : {2, 8, 32, 96}) {
    RopeParams p;
    p.theta = 10000;
    p.scaling = RopeFreqScaling::LongRope;
    p.attn_factor = 1.19;
    for (int64_t i = 0; i < rd / 2; ++i) p.freq_divisors.push_back(1.0 + 0.37 * static_cast<double>(i));
    double af = 0;
    const std::vector<double> inv = ref::rope_inv_freq(p, rd, &af);
    EXPECT_EQ(af, 1.19);
    for (int64_t i = 0; i < rd / 2; ++i)
      EXPECT_NEAR(inv[i], 1.0 / (p.freq_divisors[i] * std::pow(10000.0, 2.0 * i / rd)), 1e-15) << rd << " " << i;
    // One head of rd dims, every pair (1, 0): rotated to af * (cos a, sin a).
    const int32_t pos[1] = {1234};
    std::vector<float> x(rd, 0.0f);
    for (int64_t i = 0; i < rd / 2; ++i) x[i] = 1.0f;
    auto want = x;
    ref::rope(want.data(), pos, 1, 1, rd, rd, p);
    for (int64_t i = 0; i < rd / 2; ++i) {
      const double a = 1234.0 / (p.freq_divisors[i] * std::pow(10000.0, 2.0 * i / rd));
      EXPECT_NEAR(want[i], 1.19 * std::cos(a), 1e-6);
      EXPECT_NEAR(want[rd / 2 + i], 1.19 * std::sin(a), 1e-6);
    }
    for_each_config([&](ThreadPool& pool, const std::string& cfg) {
      std::vector<int32_t> ps = {0, 5, 4095, 77};
      auto w = rope_input(4, 3, rd, rd), g = w;
      ref::rope(w.data(), ps.data(), 4, 3, rd, rd, p);
      rope(g.data(), ps.data(), 4, 3, rd, RopeTable(p, rd, 64), pool);
      EXPECT_LT(nmse(w, g), 1e-12) << cfg << " rd=" << rd;
    });
  }
  RopeParams bad;
  bad.scaling = RopeFreqScaling::LongRope;
  bad.freq_divisors = {1.0, 2.0};
  EXPECT_THROW(RopeTable(bad, 8), Error);  // 2 divisors for 4 pairs
  bad.freq_divisors = {1.0, -2.0, 1.0, 1.0};
  EXPECT_THROW(RopeTable(bad, 8), Error);
}

TEST(Ops, RopeCachedTableGivesTheSameValues) {
  RopeParams p = params_for(RopePairing::HalfSplit, RopeFreqScaling::Yarn);
  const RopeTable plain(p, 64), cached(p, 64, 100);
  EXPECT_EQ(cached.cached_positions(), 100);
  ASSERT_NE(cached.cos_sin(99), nullptr);
  EXPECT_EQ(cached.cos_sin(100), nullptr);
  EXPECT_EQ(cached.cos_sin(-1), nullptr);
  std::vector<int32_t> pos = {0, 5, 99, 100, 5000, -3};  // inside and outside the cache
  for (auto pairing : {RopePairing::HalfSplit, RopePairing::Interleaved}) {
    p.pairing = pairing;
    const RopeTable a(p, 64), b(p, 64, 100);
    auto x = rope_input(6, 3, 80, 1);
    auto y = x;
    rope(x.data(), pos.data(), 6, 3, 80, a);
    rope(y.data(), pos.data(), 6, 3, 80, b);
    EXPECT_EQ(x, y);
  }
  EXPECT_THROW(RopeTable(p, 64, -1), Error);
  EXPECT_THROW(RopeTable(p, 64, int64_t{1} << 40), Error);
}

// x = [1, 2, 3, 4], theta 10000, rope_dim 4: inv_freq = [1, 0.01].
TEST(Ops, RopeHandComputedPairings) {
  for (int32_t pos : {0, 1, 3, 1000}) {
    const double a0 = pos * 1.0, a1 = pos * 0.01;
    {
      RopeParams p;
      p.pairing = RopePairing::HalfSplit;  // pairs (0, 2), (1, 3)
      float x[4] = {1, 2, 3, 4};
      rope(x, &pos, 1, 1, 4, 4, p);
      EXPECT_NEAR(x[0], 1 * std::cos(a0) - 3 * std::sin(a0), 1e-5) << pos;
      EXPECT_NEAR(x[2], 3 * std::cos(a0) + 1 * std::sin(a0), 1e-5) << pos;
      EXPECT_NEAR(x[1], 2 * std::cos(a1) - 4 * std::sin(a1), 1e-5) << pos;
      EXPECT_NEAR(x[3], 4 * std::cos(a1) + 2 * std::sin(a1), 1e-5) << pos;
    }
    {
      RopeParams p;
      p.pairing = RopePairing::Interleaved;  // pairs (0, 1), (2, 3)
      float x[4] = {1, 2, 3, 4};
      rope(x, &pos, 1, 1, 4, 4, p);
      EXPECT_NEAR(x[0], 1 * std::cos(a0) - 2 * std::sin(a0), 1e-5) << pos;
      EXPECT_NEAR(x[1], 2 * std::cos(a0) + 1 * std::sin(a0), 1e-5) << pos;
      EXPECT_NEAR(x[2], 3 * std::cos(a1) - 4 * std::sin(a1), 1e-5) << pos;
      EXPECT_NEAR(x[3], 4 * std::cos(a1) + 3 * std::sin(a1), 1e-5) << pos;
    }
  }
  // Partial rotation: dims past rope_dim are untouched, and the other head is rotated alike.
  RopeParams p;
  int32_t pos = 7;
  float x[12] = {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6};
  rope(x, &pos, 1, 2, 6, 4, p);
  EXPECT_EQ(x[4], 5.0f);
  EXPECT_EQ(x[5], 6.0f);
  EXPECT_EQ(x[11], 6.0f);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(x[i], x[6 + i]);
  EXPECT_NEAR(x[0], std::cos(7.0) - 3 * std::sin(7.0), 1e-5);
}

// Rotation of [1, 0] pairs at position pos by frequency f (times attention factor af) gives
// (af cos(pos f), af sin(pos f)); checks every pair of an 8-wide head, for both pairings and
// for the optimized and reference ops.
void expect_freqs(RopeParams p, const double (&freq)[4], double af) {
  for (auto pairing : {RopePairing::HalfSplit, RopePairing::Interleaved}) {
    p.pairing = pairing;
    const bool half = pairing == RopePairing::HalfSplit;
    RopeTable t(p, 8);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(t.inv_freq()[i], freq[i], 1e-12 + 1e-9 * freq[i]) << i;
    EXPECT_NEAR(t.attn_factor(), af, 1e-9);
    for (int32_t pos : {1, 5, 300}) {
      // pair i = (x[i], x[i + 4]) half-split, (x[2i], x[2i + 1]) interleaved
      float x[8], r[8];
      for (int i = 0; i < 8; ++i) x[i] = (half ? i < 4 : i % 2 == 0) ? 1.0f : 0.0f;
      std::memcpy(r, x, sizeof x);
      rope(x, &pos, 1, 1, 8, t);
      ref::rope(r, &pos, 1, 1, 8, 8, p);
      for (int i = 0; i < 4; ++i) {
        const int a = half ? i : 2 * i, b = half ? i + 4 : 2 * i + 1;
        EXPECT_NEAR(x[a], af * std::cos(pos * freq[i]), 1e-5) << pos << " " << i << " half=" << half;
        EXPECT_NEAR(x[b], af * std::sin(pos * freq[i]), 1e-5) << pos << " " << i << " half=" << half;
        EXPECT_NEAR(r[a], af * std::cos(pos * freq[i]), 1e-5) << "ref " << pos << " " << i;
        EXPECT_NEAR(r[b], af * std::sin(pos * freq[i]), 1e-5) << "ref " << pos << " " << i;
      }
    }
  }
}

TEST(Ops, RopeScalingHandComputed) {
  // rope_dim 8, theta 10000: base frequencies [1, 0.1, 0.01, 0.001].
  RopeParams p;
  p.pairing = RopePairing::HalfSplit;
  expect_freqs(p, {1, 0.1, 0.01, 0.001}, 1);

  p.scaling = RopeFreqScaling::Linear;
  p.factor = 4;
  expect_freqs(p, {0.25, 0.025, 0.0025, 0.00025}, 1);

  // Llama3, original 1024, low 1, high 4, factor 8: wavelengths 2 pi / f = 6.3, 63, 628, 6283.
  // Below 1024 / 4 = 256: kept; above 1024: divided by 8; 628 is in between with
  // smooth = (1024 / 628.3 - 1) / (4 - 1).
  p.scaling = RopeFreqScaling::Llama3;
  p.factor = 8;
  p.original_max_position = 1024;
  p.low_freq_factor = 1;
  p.high_freq_factor = 4;
  const double wl = 2 * M_PI / 0.01, smooth = (1024 / wl - 1) / 3;
  expect_freqs(p, {1, 0.1, (1 - smooth) * 0.01 / 8 + smooth * 0.01, 0.001 / 8}, 1);

  // YaRN, factor 4, original 64, beta 32 / 1: correction dims 8 ln(64 / (2 pi beta)) / (2 ln 1e4)
  // = -0.497 -> floor -1 -> 0 and 1.008 -> ceil 2; ramp [0, .5, 1, 1]; extrapolated weight
  // 1 - ramp; attention factor 0.1 ln 4 + 1.
  p = RopeParams{};
  p.scaling = RopeFreqScaling::Yarn;
  p.factor = 4;
  p.original_max_position = 64;
  const double af = 0.1 * std::log(4.0) + 1;
  expect_freqs(p, {1, 0.5 * 0.1 + 0.5 * 0.1 / 4, 0.01 / 4, 0.001 / 4}, af);
  // Without truncation the ramp is (i - 0) / (1.00805 - 0): [0, 0.992, 1, 1].
  p.yarn_truncate = false;
  const double high = 8 * std::log(64 / (2 * M_PI)) / (2 * std::log(10000.0));
  const double r1 = 1 / high;
  expect_freqs(p, {1, (1 - r1) * 0.1 + r1 * 0.1 / 4, 0.01 / 4, 0.001 / 4}, af);
  p.yarn_truncate = true;
  // mscale == mscale_all_dim: factor 1; an explicit attention factor wins.
  p.mscale = 0.707;
  p.mscale_all_dim = 0.707;
  expect_freqs(p, {1, 0.0625, 0.0025, 0.00025}, 1.0);
  p.mscale = 1;
  p.mscale_all_dim = 0;  // only one of them set: the default formula
  expect_freqs(p, {1, 0.0625, 0.0025, 0.00025}, af);
  p.attn_factor = 0.5;
  expect_freqs(p, {1, 0.0625, 0.0025, 0.00025}, 0.5);
}

// ---- embedding ----

TEST(Ops, EmbeddingAllTypes) {
  const int64_t vocab = 11, dim = 64;
  auto table = random_vec(vocab * dim, 3, -2, 2);
  const std::vector<int32_t> ids = {0, 10, 3, 3, 7};
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K}) {
    const int64_t d = t == DType::Q4_K ? 256 : dim;
    auto tab = random_vec(vocab * d, 3, -2, 2);
    std::vector<uint8_t> raw(row_bytes(t, d) * vocab);
    for (int64_t r = 0; r < vocab; ++r) quantize_row(t, tab.data() + r * d, raw.data() + r * row_bytes(t, d), d);
    std::vector<float> want(ids.size() * d), got(ids.size() * d, -1.0f);
    // Expected: each row decoded on its own.
    for (size_t i = 0; i < ids.size(); ++i)
      dequantize_row(t, raw.data() + ids[i] * row_bytes(t, d), want.data() + i * d, d);
    for_each_config([&](ThreadPool& pool, const std::string& cfg) {
      embedding(raw.data(), t, vocab, d, ids.data(), static_cast<int64_t>(ids.size()), got.data(), pool);
      EXPECT_EQ(want, got) << dtype_name(t) << " " << cfg;
    });
    std::vector<float> got_ref(got.size());
    ref::embedding(raw.data(), t, vocab, d, ids.data(), static_cast<int64_t>(ids.size()), got_ref.data());
    EXPECT_EQ(want, got_ref) << dtype_name(t);
    if (t == DType::F32) {  // f32 rows are copied exactly
      for (size_t i = 0; i < ids.size(); ++i)
        for (int64_t j = 0; j < d; ++j) EXPECT_EQ(got[i * d + j], tab[ids[i] * d + j]);
    }
  }
}

// ---- errors ----

TEST(Ops, BadArgumentsThrowNamingOpAndShape) {
  std::vector<float> x(64), y(64);
  expect_error([&] { rms_norm(x.data(), nullptr, y.data(), 2, 0, 1e-5f, false); }, {"rms_norm", "dim=0"});
  expect_error([&] { ref::rms_norm(x.data(), nullptr, y.data(), -1, 4, 1e-5f, false); }, {"rms_norm", "rows=-1"});
  expect_error([&] { rms_norm(x.data(), nullptr, y.data(), 1, 4, NAN, false); }, {"rms_norm", "eps"});
  expect_error([&] { layer_norm(nullptr, nullptr, nullptr, y.data(), 1, 4, 1e-5f); }, {"layer_norm", "null"});
  expect_error([&] { softmax(x.data(), 1, 0); }, {"softmax", "dim=0"});
  expect_error([&] { silu(x.data(), y.data(), -3); }, {"silu", "n=-3"});
  expect_error([&] { add(x.data(), nullptr, y.data(), 3); }, {"add", "null"});
  expect_error([&] { softcap(x.data(), 4, 0.0f); }, {"softcap", "cap"});
  expect_error([&] { ref::softcap(x.data(), 4, -1.0f); }, {"softcap", "cap"});
  int32_t pos[2] = {0, 1};
  RopeParams p;
  expect_error([&] { rope(x.data(), pos, 2, 2, 8, 5, p); }, {"rope", "rope_dim=5"});
  expect_error([&] { rope(x.data(), pos, 2, 2, 8, 10, p); }, {"rope", "head_dim=8"});
  expect_error([&] { ref::rope(x.data(), pos, 2, 0, 8, 8, p); }, {"rope", "n_heads=0"});
  RopeParams bad = p;
  bad.theta = 0;
  expect_error([&] { RopeTable t(bad, 8); }, {"rope", "theta"});
  bad = p;
  bad.scaling = RopeFreqScaling::Llama3;
  bad.factor = 8;
  expect_error([&] { RopeTable t(bad, 8); }, {"rope", "original_max_position"});
  bad.original_max_position = 8192;
  bad.high_freq_factor = 0.5;
  expect_error([&] { RopeTable t(bad, 8); }, {"rope", "high_freq_factor"});
  bad = p;
  bad.scaling = RopeFreqScaling::Yarn;
  bad.factor = NAN;
  expect_error([&] { RopeTable t(bad, 8); }, {"rope", "factor"});

  const float table[6] = {0, 1, 2, 3, 4, 5};
  float out[6] = {9, 9, 9, 9, 9, 9};
  const int32_t ids[3] = {1, 3, 2};
  expect_error([&] { embedding(table, DType::F32, 3, 2, ids, 3, out); }, {"embedding", "token id 3", "index 1"});
  EXPECT_EQ(out[0], 9.0f);  // nothing written
  const int32_t neg[1] = {-4};
  expect_error([&] { ref::embedding(table, DType::F32, 3, 2, neg, 1, out); }, {"embedding", "token id -4"});
  expect_error([&] { embedding(table, DType::Q8_0, 3, 2, ids, 1, out); }, {"embedding", "block size"});
}

}  // namespace
}  // namespace ptn
