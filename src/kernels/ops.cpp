// Optimized ops: argument checks, the choice of the row kernels for the SIMD level in force,
// and the split of rows / elements over the thread pool. The scalar kernels are instantiated
// here; AVX2 and AVX-512 ones in ops_avx2.cpp / ops_avx512.cpp.
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/quant.h"
#include "kernels/ops.h"
#include "kernels/ops_impl.h"
#include "kernels/ops_internal.h"

namespace ptn {
namespace kdetail {

const OpsKernels& ops_kernels_scalar() {
  static constexpr OpsKernels k = make_ops_kernels<ScalarV>();
  return k;
}

const OpsKernels& ops_kernels(SimdLevel level) {
  switch (level) {
#if defined(__x86_64__)
    case SimdLevel::AVX512: return ops_kernels_avx512();
    case SimdLevel::AVX2:
    case SimdLevel::AVX2VNNI: return ops_kernels_avx2();
#elif defined(__aarch64__)
    case SimdLevel::Neon: case SimdLevel::NeonDotprod: case SimdLevel::NeonI8mm: return ops_kernels_neon();
#endif
    default: break;
  }
  return ops_kernels_scalar();
}

}  // namespace kdetail

namespace {

using kdetail::OpsKernels;

const OpsKernels& kern() { return kdetail::ops_kernels(simd_level()); }

// Below these sizes a job costs more to hand out than to do on the calling thread.
constexpr int64_t kParallelRowElems = 32 * 1024;
constexpr int64_t kParallelElems = 64 * 1024;

// fn(r0, r1) over row ranges; split over the pool when there is enough work.
template <class F>
void for_rows(ThreadPool& pool, int64_t rows, int64_t dim, F fn) {
  if (rows <= 0) return;
  if (pool.size() == 1 || rows == 1 || rows * dim < kParallelRowElems) {
    fn(int64_t{0}, rows);
    return;
  }
  pool.parallel_for(rows, 1, [&](int64_t b, int64_t e, int) { fn(b, e); });
}

// fn(i0, i1) over element ranges aligned to 64 elements.
template <class F>
void for_elems(ThreadPool& pool, int64_t n, F fn) {
  if (n <= 0) return;
  if (pool.size() == 1 || n < kParallelElems) {
    fn(int64_t{0}, n);
    return;
  }
  pool.parallel_for(n, 64, [&](int64_t b, int64_t e, int) { fn(b, e); });
}

}  // namespace

// ---- RopeTable ----

RopeTable::RopeTable(const RopeParams& params, int64_t rope_dim, int64_t cached_positions)
    : params_(params), rope_dim_(rope_dim) {
  inv_freq_ = ref::rope_inv_freq(params, rope_dim, &attn_factor_);
  constexpr int64_t kMaxCacheBytes = int64_t{1} << 30;
  if (cached_positions < 0 || cached_positions > kMaxCacheBytes / (rope_dim * 4))
    fail(ErrorKind::InvalidArgument, "rope",
         "cached_positions=" + std::to_string(cached_positions) + " rope_dim=" + std::to_string(rope_dim) +
             ": must be >= 0 and the table at most 1 GiB");
  cached_ = cached_positions;
  cos_sin_.resize(static_cast<size_t>(cached_ * rope_dim));
  for (int64_t p = 0; p < cached_; ++p) compute_cos_sin(p, cos_sin_.data() + p * rope_dim);
}

void RopeTable::compute_cos_sin(int64_t pos, float* out) const {
  const int64_t half = rope_dim_ / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double a = static_cast<double>(pos) * inv_freq_[i];  // in double: exact to f32
    out[i] = static_cast<float>(std::cos(a) * attn_factor_);
    out[half + i] = static_cast<float>(std::sin(a) * attn_factor_);
  }
}

// ---- ops ----

void rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t dim, float eps,
              bool plus_one, ThreadPool& pool) {
  kdetail::check_rows("rms_norm", x, y, rows, dim);
  kdetail::check_eps("rms_norm", eps);
  const OpsKernels& k = kern();
  for_rows(pool, rows, dim, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) k.rms_norm(x + r * dim, w, y + r * dim, dim, eps, plus_one);
  });
}

void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t rows,
                int64_t dim, float eps, ThreadPool& pool) {
  kdetail::check_rows("layer_norm", x, y, rows, dim);
  kdetail::check_eps("layer_norm", eps);
  const OpsKernels& k = kern();
  for_rows(pool, rows, dim, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) k.layer_norm(x + r * dim, w, b, y + r * dim, dim, eps);
  });
}

