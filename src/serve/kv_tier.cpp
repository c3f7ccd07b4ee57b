#include "serve/kv_tier.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace ptn::serve {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr size_t kRecent = 65536;            // hashes remembered as written or read
constexpr auto kRetryAfter = std::chrono::seconds(1);  // a failed connection is retried no sooner
constexpr size_t kMaxFetch = 4096;           // blocks in one MGET

std::string hex16(uint64_t v) {
  char b[20];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

double seconds_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

}  // namespace

KvTierOptions parse_kv_store_url(const std::string& url, const std::string& flag) {
  const std::string scheme = "redis://";
  auto bad = [&](const std::string& why) {
    fail(ErrorKind::InvalidArgument, flag, "'" + url.substr(0, 80) + "': " + why + " (expected redis://HOST:PORT)");
  };
  if (url.rfind(scheme, 0) != 0) bad("only redis:// is supported");
  const std::string rest = url.substr(scheme.size());
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) bad("no port");
  const std::string host = rest.substr(0, colon), port = rest.substr(colon + 1);
  if (host.empty() || host.size() > 253) bad("the host must be 1..253 characters");
  for (char c : host)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-'))
      bad("the host may only hold letters, digits, '.' and '-' (no user info, database or options)");
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) bad("the port is not a number");
  const int p = std::stoi(port);
  if (p < 1 || p > 65535) bad("the port must be 1..65535");
  KvTierOptions o;
  o.host = host;
  o.port = p;
  return o;
}

// One connection, reconnected on demand but not more than once per kRetryAfter after a failure.
struct KvTier::Conn {
  const KvTierOptions* opt = nullptr;
  redisContext* c = nullptr;
  SteadyClock::time_point retry_at{};

  ~Conn() { drop(); }
  void drop() {
    if (c) redisFree(c);
    c = nullptr;
  }
  void failed() {
    drop();
    retry_at = SteadyClock::now() + kRetryAfter;
  }
  // A usable context, or null (down: skip).
  redisContext* get() {
    if (c) return c;
    if (SteadyClock::now() < retry_at) return nullptr;
    timeval tv{opt->timeout_ms / 1000, (opt->timeout_ms % 1000) * 1000};
    c = redisConnectWithTimeout(opt->host.c_str(), opt->port, tv);
    if (!c || c->err || redisSetTimeout(c, tv) != REDIS_OK) {
      failed();
      return nullptr;
    }
    return c;
  }
};

KvTier::KvTier(KvTierOptions options, kv::KvIdentity identity, Metrics* metrics)
    : opt_(std::move(options)), id_(std::move(identity)), metrics_(metrics) {
  PTN_CHECK(opt_.timeout_ms >= 1 && opt_.timeout_ms <= 10000, ErrorKind::InvalidArgument, "--kv-store-timeout-ms",
            "must be 1..10000");
  PTN_CHECK(opt_.ttl_seconds >= 1 && opt_.ttl_seconds <= 30 * 86400, ErrorKind::InvalidArgument, "--kv-store-ttl",
            "must be 1..2592000 seconds");
  PTN_CHECK(opt_.queue_blocks >= 1 && opt_.queue_blocks <= 65536, ErrorKind::InvalidArgument, "kv store queue",
            "must be 1..65536 blocks");
  (void)kv::block_data_bytes(id_, "kv store identity");
  prefix_ = "ptn:kv:" + hex16(id_.program_id) + ":" + dtype_name(id_.dtype) + ":" + std::to_string(id_.block_size) + ":";
  reader_ = std::make_unique<Conn>();
  reader_->opt = &opt_;
  fresh_for_ = std::min<Clock::duration>(std::chrono::seconds(opt_.ttl_seconds) / 2, std::chrono::seconds(60));
  metrics_->enable_kv_store();
  writer_ = std::thread([this] { writer_loop(); });
  reader_thread_ = std::thread([this] { reader_loop(); });
}

KvTier::~KvTier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  read_cv_.notify_all();
  writer_.join();
  reader_thread_.join();
}

std::string KvTier::key(uint64_t hash) const { return prefix_ + hex16(hash); }

bool KvTier::is_recent(uint64_t hash, Clock::time_point now) const {
  auto it = recent_.find(hash);
  return it != recent_.end() && now - it->second < fresh_for_;
}

bool KvTier::remember(uint64_t hash) {
  const auto now = Clock::now();
  if (is_recent(hash, now)) return false;
  recent_[hash] = now;
  recent_order_.emplace_back(hash, now);
  while (recent_order_.size() > kRecent) {
    const auto& [h, at] = recent_order_.front();
    auto it = recent_.find(h);
    if (it != recent_.end() && it->second == at) recent_.erase(it);
    recent_order_.pop_front();
  }
  return true;
}

void KvTier::forget(uint64_t hash) { recent_.erase(hash); }

std::shared_ptr<const KvTier::Fetch> KvTier::fetch_async(std::vector<uint64_t> hashes, std::vector<uint64_t> parents,
                                                         const int32_t* tokens, std::function<void()> on_done) {
  auto f = std::make_shared<Fetch>();
  const size_t n = std::min({hashes.size(), parents.size(), kMaxFetch});
  hashes.resize(n);
  parents.resize(n);
  f->hashes = std::move(hashes);
  f->parents = std::move(parents);
  f->tokens.assign(tokens, tokens + static_cast<int64_t>(n) * id_.block_size);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stop_) {
      reads_.push_back({f, std::move(on_done)});
      read_cv_.notify_one();
      return f;
    }
  }
  f->done = true;  // stopping: nothing read
  if (on_done) on_done();
  return f;
}

