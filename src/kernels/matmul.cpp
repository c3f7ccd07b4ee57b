// matmul dispatcher: validates, quantizes the activations once (quantized weight types), then
// splits the rows of W over the pool and runs the kernels of the current SIMD level.
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/cpu.h"
#include "core/error.h"
#include "kernels/matmul_generic.h"

namespace ptn {

namespace mm {

void quantize_acts_scalar(const float* x, int64_t r0, int64_t r1, QuantActs& qa) {
  generic_quantize_acts(x, r0, r1, qa);
}

void matmul_range_scalar(const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0, int64_t n1,
                         float* y) {
  generic_matmul_range(w, x, qa, m, n0, n1, y);
}

namespace {

// Grow-only 64-byte aligned scratch owned by the calling thread.
struct Scratch {
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> mem;
  size_t cap = 0;
  uint8_t* get(size_t bytes) {
    if (bytes > cap) {
      const size_t want = (bytes + 4095) / 4096 * 4096;
      void* p = std::aligned_alloc(64, want);
      if (!p) fail(ErrorKind::Capacity, "matmul", "out of memory for " + std::to_string(want) + " scratch bytes");
      mem.reset(static_cast<uint8_t*>(p));
      cap = want;
    }
    return mem.get();
  }
};

size_t align64(size_t n) { return (n + 63) / 64 * 64; }

}  // namespace
}  // namespace mm

namespace {

using QuantizeFn = void (*)(const float*, int64_t, int64_t, mm::QuantActs&);
using RangeFn = void (*)(const WeightView&, const float*, const mm::QuantActs&, int64_t, int64_t, int64_t, float*);

struct LevelFns {
  QuantizeFn quantize;
  RangeFn range;
};

LevelFns level_fns() {
  const SimdLevel level = simd_level();
#if defined(__x86_64__)
  if (level == SimdLevel::AVX512) return {mm::quantize_acts_avx512, mm::matmul_range_avx512};
  if (level == SimdLevel::AVX2) return {mm::quantize_acts_avx2, mm::matmul_range_avx2};
  if (level == SimdLevel::AVX2VNNI) return {mm::quantize_acts_avx2, mm::matmul_range_avx2vnni};
#elif defined(__aarch64__)
  if (level == SimdLevel::NeonI8mm) return {mm::quantize_acts_neon, mm::matmul_range_neon_i8mm};
  if (level == SimdLevel::NeonDotprod) return {mm::quantize_acts_neon, mm::matmul_range_neon_dotprod};
  if (level == SimdLevel::Neon) return {mm::quantize_acts_neon, mm::matmul_range_neon};
#endif
  return {mm::quantize_acts_scalar, mm::matmul_range_scalar};
}

// Interleaved weights at a level without kernels for them (X16: all but AVX-512; P32: all but
// AVX-512 with BF16): 16 or 32 rows at a time back in their blocks, multiplied by the level's
// row kernels. n0 and n1 are multiples of 32 or the end (the threads split rows at multiples of
// 32; a matrix has a multiple of 16 or 32 rows).
void deinterleaved_range(RangeFn range, const WeightView& w, const float* x, const mm::QuantActs& qa, int64_t m,
                         int64_t n0, int64_t n1, float* y) {
  const size_t rb = row_bytes(w.type, w.cols);
  const int64_t g = w.layout == WeightLayout::P32 ? kP32Rows : kX16Rows;
  thread_local std::vector<uint8_t> rows;
  thread_local std::vector<float> yt;
  rows.resize(rb * g);
  yt.resize(static_cast<size_t>(m * g));
  for (int64_t g0 = n0; g0 < n1; g0 += g) {
    for (int64_t r = 0; r < g; ++r) deinterleave_row(w, g0 + r, rows.data() + r * rb);
    const WeightView t{w.type, g, w.cols, rows.data(), rb};
    range(t, x, qa, m, 0, g, yt.data());
    for (int64_t i = 0; i < m; ++i) std::memcpy(y + i * w.rows + g0, yt.data() + i * g, g * sizeof(float));
  }
}

void run_range(const LevelFns& fns, const WeightView& w, const float* x, const mm::QuantActs& qa, int64_t m, int64_t n0,
               int64_t n1, float* y) {
#if defined(__x86_64__)
  const bool avx512 = fns.range == mm::matmul_range_avx512;
#else
  const bool avx512 = false;
#endif
  if ((w.layout == WeightLayout::X16 && !avx512) || (w.layout == WeightLayout::P32 && !(avx512 && simd_has_bf16())))
    return deinterleaved_range(fns.range, w, x, qa, m, n0, n1, y);
  fns.range(w, x, qa, m, n0, n1, y);
}

// Quantizes x [m, k] for weights of type t into thread-local scratch (quantized types only; qa
// stays empty for float weights).
mm::QuantActs quantize_acts(DType t, const float* x, int64_t m, int64_t k, QuantizeFn quantize, ThreadPool& pool) {
  mm::QuantActs qa;
  thread_local mm::Scratch scratch;
#if defined(__x86_64__)
  if (quantize == mm::quantize_acts_avx512 && mm::avx512_uses_bf16_pairs(t, m)) {
    // BF16 weights: the activations as bf16 pairs, once for every thread.
    qa.m = m;
    qa.k = k;
    qa.xb = reinterpret_cast<uint32_t*>(scratch.get(static_cast<size_t>(m * ((k + 1) / 2)) * 4));
    if (m * k >= (int64_t{1} << 16) && pool.size() > 1)
      pool.parallel_for(m, 1, [&](int64_t r0, int64_t r1, int) { mm::bf16_pairs_avx512(x, r0, r1, k, qa.xb); });
    else
      mm::bf16_pairs_avx512(x, 0, m, k, qa.xb);
    return qa;
  }
#endif
  if (!traits(t).quantized) return qa;
  qa.m = m;
  qa.k = k;
  qa.group = mm::act_group(t);
  const size_t sz_q = mm::align64(static_cast<size_t>(m * k));
  const size_t sz_d = mm::align64(static_cast<size_t>(m * qa.groups()) * 4);
  const size_t sz_s16 = mm::align64(static_cast<size_t>(m * (k / 16)) * 4);
  const size_t sz_s32 = mm::align64(static_cast<size_t>(m * (k / 32)) * 4);
  const size_t sz_h32 = mm::align64(static_cast<size_t>(m * (k / 32)) * 2);
  uint8_t* p = scratch.get(sz_q + sz_d + sz_s16 + 2 * sz_s32 + sz_h32);
  qa.q = reinterpret_cast<int8_t*>(p);
  qa.d = reinterpret_cast<float*>(p + sz_q);
  qa.s16 = reinterpret_cast<int32_t*>(p + sz_q + sz_d);
  qa.s32 = reinterpret_cast<int32_t*>(p + sz_q + sz_d + sz_s16);
  qa.fs32 = reinterpret_cast<float*>(p + sz_q + sz_d + sz_s16 + sz_s32);
  qa.h32 = reinterpret_cast<int16_t*>(p + sz_q + sz_d + sz_s16 + 2 * sz_s32);
  // Split the rows over the threads only when there is enough work to pay for the hand-off.
  if (m * k >= (int64_t{1} << 16) && pool.size() > 1)
    pool.parallel_for(m, 1, [&](int64_t r0, int64_t r1, int) { quantize(x, r0, r1, qa); });
  else
    quantize(x, 0, m, qa);
  return qa;
}

}  // namespace

void matmul(const WeightView& w, const float* x, int64_t m, float* y, ThreadPool& pool) {
  matmul_check("matmul", w, x, m, y);
  const int64_t n = w.rows, k = w.cols;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::memset(y, 0, static_cast<size_t>(m * n) * sizeof(float));
    return;
  }
  const LevelFns fns = level_fns();
  const mm::QuantActs qa = quantize_acts(w.type, x, m, k, fns.quantize, pool);
  // Rows of W in multiples of 32 (the AVX-512 panel width) so every thread streams its own rows.
  const double work = static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(m);  // MACs
  if (work < 32768.0 || pool.size() == 1)
    run_range(fns, w, x, qa, m, 0, n, y);
  else
    pool.parallel_for(n, 32, [&](int64_t n0, int64_t n1, int) { run_range(fns, w, x, qa, m, n0, n1, y); });
}

