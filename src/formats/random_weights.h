// Random weights from a ModelSpec alone, generated on demand (f32): matrices N(0, 0.02),
// biases 0, norm weights at unit scale (1, or 0 when the spec's norms scale by 1 + w).
// Deterministic: a tensor depends only on the seed and its canonical name, so a tensor reads
// the same whatever else is generated, and in any order.
#pragma once
#include <cstdint>
#include <memory>

#include "formats/weights.h"

namespace ptn {

std::unique_ptr<WeightSource> random_weights(const ModelSpec& spec, uint64_t seed);

}  // namespace ptn
