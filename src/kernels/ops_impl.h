// Internal to src/kernels: the single-thread row kernels of ops.h written once over a vector
// type V (ops_vec.h). Included by ops.cpp (ScalarV), ops_avx2.cpp and ops_avx512.cpp, each of
// which builds its OpsKernels table with make_ops_kernels<V>(). Internal linkage throughout.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/ops_internal.h"
#include "kernels/ops_vec.h"

namespace ptn::kdetail {
namespace {

// y[i] = f(x[i]) with f on vectors; the tail goes through a zero-padded vector.
template <class V, class F>
inline void map1(const float* x, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) V::store(y + i, f(V::load(x + i)));
  if (i < n) store_part<V>(y + i, f(load_part<V>(x + i, n - i)), n - i);
}
template <class V, class F>
inline void map2(const float* a, const float* b, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) V::store(y + i, f(V::load(a + i), V::load(b + i)));
  if (i < n) store_part<V>(y + i, f(load_part<V>(a + i, n - i), load_part<V>(b + i, n - i)), n - i);
}

template <class V>
float sum_squares(const float* x, int64_t n) {
  using R = typename V::R;
  R s0 = V::zero(), s1 = V::zero();
  int64_t i = 0;
  for (; i + 2 * V::W <= n; i += 2 * V::W) {
    R a = V::load(x + i), b = V::load(x + i + V::W);
    s0 = V::fma(a, a, s0);
    s1 = V::fma(b, b, s1);
  }
  for (; i + V::W <= n; i += V::W) {
    R a = V::load(x + i);
    s0 = V::fma(a, a, s0);
  }
  if (i < n) {
    R a = load_part<V>(x + i, n - i);
    s1 = V::fma(a, a, s1);
  }
  return V::hsum(V::add(s0, s1));
}

template <class V>
float sum(const float* x, int64_t n) {
  using R = typename V::R;
  R s0 = V::zero(), s1 = V::zero();
  int64_t i = 0;
  for (; i + 2 * V::W <= n; i += 2 * V::W) {
    s0 = V::add(s0, V::load(x + i));
    s1 = V::add(s1, V::load(x + i + V::W));
  }
  for (; i + V::W <= n; i += V::W) s0 = V::add(s0, V::load(x + i));
  if (i < n) s1 = V::add(s1, load_part<V>(x + i, n - i));
  return V::hsum(V::add(s0, s1));
}

// y = x * s * (w or 1 + w or 1)
template <class V>
void scale_by_weight(const float* x, const float* w, float* y, int64_t dim, float s, bool plus_one) {
  using R = typename V::R;
  const R vs = V::set1(s);
  if (w == nullptr) {
    map1<V>(x, y, dim, [&](R a) { return V::mul(a, vs); });
  } else if (plus_one) {
    const R one = V::set1(1.0f);
    map2<V>(x, w, y, dim, [&](R a, R b) { return V::mul(V::mul(a, vs), V::add(one, b)); });
  } else {
    map2<V>(x, w, y, dim, [&](R a, R b) { return V::mul(V::mul(a, vs), b); });
  }
}

template <class V>
void k_rms_norm(const float* x, const float* w, float* y, int64_t dim, float eps, bool plus_one) {
  const float ms = sum_squares<V>(x, dim) / static_cast<float>(dim);
  scale_by_weight<V>(x, w, y, dim, 1.0f / std::sqrt(ms + eps), plus_one);
}

template <class V>
void k_layer_norm(const float* x, const float* w, const float* b, float* y, int64_t dim, float eps) {
  using R = typename V::R;
  const float mean = sum<V>(x, dim) / static_cast<float>(dim);
  const R vm = V::set1(mean);
  R acc = V::zero();
  int64_t i = 0;
  for (; i + V::W <= dim; i += V::W) {
    R d = V::sub(V::load(x + i), vm);
    acc = V::fma(d, d, acc);
  }
  float var = V::hsum(acc);
  for (; i < dim; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<float>(dim);
  const R rs = V::set1(1.0f / std::sqrt(var + eps));
  map1<V>(x, y, dim, [&](R a) { return V::mul(V::sub(a, vm), rs); });
  if (w != nullptr) map2<V>(y, w, y, dim, [](R a, R c) { return V::mul(a, c); });
  if (b != nullptr) map2<V>(y, b, y, dim, [](R a, R c) { return V::add(a, c); });
}

template <class V>
void k_softmax(float* x, int64_t n) {
  using R = typename V::R;
  R mv = V::set1(-INFINITY);
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) mv = V::max(mv, V::load(x + i));
  float m = V::hmax(mv);
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  if (m == -INFINITY) {  // nothing may be attended / sampled: all zeros rather than NaN
    for (int64_t j = 0; j < n; ++j) x[j] = 0.0f;
    return;
  }
  const R vm = V::set1(m);
  map1<V>(x, x, n, [&](R a) { return V::exp(V::sub(a, vm)); });
  const R inv = V::set1(1.0f / sum<V>(x, n));
  map1<V>(x, x, n, [&](R a) { return V::mul(a, inv); });
}

