// Chained hashes of full cache blocks, and the index from such a hash to the block holding it.
//
// The hash of block i of a sequence is hash_block(hash of block i-1 (or prefix_root(extra
// keys) for i = 0), token ids of block i). Extra keys (a tenant salt, an adapter id, an image
// hash...) enter the root, so sequences with different keys never share blocks. The index
// stores the parent hash and the tokens beside each entry and compares them on lookup, so a
// 64-bit collision can never attach the wrong block.
#pragma once
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace ptn::kv {

// The root of a hash chain for the given extra keys (empty: the default root).
uint64_t prefix_root(const std::vector<uint64_t>& extra_keys = {});
// hash(parent, tokens[0..n)).
uint64_t hash_block(uint64_t parent, const int32_t* tokens, int64_t n);

class PrefixIndex {
 public:
  struct Entry {
    int32_t block = -1;
    uint64_t parent = 0;
    std::vector<int32_t> tokens;
  };
  // The block registered under `hash` whose parent and tokens match, or -1.
  int32_t find(uint64_t hash, uint64_t parent, const int32_t* tokens, int64_t n) const;
  // Registers `block`; false (and no change) if the hash is already registered.
  bool insert(uint64_t hash, uint64_t parent, const int32_t* tokens, int64_t n, int32_t block);
  void erase(uint64_t hash);
  size_t size() const { return map_.size(); }

 private:
  std::unordered_map<uint64_t, Entry> map_;
};

}  // namespace ptn::kv
