#include "kvcache/paged_cache.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "kvcache/kv_common.h"
#include "kvcache/paged_attention.h"
#include "kvcache/prefix_index.h"

namespace ptn {

// A prepared step: per sequence of the batch, its pending block table and what prepare
// allocated for it; per row, which sequence entry it belongs to.
struct PagedCache::Pending {
  struct Seq {
    SeqId id = 0;
    int64_t old_length = 0;
    int64_t n_new = 0;
    std::vector<int32_t> table;      // pending block table (covers old_length + n_new)
    std::vector<int32_t> allocated;  // blocks prepare allocated (refs held by this step)
    int32_t replaced = -1;           // committed last block the copy-on-write replaces
  };
  std::vector<Seq> seqs;
  std::vector<int32_t> row_seq;  // [T] index into seqs
  std::vector<bool> layer_done;
};

size_t PagedCache::compute_layout(const CacheSpec& spec, const CacheOptions& options,
                                  std::vector<LayerLayout>* out) {
  kv::validate_spec(spec, options, "paged kv cache");
  const uint64_t bs = static_cast<uint64_t>(options.block_size);
  uint64_t off = 0;
  out->clear();
  for (const LayerCacheSpec& L : spec.layers) {
    LayerLayout lay;
    lay.k_row = kv::kv_row_bytes(options.dtype, L.head_dim_k);
    lay.v_row = kv::kv_row_bytes(options.dtype, L.head_dim_v);
    const uint64_t hkv = static_cast<uint64_t>(L.n_kv_heads);
    lay.k_off = static_cast<size_t>(off);
    off = checked_add(off, checked_mul(hkv * bs, lay.k_row, "paged kv cache block size"), "paged kv cache block size");
    lay.v_off = static_cast<size_t>(off);
    off = checked_add(off, checked_mul(hkv * bs, lay.v_row, "paged kv cache block size"), "paged kv cache block size");
    out->push_back(lay);
  }
  return static_cast<size_t>(off);
}

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

kv::BlockPool PagedCache::make_pool(const CacheSpec& spec, const CacheOptions& options,
                                    std::vector<LayerLayout>* layout) {
  const size_t block_bytes = compute_layout(spec, options, layout);
  return kv::BlockPool(compute_blocks(options, block_bytes, "paged kv cache"), block_bytes);
}

PagedCache::PagedCache(CacheSpec spec, CacheOptions options, ThreadPool* pool)
    : KVCache(std::move(spec), options),
      threads_(pool),
      block_size_(options_.block_size),
      pool_(make_pool(spec_, options_, &layout_)) {}

// --- sequence controls -----------------------------------------------------------------------

PagedCache::Sequence& PagedCache::seq_or_throw(SeqId seq, const char* what) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end())
    fail(ErrorKind::InvalidArgument, name(), std::string(what) + ": unknown sequence " + std::to_string(seq));
  return it->second;
}
const PagedCache::Sequence& PagedCache::seq_or_throw(SeqId seq, const char* what) const {
  return const_cast<PagedCache*>(this)->seq_or_throw(seq, what);
}

void PagedCache::check_not_in_step(SeqId seq, const char* what) const {
  if (!active_) return;
  for (const Pending::Seq& p : active_->seqs)
    if (p.id == seq)
      fail(ErrorKind::InvalidArgument, name(),
           std::string(what) + ": sequence " + std::to_string(seq) + " is part of a prepared, uncommitted step");
}

void PagedCache::add_sequence(SeqId seq) {
  if (seqs_.count(seq))
    fail(ErrorKind::InvalidArgument, name(), "add_sequence: sequence " + std::to_string(seq) + " exists");
  Sequence s;
  s.root = kv::prefix_root();
  seqs_.emplace(seq, std::move(s));
}

