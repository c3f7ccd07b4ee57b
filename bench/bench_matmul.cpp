// matmul benchmarks on 2 threads.
//
//   Decode/<type>/<N>x<K>    m = 1: GB/s of weight bytes streamed. Several copies of W (together
//                            > 96 MB, beyond L3) are used in turn so the weights come from DRAM.
//                            Counter bw_frac = weight GB/s / the read bandwidth probe below.
//   DecodeCached/<type>/...  m = 1 on one small W (1024x2048 or 256x8192, 2M weights) that stays
//                            in cache: the kernels' compute ceiling.
//   ReadBandwidth            STREAM-like read probe: both threads sum disjoint halves of 256 MB.
//   Prefill/<type>/<m>       m = 4 / 8 / 16 / 64 / 512 rows on W[2048, 4096]: GOP/s (2 ops per multiply-add)
//                            and peak_frac, the fraction of the relevant peak measured in this
//                            run by the Peak* probes (int8 VNNI dot for the quantized types, f32
//                            FMA for F32/F16, BF16 dot for BF16 on machines that have it).
//
// The machine may be shared (other builds running), so every rate is per CPU time, not wall
// time: work / (CPU seconds of all our threads) * kThreads, i.e. the rate of kThreads cores
// that had nothing else to do. The probes are measured the same way, right before each
// benchmark, so the ratios compare like with like. Thread-pool spinning counts as CPU time,
// which makes the matmul figures conservative. The Time column is still wall time. Run with
// --benchmark_repetitions=5 --benchmark_report_aggregates_only=true and read the "_max" rows
// for the least disturbed figures.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <map>
#include <string>
#include <tuple>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu.h"
#include "core/quant.h"
#include "core/threadpool.h"
#include "kernels/matmul.h"

namespace {

using namespace ptn;

// Threads of the benchmark pool: 2, or PTN_BENCH_THREADS.
const int kThreads = [] {
  const char* e = std::getenv("PTN_BENCH_THREADS");
  const int n = e ? std::atoi(e) : 2;
  return n >= 1 && n <= 256 ? n : 2;
}();

ThreadPool& pool();

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Runs fn(ti, nt) on every pool thread; returns the CPU seconds all threads spent in it.
template <class F>
double run_cpu_timed(F&& fn) {
  std::atomic<double> cpu{0};
  pool().run([&](int ti, int nt) {
    const double t0 = thread_cpu_seconds();
    fn(ti, nt);
    const double dt = thread_cpu_seconds() - t0;
    double cur = cpu.load();
    while (!cpu.compare_exchange_weak(cur, cur + dt)) {
    }
  });
  return cpu.load();
}

ThreadPool& pool() {
  static ThreadPool p(kThreads);
  return p;
}

// ---- probes ---------------------------------------------------------------------------------

__attribute__((target("avx512f"))) uint64_t read_sum(const uint8_t* p, size_t bytes) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 256 <= bytes; i += 256) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 128));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 192));
  }
  return _mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
}

uint8_t* big_buffer(size_t bytes) {
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(4096, bytes));
  for (size_t i = 0; i < bytes; i += 64) p[i] = static_cast<uint8_t>(i >> 6);
  return p;
}

// Read bandwidth of `kThreads` threads, GB/s, best of 5 passes over 256 MB. Measured afresh
// right before each benchmark that reports a ratio to it, so both see the same machine load.
double measure_read_bw() {
  {
    const size_t bytes = size_t{256} << 20;
    static uint8_t* buf = big_buffer(bytes);
    std::atomic<uint64_t> sink{0};
    double best = 0;
    for (int rep = 0; rep < 5; ++rep) {
      const double cpu = run_cpu_timed([&](int ti, int nt) {
        const size_t per = bytes / nt;
        sink += read_sum(buf + per * ti, per);
      });
      best = std::max(best, static_cast<double>(bytes) * kThreads / cpu / 1e9);
    }
    benchmark::DoNotOptimize(sink.load());
    return best;
  }
}

