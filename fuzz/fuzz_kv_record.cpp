// KV records (kvcache/kv_record.h): decode_record on the input as given and, since a mutated
// record rarely keeps its CRC, once more with the last 4 bytes replaced by the CRC32C of the
// rest, so the parser behind the checksum is reached. A decoded record must encode back to the
// same bytes; when its identity is small, a PagedCache of that identity restores its blocks
// (check_identity against itself, restore_block, reuse_prefix on its tokens).
// Any input must either decode or throw ptn::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/crc32c.h"
#include "core/error.h"
#include "kvcache/kv_record.h"
#include "kvcache/paged_cache.h"
#include "fuzz_common.h"

namespace ptn::fuzz {

namespace {

// Restores a decoded record into a cache of its own identity (when small enough to build).
void restore_into_cache(const kv::KvRecord& rec) {
  const uint64_t bytes = kv::block_data_bytes(rec.id, "fuzz");
  if (bytes > (64u << 10) || rec.id.layers.size() > 16 || rec.blocks.size() > 64) return;
  CacheSpec spec;
  spec.layers = rec.id.layers;
  CacheOptions opt;
  opt.dtype = rec.id.dtype;
  opt.block_size = rec.id.block_size;
  opt.capacity_tokens = 8 * rec.id.block_size;  // fewer blocks than a record may hold: restore runs out
  PagedCache cache(spec, opt);
  kv::check_identity(rec.id, cache.identity(rec.id.program_id), "fuzz");
  for (const kv::BlockData& b : rec.blocks) (void)cache.restore_block(b);
  cache.add_sequence(0);
  const int64_t n = cache.reuse_prefix(0, rec.tokens);
  if (n < 0 || n > static_cast<int64_t>(rec.tokens.size()) || n % rec.id.block_size != 0) std::abort();
  if (cache.saveable_blocks(0) > n / rec.id.block_size) std::abort();
  for (int64_t i = 0; i < cache.saveable_blocks(0); ++i) {
    const kv::BlockData b = cache.save_block(0, i);
    if (b.data != rec.blocks[static_cast<size_t>(i)].data) std::abort();  // restored bytes are what was stored
  }
}

int decode_once(const uint8_t* data, size_t size) {
  kv::KvRecord rec;
  try {
    rec = kv::decode_record(data, size, "fuzz input");
  } catch (const ptn::Error&) {
    return 0;
  }
  const std::vector<uint8_t> again = kv::encode_record(rec);
  if (again.size() != size || std::memcmp(again.data(), data, size) != 0) std::abort();  // not canonical
  try {
    restore_into_cache(rec);
  } catch (const ptn::Error&) {
    std::abort();  // a record that decoded must restore into a cache of its identity
  }
  return 1;
}

}  // namespace

int run_kv_record(const uint8_t* data, size_t size) {
  int ok = decode_once(data, size);
  if (size >= 8) {
    std::vector<uint8_t> fixed(data, data + size);
    const uint32_t crc = crc32c(fixed.data(), size - 4);
    std::memcpy(fixed.data() + size - 4, &crc, 4);
    ok |= decode_once(fixed.data(), size);
  }
  return ok;
}

}  // namespace ptn::fuzz

PTN_FUZZ_ENTRY(run_kv_record)