void PagedCache::fork(SeqId src, SeqId dst) {
  const Sequence& s = seq_or_throw(src, "fork");
  check_not_in_step(src, "fork");
  if (seqs_.count(dst))
    fail(ErrorKind::InvalidArgument, name(), "fork: destination sequence " + std::to_string(dst) + " exists");
  Sequence copy = s;
  for (int32_t b : copy.table)
    if (b >= 0) pool_.ref(b);  // shares every block, the partial last one too
  seqs_.emplace(dst, std::move(copy));
}

void PagedCache::release_tail(Sequence& s, size_t keep_blocks) {
  // Last block first, so that when they become cached the tail is evicted before the head.
  while (s.table.size() > keep_blocks) {
    if (s.table.back() >= 0) pool_.unref(s.table.back());
    s.table.pop_back();
  }
  s.released = std::min(s.released, static_cast<int64_t>(s.table.size()));
}

int64_t PagedCache::visible_floor(int64_t length) const {
  int64_t floor = length;
  for (const LayerCacheSpec& L : spec_.layers) {
    if (L.kind == AttnKind::Full) return 0;
    floor = std::min(floor, kv::first_visible(L, length));
  }
  return floor;
}

void PagedCache::release_invisible(Sequence& s) {
  const int64_t upto = visible_floor(s.length) / block_size_;  // blocks [0, upto) are invisible
  for (; s.released < upto; ++s.released) {
    int32_t& b = s.table[static_cast<size_t>(s.released)];
    if (b >= 0) pool_.unref(b);
    b = -1;
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
  if (length < 0 || length > s.length)
    fail(ErrorKind::InvalidArgument, name(),
         "rewind: length " + std::to_string(length) + " is outside 0.." + std::to_string(s.length) +
             " for sequence " + std::to_string(seq));
  if (visible_floor(length) < s.released * block_size_)
    fail(ErrorKind::InvalidArgument, name(),
         "rewind: sequence " + std::to_string(seq) + " cannot go back to length " + std::to_string(length) +
             ": positions below " + std::to_string(s.released * block_size_) +
             " were released because every layer's window had passed them");
  release_tail(s, static_cast<size_t>((length + block_size_ - 1) / block_size_));
  s.tokens.resize(static_cast<size_t>(length));
  s.hashes.resize(std::min(s.hashes.size(), static_cast<size_t>(length / block_size_)));
  s.length = length;
  // A partial last block that is still indexed (or shared) is copied before the next write.
}

int64_t PagedCache::rewind_floor(SeqId seq) const {
  const Sequence& s = seq_or_throw(seq, "rewind_floor");
  const int64_t need = s.released * block_size_;  // positions below this are gone
  if (need == 0) return 0;
  // visible_floor is non-decreasing in the length: the first length whose floor reaches `need`.
  int64_t lo = 0, hi = s.length;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (visible_floor(mid) >= need)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

bool PagedCache::has_sequence(SeqId seq) const { return seqs_.count(seq) != 0; }

int64_t PagedCache::length(SeqId seq) const { return seq_or_throw(seq, "length").length; }

int64_t PagedCache::blocks_needed(const Sequence& s, int64_t n) const {
  if (n <= 0) return 0;
  const int64_t have = static_cast<int64_t>(s.table.size());
  const int64_t want = (s.length + n + block_size_ - 1) / block_size_;
  int64_t need = want - have;
  if (s.length % block_size_ != 0) {
    const int32_t last = s.table.back();
    if (pool_.refs(last) > 1 || pool_.indexed(last)) ++need;  // copy-on-write
  }
  return need;
}

bool PagedCache::can_extend(SeqId seq, int64_t n_new) const {
  const Sequence& s = seq_or_throw(seq, "can_extend");
  if (n_new < 0) return false;
  if (spec_.max_positions > 0 && s.length + n_new > spec_.max_positions) return false;
  return blocks_needed(s, n_new) <= pool_.available();
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
  uint64_t parent = s.root;
  for (int64_t i = 0; (i + 1) * block_size_ <= max_tokens; ++i) {
    const int32_t* tk = tokens.data() + i * block_size_;
    const uint64_t h = kv::hash_block(parent, tk, block_size_);
    const int32_t b = pool_.find_cached(h, parent, tk, block_size_);
    if (b < 0) break;
    pool_.ref(b);
    s.table.push_back(b);
    s.hashes.push_back(h);
    s.tokens.insert(s.tokens.end(), tk, tk + block_size_);
    s.length += block_size_;
    parent = h;
  }
  return s.length;
}

std::vector<int32_t> PagedCache::block_table(SeqId seq) const { return seq_or_throw(seq, "block_table").table; }

size_t PagedCache::bytes_used() const { return static_cast<size_t>(pool_.stats().used) * pool_.block_bytes(); }

size_t PagedCache::bytes_reserved() const { return static_cast<size_t>(pool_.n_blocks()) * pool_.block_bytes(); }

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
      p->seqs.push_back(std::move(ps));
    }
    ++p->seqs[static_cast<size_t>(it->second)].n_new;
    p->row_seq.push_back(it->second);
  }
  // Count first: a step that does not fit changes nothing.
  int64_t need = 0;
  for (const Pending::Seq& ps : p->seqs) need += blocks_needed(seqs_.at(ps.id), ps.n_new);
  if (need > pool_.available()) {
    const BlockStats st = pool_.stats();
    fail(ErrorKind::Capacity, name(),
         "the step of " + std::to_string(batch.rows.size()) + " rows needs " + std::to_string(need) +
             " new blocks of " + std::to_string(block_size_) + " tokens but only " + std::to_string(pool_.available()) +
             " are available (" + std::to_string(st.free) + " free, " + std::to_string(st.cached) + " cached, " +
             std::to_string(st.used) + " of " + std::to_string(st.total) + " in use)");
  }
  // Allocate (cannot fail now). On an unexpected error, give back what was taken.
  try {
    for (Pending::Seq& ps : p->seqs) {
      const Sequence& s = seqs_.at(ps.id);
      ps.table = s.table;
      if (s.length % block_size_ != 0) {
        const int32_t last = s.table.back();
        if (pool_.refs(last) > 1 || pool_.indexed(last)) {
          const int32_t copy = pool_.allocate();
          ps.allocated.push_back(copy);
          std::memcpy(pool_.data(copy), pool_.data(last), pool_.block_bytes());
          ps.table.back() = copy;
          ps.replaced = last;
        }
      }
      const size_t want = static_cast<size_t>((ps.old_length + ps.n_new + block_size_ - 1) / block_size_);
      while (ps.table.size() < want) {
        const int32_t b = pool_.allocate();
        ps.allocated.push_back(b);
        ps.table.push_back(b);
      }
    }
  } catch (...) {
    for (Pending::Seq& ps : p->seqs)
      for (int32_t b : ps.allocated) pool_.unref(b);
    throw;
  }
  p->layer_done.assign(spec_.layers.size(), false);
  active_ = p.get();
  return p;
}

