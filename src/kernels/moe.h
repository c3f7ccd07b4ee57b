// The mixture-of-experts feed-forward of one layer (Mixtral, Qwen2-MoE, Qwen3-MoE), on rows
// that are already normalised:
//
//   logits[t]  = router · x[t]                               router [E, H]
//   p[t]       = softmax(logits[t]) over all E experts        (in double / f32)
//   S[t]       = the top_k experts of p[t] (ties: the lower expert index first)
//   w[t][e]    = p[t][e], or p[t][e] / sum_{e' in S[t]} p[t][e'] when norm_topk_prob
//   y[t]       = sum_{e in S[t]} w[t][e] * down_e · (silu(gate_e · x[t]) * (up_e · x[t]))
//              + sigmoid(shared_router · x[t]) * shared_down · (silu(shared_gate · x[t]) * (shared_up · x[t]))
//                (the last term only with a shared expert, Qwen2-MoE)
//
// gpt-oss adds biases to the router (logits[t] += b_r) and to every expert's gate, up and down
// products, and clamps its SwiGLU (MoeActivation::SwiGLUOai, with alpha and limit):
//   g = min(gate_e · x + b_g, limit), u = clamp(up_e · x + b_u, -limit, limit),
//   h = (u + 1) * g * sigmoid(alpha * g),  out_e = down_e · h + b_d.
// Its routing, softmax over the top-k logits, is the softmax over all, top-k, renormalised.
//
// DeepSeek V3 chooses by sigmoid score plus a per-expert bias, within the best groups of experts,
// and weights by the unbiased scores, renormalised and times routed_scale (MoeParams); V2 by
// softmax score, optionally within the best groups by their best score.
//
// Llama 4 scores the selected experts by the sigmoid of their logits (MoeScoring::Sigmoid:
// w[t][e] = sigmoid(logits[t][e]), renormalised only with norm_topk_prob), applies the weight to
// the expert's input instead of its output (weight_input: out_e = down_e · swiglu(w * x[t])), and
// adds an ungated shared expert (no shared_router: its output counts in full).
//
// Mixtral's "top-k of the logits, then softmax over the k" is the same as softmax over all,
// top-k, renormalised (norm_topk_prob = true): both are exp(l_e) / sum_{e' in S} exp(l_e').
//
// ptn::ref::moe_ffn is the readable definition: token by token, every product with
// ref::matmul (double accumulation). ptn::moe_ffn is the fast version: the router is one
// matmul over all rows; rows are then grouped by expert (a counting sort of the T * top_k
// choices), each expert with at least one row multiplies its rows gathered into one matrix
// with the optimized matmul (so each active expert's weights are read once per step, whatever
// T), and the results are scattered back with their weights. With few rows per expert (decode)
// all the experts' gate/up products go to the pool as one batch and all their down products as
// another (matmul_jobs), instead of two hand-offs per active expert. Experts that no row chose are
// not touched. Any weight type matmul accepts works (kernels/matmul.h).
#pragma once
#include <cstdint>
#include <vector>

#include "core/threadpool.h"
#include "kernels/matmul.h"

namespace ptn {

constexpr int64_t kMoeMaxExperts = 1024;

struct MoeWeights {
  WeightView router;                       // [E, H]
  const float* router_bias = nullptr;      // [E] or null (gpt-oss)
  // Per expert [F], [F], [H] biases of the gate, up and down products (gpt-oss); empty: none.
  std::vector<const float*> gate_bias, up_bias, down_bias;
  std::vector<WeightView> gate, up, down;  // per expert: [F, H], [F, H], [H, F]
  bool shared = false;                     // a shared expert (Qwen2-MoE, Llama 4)
  WeightView shared_gate{}, shared_up{}, shared_down{};  // [Fs, H], [Fs, H], [H, Fs]
  WeightView shared_router{};              // [1, H]: the shared expert's sigmoid gate; data null: ungated (Llama 4)
};

enum class MoeActivation {
  SwiGLU,     // silu(g) * u
  SwiGLUOai,  // gpt-oss: (clamp(u, -limit, limit) + 1) * g' * sigmoid(alpha * g'), g' = min(g, limit)
};

enum class MoeScoring {
  Softmax,  // softmax over all experts' logits (Mixtral, Qwen, OLMoE, gpt-oss)
  Sigmoid,  // sigmoid of each selected logit (Llama 4)
};

struct MoeParams {
  int64_t top_k = 0;
  bool norm_topk_prob = false;
  MoeActivation activation = MoeActivation::SwiGLU;
  float alpha = 1.702f, limit = 7.0f;  // SwiGLUOai only
  MoeScoring scoring = MoeScoring::Softmax;
  bool weight_input = false;  // scale the expert's input by its weight, not its output (Llama 4)
  // DeepSeek: the chosen weights (after renormalisation) times routed_scale; selection_bias [E]
  // (V3's e_score_correction_bias) added to the scores for choosing only; with groups > 0 the E
  // experts form that many equal groups and a row chooses only from the groups_used best (by the
  // sum of a group's two best keys with group_top2, else by its best key; the key is the score
  // plus the selection bias).
  float routed_scale = 1.0f;
  const float* selection_bias = nullptr;
  int64_t groups = 0, groups_used = 0;
  bool group_top2 = false;  // a group's score: the sum of its two best keys (V3, llama.cpp), else its best (HF's V2)
};

// Throws InvalidArgument naming `op` when the weights do not fit together (experts 1..1024,
// top_k 1..E, every expert [F, H] / [H, F] with one F, matmul-supported types, biases for all
// experts or none, a finite alpha and a limit > 0) or x / y are null.
void moe_check(const char* op, const MoeWeights& w, const MoeParams& p, const float* x, int64_t T, const float* y);

// The routing of one row: the top_k experts (descending probability, ties to the lower index)
// and their weights, from the router logits [E]. Shared by both implementations.
void moe_route(const float* logits, int64_t E, const MoeParams& p, int32_t* experts, float* weights);

// Scratch the optimized op reuses from step to step (grows to the largest step, then no call
// allocates).
struct MoeScratch {
  std::vector<float> logits, route_w, xs, g, u, h, o, sg, su, sh, so, sl;
  std::vector<int32_t> route_e, count, start, order;
  std::vector<MatmulJob> jobs;
  // Steps whose busiest expert has at most this many rows (decode, small batches) run every
  // expert's products as one batch of matmul_jobs (two pool hand-offs per layer, the active
  // experts' weights split between the threads); larger ones expert by expert. Both give the
  // same results; tests set it to force one way or the other.
  int32_t batched_rows = 16;
};

namespace ref {
// y [T, H] from x [T, H]; y must not overlap x.
void moe_ffn(const MoeWeights& w, const MoeParams& p, const float* x, int64_t T, float* y);
}  // namespace ref

void moe_ffn(const MoeWeights& w, const MoeParams& p, const float* x, int64_t T, float* y, MoeScratch& scratch,
             ThreadPool& pool);

}  // namespace ptn
