#include "kvcache/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/blocks.h"
#include "core/error.h"
#include "core/fp16.h"

namespace ptn::kv {

// --- scalar row primitives (the definition the SIMD variants must match) -------------------

namespace {

float dot_f32(const float* q, const void* row, int64_t n) {
  const float* r = static_cast<const float*>(row);
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += q[i] * r[i];
  return s;
}
void axpy_f32(float* acc, float w, const void* row, int64_t n) {
  const float* r = static_cast<const float*>(row);
  for (int64_t i = 0; i < n; ++i) acc[i] += w * r[i];
}

float dot_f16(const float* q, const void* row, int64_t n) {
  const uint16_t* r = static_cast<const uint16_t*>(row);
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += q[i] * fp16_to_f32(r[i]);
  return s;
}
void axpy_f16(float* acc, float w, const void* row, int64_t n) {
  const uint16_t* r = static_cast<const uint16_t*>(row);
  for (int64_t i = 0; i < n; ++i) acc[i] += w * fp16_to_f32(r[i]);
}

float dot_bf16(const float* q, const void* row, int64_t n) {
  const uint16_t* r = static_cast<const uint16_t*>(row);
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += q[i] * bf16_to_f32(r[i]);
  return s;
}
void axpy_bf16(float* acc, float w, const void* row, int64_t n) {
  const uint16_t* r = static_cast<const uint16_t*>(row);
  for (int64_t i = 0; i < n; ++i) acc[i] += w * bf16_to_f32(r[i]);
}

// q8_0: n / 32 blocks {fp16 d, int8 qs[32]}, x = d * q.
float dot_q8_0(const float* q, const void* row, int64_t n) {
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(row);
  float s = 0;
  for (int64_t j = 0; j < n / QK8_0; ++j, q += QK8_0) {
    float bs = 0;
    for (int i = 0; i < QK8_0; ++i) bs += q[i] * static_cast<float>(b[j].qs[i]);
    s += fp16_to_f32(b[j].d) * bs;
  }
  return s;
}
void axpy_q8_0(float* acc, float w, const void* row, int64_t n) {
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(row);
  for (int64_t j = 0; j < n / QK8_0; ++j, acc += QK8_0) {
    const float wd = w * fp16_to_f32(b[j].d);
    for (int i = 0; i < QK8_0; ++i) acc[i] += wd * static_cast<float>(b[j].qs[i]);
  }
}

}  // namespace

KvRowOps kv_row_ops_scalar(DType dtype) {
  switch (dtype) {
    case DType::F32: return {dot_f32, axpy_f32};
    case DType::F16: return {dot_f16, axpy_f16};
    case DType::BF16: return {dot_bf16, axpy_bf16};
    case DType::Q8_0: return {dot_q8_0, axpy_q8_0};
    default: break;
  }
  fail(ErrorKind::Unsupported, "paged attention", std::string("cache dtype ") + dtype_name(dtype));
}

KvRowOps kv_row_ops(DType dtype, SimdLevel level) {
  if (level >= SimdLevel::AVX512) return kv_row_ops_avx512(dtype);
  if (level >= SimdLevel::AVX2) return kv_row_ops_avx2(dtype);
  return kv_row_ops_scalar(dtype);
}

// --- the kernel ------------------------------------------------------------------------------

void paged_attend_group(const PagedLayerView& view, const KvRowOps& ops, int64_t kv_head, const float* q,
                        int64_t group, int64_t lo, int64_t hi, float scale, float softcap, float* out) {
  const int64_t bs = view.block_size;
  const int64_t dk = view.dk, dv = view.dv;
  // Scratch per thread: scores [group][bs], running max m[group], running sum l[group].
  thread_local std::vector<float> scores, m, l;
  scores.resize(static_cast<size_t>(group * bs));
  m.assign(static_cast<size_t>(group), -std::numeric_limits<float>::infinity());
  l.assign(static_cast<size_t>(group), 0.0f);
  std::fill(out, out + group * dv, 0.0f);  // out doubles as the accumulator [group][dv]

  const size_t k_head = static_cast<size_t>(kv_head) * static_cast<size_t>(bs) * view.k_row;
  const size_t v_head = static_cast<size_t>(kv_head) * static_cast<size_t>(bs) * view.v_row;
  for (int64_t bi = lo / bs; bi <= hi / bs; ++bi) {
    const int64_t t0 = std::max(lo, bi * bs), t1 = std::min(hi, bi * bs + bs - 1);
    const int64_t n = t1 - t0 + 1;
    const uint8_t* blk = view.base + static_cast<size_t>(view.table[bi]) * view.block_bytes;
    const uint8_t* krows = blk + view.k_off + k_head + static_cast<size_t>(t0 - bi * bs) * view.k_row;
    const uint8_t* vrows = blk + view.v_off + v_head + static_cast<size_t>(t0 - bi * bs) * view.v_row;
    // Scores of this block's visible rows, and the online-softmax rescale of what came before.
    for (int64_t g = 0; g < group; ++g) {
      float* s = scores.data() + g * bs;
      const float* qg = q + g * dk;
      float mb = m[static_cast<size_t>(g)];
      for (int64_t t = 0; t < n; ++t) {
        float x = ops.dot(qg, krows + static_cast<size_t>(t) * view.k_row, dk) * scale;
        if (softcap > 0) x = softcap * std::tanh(x / softcap);
        s[t] = x;
        mb = std::max(mb, x);
      }
      const float old = m[static_cast<size_t>(g)];
      if (mb > old) {
        const float c = std::exp(old - mb);  // 0 on the first block (old = -inf)
        l[static_cast<size_t>(g)] *= c;
        float* acc = out + g * dv;
        for (int64_t d = 0; d < dv; ++d) acc[d] *= c;
        m[static_cast<size_t>(g)] = mb;
      }
      float sum = 0;
      for (int64_t t = 0; t < n; ++t) sum += (s[t] = std::exp(s[t] - mb));
      l[static_cast<size_t>(g)] += sum;
    }
    // Weighted V rows: each row is read once for all heads of the group.
    for (int64_t t = 0; t < n; ++t) {
      const uint8_t* vr = vrows + static_cast<size_t>(t) * view.v_row;
      for (int64_t g = 0; g < group; ++g) ops.axpy(out + g * dv, scores[static_cast<size_t>(g * bs + t)], vr, dv);
    }
  }
  for (int64_t g = 0; g < group; ++g) {
    const float li = l[static_cast<size_t>(g)];
    const float inv = li > 0 ? 1.0f / li : 0.0f;
    float* acc = out + g * dv;
    for (int64_t d = 0; d < dv; ++d) acc[d] *= inv;
  }
}

}  // namespace ptn::kv
