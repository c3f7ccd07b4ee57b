// Helpers shared by the cache implementations: validation of a (spec, options) pair, the
// argument checks of the KVCache calls (one message per problem, whichever cache), the visible
// range of a query under a layer's attention policy, and row conversions between f32 and the
// cache dtypes (f32, f16, bf16, q8_0, q4_0).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kvcache/cache.h"

namespace ptn::kv {

// Throws InvalidArgument (naming `who`) unless the spec has at least one layer, every layer has
// positive kv heads and head dims, window/chunk layers have a positive span, the dtype is one
// of f32/f16/bf16/q8_0/q4_0 (q8_0, q4_0: head dims multiples of 32) and 1 <= block_size <= 4096.
// Capacity is not checked here (the reference cache allows "unlimited").
void validate_spec(const CacheSpec& spec, const CacheOptions& options, const std::string& who);

// --- argument checks shared by the cache implementations ------------------------------------
// Each throws InvalidArgument with `who` (the cache's name()) as where; `what` names the operation.

[[noreturn]] void fail_unknown_sequence(const std::string& who, const char* what, SeqId seq);
[[noreturn]] void fail_sequence_in_step(const std::string& who, const char* what, SeqId seq);
[[noreturn]] void fail_sequence_exists(const std::string& who, const char* what, SeqId seq);

// The entry of `seq` in an implementation's std::map<SeqId, Sequence> (const or not).
template <class SequenceMap>
auto& find_sequence(SequenceMap& seqs, SeqId seq, const std::string& who, const char* what) {
  auto it = seqs.find(seq);
  if (it == seqs.end()) fail_unknown_sequence(who, what, seq);
  return it->second;
}

// Throws "<what> <seq> exists" (e.g. what = "fork: destination sequence") if `seq` is in the map.
template <class SequenceMap>
void check_no_sequence(const SequenceMap& seqs, SeqId seq, const std::string& who, const char* what) {
  if (seqs.count(seq) != 0) fail_sequence_exists(who, what, seq);
}

// rewind(seq, length) of a sequence holding `held` tokens: 0 <= length <= held.
void check_rewind_length(const std::string& who, SeqId seq, int64_t length, int64_t held);

// The limits of can_extend every cache has: n_new >= 0, the model's max_positions and the
// options' max_step_tokens (capacity is the implementation's own affair).
bool within_extend_limits(const KVCache& cache, int64_t held, int64_t n_new);

// update_and_attend's arguments: `prepared` says the txn is the step prepared on this cache;
// the layer exists; n_q_heads is a positive multiple of its kv heads; with n_rows > 0 no
// tensor is null; sinks are given exactly when the layer's spec has them. Returns the layer's spec.
const LayerCacheSpec& check_attend_args(const KVCache& cache, bool prepared, int64_t layer, int64_t n_q_heads,
                                        int64_t n_rows, const float* q, const float* k, const float* v,
                                        const float* out, const float* sinks);

// commit of a step with rows: every layer was updated (layer_done[l] for each layer l).
void check_all_layers_updated(const KVCache& cache, const StepBatch& batch, const std::vector<bool>& layer_done);

// Bytes of one stored head row of `dim` elements in a cache dtype.
size_t kv_row_bytes(DType dtype, int64_t dim);

// src[dim] (f32) -> one stored row; and back.
void store_row(DType dtype, const float* src, void* dst, int64_t dim);
void load_row(DType dtype, const void* src, float* dst, int64_t dim);

// First position a query at `pos` may see under the layer's policy (it sees first..pos).
inline int64_t first_visible(const LayerCacheSpec& layer, int64_t pos) {
  return attn_first_visible(layer.kind, layer.span, pos);
}

// The score of a query-key dot product after scaling and optional tanh soft-capping.
float cap_score(float dot_scaled, float softcap);

}  // namespace ptn::kv
