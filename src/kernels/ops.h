// The non-matmul ops of the engine, on raw f32 pointers with explicit sizes (the executor calls
// them on arena memory).
//
// Every op exists twice:
//   ptn::ref::<op>  the readable definition: plain loops, double accumulation, single thread.
//                   Golden samples are computed with these.
//   ptn::<op>       the optimized version: AVX-512 / AVX2 / scalar chosen at run time by
//                   simd_level() (core/cpu.h), split over the rows of the given thread pool
//                   when the work is large enough to pay for it.
// Both validate their arguments the same way and throw ptn::Error (InvalidArgument) naming the
// op and the offending sizes; no input reaches UB. Outputs may alias inputs element for element
// (y == x) unless a comment says otherwise.
#pragma once
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/threadpool.h"

namespace ptn {

// ---- RoPE ----------------------------------------------------------------------------------

// Which dimensions of a head form a rotated pair.
//   Interleaved: (2i, 2i+1)          GPT-J, llama2.c, GGUF "norm" rope
//   HalfSplit:   (i, i + rope_dim/2) Hugging Face rotate_half, GGUF "neox" rope
enum class RopePairing { Interleaved, HalfSplit };

// Frequency scaling, following transformers' modeling_rope_utils.
enum class RopeFreqScaling { None, Linear, Llama3, Yarn, LongRope };

struct RopeParams {
  double theta = 10000.0;  // base: inv_freq[i] = theta^(-2i / rope_dim)
  RopePairing pairing = RopePairing::HalfSplit;
  RopeFreqScaling scaling = RopeFreqScaling::None;
  double factor = 1.0;  // Linear: inv_freq / factor; Llama3 and YaRN: the context extension factor
  // Llama3 and YaRN: the pre-training context length. Llama3: rope_scaling's
  // "original_max_position_embeddings". YaRN (current transformers): the same key when present,
  // else config.max_position_embeddings. YaRN's factor is rope_scaling's "factor" (transformers
  // 5 derives it as max_position_embeddings / original only when absent; some 4.x releases
  // always did when the key was present: the importer decides and passes the result).
  int64_t original_max_position = 0;
  // Llama3: wavelengths longer than original/low_freq_factor are divided by factor, shorter than
  // original/high_freq_factor kept, in between interpolated smoothly.
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // YaRN: the ramp between extrapolated and interpolated frequencies spans the dimensions that
  // rotate between beta_fast and beta_slow times over original_max_position.
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  bool yarn_truncate = true;  // floor/ceil the ramp bounds (HF "truncate", default true)
  // YaRN: cos and sin are multiplied by attn_factor. 0 = derive it as HF does: from mscale and
  // mscale_all_dim when both are non-zero, get_mscale(factor, mscale) / get_mscale(factor,
  // mscale_all_dim), else get_mscale(factor) = 0.1 * ln(factor) + 1 (1 when factor <= 1).
  double attn_factor = 0.0;
  double mscale = 0.0;
  double mscale_all_dim = 0.0;
  // LongRope: inv_freq[i] is divided by freq_divisors[i] (rope_dim / 2 values: the config's
  // short_factor or long_factor list), and cos and sin are multiplied by attn_factor (0: 1).
  std::vector<double> freq_divisors;
};

// The per-pair inverse frequencies (rad per position) and the cos/sin multiplier for a rotated
// width rope_dim, computed once from the params; optionally also cos and sin for positions
// 0..cached_positions-1 (rope_dim floats per position), so that rope() does no trigonometry for
// them (other positions are computed on the fly, with the same values). Throws InvalidArgument
// for a bad rope_dim, non-finite / out-of-range params, or a cache above 1 GiB.
class RopeTable {
 public:
  RopeTable(const RopeParams& params, int64_t rope_dim, int64_t cached_positions = 0);
  const RopeParams& params() const { return params_; }
  int64_t rope_dim() const { return rope_dim_; }
  const std::vector<double>& inv_freq() const { return inv_freq_; }  // [rope_dim / 2]
  double attn_factor() const { return attn_factor_; }                // 1 unless YaRN
  int64_t cached_positions() const { return cached_; }
  // cos [rope_dim / 2] then sin [rope_dim / 2] (times attn_factor) of position pos, or nullptr
  // when pos is not cached.
  const float* cos_sin(int64_t pos) const {
    return pos >= 0 && pos < cached_ ? cos_sin_.data() + pos * rope_dim_ : nullptr;
  }
  // Computes the same values for any position into out [rope_dim].
  void compute_cos_sin(int64_t pos, float* out) const;

