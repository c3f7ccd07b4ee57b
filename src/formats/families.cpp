#include "formats/families.h"

#include <deque>
#include <initializer_list>

namespace ptn {

namespace {

// ---- where HF checkpoints keep each canonical per-layer tensor --------------------------------

// Pieces several families share; a family's table is a run of them (layer_table below).
constexpr HfLayerTensor kInputNorm[] = {{"attn_norm.weight", "input_layernorm.weight"}};
constexpr HfLayerTensor kInputNormBias[] = {{"attn_norm.bias", "input_layernorm.bias"}};  // LayerNorm families
// Llama's attention: self_attn.{q,k,v}_proj with their biases, the per-head q/k norms, o_proj.
constexpr HfLayerTensor kLlamaQkv[] = {
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
};
constexpr HfLayerTensor kQkNorms[] = {
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
};
constexpr HfLayerTensor kOProj[] = {{"attn_output.weight", "self_attn.o_proj.weight"}};
constexpr HfLayerTensor kOProjBias[] = {{"attn_output.bias", "self_attn.o_proj.bias"}};
// post_attention_layernorm as Llama names it: the norm before the MLP.
constexpr HfLayerTensor kFfnNorm[] = {{"ffn_norm.weight", "post_attention_layernorm.weight"}};
constexpr HfLayerTensor kFfnNormBias[] = {{"ffn_norm.bias", "post_attention_layernorm.bias"}};
// Norms on the sublayers' outputs, as Gemma 2/3 and OLMo 2 name them (post_attention_layernorm
// is then the attention's output norm).
constexpr HfLayerTensor kOutputNorms[] = {
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
};
constexpr HfLayerTensor kLlamaMlp[] = {
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};
constexpr HfLayerTensor kLlamaMlpBias[] = {
    {"ffn_gate.bias", "mlp.gate_proj.bias"},
    {"ffn_up.bias", "mlp.up_proj.bias"},
    {"ffn_down.bias", "mlp.down_proj.bias"},
};
// gate|up in one gate_up_proj, gate rows first (Phi-3, GLM).
constexpr HfLayerTensor kFusedGateUpMlp[] = {
    {"ffn_gate.weight", "mlp.gate_up_proj.weight", RowPart::Gate},
    {"ffn_up.weight", "mlp.gate_up_proj.weight", RowPart::Up},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};

// DeepSeek's multi-head latent attention: q_proj, or q_a_proj -> q_a_layernorm -> q_b_proj; the
// latent and RoPE key from kv_a_proj_with_mqa, the latent's norm, kv_b_proj split per head.
constexpr HfLayerTensor kMlaAttn[] = {
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_q_a.weight", "self_attn.q_a_proj.weight"},
    {"attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight"},
    {"attn_q_b.weight", "self_attn.q_b_proj.weight"},
    {"attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight"},
    {"attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight"},
    {"attn_k_b.weight", "self_attn.kv_b_proj.weight", RowPart::KvbK},
    {"attn_v_b.weight", "self_attn.kv_b_proj.weight", RowPart::KvbV},
};

// Phi-3: q|k|v fused in qkv_proj.
constexpr HfLayerTensor kPhi3Qkv[] = {
    {"attn_q.weight", "self_attn.qkv_proj.weight", RowPart::Q},
    {"attn_k.weight", "self_attn.qkv_proj.weight", RowPart::K},
    {"attn_v.weight", "self_attn.qkv_proj.weight", RowPart::V},
};
// Gemma 2/3: the norm before the MLP is pre_feedforward_layernorm.
constexpr HfLayerTensor kPreFeedforwardNorm[] = {{"ffn_norm.weight", "pre_feedforward_layernorm.weight"}};
// Phi-2: the attention output `dense`, an MLP fc1 -> GELU -> fc2, biases on all.
constexpr HfLayerTensor kPhi2Rest[] = {
    {"attn_output.weight", "self_attn.dense.weight"},
    {"attn_output.bias", "self_attn.dense.bias"},
    {"ffn_up.weight", "mlp.fc1.weight"},
    {"ffn_up.bias", "mlp.fc1.bias"},
    {"ffn_down.weight", "mlp.fc2.weight"},
    {"ffn_down.bias", "mlp.fc2.bias"},
};
// Starcoder2: an MLP c_fc -> GELU -> c_proj with biases.
constexpr HfLayerTensor kStarcoder2Mlp[] = {
    {"ffn_up.weight", "mlp.c_fc.weight"},
    {"ffn_up.bias", "mlp.c_fc.bias"},
    {"ffn_down.weight", "mlp.c_proj.weight"},
    {"ffn_down.bias", "mlp.c_proj.bias"},
};
// GPT-NeoX (Pythia): q|k|v fused per head in query_key_value, the output `dense`, dense_h_to_4h
// -> GELU -> dense_4h_to_h, everything under gpt_neox.layers.N; post_attention_layernorm is the
// MLP's norm (of the layer input when parallel).
constexpr HfLayerTensor kGptNeoXAttnMlp[] = {
    {"attn_q.weight", "attention.query_key_value.weight", RowPart::HeadQ},
    {"attn_k.weight", "attention.query_key_value.weight", RowPart::HeadK},
    {"attn_v.weight", "attention.query_key_value.weight", RowPart::HeadV},
    {"attn_q.bias", "attention.query_key_value.bias", RowPart::HeadQ},
    {"attn_k.bias", "attention.query_key_value.bias", RowPart::HeadK},
    {"attn_v.bias", "attention.query_key_value.bias", RowPart::HeadV},
    {"attn_output.weight", "attention.dense.weight"},
    {"attn_output.bias", "attention.dense.bias"},
    {"ffn_up.weight", "mlp.dense_h_to_4h.weight"},
    {"ffn_up.bias", "mlp.dense_h_to_4h.bias"},
    {"ffn_down.weight", "mlp.dense_4h_to_h.weight"},
    {"ffn_down.bias", "mlp.dense_4h_to_h.bias"},
};
// GLM-4: norms on the sublayers' outputs under its own names (post_attention_layernorm stays
// the MLP's pre-norm).
constexpr HfLayerTensor kGlm4OutputNorms[] = {
    {"post_attention_norm.weight", "post_self_attn_layernorm.weight"},
    {"post_ffw_norm.weight", "post_mlp_layernorm.weight"},
};
// Llama 4 (dense text layers): the MLP is `feed_forward`.
constexpr HfLayerTensor kLlama4Mlp[] = {
    {"ffn_gate.weight", "feed_forward.gate_proj.weight"},
    {"ffn_up.weight", "feed_forward.up_proj.weight"},
    {"ffn_down.weight", "feed_forward.down_proj.weight"},
};
// gpt-oss: per-head sinks (its experts are mapped in hf_config.cpp, expert_sources).
constexpr HfLayerTensor kSinks[] = {{"attn_sinks.weight", "self_attn.sinks"}};

// The names of a family whose layer table is `parts` in order. Called while the table is built
// (once); the joined tables live as long as the program.
HfTensorNames names(std::initializer_list<std::span<const HfLayerTensor>> parts) {
  static std::deque<std::vector<HfLayerTensor>> joined;
  std::vector<HfLayerTensor>& v = joined.emplace_back();
  for (std::span<const HfLayerTensor> p : parts) v.insert(v.end(), p.begin(), p.end());
  HfTensorNames n;
  n.layer = v;
  return n;
}

// Llama and the families that copied its layout (Mistral, Qwen2/3, SmolLM3, Granite, ...).
HfTensorNames llama_names() {
  return names({kInputNorm, kLlamaQkv, kQkNorms, kOProj, kOProjBias, kFfnNorm, kLlamaMlp, kLlamaMlpBias, kInputNormBias, kFfnNormBias});
}

// Gemma3TextConfig's defaults (Gemma 3 4B+ configs omit many text_config fields).
constexpr const char* kGemma3Defaults = R"({
  "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
  "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
  "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 131072,
  "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "query_pre_attn_scalar": 256,
  "sliding_window": 4096, "rope_local_base_freq": 10000.0, "sliding_window_pattern": 6,
  "tie_word_embeddings": true})";

