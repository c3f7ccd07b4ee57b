#include "kvcache/cache.h"

#include <unordered_map>

#include "core/error.h"

namespace ptn {

StepTxn::StepTxn(StepTxn&& o) noexcept { *this = std::move(o); }

StepTxn& StepTxn::operator=(StepTxn&& o) noexcept {
  if (this != &o) {
    if (cache_) cache_->rollback(*this);
    cache_ = o.cache_;
    batch_ = std::move(o.batch_);
    state_ = std::move(o.state_);
    o.cache_ = nullptr;
  }
  return *this;
}

StepTxn::~StepTxn() {
  if (cache_) cache_->rollback(*this);
}

StepTxn KVCache::prepare(const StepBatch& batch) {
  check_batch_positions(*this, batch);
  StepTxn txn;
  txn.state_ = do_prepare(batch);
  txn.batch_ = batch;
  txn.cache_ = this;
  return txn;
}

void KVCache::commit(StepTxn& txn) {
  if (txn.cache_ != this) fail(ErrorKind::Internal, name(), "commit of a step that is not active here");
  do_commit(txn.batch_, txn.state_.get());
  txn.cache_ = nullptr;
  txn.state_.reset();
}

void KVCache::rollback(StepTxn& txn) {
  if (txn.cache_ != this) return;
  txn.cache_ = nullptr;
  try {
    do_rollback(txn.batch_, txn.state_.get());
  } catch (...) {
  }
  txn.state_.reset();
}

void check_batch_positions(const KVCache& cache, const StepBatch& batch) {
  std::unordered_map<SeqId, int64_t> next;
  for (size_t i = 0; i < batch.rows.size(); ++i) {
    const StepRow& r = batch.rows[i];
    auto it = next.find(r.seq);
    if (it == next.end()) {
      if (!cache.has_sequence(r.seq))
        fail(ErrorKind::InvalidArgument, cache.name(),
             "row " + std::to_string(i) + ": unknown sequence " + std::to_string(r.seq));
      it = next.emplace(r.seq, cache.length(r.seq)).first;
    }
    if (r.pos != it->second)
      fail(ErrorKind::InvalidArgument, cache.name(),
           "row " + std::to_string(i) + ": sequence " + std::to_string(r.seq) + " expects position " +
               std::to_string(it->second) + ", got " + std::to_string(r.pos));
    if (cache.spec().max_positions > 0 && r.pos >= cache.spec().max_positions)
      fail(ErrorKind::Capacity, cache.name(),
           "position " + std::to_string(r.pos) + " is beyond the model's context of " +
               std::to_string(cache.spec().max_positions));
    ++it->second;
  }
  const int64_t max_step = cache.options().max_step_tokens;
  if (max_step > 0)
    for (const auto& [seq, end] : next)
      if (end - cache.length(seq) > max_step)
        fail(ErrorKind::InvalidArgument, cache.name(),
             "the step appends " + std::to_string(end - cache.length(seq)) + " rows to sequence " +
                 std::to_string(seq) + ", more than max_step_tokens = " + std::to_string(max_step));
}

}  // namespace ptn
