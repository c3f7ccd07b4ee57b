// matmul dispatcher: validates, quantizes the activations once (quantized weight types), then
// splits the rows of W over the pool and runs the kernels of the current SIMD level.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

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

// (X16: every level but AVX-512, and AVX-512's panels for the 32-column types; P32: every level
// but AVX-512 with BF16.) The threads split rows at multiples of 32; a matrix has a multiple of
// 16 or 32 rows, so a last group may hold 16.
void deinterleaved_range(RangeFn range, const WeightView& w, const float* x, const QuantActs& qa, int64_t m, int64_t n0,
                         int64_t n1, float* y) {
  const size_t rb = row_bytes(w.type, w.cols);
  constexpr int64_t kGroup = 32;
  thread_local std::vector<uint8_t> rows;
  thread_local std::vector<float> yt;
  rows.resize(rb * kGroup);
  yt.resize(static_cast<size_t>(m * kGroup));
  for (int64_t g0 = n0; g0 < n1; g0 += kGroup) {
    const int64_t g = std::min(kGroup, n1 - g0);
    for (int64_t r = 0; r < g; ++r) deinterleave_row(w, g0 + r, rows.data() + r * rb);
    const WeightView t{w.type, g, w.cols, rows.data(), rb};
    range(t, x, qa, m, 0, g, yt.data());
    for (int64_t i = 0; i < m; ++i) std::memcpy(y + i * w.rows + g0, yt.data() + i * g, g * sizeof(float));
  }
}

}  // namespace mm