// The defaults of transformers' config classes for the keys ptn reads, where they differ from
// ptn's generic ones (rms_norm_eps 1e-6, rope_theta 10000, no window).
// GemmaConfig's defaults (gemma-7b's shapes). transformers 4's GemmaMLP takes hidden_activation,
// and the tanh GELU when it is absent, whatever hidden_act says (Gemma 1 configs say "gelu"); the
// model was trained with the tanh form and llama.cpp runs it.
constexpr const char* kGemmaDefaults = R"({
  "vocab_size": 256000, "hidden_size": 3072, "intermediate_size": 24576,
  "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 16,
  "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 8192,
  "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": true})";
constexpr const char* kGemma2Defaults = R"({
  "vocab_size": 256000, "hidden_size": 3072, "intermediate_size": 24576,
  "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 16,
  "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 8192,
  "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "query_pre_attn_scalar": 256,
  "sliding_window": 4096, "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0,
  "tie_word_embeddings": true})";
constexpr const char* kMistralDefaults = R"({"sliding_window": 4096, "max_position_embeddings": 131072})";
constexpr const char* kQwenDefaults = R"({"sliding_window": 4096, "max_window_layers": 28})";
constexpr const char* kPhi3Defaults = R"({"rms_norm_eps": 1e-5})";
// MixtralConfig's and Qwen3MoeConfig's defaults for the keys ptn reads (their sliding windows
// are read by the rows' rules: Mixtral's default is none; Qwen's applies only with use_sliding_window).
constexpr const char* kMixtralDefaults = R"({"rms_norm_eps": 1e-5, "rope_theta": 1000000.0, "max_position_embeddings": 131072,
  "num_local_experts": 8, "num_experts_per_tok": 2})";
constexpr const char* kQwen3MoeDefaults = R"({"sliding_window": 4096, "max_window_layers": 28, "num_experts": 128,
  "num_experts_per_tok": 8, "moe_intermediate_size": 768, "norm_topk_prob": false, "decoder_sparse_step": 1})";
// DeepseekV2Config's and DeepseekV3Config's defaults for the keys that differ from ptn's generic
// ones (the routing; V2's q_lora_rank 1536 and the shapes of the full models).
constexpr const char* kDeepseekV2Defaults = R"({"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
  "moe_intermediate_size": 1407, "num_hidden_layers": 32, "num_attention_heads": 32,
  "n_shared_experts": 2, "n_routed_experts": 64, "routed_scaling_factor": 1.0, "kv_lora_rank": 512,
  "q_lora_rank": 1536, "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128, "topk_method": "greedy",
  "n_group": null, "topk_group": null, "num_experts_per_tok": null, "moe_layer_freq": 1, "first_k_dense_replace": 0,
  "norm_topk_prob": false, "scoring_func": "softmax", "max_position_embeddings": 2048, "rms_norm_eps": 1e-6,
  "rope_theta": 10000.0})";
constexpr const char* kDeepseekV3Defaults = R"({"vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432,
  "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
  "n_shared_experts": 1, "n_routed_experts": 256, "routed_scaling_factor": 2.5, "kv_lora_rank": 512,
  "q_lora_rank": 1536, "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128, "topk_method": "noaux_tc",
  "n_group": 8, "topk_group": 4, "num_experts_per_tok": 8, "moe_layer_freq": 1, "first_k_dense_replace": 3,
  "norm_topk_prob": true, "scoring_func": "sigmoid", "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
  "rope_theta": 10000.0, "rope_interleave": true})";
// Qwen2MoeConfig's defaults (Qwen1.5-MoE-A2.7B's shapes; its window only with use_sliding_window).
constexpr const char* kQwen2MoeDefaults = R"({"sliding_window": 4096, "max_window_layers": 28, "num_experts": 60,
  "num_experts_per_tok": 4, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
  "norm_topk_prob": false, "decoder_sparse_step": 1, "rope_theta": 10000.0, "rms_norm_eps": 1e-6})";
