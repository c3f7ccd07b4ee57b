// Numbers read from JSON that came from outside (manifests, graph attributes, requests).
// nlohmann's get<I>() converts whatever number it holds with a plain cast: 2^32 + 1 wraps to 1
// as an int32, and a double such as 1e300 converts to an integer, or to float, with undefined
// behaviour. These helpers give the value only when it is exactly representable as asked.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

namespace ptn {

// An integer of type I, from a JSON integer (signed or unsigned) in I's range; nullopt for
// anything else (floats, even integral ones such as 2.0, are refused: exporters write integers).
template <class I, class Json>
std::optional<I> json_integer(const Json& v) {
  static_assert(std::is_integral_v<I> && !std::is_same_v<I, bool>);
  if (v.is_number_unsigned()) {
    const uint64_t u = v.template get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<I>::max())) return std::nullopt;
    return static_cast<I>(u);
  }
  if (!v.is_number_integer()) return std::nullopt;
  const int64_t s = v.template get<int64_t>();
  if (s < 0) {
    if (!std::is_signed_v<I> || s < static_cast<int64_t>(std::numeric_limits<I>::min())) return std::nullopt;
  } else if (static_cast<uint64_t>(s) > static_cast<uint64_t>(std::numeric_limits<I>::max())) {
    return std::nullopt;
  }
  return static_cast<I>(s);
}

// A finite float or double from any JSON number; nullopt for non-numbers, NaN/inf and doubles
// beyond F's range.
template <class F, class Json>
std::optional<F> json_real(const Json& v) {
  static_assert(std::is_floating_point_v<F>);
  if (!v.is_number()) return std::nullopt;
  const double d = v.template get<double>();
  if (!std::isfinite(d) || std::fabs(d) > static_cast<double>(std::numeric_limits<F>::max())) return std::nullopt;
  return static_cast<F>(d);
}

}  // namespace ptn