void PagedCache::update_and_attend(StepTxn& txn, int64_t layer, const float* q, const float* k, const float* v,
                                   int64_t n_q_heads, const AttendParams& params, float* out) {
  auto* p = static_cast<Pending*>(txn_state(txn));
  if (!txn.active() || p == nullptr || p != active_)
    fail(ErrorKind::InvalidArgument, name(), "update_and_attend: the step is not prepared on this cache");
  if (layer < 0 || layer >= static_cast<int64_t>(spec_.layers.size()))
    fail(ErrorKind::InvalidArgument, name(), "update_and_attend: layer " + std::to_string(layer) + " is out of range");
  const LayerCacheSpec& L = spec_.layers[static_cast<size_t>(layer)];
  const LayerLayout& lay = layout_[static_cast<size_t>(layer)];
  const int64_t hkv = L.n_kv_heads, dk = L.head_dim_k, dv = L.head_dim_v;
  if (n_q_heads < 1 || n_q_heads % hkv != 0)
    fail(ErrorKind::InvalidArgument, name(),
         "update_and_attend: n_q_heads " + std::to_string(n_q_heads) + " is not a positive multiple of " +
             std::to_string(hkv) + " kv heads (layer " + std::to_string(layer) + ")");
  const auto& rows = txn.batch().rows;
  const int64_t T = static_cast<int64_t>(rows.size());
  if (T > 0 && (!q || !k || !v || !out))
    fail(ErrorKind::InvalidArgument, name(), "update_and_attend: null tensor pointer");
  const DType dt = options_.dtype;
  const size_t bs = static_cast<size_t>(block_size_);

  // 1. Store each row's K/V (converted to the cache dtype) at its slot in the pending table.
  for (int64_t t = 0; t < T; ++t) {
    const Pending::Seq& ps = p->seqs[static_cast<size_t>(p->row_seq[static_cast<size_t>(t)])];
    const int64_t pos = rows[static_cast<size_t>(t)].pos;
    const int32_t bid = ps.table[static_cast<size_t>(pos / block_size_)];
    const int64_t lo = kv::first_visible(L, pos);
    if (bid < 0 || ps.table[static_cast<size_t>(lo / block_size_)] < 0)
      fail(ErrorKind::Internal, name(), "row " + std::to_string(t) + " at position " + std::to_string(pos) +
                                            " would read a released block");
    uint8_t* blk = pool_.data(bid);
    const size_t slot = static_cast<size_t>(pos % block_size_);
    for (int64_t h = 0; h < hkv; ++h) {
      kv::store_row(dt, k + (t * hkv + h) * dk, blk + lay.k_off + (static_cast<size_t>(h) * bs + slot) * lay.k_row, dk);
      kv::store_row(dt, v + (t * hkv + h) * dv, blk + lay.v_off + (static_cast<size_t>(h) * bs + slot) * lay.v_row, dv);
    }
  }
  p->layer_done[static_cast<size_t>(layer)] = true;

  // 2. Attend, one work item per (row, kv head): its query group over the sequence's blocks.
  //    With fewer items than threads (decoding few sequences), each item's blocks are split
  //    into `splits` shares accumulated separately and merged (online-softmax merge).
  const int64_t group = n_q_heads / hkv;
  const float scale = params.scale, softcap = params.softcap;
  ThreadPool& tp = threads_ ? *threads_ : default_pool();
  const int64_t items = T * hkv;
  int64_t max_blocks = 0;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = rows[static_cast<size_t>(t)].pos;
    max_blocks = std::max(max_blocks, pos / block_size_ - kv::first_visible(L, pos) / block_size_ + 1);
  }
  constexpr int64_t kMinBlocksPerShare = 4;
  int64_t splits = items > 0 && items < tp.size() ? (tp.size() + items - 1) / items : 1;
  splits = std::max<int64_t>(1, std::min(splits, max_blocks / kMinBlocksPerShare));

  auto view_of = [&](const Pending::Seq& ps) {
    kv::PagedLayerView view;
    view.base = pool_.data(0);
    view.block_bytes = pool_.block_bytes();
    view.table = ps.table.data();
    view.block_size = block_size_;
    view.k_off = lay.k_off;
    view.v_off = lay.v_off;
    view.k_row = lay.k_row;
    view.v_row = lay.v_row;
    view.dk = dk;
    view.dv = dv;
    view.dtype = dt;
    return view;
  };
  auto seq_of_row = [&](int64_t t) -> const Pending::Seq& {
    return p->seqs[static_cast<size_t>(p->row_seq[static_cast<size_t>(t)])];
  };

  if (splits == 1) {
    tp.parallel_for(items, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t item = b; item < e; ++item) {
        const int64_t t = item / hkv, h = item % hkv;
        const int64_t pos = rows[static_cast<size_t>(t)].pos;
        kv::paged_attend_group(view_of(seq_of_row(t)), h, q + (t * n_q_heads + h * group) * dk, group,
                               kv::first_visible(L, pos), pos, scale, softcap, out + (t * n_q_heads + h * group) * dv);
      }
    });
    return;
  }
  // Split path: share s of item i accumulates into states[(i * splits + s) * group + g].
  const int64_t units = items * splits;
  std::vector<AttnAccumulator> states(static_cast<size_t>(units * group));
  std::vector<float> acc(static_cast<size_t>(units * group * dv));
  tp.parallel_for(units, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t item = u / splits, share = u % splits;
      const int64_t t = item / hkv, h = item % hkv;
      const int64_t pos = rows[static_cast<size_t>(t)].pos;
      const int64_t lo = kv::first_visible(L, pos);
      const int64_t b0 = lo / block_size_, nb = pos / block_size_ - b0 + 1;
      AttnAccumulator* st = states.data() + u * group;
      for (int64_t g = 0; g < group; ++g) attn_begin(st[g], acc.data() + (u * group + g) * dv, dv);
      kv::paged_accumulate_group(view_of(seq_of_row(t)), h, q + (t * n_q_heads + h * group) * dk, group, lo, pos,
                                 b0 + share * nb / splits, b0 + (share + 1) * nb / splits, scale, softcap, st);
    }
  });
  for (int64_t item = 0; item < items; ++item) {
    const int64_t t = item / hkv, h = item % hkv;
    for (int64_t g = 0; g < group; ++g) {
      AttnAccumulator& into = states[static_cast<size_t>(item * splits * group + g)];
      for (int64_t share = 1; share < splits; ++share)
        attn_merge(into, states[static_cast<size_t>((item * splits + share) * group + g)]);
      attn_finish(into, out + (t * n_q_heads + h * group + g) * dv);
    }
  }
}

