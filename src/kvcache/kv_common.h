// Helpers shared by the cache implementations: validation of a (spec, options) pair, the
// visible range of a query under a layer's attention policy, and row conversions between f32
// and the cache dtypes (f32, f16, bf16, q8_0).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "kvcache/cache.h"

namespace ptn::kv {

// Throws InvalidArgument (naming `who`) unless the spec has at least one layer, every layer has
// positive kv heads and head dims, window/chunk layers have a positive span, the dtype is one
// of f32/f16/bf16/q8_0 (q8_0: head dims multiples of 32) and 1 <= block_size <= 4096.
// Capacity is not checked here (the reference cache allows "unlimited").
void validate_spec(const CacheSpec& spec, const CacheOptions& options, const std::string& who);

// Bytes of one stored head row of `dim` elements in a cache dtype.
size_t kv_row_bytes(DType dtype, int64_t dim);

// src[dim] (f32) -> one stored row; and back.
void store_row(DType dtype, const float* src, void* dst, int64_t dim);
void load_row(DType dtype, const void* src, float* dst, int64_t dim);

// First position a query at `pos` may see under the layer's policy (it sees first..pos).
inline int64_t first_visible(const LayerCacheSpec& layer, int64_t pos) {
  switch (layer.kind) {
    case AttnKind::Window: return pos - layer.span + 1 > 0 ? pos - layer.span + 1 : 0;
    case AttnKind::Chunk: return (pos / layer.span) * layer.span;
    case AttnKind::Full: break;
  }
  return 0;
}

// The score of a query-key dot product after scaling and optional tanh soft-capping.
float cap_score(float dot_scaled, float softcap);

}  // namespace ptn::kv
