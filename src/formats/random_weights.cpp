#include "formats/random_weights.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "core/error.h"

namespace ptn {

namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// splitmix64: a small, well-mixed generator; one stream per tensor.
struct SplitMix {
  uint64_t x;
  uint64_t next() {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }  // (0, 1)
};

class RandomSource final : public WeightSource {
 public:
  RandomSource(const ModelSpec& spec, uint64_t seed, const RandomWeightSpread& spread) : spec_(spec), seed_(seed), spread_(spread) {
    for (const auto& n : canonical_tensor_names(spec_)) names_.insert(n);
    if (spec_.tensor_sources.empty())
      for (const auto& n : names_) spec_.tensor_sources[n] = n;
    std::string note = "random weights, seed " + std::to_string(seed);
    if (spread.matrix_std != 0.02 || spread.norm_spread != 0 || spread.bias_std != 0) {
      char b[160];
      std::snprintf(b, sizeof b, " (matrices N(0, %g), norms unit + U(-%g, %g), biases N(0, %g))", spread.matrix_std,
                    spread.norm_spread, spread.norm_spread, spread.bias_std);
      note += b;
    }
    spec_.source_notes.push_back(note);
  }
  const ModelSpec& spec() const override { return spec_; }
  bool has(const std::string& name) const override { return names_.count(name) != 0; }
  std::vector<std::string> names() const override { return {names_.begin(), names_.end()}; }
  std::string describe() const override { return "random weights (seed " + std::to_string(seed_) + ")"; }

  Tensor get(const std::string& name) const override {
    if (!has(name)) fail(ErrorKind::InvalidArgument, describe() + ": tensor '" + name + "'", "no such tensor");
    std::vector<int64_t> shape = canonical_tensor_shape(spec_, name);
    Tensor t = Tensor::zeros(DType::F32, shape);
    float* p = t.data_as<float>();
    const int64_t n = t.numel();
    SplitMix rng{seed_ ^ fnv1a(name)};
    auto normals = [&](double std) {
      for (int64_t k = 0; k < n; k += 2) {  // Box-Muller: two normals per pair of uniforms
        const double r = std::sqrt(-2.0 * std::log(rng.uniform())), a = 6.283185307179586 * rng.uniform();
        p[k] = static_cast<float>(std * r * std::cos(a));
        if (k + 1 < n) p[k + 1] = static_cast<float>(std * r * std::sin(a));
      }
    };
    if (name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0) {
      if (spread_.bias_std > 0) normals(spread_.bias_std);  // else zeros
      return t;
    }
    if (is_vector_tensor(name)) {
      const double unit = spec_.norm_weight_plus_one ? 0.0 : 1.0;
      for (int64_t k = 0; k < n; ++k)
        p[k] = static_cast<float>(spread_.norm_spread > 0 ? unit + spread_.norm_spread * (2.0 * rng.uniform() - 1.0) : unit);
      return t;
    }
    normals(spread_.matrix_std);
    return t;
  }

 private:
  ModelSpec spec_;
  uint64_t seed_;
  RandomWeightSpread spread_;
  std::set<std::string> names_;
};

}  // namespace

std::unique_ptr<WeightSource> random_weights(const ModelSpec& spec, uint64_t seed, const RandomWeightSpread& spread) {
  if (spec.n_layers <= 0 || spec.hidden_size <= 0 || spec.vocab_size <= 0)
    fail(ErrorKind::InvalidArgument, "random weights", "the spec has no dimensions");
  if (!(spread.matrix_std > 0 && spread.matrix_std <= 10) || !(spread.norm_spread >= 0 && spread.norm_spread <= 10) ||
      !(spread.bias_std >= 0 && spread.bias_std <= 10))
    fail(ErrorKind::InvalidArgument, "random weights", "spreads must be finite, in [0, 10] (the matrices' above 0)");
  return std::make_unique<RandomSource>(spec, seed, spread);
}

}  // namespace ptn
