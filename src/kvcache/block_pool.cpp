#include "kvcache/block_pool.h"

#include <new>

#include "core/error.h"

namespace ptn::kv {

BlockPool::BlockPool(int64_t n_blocks, size_t block_bytes) : block_bytes_(block_bytes) {
  if (n_blocks < 1 || n_blocks > (int64_t{1} << 30))
    fail(ErrorKind::InvalidArgument, "kv block pool", "block count " + std::to_string(n_blocks) + " is outside 1..2^30");
  if (block_bytes == 0) fail(ErrorKind::InvalidArgument, "kv block pool", "zero-byte blocks");
  const uint64_t total = checked_mul(static_cast<uint64_t>(n_blocks), block_bytes, "kv block pool size");
  storage_.reset(new (std::nothrow) uint8_t[total]);
  if (!storage_)
    fail(ErrorKind::Capacity, "kv block pool",
         "cannot allocate " + std::to_string(total) + " bytes for " + std::to_string(n_blocks) + " blocks");
  meta_.resize(static_cast<size_t>(n_blocks));
  free_.reserve(static_cast<size_t>(n_blocks));
  // Hand out low block ids first (a stack: push the highest first).
  for (int64_t b = n_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

int32_t BlockPool::allocate() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    b = lru_.front();
    lru_.pop_front();
    forget(b);
  } else {
    fail(ErrorKind::Capacity, "kv block pool", "all " + std::to_string(n_blocks()) + " blocks are in use");
  }
  meta_[static_cast<size_t>(b)].refs = 1;
  return b;
}

void BlockPool::ref(int32_t block) {
  Meta& m = meta_[static_cast<size_t>(block)];
  if (m.refs == 0) {
    if (!m.indexed) fail(ErrorKind::Internal, "kv block pool", "ref of a free block " + std::to_string(block));
    lru_.erase(m.lru_pos);
  } else if (m.refs == 1) {
    ++shared_;
  }
  ++m.refs;
}

void BlockPool::unref(int32_t block) {
  Meta& m = meta_[static_cast<size_t>(block)];
  if (m.refs <= 0) fail(ErrorKind::Internal, "kv block pool", "unref of an unreferenced block " + std::to_string(block));
  if (m.refs == 2) --shared_;
  if (--m.refs > 0) return;
  if (m.indexed) {
    m.lru_pos = lru_.insert(lru_.end(), block);
  } else {
    free_.push_back(block);
  }
}

bool BlockPool::register_block(int32_t block, uint64_t hash, uint64_t parent, const int32_t* tokens, int64_t n) {
  Meta& m = meta_[static_cast<size_t>(block)];
  if (m.indexed || m.refs == 0) return false;
  if (!index_.insert(hash, parent, tokens, n, block)) return false;
  m.indexed = true;
  m.hash = hash;
  return true;
}

bool BlockPool::drop_cached(int32_t block) {
  Meta& m = meta_[static_cast<size_t>(block)];
  if (m.refs != 0 || !m.indexed) return false;
  lru_.erase(m.lru_pos);
  forget(block);
  free_.push_back(block);
  return true;
}

void BlockPool::forget(int32_t block) {
  Meta& m = meta_[static_cast<size_t>(block)];
  if (!m.indexed) return;
  index_.erase(m.hash);
  m.indexed = false;
  m.hash = 0;
}

BlockStats BlockPool::stats() const {
  BlockStats s;
  s.total = n_blocks();
  s.cached = static_cast<int64_t>(lru_.size());
  s.free = static_cast<int64_t>(free_.size());
  s.used = s.total - s.cached - s.free;
  s.shared = shared_;
  s.indexed = static_cast<int64_t>(index_.size());
  return s;
}

}  // namespace ptn::kv
