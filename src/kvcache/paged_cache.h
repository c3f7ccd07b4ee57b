// PagedCache: K/V in fixed-size blocks from one BlockPool (block_pool.h), a block table per
// sequence, reference-counted sharing, copy-on-write of a shared partial last block, and
// prefix reuse through chained hashes of full blocks (prefix_index.h).
//
// Step transaction:
//   prepare  counts the blocks the step needs (new blocks, plus a copy of the last block when
//            it is partial and shared or indexed), fails with Capacity before touching anything
//            if fewer are available (free + evictable cached), else allocates them (evicting
//            cached blocks oldest first) and builds each sequence's *pending* block table.
//   update_and_attend writes K/V rows through the pending tables (only into new blocks, the
//            copies, or unshared slots past the committed length) and hands the attention a
//            view of them (kernels/attention_paged.h: storage layout, each row's block table
//            and visible positions); the kernel reads the blocks in place and splits the
//            work over the thread pool.
//   commit   swaps the pending tables in, releases the replaced blocks, and registers blocks
//            that became full in the prefix index.
//   rollback releases what prepare allocated; the committed state was never touched.
// Blocks evicted from the cache during a prepare that is then rolled back stay evicted (no
// sequence held them).
//
// Sizing: options.capacity_tokens -> ceil(capacity_tokens / block_size) blocks, else
// capacity_bytes / block_bytes() blocks; one of them must be set.
// Sequence controls (fork, clear, rewind, reuse_prefix) on a sequence that is part of a
// prepared step throw InvalidArgument; only one step may be prepared at a time.
// Layer groups: layers with the same attention policy (all full layers; the layers of window W;
// the layers of chunk C) form a group with its own BlockPool (a block holds block_size tokens
// of the group's layers only), its own prefix index and one block table per sequence. Every
// group gets the same number of blocks (capacity_tokens / block_size, or capacity_bytes / the
// sum of the groups' block bytes), so a byte budget means what it meant with one pool. At
// commit, a window/chunk group releases the blocks wholly below the first position its next
// query can see (table entry -1; a full, indexed block goes to the LRU cache so a prefix reuse
// can still attach it), so its memory stays bounded while full groups grow. rewind refuses to
// go below the length whose window still lies in held blocks (rewind_floor). Prefix reuse of k
// blocks needs, in every group, the blocks the continuation at position k*block_size can see;
// a window group's blocks below that are not needed (entries -1), and if a needed block was
// evicted the reuse stops at a shorter prefix (recomputed by the caller).
#pragma once
#include <map>
#include <vector>

#include "core/threadpool.h"
#include "kernels/attention_paged.h"
#include "kvcache/block_pool.h"
#include "kvcache/cache.h"
#include "kvcache/kv_record.h"

namespace ptn {

class PagedCache final : public KVCache {
 public:
  // pool: the threads update_and_attend splits (row, kv head) pairs over; null = default_pool().
  // update_and_attend must not be called from inside a job of that pool (it is not reentrant).
  PagedCache(CacheSpec spec, CacheOptions options, ThreadPool* pool = nullptr);
  std::string name() const override { return "paged kv cache"; }

  void add_sequence(SeqId seq) override;
  void fork(SeqId src, SeqId dst) override;
  void clear(SeqId seq) override;
  void rewind(SeqId seq, int64_t length) override;
  int64_t rewind_floor(SeqId seq) const override;
  bool has_sequence(SeqId seq) const override;
  int64_t length(SeqId seq) const override;
  bool can_extend(SeqId seq, int64_t n_new) const override;
  int64_t reuse_prefix(SeqId seq, const std::vector<int32_t>& tokens) override;

  size_t bytes_used() const override;
  size_t bytes_reserved() const override;

  void update_and_attend(StepTxn& txn, int64_t layer, const float* q, const float* k, const float* v,
                         int64_t n_q_heads, const AttentionParams& params, float* out) override;

  // --- paged specifics ---------------------------------------------------------------------
  BlockStats stats() const;  // summed over the layer groups
  int64_t block_size() const { return block_size_; }
  size_t block_bytes() const;  // bytes of block_size tokens over all layers (sum over groups)
  // Tokens a sequence can hold before the pool of some group is full (blocks x block_size).
  int64_t token_capacity() const;
  std::vector<int32_t> block_table(SeqId seq) const { return block_table(seq, 0); }  // layer 0's group
  // --- layer groups (in order of their first layer; group 0 holds layer 0) ---
  int n_groups() const { return static_cast<int>(groups_.size()); }
  int group_of_layer(int64_t layer) const;
  const std::vector<int64_t>& group_layers(int group) const;
  BlockStats stats(int group) const;
  size_t block_bytes(int group) const;
  size_t bytes_used(int group) const;                       // used blocks x block bytes of the group
  std::vector<int32_t> block_table(SeqId seq, int group) const;  // -1: released (out of the window)
  // Extra keys (tenant salt, adapter id, ...) that enter this sequence's prefix hash chain, so
  // it only shares prefix blocks with sequences that have the same keys. The sequence must be
  // empty. Forks inherit them.
  void set_prefix_keys(SeqId seq, const std::vector<uint64_t>& extra_keys);