// 0.5 x (1 + tanh(z)) = x sigmoid(2 z), z = sqrt(2/pi) (x + 0.044715 x^3): no cancellation
// for negative x.
template <class V>
typename V::R gelu_tanh_v(typename V::R x) {
  using R = typename V::R;
  const R k0 = V::set1(2.0f * 0.7978845608028654f);  // 2 sqrt(2/pi)
  const R k1 = V::set1(0.044715f);
  R z2 = V::mul(k0, V::fma(V::mul(k1, x), V::mul(x, x), x));
  return V::mul(x, vsigmoid<V>(z2));
}

template <class V>
typename V::R gelu_erf_v(typename V::R x) {
  using R = typename V::R;
  R g = one_plus_erf<V>(V::mul(x, V::set1(0.7071067811865476f)));
  return V::mul(V::mul(V::set1(0.5f), x), g);
}

template <class V>
void k_silu(const float* x, float* y, int64_t n) {
  map1<V>(x, y, n, [](typename V::R a) { return V::mul(a, vsigmoid<V>(a)); });
}
template <class V>
void k_gelu_tanh(const float* x, float* y, int64_t n) {
  map1<V>(x, y, n, [](typename V::R a) { return gelu_tanh_v<V>(a); });
}
template <class V>
void k_gelu_erf(const float* x, float* y, int64_t n) {
  map1<V>(x, y, n, [](typename V::R a) { return gelu_erf_v<V>(a); });
}
template <class V>
void k_swiglu(const float* g, const float* u, float* y, int64_t n) {
  map2<V>(g, u, y, n, [](typename V::R a, typename V::R b) {
    return V::mul(V::mul(a, vsigmoid<V>(a)), b);
  });
}
template <class V>
void k_geglu(const float* g, const float* u, float* y, int64_t n) {
  map2<V>(g, u, y, n, [](typename V::R a, typename V::R b) { return V::mul(gelu_tanh_v<V>(a), b); });
}
template <class V>
void k_geglu_erf(const float* g, const float* u, float* y, int64_t n) {
  map2<V>(g, u, y, n, [](typename V::R a, typename V::R b) { return V::mul(gelu_erf_v<V>(a), b); });
}
template <class V>
void k_add(const float* a, const float* b, float* y, int64_t n) {
  map2<V>(a, b, y, n, [](typename V::R p, typename V::R q) { return V::add(p, q); });
}
template <class V>
void k_mul(const float* a, const float* b, float* y, int64_t n) {
  map2<V>(a, b, y, n, [](typename V::R p, typename V::R q) { return V::mul(p, q); });
}
template <class V>
void k_scale(const float* x, float s, float* y, int64_t n) {
  const typename V::R vs = V::set1(s);
  map1<V>(x, y, n, [&](typename V::R a) { return V::mul(a, vs); });
}
template <class V>
void k_softcap(float* x, int64_t n, float cap) {
  const typename V::R vc = V::set1(cap), vi = V::set1(1.0f / cap);
  map1<V>(x, x, n, [&](typename V::R a) { return V::mul(vc, vtanh<V>(V::mul(a, vi))); });
}

template <class V>
void k_rotate(float* x0, float* x1, const float* c, const float* s, int64_t n) {
  using R = typename V::R;
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) {
    R a = V::load(x0 + i), b = V::load(x1 + i), vc = V::load(c + i), vs = V::load(s + i);
    V::store(x0 + i, V::sub(V::mul(a, vc), V::mul(b, vs)));
    V::store(x1 + i, V::fma(a, vs, V::mul(b, vc)));
  }
  for (; i < n; ++i) {
    const float a = x0[i], b = x1[i];
    x0[i] = a * c[i] - b * s[i];
    x1[i] = b * c[i] + a * s[i];
  }
}

template <class V>
constexpr OpsKernels make_ops_kernels() {
  return OpsKernels{&k_rms_norm<V>, &k_layer_norm<V>, &k_softmax<V>, &k_silu<V>,
                    &k_gelu_tanh<V>, &k_gelu_erf<V>, &k_swiglu<V>, &k_geglu<V>,
                    &k_geglu_erf<V>, &k_add<V>, &k_mul<V>, &k_scale<V>, &k_softcap<V>, &k_rotate<V>};
}

}  // namespace
}  // namespace ptn::kdetail
