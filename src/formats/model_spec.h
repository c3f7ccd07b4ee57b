// ModelSpec: what ptn knows about a model after import, whatever the source (HF config.json +
// safetensors, or GGUF). Architecture builders (src/models) turn it into a graph.
//
// Conventions, the same for every source:
// - Tensor names are GGUF's canonical names ("token_embd.weight", "blk.3.attn_q.weight", ...,
//   see canonical_names below); importers map HF names onto them.
// - Weights are [out, in] row-major (PyTorch nn.Linear layout; GGUF dims [in, out]).
// - Q/K projection rows are in Hugging Face order, i.e. RoPE pairs are half-split (rotate_half).
//   A llama-architecture GGUF stores them interleaved (llama.cpp's converter permutes them);
//   its importer undoes that permutation so both sources compute the same thing.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/attention_policy.h"  // AttnKind

namespace ptn {

struct LayerAttention {
  AttnKind kind = AttnKind::Full;
  int64_t span = 0;        // window W (a query at p sees p-W+1..p) or chunk size C; 0 for full
  bool use_rope = true;    // false for SmolLM3's NoPE layers (and Llama 4's global layers)
  float rope_theta = 0;    // RoPE base of this layer (Gemma 3 local layers use their own base)
  bool rope_scaling = true;  // ModelSpec::rope_scaling applies here (false: Gemma 3 local layers)
  bool moe = false;          // the layer's FFN is the mixture of experts (ModelSpec::n_experts), else the dense MLP
};

enum class RopeScalingType { None, Linear, Llama3, Yarn, LongRope };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::None;
  float factor = 1.0f;
  // llama3
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int64_t original_max_position = 0;
  // yarn
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  float attn_factor = 1.0f;  // multiplies cos and sin (HF attention_factor, or from mscale / mscale_all_dim); 1 when unused
  bool yarn_truncate = true;  // floor/ceil the ramp bounds (HF `truncate`)
  // longrope: the per-pair frequency divisors (HF short_factor, rope_dim / 2 values); attn_factor
  // multiplies cos and sin; original_max_position bounds the positions (see hf_config.cpp).
  std::vector<double> freq_divisors;
};

enum class Activation { SiLU, GeLUTanh, GeLU };

struct ModelSpec {
  std::string family;        // "llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "smollm3", "llama4", "mixtral", "qwen3_moe"
  std::string architecture;  // as the source names it: HF "LlamaForCausalLM" or GGUF "llama"

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;               // per head, for q and k (and v)
  int64_t max_position_embeddings = 0;

  float norm_eps = 1e-5f;
  bool norm_weight_plus_one = false;  // Gemma: RMSNorm scales by (1 + w)
  Activation activation = Activation::SiLU;

  float rope_theta = 10000.0f;
  int64_t rope_dim = 0;               // rotated dimensions per head (== head_dim unless partial)
  RopeScaling rope_scaling;

  float attn_scale = 0;               // query scale; 0 means 1/sqrt(head_dim)
  float attn_logit_softcap = 0;       // Gemma 2: tanh soft-capping of scores; 0 = off
  float final_logit_softcap = 0;      // Gemma 2: soft-capping of the output logits; 0 = off
  float embed_scale = 1.0f;           // Gemma: embeddings times sqrt(hidden_size); Granite: embedding_multiplier
  float residual_scale = 1.0f;        // Granite: each sublayer's output times residual_multiplier before the residual add
  float logit_scale = 1.0f;           // Granite: logits divided by logits_scaling; Cohere: by 1 / logit_scale