  // --- saving and restoring full blocks (kv_record.h) ---------------------------------------
  // This cache's identity for records (program_id: the caller's, see KvIdentity).
  kv::KvIdentity identity(uint64_t program_id) const;
  // The hash chain root of a sequence (from its prefix keys) and the chained hashes of its full
  // blocks so far.
  uint64_t prefix_root(SeqId seq) const { return seq_or_throw(seq, "prefix_root").root; }
  const std::vector<uint64_t>& block_hashes(SeqId seq) const { return seq_or_throw(seq, "block_hashes").hashes; }
  const std::vector<int32_t>& sequence_tokens(SeqId seq) const { return seq_or_throw(seq, "sequence_tokens").tokens; }
  // The leading full blocks of a sequence that every group still holds (a window group may have
  // released its oldest ones, which then cannot be saved).
  int64_t saveable_blocks(SeqId seq) const;
  // Full block i (< saveable_blocks) of a sequence: hash, parent, tokens, every group's bytes.
  kv::BlockData save_block(SeqId seq, int64_t i) const;
  // Whether every group holds a block (cached or used) under (hash, parent, tokens), and then
  // its bytes in *out (out may be null).
  bool find_block(uint64_t hash, uint64_t parent, const int32_t* tokens, kv::BlockData* out) const;
  // Puts a saved block into every group's prefix index as a cached block (reuse_prefix can then
  // attach it; LRU eviction applies), in the groups that do not hold it yet. The caller checked
  // the identity; the block's size and hash are checked here (InvalidArgument). Returns whether
  // every group now holds it: false (changing nothing) when prefix caching is off or some group
  // has no free or evictable block; false also when a group has the hash registered with other
  // contents (a 64-bit collision: that group keeps its own block).
  bool restore_block(const kv::BlockData& block);
  // Frees the block held under (hash, parent, tokens) in every group where it is cached (held by
  // no sequence): it leaves the prefix index. A block a sequence still uses stays. Returns the
  // number of groups that freed it.
  int drop_cached_block(uint64_t hash, uint64_t parent, const int32_t* tokens);

 protected:
  std::shared_ptr<void> do_prepare(const StepBatch& batch) override;
  void do_commit(const StepBatch& batch, void* state) override;
  void do_rollback(const StepBatch& batch, void* state) override;

 private:
  struct GroupTable {
    std::vector<int32_t> table;    // ceil(length / block_size) block ids; -1 for released ones
    int64_t released = 0;          // table[0, released) were released (the group sees none)
  };
  struct Sequence {
    int64_t length = 0;
    std::vector<GroupTable> g;     // per layer group
    std::vector<int32_t> tokens;   // [length] token ids (for block hashes)
    std::vector<uint64_t> hashes;  // chained hash of each full block so far
    uint64_t root = 0;             // hash chain root (from the extra keys)
  };
  struct LayerLayout {
    int group = 0;
    size_t k_off = 0, v_off = 0;  // offsets of the layer's K / V regions in its group's block
    size_t k_row = 0, v_row = 0;  // bytes of one head row (v_in_k: V's stride, that of K)
    bool v_in_k = false;          // V is the start of each K row (LayerCacheSpec::v_in_k)
  };
  struct Group {
    AttnKind kind = AttnKind::Full;
    int64_t span = 0;
    std::vector<int64_t> layers;
    size_t block_bytes = 0;
  };
  struct Pending;

  Sequence& seq_or_throw(SeqId seq, const char* what);
  const Sequence& seq_or_throw(SeqId seq, const char* what) const;
  void check_not_in_step(SeqId seq, const char* what) const;
  void check_group(int group, const char* what) const;
  // Blocks group g of a sequence needs to append n tokens (new ones + a copy-on-write).
  int64_t blocks_needed(const Sequence& s, int g, int64_t n) const;
  void release_tail(Sequence& s, size_t keep_blocks);  // unref table[keep..] last first, every group
  // The first position group g's next query can see once the sequence holds `length` tokens
  // (0 for a full group, else the window / chunk start of position `length`).
  int64_t visible_floor(int g, int64_t length) const;
  void release_invisible(Sequence& s);  // per group: unref the blocks wholly below visible_floor

  static int64_t compute_blocks(const CacheOptions& options, size_t block_bytes, const std::string& who);
  void build_groups();  // layout_, groups_, pools_ from spec_ and options_

  ThreadPool* threads_;
  int64_t block_size_;
  std::vector<LayerLayout> layout_;
  std::vector<Group> groups_;
  std::vector<kv::BlockPool> pools_;  // one per group
  std::map<SeqId, Sequence> seqs_;
  Pending* active_ = nullptr;
  std::vector<PagedQuery> queries_;  // update_and_attend's rows for the kernel, reused
};

}  // namespace ptn
