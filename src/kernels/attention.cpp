// Optimized attention over contiguous K/V, and the online-softmax building block (attention.h).
// The scalar attend kernel is instantiated here; AVX2 / AVX-512 ones in attention_avx2.cpp /
// attention_avx512.cpp.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/attention_impl.h"
#include "kernels/ops_internal.h"

namespace ptn {
namespace kdetail {

const AttnKernels& attn_kernels_scalar() {
  static constexpr AttnKernels k = make_attn_kernels<ScalarV>();
  return k;
}

const AttnKernels& attn_kernels(SimdLevel level) {
  switch (level) {
#if defined(__x86_64__)
    case SimdLevel::AVX512: return attn_kernels_avx512();
    case SimdLevel::AVX2:
    case SimdLevel::AVX2VNNI: return attn_kernels_avx2();
#elif defined(__aarch64__)
    case SimdLevel::Neon: case SimdLevel::NeonDotprod: case SimdLevel::NeonI8mm: return attn_kernels_neon();
#endif
    default: break;
  }
  return attn_kernels_scalar();
}

}  // namespace kdetail

bool attn_kv_type_supported(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::Q8_0 || t == DType::Q4_0;
}

void attn_begin(AttnAccumulator& st, float* acc, int64_t dv) {
  if (dv < 1 || acc == nullptr)
    fail(ErrorKind::InvalidArgument, "attn_begin", "dv=" + std::to_string(dv) + ": need dv >= 1 and an accumulator");
  st.max = -INFINITY;
  st.sum = 0.0f;
  st.acc = acc;
  st.dv = dv;
  for (int64_t i = 0; i < dv; ++i) acc[i] = 0.0f;
}

namespace {
// Called once per block of rows (in prefill, once per 16 positions per query and kv head):
// the checks are plain comparisons and the message strings are built only on failure.
void check_kv_rows(const char* what, const KvRows& r, int64_t d, int64_t n) {
  const bool ok_type = attn_kv_type_supported(r.type);
  const bool blocks32 = r.type == DType::Q8_0 || r.type == DType::Q4_0;
  if (ok_type && (!blocks32 || d % 32 == 0) && d >= 1 && (n <= 1 || r.stride >= static_cast<int64_t>(row_bytes(r.type, d))) &&
      (n <= 0 || r.data != nullptr))
    return;
  const std::string where = std::string("attend_block: ") + what;
  if (!ok_type)
    fail(ErrorKind::Unsupported, where,
         std::string("type ") + dtype_name(r.type) + " is not an attention K/V type (f32, f16, bf16, q8_0, q4_0)");
  if (blocks32 && d % 32 != 0)
    fail(ErrorKind::InvalidArgument, where,
         std::string(dtype_name(r.type)) + " rows need a head dim that is a multiple of 32, got " + std::to_string(d));
  const auto bytes = static_cast<int64_t>(row_bytes(r.type, d, where));
  if (n > 1 && r.stride < bytes)
    fail(ErrorKind::InvalidArgument, where,
         "stride " + std::to_string(r.stride) + " is smaller than a row (" + std::to_string(bytes) + " bytes)");
  if (n > 0 && r.data == nullptr) fail(ErrorKind::InvalidArgument, where, "null rows");
}
}  // namespace

void attend_block_group(AttnAccumulator* states, const float* q, int64_t G, int64_t d,
                        const KvRows& k, const KvRows& v, int64_t n, float scale, float softcap) {
  const int64_t dv = G >= 1 && states != nullptr ? states[0].dv : 0;
  auto shape = [&] {
    return "G=" + std::to_string(G) + " d=" + std::to_string(d) + " dv=" + std::to_string(dv) + " n=" +
           std::to_string(n);
  };
  if (G < 1 || states == nullptr || n < 0 || d < 1 || (n > 0 && q == nullptr))
    fail(ErrorKind::InvalidArgument, "attend_block", shape() + ": need G >= 1 states, n >= 0, d >= 1 and q");
  for (int64_t g = 0; g < G; ++g)
    if (states[g].acc == nullptr || states[g].dv < 1 || states[g].dv != dv)
      fail(ErrorKind::InvalidArgument, "attend_block",
           shape() + ": state " + std::to_string(g) + " is not begun (attn_begin) with dv=" + std::to_string(dv));
  if (!std::isfinite(scale) || !std::isfinite(softcap) || softcap < 0)
    fail(ErrorKind::InvalidArgument, "attend_block", shape() + ": scale must be finite, softcap finite and >= 0");
  check_kv_rows("k", k, d, n);
  check_kv_rows("v", v, dv, n);
  if (n == 0) return;
  kdetail::attn_kernels(simd_level()).attend(states, q, G, d, k, v, n, scale, softcap);
}

void attend_block(AttnAccumulator& st, const float* q, int64_t d, const KvRows& k,
                  const KvRows& v, int64_t n, float scale, float softcap) {
  attend_block_group(&st, q, 1, d, k, v, n, scale, softcap);
}

void attn_merge(AttnAccumulator& into, const AttnAccumulator& other) {
  if (into.dv != other.dv || into.acc == nullptr || other.acc == nullptr)
    fail(ErrorKind::InvalidArgument, "attn_merge",
         "dv " + std::to_string(into.dv) + " vs " + std::to_string(other.dv) + ": both accumulators must be begun with the same dv");
  if (other.max == -INFINITY) return;  // other saw nothing
  const float m = std::max(into.max, other.max);
  const float ci = std::exp(into.max - m), co = std::exp(other.max - m);
  for (int64_t i = 0; i < into.dv; ++i) into.acc[i] = into.acc[i] * ci + other.acc[i] * co;
  into.sum = into.sum * ci + other.sum * co;
  into.max = m;
}

namespace {
// The factor that turns a head's accumulator (max m, sum l) into its output: 1 / l, or with a
// sink logit (-inf: none) 1 / (l + exp(sink - m)), evaluated as exp(m - sink) / (l exp(m - sink)
// + 1) when the sink is larger so that no exp overflows. 0 when the head saw no row (a sink
// alone gives zeros).
float finish_scale(float m, float l, float sink) {
  if (!(l > 0)) return 0.0f;
  if (sink == -INFINITY) return 1.0f / l;
  if (sink <= m) return 1.0f / (l + std::exp(sink - m));
  const float r = std::exp(m - sink);  // < 1
  return r / (l * r + 1.0f);
}
}  // namespace

void attn_finish(const AttnAccumulator& st, float* out, float sink) {
  if (st.acc == nullptr || st.dv < 1 || out == nullptr)
    fail(ErrorKind::InvalidArgument, "attn_finish", "accumulator not begun or null output");
  if (std::isnan(sink) || sink == INFINITY)
    fail(ErrorKind::InvalidArgument, "attn_finish", "sink must be finite or -inf (none)");
  const float inv = finish_scale(st.max, st.sum, sink);
  for (int64_t i = 0; i < st.dv; ++i) out[i] = st.acc[i] * inv;
}

int64_t attn_tile_width() { return kdetail::attn_kernels(simd_level()).tile_width; }

size_t attn_tile_floats(int64_t d, int64_t dv) {
  if (d < 1 || dv < 1) fail(ErrorKind::InvalidArgument, "attn_tile_floats", "need d, dv >= 1");
  return static_cast<size_t>((d + dv) * attn_tile_width());
}

void attn_tile_begin(AttnTile& t, const float* const* q, int64_t nq, int64_t d, int64_t dv, float scale,
                     float softcap, float* buf) {
  const int64_t w = attn_tile_width();
  if (nq < 1 || nq > w || d < 1 || dv < 1 || q == nullptr || buf == nullptr)
    fail(ErrorKind::InvalidArgument, "attn_tile_begin",
         "nq=" + std::to_string(nq) + " d=" + std::to_string(d) + " dv=" + std::to_string(dv) +
             ": need 1 <= nq <= " + std::to_string(w) + ", d, dv >= 1, query rows and a buffer");
  if (!std::isfinite(scale) || !std::isfinite(softcap) || softcap < 0)
    fail(ErrorKind::InvalidArgument, "attn_tile_begin", "scale must be finite, softcap finite and >= 0");
  for (int64_t i = 0; i < nq; ++i)
    if (q[i] == nullptr) fail(ErrorKind::InvalidArgument, "attn_tile_begin", "query row " + std::to_string(i) + " is null");
  t.w = w;
  t.nq = nq;
  t.d = d;
  t.dv = dv;
  t.scale = scale;
  t.softcap = softcap;
  t.qt = buf;
  t.acct = buf + d * w;
  for (int64_t e = 0; e < d; ++e)
    for (int64_t i = 0; i < w; ++i) t.qt[e * w + i] = i < nq ? q[i][e] : 0.0f;
  std::fill(t.acct, t.acct + dv * w, 0.0f);
  std::fill(t.max, t.max + kAttnTileMax, -INFINITY);
  std::fill(t.sum, t.sum + kAttnTileMax, 0.0f);
}

void attn_tile_block(AttnTile& t, const KvRows& k, const KvRows& v, int64_t n, const int32_t* lo,
                     const int32_t* hi) {
  if (t.qt == nullptr || t.nq < 1) fail(ErrorKind::InvalidArgument, "attn_tile_block", "tile not begun (attn_tile_begin)");
  if (n < 0 || lo == nullptr || hi == nullptr)
    fail(ErrorKind::InvalidArgument, "attn_tile_block", "n=" + std::to_string(n) + ": need n >= 0 and lo/hi per row");
  check_kv_rows("k", k, t.d, n);
  check_kv_rows("v", v, t.dv, n);
  if (n == 0) return;
  // The kernels of the width the tile was begun with (the SIMD cap may have moved since).
#if defined(__aarch64__)
  const SimdLevel level = t.w == 4 ? SimdLevel::Neon : SimdLevel::Scalar;
#else
  const SimdLevel level = t.w >= 16 ? SimdLevel::AVX512 : t.w >= 8 ? SimdLevel::AVX2 : SimdLevel::Scalar;
#endif
  const kdetail::AttnKernels& kern = kdetail::attn_kernels(level);
  if (kern.tile_width != t.w) fail(ErrorKind::Internal, "attn_tile_block", "no kernel for tile width " + std::to_string(t.w));
  kern.tile_block(t, k, v, n, lo, hi);
}

void attn_rows_to_f32(const KvRows& r, int64_t n, int64_t d, float* out) {
  if (n < 0 || (n > 0 && out == nullptr))
    fail(ErrorKind::InvalidArgument, "attn_rows_to_f32", "n=" + std::to_string(n) + ": need n >= 0 and an output");
  check_kv_rows("rows", r, d, n);
  if (n > 0) kdetail::attn_kernels(simd_level()).rows_f32(r, n, d, out);
}

void attn_tile_finish(const AttnTile& t, float* const* out, const float* sinks) {
  if (t.qt == nullptr || t.nq < 1 || out == nullptr)
    fail(ErrorKind::InvalidArgument, "attn_tile_finish", "tile not begun or null output");
  for (int64_t i = 0; i < t.nq; ++i) {
    const float inv = finish_scale(t.max[i], t.sum[i], sinks != nullptr ? sinks[i] : -INFINITY);
    for (int64_t e = 0; e < t.dv; ++e) out[i][e] = t.acct[e * t.w + i] * inv;
  }
}

void attention(const float* q, const float* k, const float* v, const int32_t* q_pos,
               const int32_t* kv_pos, int64_t T, int64_t S, int64_t Hq, int64_t Hkv, int64_t D,
               int64_t Dv, const AttentionParams& p, float* out, ThreadPool& pool) {
  kdetail::check_attention("attention", q, k, v, q_pos, kv_pos, T, S, Hq, Hkv, D, Dv, p, out);
  if (T == 0) return;
  const kdetail::AttnKernels& kern = kdetail::attn_kernels(simd_level());
  const int64_t group = Hq / Hkv;  // query heads per kv head, contiguous in q
  const int64_t k_stride = Hkv * D * static_cast<int64_t>(sizeof(float));
  const int64_t v_stride = Hkv * Dv * static_cast<int64_t>(sizeof(float));
  bool consecutive = S > 0;  // kv_pos[j] == kv_pos[0] + j for every j
  for (int64_t j = 1; j < S && consecutive; ++j) consecutive = int64_t{kv_pos[j]} == int64_t{kv_pos[j - 1]} + 1;
  auto run = [&](int64_t u0, int64_t u1) {
    std::vector<float> acc(static_cast<size_t>(group * Dv));
    std::vector<AttnAccumulator> st(static_cast<size_t>(group));
    for (int64_t u = u0; u < u1; ++u) {  // unit u = (t, kv head)
      const int64_t t = u / Hkv, kvh = u % Hkv;
      for (int64_t g = 0; g < group; ++g) attn_begin(st[g], acc.data() + g * Dv, Dv);
      const float* qg = q + (t * Hq + kvh * group) * D;
      // Runs of consecutive visible kv rows form one span each. With consecutive kv positions
      // (the usual case) the one run is known without looking at every row.
      int64_t j = 0;
      if (consecutive) {
        const int64_t qp = q_pos[t];
        int64_t lo = kv_pos[0];
        if (p.kind == AttnKind::Window) lo = std::max(lo, qp - p.span + 1);
        if (p.kind == AttnKind::Chunk) lo = std::max(lo, qp >= 0 ? qp / p.span * p.span : -((-qp + p.span - 1) / p.span) * p.span);
        const int64_t hi = std::min<int64_t>(qp, kv_pos[S - 1]);  // inclusive
        if (lo <= hi) {
          const int64_t j0 = lo - kv_pos[0];
          KvRows kr{k + (j0 * Hkv + kvh) * D, DType::F32, k_stride};
          KvRows vr{v + (j0 * Hkv + kvh) * Dv, DType::F32, v_stride};
          kern.attend(st.data(), qg, group, D, kr, vr, hi - lo + 1, p.scale, p.softcap);
        }
        j = S;
      }
      while (j < S) {
        while (j < S && !attn_visible(q_pos[t], kv_pos[j], p)) ++j;
        int64_t e = j;
        while (e < S && attn_visible(q_pos[t], kv_pos[e], p)) ++e;
        if (e > j) {
          KvRows kr{k + (j * Hkv + kvh) * D, DType::F32, k_stride};
          KvRows vr{v + (j * Hkv + kvh) * Dv, DType::F32, v_stride};
          kern.attend(st.data(), qg, group, D, kr, vr, e - j, p.scale, p.softcap);
        }
        j = e;
      }
      for (int64_t g = 0; g < group; ++g)
        attn_finish(st[g], out + (t * Hq + kvh * group + g) * Dv, p.sinks ? p.sinks[kvh * group + g] : -INFINITY);
    }
  };
  const int64_t units = T * Hkv;
  const double work = static_cast<double>(units) * group * S * (D + Dv);  // no int overflow
  if (pool.size() == 1 || units == 1 || work < 64 * 1024) {
    run(0, units);
  } else {
    pool.parallel_for(units, 1, [&](int64_t b, int64_t e, int) { run(b, e); });
  }
}

}  // namespace ptn