  bool tie_word_embeddings = false;   // no output.weight: the embedding is the classifier
  bool attn_bias = false;             // Qwen2, attention_bias: q/k/v projections carry biases
  bool attn_output_bias = false;      // attention_bias (Llama, Qwen3, Gemma, SmolLM3, Llama 4): o_proj carries one
  bool mlp_bias = false;              // mlp_bias (Llama, SmolLM3): gate/up/down projections carry biases
  bool qk_norm = false;               // Qwen3, Gemma 3: RMSNorm on each q and k head
  bool qk_norm_full = false;          // with qk_norm: one RMSNorm over all q (and all k) heads, weights
                                      // [heads x head_dim] (OLMoE), instead of one per head
  bool sandwich_norms = false;        // Gemma 2/3: post-attention and post-FFN norms too
  bool pre_norms = true;              // false: no attn_norm / ffn_norm, the post-norms only (OLMo 2)
  bool layer_norm = false;            // the norms are LayerNorms (mean and variance), not RMSNorms (StableLM, Phi-2,
                                      // Starcoder2, Cohere)
  bool norm_bias = false;             // ... with biases: attn_norm.bias, ffn_norm.bias, output_norm.bias
  bool parallel_residual = false;     // x + attn(norm(x)) + ffn(norm(x)), one norm for both: no ffn_norm (Phi-2,
                                      // Cohere, StableLM's use_parallel_residual)
  bool parallel_ffn_norm = false;     // with parallel_residual: the MLP on its own norm of x, ffn_norm (GPT-NeoX)
  bool plain_mlp = false;             // the MLP is down(act(up(x))), no gate (Phi-2, Starcoder2)
  bool rope_interleaved = false;      // RoPE rotates the pairs (2i, 2i+1), q/k rows as the source has them (Cohere);
                                      // else the half-split pairs (i, i + rope_dim/2)
  bool output_bias = false;           // the classifier has a bias output.bias [vocab] (Phi-2)
  bool qk_l2_norm = false;            // Llama 4: weightless L2 norm of q and k heads on RoPE layers
  bool attn_sinks = false;            // gpt-oss: a learned sink logit per query head (attn_sinks [Hq]) on every layer
  // Llama 4 NoPE layers: q *= log(floor((pos + 1) / floor) + 1) * scale + 1; 0 = off. With
  // attn_temperature_all_layers (Ministral 3): every layer, after RoPE, with pos instead of pos + 1.
  float attn_temperature_scale = 0;
  int64_t attn_temperature_floor = 0;
  bool attn_temperature_all_layers = false;

  // Mixture of experts (Mixtral, Qwen2-MoE, Qwen3-MoE); n_experts == 0 for a dense model. The
  // layers with LayerAttention::moe route each token to n_experts_used of n_experts SwiGLU
  // experts of width expert_ffn_size (softmax over all experts, top-k, renormalised when
  // norm_topk_prob), plus a shared expert of width shared_expert_ffn_size (0: none) whose
  // output is gated by a sigmoid (Qwen2-MoE). Other layers keep the dense MLP (intermediate_size).
  int64_t n_experts = 0;
  int64_t n_experts_used = 0;
  int64_t expert_ffn_size = 0;
  bool norm_topk_prob = false;
  int64_t shared_expert_ffn_size = 0;
  // gpt-oss: biases on the router (ffn_gate_inp.bias [E]) and on every expert's products
  // (ffn_gate.e.bias / ffn_up.e.bias [expert_ffn], ffn_down.e.bias [hidden]), and a clamped
  // SwiGLU, (clamp(u, -L, L) + 1) * g' * sigmoid(1.702 g') with g' = min(g, L), L this limit
  // (0: the plain SwiGLU).
  bool expert_bias = false;
  float expert_swiglu_limit = 0;
  // Llama 4: each selected expert weighted by the sigmoid of its logit (not a softmax), the
  // weight applied to the expert's input rather than its output, and a shared expert without a
  // gate (no ffn_gate_inp_shexp: its output counts in full).
  bool expert_sigmoid = false;
  bool expert_weight_input = false;
  bool shared_expert_gate = true;
  // DeepSeek: the chosen experts' weights (after any renormalisation) times expert_routed_scale
  // (routed_scaling_factor); with expert_selection_bias a per-expert bias exp_probs_b.bias [E]
  // added to the scores for choosing only (V3's e_score_correction_bias); with expert_groups > 0
  // the experts in that many equal groups, of which the expert_groups_used best (see
  // expert_group_top2) are the only ones a row may choose from.
  float expert_routed_scale = 1.0f;
  bool expert_selection_bias = false;
  int64_t expert_groups = 0;
  int64_t expert_groups_used = 0;
  bool expert_group_top2 = false;  // a group's score is the sum of its two best (V3, and llama.cpp always), else its best (HF V2)

  // Multi-head latent attention (DeepSeek V2/V3); kv_lora_rank == 0 for every other family. Each
  // head's query is qk_nope_dim + rope_dim wide (head_dim), its value v_head_dim; keys and values
  // come from one latent of kv_lora_rank per token (attn_kv_a_mqa gives it and the shared RoPE
  // key of rope_dim). q_lora_rank > 0: the query goes through a low-rank projection too
  // (attn_q_a, attn_q_a_norm, attn_q_b) instead of attn_q. The graph absorbs attn_k_b into the
  // query and attn_v_b after attention, so the cache holds one "head" per token: the normalised
  // latent and the rotated RoPE key (kv_lora_rank + rope_dim) as K, the latent as V (docs/moe.md).
  int64_t kv_lora_rank = 0;
  int64_t q_lora_rank = 0;
  float attn_mscale_all_dim = 0;
  int64_t mtp_layers = 0;  // DeepSeek V3: num_nextn_predict_layers stored after the last layer, left out (not run)  // yarn's mscale_all_dim behind attn_scale (llama.cpp's yarn_log_multiplier / 0.1); 0: none
  int64_t qk_nope_dim = 0;
  int64_t v_head_dim = 0;