void rope(float* x, const int32_t* positions, int64_t rows, int64_t n_heads, int64_t head_dim,
          const RopeTable& table, ThreadPool& pool) {
  const int64_t rope_dim = table.rope_dim();
  kdetail::check_rope("rope", x, positions, rows, n_heads, head_dim, rope_dim);
  const int64_t half = rope_dim / 2;
  const bool interleaved = table.params().pairing == RopePairing::Interleaved;
  const OpsKernels& k = kern();
  for_rows(pool, rows, n_heads * head_dim, [&](int64_t r0, int64_t r1) {
    std::vector<float> buf(static_cast<size_t>(rope_dim));  // cos/sin of uncached positions
    for (int64_t r = r0; r < r1; ++r) {
      const float* cs = table.cos_sin(positions[r]);
      if (cs == nullptr) {
        table.compute_cos_sin(positions[r], buf.data());
        cs = buf.data();
      }
      const float* c = cs;
      const float* s = cs + half;
      for (int64_t h = 0; h < n_heads; ++h) {
        float* xh = x + (r * n_heads + h) * head_dim;
        if (!interleaved) {
          k.rotate(xh, xh + half, c, s, half);
        } else {
          for (int64_t i = 0; i < half; ++i) {
            const float a = xh[2 * i], b = xh[2 * i + 1];
            xh[2 * i] = a * c[i] - b * s[i];
            xh[2 * i + 1] = b * c[i] + a * s[i];
          }
        }
      }
    }
  });
}

void rope(float* x, const int32_t* positions, int64_t rows, int64_t n_heads, int64_t head_dim,
          int64_t rope_dim, const RopeParams& params, ThreadPool& pool) {
  kdetail::check_rope("rope", x, positions, rows, n_heads, head_dim, rope_dim);
  rope(x, positions, rows, n_heads, head_dim, RopeTable(params, rope_dim), pool);
}

void softmax(float* x, int64_t rows, int64_t n, ThreadPool& pool) {
  kdetail::check_rows("softmax", x, x, rows, n);
  const OpsKernels& k = kern();
  for_rows(pool, rows, n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) k.softmax(x + r * n, n);
  });
}

#define PTN_UNARY_OP(name)                                                              \
  void name(const float* x, float* y, int64_t n, ThreadPool& pool) {                    \
    kdetail::check_n(#name, n, x, y, y);                                                \
    const OpsKernels& k = kern();                                                       \
    for_elems(pool, n, [&](int64_t b, int64_t e) { k.name(x + b, y + b, e - b); });     \
  }
#define PTN_BINARY_OP(name)                                                                 \
  void name(const float* a, const float* b, float* out, int64_t n, ThreadPool& pool) {      \
    kdetail::check_n(#name, n, a, b, out);                                                  \
    const OpsKernels& k = kern();                                                           \
    for_elems(pool, n, [&](int64_t i0, int64_t i1) { k.name(a + i0, b + i0, out + i0, i1 - i0); }); \
  }

PTN_UNARY_OP(silu)
PTN_UNARY_OP(gelu_tanh)
PTN_UNARY_OP(gelu_erf)
PTN_BINARY_OP(swiglu)
PTN_BINARY_OP(geglu)
PTN_BINARY_OP(geglu_erf)
PTN_BINARY_OP(add)
PTN_BINARY_OP(mul)

#undef PTN_UNARY_OP
#undef PTN_BINARY_OP

void scale(const float* x, float s, float* out, int64_t n, ThreadPool& pool) {
  kdetail::check_n("scale", n, x, out, out);
  const OpsKernels& k = kern();
  for_elems(pool, n, [&](int64_t b, int64_t e) { k.scale(x + b, s, out + b, e - b); });
}

void softcap(float* x, int64_t n, float cap, ThreadPool& pool) {
  kdetail::check_n("softcap", n, x, x, x);
  if (!std::isfinite(cap) || cap <= 0)
    fail(ErrorKind::InvalidArgument, "softcap", "cap=" + std::to_string(cap) + ": must be finite and > 0");
  const OpsKernels& k = kern();
  for_elems(pool, n, [&](int64_t b, int64_t e) { k.softcap(x + b, e - b, cap); });
}

void embedding(const void* table, DType type, int64_t vocab, int64_t dim, const int32_t* ids,
               int64_t n, float* out, ThreadPool& pool) {
  kdetail::check_embedding("embedding", table, type, vocab, dim, ids, n, out);
  for (int64_t t = 0; t < n; ++t) {  // all ids first: a bad one leaves out untouched
    if (ids[t] < 0 || ids[t] >= vocab)
      fail(ErrorKind::InvalidArgument, "embedding",
           "token id " + std::to_string(ids[t]) + " at index " + std::to_string(t) +
               " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
  }
  const size_t rb = row_bytes(type, dim, "embedding");
  for_rows(pool, n, dim, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const auto* row = static_cast<const uint8_t*>(table) + static_cast<size_t>(ids[t]) * rb;
      dequantize_row(type, row, out + t * dim, dim);
    }
  });
}

}  // namespace ptn
