#include "runtime/arena_plan.h"

#include <algorithm>
#include <cstdint>

namespace ptn {

size_t ArenaPlanner::allocate(size_t bytes) {
  bytes = round_up(bytes);
  size_t best = SIZE_MAX;
  for (size_t k = 0; k < free_.size(); ++k)
    if (free_[k].size >= bytes && (best == SIZE_MAX || free_[k].size < free_[best].size)) best = k;
  if (best != SIZE_MAX) {
    const size_t off = free_[best].off;
    free_[best].off += bytes;
    free_[best].size -= bytes;
    if (free_[best].size == 0) free_.erase(free_.begin() + static_cast<long>(best));
    return off;
  }
  const size_t off = top_;
  top_ += bytes;
  return off;
}

void ArenaPlanner::release(size_t offset, size_t bytes) {
  free_.push_back({offset, round_up(bytes)});
  std::sort(free_.begin(), free_.end(), [](const Range& a, const Range& b) { return a.off < b.off; });
  std::vector<Range> merged;
  for (const Range& f : free_) {
    if (!merged.empty() && merged.back().off + merged.back().size == f.off) merged.back().size += f.size;
    else merged.push_back(f);
  }
  free_.swap(merged);
}

}  // namespace ptn
