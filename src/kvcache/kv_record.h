// KV records: full blocks of a PagedCache with the identity of the cache that computed them, in
// a bounded, checksummed binary form (docs/kv-format.md). One format serves sessions on disk (a
// sequence's tokens and its full blocks) and a shared prefix tier (one block per record).
//
// A block's bytes are only meaningful to a cache of the same identity: the same program (its
// manifest's checksum), cache dtype, block size and layer shapes and policies. decode_record
// checks the record's own consistency (Corrupt); check_identity compares it with a cache's
// (InvalidArgument naming the first field that differs). Restoring never trusts a block whose
// chained hash does not match its parent and tokens.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kvcache/cache.h"

namespace ptn::kv {

// What must match for a block's bytes to mean the same thing to another cache.
struct KvIdentity {
  uint64_t program_id = 0;  // the program's manifest: (manifest bytes << 32) | manifest CRC32C
  DType dtype = DType::F32;
  int64_t block_size = 0;
  std::vector<LayerCacheSpec> layers;  // kv heads, head dims and attention policy per layer
};

// One full block: its chained hash (kv::hash_block(parent, tokens)) and the bytes of every layer
// group in PagedCache's group order (each group's block as its pool stores it).
struct BlockData {
  uint64_t hash = 0, parent = 0;
  std::vector<int32_t> tokens;  // [block_size]
  std::vector<uint8_t> data;    // [block_data_bytes(identity)]
};

struct KvRecord {
  KvIdentity id;
  // A session's tokens (every token of the sequence, so also the partial tail the blocks do not
  // cover; the blocks are its leading full blocks). Empty in a tier record.
  std::vector<int32_t> tokens;
  // The writer's own bytes, opaque here (ptn chat: the conversation as JSON); at most kMaxMeta.
  std::string meta;
  std::vector<BlockData> blocks;
};

// Bounds every decoded count is checked against before anything is allocated.
struct RecordLimits {
  static constexpr uint32_t kMaxLayers = 4096;
  static constexpr uint32_t kMaxBlockSize = 4096;
  static constexpr uint32_t kMaxKvHeads = 4096;
  static constexpr uint32_t kMaxHeadDim = 65536;
  static constexpr uint32_t kMaxTokens = 1u << 24;
  static constexpr uint32_t kMaxBlocks = 1u << 20;
  static constexpr uint32_t kMaxMeta = 16u << 20;
  static constexpr uint64_t kMaxBlockBytes = 1ull << 30;
};

inline constexpr uint32_t kKvRecordVersion = 1;

// Bytes of one block over all layers (K and V, every group) for an identity. Throws Corrupt
// (naming `source`) when the identity is out of bounds or not a valid cache spec.
uint64_t block_data_bytes(const KvIdentity& id, const std::string& source);

// The record's bytes. Throws InvalidArgument when the record is inconsistent (a block of the
// wrong size, tokens that differ from the session's tokens...).
std::vector<uint8_t> encode_record(const KvRecord& record);
// Parses and checks bytes written by encode_record: magic, version, bounds, checksum, every
// block's chained hash, and for a session that block i holds tokens[i*bs, (i+1)*bs) and chains
// on block i-1. Any input either decodes or throws ptn::Error (Corrupt), naming `source`.
KvRecord decode_record(const uint8_t* data, size_t size, const std::string& source);

// Throws InvalidArgument naming `source` and the first field of `found` that differs from
// `expected` (program, dtype, block size, layer count, a layer's shape or policy).
void check_identity(const KvIdentity& found, const KvIdentity& expected, const std::string& source);

}  // namespace ptn::kv