// OlmoeConfig's defaults (OLMoE-1B-7B's shapes): 64 experts of intermediate_size, top-8 not
// renormalised, on every layer.
constexpr const char* kOlmoeDefaults = R"({"vocab_size": 50304, "hidden_size": 2048, "intermediate_size": 2048,
  "num_hidden_layers": 16, "num_attention_heads": 16, "max_position_embeddings": 4096, "rope_theta": 10000.0,
  "rms_norm_eps": 1e-5, "num_experts": 64, "num_experts_per_tok": 8, "norm_topk_prob": false})";
// GraniteConfig's defaults: the multipliers are 1 (attention_multiplier replaces 1/sqrt(head_dim)).
// Granite MoE's add 8 experts of intermediate_size, 2 per token; Granite MoE Shared's also
// shared_intermediate_size 0 (no shared MLP).
#define PTN_GRANITE_DEFAULT_KEYS                                                                                   \
  R"("vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,)"             \
  R"( "num_attention_heads": 32, "max_position_embeddings": 2048, "rope_theta": 10000.0, "rms_norm_eps": 1e-6,)" \
  R"( "tie_word_embeddings": false, "embedding_multiplier": 1.0, "logits_scaling": 1.0,)"                       \
  R"( "residual_multiplier": 1.0, "attention_multiplier": 1.0)"
constexpr const char* kGraniteDefaults = "{" PTN_GRANITE_DEFAULT_KEYS "}";
constexpr const char* kGraniteMoeDefaults = "{" PTN_GRANITE_DEFAULT_KEYS R"(, "num_local_experts": 8, "num_experts_per_tok": 2})";
constexpr const char* kGraniteMoeSharedDefaults =
    "{" PTN_GRANITE_DEFAULT_KEYS R"(, "num_local_experts": 8, "num_experts_per_tok": 2, "shared_intermediate_size": 0})";
#undef PTN_GRANITE_DEFAULT_KEYS
// Ministral3Config's defaults (Ministral-3-8B's shapes): no window; YaRN x16 from 16384 with the
// query temperature beta 0.1.
constexpr const char* kMinistral3Defaults = R"({"vocab_size": 131072, "hidden_size": 4096, "intermediate_size": 14336,
  "num_hidden_layers": 34, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
  "max_position_embeddings": 262144, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
  "rope_parameters": {"type": "yarn", "rope_theta": 1000000.0, "factor": 16.0, "original_max_position_embeddings": 16384,
                      "beta_fast": 32.0, "beta_slow": 1.0, "mscale_all_dim": 1.0, "mscale": 1.0, "llama_4_scaling_beta": 0.1}})";
// Olmo2Config's defaults (OLMo-2-1124-7B's shapes).
constexpr const char* kOlmo2Defaults = R"({"vocab_size": 50304, "hidden_size": 4096, "intermediate_size": 11008,
  "num_hidden_layers": 32, "num_attention_heads": 32, "max_position_embeddings": 2048, "rope_theta": 10000.0,
  "rms_norm_eps": 1e-5, "tie_word_embeddings": false})";
// Olmo3Config's: OLMo 2's, with a window of 4096 on three layers of every four (layer_types).
constexpr const char* kOlmo3Defaults = R"({"vocab_size": 50304, "hidden_size": 4096, "intermediate_size": 11008,
  "num_hidden_layers": 32, "num_attention_heads": 32, "max_position_embeddings": 2048, "rope_theta": 10000.0,
  "rms_norm_eps": 1e-5, "tie_word_embeddings": false, "sliding_window": 4096})";
// GptOssConfig's defaults (gpt-oss-20b's text shapes but 36 layers, 128 experts as in 120b).
// Its rope_scaling default differs between transformers versions (original_max_position_embeddings
// only in 5.x), so a config without one is refused rather than given either (hf_config.cpp).
constexpr const char* kGptOssDefaults = R"({"vocab_size": 201088, "hidden_size": 2880, "intermediate_size": 2880,
  "num_hidden_layers": 36, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
  "sliding_window": 128, "rope_theta": 150000.0, "rms_norm_eps": 1e-5, "max_position_embeddings": 131072,
  "num_local_experts": 128, "num_experts_per_tok": 4, "attention_bias": true, "swiglu_limit": 7.0,
  "tie_word_embeddings": false})";
// StableLmConfig's defaults (stablelm-3b-4e1t's shapes): a quarter of each head rotated.
constexpr const char* kStableLmDefaults = R"({"vocab_size": 50304, "hidden_size": 2560, "intermediate_size": 6912,
  "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32, "hidden_act": "silu",
  "max_position_embeddings": 4096, "layer_norm_eps": 1e-5, "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
  "tie_word_embeddings": false})";
// PhiConfig's defaults (phi-1's shapes): half of each head rotated, the tanh GELU.
constexpr const char* kPhi2Defaults = R"({"vocab_size": 51200, "hidden_size": 2048, "intermediate_size": 8192,
  "num_hidden_layers": 24, "num_attention_heads": 32, "hidden_act": "gelu_new", "max_position_embeddings": 2048,
  "layer_norm_eps": 1e-5, "rope_theta": 10000.0, "partial_rotary_factor": 0.5, "tie_word_embeddings": false})";
// Starcoder2Config's defaults (starcoder2-3b's shapes, no window unless the config gives one).
constexpr const char* kStarcoder2Defaults = R"({"vocab_size": 49152, "hidden_size": 3072, "intermediate_size": 12288,
  "num_hidden_layers": 30, "num_attention_heads": 24, "num_key_value_heads": 2, "hidden_act": "gelu_pytorch_tanh",
  "max_position_embeddings": 4096, "norm_epsilon": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": true})";
