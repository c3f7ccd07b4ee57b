#include "serve/metrics.h"

#include <cstdio>

namespace ptn::serve {

namespace {
std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}
}  // namespace

void Histogram::observe(double seconds) {
  size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  if (i < kBounds.size())
    ++counts_[i];
  else
    ++inf_;
  ++count_;
  sum_ += seconds;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  std::string s = "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    cum += counts_[i];
    s += name + "_bucket{le=\"" + fmt_double(kBounds[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  s += name + "_bucket{le=\"+Inf\"} " + std::to_string(cum + inf_) + "\n";
  s += name + "_sum " + fmt_double(sum_) + "\n";
  s += name + "_count " + std::to_string(count_) + "\n";
  return s;
}

void Metrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, status}];
}
void Metrics::add_prompt_tokens(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += n;
}
void Metrics::add_generated_tokens(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  generated_tokens_ += n;
}
void Metrics::add_cached_tokens(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  cached_tokens_ += n;
}
void Metrics::add_preemption() {
  std::lock_guard<std::mutex> lock(mu_);
  ++preemptions_;
}
void Metrics::add_speculation(int64_t drafted, int64_t accepted) {
  std::lock_guard<std::mutex> lock(mu_);
  drafted_tokens_ += drafted;
  accepted_tokens_ += accepted;
}
void Metrics::observe_ttft(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ttft_.observe(seconds);
}
void Metrics::observe_itl(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  itl_.observe(seconds);
}
void Metrics::set_gauges(const EngineGauges& g) {
  std::lock_guard<std::mutex> lock(mu_);
  gauges_ = g;
}
EngineGauges Metrics::gauges() const {
  std::lock_guard<std::mutex> lock(mu_);
  return gauges_;
}
int64_t Metrics::prefix_hit_tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_tokens_;
}

void Metrics::enable_kv_store() {
  std::lock_guard<std::mutex> lock(mu_);
  kv_store_on_ = true;
}

void Metrics::add_kv_store(const KvStoreCounters& d) {
  std::lock_guard<std::mutex> lock(mu_);
  kv_store_.blocks_read += d.blocks_read;
  kv_store_.blocks_missed += d.blocks_missed;
  kv_store_.blocks_written += d.blocks_written;
  kv_store_.blocks_dropped += d.blocks_dropped;
  kv_store_.errors += d.errors;
  kv_store_.bytes_read += d.bytes_read;
  kv_store_.bytes_written += d.bytes_written;
}

void Metrics::observe_kv_store_read(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  kv_read_.observe(seconds);
}

void Metrics::observe_kv_store_write(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  kv_write_.observe(seconds);
}

KvStoreCounters Metrics::kv_store() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kv_store_;
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string s;
  auto counter = [&](const std::string& name, const std::string& help, int64_t v) {
    s += "# HELP " + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " + std::to_string(v) + "\n";
  };
  auto gauge = [&](const std::string& name, const std::string& help, uint64_t v) {
    s += "# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " + std::to_string(v) + "\n";
  };
  s += "# HELP ptn_requests_total HTTP requests by endpoint and status code.\n# TYPE ptn_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    s += "ptn_requests_total{endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " +
         std::to_string(n) + "\n";
  counter("ptn_prompt_tokens_total", "Prompt tokens of admitted requests.", prompt_tokens_);
  counter("ptn_generated_tokens_total", "Tokens generated.", generated_tokens_);
  counter("ptn_prefix_cache_hit_tokens_total", "Prompt tokens served from the prefix cache.", cached_tokens_);
  counter("ptn_preemptions_total", "Running sequences preempted for lack of KV blocks.", preemptions_);
  counter("ptn_speculative_drafted_tokens_total", "Tokens drafted by prompt lookup (--lookup-draft).", drafted_tokens_);
  counter("ptn_speculative_accepted_tokens_total", "Drafted tokens the model agreed with (kept without a step of their own).",
          accepted_tokens_);
  gauge("ptn_queue_length", "Requests waiting for admission.", gauges_.queue_length);
  gauge("ptn_running_sequences", "Sequences being generated.", gauges_.running);
  gauge("ptn_kv_blocks_total", "KV cache blocks in the pool.", gauges_.kv_blocks_total);
  gauge("ptn_kv_blocks_used", "KV cache blocks held by sequences.", gauges_.kv_blocks_used);
  gauge("ptn_kv_blocks_cached", "Free KV cache blocks kept for prefix reuse.", gauges_.kv_blocks_cached);
  gauge("ptn_kv_blocks_free", "KV cache blocks holding nothing.", gauges_.kv_blocks_free);
  gauge("ptn_kv_bytes_used", "KV bytes held by live sequences.", gauges_.kv_bytes_used);
  gauge("ptn_kv_bytes_peak", "Highest KV bytes held by live sequences since start.", gauges_.kv_bytes_peak);
  s += ttft_.render("ptn_time_to_first_token_seconds", "Time from arrival to the first generated token.");
  s += itl_.render("ptn_inter_token_latency_seconds", "Time between consecutive generated tokens of a request.");
  if (kv_store_on_) {
    const KvStoreCounters& k = kv_store_;
    counter("ptn_kv_store_blocks_read_total", "KV blocks fetched from the shared store and restored.", static_cast<int64_t>(k.blocks_read));
    counter("ptn_kv_store_blocks_missed_total", "KV block lookups the shared store could not serve.", static_cast<int64_t>(k.blocks_missed));
    counter("ptn_kv_store_blocks_written_total", "KV blocks written to the shared store.", static_cast<int64_t>(k.blocks_written));
    counter("ptn_kv_store_blocks_dropped_total", "KV blocks not written (queue full or store failing).", static_cast<int64_t>(k.blocks_dropped));
    counter("ptn_kv_store_errors_total", "Failed connections or commands to the shared store (skipped).", static_cast<int64_t>(k.errors));
    counter("ptn_kv_store_bytes_read_total", "Bytes of KV records read from the shared store.", static_cast<int64_t>(k.bytes_read));
    counter("ptn_kv_store_bytes_written_total", "Bytes of KV records written to the shared store.", static_cast<int64_t>(k.bytes_written));
    s += kv_read_.render("ptn_kv_store_read_seconds", "Time of one lookup in the shared store (one MGET).");
    s += kv_write_.render("ptn_kv_store_write_seconds", "Time of one block write to the shared store.");
  }
  return s;
}

}  // namespace ptn::serve
