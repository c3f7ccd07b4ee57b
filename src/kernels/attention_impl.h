// Internal to src/kernels: the online-softmax attend_block kernel written once over a vector
// type V (ops_vec.h) and the K/V row formats. Included by attention.cpp (ScalarV),
// attention_avx2.cpp and attention_avx512.cpp. Internal linkage throughout.
#pragma once
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/blocks.h"
#include "kernels/ops_internal.h"
#include "kernels/ops_vec.h"

namespace ptn::kdetail {
namespace {

// ---- K/V row formats: dot(q, row) and acc += p * row over d elements ----

struct RowF32 {
  static int64_t bytes(int64_t d) { return d * 4; }
  template <class V>
  static float dot(const float* q, const void* row, int64_t d) {
    const float* k = static_cast<const float*>(row);
    typename V::R a0 = V::zero(), a1 = V::zero();
    int64_t i = 0;
    for (; i + 2 * V::W <= d; i += 2 * V::W) {
      a0 = V::fma(V::load(q + i), V::load(k + i), a0);
      a1 = V::fma(V::load(q + i + V::W), V::load(k + i + V::W), a1);
    }
    for (; i + V::W <= d; i += V::W) a0 = V::fma(V::load(q + i), V::load(k + i), a0);
    if (i < d) a1 = V::fma(load_part<V>(q + i, d - i), load_part<V>(k + i, d - i), a1);
    return V::hsum(V::add(a0, a1));
  }
  template <class V>
  static void axpy(float* acc, float p, const void* row, int64_t d) {
    const float* v = static_cast<const float*>(row);
    const typename V::R vp = V::set1(p);
    int64_t i = 0;
    for (; i + V::W <= d; i += V::W) V::store(acc + i, V::fma(vp, V::load(v + i), V::load(acc + i)));
    for (; i < d; ++i) acc[i] += p * v[i];
  }
};

// f16 and bf16 rows: 16-bit elements converted on load.
template <bool kBf16>
struct Row16 {
  static int64_t bytes(int64_t d) { return d * 2; }
  template <class V>
  static typename V::R load(const uint16_t* p) {
    if constexpr (kBf16) return V::load_bf16(p);
    else return V::load_f16(p);
  }
  template <class V>
  static typename V::R load_part16(const uint16_t* p, int64_t n) {
    uint16_t buf[V::W] = {};
    std::memcpy(buf, p, static_cast<size_t>(n) * sizeof(uint16_t));
    return load<V>(buf);
  }
  template <class V>
  static float dot(const float* q, const void* row, int64_t d) {
    const uint16_t* k = static_cast<const uint16_t*>(row);
    typename V::R a0 = V::zero(), a1 = V::zero();
    int64_t i = 0;
    for (; i + 2 * V::W <= d; i += 2 * V::W) {
      a0 = V::fma(V::load(q + i), load<V>(k + i), a0);
      a1 = V::fma(V::load(q + i + V::W), load<V>(k + i + V::W), a1);
    }
    for (; i + V::W <= d; i += V::W) a0 = V::fma(V::load(q + i), load<V>(k + i), a0);
    if (i < d) a1 = V::fma(load_part<V>(q + i, d - i), load_part16<V>(k + i, d - i), a1);
    return V::hsum(V::add(a0, a1));
  }
  template <class V>
  static void axpy(float* acc, float p, const void* row, int64_t d) {
    const uint16_t* v = static_cast<const uint16_t*>(row);
    const typename V::R vp = V::set1(p);
    int64_t i = 0;
    for (; i + V::W <= d; i += V::W) V::store(acc + i, V::fma(vp, load<V>(v + i), V::load(acc + i)));
    if (i < d) {
      float buf[V::W];
      V::store(buf, load_part16<V>(v + i, d - i));
      for (int64_t j = 0; i + j < d; ++j) acc[i + j] += p * buf[j];
    }
  }
  template <class V>
  static void to_f32(float* out, const void* row, int64_t d) {
    const uint16_t* v = static_cast<const uint16_t*>(row);
    int64_t i = 0;
    for (; i + V::W <= d; i += V::W) V::store(out + i, load<V>(v + i));
    if (i < d) {
      float buf[V::W];
      V::store(buf, load_part16<V>(v + i, d - i));
      for (int64_t j = 0; i + j < d; ++j) out[i + j] = buf[j];
    }
  }
};

// q8_0 rows: d / 32 blocks of (half scale, 32 int8).
struct RowQ8 {
  static int64_t bytes(int64_t d) { return d / QK8_0 * static_cast<int64_t>(sizeof(BlockQ8_0)); }
  template <class V>
  static float dot(const float* q, const void* row, int64_t d) {
    const BlockQ8_0* b = static_cast<const BlockQ8_0*>(row);
    typename V::R total = V::zero();
    for (int64_t blk = 0; blk < d / QK8_0; ++blk, q += QK8_0) {
      typename V::R s = V::zero();
      for (int i = 0; i < QK8_0; i += V::W) s = V::fma(V::load(q + i), V::load_i8(b[blk].qs + i), s);
      total = V::fma(V::set1(V::half(b[blk].d)), s, total);
    }
    return V::hsum(total);
  }
  template <class V>
  static void axpy(float* acc, float p, const void* row, int64_t d) {
    const BlockQ8_0* b = static_cast<const BlockQ8_0*>(row);
    for (int64_t blk = 0; blk < d / QK8_0; ++blk, acc += QK8_0) {
      const typename V::R c = V::set1(p * V::half(b[blk].d));
      for (int i = 0; i < QK8_0; i += V::W)
        V::store(acc + i, V::fma(c, V::load_i8(b[blk].qs + i), V::load(acc + i)));
    }
  }
  template <class V>
  static void to_f32(float* out, const void* row, int64_t d) {
    const BlockQ8_0* b = static_cast<const BlockQ8_0*>(row);
    for (int64_t blk = 0; blk < d / QK8_0; ++blk, out += QK8_0) {
      const typename V::R c = V::set1(V::half(b[blk].d));
      for (int i = 0; i < QK8_0; i += V::W) V::store(out + i, V::mul(c, V::load_i8(b[blk].qs + i)));
    }
  }
};

// q4_0 rows: d / 32 blocks of (half scale, 16 bytes): element i < 16 is the low nibble of byte i,
// element 16 + i its high nibble, value (code - 8) * scale.
struct RowQ4 {
  static int64_t bytes(int64_t d) { return d / QK4_0 * static_cast<int64_t>(sizeof(BlockQ4_0)); }
  template <class V>
  static float dot(const float* q, const void* row, int64_t d) {
    const BlockQ4_0* b = static_cast<const BlockQ4_0*>(row);
    const typename V::R eight = V::set1(8.0f);
    typename V::R total = V::zero();
    for (int64_t blk = 0; blk < d / QK4_0; ++blk, q += QK4_0) {
      typename V::R s = V::zero();
      for (int i = 0; i < QK4_0 / 2; i += V::W) {
        s = V::fma(V::load(q + i), V::sub(V::load_u4(b[blk].qs + i, 0), eight), s);
        s = V::fma(V::load(q + QK4_0 / 2 + i), V::sub(V::load_u4(b[blk].qs + i, 4), eight), s);
      }
      total = V::fma(V::set1(V::half(b[blk].d)), s, total);
    }
    return V::hsum(total);
  }
  template <class V>
  static void axpy(float* acc, float p, const void* row, int64_t d) {
    const BlockQ4_0* b = static_cast<const BlockQ4_0*>(row);
    const typename V::R eight = V::set1(8.0f);
    for (int64_t blk = 0; blk < d / QK4_0; ++blk, acc += QK4_0) {
      const typename V::R c = V::set1(p * V::half(b[blk].d));
      for (int i = 0; i < QK4_0 / 2; i += V::W) {
        V::store(acc + i, V::fma(c, V::sub(V::load_u4(b[blk].qs + i, 0), eight), V::load(acc + i)));
        float* hi = acc + QK4_0 / 2 + i;
        V::store(hi, V::fma(c, V::sub(V::load_u4(b[blk].qs + i, 4), eight), V::load(hi)));
      }
    }
  }
  template <class V>
  static void to_f32(float* out, const void* row, int64_t d) {
    const BlockQ4_0* b = static_cast<const BlockQ4_0*>(row);
    const typename V::R eight = V::set1(8.0f);
    for (int64_t blk = 0; blk < d / QK4_0; ++blk, out += QK4_0) {
      const typename V::R c = V::set1(V::half(b[blk].d));
      for (int i = 0; i < QK4_0 / 2; i += V::W) {
        V::store(out + i, V::mul(c, V::sub(V::load_u4(b[blk].qs + i, 0), eight)));
        V::store(out + QK4_0 / 2 + i, V::mul(c, V::sub(V::load_u4(b[blk].qs + i, 4), eight)));
      }
    }
  }
};

// acc[d] += sum_j p[j] * row_j for m f32, 16-bit or q8_0 rows (VR) `stride` bytes apart; rows
// with p[j] == 0 are skipped (as axpy's callers do), so a non-finite value under a zero weight
// stays out. acc is held in registers over all m rows, 4 vectors at a time with two sets of
// accumulators (even / odd rows): calling axpy per row would store acc and load it back for the
// next row, a store-forwarding chain that bounded the whole loop.
template <class V, class VR>
void axpy_rows(float* acc, const float* p, const uint8_t* rows, int64_t stride, int64_t m, int64_t d) {
  using R = typename V::R;
  // Row elements e..e+W-1 as floats (q8_0: the codes, without their block's scale) ...
  const auto load = [](const uint8_t* row, int64_t e) {
    if constexpr (std::is_same_v<VR, RowF32>) return V::load(reinterpret_cast<const float*>(row) + e);
    else if constexpr (std::is_same_v<VR, RowQ8>)
      return V::load_i8(reinterpret_cast<const BlockQ8_0*>(row)[e / QK8_0].qs + e % QK8_0);
    else return VR::template load<V>(reinterpret_cast<const uint16_t*>(row) + e);
  };
  // ... times their weight: p (q8_0: p times the scale of the block that holds element e).
  const auto weight = [](const uint8_t* row, int64_t e, float p) {
    if constexpr (std::is_same_v<VR, RowQ8>)
      return V::set1(p * V::half(reinterpret_cast<const BlockQ8_0*>(row)[e / QK8_0].d));
    else return V::set1(p);
  };
  int64_t i = 0;
  for (; i + 4 * V::W <= d; i += 4 * V::W) {
    R a[4], b[4];
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      a[u] = V::load(acc + i + u * V::W);
      b[u] = V::zero();
    }
    int64_t j = 0;
    for (; j + 2 <= m; j += 2) {
      const uint8_t* v0 = rows + j * stride;
      const uint8_t* v1 = rows + (j + 1) * stride;
      if (p[j] != 0.0f) {
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) a[u] = V::fma(weight(v0, i + u * V::W, p[j]), load(v0, i + u * V::W), a[u]);
      }
      if (p[j + 1] != 0.0f) {
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) b[u] = V::fma(weight(v1, i + u * V::W, p[j + 1]), load(v1, i + u * V::W), b[u]);
      }
    }
    if (j < m && p[j] != 0.0f) {
      const uint8_t* v0 = rows + j * stride;
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) a[u] = V::fma(weight(v0, i + u * V::W, p[j]), load(v0, i + u * V::W), a[u]);
    }
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) V::store(acc + i + u * V::W, V::add(a[u], b[u]));
  }
  if (i < d)
    for (int64_t j = 0; j < m; ++j)
      if (p[j] != 0.0f) {
        const uint8_t* row = rows + j * stride;
        if constexpr (std::is_same_v<VR, RowF32>) {
          const float* v = reinterpret_cast<const float*>(row);
          for (int64_t e = i; e < d; ++e) acc[e] += p[j] * v[e];
        } else {
          VR::template axpy<V>(acc + i, p[j], row + VR::bytes(i), d - i);
        }
      }
}

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
// The lane sums of a[0..7] as one vector (lane u: the sum of a[u]'s 8 lanes), by an hadd tree.
[[gnu::always_inline]] inline __m256 sums8(const __m256 (&a)[8]) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);  // [0-3 | 0-3], [4-7 | 4-7]
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}
// v as 8 lanes whose sum is v's (a zmm's halves added).
[[gnu::always_inline]] inline __m256 fold256(__m256 v) { return v; }
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__)
[[gnu::always_inline]] inline __m256 fold256(__m512 v) {
  return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
}
template <class V> constexpr bool kSums8 = std::is_same_v<V, Avx2V> || std::is_same_v<V, Avx512V>;
#else
template <class V> constexpr bool kSums8 = std::is_same_v<V, Avx2V>;
#endif

