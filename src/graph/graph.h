// The graph IR of a .ptn program: typed ops over values whose shapes are symbolic in T (the
// token rows of a step) and R (the rows whose logits are wanted), with attributes and weights by
// name. The off-graph program has exactly one UpdateAndAttend per attention layer and no state;
// the static-cache baseline instead keeps K/V buffers in the program (Buffer values written by
// CacheWrite), which is what the exporter's checks tell apart.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace ptn {

enum class OpType : uint16_t {
  Embedding,        // ids[T] (i32) -> [T, H]            weights: table [V, H]; attrs: scale
  RMSNorm,          // x[T, N] -> [T, N]                 weights: w [G] or none; attrs: eps, plus_one, group (G; N % G == 0)
  Linear,           // x[T, K] -> [T, N]                 weights: W [N, K], optional bias [N]
  Rope,             // x[T, Hd*D], pos[T] -> same         attrs: heads, head_dim, rope_dim, theta, pairing, scaling...
  UpdateAndAttend,  // q[T, Hq*D], k[T, Hkv*D], v[T, Hkv*Dv], pos[T] -> [T, Hq*Dv]; attrs: layer, heads, kv_heads, head_dim, head_dim_v, scale, softcap
  Add,              // a, b -> a + b (same shape)
  Mul,              // a, b -> a * b
  Scale,            // x -> x * attrs.scale
  Softcap,          // x -> cap * tanh(x / cap)
  SwiGLU,           // gate, up -> silu(gate) * up
  GeGLU,            // gate, up -> gelu_tanh(gate) * up
  SelectRows,       // x[T, H] -> [R, H]: the rows whose logits the step wants (step descriptor)
  CacheWrite,       // static cache only: buffer, x[T, Hkv*D], pos[T] -> (writes buffer rows at pos)
  StaticAttention,  // static cache only: q, k_buffer, v_buffer, pos -> [T, Hq*Dv]; attrs as UpdateAndAttend
  AttnTemperature,  // x[T, N], pos[T] -> x * (log(floor((pos + 1) / floor) + 1) * scale + 1) (Llama 4's NoPE layers)
  MoeFfn,           // x[T, H] -> [T, H]: mixture of SwiGLU experts (kernels/moe.h); weights: router [E, H], then
                    // gate_e [F, H], up_e [F, H], down_e [H, F] for each e < E, then with attrs.shared the shared
                    // expert's router [1, H] (left out with shared_gate false), gate [Fs, H], up [Fs, H],
                    // down [H, Fs]; attrs: experts, top_k, norm_topk_prob, shared, shared_gate (default
                    // true), scoring ("softmax" or "sigmoid"), weight_input, biases, activation, alpha, limit
  LayerNorm,        // x[T, N] -> [T, N]: (x - mean) / sqrt(var + eps) * w + b per group of G  weights: w [G] and b [G],
                    // both optional (b only after w); attrs: eps, group (G; N % G == 0)
  Gelu,             // x -> gelu(x); attrs: activation ("gelu_tanh", the tanh approximation, or "gelu", exact erf)
  QueryTemperature,  // x[T, N], pos[T] -> x * (log(floor(pos / floor) + 1) * scale + 1) (Ministral 3, every layer
                     // after RoPE); attrs scale, floor as AttnTemperature's, whose position is pos + 1
  Slice,       // x[T, G*W] -> [T, G*w]: columns offset..offset+w of each of G groups; attrs: groups, offset
  Concat,      // a[T, G*A], b[T, G*B] -> [T, G*(A+B)]: per group, a's columns then b's; attrs: groups
  HeadLinear,  // x[T, G*K] -> [T, G*N]: group g times its own matrix, rows g*N..(g+1)*N of W [G*N, K]
               // (MLA's per-head absorption of attn_k_b and attn_v_b); attrs: groups
};

const char* op_name(OpType op);
std::optional<OpType> op_from_name(const std::string& name);

// Symbolic dimensions.
constexpr int64_t kDimT = -1;  // token rows of the step
constexpr int64_t kDimR = -2;  // selected output rows

enum class ValueKind : uint8_t { Input, Activation, Buffer };

struct Value {
  std::string name;
  ValueKind kind = ValueKind::Activation;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // may contain kDimT / kDimR
};

struct Node {
  OpType op;
  std::vector<int32_t> inputs;  // value ids
  int32_t output = -1;          // value id (-1: none, e.g. CacheWrite)
  std::vector<std::string> weights;
  nlohmann::json attrs = nlohmann::json::object();
};

struct Graph {
  std::vector<Value> values;
  std::vector<Node> nodes;
  int32_t input_ids = -1;       // i32 [T]
  int32_t cache_position = -1;  // i32 [T]
  int32_t logits = -1;          // f32 [R, vocab]
  // f32 [R, H]: the final-norm output of the selected rows (what embeddings pool), kept alive
  // to the end of the step. -1: the program does not expose it (files written before it).
  int32_t hidden = -1;

  int32_t add_value(Value v);
  int32_t add_node(OpType op, std::vector<int32_t> inputs, Value out, std::vector<std::string> weights = {},
                   nlohmann::json attrs = nlohmann::json::object());

  nlohmann::json to_json() const;
  // Parses and validates structure: value ids in range, inputs defined before use, shapes of
  // at most 4 dims, known ops; throws Corrupt naming `where` and the node.
  static Graph from_json(const nlohmann::json& j, const std::string& where);

  std::map<std::string, int> op_histogram() const;
};

// Concrete size of a symbolic dim given T and R.
inline int64_t resolve_dim(int64_t d, int64_t T, int64_t R) { return d == kDimT ? T : d == kDimR ? R : d; }

}  // namespace ptn
