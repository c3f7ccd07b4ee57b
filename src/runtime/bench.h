// `ptn bench`: prompt processing and generation speed of a program, the way llama-bench
// reports them (pp N: tokens/s of an N-token prompt; tg N: tokens/s of N single-token steps;
// both from an empty cache, or with -d D after D tokens already in it, llama-bench's
// "pp512 @ d4096"), batched decode of several sequences, and the weight bytes streamed per
// generated token against the read bandwidth measured in the run.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/threadpool.h"
#include "runtime/program.h"

namespace ptn {

struct BenchOptions {
  int64_t n_prompt = 512;
  int64_t n_gen = 128;
  int reps = 3;
  std::vector<int64_t> depths = {0};  // pp and tg run after this many tokens in the cache, each
  std::vector<int64_t> batches;  // batched decode with this many sequences each
  int64_t batch_context = 128;   // prompt tokens of each sequence before batched decode
  int64_t batch_steps = 32;
  DType cache_dtype = DType::F32;
};

struct BenchResult {
  std::string test;           // "pp512", "tg128", "pp512 @ d4096", "batch8"
  int64_t depth = 0;          // tokens in the cache before the timed ones
  int64_t tokens = 0;         // tokens per repetition
  double mean_tps = 0, std_tps = 0;
  size_t kv_bytes = 0;        // K/V bytes the cache held at the end of the test
  std::vector<double> samples;
};

struct BenchReport {
  std::vector<BenchResult> results;
  double weight_bytes_per_token = 0;  // bytes of weights one decode step streams
  double read_bandwidth_gbs = 0;      // best read bandwidth measured in the run
};

BenchReport run_bench(std::shared_ptr<const Program> program, const BenchOptions& o, ThreadPool& pool);

}  // namespace ptn
