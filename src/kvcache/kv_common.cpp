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
  if (dt != DType::F32 && dt != DType::F16 && dt != DType::BF16 && dt != DType::Q8_0 && dt != DType::Q4_0)
    bad(std::string("cache dtype ") + dtype_name(dt) + " is not supported (use f32, f16, bf16, q8_0 or q4_0)");
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
    if (L.v_in_k && L.head_dim_v > L.head_dim_k)
      bad(at + "V as a prefix of K needs head_dim_v <= head_dim_k, got k " + std::to_string(L.head_dim_k) + ", v " +
          std::to_string(L.head_dim_v));
    if ((dt == DType::Q8_0 || dt == DType::Q4_0) && (L.head_dim_k % 32 != 0 || L.head_dim_v % 32 != 0))
      bad(at + dtype_name(dt) + " cache needs head dims that are multiples of 32, got k " + std::to_string(L.head_dim_k) +
          ", v " + std::to_string(L.head_dim_v));
  }
}

void fail_unknown_sequence(const std::string& who, const char* what, SeqId seq) {
  fail(ErrorKind::InvalidArgument, who, std::string(what) + ": unknown sequence " + std::to_string(seq));
}

void fail_sequence_in_step(const std::string& who, const char* what, SeqId seq) {
  fail(ErrorKind::InvalidArgument, who,
       std::string(what) + ": sequence " + std::to_string(seq) + " is part of a prepared, uncommitted step");
}

void fail_sequence_exists(const std::string& who, const char* what, SeqId seq) {
  fail(ErrorKind::InvalidArgument, who, std::string(what) + " " + std::to_string(seq) + " exists");
}

void check_rewind_length(const std::string& who, SeqId seq, int64_t length, int64_t held) {
  if (length < 0 || length > held)
    fail(ErrorKind::InvalidArgument, who,
         "rewind: length " + std::to_string(length) + " is outside 0.." + std::to_string(held) + " for sequence " +
             std::to_string(seq));
}

bool within_extend_limits(const KVCache& cache, int64_t held, int64_t n_new) {
  if (n_new < 0) return false;
  const int64_t max_positions = cache.spec().max_positions;
  if (max_positions > 0 && held + n_new > max_positions) return false;
  const int64_t max_step = cache.options().max_step_tokens;
  return max_step <= 0 || n_new <= max_step;
}

const LayerCacheSpec& check_attend_args(const KVCache& cache, bool prepared, int64_t layer, int64_t n_q_heads,
                                        int64_t n_rows, const float* q, const float* k, const float* v,
                                        const float* out, const float* sinks) {
  auto bad = [&](const std::string& msg) { fail(ErrorKind::InvalidArgument, cache.name(), "update_and_attend: " + msg); };
  if (!prepared) bad("the step is not prepared on this cache");
  const auto& layers = cache.spec().layers;
  if (layer < 0 || layer >= static_cast<int64_t>(layers.size())) bad("layer " + std::to_string(layer) + " is out of range");
  const LayerCacheSpec& L = layers[static_cast<size_t>(layer)];
  if (n_q_heads < 1 || n_q_heads % L.n_kv_heads != 0)
    bad("n_q_heads " + std::to_string(n_q_heads) + " is not a positive multiple of " + std::to_string(L.n_kv_heads) +
        " kv heads (layer " + std::to_string(layer) + ")");
  if (n_rows > 0 && (!q || !k || !v || !out)) bad("null tensor pointer");
  if (L.sinks != (sinks != nullptr))
    bad(std::string("layer ") + std::to_string(layer) + (L.sinks ? " attends with sinks, none were given" : " has no sinks, sinks were given"));
  return L;
}

void check_all_layers_updated(const KVCache& cache, const StepBatch& batch, const std::vector<bool>& layer_done) {
  if (batch.rows.empty()) return;
  for (size_t l = 0; l < layer_done.size(); ++l)
    if (!layer_done[l])
      fail(ErrorKind::InvalidArgument, cache.name(), "commit: layer " + std::to_string(l) + " was not updated in this step");
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
