// A pool of fixed-size KV blocks with reference counts, a free list, and cached free blocks
// kept in LRU order for prefix reuse.
//
// One block holds `block_size` consecutive tokens of one sequence for all layers of one layer
// group, K and V (PagedCache keeps one pool and one block table per sequence per group). Inside a block, layer l's K region
// is [Hkv][block_size][row bytes of Dk] and its V region [Hkv][block_size][row bytes of Dv],
// so one kv head's rows of consecutive tokens are contiguous (what the attention kernel walks).
//
// A block is in exactly one state:
//   used   refs > 0 (held by sequences or by a prepared step)
//   cached refs == 0, registered in the prefix index, in the LRU list (evicted oldest first)
//   free   refs == 0, not registered, on the free list
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "kvcache/prefix_index.h"

namespace ptn {

struct BlockStats {
  int64_t total = 0;
  int64_t used = 0;    // refs > 0
  int64_t shared = 0;  // refs > 1 (a subset of used)
  int64_t cached = 0;  // refs == 0, reusable through the prefix index
  int64_t free = 0;    // refs == 0, holding nothing
  int64_t indexed = 0; // blocks registered in the prefix index (used or cached)
};

namespace kv {

class BlockPool {
 public:
  BlockPool(int64_t n_blocks, size_t block_bytes);

  int64_t n_blocks() const { return static_cast<int64_t>(meta_.size()); }
  size_t block_bytes() const { return block_bytes_; }
  uint8_t* data(int32_t block) { return storage_.get() + static_cast<size_t>(block) * block_bytes_; }
  const uint8_t* data(int32_t block) const { return storage_.get() + static_cast<size_t>(block) * block_bytes_; }

  // Blocks that allocate() can hand out now: free plus cached (evictable).
  int64_t available() const { return static_cast<int64_t>(free_.size() + lru_.size()); }
  // A block with refs = 1: from the free list, else the least recently used cached block
  // (which leaves the prefix index). Throws Capacity if none is available.
  int32_t allocate();
  void ref(int32_t block);    // refs++ (a cached block leaves the LRU list)
  void unref(int32_t block);  // refs--; at 0 the block becomes cached (if indexed) or free
  int32_t refs(int32_t block) const { return meta_[static_cast<size_t>(block)].refs; }
  bool indexed(int32_t block) const { return meta_[static_cast<size_t>(block)].indexed; }

  // Prefix index over full blocks (see prefix_index.h).
  int32_t find_cached(uint64_t hash, uint64_t parent, const int32_t* tokens, int64_t n) const {
    return index_.find(hash, parent, tokens, n);
  }
  // Registers a used block under its hash; false if the hash is already registered.
  bool register_block(int32_t block, uint64_t hash, uint64_t parent, const int32_t* tokens, int64_t n);
  // A cached block leaves the prefix index and the LRU list and becomes free; false (changing
  // nothing) when the block is used or not cached.
  bool drop_cached(int32_t block);

  BlockStats stats() const;

 private:
  struct Meta {
    int32_t refs = 0;
    bool indexed = false;
    uint64_t hash = 0;
    std::list<int32_t>::iterator lru_pos;  // valid while cached
  };
  void forget(int32_t block);  // leave the prefix index

  size_t block_bytes_;
  std::unique_ptr<uint8_t[]> storage_;  // n_blocks * block_bytes
  std::vector<Meta> meta_;
  std::vector<int32_t> free_;  // a stack
  std::list<int32_t> lru_;     // cached blocks, least recently used first
  PrefixIndex index_;
  int64_t shared_ = 0;
};

}  // namespace kv
}  // namespace ptn
