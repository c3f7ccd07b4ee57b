#include "kvcache/kv_common.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/fp16.h"
#include "core/quant.h"

namespace ptn::kv {

void validate_spec(const CacheSpec& spec, const CacheOptions& options, const std::string& who) {
  auto bad = [&](const std::string& msg) { fail(ErrorKind::InvalidArgument, who, msg); };
  if (spec.layers.empty()) bad("the cache spec has no layers");
  if (spec.layers.size() > 100000) bad("the cache spec has " + std::to_string(spec.layers.size()) + " layers");
  if (spec.max_positions < 0) bad("max_positions is negative");
  const DType dt = options.dtype;
  if (dt != DType::F32 && dt != DType::F16 && dt != DType::BF16 && dt != DType::Q8_0)
    bad(std::string("cache dtype ") + dtype_name(dt) + " is not supported (use f32, f16, bf16 or q8_0)");
  if (options.block_size < 1 || options.block_size > 4096)
    bad("block_size " + std::to_string(options.block_size) + " is outside 1..4096");
  if (options.capacity_tokens < 0 || options.capacity_tokens > (int64_t{1} << 40))
    bad("capacity_tokens " + std::to_string(options.capacity_tokens) + " is outside 0..2^40");
  if (options.max_step_tokens < 0 || options.max_step_tokens > (int64_t{1} << 30))
    bad("max_step_tokens " + std::to_string(options.max_step_tokens) + " is outside 0..2^30");
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const LayerCacheSpec& L = spec.layers[l];
    const std::string at = "layer " + std::to_string(l) + ": ";
    if (L.n_kv_heads < 1 || L.n_kv_heads > 4096) bad(at + "n_kv_heads " + std::to_string(L.n_kv_heads) + " is outside 1..4096");
    if (L.head_dim_k < 1 || L.head_dim_k > 65536) bad(at + "head_dim_k " + std::to_string(L.head_dim_k) + " is outside 1..65536");
    if (L.head_dim_v < 1 || L.head_dim_v > 65536) bad(at + "head_dim_v " + std::to_string(L.head_dim_v) + " is outside 1..65536");
    if (L.kind != AttnKind::Full && L.span < 1)
      bad(at + "a window/chunk layer needs a positive span, got " + std::to_string(L.span));
    if (dt == DType::Q8_0 && (L.head_dim_k % 32 != 0 || L.head_dim_v % 32 != 0))
      bad(at + "q8_0 cache needs head dims that are multiples of 32, got k " + std::to_string(L.head_dim_k) +
          ", v " + std::to_string(L.head_dim_v));
  }
}

size_t kv_row_bytes(DType dtype, int64_t dim) { return row_bytes(dtype, dim, "kv cache row"); }

void store_row(DType dtype, const float* src, void* dst, int64_t dim) {
  switch (dtype) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(dim) * 4); return;
    case DType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < dim; ++i) d[i] = f32_to_fp16(src[i]);
      return;
    }
    case DType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < dim; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    default: quantize_row(dtype, src, dst, dim); return;
  }
}

void load_row(DType dtype, const void* src, float* dst, int64_t dim) {
  if (dtype == DType::F32) {
    std::memcpy(dst, src, static_cast<size_t>(dim) * 4);
    return;
  }
  dequantize_row(dtype, src, dst, dim);
}

float cap_score(float s, float softcap) { return softcap > 0.0f ? softcap * std::tanh(s / softcap) : s; }

}  // namespace ptn::kv
