// Runs a program step by step. A step is T token rows, possibly from several sequences; which
// sequence a row belongs to travels beside the graph in the StepBatch, never inside it.
//
//   Executor exec(program, ExecMode::Optimized, /*max_rows=*/512, &pool);
//   auto cache = make_cache("paged", program->meta().cache_spec, options);
//   CacheScope scope(exec, *cache);        // the cache is installed only inside this scope
//   const float* logits = exec.step(batch, OutputRows::LastPerSequence, &n_out);
//
// Activation memory is planned once for the largest step (no heap allocation per step).
// ExecMode::Reference uses the plain reference ops on one thread: the independent path that
// golden samples come from.
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "core/threadpool.h"
#include "kvcache/cache.h"
#include "runtime/program.h"

namespace ptn {

enum class ExecMode { Reference, Optimized };
enum class OutputRows { LastPerSequence, All };

// Whether optimized executors made from now on (on an AVX-512 CPU) copy their matrices into
// memory laid out for the kernels: Q4_K, Q8_0, Q4_0, IQ4_NL and MXFP4 interleaved 16 rows at a time, BF16 in 32-row
// panels (with BF16 dot products), every other matrix as it is; all in 2 MB pages where the
// system allows (kernels/matmul.h). The same bytes, multiplied with fewer instructions and
// fewer page walks. On by default. A program mapped from its file gets the copied matrices'
// file pages unmapped (they come back from the file if read again), so the memory held stays
// about the same; a program held in memory keeps both. Costs a moment at start.
void set_weight_repack(bool on);
bool weight_repack();

// The ops this engine can run (for the exporter's op-support report).
const std::set<OpType>& engine_ops();

class Executor {
 public:
  Executor(std::shared_ptr<const Program> program, ExecMode mode, int64_t max_rows, ThreadPool* pool = nullptr);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs one step and returns its logits, [n_out, vocab] row-major, valid until the next step.
  // LastPerSequence: one row per sequence, in the order sequences first appear in the batch.
  // Off-graph programs need a cache installed (CacheScope); the step is a cache transaction:
  // if anything fails, the cache is left as it was. Static-cache programs use their own buffers
  // and accept one sequence.
  const float* step(const StepBatch& batch, OutputRows rows, int64_t* n_out);

  // As step, selecting the rows listed (indices into batch.rows, 1..T of them, in the order
  // given; a row may be listed twice). With `logits` false the classifier is not run and the
  // result is nullptr: only hidden() is computed (refused for programs without it).
  const float* step_rows(const StepBatch& batch, const std::vector<int32_t>& rows, bool logits, int64_t* n_out);
  // The last step's final-norm hidden states of the selected rows, [n_out, hidden_size()]
  // row-major, valid until the next step; nullptr when the program has no `hidden` output.
  const float* hidden() const;
  int64_t hidden_size() const;  // 0: the program has no `hidden` output

  const Program& program() const { return *program_; }
  int64_t max_rows() const { return max_rows_; }
  int64_t vocab_size() const { return program_->meta().spec.vocab_size; }
  size_t arena_bytes() const;
  KVCache* installed_cache() const { return cache_; }
  // Static-cache programs: forget what the buffers hold (a new sequence).
  void reset_static_cache();

 private:
  friend class CacheScope;
  const float* run_step(const StepBatch& batch, OutputRows which, const std::vector<int32_t>* listed, bool logits,
                        int64_t* n_out);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::shared_ptr<const Program> program_;
  int64_t max_rows_;
  KVCache* cache_ = nullptr;
};

// Installs `cache` for `exec` for the lifetime of the scope; leaving it (also by an exception)
// uninstalls it. At most one cache is installed per executor at a time. The cache must fit
// the program's cache spec.
class CacheScope {
 public:
  CacheScope(Executor& exec, KVCache& cache);
  ~CacheScope();
  CacheScope(const CacheScope&) = delete;
  CacheScope& operator=(const CacheScope&) = delete;

 private:
  Executor& exec_;
};

}  // namespace ptn
