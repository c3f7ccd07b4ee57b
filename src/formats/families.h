// What a model family is, written once: one row per family (families.cpp), read by the HF
// config import (hf_config.cpp), the GGUF import (gguf_spec.cpp), the GGUF writer
// (gguf_writer.cpp) and the graph builder (models/decoder.cpp).
//
// A row holds facts, not code: which architecture names select it, where its checkpoints keep
// each canonical tensor, how its layers are windowed and rotated, which norms and scales it
// has. The importers turn those facts plus a config (or GGUF metadata) into a ModelSpec; the
// graph builder reads only the ModelSpec, except for `block`, which picks the function that
// builds one layer. See README.md, "Adding a model family".
//
// The table lives in formats (not models) because the importers and the GGUF writer, which sit
// below models, need it; models reads it too.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "formats/model_spec.h"

namespace ptn {

enum class Family { Llama, Mistral, Qwen2, Qwen3, Gemma, Gemma2, Gemma3, Phi3, SmolLM3, Llama4, Mixtral, Qwen2Moe, Qwen3Moe, Starcoder2, Olmoe, Olmo2, Olmo3, Granite, GptOss, DeepseekV2, DeepseekV3,
                    StableLM, Phi2, Cohere, GptNeoX, Glm, Glm4, GraniteMoe, GraniteMoeShared, Ministral3 };

// The kind of layer the graph builder makes for a family (models/decoder.cpp has one function
// per kind). Unsupported: ptn recognises the architecture but cannot run it (`unsupported_why`).
enum class Block {
  Unsupported,
  Dense,  // attention (optional q/k norms, RoPE per layer) + gated MLP (SwiGLU / GeGLU)
  Moe,    // attention as Dense + a mixture of SwiGLU experts on the layers ModelSpec marks (moe_ffn), the MLP on the others
};

// How layers are windowed when the source does not list each layer's type.
enum class WindowRule {
  None,             // every layer full (a window in the config or file is ignored)
  AllLayers,        // a window, when given, applies to every layer (Mistral, Phi-3)
  FromMaxWindowLayers,  // only with use_sliding_window, and then only layers >= max_window_layers (Qwen2/3, SmolLM3)
  EveryNthGlobal,   // layer i is global when (i + 1) % window_pattern == 0, else windowed (Gemma); a window is required
  ChunkOnRopeLayers,  // layers with RoPE are chunked by attention_chunk_size (Llama 4)
};

// How an HF config declares its experts (formats/hf_config.cpp reads it).
enum class HfMoe {
  None,
  Mixtral,     // num_local_experts, num_experts_per_tok; every layer; experts of intermediate_size; always renormalised
  Qwen,        // num_experts, num_experts_per_tok, moe_intermediate_size, norm_topk_prob, decoder_sparse_step, mlp_only_layers
  QwenShared,  // Qwen + shared_expert_intermediate_size (a shared expert with a sigmoid gate: Qwen2-MoE)
  Olmoe,       // num_experts, num_experts_per_tok, norm_topk_prob; every layer; experts of intermediate_size
  GptOss,      // num_local_experts, num_experts_per_tok; every layer; experts of intermediate_size with biases and
               // the clamped SwiGLU; softmax over the top-k logits; gate|up interleaved in one tensor, as MXFP4
               // blocks/scales (quantization_config mxfp4) or as [E, in, out] matrices
  Llama4,      // num_local_experts, num_experts_per_tok; the layers of moe_layers (or every
               // interleave_moe_layer_step-th); experts and an ungated shared expert of intermediate_size; sigmoid
               // scores scaling the experts' input; gate|up halves of one [E, H, 2F] tensor, down [E, F, H]
  GraniteMoe,  // num_local_experts, num_experts_per_tok; every layer; experts of intermediate_size; softmax over
               // the top-k logits; router.layer [E, H], input_linear [E, 2F, H] (gate rows, then up), output_linear [E, H, F]
  DeepseekV2,  // n_routed_experts (null: dense), num_experts_per_tok, moe_intermediate_size, n_shared_experts (ungated,
               // n_shared x moe_intermediate_size wide), first_k_dense_replace, moe_layer_freq; softmax scores, topk_method
               // greedy or group_limited_greedy (n_group, topk_group), routed_scaling_factor; mlp.shared_experts.*
  DeepseekV3,  // DeepseekV2's keys with sigmoid scores, mlp.gate.e_score_correction_bias for choosing, noaux_tc groups,
               // norm_topk_prob (default true), routed_scaling_factor applied after it
  GraniteMoeShared,  // GraniteMoe + shared_intermediate_size (0: none): an ungated shared MLP beside the experts,
                     // shared_mlp.input_linear [2Fs, H] (gate rows, then up) and output_linear [H, Fs]
};

enum class EmbedScale { One, SqrtHidden };  // embeddings times 1, or times sqrt(hidden_size) (Gemma)

// Which attention projections carry biases, as the family's HF modeling builds them.
enum class AttnBias {
  None,        // never; config `attention_bias` is not read (Mistral, Phi-3)
  QkvAlways,   // q/k/v always, o_proj never (Qwen2)
  FromConfig,  // config `attention_bias` (default false) puts one on q/k/v and o_proj (LlamaAttention, Cohere)
  QkvFromConfig,  // config `use_qkv_bias` (default false) puts one on q/k/v, never on o_proj (StableLM)
  All,         // q/k/v, the output projection and the MLP always (Phi-2)
  AllFromConfig,  // config `use_bias` (default true) puts one on q/k/v, o_proj and the MLP (Starcoder2)
  QkvFromAttentionBias,  // config `attention_bias` (GLM's default true) puts one on q/k/v, never on o_proj (GLM)
};

// Which rows of a fused source tensor a canonical tensor is (Phi-3 keeps q|k|v and gate|up
// in one tensor each; GPT-NeoX keeps q|k|v per head: head h's q, k and v rows follow each
// other, HeadQ/HeadK/HeadV); Whole for an unfused tensor.
// KvbK / KvbV: DeepSeek's kv_b_proj holds per head qk_nope_head_dim key rows then v_head_dim
// value rows; KvbK is each head's key block transposed (attn_k_b), KvbV its value block (attn_v_b).
enum class RowPart { Whole, Q, K, V, Gate, Up, HeadQ, HeadK, HeadV, KvbK, KvbV };

// Where an HF checkpoint keeps one canonical per-layer tensor, under "model.layers.N.".
struct HfLayerTensor {
  const char* canonical;  // "attn_q.weight" (see model_spec.h for the canonical names)
  const char* hf;         // "self_attn.q_proj.weight"
  RowPart part = RowPart::Whole;
};

// An HF checkpoint's names for the canonical tensors of a family.
struct HfTensorNames {
  const char* layers = "model.layers.";                 // the per-layer prefix, before "N."
  const char* embedding = "model.embed_tokens.weight";  // token_embd.weight
  const char* final_norm = "model.norm.weight";         // output_norm.weight
  const char* output = "lm_head.weight";                // output.weight (absent when tied)
  std::span<const HfLayerTensor> layer;                 // every per-layer tensor the family can have
};

struct FamilyInfo {
  Family id;
  const char* name;     // ModelSpec::family and the .ptn manifest: "llama", "gemma3", ...
  const char* display;  // for people: "Gemma 3"
  std::vector<std::string> hf_architectures;  // config.json `architectures[0]` values
  Block block = Block::Dense;
  const char* unsupported_why = "";  // when block == Unsupported