// out[u] = scale * (q . K row u) for 8 rows kr[u] of d elements (f32, 16-bit, q8_0 or q4_0; d a
// multiple of V::W): one accumulator per row, reduced together by sums8.
template <class V, class KR>
[[gnu::always_inline]] inline void dots8(const float* q, const uint8_t* const (&kr)[8], int64_t d, float scale,
                                         float* out) {
  typename V::R a[8];
#pragma GCC unroll 8
  for (int u = 0; u < 8; ++u) a[u] = V::zero();
  if constexpr (std::is_same_v<KR, RowQ8> || std::is_same_v<KR, RowQ4>) {
    // Per block of 32: the block's products in one vector per row, then times its scale.
    constexpr int kQ = QK8_0 / V::W;
    for (int64_t blk = 0; blk < d / QK8_0; ++blk) {
      typename V::R qv[kQ];
#pragma GCC unroll 4
      for (int i = 0; i < kQ; ++i) qv[i] = V::load(q + blk * QK8_0 + i * V::W);
#pragma GCC unroll 8
      for (int u = 0; u < 8; ++u) {
        typename V::R p;
        float sc;
        if constexpr (std::is_same_v<KR, RowQ8>) {
          const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(kr[u])[blk];
          p = V::mul(qv[0], V::load_i8(b.qs));
#pragma GCC unroll 4
          for (int i = 1; i < kQ; ++i) p = V::fma(qv[i], V::load_i8(b.qs + i * V::W), p);
          sc = V::half(b.d);
        } else {
          const BlockQ4_0& b = reinterpret_cast<const BlockQ4_0*>(kr[u])[blk];
          const typename V::R eight = V::set1(8.0f);
          p = V::zero();
#pragma GCC unroll 2
          for (int i = 0; i < kQ / 2; ++i) {
            p = V::fma(qv[i], V::sub(V::load_u4(b.qs + i * V::W, 0), eight), p);
            p = V::fma(qv[kQ / 2 + i], V::sub(V::load_u4(b.qs + i * V::W, 4), eight), p);
          }
          sc = V::half(b.d);
        }
        a[u] = V::fma(V::set1(sc), p, a[u]);
      }
    }
  } else {
    for (int64_t e = 0; e < d; e += V::W) {
      const typename V::R qv = V::load(q + e);
#pragma GCC unroll 8
      for (int u = 0; u < 8; ++u) {
        typename V::R kv;
        if constexpr (std::is_same_v<KR, RowF32>) kv = V::load(reinterpret_cast<const float*>(kr[u]) + e);
        else kv = KR::template load<V>(reinterpret_cast<const uint16_t*>(kr[u]) + e);
        a[u] = V::fma(qv, kv, a[u]);
      }
    }
  }
  __m256 h[8];
#pragma GCC unroll 8
  for (int u = 0; u < 8; ++u) h[u] = fold256(a[u]);
  _mm256_storeu_ps(out, _mm256_mul_ps(sums8(h), _mm256_set1_ps(scale)));
}
#endif

