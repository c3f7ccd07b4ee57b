#include "kvcache/paged_cache.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "kvcache/kv_common.h"
#include "kernels/attention_paged.h"
#include "kvcache/prefix_index.h"

namespace ptn {

// A prepared step: per sequence of the batch and per layer group, its pending block table and
// what prepare allocated for it; per row, which sequence entry it belongs to.
struct PagedCache::Pending {
  struct GroupPending {
    std::vector<int32_t> table;      // pending block table (covers old_length + n_new)
    std::vector<int32_t> allocated;  // blocks prepare allocated (refs held by this step)
    int32_t replaced = -1;           // committed last block the copy-on-write replaces
  };
  struct Seq {
    SeqId id = 0;
    int64_t old_length = 0;
    int64_t n_new = 0;
    std::vector<GroupPending> g;  // per layer group
  };
  std::vector<Seq> seqs;
  std::vector<int32_t> row_seq;  // [T] index into seqs
  std::vector<bool> layer_done;
};

int64_t PagedCache::compute_blocks(const CacheOptions& options, size_t block_bytes, const std::string& who) {
  if (options.capacity_tokens > 0) return (options.capacity_tokens + options.block_size - 1) / options.block_size;
  if (options.capacity_bytes > 0) {
    const uint64_t n = options.capacity_bytes / block_bytes;
    if (n == 0)
      fail(ErrorKind::InvalidArgument, who,
           "capacity_bytes " + std::to_string(options.capacity_bytes) + " is less than one block (" +
               std::to_string(block_bytes) + " bytes)");
    return static_cast<int64_t>(std::min<uint64_t>(n, uint64_t{1} << 30));
  }
  fail(ErrorKind::InvalidArgument, who, "set capacity_tokens or capacity_bytes (both are 0)");
}

void PagedCache::build_groups() {
  kv::validate_spec(spec_, options_, name());
  const uint64_t bs = static_cast<uint64_t>(block_size_);
  std::vector<uint64_t> off;  // per group: bytes laid out so far
  for (size_t l = 0; l < spec_.layers.size(); ++l) {
    const LayerCacheSpec& L = spec_.layers[l];
    const int64_t span = L.kind == AttnKind::Full ? 0 : L.span;
    int g = 0;
    while (g < static_cast<int>(groups_.size()) && !(groups_[g].kind == L.kind && groups_[g].span == span)) ++g;
    if (g == static_cast<int>(groups_.size())) {
      groups_.push_back(Group{L.kind, span, {}, 0});
      off.push_back(0);
    }
    groups_[g].layers.push_back(static_cast<int64_t>(l));
    LayerLayout lay;
    lay.group = g;
    lay.k_row = kv::kv_row_bytes(options_.dtype, L.head_dim_k);
    lay.v_row = kv::kv_row_bytes(options_.dtype, L.head_dim_v);
    const uint64_t hkv = static_cast<uint64_t>(L.n_kv_heads);
    lay.k_off = static_cast<size_t>(off[g]);
    off[g] = checked_add(off[g], checked_mul(hkv * bs, lay.k_row, "paged kv cache block size"), "paged kv cache block size");
    if (L.v_in_k) {  // V read from the start of each K row: no V region (head_dim_v values of a K row are whole blocks)
      lay.v_in_k = true;
      lay.v_off = lay.k_off;
      lay.v_row = lay.k_row;
    } else {
      lay.v_off = static_cast<size_t>(off[g]);
      off[g] = checked_add(off[g], checked_mul(hkv * bs, lay.v_row, "paged kv cache block size"), "paged kv cache block size");
    }
    layout_.push_back(lay);
  }
  uint64_t total = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    groups_[g].block_bytes = static_cast<size_t>(off[g]);
    total = checked_add(total, off[g], "paged kv cache block size");
  }
  // Every group gets the same block count: a byte budget covers n blocks of every group.
  const int64_t n = compute_blocks(options_, static_cast<size_t>(total), name());
  pools_.reserve(groups_.size());
  for (const Group& g : groups_) pools_.emplace_back(n, g.block_bytes);
}

PagedCache::PagedCache(CacheSpec spec, CacheOptions options, ThreadPool* pool)
    : KVCache(std::move(spec), options), threads_(pool), block_size_(options_.block_size) {
  build_groups();
}

// --- layer groups ----------------------------------------------------------------------------

