#include "core/threadpool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <memory>

#include "core/error.h"

namespace ptn {

#if defined(__x86_64__) || defined(__i386__)
static inline void cpu_relax() { _mm_pause(); }
#elif defined(__aarch64__)
static inline void cpu_relax() { __asm__ volatile("yield"); }
#else
static inline void cpu_relax() {}
#endif

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

// The pool whose job the current thread is executing (null outside jobs): a nested run() on the
// same pool would wait for itself.
static thread_local const ThreadPool* t_in_job = nullptr;

namespace {
struct InJob {
  const ThreadPool* saved;
  explicit InJob(const ThreadPool* p) : saved(t_in_job) { t_in_job = p; }
  ~InJob() { t_in_job = saved; }
};
}  // namespace

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1 || t_in_job == this) {
    fn(0, 1);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mu_);
  InJob in_job(this);
  error_ = nullptr;
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  try {
    fn(0, n_threads_);
  } catch (...) {
    std::lock_guard<std::mutex> lk(error_mu_);
    if (!error_) error_ = std::current_exception();
  }
  // Wait for the workers; they finish within microseconds of each other on a balanced job.
  // Spin briefly, then yield: when the machine has more runnable threads than cores, the
  // worker we wait for may need our core to finish (a long spin would cost a time slice).
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 2000) cpu_relax();
    else std::this_thread::yield();
  }
  job_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::worker(int index) {
  t_in_job = this;  // a worker only ever runs this pool's jobs
  uint64_t seen = 0;
  for (;;) {
    // Spin for a short while (a step issues many jobs back to back), then yield the core for a
    // while (another thread may need it), then sleep.
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int spins = 0; g == seen && spins < 40000; ++spins) {
      if (spins < 2000) cpu_relax();
      else std::this_thread::yield();
      g = generation_.load(std::memory_order_acquire);
    }
    while (g == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    try {
      (*job_)(index, n_threads_);
    } catch (...) {
      std::lock_guard<std::mutex> lk(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

static std::mutex g_pool_mu;
static std::unique_ptr<ThreadPool> g_pool;
static int g_threads = 0;

int default_threads() {
  if (g_threads > 0) return g_threads;
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void set_default_threads(int n) {
  if (n < 1 || n > 1024)
    fail(ErrorKind::InvalidArgument, "threads", "thread count must be 1..1024, got " + std::to_string(n));
  std::lock_guard<std::mutex> lk(g_pool_mu);
  if (g_pool && g_pool->size() == n) return;
  g_pool.reset();
  g_threads = n;
}

ThreadPool& default_pool() {
  std::lock_guard<std::mutex> lk(g_pool_mu);
  if (!g_pool) g_pool = std::make_unique<ThreadPool>(default_threads());
  return *g_pool;
}

}  // namespace ptn
