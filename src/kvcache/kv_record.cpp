#include "kvcache/kv_record.h"

#include <cstdio>
#include <cstring>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/reader.h"
#include "kvcache/kv_common.h"
#include "kvcache/prefix_index.h"

namespace ptn::kv {
namespace {

constexpr char kMagic[8] = {'P', 'T', 'N', 'K', 'V', 'R', 'E', 'C'};
// Fixed part: magic, version, flags, program id, dtype, block size, layer count.
constexpr size_t kFixedHeader = 8 + 4 + 4 + 8 + 4 + 4 + 4;
// Bit 8 of a layer's attention-kind word: V is the start of each K row, the block holds K only.
constexpr uint32_t kKindVInK = 0x100;
constexpr size_t kLayerBytes = 5 * 4;

bool cache_dtype_code(uint32_t code) {
  return code == static_cast<uint32_t>(DType::F32) || code == static_cast<uint32_t>(DType::F16) ||
         code == static_cast<uint32_t>(DType::BF16) || code == static_cast<uint32_t>(DType::Q8_0) ||
         code == static_cast<uint32_t>(DType::Q4_0);
}

class Writer {
 public:
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
  std::vector<uint8_t> out;
};

void fail_corrupt(const std::string& source, const std::string& detail) {
  fail(ErrorKind::Corrupt, source, detail);
}

}  // namespace

uint64_t block_data_bytes(const KvIdentity& id, const std::string& source) {
  if (id.block_size < 1 || id.block_size > RecordLimits::kMaxBlockSize)
    fail_corrupt(source, "block size " + std::to_string(id.block_size) + " is outside 1.." +
                             std::to_string(RecordLimits::kMaxBlockSize));
  if (id.layers.empty() || id.layers.size() > RecordLimits::kMaxLayers)
    fail_corrupt(source, "layer count " + std::to_string(id.layers.size()) + " is outside 1.." +
                             std::to_string(RecordLimits::kMaxLayers));
  if (!cache_dtype_code(static_cast<uint32_t>(id.dtype)))
    fail_corrupt(source, "cache dtype code " + std::to_string(static_cast<uint32_t>(id.dtype)) +
                             " is not one of f32, f16, bf16, q8_0, q4_0");
  CacheSpec spec;
  spec.layers = id.layers;
  CacheOptions opt;
  opt.dtype = id.dtype;
  opt.block_size = id.block_size;
  try {
    validate_spec(spec, opt, source);
  } catch (const Error& e) {
    fail_corrupt(source, e.detail());
  }
  uint64_t total = 0;
  for (const LayerCacheSpec& L : id.layers) {
    const uint64_t rows = checked_mul(static_cast<uint64_t>(L.n_kv_heads), static_cast<uint64_t>(id.block_size), source);
    const uint64_t row = kv_row_bytes(id.dtype, L.head_dim_k) + (L.v_in_k ? 0 : kv_row_bytes(id.dtype, L.head_dim_v));
    total = checked_add(total, checked_mul(rows, row, source), source);
    if (total > RecordLimits::kMaxBlockBytes)
      fail_corrupt(source, "a block would hold more than " + std::to_string(RecordLimits::kMaxBlockBytes) + " bytes");
  }
  return total;
}

std::vector<uint8_t> encode_record(const KvRecord& r) {
  const std::string who = "kv record";
  const uint64_t bytes = block_data_bytes(r.id, who);
  const size_t bs = static_cast<size_t>(r.id.block_size);
  if (r.tokens.size() > RecordLimits::kMaxTokens || r.blocks.size() > RecordLimits::kMaxBlocks)
    fail(ErrorKind::InvalidArgument, who, "too many tokens or blocks for one record");
  if (!r.tokens.empty() && r.blocks.size() * bs > r.tokens.size())
    fail(ErrorKind::InvalidArgument, who, "the session's blocks cover more tokens than it holds");
  Writer w;
  w.raw(kMagic, 8);
  w.u32(kKvRecordVersion);
  w.u32(0);  // flags
  w.u64(r.id.program_id);
  w.u32(static_cast<uint32_t>(r.id.dtype));
  w.u32(static_cast<uint32_t>(r.id.block_size));
  w.u32(static_cast<uint32_t>(r.id.layers.size()));
  for (const LayerCacheSpec& L : r.id.layers) {
    w.u32(static_cast<uint32_t>(L.n_kv_heads));
    w.u32(static_cast<uint32_t>(L.head_dim_k));
    w.u32(static_cast<uint32_t>(L.head_dim_v));
    w.u32(static_cast<uint32_t>(L.kind) | (L.v_in_k ? kKindVInK : 0u));
    w.u32(static_cast<uint32_t>(L.kind == AttnKind::Full ? 0 : L.span));
  }
  w.u32(static_cast<uint32_t>(r.tokens.size()));
  w.raw(r.tokens.data(), r.tokens.size() * 4);
  if (r.meta.size() > RecordLimits::kMaxMeta) fail(ErrorKind::InvalidArgument, who, "metadata over the limit");
  w.u32(static_cast<uint32_t>(r.meta.size()));
  w.raw(r.meta.data(), r.meta.size());
  w.u32(static_cast<uint32_t>(r.blocks.size()));
  w.u64(bytes);
  for (size_t i = 0; i < r.blocks.size(); ++i) {
    const BlockData& b = r.blocks[i];
    if (b.tokens.size() != bs || b.data.size() != bytes)
      fail(ErrorKind::InvalidArgument, who,
           "block " + std::to_string(i) + " has " + std::to_string(b.tokens.size()) + " tokens and " +
               std::to_string(b.data.size()) + " bytes, expected " + std::to_string(bs) + " and " + std::to_string(bytes));
    if (!r.tokens.empty() && std::memcmp(b.tokens.data(), r.tokens.data() + i * bs, bs * 4) != 0)
      fail(ErrorKind::InvalidArgument, who, "block " + std::to_string(i) + "'s tokens differ from the session's");
    w.u64(b.hash);
    w.u64(b.parent);
    w.raw(b.tokens.data(), bs * 4);
    w.raw(b.data.data(), b.data.size());
  }
  w.u32(crc32c(w.out.data(), w.out.size()));
  return std::move(w.out);
}

KvRecord decode_record(const uint8_t* data, size_t size, const std::string& source) {
  if (size < kFixedHeader + 4 || !data) fail_corrupt(source, "too short for a kv record (" + std::to_string(size) + " bytes)");
  if (std::memcmp(data, kMagic, 8) != 0) fail_corrupt(source, "not a kv record (bad magic)");
  uint32_t stored_crc;
  std::memcpy(&stored_crc, data + size - 4, 4);
  if (crc32c(data, size - 4) != stored_crc) fail_corrupt(source, "checksum mismatch (the record is damaged)");
  ByteReader r(data, size - 4, source);
  r.skip(8, "magic");
  const uint32_t version = r.read<uint32_t>("version");
  if (version != kKvRecordVersion)
    fail_corrupt(source, "kv record version " + std::to_string(version) + " is not supported (this build reads " +
                             std::to_string(kKvRecordVersion) + ")");
  const uint32_t flags = r.read<uint32_t>("flags");
  if (flags != 0) fail_corrupt(source, "unknown flags " + std::to_string(flags));
  KvRecord rec;
  rec.id.program_id = r.read<uint64_t>("program id");
  const uint32_t dtype = r.read<uint32_t>("cache dtype");
  if (!cache_dtype_code(dtype)) fail_corrupt(source, "cache dtype code " + std::to_string(dtype) + " is not one of f32, f16, bf16, q8_0, q4_0");
  rec.id.dtype = static_cast<DType>(dtype);
  const uint32_t bs = r.read<uint32_t>("block size");
  if (bs < 1 || bs > RecordLimits::kMaxBlockSize)
    fail_corrupt(source, "block size " + std::to_string(bs) + " is outside 1.." + std::to_string(RecordLimits::kMaxBlockSize));
  rec.id.block_size = bs;
  const uint32_t n_layers = r.read<uint32_t>("layer count");
  if (n_layers < 1 || n_layers > RecordLimits::kMaxLayers)
    fail_corrupt(source, "layer count " + std::to_string(n_layers) + " is outside 1.." + std::to_string(RecordLimits::kMaxLayers));
  if (static_cast<uint64_t>(n_layers) * kLayerBytes > r.remaining()) fail_corrupt(source, "truncated in the layer table");
  rec.id.layers.resize(n_layers);
  for (uint32_t l = 0; l < n_layers; ++l) {
    LayerCacheSpec& L = rec.id.layers[l];
    const std::string at = "layer " + std::to_string(l) + ": ";
    const uint32_t hkv = r.read<uint32_t>("kv heads"), dk = r.read<uint32_t>("head dim k"), dv = r.read<uint32_t>("head dim v");
    const uint32_t kind_word = r.read<uint32_t>("attention kind"), span = r.read<uint32_t>("span");
    const uint32_t kind = kind_word & ~kKindVInK;
    if (hkv < 1 || hkv > RecordLimits::kMaxKvHeads) fail_corrupt(source, at + "kv heads " + std::to_string(hkv) + " out of range");
    if (dk < 1 || dk > RecordLimits::kMaxHeadDim || dv < 1 || dv > RecordLimits::kMaxHeadDim)
      fail_corrupt(source, at + "head dims " + std::to_string(dk) + "/" + std::to_string(dv) + " out of range");
    if (kind > 2) fail_corrupt(source, at + "attention kind " + std::to_string(kind) + " is not full (0), window (1) or chunk (2)");
    if ((kind == 0) != (span == 0) || span > (1u << 30))
      fail_corrupt(source, at + "span " + std::to_string(span) + " does not fit attention kind " + std::to_string(kind));
    L.n_kv_heads = hkv;
    L.head_dim_k = dk;
    L.head_dim_v = dv;
    L.kind = static_cast<AttnKind>(kind);
    L.span = span;
    L.v_in_k = (kind_word & kKindVInK) != 0;
    if (L.v_in_k && dv > dk) fail_corrupt(source, at + "V as a prefix of K with head dims " + std::to_string(dk) + "/" + std::to_string(dv));
  }
  const uint64_t bytes = block_data_bytes(rec.id, source);
  const uint32_t n_tokens = r.read<uint32_t>("token count");
  if (n_tokens > RecordLimits::kMaxTokens) fail_corrupt(source, "token count " + std::to_string(n_tokens) + " is over the limit");
  const uint8_t* tk = r.bytes(static_cast<uint64_t>(n_tokens) * 4, "tokens");
  rec.tokens.resize(n_tokens);
  if (n_tokens) std::memcpy(rec.tokens.data(), tk, static_cast<size_t>(n_tokens) * 4);
  for (uint32_t i = 0; i < n_tokens; ++i)
    if (rec.tokens[i] < 0) fail_corrupt(source, "token " + std::to_string(i) + " is negative (" + std::to_string(rec.tokens[i]) + ")");
  const uint32_t n_meta = r.read<uint32_t>("metadata length");
  if (n_meta > RecordLimits::kMaxMeta) fail_corrupt(source, "metadata of " + std::to_string(n_meta) + " bytes is over the limit");
  const uint8_t* meta = r.bytes(n_meta, "metadata");
  rec.meta.assign(reinterpret_cast<const char*>(meta), n_meta);
  const uint32_t n_blocks = r.read<uint32_t>("block count");
  const uint64_t stored_bytes = r.read<uint64_t>("block bytes");
  if (stored_bytes != bytes)
    fail_corrupt(source, "block bytes " + std::to_string(stored_bytes) + " differ from the " + std::to_string(bytes) +
                             " its layers and dtype imply");
  const uint64_t per_block = 16 + 4ull * bs + bytes;
  if (n_blocks > RecordLimits::kMaxBlocks || static_cast<uint64_t>(n_blocks) * per_block != r.remaining())
    fail_corrupt(source, std::to_string(n_blocks) + " blocks of " + std::to_string(per_block) + " bytes do not fill the " +
                             std::to_string(r.remaining()) + " bytes left");
  if (n_tokens > 0 && static_cast<uint64_t>(n_blocks) * bs > n_tokens)
    fail_corrupt(source, std::to_string(n_blocks) + " blocks cover more than the session's " + std::to_string(n_tokens) + " tokens");
  rec.blocks.resize(n_blocks);
  for (uint32_t i = 0; i < n_blocks; ++i) {
    BlockData& b = rec.blocks[i];
    const std::string at = "block " + std::to_string(i) + ": ";
    b.hash = r.read<uint64_t>("block hash");
    b.parent = r.read<uint64_t>("block parent");
    b.tokens.resize(bs);
    std::memcpy(b.tokens.data(), r.bytes(4ull * bs, "block tokens"), 4ull * bs);
    const uint8_t* d = r.bytes(bytes, "block data");
    b.data.assign(d, d + bytes);
    for (uint32_t t = 0; t < bs; ++t)
      if (b.tokens[t] < 0) fail_corrupt(source, at + "token " + std::to_string(t) + " is negative");
    if (hash_block(b.parent, b.tokens.data(), bs) != b.hash)
      fail_corrupt(source, at + "its hash does not match its parent and tokens");
    if (n_tokens > 0) {
      if (std::memcmp(b.tokens.data(), rec.tokens.data() + static_cast<size_t>(i) * bs, 4ull * bs) != 0)
        fail_corrupt(source, at + "its tokens differ from the session's tokens at " + std::to_string(uint64_t{i} * bs));
      if (i > 0 && b.parent != rec.blocks[i - 1].hash) fail_corrupt(source, at + "it does not chain on block " + std::to_string(i - 1));
    }
  }
  return rec;
}

void check_identity(const KvIdentity& found, const KvIdentity& expected, const std::string& source) {
  auto bad = [&](const std::string& what, const std::string& f, const std::string& e) {
    fail(ErrorKind::InvalidArgument, source, what + " " + f + " in the record, " + e + " in this cache: refused");
  };
  if (found.program_id != expected.program_id) {
    char a[20], b[20];
    std::snprintf(a, sizeof a, "%016llx", static_cast<unsigned long long>(found.program_id));
    std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(expected.program_id));
    bad("program", a, b);
  }
  if (found.dtype != expected.dtype) bad("cache dtype", dtype_name(found.dtype), dtype_name(expected.dtype));
  if (found.block_size != expected.block_size)
    bad("block size", std::to_string(found.block_size), std::to_string(expected.block_size));
  if (found.layers.size() != expected.layers.size())
    bad("layer count", std::to_string(found.layers.size()), std::to_string(expected.layers.size()));
  for (size_t l = 0; l < found.layers.size(); ++l) {
    const LayerCacheSpec& f = found.layers[l];
    const LayerCacheSpec& e = expected.layers[l];
    auto shape = [](const LayerCacheSpec& s) {
      return std::to_string(s.n_kv_heads) + "x" + std::to_string(s.head_dim_k) + "/" + std::to_string(s.head_dim_v) +
             (s.kind == AttnKind::Full ? std::string(" full") : (s.kind == AttnKind::Window ? " window " : " chunk ") + std::to_string(s.span)) +
             (s.v_in_k ? ", V in K" : "");
    };
    const bool same = f.n_kv_heads == e.n_kv_heads && f.head_dim_k == e.head_dim_k && f.head_dim_v == e.head_dim_v && f.v_in_k == e.v_in_k &&
                      f.kind == e.kind && (f.kind == AttnKind::Full || f.span == e.span);
    if (!same) bad("layer " + std::to_string(l) + " (kv heads x head dims, policy)", shape(f), shape(e));
  }
}

}  // namespace ptn::kv
