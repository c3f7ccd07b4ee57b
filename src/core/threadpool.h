// A pool of persistent worker threads. The caller is thread 0 and takes part in every job, so a
// pool of N threads starts N-1 workers. Workers spin briefly between jobs (a decode step issues
// hundreds of small jobs) and then sleep on a futex-backed atomic wait.
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ptn {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(thread_index, n_threads) once on every thread and returns when all have finished.
  // The first exception thrown by any thread is rethrown here. Calls from several threads are
  // serialised (one job at a time); a job that calls run() on its own pool gets fn(0, 1) run
  // inline on the calling thread.
  void run(const std::function<void(int, int)>& fn);

  // Splits [0, n) into contiguous ranges, one per thread (ranges aligned to `grain`), and
  // calls fn(begin, end, thread_index) for each non-empty range.
  template <class F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    const int64_t units = (n + grain - 1) / grain;
    if (n_threads_ == 1 || units == 1) {
      fn(int64_t{0}, n, 0);
      return;
    }
    run([&](int ti, int nt) {
      const int64_t per = (units + nt - 1) / nt;
      const int64_t b = std::min<int64_t>(n, ti * per * grain);
      const int64_t e = std::min<int64_t>(n, (ti + 1) * per * grain);
      if (b < e) fn(b, e, ti);
    });
  }

  // Like parallel_for, but the threads take chunks of `grain` indices in turn from a shared
  // counter until none is left, so fn(begin, end, thread_index) may run several times per
  // thread. For work whose cost varies along [0, n): in causal attention a later row attends to
  // more positions, and contiguous halves of a prompt's rows cost 1 : 3.
  template <class F>
  void parallel_for_dynamic(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (n_threads_ == 1 || n <= grain) {
      fn(int64_t{0}, n, 0);
      return;
    }
    std::atomic<int64_t> next{0};
    run([&](int ti, int) {
      for (;;) {
        const int64_t b = next.fetch_add(grain, std::memory_order_relaxed);
        if (b >= n) break;
        fn(b, std::min<int64_t>(n, b + grain), ti);
      }
    });
  }

 private:
  void worker(int index);
  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* job_ = nullptr;
  alignas(64) std::atomic<uint64_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::mutex run_mu_;  // held by the thread whose job is running
  std::mutex error_mu_;
  std::exception_ptr error_;
};

// The process-wide pool used by ops when no pool is passed; sized by set_default_threads
// (the CLI's -t) or, by default, the number of CPUs.
ThreadPool& default_pool();
void set_default_threads(int n);
int default_threads();

}  // namespace ptn
