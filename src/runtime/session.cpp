#include "runtime/session.h"

#include <algorithm>

#include "core/error.h"
#include "kvcache/factory.h"
#include "kvcache/paged_cache.h"
#include "runtime/kv_state.h"

namespace ptn {

Session::Session(std::shared_ptr<const Program> program, const SessionOptions& o, ThreadPool* pool)
    : program_(std::move(program)) {
  const ProgramMeta& meta = program_->meta();
  int64_t model_ctx = meta.static_cache ? meta.static_context : meta.spec.max_position_embeddings;
  if (model_ctx <= 0) model_ctx = 4096;
  if (o.context < 0) fail(ErrorKind::InvalidArgument, "--ctx", "must be >= 0");
  context_ = o.context > 0 ? std::min(o.context, model_ctx) : model_ctx;
  exec_ = std::make_unique<Executor>(program_, o.mode, meta.max_seq_length, pool);
  if (!meta.static_cache) {
    CacheOptions co;
    co.dtype = o.cache_dtype;
    co.block_size = o.block_size;
    co.capacity_tokens = context_ + o.block_size;
    cache_ = make_cache(o.cache_kind, meta.cache_spec, co);
    scope_ = std::make_unique<CacheScope>(*exec_, *cache_);
    cache_->add_sequence(0);
  }
}

Session::~Session() = default;

const float* Session::feed(const std::vector<int32_t>& tokens,
                           const std::function<void(int64_t, const float*)>& on_logits) {
  if (tokens.empty()) fail(ErrorKind::InvalidArgument, "session", "nothing to feed");
  if (position_ + static_cast<int64_t>(tokens.size()) > context_)
    fail(ErrorKind::Capacity, "session",
         "the context of " + std::to_string(context_) + " tokens is full (" + std::to_string(position_) + " used, " +
             std::to_string(tokens.size()) + " more requested)");
  const int64_t chunk = program_->meta().max_seq_length;
  const float* logits = nullptr;
  const int64_t vocab = program_->meta().spec.vocab_size;
  // Checked up front: a bad id in a later chunk must not leave the earlier chunks fed.
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab)
      fail(ErrorKind::InvalidArgument, "session",
           "token " + std::to_string(i) + ": id " + std::to_string(tokens[i]) + " outside the vocabulary of " +
               std::to_string(vocab) + " (nothing was fed)");
  const int64_t start = position_;
  try {
    for (size_t b = 0; b < tokens.size(); b += static_cast<size_t>(chunk)) {
      const size_t e = std::min(tokens.size(), b + static_cast<size_t>(chunk));
      StepBatch batch;
      for (size_t i = b; i < e; ++i)
        batch.rows.push_back({0, static_cast<int32_t>(position_ + static_cast<int64_t>(i - b)), tokens[i]});
      int64_t n = 0;
      logits = exec_->step(batch, on_logits ? OutputRows::All : OutputRows::LastPerSequence, &n);
      if (on_logits)
        for (int64_t r = 0; r < n; ++r) on_logits(static_cast<int64_t>(b) + r, logits + r * vocab);
      if (on_logits) logits += (n - 1) * vocab;
      position_ += static_cast<int64_t>(e - b);
    }
  } catch (...) {
    // Undo what was fed (a step or the callback failed), so the session is as before the call,
    // unless a windowed cache already released positions below `start`: then it keeps what
    // the cache holds.
    if (cache_) {
      if (cache_->length(0) != start && cache_->rewind_floor(0) <= start) cache_->rewind(0, start);
      position_ = cache_->length(0);
    } else {
      position_ = start;
    }
    throw;
  }
  return logits;
}

void Session::rewind(int64_t n) {
  if (n < 0 || n > position_)
    fail(ErrorKind::InvalidArgument, "session rewind",
         "cannot rewind to " + std::to_string(n) + " (position " + std::to_string(position_) + ")");
  if (cache_ && n == 0) {
    // Back to empty: a new sequence, which a windowed cache allows even after it released the
    // positions a rewind to 0 would need (perplexity's chunks, chat's reset).
    cache_->clear(0);
    cache_->add_sequence(0);
  } else if (cache_) {
    cache_->rewind(0, n);
  } else if (n == 0) {
    exec_->reset_static_cache();
  }
  position_ = n;
}

namespace {

PagedCache* paged_or_throw(KVCache* cache, const char* what) {
  auto* p = dynamic_cast<PagedCache*>(cache);
  if (!p) fail(ErrorKind::Unsupported, what, "KV save/restore needs the paged cache (--cache paged)");
  return p;
}

}  // namespace

kv::KvRecord Session::save_kv() const {
  const PagedCache* pc = paged_or_throw(cache_.get(), "session save");
  kv::KvRecord r;
  r.id = pc->identity(program_kv_id(*program_));
  r.tokens = pc->sequence_tokens(0);
  const int64_t n = pc->saveable_blocks(0);
  r.blocks.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) r.blocks.push_back(pc->save_block(0, i));
  return r;
}

int64_t Session::restore_kv(const kv::KvRecord& record, const std::string& source) {
  PagedCache* pc = paged_or_throw(cache_.get(), "session restore");
  if (position_ != 0)
    fail(ErrorKind::InvalidArgument, source,
         "restore needs an empty session (it holds " + std::to_string(position_) + " tokens)");
  kv::check_identity(record.id, pc->identity(program_kv_id(*program_)), source);
  const int64_t n_tok = static_cast<int64_t>(record.tokens.size());
  if (n_tok == 0) fail(ErrorKind::InvalidArgument, source, "the record holds no session tokens");
  if (n_tok > context_)
    fail(ErrorKind::InvalidArgument, source,
         std::to_string(n_tok) + " tokens do not fit the context of " + std::to_string(context_));
  const int64_t vocab = program_->meta().spec.vocab_size;
  for (int64_t i = 0; i < n_tok; ++i)
    if (record.tokens[static_cast<size_t>(i)] >= vocab)
      fail(ErrorKind::InvalidArgument, source,
           "token " + std::to_string(i) + ": id " + std::to_string(record.tokens[static_cast<size_t>(i)]) +
               " outside the vocabulary of " + std::to_string(vocab));
  for (const kv::BlockData& b : record.blocks)
    if (!pc->restore_block(b)) break;  // no room (or a collision): the rest is recomputed
  position_ = pc->reuse_prefix(0, record.tokens);
  return position_;
}

}  // namespace ptn