void PagedCache::check_group(int group, const char* what) const {
  if (group < 0 || group >= n_groups())
    fail(ErrorKind::InvalidArgument, name(),
         std::string(what) + ": group " + std::to_string(group) + " is outside 0.." + std::to_string(n_groups() - 1));
}

int PagedCache::group_of_layer(int64_t layer) const {
  if (layer < 0 || layer >= static_cast<int64_t>(layout_.size()))
    fail(ErrorKind::InvalidArgument, name(), "group_of_layer: layer " + std::to_string(layer) + " is out of range");
  return layout_[static_cast<size_t>(layer)].group;
}

const std::vector<int64_t>& PagedCache::group_layers(int group) const {
  check_group(group, "group_layers");
  return groups_[static_cast<size_t>(group)].layers;
}

BlockStats PagedCache::stats(int group) const {
  check_group(group, "stats");
  return pools_[static_cast<size_t>(group)].stats();
}

BlockStats PagedCache::stats() const {
  BlockStats t;
  for (const kv::BlockPool& p : pools_) {
    const BlockStats s = p.stats();
    t.total += s.total;
    t.used += s.used;
    t.shared += s.shared;
    t.cached += s.cached;
    t.free += s.free;
    t.indexed += s.indexed;
  }
  return t;
}

size_t PagedCache::block_bytes(int group) const {
  check_group(group, "block_bytes");
  return groups_[static_cast<size_t>(group)].block_bytes;
}

size_t PagedCache::block_bytes() const {
  size_t n = 0;
  for (const Group& g : groups_) n += g.block_bytes;
  return n;
}

int64_t PagedCache::token_capacity() const {
  int64_t n = pools_[0].n_blocks();
  for (const kv::BlockPool& p : pools_) n = std::min(n, p.n_blocks());
  return n * block_size_;
}

size_t PagedCache::bytes_used(int group) const {
  check_group(group, "bytes_used");
  return static_cast<size_t>(pools_[static_cast<size_t>(group)].stats().used) * groups_[static_cast<size_t>(group)].block_bytes;
}

size_t PagedCache::bytes_used() const {
  size_t n = 0;
  for (int g = 0; g < n_groups(); ++g) n += bytes_used(g);
  return n;
}

size_t PagedCache::bytes_reserved() const {
  size_t n = 0;
  for (size_t g = 0; g < groups_.size(); ++g) n += static_cast<size_t>(pools_[g].n_blocks()) * groups_[g].block_bytes;
  return n;
}

std::vector<int32_t> PagedCache::block_table(SeqId seq, int group) const {
  const Sequence& s = seq_or_throw(seq, "block_table");
  check_group(group, "block_table");
  return s.g[static_cast<size_t>(group)].table;
}

// --- sequence controls -----------------------------------------------------------------------

PagedCache::Sequence& PagedCache::seq_or_throw(SeqId seq, const char* what) {
  return kv::find_sequence(seqs_, seq, name(), what);
}
const PagedCache::Sequence& PagedCache::seq_or_throw(SeqId seq, const char* what) const {
  return kv::find_sequence(seqs_, seq, name(), what);
}

void PagedCache::check_not_in_step(SeqId seq, const char* what) const {
  if (!active_) return;
  for (const Pending::Seq& p : active_->seqs)
    if (p.id == seq) kv::fail_sequence_in_step(name(), what, seq);
}

void PagedCache::add_sequence(SeqId seq) {
  kv::check_no_sequence(seqs_, seq, name(), "add_sequence: sequence");
  Sequence s;
  s.g.resize(groups_.size());
  s.root = kv::prefix_root();
  seqs_.emplace(seq, std::move(s));
}

void PagedCache::fork(SeqId src, SeqId dst) {
  const Sequence& s = seq_or_throw(src, "fork");
  check_not_in_step(src, "fork");
  kv::check_no_sequence(seqs_, dst, name(), "fork: destination sequence");
  Sequence copy = s;
  for (size_t g = 0; g < copy.g.size(); ++g)
    for (int32_t b : copy.g[g].table)
      if (b >= 0) pools_[g].ref(b);  // shares every block, the partial last one too
  seqs_.emplace(dst, std::move(copy));
}