namespace {

using QuantizeFn = void (*)(const float*, int64_t, int64_t, mm::QuantActs&);
using mm::RangeFn;

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

void run_range(const LevelFns& fns, const WeightView& w, const float* x, const mm::QuantActs& qa, int64_t m, int64_t n0,
               int64_t n1, float* y) {
#if defined(__x86_64__)
  const bool avx512 = fns.range == mm::matmul_range_avx512;
#else
  const bool avx512 = false;
#endif
  if ((w.layout == WeightLayout::X16 && !avx512) || (w.layout == WeightLayout::P32 && !(avx512 && simd_has_bf16())))
    return mm::deinterleaved_range(fns.range, w, x, qa, m, n0, n1, y);
  fns.range(w, x, qa, m, n0, n1, y);
}

// The activation format weights of type t want: 0 float rows (nothing to prepare), 1 int8
// groups (quantized types), 2 bf16 pairs (AVX-512 with BF16 dot products, from enough rows).
int acts_format(DType t, int64_t m, QuantizeFn quantize) {
#if defined(__x86_64__)
  if (quantize == mm::quantize_acts_avx512 && mm::avx512_uses_bf16_pairs(t, m)) return 2;
#else
  (void)m;
  (void)quantize;
#endif
  return traits(t).quantized ? 1 : 0;
}

// Bytes of scratch the activations x [m, k] take in that format (each part 64-byte aligned).
size_t acts_bytes(DType t, int64_t m, int64_t k, int format) {
  if (format == 2) return mm::align64(static_cast<size_t>(m * ((k + 1) / 2)) * 4);
  if (format == 0) return 0;
  const int64_t groups = k / mm::act_group(t);
  return mm::align64(static_cast<size_t>(m * k)) + mm::align64(static_cast<size_t>(m * groups) * 4) +
         mm::align64(static_cast<size_t>(m * (k / 16)) * 4) + 2 * mm::align64(static_cast<size_t>(m * (k / 32)) * 4) +
         mm::align64(static_cast<size_t>(m * (k / 32)) * 2);
}

// Lays out the activation views in p (acts_bytes(t, m, k, format) bytes) without filling them.
mm::QuantActs acts_view(DType t, int64_t m, int64_t k, int format, uint8_t* p) {
  mm::QuantActs qa;
  if (format == 0) return qa;
  qa.m = m;
  qa.k = k;
  if (format == 2) {
    qa.xb = reinterpret_cast<uint32_t*>(p);
    return qa;
  }
  qa.group = mm::act_group(t);
  const size_t sz_q = mm::align64(static_cast<size_t>(m * k));
  const size_t sz_d = mm::align64(static_cast<size_t>(m * qa.groups()) * 4);
  const size_t sz_s16 = mm::align64(static_cast<size_t>(m * (k / 16)) * 4);
  const size_t sz_s32 = mm::align64(static_cast<size_t>(m * (k / 32)) * 4);
  qa.q = reinterpret_cast<int8_t*>(p);
  qa.d = reinterpret_cast<float*>(p + sz_q);
  qa.s16 = reinterpret_cast<int32_t*>(p + sz_q + sz_d);
  qa.s32 = reinterpret_cast<int32_t*>(p + sz_q + sz_d + sz_s16);
  qa.fs32 = reinterpret_cast<float*>(p + sz_q + sz_d + sz_s16 + sz_s32);
  qa.h32 = reinterpret_cast<int16_t*>(p + sz_q + sz_d + sz_s16 + 2 * sz_s32);
  return qa;
}

// Fills rows [r0, r1) of a view from acts_view.
void fill_acts(const float* x, int64_t r0, int64_t r1, int format, QuantizeFn quantize, mm::QuantActs& qa) {
#if defined(__x86_64__)
  if (format == 2) return mm::bf16_pairs_avx512(x, r0, r1, qa.k, qa.xb);
#endif
  if (format == 1) quantize(x, r0, r1, qa);
}

// Quantizes x [m, k] for weights of type t into thread-local scratch (quantized types, and the
// bf16 pairs of BF16 weights on AVX-512 with BF16; qa stays empty for other float weights). The
// rows are split over the threads only when there is enough work to pay for the hand-off.
mm::QuantActs quantize_acts(DType t, const float* x, int64_t m, int64_t k, QuantizeFn quantize, ThreadPool& pool) {
  thread_local mm::Scratch scratch;
  const int format = acts_format(t, m, quantize);
  if (format == 0) return {};
  mm::QuantActs qa = acts_view(t, m, k, format, scratch.get(acts_bytes(t, m, k, format)));
  if (m * k >= (int64_t{1} << 16) && pool.size() > 1)
    pool.parallel_for(m, 1, [&](int64_t r0, int64_t r1, int) { fill_acts(x, r0, r1, format, quantize, qa); });
  else
    fill_acts(x, 0, m, format, quantize, qa);
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

void matmul_jobs(const MatmulJob* jobs, int count, ThreadPool& pool) {
  if (count < 0) fail(ErrorKind::InvalidArgument, "matmul_jobs", "negative job count " + std::to_string(count));
  double work = 0;  // MACs
  for (int i = 0; i < count; ++i) {
    const MatmulJob& j = jobs[i];
    matmul_check("matmul_jobs", j.w, j.x, j.m, j.y);
    work += static_cast<double>(j.w.rows) * static_cast<double>(j.w.cols) * static_cast<double>(j.m);
  }
  if (count == 0) return;
  if (count == 1 || work < 32768.0 || pool.size() == 1) {
    for (int i = 0; i < count; ++i) matmul(jobs[i].w, jobs[i].x, jobs[i].m, jobs[i].y, pool);
    return;
  }
  const LevelFns fns = level_fns();
  // Activations: one prepared copy per distinct (x, m, K, format); jobs that read the same rows
  // in the same format (gate and up of one input) share it.
  // (thread_local storage named inside a pool job would be the worker's own: bind it here.)
  struct JobsScratch {
    std::vector<int> fmt, src;
    std::vector<size_t> off;
    std::vector<mm::QuantActs> qas;
    mm::Scratch mem;
  };
  thread_local JobsScratch tls;
  JobsScratch& js = tls;
  std::vector<int>& fmt = js.fmt;
  std::vector<int>& src = js.src;
  std::vector<size_t>& off = js.off;
  std::vector<mm::QuantActs>& qas = js.qas;
  const size_t n = static_cast<size_t>(count);
  fmt.assign(n, 0);
  src.assign(n, -1);
  off.assign(n, 0);
  size_t total = 0;
  for (int i = 0; i < count; ++i) {
    const MatmulJob& j = jobs[i];
    fmt[i] = j.m > 0 && j.w.cols > 0 ? acts_format(j.w.type, j.m, fns.quantize) : 0;
    if (fmt[i] == 0) continue;
    for (int e = 0; e < i && src[i] < 0; ++e)
      if (src[e] == e && jobs[e].x == j.x && jobs[e].m == j.m && jobs[e].w.cols == j.w.cols && fmt[e] == fmt[i] &&
          (fmt[i] != 1 || mm::act_group(jobs[e].w.type) == mm::act_group(j.w.type)))
        src[i] = e;
    if (src[i] >= 0) continue;
    src[i] = i;
    off[i] = total;
    total += acts_bytes(j.w.type, j.m, j.w.cols, fmt[i]);
  }
  uint8_t* mem = js.mem.get(total);
  qas.assign(n, mm::QuantActs{});
  int64_t rows_to_fill = 0;
  for (int i = 0; i < count; ++i)
    if (fmt[i] != 0 && src[i] == i) {
      qas[i] = acts_view(jobs[i].w.type, jobs[i].m, jobs[i].w.cols, fmt[i], mem + off[i]);
      rows_to_fill += jobs[i].m * jobs[i].w.cols;
    }
  auto fill = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      if (fmt[i] != 0 && src[i] == i) fill_acts(jobs[i].x, 0, jobs[i].m, fmt[i], fns.quantize, qas[i]);
  };
  if (rows_to_fill >= (int64_t{1} << 16)) pool.parallel_for(count, 1, [&](int64_t i0, int64_t i1, int) { fill(i0, i1); });
  else fill(0, count);
  for (int i = 0; i < count; ++i)
    if (fmt[i] != 0 && src[i] != i) qas[i] = qas[src[i]];

  // The rows of all the matrices, end to end, are split over the threads by cost: weight bytes
  // times the passes over them (the row kernels take activation rows 4 at a time). Each boundary
  // falls on a multiple of 32 rows within its matrix (the widest interleaved group).
  auto row_cost = [&](int i) {
    const MatmulJob& j = jobs[i];
    return static_cast<double>(row_bytes(j.w.type, j.w.cols)) * static_cast<double>((j.m + 3) / 4);
  };
  double cost = 0;
  for (int i = 0; i < count; ++i) cost += row_cost(i) * static_cast<double>(jobs[i].w.rows);
  struct Pos {
    int i;
    int64_t r;
  };
  auto at = [&](double c) -> Pos {
    for (int i = 0; i < count; ++i) {
      const double rc = row_cost(i), all = rc * static_cast<double>(jobs[i].w.rows);
      if (c < all) {
        const int64_t r = rc > 0 ? (static_cast<int64_t>(c / rc) + 31) / 32 * 32 : jobs[i].w.rows;
        return r >= jobs[i].w.rows ? Pos{i + 1, 0} : Pos{i, r};
      }
      c -= all;
    }
    return Pos{count, 0};
  };
  pool.run([&](int ti, int nt) {
    const Pos b = ti == 0 ? Pos{0, 0} : at(cost * ti / nt);
    const Pos e = ti + 1 == nt ? Pos{count, 0} : at(cost * (ti + 1) / nt);
    for (int i = b.i; i < count && i <= e.i; ++i) {
      const MatmulJob& j = jobs[i];
      const int64_t r0 = i == b.i ? b.r : 0, r1 = i == e.i ? e.r : j.w.rows;
      if (r0 >= r1 || j.m == 0) continue;
      if (j.w.cols == 0) {
        for (int64_t t = 0; t < j.m; ++t) std::memset(j.y + t * j.w.rows + r0, 0, static_cast<size_t>(r1 - r0) * sizeof(float));
        continue;
      }
      run_range(fns, j.w, j.x, qas[i], j.m, r0, r1, j.y);
    }
  });
}

void matmul_multi(const WeightView* w, float* const* y, int count, const float* x, int64_t m, ThreadPool& pool) {
  if (count < 0 || count > kMatmulMultiMax)
    fail(ErrorKind::InvalidArgument, "matmul_multi",
         "count must be 0.." + std::to_string(kMatmulMultiMax) + ", got " + std::to_string(count));
  for (int i = 1; i < count; ++i)
    if (w[i].cols != w[0].cols)
      fail(ErrorKind::InvalidArgument, "matmul_multi",
           "weight " + std::to_string(i) + " has K = " + std::to_string(w[i].cols) + ", weight 0 has " +
               std::to_string(w[0].cols));
  MatmulJob jobs[kMatmulMultiMax];
  for (int i = 0; i < count; ++i) jobs[i] = {w[i], x, m, y[i]};
  matmul_jobs(jobs, count, pool);
}

}  // namespace ptn