// Peak probes: independent chains of one instruction on every thread; returns G ops/s.
__attribute__((target("avx512f,avx512vnni"))) double vnni_loop(int64_t iters) {
  __m512i acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(2);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  __m512i s = acc[0];
#pragma GCC unroll 12
  for (int i = 1; i < 12; ++i) s = _mm512_add_epi32(s, acc[i]);
  return static_cast<double>(_mm512_reduce_add_epi32(s));
}
__attribute__((target("avx512f"))) double fma_loop(int64_t iters) {
  __m512 acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(1.0000001f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
#pragma GCC unroll 12
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}
__attribute__((target("avx512f,avx512bf16"))) double bf16_loop(int64_t iters) {
  __m512 acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3400);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
#pragma GCC unroll 12
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

enum class Peak { Int8, F32, BF16 };

// G ops/s of kThreads threads (a multiply-add counts 2 ops), best of 3 runs of ~20 ms; 0 if
// the CPU lacks the instruction. Measured afresh before each benchmark that reports a fraction.
double measure_peak(Peak which) {
  const CpuFeatures& f = cpu_features();
  const bool ok = which == Peak::Int8 ? f.avx512vnni : which == Peak::F32 ? f.avx512f : f.avx512bf16;
  if (!ok) return 0;
  const double ops_per_instr = which == Peak::Int8 ? 128 : which == Peak::F32 ? 32 : 64;
  const int64_t iters = 5'000'000;
  std::atomic<uint64_t> sink{0};
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const double cpu = run_cpu_timed([&](int, int) {
      const double v = which == Peak::Int8 ? vnni_loop(iters) : which == Peak::F32 ? fma_loop(iters) : bf16_loop(iters);
      sink += static_cast<uint64_t>(v) & 1;
    });
    // kThreads threads each did 12 * iters instructions in `cpu` seconds in total.
    best = std::max(best, 12.0 * iters * ops_per_instr * kThreads * kThreads / cpu / 1e9);
  }
  benchmark::DoNotOptimize(sink.load());
  return best;
}

// ---- matrices -------------------------------------------------------------------------------

struct Weights {
  std::vector<std::vector<uint8_t>> copies;
  size_t stride = 0;
};

// `min_total` bytes worth of copies of one random N x K matrix of type t (interleaved 16 rows
// at a time when x16, as the executor runs Q4_K, Q8_0, Q4_0, IQ4_NL and MXFP4 on AVX-512).
const Weights& weights(DType t, int64_t n, int64_t k, size_t min_total, bool x16 = false) {
  static std::map<std::tuple<int, int64_t, int64_t, size_t, bool>, Weights> cache;
  auto key = std::make_tuple(static_cast<int>(t), n, k, min_total, x16);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Weights w;
  w.stride = row_bytes(t, k);
  std::vector<float> src(static_cast<size_t>(n * k));
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.f, 1.f);
  for (auto& v : src) v = dist(rng);
  std::vector<uint8_t> one(w.stride * n);
  quantize_matrix(t, src.data(), one.data(), n, k);
  if (x16) {
    std::vector<uint8_t> rows = one;
    interleave_rows({t, n, k, rows.data(), w.stride}, one.data());
  }
  const size_t copies = std::max<size_t>(1, (min_total + one.size() - 1) / one.size());
  for (size_t i = 0; i < copies; ++i) w.copies.push_back(one);
  return cache.emplace(key, std::move(w)).first->second;
}

std::vector<float> activations(int64_t m, int64_t k) {
  std::vector<float> x(static_cast<size_t>(m * k));
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.f, 1.f);
  for (auto& v : x) v = dist(rng);
  return x;
}

const DType kTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,  DType::Q5_0,
                        DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q2_K, DType::Q3_K, DType::MXFP4,
                        DType::IQ4_XS};

void BM_ReadBandwidth(benchmark::State& state) {
  const size_t bytes = size_t{256} << 20;
  static uint8_t* buf = big_buffer(bytes);
  std::atomic<uint64_t> sink{0};
  for (auto _ : state) {
    pool().run([&](int ti, int nt) {
      const size_t per = bytes / nt;
      sink += read_sum(buf + per * ti, per);
    });
  }
  state.counters["GBps"] = benchmark::Counter(static_cast<double>(bytes) * kThreads * state.iterations() / 1e9,
                                              benchmark::Counter::kIsRate);
}

