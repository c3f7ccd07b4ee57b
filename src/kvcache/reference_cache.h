// SequenceReferenceCache: the oracle. Per sequence and layer, K and V are contiguous f32
// arrays; attention is a plain loop with double accumulation that masks by position. It is
// meant to be obviously correct, not fast. The cache dtype option is ignored (always f32).
//
// Capacity: options.capacity_tokens (or capacity_bytes / f32 bytes per token) bounds the
// tokens held over all sequences together; 0 for both means unlimited.
//
// Bounded memory (options.max_step_tokens = M > 0): a window layer (W) keeps a ring of
// W + M - 1 positions (position p in slot p % (W + M - 1)): a step appends at most M rows, and
// its first query still needs the W - 1 positions before it. A chunk layer (C) keeps only the
// positions from the chunk start of its length on (plus the step's rows until commit). Full
// layers keep everything. Positions dropped this way bound rewind (rewind_floor); a rolled-back
// step may have overwritten ring slots, so rollback can raise rewind_floor (never the outputs).
// With M = 0 every layer keeps the whole history (rewind_floor 0).
#pragma once
#include <map>
#include <vector>

#include "kvcache/cache.h"

namespace ptn {

class SequenceReferenceCache final : public KVCache {
 public:
  SequenceReferenceCache(CacheSpec spec, CacheOptions options);
  std::string name() const override { return "reference kv cache"; }

  void add_sequence(SeqId seq) override;
  void fork(SeqId src, SeqId dst) override;
  void clear(SeqId seq) override;
  void rewind(SeqId seq, int64_t length) override;
  bool has_sequence(SeqId seq) const override;
  int64_t length(SeqId seq) const override;
  bool can_extend(SeqId seq, int64_t n_new) const override;
  int64_t rewind_floor(SeqId seq) const override;

  size_t bytes_used() const override;
  size_t bytes_reserved() const override;

  void update_and_attend(StepTxn& txn, int64_t layer, const float* q, const float* k, const float* v,
                         int64_t n_q_heads, const AttentionParams& params, float* out) override;

  // Token limit over all sequences (0: unlimited).
  int64_t capacity_tokens() const { return capacity_tokens_; }

 protected:
  std::shared_ptr<void> do_prepare(const StepBatch& batch) override;
  void do_commit(const StepBatch& batch, void* state) override;
  void do_rollback(const StepBatch& batch, void* state) override;

 private:
  // How a layer stores its positions (see the header comment).
  enum class Store { Dense, Ring, ChunkTail };
  struct Layer {
    std::vector<float> k;  // [rows, Hkv, Dk]: Dense: row = position; Ring: row = position % ring;
    std::vector<float> v;  // ChunkTail: row = position - base.   Same for V with Dv.
    int64_t base = 0;      // ChunkTail: first position held; Ring: oldest position still valid
  };
  struct Sequence {
    int64_t length = 0;
    std::vector<Layer> layers;
  };
  struct Pending;

  Sequence& seq_or_throw(SeqId seq, const char* what);
  const Sequence& seq_or_throw(SeqId seq, const char* what) const;
  void check_not_in_step(SeqId seq, const char* what) const;
  int64_t total_tokens() const;
  int64_t row_of(size_t layer, const Layer& l, int64_t pos) const;  // row index of a held position
  int64_t layer_floor(size_t layer, const Layer& l) const;          // smallest length rewind can reach

  std::vector<Store> store_;  // per layer
  std::vector<int64_t> ring_; // per layer: ring size (Ring layers), else 0

  size_t token_bytes_ = 0;  // f32 K+V bytes of one token over all layers
  int64_t capacity_tokens_ = 0;
  std::map<SeqId, Sequence> seqs_;
  Pending* active_ = nullptr;  // the prepared, uncommitted step (at most one)
};

}  // namespace ptn