constexpr int64_t kPrefetchRows = 8;

inline void prefetch_row(const uint8_t* p, int64_t bytes) {
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 3);
}

template <class V>
void scale_inplace(float* x, int64_t n, float s) {
  const typename V::R vs = V::set1(s);
  int64_t i = 0;
  for (; i + V::W <= n; i += V::W) V::store(x + i, V::mul(V::load(x + i), vs));
  for (; i < n; ++i) x[i] *= s;
}

// G query heads (q: [G, d], states[G]) sharing one kv head: each K and V row is read from
// memory once and used by all G heads while it sits in L1.
template <class V, class KR, class VR>
void attend_t(AttnAccumulator* st, const float* q, int64_t G, int64_t d, const KvRows& k,
              const KvRows& v, int64_t n, float scale, float softcap) {
  using R = typename V::R;
  constexpr int64_t kChunk = 32;
  constexpr int64_t kMaxG = 16;  // heads per pass; larger groups take several passes
  float s[kMaxG][kChunk];
  const auto* kb = static_cast<const uint8_t*>(k.data);
  const auto* vb = static_cast<const uint8_t*>(v.data);
  const int64_t kbytes = KR::bytes(d), vbytes = VR::bytes(st[0].dv);
  for (int64_t g0 = 0; g0 < G; g0 += kMaxG) {
    const int64_t ng = G - g0 < kMaxG ? G - g0 : kMaxG;
    for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
      const int64_t m = n - j0 < kChunk ? n - j0 : kChunk;
      int64_t j = 0;
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
      // Every K type at the x86 levels: 8 rows' dot products per head at a time, their lanes
      // summed by one hadd tree into a vector of 8 scores (a horizontal sum and a scalar store per
      // dot product took about a quarter of this function's time in a profile of decoding).
      if constexpr (kSums8<V>) {
        if (d % V::W == 0)
          for (; j + 8 <= m; j += 8) {
            const uint8_t* kr[8];
            for (int u = 0; u < 8; ++u) {
              kr[u] = kb + (j0 + j + u) * k.stride;
              if (j0 + j + u + kPrefetchRows < n) prefetch_row(kr[u] + kPrefetchRows * k.stride, kbytes);
            }
            // q4_0 K: the 8 rows unpacked to f32 once for all the heads of the group (for f16 and
            // q8_0 K that measured slower than converting per head; bench_kvcache, session 28).
            if constexpr (std::is_same_v<KR, RowQ4>) {
              if (ng > 1) {
                thread_local std::vector<float> kconv;  // only the q4_0 instances declare it
                kconv.resize(static_cast<size_t>(8 * d));
                const uint8_t* kf[8];
                for (int u = 0; u < 8; ++u) {
                  KR::template to_f32<V>(kconv.data() + u * d, kr[u], d);
                  kf[u] = reinterpret_cast<const uint8_t*>(kconv.data() + u * d);
                }
                for (int64_t g = 0; g < ng; ++g) dots8<V, RowF32>(q + (g0 + g) * d, kf, d, scale, s[g] + j);
                continue;
              }
            }
            for (int64_t g = 0; g < ng; ++g) dots8<V, KR>(q + (g0 + g) * d, kr, d, scale, s[g] + j);
          }
      }
#endif
      for (; j < m; ++j) {
        const uint8_t* krow = kb + (j0 + j) * k.stride;
        // Rows of one kv head are a page apart in [S, Hkv, D] layouts, where the hardware
        // prefetcher does not follow: fetch a few rows ahead by hand.
        if (j0 + j + kPrefetchRows < n) prefetch_row(krow + kPrefetchRows * k.stride, kbytes);
        for (int64_t g = 0; g < ng; ++g) s[g][j] = scale * KR::template dot<V>(q + (g0 + g) * d, krow, d);
      }
      bool any = false;
      for (int64_t g = 0; g < ng; ++g) {
        float* sg = s[g];
        AttnAccumulator& a = st[g0 + g];
        if (softcap > 0) {
          const R vc = V::set1(softcap), vi = V::set1(1.0f / softcap);
          int64_t j = 0;
          for (; j + V::W <= m; j += V::W) V::store(sg + j, V::mul(vc, vtanh<V>(V::mul(V::load(sg + j), vi))));
          if (j < m) store_part<V>(sg + j, V::mul(vc, vtanh<V>(V::mul(load_part<V>(sg + j, m - j), vi))), m - j);
        }
        // max(x, running) keeps the running value when x is NaN, as the scalar compare does.
        float bmax = -INFINITY;
        {
          R vmax = V::set1(-INFINITY);
          int64_t j = 0;
          for (; j + V::W <= m; j += V::W) vmax = V::max(V::load(sg + j), vmax);
          bmax = V::hmax(vmax);
          for (; j < m; ++j) bmax = sg[j] > bmax ? sg[j] : bmax;
        }
        if (bmax == -INFINITY) {  // every weight is exp(-inf) = 0
          for (int64_t j = 0; j < m; ++j) sg[j] = 0.0f;
          continue;
        }
        any = true;
        if (bmax > a.max) {
          const float corr = std::exp(a.max - bmax);  // 0 when nothing was seen yet
          scale_inplace<V>(a.acc, a.dv, corr);
          a.sum *= corr;
          a.max = bmax;
        }
        const R vm = V::set1(a.max);
        // The sum of the weights in a vector (a scalar sum of the stored values was a chain of
        // dependent adds that each waited on the store).
        R vsum = V::zero();
        int64_t j = 0;
        for (; j + V::W <= m; j += V::W) {
          const R e = V::exp(V::sub(V::load(sg + j), vm));
          V::store(sg + j, e);
          vsum = V::add(vsum, e);
        }
        float bsum = V::hsum(vsum);
        if (j < m) {
          store_part<V>(sg + j, V::exp(V::sub(load_part<V>(sg + j, m - j), vm)), m - j);
          for (; j < m; ++j) bsum += sg[j];
        }
        a.sum += bsum;
      }
      if (!any) continue;
      // q4_0 V: the chunk's rows unpacked to f32 once for all the heads of the group, then summed
      // as f32 rows (as for K above; f16 and q8_0 V are read as they are).
      if constexpr (std::is_same_v<VR, RowQ4>) {
        if (ng > 1) {
          const int64_t dv = st[g0].dv;
          thread_local std::vector<float> vconv;
          vconv.resize(static_cast<size_t>(kChunk * dv));
          for (int64_t j = 0; j < m; ++j) {
            const uint8_t* vrow = vb + (j0 + j) * v.stride;
            if (j0 + j + kPrefetchRows < n) prefetch_row(vrow + kPrefetchRows * v.stride, vbytes);
            VR::template to_f32<V>(vconv.data() + j * dv, vrow, dv);
          }
          const uint8_t* v0 = reinterpret_cast<const uint8_t*>(vconv.data());
          for (int64_t g = 0; g < ng; ++g)
            axpy_rows<V, RowF32>(st[g0 + g].acc, s[g], v0, dv * static_cast<int64_t>(sizeof(float)), m, dv);
          continue;
        }
      }
      // q4_0 V for one head stays row by row: its nibbles, unpacked per vector, made axpy_rows
      // slower than that at avx2 (bench_kvcache, session 28).
      if constexpr (!std::is_same_v<VR, RowQ4>) {
        const uint8_t* v0 = vb + j0 * v.stride;
        for (int64_t j = 0; j < m; ++j)
          if (j0 + j + kPrefetchRows < n) prefetch_row(v0 + (j + kPrefetchRows) * v.stride, vbytes);
        for (int64_t g = 0; g < ng; ++g) axpy_rows<V, VR>(st[g0 + g].acc, s[g], v0, v.stride, m, st[g0 + g].dv);
        continue;
      }
      for (int64_t j = 0; j < m; ++j) {
        const uint8_t* vrow = vb + (j0 + j) * v.stride;
        if (j0 + j + kPrefetchRows < n) prefetch_row(vrow + kPrefetchRows * v.stride, vbytes);
        for (int64_t g = 0; g < ng; ++g)
          if (s[g][j] != 0.0f) VR::template axpy<V>(st[g0 + g].acc, s[g][j], vrow, st[g0 + g].dv);
      }
    }
  }
}

