// Random weights from a ModelSpec alone, generated on demand (f32): by default matrices
// N(0, 0.02), biases 0, norm weights at unit scale (1, or 0 when the spec's norms scale by 1 + w).
// Deterministic: a tensor depends only on the seed and its canonical name, so a tensor reads
// the same whatever else is generated, and in any order.
#pragma once
#include <cstdint>
#include <memory>

#include "formats/weights.h"

namespace ptn {

// How far the weights stray from the defaults. Unit norms and zero biases leave a model's norm
// weights and biases untested and its output near uniform; `varied()` gives every vector
// tensor a value of its own, so that comparing two engines on such a model checks them too.
struct RandomWeightSpread {
  double matrix_std = 0.02;  // matrices N(0, matrix_std)
  double norm_spread = 0;    // norm weights (and other vectors) unit + U(-norm_spread, norm_spread)
  double bias_std = 0;       // biases N(0, bias_std)
  static RandomWeightSpread varied() { return {0.1, 0.5, 0.2}; }
};

std::unique_ptr<WeightSource> random_weights(const ModelSpec& spec, uint64_t seed, const RandomWeightSpread& spread = {});

}  // namespace ptn