void matmul_multi(const WeightView* w, float* const* y, int count, const float* x, int64_t m, ThreadPool& pool) {
  if (count < 0 || count > kMatmulMultiMax)
    fail(ErrorKind::InvalidArgument, "matmul_multi",
         "count must be 0.." + std::to_string(kMatmulMultiMax) + ", got " + std::to_string(count));
  if (count == 0) return;
  for (int i = 0; i < count; ++i) {
    matmul_check("matmul_multi", w[i], x, m, y[i]);
    if (w[i].cols != w[0].cols)
      fail(ErrorKind::InvalidArgument, "matmul_multi",
           "weight " + std::to_string(i) + " has K = " + std::to_string(w[i].cols) + ", weight 0 has " +
               std::to_string(w[0].cols));
  }
  // One activation format for all: every weight float, or every weight quantized with the same
  // activation group. Otherwise (and with nothing to split) the products run one by one.
  bool shared = true;
  for (int i = 1; i < count; ++i)
    shared = shared && traits(w[i].type).quantized == traits(w[0].type).quantized &&
             (!traits(w[0].type).quantized || mm::act_group(w[i].type) == mm::act_group(w[0].type));
  const int64_t k = w[0].cols;
  double work = 0, bytes = 0;  // MACs; weight bytes
  for (int i = 0; i < count; ++i) {
    work += static_cast<double>(w[i].rows) * static_cast<double>(k) * static_cast<double>(m);
    bytes += static_cast<double>(w[i].rows) * static_cast<double>(row_bytes(w[i].type, k));
  }
  if (!shared || m == 0 || k == 0 || work < 32768.0 || pool.size() == 1) {
    for (int i = 0; i < count; ++i) matmul(w[i], x, m, y[i], pool);
    return;
  }
  const LevelFns fns = level_fns();
  const mm::QuantActs qa = quantize_acts(w[0].type, x, m, k, fns.quantize, pool);
  // The rows of all the matrices, end to end, are split over the threads by weight bytes (the
  // cost of a decode step); each boundary falls on a multiple of 32 rows within its matrix.
  struct Pos {
    int i;
    int64_t r;
  };
  auto at = [&](double c) -> Pos {
    for (int i = 0; i < count; ++i) {
      const double rb = static_cast<double>(row_bytes(w[i].type, k)), total = rb * static_cast<double>(w[i].rows);
      if (c < total) {
        const int64_t r = (static_cast<int64_t>(c / rb) + 31) / 32 * 32;
        return r >= w[i].rows ? Pos{i + 1, 0} : Pos{i, r};
      }
      c -= total;
    }
    return Pos{count, 0};
  };
  pool.run([&](int ti, int nt) {
    const Pos b = ti == 0 ? Pos{0, 0} : at(bytes * ti / nt);
    const Pos e = ti + 1 == nt ? Pos{count, 0} : at(bytes * (ti + 1) / nt);
    for (int i = b.i; i < count && i <= e.i; ++i) {
      const int64_t r0 = i == b.i ? b.r : 0, r1 = i == e.i ? e.r : w[i].rows;
      if (r0 < r1) run_range(fns, w[i], x, qa, m, r0, r1, y[i]);
    }
  });
}

}  // namespace ptn