// CohereConfig's defaults (Command-R 35B's shapes): logits times 0.0625, a tied classifier.
constexpr const char* kCohereDefaults = R"({"vocab_size": 256000, "hidden_size": 8192, "intermediate_size": 22528,
  "num_hidden_layers": 40, "num_attention_heads": 64, "hidden_act": "silu", "max_position_embeddings": 8192,
  "layer_norm_eps": 1e-5, "rope_theta": 10000.0, "logit_scale": 0.0625, "tie_word_embeddings": true})";
// GPTNeoXConfig's defaults (gpt-neox-20b's shapes): a quarter of each head rotated, exact GELU,
// parallel layers, biases on the attention (attention_bias, 4.3x+) and always on the MLP.
constexpr const char* kGptNeoXDefaults = R"({"vocab_size": 50432, "hidden_size": 6144, "intermediate_size": 24576,
  "num_hidden_layers": 44, "num_attention_heads": 64, "hidden_act": "gelu", "max_position_embeddings": 2048,
  "layer_norm_eps": 1e-5, "rotary_emb_base": 10000.0, "rotary_pct": 0.25, "use_parallel_residual": true,
  "attention_bias": true, "tie_word_embeddings": false})";
// GlmConfig's and Glm4Config's defaults (glm-4-9b's shapes): half of each head rotated on
// interleaved pairs, q/k/v biases, untied.
constexpr const char* kGlmDefaults = R"({"vocab_size": 151552, "hidden_size": 4096, "intermediate_size": 13696,
  "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "hidden_act": "silu",
  "max_position_embeddings": 131072, "rms_norm_eps": 1.5625e-07, "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
  "attention_bias": true, "tie_word_embeddings": false})";
// Llama4TextConfig's defaults, experts included (a config that names no moe_layers has experts on
// every interleave_moe_layer_step-th layer, 16 of them, one used per token).
constexpr const char* kLlama4Defaults = R"({"rms_norm_eps": 1e-5, "rope_theta": 500000.0, "attention_chunk_size": 8192,
  "intermediate_size": 8192, "intermediate_size_mlp": 16384, "num_local_experts": 16, "num_experts_per_tok": 1,
  "interleave_moe_layer_step": 1, "head_dim": 128})";

// ---- the table ---------------------------------------------------------------------------------

