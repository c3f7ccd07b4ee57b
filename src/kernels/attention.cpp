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
    case SimdLevel::AVX512: return attn_kernels_avx512();
    case SimdLevel::AVX2: return attn_kernels_avx2();
    case SimdLevel::Scalar: break;
  }
  return attn_kernels_scalar();
}

}  // namespace kdetail

bool attn_kv_type_supported(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::Q8_0;
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
  if (ok_type && (r.type != DType::Q8_0 || d % 32 == 0) && d >= 1 && (n <= 1 || r.stride >= static_cast<int64_t>(row_bytes(r.type, d))) &&
      (n <= 0 || r.data != nullptr))
    return;
  const std::string where = std::string("attend_block: ") + what;
  if (!ok_type)
    fail(ErrorKind::Unsupported, where,
         std::string("type ") + dtype_name(r.type) + " is not an attention K/V type (f32, f16, bf16, q8_0)");
  if (r.type == DType::Q8_0 && d % 32 != 0)
    fail(ErrorKind::InvalidArgument, where, "q8_0 rows need a head dim that is a multiple of 32, got " + std::to_string(d));
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

void attn_finish(const AttnAccumulator& st, float* out) {
  if (st.acc == nullptr || st.dv < 1 || out == nullptr)
    fail(ErrorKind::InvalidArgument, "attn_finish", "accumulator not begun or null output");
  const float inv = st.sum > 0 ? 1.0f / st.sum : 0.0f;
  for (int64_t i = 0; i < st.dv; ++i) out[i] = st.acc[i] * inv;
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
      for (int64_t g = 0; g < group; ++g) attn_finish(st[g], out + (t * Hq + kvh * group + g) * Dv);
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
