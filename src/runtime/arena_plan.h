// The activation arena's planner: offsets in one buffer for values whose lifetimes are known in
// advance, so that a value's memory is reused once it is dead. The executor plans once, for its
// largest step, and then runs every step in the same buffer with no allocation.
//
//   ArenaPlanner plan;
//   const size_t a = plan.allocate(bytes_a);   // a value is born
//   plan.release(a, bytes_a);                  // after its last use
//   const size_t b = plan.allocate(bytes_b);   // may reuse a's bytes
//   buffer = aligned_buffer(plan.total());
//
// Every range starts at a multiple of kAlign (SIMD loads) and takes whole kAlign units. Two
// values allocated and not released in between never overlap. allocate takes the smallest free
// range that fits (best fit; the lowest offset among equals), else grows the arena at its top.
#pragma once
#include <cstddef>
#include <vector>

namespace ptn {

class ArenaPlanner {
 public:
  static constexpr size_t kAlign = 64;

  // Offset of `bytes` (rounded up to kAlign) of memory no live value holds.
  size_t allocate(size_t bytes);
  // Frees what allocate(bytes) returned at `offset`; adjacent free ranges merge. Each
  // allocation must be released at most once.
  void release(size_t offset, size_t bytes);
  // Bytes the arena needs for everything planned so far (the top, a multiple of kAlign).
  size_t total() const { return top_; }

  static size_t round_up(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

 private:
  struct Range {
    size_t off, size;
  };
  std::vector<Range> free_;  // sorted by offset, no two adjacent
  size_t top_ = 0;
};

}  // namespace ptn