void BM_Decode(benchmark::State& state, DType t, int64_t n, int64_t k, bool from_dram, bool x16) {
  const Weights& w = weights(t, n, k, from_dram ? size_t{96} << 20 : 0, x16);
  const double bw = measure_read_bw();
  const std::vector<float> x = activations(1, k);
  std::vector<float> y(static_cast<size_t>(n));
  size_t i = 0;
  for (auto _ : state) {
    const WeightView v{t, n, k, w.copies[i].data(), w.stride, x16 ? WeightLayout::X16 : WeightLayout::Rows};
    matmul(v, x.data(), 1, y.data(), pool());
    benchmark::DoNotOptimize(y.data());
    if (++i == w.copies.size()) i = 0;
  }
  const double bytes = static_cast<double>(w.stride) * n * state.iterations() * kThreads;
  state.counters["GBps"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["read_bw_GBps"] = bw;
  // bw_frac is filled in after the run from GBps (a rate) and the probe.
  state.counters["bw_frac"] = benchmark::Counter(bytes / 1e9 / bw, benchmark::Counter::kIsRate);
}

void BM_Prefill(benchmark::State& state, DType t, int64_t m, bool x16) {
  const int64_t n = 2048, k = 4096;
  const Peak which = (t == DType::F32 || t == DType::F16) ? Peak::F32
                     : t == DType::BF16                   ? (simd_has_bf16() ? Peak::BF16 : Peak::F32)
                                                          : Peak::Int8;
  const Weights& w = weights(t, n, k, 0, x16);
  const double peak = measure_peak(which);
  const std::vector<float> x = activations(m, k);
  std::vector<float> y(static_cast<size_t>(m * n));
  const WeightView v{t, n, k, w.copies[0].data(), w.stride, x16 ? WeightLayout::X16 : WeightLayout::Rows};
  for (auto _ : state) {
    matmul(v, x.data(), m, y.data(), pool());
    benchmark::DoNotOptimize(y.data());
  }
  const double gops = 2.0 * m * n * k * state.iterations() * kThreads / 1e9;
  state.counters["GOPps"] = benchmark::Counter(gops, benchmark::Counter::kIsRate);
  state.counters["peak_GOPps"] = peak;
  state.counters["peak_frac"] = benchmark::Counter(peak > 0 ? gops / peak : 0, benchmark::Counter::kIsRate);
}

void BM_Peak(benchmark::State& state, Peak which) {
  double v = 0;
  for (auto _ : state) v = measure_peak(which);
  state.counters["GOPps"] = v;
}

// With --benchmark_repetitions=N, the "_max" aggregate row holds each counter's best
// repetition (on a shared machine the best one is the least disturbed).
double max_of(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

int register_all() {
  benchmark::RegisterBenchmark("ReadBandwidth", BM_ReadBandwidth)->MeasureProcessCPUTime()->ComputeStatistics("max", max_of)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("PeakInt8Vnni", BM_Peak, Peak::Int8)->Iterations(1);
  benchmark::RegisterBenchmark("PeakF32Fma", BM_Peak, Peak::F32)->Iterations(1);
  benchmark::RegisterBenchmark("PeakBF16Dot", BM_Peak, Peak::BF16)->Iterations(1);
  // Every type in its row layout, and Q4_K / Q8_0 / Q4_0 / MXFP4 interleaved 16 rows at a time ("q4_k_x16").
  std::vector<std::pair<DType, bool>> variants;
  for (DType t : kTypes) {
    variants.emplace_back(t, false);
    if (t == DType::Q4_K || t == DType::Q8_0 || t == DType::MXFP4 || t == DType::Q4_0) variants.emplace_back(t, true);
  }
  auto label = [](DType t, bool x16) { return std::string(dtype_name(t)) + (x16 ? "_x16" : ""); };
  for (auto [t, x16] : variants)
    for (auto [n, k] : {std::pair<int64_t, int64_t>{2048, 8192}, {8192, 2048}})
      benchmark::RegisterBenchmark(
          ("Decode/" + label(t, x16) + "/" + std::to_string(n) + "x" + std::to_string(k)).c_str(),
          BM_Decode, t, n, k, true, x16)
          ->MeasureProcessCPUTime()->ComputeStatistics("max", max_of)
          ->Unit(benchmark::kMicrosecond);
  // The same with one 1024 x 2048 matrix that stays in L2/L3: the kernels' compute ceiling.
  for (auto [t, x16] : variants)
    for (auto [n, k] : {std::pair<int64_t, int64_t>{1024, 2048}, {256, 8192}})
      benchmark::RegisterBenchmark(
          ("DecodeCached/" + label(t, x16) + "/" + std::to_string(n) + "x" + std::to_string(k)).c_str(),
          BM_Decode, t, n, k, false, x16)
          ->MeasureProcessCPUTime()->ComputeStatistics("max", max_of)
          ->Unit(benchmark::kMicrosecond);
  for (auto [t, x16] : variants)
    for (int64_t m : {4, 8, 16, 64, 512})
      benchmark::RegisterBenchmark(("Prefill/" + label(t, x16) + "/" + std::to_string(m)).c_str(),
                                   BM_Prefill, t, m, x16)
          ->MeasureProcessCPUTime()->ComputeStatistics("max", max_of)
          ->Unit(benchmark::kMillisecond);
  return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