  // GGUF: the general.architecture llama.cpp uses for this family (empty: none). Several
  // families may write one architecture (Mistral writes "llama"); the row with gguf_reads is
  // the family a file of that architecture imports as, and the gguf_* facts below are read
  // from that row (they describe the architecture's file layout, whichever family wrote it).
  const char* gguf_arch = "";
  bool gguf_reads = false;

  // Tensors and their layout in the sources.
  HfTensorNames hf_names;
  bool hf_qk_interleaved = false;    // HF q_proj/k_proj rows in interleaved RoPE order (Llama 4, Meta's layout)
  bool gguf_qk_interleaved = false;  // GGUF attn_q/attn_k rows interleaved (llama.cpp permutes "llama" only)
  bool gguf_fused_qkv_gate_up = false;  // GGUF attn_qkv = q|k|v and ffn_up = gate|up (Phi-3)
  bool gguf_fused_qkv = false;       // GGUF attn_qkv = q|k|v (and its bias), the MLP unfused (gptneox)
  bool gguf_fused_gate_up = false;   // GGUF ffn_up = gate|up, q/k/v unfused (glm4, chatglm)
  bool gguf_rope_freqs = false;      // llama3 RoPE scaling as a rope_freqs.weight tensor (llama)
  int64_t gguf_nope_step = 0;        // RoPE skipped on layer i when (i + 1) % step == 0, fixed by llama.cpp's graph (smollm3: 4)
  bool gguf_qkv_bias_only = false;   // the architecture loads q/k/v biases only, no o_proj or MLP biases (smollm3, gemma)
  bool gguf_tied_only = false;       // the architecture's output matrix is always token_embd (gemma)
  bool gguf_untied_only = false;     // the architecture requires output.weight (stablelm, phi2)
  // MoE GGUF architectures: whether llama.cpp's graph renormalises the top-k expert weights
  // (llama/Mixtral, qwen3moe: yes; qwen2moe: no), and whether it has a shared expert
  // (qwen2moe: ffn_*_shexp, scaled by sigmoid(ffn_gate_inp_shexp . x)).
  bool gguf_moe_norm_topk = true;
  bool gguf_shared_expert = false;
  bool gguf_shared_expert_ungated = false;  // ... or, with expert_shared_feed_forward_length > 0, an ungated one
                                            // added to the experts' output (granitemoe: Granite MoE Shared)
  const char* gguf_ffn_norm = "ffn_norm";  // the GGUF name of the pre-FFN norm (gpt-oss: "post_attention_norm")
  const char* hf_ffn_size_key = "intermediate_size";  // Llama 4's dense MLP: intermediate_size_mlp
  HfMoe hf_moe = HfMoe::None;          // experts in the config (block == Block::Moe)
  const char* hf_moe_block = "mlp";    // the experts' module: model.layers.N.<block>.gate / .experts.E.*
  bool hf_expert_w123 = false;         // experts.E.w1 / w3 / w2 are gate / up / down (Mixtral), else gate_proj / up_proj / down_proj