std::vector<FamilyInfo> make_table() {
  std::vector<FamilyInfo> t;
  // Each row is filled through the reference `row` returns, before the next row is added.
  auto row = [&](Family id, const char* name, const char* display, std::vector<std::string> hf) -> FamilyInfo& {
    FamilyInfo f{id, name, display, std::move(hf)};
    f.hf_names = llama_names();
    t.push_back(std::move(f));
    return t.back();
  };
  {
    FamilyInfo& f = row(Family::Llama, "llama", "Llama", {"LlamaForCausalLM"});
    f.hf_mlp_bias = true;
    f.gguf_arch = "llama"; f.gguf_reads = true; f.gguf_qk_interleaved = true; f.gguf_rope_freqs = true;
  }
  {
    FamilyInfo& f = row(Family::Mistral, "mistral", "Mistral", {"MistralForCausalLM"});
    f.gguf_arch = "llama";  // written as, and read back as, Llama
    f.attn_bias = AttnBias::None;
    f.hf_window = WindowRule::AllLayers;
    f.hf_config_defaults = kMistralDefaults;
  }
  {
    FamilyInfo& f = row(Family::Qwen2, "qwen2", "Qwen2", {"Qwen2ForCausalLM"});
    f.gguf_arch = "qwen2"; f.gguf_reads = true;
    f.attn_bias = AttnBias::QkvAlways;
    f.hf_window = WindowRule::FromMaxWindowLayers;
    f.hf_config_defaults = kQwenDefaults;
  }
  {
    FamilyInfo& f = row(Family::Qwen3, "qwen3", "Qwen3", {"Qwen3ForCausalLM", "Qwen3Model"});
    f.gguf_arch = "qwen3"; f.gguf_reads = true;
    f.qk_norm = true;
    f.hf_window = WindowRule::FromMaxWindowLayers;
    f.hf_config_defaults = kQwenDefaults;
  }
  {
    // Gemma (1): Llama's layer with (1 + w) norms, the embedding times sqrt(hidden), the tanh
    // GELU, a tied classifier. llama.cpp's "gemma": q/k/v biases only, always tied.
    FamilyInfo& f = row(Family::Gemma, "gemma", "Gemma", {"GemmaForCausalLM"});
    f.norm_weight_plus_one = true; f.embed_scale = EmbedScale::SqrtHidden;
    f.tie_by_default = true; f.gguf_activation = Activation::GeLUTanh;
    f.gguf_arch = "gemma"; f.gguf_reads = true; f.gguf_qkv_bias_only = true; f.gguf_tied_only = true;
    f.hf_config_defaults = kGemmaDefaults;
  }
  {
    FamilyInfo& f = row(Family::Gemma2, "gemma2", "Gemma 2", {"Gemma2ForCausalLM"});
    f.gguf_arch = "gemma2"; f.gguf_reads = true;
    f.hf_names = names({kInputNorm, kLlamaQkv, kQkNorms, kOProj, kOProjBias, kOutputNorms, kPreFeedforwardNorm, kLlamaMlp});
    f.norm_weight_plus_one = true; f.sandwich_norms = true; f.embed_scale = EmbedScale::SqrtHidden;
    f.query_pre_attn_scalar = true; f.gguf_wide_query_layers = 46; f.logit_softcaps = true;
    f.tie_by_default = true; f.gguf_activation = Activation::GeLUTanh;
    f.hf_window = f.gguf_window = WindowRule::EveryNthGlobal; f.window_pattern = 2;
    f.hf_config_defaults = kGemma2Defaults;
  }
  {
    FamilyInfo& f = row(Family::Gemma3, "gemma3", "Gemma 3", {"Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"});
    f.gguf_arch = "gemma3"; f.gguf_reads = true;
    f.hf_names = names({kInputNorm, kLlamaQkv, kQkNorms, kOProj, kOProjBias, kOutputNorms, kPreFeedforwardNorm, kLlamaMlp});
    f.norm_weight_plus_one = true; f.sandwich_norms = true; f.embed_scale = EmbedScale::SqrtHidden; f.qk_norm = true;
    f.query_pre_attn_scalar = true; f.gguf_wide_query_layers = 62; f.logit_softcaps = true;
    f.tie_by_default = true; f.gguf_activation = Activation::GeLUTanh;
    f.hf_window = f.gguf_window = WindowRule::EveryNthGlobal; f.window_pattern = 6; f.hf_window_pattern_key = true;
    f.local_rope_base = true;
    f.hf_config_defaults = kGemma3Defaults;
  }
  {
    FamilyInfo& f = row(Family::Phi3, "phi3", "Phi-3", {"Phi3ForCausalLM"});
    f.gguf_arch = "phi3"; f.gguf_reads = true; f.gguf_fused_qkv_gate_up = true;
    f.hf_names = names({kInputNorm, kPhi3Qkv, kOProj, kFfnNorm, kFusedGateUpMlp});
    f.attn_bias = AttnBias::None;
    f.hf_window = f.gguf_window = WindowRule::AllLayers;
    f.hf_config_defaults = kPhi3Defaults;
  }
  {
    FamilyInfo& f = row(Family::SmolLM3, "smollm3", "SmolLM3", {"SmolLM3ForCausalLM"});
    f.tie_by_default = true; f.nope_layers = true; f.hf_mlp_bias = true;
    f.hf_window = WindowRule::FromMaxWindowLayers;
    // llama.cpp's smollm3: Llama's file layout (q/k rows permuted by its converter), RoPE skipped
    // on every 4th layer by its code, every layer full, q/k/v biases only, no rope_freqs tensor.
    f.gguf_arch = "smollm3"; f.gguf_reads = true; f.gguf_qk_interleaved = true;
    f.gguf_nope_step = 4; f.gguf_qkv_bias_only = true;
  }
  {
    FamilyInfo& f = row(Family::Llama4, "llama4", "Llama 4", {"Llama4ForCausalLM", "Llama4ForConditionalGeneration"});
    f.hf_names = names({kInputNorm, kLlamaQkv, kOProj, kOProjBias, kFfnNorm, kLlama4Mlp}); f.hf_qk_interleaved = true; f.hf_ffn_size_key = "intermediate_size_mlp";
    f.block = Block::Moe; f.hf_moe = HfMoe::Llama4; f.hf_moe_block = "feed_forward";
    f.qk_l2_norm = true; f.attn_temperature = true; f.nope_layers = true;
    f.hf_window = WindowRule::ChunkOnRopeLayers;
    f.hf_config_defaults = kLlama4Defaults;
    // llama.cpp's llama4: q/k rows as HF stores them (already interleaved), experts required,
    // chunks, NoPE layers and the temperature fixed in its code (gguf_spec.cpp reads them).
    f.gguf_arch = "llama4"; f.gguf_reads = true; f.gguf_qk_interleaved = true; f.gguf_rope_freqs = true;
    f.gguf_window = WindowRule::ChunkOnRopeLayers; f.gguf_moe_norm_topk = false; f.gguf_shared_expert = true;
  }
  {
    FamilyInfo& f = row(Family::Mixtral, "mixtral", "Mixtral", {"MixtralForCausalLM"});
    f.block = Block::Moe; f.hf_moe = HfMoe::Mixtral; f.hf_moe_block = "block_sparse_moe"; f.hf_expert_w123 = true;
    f.gguf_arch = "llama";  // written as llama with expert_count; a llama file with experts reads as Mixtral
    f.attn_bias = AttnBias::None;
    f.hf_window = WindowRule::AllLayers;
    f.hf_config_defaults = kMixtralDefaults;
  }
  {
    FamilyInfo& f = row(Family::Qwen3Moe, "qwen3_moe", "Qwen3-MoE", {"Qwen3MoeForCausalLM"});
    f.block = Block::Moe; f.hf_moe = HfMoe::Qwen;
    f.gguf_arch = "qwen3moe"; f.gguf_reads = true;
    f.qk_norm = true;
    f.hf_window = WindowRule::None;  // use_sliding_window is refused (hf_config.cpp): none of its checkpoints sets it
    f.hf_config_defaults = kQwen3MoeDefaults;
  }
  {
    // Qwen2-MoE: Qwen2's attention (q/k/v biases) with routed experts and a shared expert whose
    // output is scaled by sigmoid(shared_expert_gate . x). llama.cpp's qwen2moe: experts on every
    // layer, the top-k not renormalised, the shared expert's gate a vector.
    FamilyInfo& f = row(Family::Qwen2Moe, "qwen2_moe", "Qwen2-MoE", {"Qwen2MoeForCausalLM"});
    f.block = Block::Moe; f.hf_moe = HfMoe::QwenShared;
    f.gguf_arch = "qwen2moe"; f.gguf_reads = true; f.gguf_moe_norm_topk = false; f.gguf_shared_expert = true;
    f.attn_bias = AttnBias::QkvAlways;
    f.hf_window = WindowRule::None;  // use_sliding_window is refused (hf_config.cpp), as for Qwen3-MoE
    f.hf_config_defaults = kQwen2MoeDefaults;
  }
  {
    // OLMoE: Llama's layer with one RMSNorm over all q heads (and one over all k heads) before
    // RoPE, and experts on every layer (softmax, top-k, renormalised with norm_topk_prob).
    FamilyInfo& f = row(Family::Olmoe, "olmoe", "OLMoE", {"OlmoeForCausalLM"});
    f.block = Block::Moe; f.hf_moe = HfMoe::Olmoe;
    f.qk_norm = true; f.qk_norm_full = true;
    f.attn_bias = AttnBias::None;
    f.gguf_arch = "olmoe"; f.gguf_reads = true; f.gguf_moe_norm_topk = false;  // llama.cpp's olmoe: norm_w false
    f.hf_config_defaults = kOlmoeDefaults;
  }
  {
    // OLMo 2: Llama's layer with the norms moved after attention and the MLP (on their outputs,
    // before the residual add) and RMSNorms over all q heads and all k heads before RoPE.
    // llama.cpp's "olmo2" also holds OLMo 3: with attention.sliding_window, the layers of
    // sliding_window_pattern (default: three of every four) are windowed, RoPE unscaled there.
    FamilyInfo& f = row(Family::Olmo2, "olmo2", "OLMo 2", {"Olmo2ForCausalLM"});
    f.hf_names = names({kLlamaQkv, kQkNorms, kOProj, kOProjBias, kOutputNorms, kLlamaMlp});
    f.qk_norm = true; f.qk_norm_full = true; f.sandwich_norms = true; f.no_pre_norms = true;
    f.gguf_arch = "olmo2"; f.gguf_reads = true;
    f.gguf_window = WindowRule::EveryNthGlobal; f.window_pattern = 4; f.sliding_rope_unscaled = true;
    f.hf_config_defaults = kOlmo2Defaults;
  }
  {
    // OLMo 3: OLMo 2's layer; windows on the layers layer_types names (default three of every
    // four), where RoPE is the plain one at the same base: the scaling (YaRN) is the full
    // layers' only, as OLMo-core trains it and llama.cpp and vLLM run it. Written as "olmo2".
    FamilyInfo& f = row(Family::Olmo3, "olmo3", "OLMo 3", {"Olmo3ForCausalLM"});
    f.hf_names = names({kLlamaQkv, kQkNorms, kOProj, kOProjBias, kOutputNorms, kLlamaMlp});
    f.qk_norm = true; f.qk_norm_full = true; f.sandwich_norms = true; f.no_pre_norms = true;
    f.hf_window = WindowRule::EveryNthGlobal; f.window_pattern = 4; f.sliding_rope_unscaled = true;
    f.gguf_arch = "olmo2";  // written as, and read back as, OLMo 2
    f.hf_config_defaults = kOlmo3Defaults;
  }
  {
    // Granite 3: Llama's layer with four scalars (embeddings, query scale, the sublayers' outputs
    // before the residual add, logits). llama.cpp's "granite" (Granite MoE is the "granitemoe"
    // row; the hybrid Mamba architecture is not run by ptn).
    FamilyInfo& f = row(Family::Granite, "granite", "Granite", {"GraniteForCausalLM"});
    f.hf_mlp_bias = true; f.granite_multipliers = true;
    f.gguf_arch = "granite"; f.gguf_reads = true; f.gguf_qk_interleaved = true; f.gguf_rope_freqs = true;
    f.hf_config_defaults = kGraniteDefaults;
  }
  {
    // gpt-oss: alternating sliding (128) and full layers, learned sinks, YaRN, MXFP4 experts
    // with biases and a clamped SwiGLU. llama.cpp's "gpt-oss": merged experts and their biases,
    // the pre-FFN norm named post_attention_norm, even layers windowed (swa pattern 2).
    FamilyInfo& f = row(Family::GptOss, "gpt_oss", "gpt-oss", {"GptOssForCausalLM"});
    f.block = Block::Moe; f.hf_moe = HfMoe::GptOss;
    f.gguf_arch = "gpt-oss"; f.gguf_reads = true; f.gguf_window = WindowRule::EveryNthGlobal;
    f.gguf_ffn_norm = "post_attention_norm";
    f.hf_names = names({kInputNorm, kLlamaQkv, kOProj, kOProjBias, kSinks, kFfnNorm});
    f.attn_sinks = true;
    f.hf_window = WindowRule::EveryNthGlobal; f.window_pattern = 2;  // layer_types' default: sliding, full, ...
    f.hf_config_defaults = kGptOssDefaults;
  }
  {
    // DeepSeek V2 / V2-Lite / V2.5: multi-head latent attention (decoder.cpp attend_mla), RoPE on
    // interleaved pairs of the rope part, the first first_k_dense_replace layers dense, then
    // softmax-routed experts with ungated shared experts.
    FamilyInfo& f = row(Family::DeepseekV2, "deepseek_v2", "DeepSeek V2", {"DeepseekV2ForCausalLM"});
    f.hf_names = names({kInputNorm, kMlaAttn, kOProj, kFfnNorm, kLlamaMlp});
    f.block = Block::Moe; f.hf_moe = HfMoe::DeepseekV2; f.hf_mla = true; f.rope_interleaved = true;
    f.attn_bias = AttnBias::None;
    // llama.cpp's deepseek2 (V2 and V3 alike): attn_k_b / attn_v_b split from kv_b_proj, one cached
    // head (gguf_spec.cpp read_deepseek2); a file with sigmoid gating reads as DeepSeek V3.
    f.gguf_arch = "deepseek2"; f.gguf_reads = true; f.gguf_moe_norm_topk = false;
    f.hf_config_defaults = kDeepseekV2Defaults;
  }
  {
    // DeepSeek V3 / R1 / Kimi-K2 style: V2's attention (the query through q_lora_rank), sigmoid
    // scores chosen with a bias within the best groups, renormalised and scaled.
    FamilyInfo& f = row(Family::DeepseekV3, "deepseek_v3", "DeepSeek V3", {"DeepseekV3ForCausalLM"});
    f.hf_names = names({kInputNorm, kMlaAttn, kOProj, kFfnNorm, kLlamaMlp});
    f.block = Block::Moe; f.hf_moe = HfMoe::DeepseekV3; f.hf_mla = true; f.rope_interleaved = true;
    f.attn_bias = AttnBias::None;
    f.gguf_arch = "deepseek2";
    f.hf_config_defaults = kDeepseekV3Defaults;
  }
  {
    // StableLM (2): LayerNorms with biases, a quarter of each head rotated (partial_rotary_factor),
    // q/k/v biases with use_qkv_bias, SwiGLU; use_parallel_residual runs attention and MLP on the
    // input norm and drops post_attention_layernorm. llama.cpp's stablelm: parallel when a layer
    // has no ffn_norm.
    FamilyInfo& f = row(Family::StableLM, "stablelm", "StableLM", {"StableLmForCausalLM"});
    f.hf_head_dim = false; f.hf_norm_eps_key = "layer_norm_eps"; f.layer_norm = f.layer_norm_bias = true;
    f.hf_parallel_key = "use_parallel_residual"; f.hf_qk_layernorm_key = "qk_layernorm";
    f.attn_bias = AttnBias::QkvFromConfig;
    f.gguf_arch = "stablelm"; f.gguf_reads = true; f.gguf_qkv_bias_only = true; f.gguf_untied_only = true;
    f.hf_config_defaults = kStableLmDefaults;
  }
  {
    // Phi-2 (PhiForCausalLM): one LayerNorm feeding attention and the MLP in parallel, biases on
    // every projection and on lm_head, half of each head rotated, fc1 -> tanh GELU -> fc2.
    FamilyInfo& f = row(Family::Phi2, "phi2", "Phi-2", {"PhiForCausalLM"});
    f.hf_names = names({kInputNorm, kInputNormBias, kLlamaQkv, kPhi2Rest}); f.hf_names.final_norm = "model.final_layernorm.weight";
    f.hf_head_dim = false; f.hf_norm_eps_key = "layer_norm_eps"; f.layer_norm = f.layer_norm_bias = true;
    f.parallel_residual = true; f.plain_mlp = true; f.output_bias = true; f.hf_qk_layernorm_key = "qk_layernorm";
    f.attn_bias = AttnBias::All; f.gguf_activation = Activation::GeLUTanh;
    f.gguf_arch = "phi2"; f.gguf_reads = true; f.gguf_untied_only = true;
    f.hf_config_defaults = kPhi2Defaults;
  }
  {
    // Starcoder2: Llama's sequential layer with LayerNorms (biases), biases on q/k/v/o and the
    // MLP with use_bias, c_fc -> tanh GELU -> c_proj, a window on every layer when the config
    // gives one (llama.cpp's starcoder2 has none: such a model is not written as GGUF).
    FamilyInfo& f = row(Family::Starcoder2, "starcoder2", "Starcoder2", {"Starcoder2ForCausalLM"});
    f.hf_names = names({kInputNorm, kInputNormBias, kLlamaQkv, kOProj, kOProjBias, kFfnNorm, kFfnNormBias, kStarcoder2Mlp});
    f.hf_head_dim = false; f.hf_norm_eps_key = "norm_epsilon"; f.layer_norm = f.layer_norm_bias = true; f.plain_mlp = true;
    f.attn_bias = AttnBias::AllFromConfig; f.tie_by_default = true; f.gguf_activation = Activation::GeLUTanh;
    f.hf_window = WindowRule::AllLayers;
    f.gguf_arch = "starcoder2"; f.gguf_reads = true;
    f.hf_config_defaults = kStarcoder2Defaults;
  }
  {
    // Cohere (Command-R): one LayerNorm without bias feeding attention and the MLP in parallel,
    // RoPE on interleaved pairs (q/k rows as stored), SwiGLU, logits times logit_scale, tied.
    // llama.cpp's command-r: always tied, no o_proj or MLP biases, q/k norms only on its 64+
    // layer models (per-head LayerNorms, refused here).
    FamilyInfo& f = row(Family::Cohere, "cohere", "Cohere", {"CohereForCausalLM"});
    f.hf_head_dim = false; f.hf_norm_eps_key = "layer_norm_eps"; f.layer_norm = true;
    f.parallel_residual = true; f.rope_interleaved = true; f.hf_logit_scale_mul = true; f.hf_qk_layernorm_key = "use_qk_norm";
    f.tie_by_default = true;
    f.gguf_arch = "command-r"; f.gguf_reads = true; f.gguf_qkv_bias_only = true; f.gguf_tied_only = true;
    f.hf_config_defaults = kCohereDefaults;
  }
  {
    // GPT-NeoX (Pythia, GPT-NeoX-20B): LayerNorms with biases, q|k|v fused per head, a quarter
    // of each head rotated (half-split pairs), use_parallel_residual (default true) runs the MLP
    // on its own norm of the layer input, exact GELU, an untied embed_out. llama.cpp's gptneox:
    // q|k|v rows regrouped into one attn_qkv, every bias required, use_parallel_residual, GELU
    // as ggml's tanh form.
    FamilyInfo& f = row(Family::GptNeoX, "gptneox", "GPT-NeoX", {"GPTNeoXForCausalLM"});
    f.hf_names = names({kInputNorm, kInputNormBias, kGptNeoXAttnMlp, kFfnNorm, kFfnNormBias});
    f.hf_names.layers = "gpt_neox.layers."; f.hf_names.embedding = "gpt_neox.embed_in.weight";
    f.hf_names.final_norm = "gpt_neox.final_layer_norm.weight"; f.hf_names.output = "embed_out.weight";
    f.hf_head_dim = false; f.hf_kv_heads = false; f.hf_norm_eps_key = "layer_norm_eps";
    f.hf_rope_theta_key = "rotary_emb_base"; f.hf_partial_rotary_key = "rotary_pct";
    f.layer_norm = f.layer_norm_bias = true; f.plain_mlp = true; f.mlp_bias_always = true;
    f.hf_parallel_key = "use_parallel_residual"; f.parallel_ffn_norm = true;
    f.gguf_arch = "gptneox"; f.gguf_reads = true; f.gguf_fused_qkv = true; f.gguf_untied_only = true;
    f.gguf_activation = Activation::GeLUTanh;
    f.hf_config_defaults = kGptNeoXDefaults;
  }
  {
    // GLM (GlmForCausalLM, glm-4-9b-hf): Llama's layer with q/k/v biases (attention_bias), gate|up
    // fused, partial_rotary_factor (default 0.5) of each head rotated on interleaved pairs.
    // llama.cpp's chatglm: the same graph (q/k/v or one attn_qkv, ffn_up = gate|up).
    FamilyInfo& f = row(Family::Glm, "glm", "GLM", {"GlmForCausalLM"});
    f.hf_names = names({kInputNorm, kLlamaQkv, kOProj, kGlm4OutputNorms, kFfnNorm, kFusedGateUpMlp});
    f.attn_bias = AttnBias::QkvFromAttentionBias; f.rope_interleaved = true;
    f.gguf_arch = "chatglm"; f.gguf_reads = true; f.gguf_fused_gate_up = true; f.gguf_qkv_bias_only = true;
    f.hf_config_defaults = kGlmDefaults;
  }
  {
    // GLM-4 (Glm4ForCausalLM, GLM-4-0414): GLM's layer with plain RMSNorms on the attention's and
    // the MLP's outputs before each residual add. llama.cpp's glm4: post_attention_norm and
    // post_ffw_norm, otherwise as chatglm.
    FamilyInfo& f = row(Family::Glm4, "glm4", "GLM-4", {"Glm4ForCausalLM"});
    f.hf_names = names({kInputNorm, kLlamaQkv, kOProj, kGlm4OutputNorms, kFfnNorm, kFusedGateUpMlp});
    f.attn_bias = AttnBias::QkvFromAttentionBias; f.rope_interleaved = true; f.sandwich_norms = true;
    f.gguf_arch = "glm4"; f.gguf_reads = true; f.gguf_fused_gate_up = true; f.gguf_qkv_bias_only = true;
    f.hf_config_defaults = kGlmDefaults;
  }
  {
    // Granite MoE (3.0 1B-A400M, 3B-A800M): Granite's layer and four multipliers, experts on every
    // layer in stacked tensors (block_sparse_moe.input_linear / output_linear / router.layer),
    // softmax over the top-k logits. llama.cpp's "granitemoe": merged experts, the multipliers as
    // for granite (Granite MoE Shared, with ffn_*_shexp, is refused by name).
    FamilyInfo& f = row(Family::GraniteMoe, "granitemoe", "Granite MoE", {"GraniteMoeForCausalLM"});
    f.block = Block::Moe; f.hf_moe = HfMoe::GraniteMoe; f.hf_moe_block = "block_sparse_moe";
    f.granite_multipliers = true;
    f.gguf_arch = "granitemoe"; f.gguf_reads = true; f.gguf_qk_interleaved = true; f.gguf_rope_freqs = true;
    f.gguf_shared_expert_ungated = true;
    f.hf_config_defaults = kGraniteMoeDefaults;
  }
  {
    // Granite MoE Shared: Granite MoE with an ungated shared MLP (shared_intermediate_size wide,
    // 0: none) added to the experts' output. Written as, and read back as, "granitemoe" with
    // expert_shared_feed_forward_length and ffn_*_shexp.
    FamilyInfo& f = row(Family::GraniteMoeShared, "granitemoeshared", "Granite MoE Shared", {"GraniteMoeSharedForCausalLM"});
    f.block = Block::Moe; f.hf_moe = HfMoe::GraniteMoeShared; f.hf_moe_block = "block_sparse_moe";
    f.granite_multipliers = true;
    f.gguf_arch = "granitemoe";
    f.hf_config_defaults = kGraniteMoeSharedDefaults;
  }
  {
    // Ministral 3 (Ministral3ForCausalLM; the text model of Mistral3ForConditionalGeneration when
    // its text_config is "ministral3"): Mistral's layer with a query temperature on every layer.
    FamilyInfo& f = row(Family::Ministral3, "ministral3", "Ministral 3", {"Ministral3ForCausalLM", "Mistral3ForConditionalGeneration"});
    f.gguf_arch = "mistral3"; f.gguf_reads = true; f.gguf_qk_interleaved = true; f.gguf_rope_freqs = true;
    f.attn_bias = AttnBias::None;
    f.hf_window = WindowRule::AllLayers;
    f.rope_temperature = true;
    f.hf_config_defaults = kMinistral3Defaults;
  }
  return t;
}

