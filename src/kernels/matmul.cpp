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

void matmul(const WeightView& w, const float* x, int64_t m, float* y, ThreadPool& pool) {
  matmul_check("matmul", w, x, m, y);
  const int64_t n = w.rows, k = w.cols;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::memset(y, 0, static_cast<size_t>(m * n) * sizeof(float));
    return;
  }
  const SimdLevel level = simd_level();
  auto quantize = level == SimdLevel::AVX512 ? mm::quantize_acts_avx512
                  : level == SimdLevel::AVX2 ? mm::quantize_acts_avx2
                                             : mm::quantize_acts_scalar;
  auto range = level == SimdLevel::AVX512 ? mm::matmul_range_avx512
               : level == SimdLevel::AVX2 ? mm::matmul_range_avx2
                                          : mm::matmul_range_scalar;
  mm::QuantActs qa;
  if (traits(w.type).quantized) {
    thread_local mm::Scratch scratch;
    qa.m = m;
    qa.k = k;
    qa.group = mm::act_group(w.type);
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
  }
  // Rows of W in multiples of 32 (the AVX-512 panel width) so every thread streams its own rows.
  const double work = static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(m);  // MACs
  if (work < 32768.0 || pool.size() == 1)
    range(w, x, qa, m, 0, n, y);
  else
    pool.parallel_for(n, 32, [&](int64_t n0, int64_t n1, int) { range(w, x, qa, m, n0, n1, y); });
}

}  // namespace ptn