void KvTier::reader_loop() {
  for (;;) {
    Pending p;
    {
      std::unique_lock<std::mutex> lock(mu_);
      read_cv_.wait(lock, [&] { return stop_ || !reads_.empty(); });
      if (stop_) break;
      p = std::move(reads_.front());
      reads_.pop_front();
    }
    p.fetch->blocks = fetch(p.fetch->hashes, p.fetch->parents, p.fetch->tokens.data());
    p.fetch->done = true;
    if (p.on_done) p.on_done();
  }
  std::deque<Pending> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(reads_);
  }
  for (Pending& p : left) {
    p.fetch->done = true;
    if (p.on_done) p.on_done();
  }
}

std::vector<kv::BlockData> KvTier::fetch(const std::vector<uint64_t>& hashes, const std::vector<uint64_t>& parents,
                                         const int32_t* tokens) {
  std::vector<kv::BlockData> out;
  const size_t n = std::min({hashes.size(), parents.size(), kMaxFetch});
  if (n == 0) return out;
  KvStoreCounters d;
  const auto t0 = SteadyClock::now();
  redisContext* c = reader_->get();
  if (!c) {
    d.blocks_missed = 1;
    metrics_->add_kv_store(d);
    return out;
  }
  std::vector<std::string> keys;
  std::vector<const char*> argv{"MGET"};
  std::vector<size_t> lens{4};
  keys.reserve(n);
  for (size_t i = 0; i < n; ++i) keys.push_back(key(hashes[i]));
  for (const std::string& k : keys) {
    argv.push_back(k.data());
    lens.push_back(k.size());
  }
  auto* reply = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
  metrics_->observe_kv_store_read(seconds_since(t0));
  if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements != n) {
    if (reply) freeReplyObject(reply);
    reader_->failed();  // a timeout leaves the connection out of step: drop it
    d.errors = 1;
    d.blocks_missed = 1;
    metrics_->add_kv_store(d);
    return out;
  }
  const int64_t bs = id_.block_size;
  for (size_t i = 0; i < n; ++i) {
    const redisReply* r = reply->element[i];
    if (r->type != REDIS_REPLY_STRING) break;
    try {
      kv::KvRecord rec = kv::decode_record(reinterpret_cast<const uint8_t*>(r->str), r->len, key(hashes[i]));
      kv::check_identity(rec.id, id_, key(hashes[i]));
      if (rec.blocks.size() != 1) break;
      kv::BlockData& b = rec.blocks[0];
      if (b.hash != hashes[i] || b.parent != parents[i] ||
          std::memcmp(b.tokens.data(), tokens + static_cast<int64_t>(i) * bs, static_cast<size_t>(bs) * 4) != 0)
        break;  // another chain under this key (a 64-bit collision): not ours
      d.bytes_read += r->len;
      out.push_back(std::move(b));
    } catch (const Error&) {
      ++d.errors;  // damaged or foreign value: skipped, recomputed
      break;
    }
  }
  freeReplyObject(reply);
  d.blocks_read = out.size();
  if (out.size() < n) d.blocks_missed = 1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const kv::BlockData& b : out) remember(b.hash);  // in the store already: not written again
  }
  metrics_->add_kv_store(d);
  return out;
}

void KvTier::store(kv::BlockData block) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (is_recent(block.hash, Clock::now())) return;
    if (queue_.size() >= opt_.queue_blocks) {
      KvStoreCounters d;
      d.blocks_dropped = 1;
      metrics_->add_kv_store(d);
      return;
    }
    remember(block.hash);
    queue_.push_back(std::move(block));
  }
  cv_.notify_one();
}

size_t KvTier::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size() + (writing_ ? 1 : 0);
}

bool KvTier::flush(int ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return queue_.empty() && !writing_; });
}

void KvTier::writer_loop() {
  Conn conn;
  conn.opt = &opt_;
  const std::string ttl = std::to_string(opt_.ttl_seconds);
  for (;;) {
    kv::BlockData b;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;  // queued blocks are dropped: the store is a cache
      b = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
    }
    KvStoreCounters d;
    kv::KvRecord rec;
    rec.id = id_;
    const uint64_t hash = b.hash;
    rec.blocks.push_back(std::move(b));
    const std::vector<uint8_t> value = kv::encode_record(rec);
    const std::string k = key(hash);
    const auto t0 = SteadyClock::now();
    if (redisContext* c = conn.get()) {
      const char* argv[] = {"SET", k.data(), reinterpret_cast<const char*>(value.data()), "EX", ttl.data()};
      const size_t lens[] = {3, k.size(), value.size(), 2, ttl.size()};
      auto* reply = static_cast<redisReply*>(redisCommandArgv(c, 5, argv, lens));
      if (reply && reply->type == REDIS_REPLY_STATUS) {
        d.blocks_written = 1;
        d.bytes_written = value.size();
        metrics_->observe_kv_store_write(seconds_since(t0));
      } else {
        conn.failed();
        d.errors = 1;
        d.blocks_dropped = 1;
      }
      if (reply) freeReplyObject(reply);
    } else {
      d.blocks_dropped = 1;
    }
    metrics_->add_kv_store(d);
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      if (d.blocks_written == 0) forget(hash);  // not stored: may be offered again later
    }
    idle_cv_.notify_all();
  }
}

}  // namespace ptn::serve