void PagedCache::release_tail(Sequence& s, size_t keep_blocks) {
  for (size_t g = 0; g < s.g.size(); ++g) {
    GroupTable& gt = s.g[g];
    // Last block first, so that when they become cached the tail is evicted before the head.
    while (gt.table.size() > keep_blocks) {
      if (gt.table.back() >= 0) pools_[g].unref(gt.table.back());
      gt.table.pop_back();
    }
    gt.released = std::min(gt.released, static_cast<int64_t>(gt.table.size()));
  }
}

int64_t PagedCache::visible_floor(int g, int64_t length) const {
  const Group& G = groups_[static_cast<size_t>(g)];
  if (G.kind == AttnKind::Full) return 0;
  LayerCacheSpec L;
  L.kind = G.kind;
  L.span = G.span;
  return kv::first_visible(L, length);
}

void PagedCache::release_invisible(Sequence& s) {
  for (int g = 0; g < n_groups(); ++g) {
    GroupTable& gt = s.g[static_cast<size_t>(g)];
    const int64_t upto = visible_floor(g, s.length) / block_size_;  // blocks [0, upto) are invisible
    for (; gt.released < upto; ++gt.released) {
      int32_t& b = gt.table[static_cast<size_t>(gt.released)];
      if (b >= 0) pools_[static_cast<size_t>(g)].unref(b);
      b = -1;
    }
  }
}

void PagedCache::clear(SeqId seq) {
  Sequence& s = seq_or_throw(seq, "clear");
  check_not_in_step(seq, "clear");
  release_tail(s, 0);
  seqs_.erase(seq);
}

void PagedCache::rewind(SeqId seq, int64_t length) {
  Sequence& s = seq_or_throw(seq, "rewind");
  check_not_in_step(seq, "rewind");
  kv::check_rewind_length(name(), seq, length, s.length);
  for (int g = 0; g < n_groups(); ++g) {
    const int64_t gone = s.g[static_cast<size_t>(g)].released * block_size_;
    if (visible_floor(g, length) < gone)
      fail(ErrorKind::InvalidArgument, name(),
           "rewind: sequence " + std::to_string(seq) + " cannot go back to length " + std::to_string(length) +
               " (rewind_floor " + std::to_string(rewind_floor(seq)) + "): positions below " + std::to_string(gone) +
               " were released from layer group " + std::to_string(g) + " (layers " +
               std::to_string(groups_[static_cast<size_t>(g)].layers.front()) + ", ...) because its window had passed them");
  }
  release_tail(s, static_cast<size_t>((length + block_size_ - 1) / block_size_));
  s.tokens.resize(static_cast<size_t>(length));
  s.hashes.resize(std::min(s.hashes.size(), static_cast<size_t>(length / block_size_)));
  s.length = length;
  // A partial last block that is still indexed (or shared) is copied before the next write.
}

int64_t PagedCache::rewind_floor(SeqId seq) const {
  const Sequence& s = seq_or_throw(seq, "rewind_floor");
  int64_t floor = 0;
  for (int g = 0; g < n_groups(); ++g) {
    const int64_t need = s.g[static_cast<size_t>(g)].released * block_size_;  // positions below are gone
    if (need == 0) continue;
    // visible_floor is non-decreasing in the length: the first length whose floor reaches `need`.
    int64_t lo = 0, hi = s.length;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (visible_floor(g, mid) >= need)
        hi = mid;
      else
        lo = mid + 1;
    }
    floor = std::max(floor, lo);
  }
  return floor;
}

bool PagedCache::has_sequence(SeqId seq) const { return seqs_.count(seq) != 0; }

int64_t PagedCache::length(SeqId seq) const { return seq_or_throw(seq, "length").length; }

int64_t PagedCache::blocks_needed(const Sequence& s, int g, int64_t n) const {
  if (n <= 0) return 0;
  const GroupTable& gt = s.g[static_cast<size_t>(g)];
  const kv::BlockPool& pool = pools_[static_cast<size_t>(g)];
  const int64_t have = static_cast<int64_t>(gt.table.size());
  const int64_t want = (s.length + n + block_size_ - 1) / block_size_;
  int64_t need = want - have;
  if (s.length % block_size_ != 0) {
    const int32_t last = gt.table.back();
    if (last >= 0 && (pool.refs(last) > 1 || pool.indexed(last))) ++need;  // copy-on-write
  }
  return need;
}