template <class V, class KR>
void attend_v(AttnAccumulator* st, const float* q, int64_t G, int64_t d, const KvRows& k,
              const KvRows& v, int64_t n, float scale, float softcap) {
  switch (v.type) {
    case DType::F16: return attend_t<V, KR, Row16<false>>(st, q, G, d, k, v, n, scale, softcap);
    case DType::BF16: return attend_t<V, KR, Row16<true>>(st, q, G, d, k, v, n, scale, softcap);
    case DType::Q8_0: return attend_t<V, KR, RowQ8>(st, q, G, d, k, v, n, scale, softcap);
    case DType::Q4_0: return attend_t<V, KR, RowQ4>(st, q, G, d, k, v, n, scale, softcap);
    default: return attend_t<V, KR, RowF32>(st, q, G, d, k, v, n, scale, softcap);
  }
}

// Types are checked by the caller (attend_block_group in attention.cpp).
template <class V>
void attend_any(AttnAccumulator* st, const float* q, int64_t G, int64_t d, const KvRows& k,
                const KvRows& v, int64_t n, float scale, float softcap) {
  switch (k.type) {
    case DType::F16: return attend_v<V, Row16<false>>(st, q, G, d, k, v, n, scale, softcap);
    case DType::BF16: return attend_v<V, Row16<true>>(st, q, G, d, k, v, n, scale, softcap);
    case DType::Q8_0: return attend_v<V, RowQ8>(st, q, G, d, k, v, n, scale, softcap);
    case DType::Q4_0: return attend_v<V, RowQ4>(st, q, G, d, k, v, n, scale, softcap);
    default: return attend_v<V, RowF32>(st, q, G, d, k, v, n, scale, softcap);
  }
}

