// A shared prefix tier: full KV blocks in Redis (or Valkey), addressed by their chained hash,
// so replicas of one program reuse prompt prefixes another replica computed (docs/scale-out.md).
//
// Keys: "ptn:kv:<program id>:<dtype>:<block size>:<block hash>" (hex), values: a KV record of one
// block (kvcache/kv_record.h), written with SET ... EX ttl. What the store keeps is Redis's
// business (its maxmemory and eviction policy are the size cap).
//
// Writes go through a bounded queue to a writer thread with its own connection: the engine
// never waits for them, and a full queue drops blocks (counted). Reads (fetch) run on the
// engine thread with a short timeout; a store that is down, slow or answers nonsense costs at
// most that timeout, after which the connection is retried no more than once a second. No
// call throws: the tier is an optimization, never an error.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
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

  // The blocks stored under hashes[0..n), in order, up to the first one missing, damaged, of
  // another identity, or whose parent / tokens differ from the chain asked for (parents[i],
  // tokens + i * block_size). One MGET; never throws.
  std::vector<kv::BlockData> fetch(const std::vector<uint64_t>& hashes, const std::vector<uint64_t>& parents,
                                   const int32_t* tokens);
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
  void writer_loop();
  bool remember(uint64_t hash);  // true if new (not written or read recently)

  KvTierOptions opt_;
  kv::KvIdentity id_;
  std::string prefix_;
  Metrics* metrics_;
  std::unique_ptr<Conn> reader_;  // engine thread only

  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<kv::BlockData> queue_;
  bool writing_ = false;
  bool stop_ = false;
  std::deque<uint64_t> recent_order_;      // hashes written or read recently, oldest first
  std::unordered_set<uint64_t> recent_;     // the same, for lookup (at most kRecent)
  std::thread writer_;
};

}  // namespace ptn::serve