void PagedCache::do_commit(const StepBatch& batch, void* state) {
  auto* p = static_cast<Pending*>(state);
  if (!batch.rows.empty())
    for (size_t l = 0; l < p->layer_done.size(); ++l)
      if (!p->layer_done[l])
        fail(ErrorKind::InvalidArgument, name(), "commit: layer " + std::to_string(l) + " was not updated in this step");
  for (size_t i = 0; i < p->seqs.size(); ++i) {
    Pending::Seq& ps = p->seqs[i];
    Sequence& s = seqs_.at(ps.id);
    if (ps.replaced >= 0) pool_.unref(ps.replaced);
    s.table.swap(ps.table);
    ps.allocated.clear();  // now owned by the sequence
    for (size_t r = 0; r < batch.rows.size(); ++r)
      if (p->row_seq[r] == static_cast<int32_t>(i)) s.tokens.push_back(batch.rows[r].token);
    s.length = ps.old_length + ps.n_new;
    // Hash the blocks that became full; index them for prefix reuse.
    const size_t full = static_cast<size_t>(s.length / block_size_);
    while (s.hashes.size() < full) {
      const size_t bi = s.hashes.size();
      const uint64_t parent = bi == 0 ? s.root : s.hashes[bi - 1];
      const int32_t* tk = s.tokens.data() + bi * static_cast<size_t>(block_size_);
      const uint64_t h = kv::hash_block(parent, tk, block_size_);
      s.hashes.push_back(h);
      if (options_.prefix_caching && s.table[bi] >= 0) pool_.register_block(s.table[bi], h, parent, tk, block_size_);
    }
    release_invisible(s);
  }
  active_ = nullptr;
}

void PagedCache::do_rollback(const StepBatch& batch, void* state) {
  auto* p = static_cast<Pending*>(state);
  if (p == nullptr) return;
  for (Pending::Seq& ps : p->seqs) {
    for (int32_t b : ps.allocated) pool_.unref(b);
    ps.allocated.clear();
  }
  if (active_ == p) active_ = nullptr;
}

}  // namespace ptn
