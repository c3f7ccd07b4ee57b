// crc32c throughput (the checksum of every .ptn section): the portable slicing-by-8 version
// and the SSE4.2 one, over 64 MiB.
//   ./bench_core --benchmark_filter=Crc32c
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/crc32c.h"

namespace {

const std::vector<uint8_t>& data() {
  static const std::vector<uint8_t> d = [] {
    std::vector<uint8_t> v(64u << 20);
    std::mt19937 rng(5);
    for (auto& b : v) b = static_cast<uint8_t>(rng());
    return v;
  }();
  return d;
}

void run(benchmark::State& state, uint32_t (*fn)(uint32_t, const void*, size_t)) {
  const auto& d = data();
  uint32_t crc = 0;
  for (auto _ : state) {
    crc = fn(crc, d.data(), d.size());
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(d.size()));
}

void BM_Crc32cPortable(benchmark::State& state) { run(state, ptn::crc32c_extend_portable); }
void BM_Crc32cSse42(benchmark::State& state) {
  if (!ptn::crc32c_sse42_available()) {
    state.SkipWithError("this CPU has no SSE4.2 crc32 instruction");
    return;
  }
  run(state, ptn::crc32c_extend_sse42);
}

}  // namespace

BENCHMARK(BM_Crc32cPortable)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Crc32cSse42)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