bool PagedCache::can_extend(SeqId seq, int64_t n_new) const {
  const Sequence& s = seq_or_throw(seq, "can_extend");
  if (!kv::within_extend_limits(*this, s.length, n_new)) return false;
  for (int g = 0; g < n_groups(); ++g)
    if (blocks_needed(s, g, n_new) > pools_[static_cast<size_t>(g)].available()) return false;
  return true;
}

void PagedCache::set_prefix_keys(SeqId seq, const std::vector<uint64_t>& extra_keys) {
  Sequence& s = seq_or_throw(seq, "set_prefix_keys");
  if (s.length != 0)
    fail(ErrorKind::InvalidArgument, name(),
         "set_prefix_keys: sequence " + std::to_string(seq) + " already holds " + std::to_string(s.length) + " tokens");
  s.root = kv::prefix_root(extra_keys);
}

int64_t PagedCache::reuse_prefix(SeqId seq, const std::vector<int32_t>& tokens) {
  Sequence& s = seq_or_throw(seq, "reuse_prefix");
  check_not_in_step(seq, "reuse_prefix");
  if (s.length != 0)
    fail(ErrorKind::InvalidArgument, name(),
         "reuse_prefix: sequence " + std::to_string(seq) + " is not empty (" + std::to_string(s.length) + " tokens)");
  if (!options_.prefix_caching || tokens.size() < 2) return 0;
  const int64_t max_tokens = static_cast<int64_t>(tokens.size()) - 1;  // leave the last token to compute
  const int64_t kmax = max_tokens / block_size_;
  if (kmax == 0) return 0;
  // The chain of the prompt's full blocks, and per group the cached block of each (or -1).
  std::vector<uint64_t> hash(static_cast<size_t>(kmax)), parent(static_cast<size_t>(kmax));
  for (int64_t i = 0; i < kmax; ++i) {
    parent[i] = i == 0 ? s.root : hash[i - 1];
    hash[i] = kv::hash_block(parent[i], tokens.data() + i * block_size_, block_size_);
  }
  const size_t G = groups_.size();
  std::vector<std::vector<int32_t>> found(G, std::vector<int32_t>(static_cast<size_t>(kmax), -1));
  std::vector<std::vector<int64_t>> last_missing(G, std::vector<int64_t>(static_cast<size_t>(kmax), -1));
  for (size_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < kmax; ++i) {
      found[g][i] = pools_[g].find_cached(hash[i], parent[i], tokens.data() + i * block_size_, block_size_);
      last_missing[g][i] = found[g][i] < 0 ? i : (i > 0 ? last_missing[g][i - 1] : -1);
    }
  // The longest k whose blocks [visible_floor(k * bs) / bs, k) are cached in every group: a
  // continuation at position k * bs needs nothing below that in the group.
  int64_t k = kmax;
  for (; k > 0; --k) {
    bool ok = true;
    for (size_t g = 0; g < G && ok; ++g)
      ok = last_missing[g][k - 1] < visible_floor(static_cast<int>(g), k * block_size_) / block_size_;
    if (ok) break;
  }
  if (k == 0) return 0;
  for (size_t g = 0; g < G; ++g) {
    GroupTable& gt = s.g[g];
    gt.released = visible_floor(static_cast<int>(g), k * block_size_) / block_size_;
    for (int64_t i = 0; i < k; ++i) {
      const int32_t b = i < gt.released ? -1 : found[g][i];
      if (b >= 0) pools_[g].ref(b);
      gt.table.push_back(b);
    }
  }
  s.hashes.assign(hash.begin(), hash.begin() + k);
  s.tokens.assign(tokens.begin(), tokens.begin() + k * block_size_);
  s.length = k * block_size_;
  return s.length;
}

// --- saving and restoring full blocks ---------------------------------------------------------

kv::KvIdentity PagedCache::identity(uint64_t program_id) const {
  kv::KvIdentity id;
  id.program_id = program_id;
  id.dtype = options_.dtype;
  id.block_size = block_size_;
  id.layers = spec_.layers;
  for (LayerCacheSpec& L : id.layers)
    if (L.kind == AttnKind::Full) L.span = 0;
  return id;
}

int64_t PagedCache::saveable_blocks(SeqId seq) const {
  const Sequence& s = seq_or_throw(seq, "saveable_blocks");
  int64_t n = static_cast<int64_t>(s.hashes.size());
  for (const GroupTable& gt : s.g) {
    int64_t held = 0;
    while (held < n && gt.table[static_cast<size_t>(held)] >= 0) ++held;
    n = std::min(n, held);
  }
  return n;
}

