// Reference ops (ptn::ref): the readable definitions, in double, one thread. Also the argument
// checks that the reference and optimized ops share.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/quant.h"
#include "kernels/ops.h"
#include "kernels/ops_internal.h"

namespace ptn {
namespace kdetail {

namespace {
std::string num(int64_t v) { return std::to_string(v); }
std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
[[noreturn]] void bad(const char* op, const std::string& msg) {
  fail(ErrorKind::InvalidArgument, op, msg);
}
bool product_fits(int64_t a, int64_t b) {
  return a == 0 || b <= std::numeric_limits<int64_t>::max() / a;
}
}  // namespace

void check_rows(const char* op, const void* x, const void* y, int64_t rows, int64_t dim) {
  const std::string shape = "rows=" + num(rows) + " dim=" + num(dim);
  if (rows < 0) bad(op, shape + ": rows must be >= 0");
  if (dim < 1) bad(op, shape + ": dim must be >= 1");
  if (!product_fits(rows, dim)) bad(op, shape + ": rows * dim overflows");
  if (rows > 0 && (x == nullptr || y == nullptr)) bad(op, shape + ": null input or output");
}

void check_n(const char* op, int64_t n, const void* a, const void* b, const void* c) {
  if (n < 0) bad(op, "n=" + num(n) + ": n must be >= 0");
  if (n > 0 && (a == nullptr || b == nullptr || c == nullptr))
    bad(op, "n=" + num(n) + ": null input or output");
}

void check_eps(const char* op, float eps) {
  if (!std::isfinite(eps) || eps < 0) bad(op, "eps=" + num(double{eps}) + ": must be finite and >= 0");
}

void check_rope(const char* op, const float* x, const int32_t* positions, int64_t rows,
                int64_t n_heads, int64_t head_dim, int64_t rope_dim) {
  const std::string shape = "rows=" + num(rows) + " n_heads=" + num(n_heads) +
                            " head_dim=" + num(head_dim) + " rope_dim=" + num(rope_dim);
  if (rows < 0 || n_heads < 1 || head_dim < 1)
    bad(op, shape + ": need rows >= 0, n_heads >= 1, head_dim >= 1");
  if (rope_dim < 2 || rope_dim > head_dim || rope_dim % 2 != 0)
    bad(op, shape + ": rope_dim must be even and in [2, head_dim]");
  if (!product_fits(rows, n_heads) || !product_fits(rows * n_heads, head_dim))
    bad(op, shape + ": size overflows");
  if (rows > 0 && (x == nullptr || positions == nullptr)) bad(op, shape + ": null x or positions");
}

void check_rope_params(const char* op, const RopeParams& p, int64_t rope_dim) {
  if (rope_dim < 2 || rope_dim % 2 != 0)
    bad(op, "rope_dim=" + num(rope_dim) + ": must be even and >= 2");
  if (!std::isfinite(p.theta) || p.theta <= 1.0)
    bad(op, "theta=" + num(p.theta) + ": must be finite and > 1");
  if (p.scaling != RopeFreqScaling::None && (!std::isfinite(p.factor) || p.factor <= 0))
    bad(op, "factor=" + num(p.factor) + ": must be finite and > 0");
  if (p.scaling == RopeFreqScaling::Llama3) {
    if (p.original_max_position <= 0)
      bad(op, "original_max_position=" + num(p.original_max_position) + ": llama3 scaling needs it > 0");
    if (!std::isfinite(p.low_freq_factor) || !std::isfinite(p.high_freq_factor) ||
        p.low_freq_factor <= 0 || p.high_freq_factor < p.low_freq_factor)
      bad(op, "low_freq_factor=" + num(p.low_freq_factor) + " high_freq_factor=" +
                  num(p.high_freq_factor) + ": need 0 < low_freq_factor <= high_freq_factor");
  }
  if (p.scaling == RopeFreqScaling::Yarn) {
    if (p.original_max_position <= 0)
      bad(op, "original_max_position=" + num(p.original_max_position) + ": yarn scaling needs it > 0");
    if (!std::isfinite(p.beta_fast) || !std::isfinite(p.beta_slow) || p.beta_fast <= 0 ||
        p.beta_slow <= 0)
      bad(op, "beta_fast=" + num(p.beta_fast) + " beta_slow=" + num(p.beta_slow) +
                  ": must be finite and > 0");
    if (!std::isfinite(p.attn_factor) || p.attn_factor < 0 || !std::isfinite(p.mscale) ||
        !std::isfinite(p.mscale_all_dim))
      bad(op, "attn_factor=" + num(p.attn_factor) + " mscale=" + num(p.mscale) +
                  " mscale_all_dim=" + num(p.mscale_all_dim) + ": must be finite, attn_factor >= 0");
  }
  if (p.scaling == RopeFreqScaling::LongRope) {
    if (static_cast<int64_t>(p.freq_divisors.size()) != rope_dim / 2)
      bad(op, "longrope has " + num(static_cast<int64_t>(p.freq_divisors.size())) + " frequency divisors for rope_dim=" +
                  num(rope_dim) + ": needs rope_dim / 2");
    for (double d : p.freq_divisors)
      if (!std::isfinite(d) || d <= 0) bad(op, "longrope frequency divisor " + num(d) + ": must be finite and > 0");
    if (!std::isfinite(p.attn_factor) || p.attn_factor < 0) bad(op, "attn_factor=" + num(p.attn_factor) + ": must be finite, >= 0");
  }
}

void check_embedding(const char* op, const void* table, DType type, int64_t vocab, int64_t dim,
                     const int32_t* ids, int64_t n, const float* out) {
  const std::string shape = std::string("type=") + dtype_name(type) + " vocab=" + num(vocab) +
                            " dim=" + num(dim) + " n=" + num(n);
  if (vocab < 1 || dim < 1 || n < 0) bad(op, shape + ": need vocab >= 1, dim >= 1, n >= 0");
  if (!can_dequantize(type)) fail(ErrorKind::Unsupported, op, shape + ": type cannot be read as floats");
  if (dim % traits(type).block_size != 0)
    bad(op, shape + ": dim is not a multiple of the block size " + num(traits(type).block_size));
  if (!product_fits(n, dim)) bad(op, shape + ": n * dim overflows");
  if (n > 0 && (table == nullptr || ids == nullptr || out == nullptr))
    bad(op, shape + ": null table, ids or output");
}

void check_attention(const char* op, const float* q, const float* k, const float* v,
                     const int32_t* q_pos, const int32_t* kv_pos, int64_t T, int64_t S,
                     int64_t Hq, int64_t Hkv, int64_t D, int64_t Dv, const AttentionParams& p,
                     const float* out) {
  const std::string shape = "T=" + num(T) + " S=" + num(S) + " Hq=" + num(Hq) + " Hkv=" +
                            num(Hkv) + " D=" + num(D) + " Dv=" + num(Dv);
  if (T < 0 || S < 0) bad(op, shape + ": T and S must be >= 0");
  if (Hq < 1 || Hkv < 1 || D < 1 || Dv < 1) bad(op, shape + ": heads and head dims must be >= 1");
  if (Hq % Hkv != 0) bad(op, shape + ": Hq must be a multiple of Hkv (grouped-query attention)");
  if (!product_fits(T, Hq) || !product_fits(T * Hq, D > Dv ? D : Dv) || !product_fits(S, Hkv) ||
      !product_fits(S * Hkv, D > Dv ? D : Dv))
    bad(op, shape + ": size overflows");
  if (!std::isfinite(p.scale)) bad(op, shape + ": scale=" + num(double{p.scale}) + " is not finite");
  if (!std::isfinite(p.softcap) || p.softcap < 0)
    bad(op, shape + ": softcap=" + num(double{p.softcap}) + " must be finite and >= 0");
  if (p.kind != AttnKind::Full && (p.span < 1 || p.span > std::numeric_limits<int32_t>::max()))
    bad(op, shape + ": " + (p.kind == AttnKind::Window ? "window" : "chunk") +
                " attention needs a span in [1, 2^31-1], got " + num(p.span));
  if (T > 0 && (q == nullptr || q_pos == nullptr || out == nullptr))
    bad(op, shape + ": null q, q_pos or out");
  if (p.sinks != nullptr)
    for (int64_t h = 0; h < Hq; ++h)
      if (!std::isfinite(p.sinks[h])) bad(op, shape + ": sink of head " + num(h) + " is not finite");
  if (S > 0 && (k == nullptr || v == nullptr || kv_pos == nullptr))
    bad(op, shape + ": null k, v or kv_pos");
}

}  // namespace kdetail

namespace ref {

void rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t dim, float eps,
              bool plus_one) {
  kdetail::check_rows("rms_norm", x, y, rows, dim);
  kdetail::check_eps("rms_norm", eps);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double{xr[i]} * xr[i];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) {
      const double g = w == nullptr ? 1.0 : (plus_one ? 1.0 + w[i] : double{w[i]});
      yr[i] = static_cast<float>(xr[i] * inv * g);
    }
  }
}

