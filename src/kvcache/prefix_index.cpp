#include "kvcache/prefix_index.h"

#include <algorithm>

namespace ptn::kv {

namespace {

// A 64-bit finaliser with full avalanche (every input bit flips each output bit with
// probability ~1/2): two rounds of xor-shift and multiplication by odd constants.
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ull;
  x ^= x >> 32;
  return x;
}

// Absorbs one 64-bit word into the state: the state is rotated and multiplied so that the
// order of words matters, then mixed.
inline uint64_t absorb(uint64_t state, uint64_t word) {
  state ^= mix64(word + 0x9e3779b97f4a7c15ull);
  state = (state << 23) | (state >> 41);
  return state * 0xa0761d6478bd642full + 0xe7037ed1a0b428dbull;
}

}  // namespace

uint64_t prefix_root(const std::vector<uint64_t>& extra_keys) {
  uint64_t h = 0x70746e2d6b766361ull;  // "ptn-kvca"
  h = absorb(h, extra_keys.size());
  for (uint64_t k : extra_keys) h = absorb(h, k);
  return mix64(h);
}

uint64_t hash_block(uint64_t parent, const int32_t* tokens, int64_t n) {
  uint64_t h = absorb(0x5bd1e9955bd1e995ull, parent);
  h = absorb(h, static_cast<uint64_t>(n));
  int64_t i = 0;
  for (; i + 1 < n; i += 2)
    h = absorb(h, (static_cast<uint64_t>(static_cast<uint32_t>(tokens[i])) << 32) |
                      static_cast<uint32_t>(tokens[i + 1]));
  if (i < n) h = absorb(h, static_cast<uint32_t>(tokens[i]) | (1ull << 40));
  return mix64(h);
}

int32_t PrefixIndex::find(uint64_t hash, uint64_t parent, const int32_t* tokens, int64_t n) const {
  auto it = map_.find(hash);
  if (it == map_.end()) return -1;
  const Entry& e = it->second;
  if (e.parent != parent || static_cast<int64_t>(e.tokens.size()) != n || !std::equal(tokens, tokens + n, e.tokens.begin()))
    return -1;
  return e.block;
}

bool PrefixIndex::insert(uint64_t hash, uint64_t parent, const int32_t* tokens, int64_t n, int32_t block) {
  if (map_.count(hash)) return false;
  map_.emplace(hash, Entry{block, parent, std::vector<int32_t>(tokens, tokens + n)});
  return true;
}

void PrefixIndex::erase(uint64_t hash) { map_.erase(hash); }

}  // namespace ptn::kv