kv::BlockData PagedCache::save_block(SeqId seq, int64_t i) const {
  const Sequence& s = seq_or_throw(seq, "save_block");
  if (i < 0 || i >= saveable_blocks(seq))
    fail(ErrorKind::InvalidArgument, name(),
         "save_block: block " + std::to_string(i) + " of sequence " + std::to_string(seq) + " is not a held full block (0.." +
             std::to_string(saveable_blocks(seq) - 1) + ")");
  kv::BlockData b;
  const size_t bi = static_cast<size_t>(i);
  b.hash = s.hashes[bi];
  b.parent = bi == 0 ? s.root : s.hashes[bi - 1];
  b.tokens.assign(s.tokens.begin() + static_cast<std::ptrdiff_t>(bi * block_size_),
                  s.tokens.begin() + static_cast<std::ptrdiff_t>((bi + 1) * block_size_));
  b.data.reserve(block_bytes());
  for (size_t g = 0; g < groups_.size(); ++g) {
    const uint8_t* d = pools_[g].data(s.g[g].table[bi]);
    b.data.insert(b.data.end(), d, d + groups_[g].block_bytes);
  }
  return b;
}

bool PagedCache::find_block(uint64_t hash, uint64_t parent, const int32_t* tokens, kv::BlockData* out) const {
  std::vector<int32_t> found(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    found[g] = pools_[g].find_cached(hash, parent, tokens, block_size_);
    if (found[g] < 0) return false;
  }
  if (!out) return true;
  out->hash = hash;
  out->parent = parent;
  out->tokens.assign(tokens, tokens + block_size_);
  out->data.clear();
  for (size_t g = 0; g < groups_.size(); ++g) {
    const uint8_t* d = pools_[g].data(found[g]);
    out->data.insert(out->data.end(), d, d + groups_[g].block_bytes);
  }
  return true;
}

bool PagedCache::restore_block(const kv::BlockData& b) {
  if (active_) fail(ErrorKind::InvalidArgument, name(), "restore_block: a step is prepared and not committed");
  if (b.tokens.size() != static_cast<size_t>(block_size_) || b.data.size() != block_bytes())
    fail(ErrorKind::InvalidArgument, name(),
         "restore_block: " + std::to_string(b.tokens.size()) + " tokens and " + std::to_string(b.data.size()) +
             " bytes, this cache's blocks hold " + std::to_string(block_size_) + " and " + std::to_string(block_bytes()));
  if (kv::hash_block(b.parent, b.tokens.data(), block_size_) != b.hash)
    fail(ErrorKind::InvalidArgument, name(), "restore_block: the hash does not match the block's parent and tokens");
  if (!options_.prefix_caching) return false;
  std::vector<bool> need(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    need[g] = pools_[g].find_cached(b.hash, b.parent, b.tokens.data(), block_size_) < 0;
    if (need[g] && pools_[g].available() == 0) return false;
  }
  size_t off = 0;
  bool ok = true;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const size_t n = groups_[g].block_bytes;
    if (need[g]) {
      const int32_t blk = pools_[g].allocate();
      std::memcpy(pools_[g].data(blk), b.data.data() + off, n);
      // false: the hash is registered with other parent/tokens (a collision); the block goes free.
      ok = pools_[g].register_block(blk, b.hash, b.parent, b.tokens.data(), block_size_) && ok;
      pools_[g].unref(blk);
    }
    off += n;
  }
  return ok;
}

int PagedCache::drop_cached_block(uint64_t hash, uint64_t parent, const int32_t* tokens) {
  if (active_) fail(ErrorKind::InvalidArgument, name(), "drop_cached_block: a step is prepared and not committed");
  int dropped = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const int32_t blk = pools_[g].find_cached(hash, parent, tokens, block_size_);
    if (blk >= 0 && pools_[g].drop_cached(blk)) ++dropped;
  }
  return dropped;
}

// --- the step transaction --------------------------------------------------------------------

