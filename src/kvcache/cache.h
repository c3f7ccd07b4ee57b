// The runtime-supplied KV cache behind `update_and_attend`.
//
// An exported program holds no cache. Whoever runs it creates a KVCache sized from the
// program's CacheSpec plus run-time options (capacity, block size, dtype) and installs it for
// that program inside a CacheScope (runtime/). Every step of the program is a transaction:
//
//   StepBatch batch{...};                 // rows of this step: (sequence, position, token)
//   auto txn = cache.prepare(batch);      // reserves what the step needs, or throws
//                                         // ErrorKind::Capacity and changes nothing
//   for each layer: cache.update_and_attend(txn, layer, q, k, v, params, out);
//   cache.commit(txn);                    // the only call that changes what sequences hold
//   // on any error before commit: cache.rollback(txn) (the destructor of StepTxn also does it)
//
// Positions: within a step, the rows of one sequence must continue it contiguously: the first
// row of sequence s has position length(s), the next length(s)+1, and so on (use rewind() to
// go back). Rows of different sequences may interleave.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/attention_policy.h"

namespace ptn {

using SeqId = int32_t;

// What a runtime needs to size a cache: per layer, kv heads, head dims and attention policy.
struct LayerCacheSpec {
  int64_t n_kv_heads = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  AttnKind kind = AttnKind::Full;
  int64_t span = 0;  // window W or chunk C
  // The layer attends with a learned sink logit per query head (gpt-oss): update_and_attend
  // then takes AttentionParams::sinks (and refuses to run without them, or with them when false).
  // Nothing of it is stored: the sinks are weights, the cache only has to apply them.
  bool sinks = false;
  // V is the first head_dim_v values of each K row (DeepSeek's latent attention: K = [latent,
  // RoPE key], V = the latent): the caller's V equals that prefix, and a cache may store K only
  // and read V from it (the paged cache does; the reference cache stores both).
  bool v_in_k = false;
};
struct CacheSpec {
  std::vector<LayerCacheSpec> layers;
  int64_t max_positions = 0;  // the model's context length (positions must stay below it)
};

struct CacheOptions {
  int64_t capacity_tokens = 0;  // per-layer token slots in total over all sequences (0: use bytes)
  size_t capacity_bytes = 0;    // alternatively a byte budget for K and V of all layers
  int64_t block_size = 16;      // tokens per block (paged cache)
  DType dtype = DType::F32;     // F32, F16, BF16 or Q8_0 (Q8_0 needs head dims that are multiples of 32)
  bool prefix_caching = true;   // keep freed full blocks under their prefix hash for reuse
  // The most rows one step may append to one sequence (0: unbounded). When set, prepare refuses
  // larger steps, and the reference cache keeps window layers in a ring of W + this - 1
  // positions and chunk layers as only the current chunk (plus the step's rows).
  int64_t max_step_tokens = 0;
};

// One row of a step.
struct StepRow {
  SeqId seq = 0;
  int32_t pos = 0;    // position of this token in its sequence
  int32_t token = 0;  // token id (the paged cache hashes full blocks by their token ids)
};
struct StepBatch {
  std::vector<StepRow> rows;
};

class KVCache;

// A prepared step. Created by KVCache::prepare; rolled back by its destructor unless committed.
class StepTxn {
 public:
  StepTxn() = default;
  StepTxn(StepTxn&&) noexcept;
  StepTxn& operator=(StepTxn&&) noexcept;
  ~StepTxn();
  const StepBatch& batch() const { return batch_; }
  bool active() const { return cache_ != nullptr; }

 private:
  friend class KVCache;
  KVCache* cache_ = nullptr;
  StepBatch batch_;
  std::shared_ptr<void> state_;  // implementation-defined pending state
};

class KVCache {
 public:
  virtual ~KVCache() = default;
  const CacheSpec& spec() const { return spec_; }
  const CacheOptions& options() const { return options_; }
  virtual std::string name() const = 0;

  // --- sequence controls -------------------------------------------------------------------
  virtual void add_sequence(SeqId seq) = 0;            // empty sequence; error if it exists
  virtual void fork(SeqId src, SeqId dst) = 0;         // dst shares all of src's tokens
  virtual void clear(SeqId seq) = 0;                   // drop the sequence entirely
  virtual void rewind(SeqId seq, int64_t length) = 0;  // keep only positions < length
  // The smallest length rewind(seq, length) accepts: 0 unless the cache has dropped positions
  // that a window/chunk layer no longer sees (PagedCache: blocks released per layer group;
  // SequenceReferenceCache with max_step_tokens > 0: its rings).
  // Throws InvalidArgument for an unknown sequence.
  virtual int64_t rewind_floor(SeqId seq) const {
    (void)length(seq);
    return 0;
  }
  virtual bool has_sequence(SeqId seq) const = 0;
  virtual int64_t length(SeqId seq) const = 0;         // tokens held for seq
  virtual bool can_extend(SeqId seq, int64_t n_new) const = 0;
  // Attaches cached blocks whose token prefix equals a prefix of `tokens` to the (empty)
  // sequence `seq`; returns the number of tokens now held (0 when nothing matched or the
  // cache does not share prefixes). Reuses at most tokens.size() - 1 tokens so the caller
  // always computes the last prompt token.
  virtual int64_t reuse_prefix(SeqId seq, const std::vector<int32_t>& tokens) { return 0; }

  // --- accounting -------------------------------------------------------------------------
  virtual size_t bytes_used() const = 0;      // K/V bytes held by live sequences
  virtual size_t bytes_reserved() const = 0;  // K/V bytes allocated in total (pool size)

  // --- the step transaction ---------------------------------------------------------------
  StepTxn prepare(const StepBatch& batch);  // validates rows, reserves space, or throws
  // q [T, Hq, D], k [T, Hkv, D], v [T, Hkv, Dv] (T = batch rows, f32, contiguous);
  // out [T, Hq, Dv]. Stores k, v for every row, then attends each row's query to every
  // position of its sequence that is <= its position and visible under the layer's policy.
  // params: scale, softcap and sinks (required exactly when the layer's spec has sinks); the policy is always the layer's own in spec() (params.kind and
  // params.span are not read: the spec sized the cache and decides which blocks it keeps).
  virtual void update_and_attend(StepTxn& txn, int64_t layer, const float* q, const float* k,
                                 const float* v, int64_t n_q_heads, const AttentionParams& params,
                                 float* out) = 0;
  void commit(StepTxn& txn);
  void rollback(StepTxn& txn);

 protected:
  KVCache(CacheSpec spec, CacheOptions options) : spec_(std::move(spec)), options_(options) {}
  virtual std::shared_ptr<void> do_prepare(const StepBatch& batch) = 0;
  virtual void do_commit(const StepBatch& batch, void* state) = 0;
  virtual void do_rollback(const StepBatch& batch, void* state) = 0;
  static void* txn_state(StepTxn& txn) { return txn.state_.get(); }

  CacheSpec spec_;
  CacheOptions options_;
};

// Validates that the rows of a batch continue their sequences contiguously, given the current
// lengths; throws InvalidArgument naming the row otherwise. Shared by the implementations.
void check_batch_positions(const KVCache& cache, const StepBatch& batch);

}  // namespace ptn