 private:
  RopeParams params_;
  int64_t rope_dim_;
  std::vector<double> inv_freq_;
  double attn_factor_ = 1.0;
  int64_t cached_ = 0;
  std::vector<float> cos_sin_;  // [cached_, rope_dim]
};

// ---- optimized ops -------------------------------------------------------------------------

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w   (w: [dim]; (1 + w) when plus_one, as Gemma;
// w == nullptr means no weight).                                           x, y: [rows, dim]
void rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t dim, float eps,
              bool plus_one, ThreadPool& pool = default_pool());
// y[r] = (x[r] - mean) / sqrt(var + eps) * w + b (biased variance; w, b: [dim] or nullptr).
void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t rows,
                int64_t dim, float eps, ThreadPool& pool = default_pool());

// In place on x [rows, n_heads, head_dim]: the first rope_dim dims of every head are rotated by
// angle positions[r] * inv_freq[i] (times attn_factor on cos and sin, YaRN); the rest are kept.
void rope(float* x, const int32_t* positions, int64_t rows, int64_t n_heads, int64_t head_dim,
          const RopeTable& table, ThreadPool& pool = default_pool());
// Convenience: builds the table for rope_dim (prefer building a RopeTable once per model).
void rope(float* x, const int32_t* positions, int64_t rows, int64_t n_heads, int64_t head_dim,
          int64_t rope_dim, const RopeParams& params, ThreadPool& pool = default_pool());

// In place, each row of x [rows, n]: exp(x - max) / sum. -inf entries get 0; a row that is all
// -inf becomes all zeros (never NaN). A row holding NaN or +inf yields NaN.
void softmax(float* x, int64_t rows, int64_t n, ThreadPool& pool = default_pool());

// Element-wise, y[i] = f(x[i]) over n elements.
void silu(const float* x, float* y, int64_t n, ThreadPool& pool = default_pool());       // x * sigmoid(x)
void gelu_tanh(const float* x, float* y, int64_t n, ThreadPool& pool = default_pool());  // tanh approximation
void gelu_erf(const float* x, float* y, int64_t n, ThreadPool& pool = default_pool());   // exact: x * Phi(x)
// out = silu(gate) * up; out = gelu_tanh(gate) * up (Gemma's gelu_pytorch_tanh);
// out = gelu_erf(gate) * up (HF "gelu", exact).
void swiglu(const float* gate, const float* up, float* out, int64_t n,
            ThreadPool& pool = default_pool());
void geglu(const float* gate, const float* up, float* out, int64_t n,
           ThreadPool& pool = default_pool());
void geglu_erf(const float* gate, const float* up, float* out, int64_t n,
               ThreadPool& pool = default_pool());
void add(const float* a, const float* b, float* out, int64_t n, ThreadPool& pool = default_pool());
void mul(const float* a, const float* b, float* out, int64_t n, ThreadPool& pool = default_pool());
void scale(const float* x, float s, float* out, int64_t n, ThreadPool& pool = default_pool());
// In place: x = cap * tanh(x / cap); cap must be > 0.
void softcap(float* x, int64_t n, float cap, ThreadPool& pool = default_pool());

// out [n, dim] = rows ids[0..n) of table [vocab, dim] of type `type` (any type dequantize_row
// reads). Throws InvalidArgument naming the id and its index when an id is outside [0, vocab).
void embedding(const void* table, DType type, int64_t vocab, int64_t dim, const int32_t* ids,
               int64_t n, float* out, ThreadPool& pool = default_pool());

// ---- reference ops -------------------------------------------------------------------------
namespace ref {

void rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t dim, float eps,
              bool plus_one);
void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t rows,
                int64_t dim, float eps);
// Computes every frequency from the params with pow/cos/sin in double (independent of RopeTable).
void rope(float* x, const int32_t* positions, int64_t rows, int64_t n_heads, int64_t head_dim,
          int64_t rope_dim, const RopeParams& params);
// The reference inverse frequencies [rope_dim / 2] and cos/sin multiplier, written as HF does.
std::vector<double> rope_inv_freq(const RopeParams& params, int64_t rope_dim, double* attn_factor);
void softmax(float* x, int64_t rows, int64_t n);
void silu(const float* x, float* y, int64_t n);
void gelu_tanh(const float* x, float* y, int64_t n);
void gelu_erf(const float* x, float* y, int64_t n);
void swiglu(const float* gate, const float* up, float* out, int64_t n);
void geglu(const float* gate, const float* up, float* out, int64_t n);
void geglu_erf(const float* gate, const float* up, float* out, int64_t n);
void add(const float* a, const float* b, float* out, int64_t n);
void mul(const float* a, const float* b, float* out, int64_t n);
void scale(const float* x, float s, float* out, int64_t n);
void softcap(float* x, int64_t n, float cap);
void embedding(const void* table, DType type, int64_t vocab, int64_t dim, const int32_t* ids,
               int64_t n, float* out);

}  // namespace ref
}  // namespace ptn