void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t rows,
                int64_t dim, float eps) {
  kdetail::check_rows("layer_norm", x, y, rows, dim);
  kdetail::check_eps("layer_norm", eps);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double mean = 0;
    for (int64_t i = 0; i < dim; ++i) mean += xr[i];
    mean /= static_cast<double>(dim);
    double var = 0;
    for (int64_t i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= static_cast<double>(dim);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < dim; ++i) {
      double v = (xr[i] - mean) * inv;
      if (w != nullptr) v *= w[i];
      if (b != nullptr) v += b[i];
      yr[i] = static_cast<float>(v);
    }
  }
}

std::vector<double> rope_inv_freq(const RopeParams& p, int64_t rope_dim, double* attn_factor) {
  kdetail::check_rope_params("rope", p, rope_dim);
  const int64_t half = rope_dim / 2;
  const double dim = static_cast<double>(rope_dim);
  std::vector<double> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv[i] = 1.0 / std::pow(p.theta, (2.0 * i) / dim);
  double af = 1.0;
  const double pi = 3.14159265358979323846;
  switch (p.scaling) {
    case RopeFreqScaling::None: break;
    case RopeFreqScaling::Linear:
      for (auto& f : inv) f /= p.factor;
      break;
    case RopeFreqScaling::Llama3: {
      // Long wavelengths (low frequencies) are divided by factor, short ones kept, and the band
      // between original/low_freq_factor and original/high_freq_factor interpolated.
      const double old_len = static_cast<double>(p.original_max_position);
      const double low_wavelen = old_len / p.low_freq_factor;
      const double high_wavelen = old_len / p.high_freq_factor;
      for (auto& f : inv) {
        const double wavelen = 2.0 * pi / f;
        if (wavelen > low_wavelen) {
          f = f / p.factor;
        } else if (wavelen >= high_wavelen && p.high_freq_factor > p.low_freq_factor) {
          // (Equal factors, as Llama 4 configs have, leave no band to interpolate.)
          const double smooth =
              (old_len / wavelen - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
          f = (1.0 - smooth) * f / p.factor + smooth * f;
        }
      }
      break;
    }
    case RopeFreqScaling::Yarn: {
      auto get_mscale = [](double scale, double m) {
        return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
      };
      if (p.attn_factor > 0) {
        af = p.attn_factor;
      } else if (p.mscale != 0 && p.mscale_all_dim != 0) {
        af = get_mscale(p.factor, p.mscale) / get_mscale(p.factor, p.mscale_all_dim);
      } else {
        af = get_mscale(p.factor, 1.0);
      }
      // The dimension index at which a frequency completes `rotations` turns over the original
      // context.
      const double max_pos = static_cast<double>(p.original_max_position);
      auto correction_dim = [&](double rotations) {
        return dim * std::log(max_pos / (rotations * 2.0 * pi)) / (2.0 * std::log(p.theta));
      };
      double low = correction_dim(p.beta_fast), high = correction_dim(p.beta_slow);
      if (p.yarn_truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, dim - 1.0);
      if (low == high) high += 0.001;
      for (int64_t i = 0; i < half; ++i) {
        const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
        const double extrapolation_weight = 1.0 - ramp;
        const double extrapolated = inv[i];
        const double interpolated = inv[i] / p.factor;
        inv[i] = interpolated * (1.0 - extrapolation_weight) + extrapolated * extrapolation_weight;
      }
      break;
    }
    case RopeFreqScaling::LongRope:
      // Each pair's frequency divided by its own factor (transformers' longrope).
      for (int64_t i = 0; i < half; ++i) inv[i] /= p.freq_divisors[i];
      if (p.attn_factor > 0) af = p.attn_factor;
      break;
  }
  if (attn_factor != nullptr) *attn_factor = af;
  return inv;
}

void rope(float* x, const int32_t* positions, int64_t rows, int64_t n_heads, int64_t head_dim,
          int64_t rope_dim, const RopeParams& params) {
  kdetail::check_rope("rope", x, positions, rows, n_heads, head_dim, rope_dim);
  double af = 1.0;
  const std::vector<double> inv = rope_inv_freq(params, rope_dim, &af);
  const int64_t half = rope_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < n_heads; ++h) {
      float* xh = x + (r * n_heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(positions[r]) * inv[i];
        const double c = std::cos(angle) * af, s = std::sin(angle) * af;
        const int64_t i0 = params.pairing == RopePairing::Interleaved ? 2 * i : i;
        const int64_t i1 = params.pairing == RopePairing::Interleaved ? 2 * i + 1 : i + half;
        const double a = xh[i0], b = xh[i1];
        xh[i0] = static_cast<float>(a * c - b * s);
        xh[i1] = static_cast<float>(b * c + a * s);
      }
    }
  }
}

