// A shared prefix tier: full KV blocks in Redis (or Valkey), addressed by their chained hash,
// so replicas of one program reuse prompt prefixes another replica computed (docs/scale-out.md).
//
// Keys: "ptn:kv:<program id>:<dtype>:<block size>:<block hash>" (hex), values: a KV record of one
// block (kvcache/kv_record.h), written with SET ... EX ttl. What the store keeps is Redis's
// business (its maxmemory and eviction policy are the size cap).
//
// Writes go through a bounded queue to a writer thread with its own connection: the engine
// never waits for them, and a full queue drops blocks (counted). Reads run on a reader thread
// with its own connection (fetch_async): the engine starts one when a prompt reaches the front
// of its queue and goes on stepping the running sequences; the prompt is admitted when the
// read is done. A store that is down, slow or answers nonsense costs that prompt at most the
// timeout, after which the connection is retried no more than once a second. No call throws:
// the tier is an optimization, never an error.
//
// A hash written or read is remembered for a while (half the TTL, at most a minute) so the
// same block is not written again and again; after that it is written again when a replica
// computes it, since Redis may have dropped it (TTL, maxmemory eviction).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "kvcache/kv_record.h"
#include "serve/metrics.h"

struct redisContext;

namespace ptn::serve {

struct KvTierOptions {
  std::string host;
  int port = 6379;
  int timeout_ms = 50;      // connect and per-command timeout (reads and writes)
  int ttl_seconds = 3600;   // EX of every SET
  size_t queue_blocks = 256;  // blocks waiting for the writer before new ones are dropped
};

// Parses "redis://HOST:PORT" (HOST a name or IPv4 address of [A-Za-z0-9.-], PORT 1..65535).
// Throws InvalidArgument naming `flag` for anything else (user info, database, options).
KvTierOptions parse_kv_store_url(const std::string& url, const std::string& flag);

class KvTier {
 public:
  KvTier(KvTierOptions options, kv::KvIdentity identity, Metrics* metrics);
  ~KvTier();
  KvTier(const KvTier&) = delete;
  KvTier& operator=(const KvTier&) = delete;

  // A read started by fetch_async: `blocks` may be read once `done` is true.
  struct Fetch {
    std::vector<uint64_t> hashes, parents;
    std::vector<int32_t> tokens;  // hashes.size() * block_size
    std::vector<kv::BlockData> blocks;
    std::atomic<bool> done{false};
  };
  // Starts reading the blocks of hashes[0..n) (see fetch) on the reader thread and returns at
  // once; `on_done` is called on that thread when the result is in (also when the tier stops).
  std::shared_ptr<const Fetch> fetch_async(std::vector<uint64_t> hashes, std::vector<uint64_t> parents,
                                           const int32_t* tokens, std::function<void()> on_done);
  // Queues a block for writing (dropped, and counted, when the queue is full or the block was
  // written or read recently).
  void store(kv::BlockData block);
  // Blocks queued and not yet written (for tests and /metrics).
  size_t queued() const;
  // Waits up to `ms` for the queue to empty (tests).
  bool flush(int ms);

  std::string key(uint64_t hash) const;

 private:
  struct Conn;
  using Clock = std::chrono::steady_clock;
  struct Pending {
    std::shared_ptr<Fetch> fetch;
    std::function<void()> on_done;
  };
  void writer_loop();
  void reader_loop();
  // The blocks stored under hashes[0..n), in order, up to the first one missing, damaged, of
  // another identity, or whose parent / tokens differ from the chain asked for (parents[i],
  // tokens + i * block_size). One MGET on the reader connection (reader thread only); never throws.
  std::vector<kv::BlockData> fetch(const std::vector<uint64_t>& hashes, const std::vector<uint64_t>& parents,
                                   const int32_t* tokens);
  bool is_recent(uint64_t hash, Clock::time_point now) const;  // mu_ held
  bool remember(uint64_t hash);  // mu_ held; true if new (not written or read recently)
  void forget(uint64_t hash);    // mu_ held

  KvTierOptions opt_;
  kv::KvIdentity id_;
  std::string prefix_;
  Metrics* metrics_;
  std::unique_ptr<Conn> reader_;  // the reader thread's
  Clock::duration fresh_for_;     // how long a hash stays remembered

  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_, read_cv_;
  std::deque<kv::BlockData> queue_;
  std::deque<Pending> reads_;
  bool writing_ = false;
  bool stop_ = false;
  // Hashes written or read recently, oldest first, and when; an entry of recent_order_ whose
  // time differs from recent_'s is stale (the hash was forgotten or remembered again) and only
  // waits to be popped. Both hold at most kRecent entries.
  std::deque<std::pair<uint64_t, Clock::time_point>> recent_order_;
  std::unordered_map<uint64_t, Clock::time_point> recent_;
  std::thread writer_, reader_thread_;
};

}  // namespace ptn::serve
