// The paged attention kernel: one query group (the q heads sharing a kv head) against one
// sequence's K/V rows read in place from its blocks, with an online softmax updated block by
// block. Rows are converted from the cache dtype on the fly (never gathered into a contiguous
// copy). Row primitives (dot, axpy) exist per dtype and per ISA; the scalar ones are the
// readable definition, the AVX2 / AVX-512 ones are chosen at run time by simd_level().
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/cpu.h"
#include "core/dtype.h"

namespace ptn::kv {

// Where one layer's K/V rows of a sequence live.
struct PagedLayerView {
  const uint8_t* base = nullptr;  // pool storage
  size_t block_bytes = 0;         // bytes per block
  const int32_t* table = nullptr; // block ids, table[i] holds positions i*block_size ..
  int64_t block_size = 0;
  size_t k_off = 0, v_off = 0;    // offsets of this layer's K and V regions inside a block
  size_t k_row = 0, v_row = 0;    // bytes of one head row of K (Dk elements) and V (Dv)
  int64_t dk = 0, dv = 0;
  DType dtype = DType::F32;
};

// Row primitives over n elements of a stored row in one cache dtype.
struct KvRowOps {
  float (*dot)(const float* q, const void* row, int64_t n);     // sum q[i] * row[i]
  void (*axpy)(float* acc, float w, const void* row, int64_t n); // acc[i] += w * row[i]
};
// The primitives for dtype at the given SIMD level (falls back to lower levels).
KvRowOps kv_row_ops(DType dtype, SimdLevel level);
KvRowOps kv_row_ops_scalar(DType dtype);
KvRowOps kv_row_ops_avx2(DType dtype);    // paged_attention_avx2.cpp
KvRowOps kv_row_ops_avx512(DType dtype);  // paged_attention_avx512.cpp

// out[g][0..dv) = softmax_j(cap(scale * q[g]·k_j)) · v_j over positions j = lo..hi (inclusive)
// of kv head `kv_head`, for the `group` query heads q[group][dk]. Scratch is thread-local.
void paged_attend_group(const PagedLayerView& view, const KvRowOps& ops, int64_t kv_head, const float* q,
                        int64_t group, int64_t lo, int64_t hi, float scale, float softcap, float* out);

}  // namespace ptn::kv