const std::vector<FamilyInfo>& table() {
  static const std::vector<FamilyInfo> t = make_table();
  return t;
}

std::string join(const std::vector<std::string>& xs) {
  std::string out;
  for (const auto& x : xs) out += (out.empty() ? "" : ", ") + x;
  return out;
}

}  // namespace

std::span<const FamilyInfo> all_families() { return table(); }

const FamilyInfo& family_info(Family f) {
  for (const FamilyInfo& r : table())
    if (r.id == f) return r;
  return table().front();  // unreachable: every Family has a row
}

const FamilyInfo* find_family(std::string_view name) {
  for (const FamilyInfo& r : table())
    if (name == r.name) return &r;
  return nullptr;
}

const FamilyInfo* find_family_by_hf_arch(std::string_view arch) {
  for (const FamilyInfo& r : table())
    for (const std::string& a : r.hf_architectures)
      if (arch == a) return &r;
  return nullptr;
}

const FamilyInfo* find_family_by_gguf_arch(std::string_view arch) {
  for (const FamilyInfo& r : table())
    if (r.gguf_reads && arch == r.gguf_arch) return &r;
  return nullptr;
}

std::string supported_family_list() {
  std::vector<std::string> xs;
  for (const FamilyInfo& r : table())
    if (r.block != Block::Unsupported) xs.push_back(r.display);
  return join(xs);
}

std::string gguf_readable_arch_list() {
  std::vector<std::string> xs;
  for (const FamilyInfo& r : table())
    if (r.gguf_reads) xs.push_back(r.gguf_arch);
  return join(xs);
}

std::string gguf_writable_family_list() {
  std::vector<std::string> xs;
  for (const FamilyInfo& r : table())
    if (*r.gguf_arch) xs.push_back(r.name);
  return join(xs);
}

}  // namespace ptn
