// Server counters and latency histograms, rendered in the Prometheus text format for /metrics.
// Thread-safe: HTTP threads count requests, the engine thread counts tokens and latencies.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace ptn::serve {

// A cumulative histogram over fixed upper bounds in seconds.
class Histogram {
 public:
  static constexpr std::array<double, 12> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                     0.1,   0.25,   0.5,   1.0,  2.5,   10.0};
  void observe(double seconds);
  // Lines `<name>_bucket{le="..."}`, `<name>_sum`, `<name>_count`.
  std::string render(const std::string& name, const std::string& help) const;

 private:
  std::array<uint64_t, kBounds.size()> counts_{};  // non-cumulative per bucket
  uint64_t inf_ = 0;
  uint64_t count_ = 0;
  double sum_ = 0.0;
};

// Gauges the engine publishes once per step.
struct EngineGauges {
  int64_t queue_length = 0;
  int64_t running = 0;
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks_cached = 0;
  int64_t kv_blocks_free = 0;
  uint64_t kv_bytes_used = 0;
  uint64_t kv_bytes_peak = 0;
};

// The shared prefix tier's counters (serve/kv_tier.h), added as deltas.
struct KvStoreCounters {
  uint64_t blocks_read = 0;     // blocks fetched and restored into the cache
  uint64_t blocks_missed = 0;   // lookups that found no (usable) block
  uint64_t blocks_written = 0;  // blocks the writer stored
  uint64_t blocks_dropped = 0;  // blocks not written: queue full or the store failing
  uint64_t errors = 0;          // failed connections or commands (each one skipped)
  uint64_t bytes_read = 0, bytes_written = 0;
};

class Metrics {
 public:
  // The tier's series appear in render() once it is enabled (ptn serve --kv-store).
  void enable_kv_store();
  void add_kv_store(const KvStoreCounters& delta);
  void observe_kv_store_read(double seconds);
  void observe_kv_store_write(double seconds);
  KvStoreCounters kv_store() const;
  void count_request(const std::string& endpoint, int status);
  void add_prompt_tokens(int64_t n);
  void add_generated_tokens(int64_t n);
  void add_cached_tokens(int64_t n);
  void add_preemption();
  // Speculative decoding (--lookup-draft): tokens drafted, and those the model agreed with.
  void add_speculation(int64_t drafted, int64_t accepted);
  void observe_ttft(double seconds);
  void observe_itl(double seconds);
  void set_gauges(const EngineGauges& g);
  EngineGauges gauges() const;
  int64_t prefix_hit_tokens() const;
  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;  // (endpoint, status) -> count
  int64_t prompt_tokens_ = 0, generated_tokens_ = 0, cached_tokens_ = 0, preemptions_ = 0;
  int64_t drafted_tokens_ = 0, accepted_tokens_ = 0;
  Histogram ttft_, itl_;
  EngineGauges gauges_;
  bool kv_store_on_ = false;
  KvStoreCounters kv_store_;
  Histogram kv_read_, kv_write_;
};

}  // namespace ptn::serve