std::shared_ptr<void> PagedCache::do_prepare(const StepBatch& batch) {
  if (active_) fail(ErrorKind::InvalidArgument, name(), "prepare: another step is prepared and not committed");
  auto p = std::make_shared<Pending>();
  std::map<SeqId, int32_t> index;  // sequence -> entry in p->seqs
  p->row_seq.reserve(batch.rows.size());
  for (const StepRow& r : batch.rows) {
    auto it = index.find(r.seq);
    if (it == index.end()) {
      it = index.emplace(r.seq, static_cast<int32_t>(p->seqs.size())).first;
      Pending::Seq ps;
      ps.id = r.seq;
      ps.old_length = seqs_.at(r.seq).length;
      ps.g.resize(groups_.size());
      p->seqs.push_back(std::move(ps));
    }
    ++p->seqs[static_cast<size_t>(it->second)].n_new;
    p->row_seq.push_back(it->second);
  }
  // Count first, every group: a step that does not fit changes nothing.
  for (int g = 0; g < n_groups(); ++g) {
    const kv::BlockPool& pool = pools_[static_cast<size_t>(g)];
    int64_t need = 0;
    for (const Pending::Seq& ps : p->seqs) need += blocks_needed(seqs_.at(ps.id), g, ps.n_new);
    if (need > pool.available()) {
      const BlockStats st = pool.stats();
      fail(ErrorKind::Capacity, name(),
           "the step of " + std::to_string(batch.rows.size()) + " rows needs " + std::to_string(need) +
               " new blocks of " + std::to_string(block_size_) + " tokens in layer group " + std::to_string(g) +
               " but only " + std::to_string(pool.available()) + " are available (" + std::to_string(st.free) +
               " free, " + std::to_string(st.cached) + " cached, " + std::to_string(st.used) + " of " +
               std::to_string(st.total) + " in use)");
    }
  }
  // Allocate (cannot fail now). On an unexpected error, give back what was taken.
  try {
    for (Pending::Seq& ps : p->seqs) {
      const Sequence& s = seqs_.at(ps.id);
      for (size_t g = 0; g < groups_.size(); ++g) {
        kv::BlockPool& pool = pools_[g];
        Pending::GroupPending& pg = ps.g[g];
        pg.table = s.g[g].table;
        if (s.length % block_size_ != 0) {
          const int32_t last = pg.table.back();
          if (last >= 0 && (pool.refs(last) > 1 || pool.indexed(last))) {
            const int32_t copy = pool.allocate();
            pg.allocated.push_back(copy);
            std::memcpy(pool.data(copy), pool.data(last), pool.block_bytes());
            pg.table.back() = copy;
            pg.replaced = last;
          }
        }
        const size_t want = static_cast<size_t>((ps.old_length + ps.n_new + block_size_ - 1) / block_size_);
        while (pg.table.size() < want) {
          const int32_t b = pool.allocate();
          pg.allocated.push_back(b);
          pg.table.push_back(b);
        }
      }
    }
  } catch (...) {
    for (Pending::Seq& ps : p->seqs)
      for (size_t g = 0; g < ps.g.size(); ++g)
        for (int32_t b : ps.g[g].allocated) pools_[g].unref(b);
    throw;
  }
  p->layer_done.assign(spec_.layers.size(), false);
  active_ = p.get();
  return p;
}