  // Norms and scales.
  bool norm_weight_plus_one = false;  // RMSNorm scales by (1 + w): HF stores w, GGUF stores 1 + w (Gemma)
  bool sandwich_norms = false;        // post-attention and post-FFN norms too (Gemma)
  bool granite_multipliers = false;   // embedding/attention/residual multipliers and logits_scaling (Granite; GGUF
                                      // embedding_scale, attention.scale, residual_scale, logit_scale)
  bool no_pre_norms = false;          // ... and no norms before attention and the FFN: the post-norms only (OLMo 2)
  bool qk_norm = false;               // RMSNorm on each q and k head, always (Qwen3, Gemma 3)
  bool qk_norm_full = false;          // ... over all heads at once, weights [heads x head_dim] (OLMoE)
  AttnBias attn_bias = AttnBias::FromConfig;
  bool hf_mlp_bias = false;           // config `mlp_bias` puts biases on gate/up/down (LlamaMLP: Llama, SmolLM3); else refused
  bool mlp_bias_always = false;       // the MLP always has biases, whatever attention_bias says (GPT-NeoX)
  bool qk_l2_norm = false;            // weightless q/k head norm after RoPE, config `use_qk_norm` (Llama 4)
  bool attn_temperature = false;      // NoPE-layer query temperature, config `attn_temperature_tuning` (Llama 4)
  bool rope_temperature = false;      // every layer's query temperature after RoPE, from the rope parameters'
                                      // llama_4_scaling_beta and original_max_position_embeddings (Ministral 3);
                                      // GGUF attention.temperature_scale with rope.scaling.original_context_length
  bool attn_sinks = false;            // a learned sink logit per query head on every layer (gpt-oss)
  bool hf_mla = false;                // multi-head latent attention: kv_lora_rank, q_lora_rank, qk_nope_head_dim,
                                      // qk_rope_head_dim, v_head_dim; softmax scale with yarn's mscale_all_dim (DeepSeek)
  EmbedScale embed_scale = EmbedScale::One;
  bool query_pre_attn_scalar = false; // query scale 1/sqrt(query_pre_attn_scalar), GGUF attention.scale (Gemma)
  int64_t gguf_wide_query_layers = 0; // GGUF without attention.scale: llama.cpp's query scale is
                                      // 1/sqrt(hidden/heads) for models of this many layers (the 27B), else 1/sqrt(head_dim)
  bool logit_softcaps = false;        // attention and final logit soft-capping (Gemma 2; Gemma 3 configs set none)
  bool tie_by_default = false;        // tie_word_embeddings when the config does not say
  Activation gguf_activation = Activation::SiLU;  // GGUF has no activation key
  bool hf_head_dim = true;            // config `head_dim` read; false: the modeling class takes hidden / heads
                                      // (StableLM, Phi-2, Starcoder2, Cohere), so another head_dim is refused
  const char* hf_norm_eps_key = "rms_norm_eps";   // layer_norm_eps (StableLM, Phi-2, Cohere), norm_epsilon (Starcoder2)
  const char* hf_rope_theta_key = "rope_theta";   // GPT-NeoX 4.x: rotary_emb_base
  const char* hf_partial_rotary_key = "partial_rotary_factor";  // GPT-NeoX 4.x: rotary_pct
  bool hf_kv_heads = true;            // config num_key_value_heads read; false: one k/v head per query head (GPT-NeoX)
  bool layer_norm = false;            // LayerNorm norms (mean and variance) instead of RMSNorm
  bool layer_norm_bias = false;       // ... with biases (StableLM, Phi-2, Starcoder2; Cohere's have none)
  bool parallel_residual = false;     // attention and MLP on one norm of the layer input, added together (Phi-2, Cohere)
  bool parallel_ffn_norm = false;     // ... the MLP on a second norm of the layer input, ffn_norm (GPT-NeoX)
  const char* hf_parallel_key = "";   // config key that turns the parallel residual on (StableLM's use_parallel_residual)
  bool plain_mlp = false;             // MLP up -> GELU -> down, no gate (Phi-2, Starcoder2)
  bool rope_interleaved = false;      // RoPE on pairs (2i, 2i+1), q/k rows kept as HF and GGUF store them (Cohere)
  bool output_bias = false;           // lm_head has a bias (Phi-2)
  bool hf_logit_scale_mul = false;    // config `logit_scale` multiplies the logits (Cohere, default 0.0625)
  const char* hf_qk_layernorm_key = "";  // config key of per-head q/k LayerNorms, refused when true
                                         // (StableLM 2 12B's qk_layernorm, Command R+'s use_qk_norm)