void softmax(float* x, int64_t rows, int64_t n) {
  kdetail::check_rows("softmax", x, x, rows, n);
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * n;
    double m = -INFINITY;
    for (int64_t i = 0; i < n; ++i) m = std::max(m, double{xr[i]});
    if (m == -INFINITY) {
      for (int64_t i = 0; i < n; ++i) xr[i] = 0.0f;
      continue;
    }
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::exp(xr[i] - m);
    for (int64_t i = 0; i < n; ++i) xr[i] = static_cast<float>(std::exp(xr[i] - m) / s);
  }
}

namespace {
double silu_d(double x) { return x / (1.0 + std::exp(-x)); }
double gelu_tanh_d(double x) {
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double gelu_erf_d(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
}  // namespace

void silu(const float* x, float* y, int64_t n) {
  kdetail::check_n("silu", n, x, y, y);
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(silu_d(x[i]));
}
void gelu_tanh(const float* x, float* y, int64_t n) {
  kdetail::check_n("gelu_tanh", n, x, y, y);
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(gelu_tanh_d(x[i]));
}
void gelu_erf(const float* x, float* y, int64_t n) {
  kdetail::check_n("gelu_erf", n, x, y, y);
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(gelu_erf_d(x[i]));
}
void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  kdetail::check_n("swiglu", n, gate, up, out);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(silu_d(gate[i]) * up[i]);
}
void geglu(const float* gate, const float* up, float* out, int64_t n) {
  kdetail::check_n("geglu", n, gate, up, out);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(gelu_tanh_d(gate[i]) * up[i]);
}
void geglu_erf(const float* gate, const float* up, float* out, int64_t n) {
  kdetail::check_n("geglu_erf", n, gate, up, out);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(gelu_erf_d(gate[i]) * up[i]);
}
void add(const float* a, const float* b, float* out, int64_t n) {
  kdetail::check_n("add", n, a, b, out);
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
void mul(const float* a, const float* b, float* out, int64_t n) {
  kdetail::check_n("mul", n, a, b, out);
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}
void scale(const float* x, float s, float* out, int64_t n) {
  kdetail::check_n("scale", n, x, out, out);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * s;
}
void softcap(float* x, int64_t n, float cap) {
  kdetail::check_n("softcap", n, x, x, x);
  if (!std::isfinite(cap) || cap <= 0)
    fail(ErrorKind::InvalidArgument, "softcap", "cap=" + std::to_string(cap) + ": must be finite and > 0");
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(cap * std::tanh(double{x[i]} / cap));
}

void embedding(const void* table, DType type, int64_t vocab, int64_t dim, const int32_t* ids,
               int64_t n, float* out) {
  kdetail::check_embedding("embedding", table, type, vocab, dim, ids, n, out);
  const size_t rb = row_bytes(type, dim, "embedding");
  for (int64_t t = 0; t < n; ++t) {
    if (ids[t] < 0 || ids[t] >= vocab)
      fail(ErrorKind::InvalidArgument, "embedding",
           "token id " + std::to_string(ids[t]) + " at index " + std::to_string(t) +
               " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    const auto* row = static_cast<const uint8_t*>(table) + static_cast<size_t>(ids[t]) * rb;
    dequantize_row(type, row, out + t * dim, dim);
  }
}

}  // namespace ref
}  // namespace ptn
