// Non-matmul ops and attention, optimized vs reference, at every SIMD level the CPU has
// (Google Benchmark, one thread). Shapes of a Llama-3-8B-like layer: hidden 4096, 32 q heads
// over 8 kv heads of 128, FFN 14336, decode context 4096.
//   ./bench_ops --benchmark_filter=Attention
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "core/cpu.h"
#include "core/threadpool.h"
#include "kernels/attention.h"
#include "kernels/ops.h"

using namespace ptn;

namespace {

std::vector<float> rand_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

ThreadPool& one_thread() {
  static ThreadPool pool(1);
  return pool;
}

// state.range(0): SIMD level (0 scalar, 1 AVX2, 2 AVX-512); -1 = reference.
bool set_level(benchmark::State& state) {
  const int64_t l = state.range(0);
  if (l >= 0 && l > static_cast<int64_t>(detected_simd_level())) {
    state.SkipWithError("SIMD level not available on this CPU");
    return false;
  }
  set_simd_cap(l < 0 ? SimdLevel::AVX512 : static_cast<SimdLevel>(l));
  state.SetLabel(l < 0 ? "reference" : simd_level_name(static_cast<SimdLevel>(l)));
  return true;
}

void BM_RmsNorm(benchmark::State& state) {
  if (!set_level(state)) return;
  const int64_t rows = state.range(1), dim = 4096;
  auto x = rand_vec(rows * dim, 1), w = rand_vec(dim, 2), y = x;
  for (auto _ : state) {
    if (state.range(0) < 0) ref::rms_norm(x.data(), w.data(), y.data(), rows, dim, 1e-5f, false);
    else rms_norm(x.data(), w.data(), y.data(), rows, dim, 1e-5f, false, one_thread());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * rows * dim * 8);
}
BENCHMARK(BM_RmsNorm)->ArgsProduct({{-1, 0, 1, 2}, {1, 512}});

void BM_Softmax(benchmark::State& state) {
  if (!set_level(state)) return;
  const int64_t rows = 32, n = state.range(1);
  auto x0 = rand_vec(rows * n, 3), x = x0;
  for (auto _ : state) {
    if (state.range(0) < 0) ref::softmax(x.data(), rows, n);
    else softmax(x.data(), rows, n, one_thread());
    benchmark::DoNotOptimize(x.data());
  }
  state.SetItemsProcessed(state.iterations() * rows * n);
}
BENCHMARK(BM_Softmax)->ArgsProduct({{-1, 0, 1, 2}, {4096}});

void BM_SwiGLU(benchmark::State& state) {
  if (!set_level(state)) return;
  const int64_t n = 14336;
  auto g = rand_vec(n, 4), u = rand_vec(n, 5), o = g;
  for (auto _ : state) {
    if (state.range(0) < 0) ref::swiglu(g.data(), u.data(), o.data(), n);
    else swiglu(g.data(), u.data(), o.data(), n, one_thread());
    benchmark::DoNotOptimize(o.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_SwiGLU)->ArgsProduct({{-1, 0, 1, 2}, {0}});

// range(1): rows (tokens); 32 heads of 128, positions 0..rows-1 (cached table of 4096).
void BM_Rope(benchmark::State& state) {
  if (!set_level(state)) return;
  const int64_t rows = state.range(1);
  auto x = rand_vec(rows * 32 * 128, 6);
  std::vector<int32_t> pos(rows);
  for (int64_t i = 0; i < rows; ++i) pos[i] = static_cast<int32_t>(i);
  RopeParams p;
  p.theta = 500000;
  const RopeTable table(p, 128, 4096);
  for (auto _ : state) {
    if (state.range(0) < 0) ref::rope(x.data(), pos.data(), rows, 32, 128, 128, p);
    else rope(x.data(), pos.data(), rows, 32, 128, table, one_thread());
    benchmark::DoNotOptimize(x.data());
  }
  state.SetItemsProcessed(state.iterations() * rows * 32 * 128);
}
BENCHMARK(BM_Rope)->ArgsProduct({{-1, 0, 1, 2}, {1, 512}});

// One decode step of one layer: 1 query, 32 q heads over 8 kv heads of 128, context range(1).
void BM_AttentionDecode(benchmark::State& state) {
  if (!set_level(state)) return;
  const int64_t S = state.range(1), Hq = 32, Hkv = 8, D = 128;
  auto q = rand_vec(Hq * D, 7), k = rand_vec(S * Hkv * D, 8), v = rand_vec(S * Hkv * D, 9), out = q;
  std::vector<int32_t> kv_pos(S);
  for (int64_t i = 0; i < S; ++i) kv_pos[i] = static_cast<int32_t>(i);
  const int32_t q_pos = static_cast<int32_t>(S - 1);
  const AttentionParams ap{0.088f, 0.0f, AttnKind::Full, 0};
  for (auto _ : state) {
    if (state.range(0) < 0)
      ref::attention(q.data(), k.data(), v.data(), &q_pos, kv_pos.data(), 1, S, Hq, Hkv, D, D, ap, out.data());
    else
      attention(q.data(), k.data(), v.data(), &q_pos, kv_pos.data(), 1, S, Hq, Hkv, D, D, ap, out.data(),
                one_thread());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * S * Hkv * D * 2 * 4);  // K and V read once
}
BENCHMARK(BM_AttentionDecode)->ArgsProduct({{-1, 0, 1, 2}, {512, 4096}})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
