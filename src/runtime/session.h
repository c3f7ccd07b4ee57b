// A Session runs one sequence of a program: the executor, a cache installed for it, and the
// position reached. `ptn run`, `ptn chat` and `ptn perplexity` are built on it; the server
// drives the executor directly with many sequences.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kvcache/cache.h"
#include "kvcache/kv_record.h"
#include "runtime/executor.h"

namespace ptn {

struct SessionOptions {
  ExecMode mode = ExecMode::Optimized;
  std::string cache_kind = "paged";  // paged | reference
  DType cache_dtype = DType::F32;
  int64_t context = 0;               // tokens the cache holds (0: the model's context length)
  int64_t block_size = 16;
};

class Session {
 public:
  Session(std::shared_ptr<const Program> program, const SessionOptions& options, ThreadPool* pool = nullptr);
  ~Session();

  // Appends tokens (prefilled in chunks of the program's max_seq_length) and returns the
  // logits after the last one ([vocab], valid until the next call). With `all_logits`,
  // `on_logits(i, logits)` is called for every token i of `tokens`.
  const float* feed(const std::vector<int32_t>& tokens,
                    const std::function<void(int64_t, const float*)>& on_logits = {});
  int64_t position() const { return position_; }
  int64_t context() const { return context_; }
  // Keeps the first n tokens (n <= position()).
  void rewind(int64_t n);
  void reset() { rewind(0); }
  const Program& program() const { return *program_; }
  Executor& executor() { return *exec_; }
  KVCache* cache() { return cache_.get(); }

  // --- KV state on disk (kvcache/kv_record.h, docs/kv-format.md; a paged cache only) ---
  // The tokens fed so far and the leading full blocks the cache holds for them.
  kv::KvRecord save_kv() const;
  // Restores a record into an empty session (position 0): checks its identity against this
  // session's cache and its tokens against the vocabulary and context (InvalidArgument naming
  // `source` and the field), puts its blocks into the cache and attaches the longest prefix
  // they cover, leaving at least the last token to compute. Returns the new position; the
  // caller feeds record.tokens from there to get logits. Throws Unsupported without a paged cache.
  int64_t restore_kv(const kv::KvRecord& record, const std::string& source);

 private:
  std::shared_ptr<const Program> program_;
  std::unique_ptr<Executor> exec_;
  std::unique_ptr<KVCache> cache_;
  std::unique_ptr<CacheScope> scope_;
  int64_t position_ = 0;
  int64_t context_ = 0;
};

}  // namespace ptn