  std::vector<LayerAttention> layers;  // one per layer, size n_layers

  // Tensor sources: canonical name -> name in the source file(s). Fused HF tensors (Phi-3's
  // qkv_proj and gate_up_proj) are split by the importer and appear under their canonical
  // names; `source_notes` records such transformations for `ptn inspect`. Values are written
  // "name", "name[rows A:B]" or "name (interleaved, H heads)" (formats/weights.h TensorSourceRef).
  std::map<std::string, std::string> tensor_sources;
  std::vector<std::string> source_notes;
};

// Canonical tensor names (GGUF's): token_embd.weight [vocab, hidden], output_norm.weight,
// output.weight [vocab, hidden] (absent when tied), and per layer blk.N.:
//   attn_norm, attn_q [Hq*D, hidden], attn_k / attn_v [Hkv*D, hidden], attn_output [hidden, Hq*D],
//   attn_q.bias / attn_k.bias / attn_v.bias (attn_bias), attn_q_norm / attn_k_norm [D] (qk_norm),
//   attn_output.bias [hidden] (attn_output_bias), attn_sinks [Hq] (attn_sinks), post_attention_norm (sandwich), ffn_norm,
//   ffn_gate / ffn_up [ffn, hidden], ffn_down [hidden, ffn], ffn_gate.bias / ffn_up.bias [ffn] and
//   ffn_down.bias [hidden] (mlp_bias), post_ffw_norm (sandwich)   (all ".weight" unless noted).
// LayerNorm models with norm_bias add attn_norm.bias, ffn_norm.bias and output_norm.bias [hidden];
//   parallel_residual drops ffn_norm (unless parallel_ffn_norm), plain_mlp drops ffn_gate (and its bias), output_bias adds
//   output.bias [vocab].
// A mixture-of-experts layer has, instead of ffn_gate/up/down: the router ffn_gate_inp [E, hidden],
//   for each expert e < E ffn_gate.e / ffn_up.e [expert_ffn, hidden] and ffn_down.e [hidden,
//   expert_ffn] (llama.cpp's per-expert names), and with a shared expert ffn_gate_shexp /
//   ffn_up_shexp [shared_ffn, hidden], ffn_down_shexp [hidden, shared_ffn] and its gate
//   ffn_gate_inp_shexp [1, hidden] (unless shared_expert_gate is false).
// An MLA layer (kv_lora_rank > 0) has, instead of attn_q/attn_k/attn_v: attn_q [Hq*(nope+rope), hidden]
//   (or attn_q_a [q_lora, hidden], attn_q_a_norm [q_lora], attn_q_b [Hq*(nope+rope), q_lora]),
//   attn_kv_a_mqa [kv_lora+rope, hidden], attn_kv_a_norm [kv_lora], attn_k_b [Hq*kv_lora, nope]
//   (each head's [nope, kv_lora] block of HF's kv_b_proj, transposed: llama.cpp's layout),
//   attn_v_b [Hq*v, kv_lora], attn_output [hidden, Hq*v]; with expert_selection_bias an MoE layer
//   adds exp_probs_b.bias [E].
std::string layer_tensor(int64_t layer, const char* what);  // e.g. layer_tensor(3, "attn_q.weight")
// An expert's tensor: expert_tensor(3, "ffn_up", 5) is "blk.3.ffn_up.5.weight"; with kind
// "bias", "blk.3.ffn_up.5.bias" (gpt-oss's expert biases).
std::string expert_tensor(int64_t layer, const char* what, int64_t expert, const char* kind = "weight");
// The parts of a per-layer name (after "blk.N.") that names an expert tensor: "ffn_up.5.weight"
// gives ("ffn_up", 5); false for any other name. With `bias` non-null, "ffn_up.5.bias" is
// accepted too and *bias says which it was; with `bias` null only weights match.
bool parse_expert_tensor(const std::string& name_in_layer, std::string* what, int64_t* expert, bool* bias = nullptr);

// Every canonical tensor the spec implies, in file order (embedding, layers, final norm, output).
std::vector<std::string> canonical_tensor_names(const ModelSpec& s);
// The shape a canonical tensor must have under the spec; empty for a name the spec does not know.
std::vector<int64_t> canonical_tensor_shape(const ModelSpec& s, const std::string& name);
// True for 1-D tensors kept in f32 (norm weights, biases, attention sinks).
bool is_vector_tensor(const std::string& name);

// A human-readable multi-line summary (dimensions, features, every layer's attention).
std::string describe_model_spec(const ModelSpec& s);

const char* attn_kind_name(AttnKind k);
const char* activation_name(Activation a);
const char* rope_scaling_name(RopeScalingType t);

}  // namespace ptn
