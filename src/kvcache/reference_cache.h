// SequenceReferenceCache: the oracle. Per sequence and layer, K and V are contiguous f32
// arrays; attention is a plain loop with double accumulation that masks by position. It is
// meant to be obviously correct, not fast. The cache dtype option is ignored (always f32).
//
// Capacity: options.capacity_tokens (or capacity_bytes / f32 bytes per token) bounds the
// tokens held over all sequences together; 0 for both means unlimited.
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

  size_t bytes_used() const override;
  size_t bytes_reserved() const override;

  void update_and_attend(StepTxn& txn, int64_t layer, const float* q, const float* k, const float* v,
                         int64_t n_q_heads, const AttendParams& params, float* out) override;

  // Token limit over all sequences (0: unlimited).
  int64_t capacity_tokens() const { return capacity_tokens_; }

 protected:
  std::shared_ptr<void> do_prepare(const StepBatch& batch) override;
  void do_commit(const StepBatch& batch, void* state) override;
  void do_rollback(const StepBatch& batch, void* state) override;

 private:
  struct Layer {
    std::vector<float> k;  // [length, Hkv, Dk]
    std::vector<float> v;  // [length, Hkv, Dv]
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

  size_t token_bytes_ = 0;  // f32 K+V bytes of one token over all layers
  int64_t capacity_tokens_ = 0;
  std::map<SeqId, Sequence> seqs_;
  Pending* active_ = nullptr;  // the prepared, uncommitted step (at most one)
};

}  // namespace ptn