void PagedCache::update_and_attend(StepTxn& txn, int64_t layer, const float* q, const float* k, const float* v,
                                   int64_t n_q_heads, const AttentionParams& params, float* out) {
  auto* p = static_cast<Pending*>(txn_state(txn));
  const auto& rows = txn.batch().rows;
  const int64_t T = static_cast<int64_t>(rows.size());
  const LayerCacheSpec& L =
      kv::check_attend_args(*this, txn.active() && p != nullptr && p == active_, layer, n_q_heads, T, q, k, v, out, params.sinks);
  const LayerLayout& lay = layout_[static_cast<size_t>(layer)];
  const size_t grp = static_cast<size_t>(lay.group);
  kv::BlockPool& pool = pools_[grp];
  const int64_t hkv = L.n_kv_heads, dk = L.head_dim_k, dv = L.head_dim_v;
  const DType dt = options_.dtype;
  const size_t bs = static_cast<size_t>(block_size_);

  // 1. Store each row's K/V (converted to the cache dtype) at its slot in the pending table.
  for (int64_t t = 0; t < T; ++t) {
    const Pending::Seq& ps = p->seqs[static_cast<size_t>(p->row_seq[static_cast<size_t>(t)])];
    const int64_t pos = rows[static_cast<size_t>(t)].pos;
    const std::vector<int32_t>& table = ps.g[grp].table;
    const int32_t bid = table[static_cast<size_t>(pos / block_size_)];
    const int64_t lo = kv::first_visible(L, pos);
    if (bid < 0 || table[static_cast<size_t>(lo / block_size_)] < 0)
      fail(ErrorKind::Internal, name(), "row " + std::to_string(t) + " at position " + std::to_string(pos) +
                                            " would read a released block");
    uint8_t* blk = pool.data(bid);
    const size_t slot = static_cast<size_t>(pos % block_size_);
    for (int64_t h = 0; h < hkv; ++h) {
      kv::store_row(dt, k + (t * hkv + h) * dk, blk + lay.k_off + (static_cast<size_t>(h) * bs + slot) * lay.k_row, dk);
      if (!lay.v_in_k) kv::store_row(dt, v + (t * hkv + h) * dv, blk + lay.v_off + (static_cast<size_t>(h) * bs + slot) * lay.v_row, dv);
    }
  }
  p->layer_done[static_cast<size_t>(layer)] = true;

  // 2. Attend: each row to its sequence's visible positions, through the pending block table.
  //    How the rows are split over the threads is the paged attention kernel's affair.
  PagedLayerView view;
  view.base = pool.data(0);
  view.block_bytes = pool.block_bytes();
  view.block_size = block_size_;
  view.k_off = lay.k_off;
  view.v_off = lay.v_off;
  view.k_row = lay.k_row;
  view.v_row = lay.v_row;
  view.dk = dk;
  view.dv = dv;
  view.dtype = dt;
  queries_.resize(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    const Pending::Seq& ps = p->seqs[static_cast<size_t>(p->row_seq[static_cast<size_t>(t)])];
    const int64_t pos = rows[static_cast<size_t>(t)].pos;
    queries_[static_cast<size_t>(t)] = {ps.g[grp].table.data(), kv::first_visible(L, pos), pos};
  }
  paged_attention(view, queries_.data(), T, q, n_q_heads, hkv, params.scale, params.softcap, out,
                  threads_ ? *threads_ : default_pool(), params.sinks);
}

void PagedCache::do_commit(const StepBatch& batch, void* state) {
  auto* p = static_cast<Pending*>(state);
  kv::check_all_layers_updated(*this, batch, p->layer_done);
  for (size_t i = 0; i < p->seqs.size(); ++i) {
    Pending::Seq& ps = p->seqs[i];
    Sequence& s = seqs_.at(ps.id);
    for (size_t g = 0; g < groups_.size(); ++g) {
      Pending::GroupPending& pg = ps.g[g];
      if (pg.replaced >= 0) pools_[g].unref(pg.replaced);
      s.g[g].table.swap(pg.table);
      pg.allocated.clear();  // now owned by the sequence
    }
    for (size_t r = 0; r < batch.rows.size(); ++r)
      if (p->row_seq[r] == static_cast<int32_t>(i)) s.tokens.push_back(batch.rows[r].token);
    s.length = ps.old_length + ps.n_new;
    // Hash the blocks that became full; index them (in every group still holding them).
    const size_t full = static_cast<size_t>(s.length / block_size_);
    while (s.hashes.size() < full) {
      const size_t bi = s.hashes.size();
      const uint64_t parent = bi == 0 ? s.root : s.hashes[bi - 1];
      const int32_t* tk = s.tokens.data() + bi * static_cast<size_t>(block_size_);
      const uint64_t h = kv::hash_block(parent, tk, block_size_);
      s.hashes.push_back(h);
      if (!options_.prefix_caching) continue;
      for (size_t g = 0; g < groups_.size(); ++g)
        if (s.g[g].table[bi] >= 0) pools_[g].register_block(s.g[g].table[bi], h, parent, tk, block_size_);
    }
    release_invisible(s);
  }
  active_ = nullptr;
}

void PagedCache::do_rollback(const StepBatch& batch, void* state) {
  auto* p = static_cast<Pending*>(state);
  if (p == nullptr) return;
  for (Pending::Seq& ps : p->seqs)
    for (size_t g = 0; g < ps.g.size(); ++g) {
      for (int32_t b : ps.g[g].allocated) pools_[g].unref(b);
      ps.g[g].allocated.clear();
    }
  if (active_ == p) active_ = nullptr;
}

}  // namespace ptn