  // Layers: attention policy and RoPE.
  WindowRule hf_window = WindowRule::None;
  WindowRule gguf_window = WindowRule::None;  // as llama.cpp runs the architecture; also what the writer can express
  int64_t window_pattern = 0;                 // EveryNthGlobal: every window_pattern-th layer is global
  bool hf_window_pattern_key = false;         // config `sliding_window_pattern` overrides window_pattern (Gemma 3)
  bool sliding_rope_unscaled = false;  // windowed layers: the model's RoPE base without its scaling (OLMo 3, and
                                       // llama.cpp's olmo2 with a window)
  bool local_rope_base = false;  // windowed layers use their own unscaled RoPE base (Gemma 3:
                                 // rope_local_base_freq / rope.freq_base_swa, default 10000)
  bool nope_layers = false;      // some layers skip RoPE: no_rope_layers, or every no_rope_layer_interval-th (SmolLM3, Llama 4)

  // Defaults for absent config keys, as JSON text: the family's transformers config class
  // where it differs from ptn's generic defaults (Gemma 2's window and soft-caps, Qwen's
  // max_window_layers; Gemma 3 4B+ configs omit many text_config fields); empty for none. An
  // explicit null in a config is None, not the default.
  const char* hf_config_defaults = "";
};

// Every row, in table order.
std::span<const FamilyInfo> all_families();
const FamilyInfo& family_info(Family f);
// nullptr when unknown.
const FamilyInfo* find_family(std::string_view name);           // by FamilyInfo::name (ModelSpec::family)
const FamilyInfo* find_family_by_hf_arch(std::string_view arch);  // by config.json architecture
const FamilyInfo* find_family_by_gguf_arch(std::string_view arch);  // the row that reads this GGUF architecture

// Lists for error messages: "Llama, Mistral, ..." (display names of runnable families) and
// "llama, qwen2, ..." (GGUF architectures ptn reads / families ptn can write as GGUF).
std::string supported_family_list();
std::string gguf_readable_arch_list();
std::string gguf_writable_family_list();

}  // namespace ptn
