// A STREAM-like memory read probe: every thread of the pool sums its share of a buffer much
// larger than the last-level cache. Benchmarks print it next to the bytes they stream, so the
// ratio is read off one run (this machine's bandwidth swings from run to run).
#pragma once
#include <cstddef>

#include "core/threadpool.h"

namespace ptn {

// Best of `passes` passes over `bytes` bytes (default 256 MiB), in GB/s (1e9 bytes per second).
double measure_read_bandwidth(ThreadPool& pool, size_t bytes = size_t{256} << 20, int passes = 5);

}  // namespace ptn