// ---- query tiles (attention.h): tile row i = lane i of V ----

// n rows of `r` converted to f32 into out [n][d] (f32 rows copied).
template <class V>
void rows_f32_t(const KvRows& r, int64_t n, int64_t d, float* out) {
  for (int64_t j = 0; j < n; ++j, out += d) {
    const uint8_t* row = static_cast<const uint8_t*>(r.data) + j * r.stride;
    if (r.type == DType::F32) {
      std::memcpy(out, row, static_cast<size_t>(d) * sizeof(float));
      continue;
    }
    if (r.type == DType::F16) Row16<false>::to_f32<V>(out, row, d);
    else if (r.type == DType::BF16) Row16<true>::to_f32<V>(out, row, d);
    else if (r.type == DType::Q4_0) RowQ4::to_f32<V>(out, row, d);
    else RowQ8::to_f32<V>(out, row, d);
  }
}

// Rows j0..j0+m-1 of `r` as f32: in place for f32, else converted into buf [m][d].
template <class V>
void tile_rows_f32(const KvRows& r, int64_t j0, int64_t m, int64_t d, float* buf, const float** rows) {
  if (r.type == DType::F32) {
    for (int64_t j = 0; j < m; ++j) rows[j] = reinterpret_cast<const float*>(static_cast<const uint8_t*>(r.data) + (j0 + j) * r.stride);
    return;
  }
  rows_f32_t<V>(KvRows{static_cast<const uint8_t*>(r.data) + j0 * r.stride, r.type, r.stride}, m, d, buf);
  for (int64_t j = 0; j < m; ++j) rows[j] = buf + j * d;
}

