#include "core/membw.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/tensor.h"

namespace ptn {

double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int passes) {
  const size_t n = bytes / sizeof(uint64_t);
  auto buf = aligned_buffer(n * sizeof(uint64_t));
  uint64_t* data = static_cast<uint64_t*>(buf.get());
  // Touch every page on the threads that will read it.
  pool.parallel_for(static_cast<int64_t>(n), 4096, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) data[i] = static_cast<uint64_t>(i);
  });
  std::vector<uint64_t> sinks(static_cast<size_t>(pool.size()) * 8, 0);
  double best = 0;
  for (int p = 0; p < passes; ++p) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(static_cast<int64_t>(n), 4096, [&](int64_t b, int64_t e, int ti) {
      // Four independent accumulators keep several loads in flight.
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t i = b;
      for (; i + 4 <= e; i += 4) {
        s0 += data[i];
        s1 += data[i + 1];
        s2 += data[i + 2];
        s3 += data[i + 3];
      }
      for (; i < e; ++i) s0 += data[i];
      sinks[static_cast<size_t>(ti) * 8] += s0 + s1 + s2 + s3;
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / s / 1e9);
  }
  volatile uint64_t keep = 0;
  for (uint64_t v : sinks) keep = keep + v;
  (void)keep;
  return best;
}

}  // namespace ptn