// Rows j0..j0+m-1 (m <= 16) at a time: scores S[j] (one vector = the tile's rows) by d
// broadcast-FMAs per K row, 8 K rows interleaved; lanes outside their [lo, hi) get -inf; the
// running max / sum / acc rescaled lane-wise; then acc[e] += sum_j p[j] * v[j][e], 8 e at a time.
template <class V>
void tile_block_t(AttnTile& t, const KvRows& k, const KvRows& v, int64_t n, const int32_t* lo, const int32_t* hi) {
  using R = typename V::R;
  constexpr int W = V::W;
  constexpr int64_t kChunk = 16;
  const int64_t d = t.d, dv = t.dv;
  alignas(64) float vlo[W], vhi[W];
  int64_t jlo = n, jhi = 0;
  for (int i = 0; i < W; ++i) {
    vlo[i] = 1.0f;  // unused lanes: lo > hi - 1, never visible
    vhi[i] = 0.0f;
    if (i >= t.nq) continue;
    const int64_t a = std::max<int64_t>(0, lo[i]), b = std::min<int64_t>(n, hi[i]);
    if (a >= b) continue;
    vlo[i] = static_cast<float>(a);
    vhi[i] = static_cast<float>(b - 1);
    jlo = std::min(jlo, a);
    jhi = std::max(jhi, b);
  }
  if (jlo >= jhi) return;
  const R rlo = V::load(vlo), rhi = V::load(vhi), ninf = V::set1(-INFINITY);
  thread_local std::vector<float> kbuf, vbuf;
  if (k.type != DType::F32) kbuf.resize(static_cast<size_t>(kChunk * d));
  if (v.type != DType::F32) vbuf.resize(static_cast<size_t>(kChunk * dv));
  const float* krows[kChunk];
  const float* vrows[kChunk];
  for (int64_t j0 = jlo; j0 < jhi; j0 += kChunk) {
    const int64_t m = std::min(kChunk, jhi - j0);
    tile_rows_f32<V>(k, j0, m, d, kbuf.data(), krows);
    // Rows past m repeat row m - 1 so that every pass runs 8 rows in registers (the extra
    // scores are never used).
    for (int64_t j = m; j < kChunk; ++j) krows[j] = krows[m - 1];
    R s[kChunk];
    for (int64_t jj = 0; jj < m; jj += 8) {
      R a[8];
#pragma GCC unroll 8
      for (int u = 0; u < 8; ++u) a[u] = V::zero();
      for (int64_t e = 0; e < d; ++e) {
        const R qv = V::load(t.qt + e * W);
#pragma GCC unroll 8
        for (int u = 0; u < 8; ++u) a[u] = V::fma(qv, V::set1(krows[jj + u][e]), a[u]);
      }
#pragma GCC unroll 8
      for (int u = 0; u < 8; ++u) s[jj + u] = a[u];
    }
    const R vs = V::set1(t.scale);
    R bmax = ninf;
    for (int64_t j = 0; j < m; ++j) {
      R x = V::mul(s[j], vs);
      if (t.softcap > 0) x = V::mul(V::set1(t.softcap), vtanh<V>(V::mul(x, V::set1(1.0f / t.softcap))));
      const R pos = V::set1(static_cast<float>(j0 + j));
      x = V::select_neg(V::sub(pos, rlo), ninf, x);
      x = V::select_neg(V::sub(rhi, pos), ninf, x);
      s[j] = x;
      bmax = V::max(x, bmax);
    }
    const R mold = V::load(t.max);
    const R mnew = V::max(bmax, mold);
    // Lanes that have seen nothing yet subtract 0 instead of -inf (exp(-inf - -inf) is NaN).
    const R mref = V::select_neg(V::add(mnew, V::set1(FLT_MAX)), V::zero(), mnew);
    const R corr = V::exp(V::sub(mold, mref));
    R sum = V::mul(V::load(t.sum), corr);
    for (int64_t j = 0; j < m; ++j) {
      s[j] = V::exp(V::sub(s[j], mref));
      sum = V::add(sum, s[j]);
    }
    V::store(t.max, mnew);
    V::store(t.sum, sum);
    tile_rows_f32<V>(v, j0, m, dv, vbuf.data(), vrows);
    int64_t e0 = 0;
    for (; e0 + 8 <= dv; e0 += 8) {
      R a[8];
#pragma GCC unroll 8
      for (int u = 0; u < 8; ++u) a[u] = V::mul(V::load(t.acct + (e0 + u) * W), corr);
      for (int64_t j = 0; j < m; ++j)
  #pragma GCC unroll 8
        for (int u = 0; u < 8; ++u) a[u] = V::fma(s[j], V::set1(vrows[j][e0 + u]), a[u]);
#pragma GCC unroll 8
      for (int u = 0; u < 8; ++u) V::store(t.acct + (e0 + u) * W, a[u]);
    }
    for (; e0 < dv; ++e0) {
      R a = V::mul(V::load(t.acct + e0 * W), corr);
      for (int64_t j = 0; j < m; ++j) a = V::fma(s[j], V::set1(vrows[j][e0]), a);
      V::store(t.acct + e0 * W, a);
    }
  }
}

template <class V>
constexpr AttnKernels make_attn_kernels() {
  return AttnKernels{&attend_any<V>, &tile_block_t<V>, &rows_f32_t<V>, V::W};
}

}  // namespace
}  // namespace ptn::kdetail
