#include "formats/model_spec.h"

#include <string>

namespace ptn {

std::string layer_tensor(int64_t layer, const char* what) {
  return "blk." + std::to_string(layer) + "." + what;
}

const char* attn_kind_name(AttnKind k) {
  switch (k) {
    case AttnKind::Full: return "full";
    case AttnKind::Window: return "window";
    case AttnKind::Chunk: return "chunk";
  }
  return "unknown";
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::SiLU: return "silu";
    case Activation::GeLUTanh: return "gelu_tanh";
    case Activation::GeLU: return "gelu";
  }
  return "unknown";
}

const char* rope_scaling_name(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::None: return "none";
    case RopeScalingType::Linear: return "linear";
    case RopeScalingType::Llama3: return "llama3";
    case RopeScalingType::Yarn: return "yarn";
  }
  return "unknown";
}

}  // namespace ptn

namespace ptn {

std::vector<std::string> canonical_tensor_names(const ModelSpec& s) {
  std::vector<std::string> out = {"token_embd.weight"};
  for (int64_t i = 0; i < s.n_layers; ++i) {
    auto add = [&](const char* w) { out.push_back(layer_tensor(i, w)); };
    add("attn_norm.weight");
    add("attn_q.weight");
    add("attn_k.weight");
    add("attn_v.weight");
    if (s.attn_bias) { add("attn_q.bias"); add("attn_k.bias"); add("attn_v.bias"); }
    if (s.qk_norm) { add("attn_q_norm.weight"); add("attn_k_norm.weight"); }
    add("attn_output.weight");
    if (s.sandwich_norms) add("post_attention_norm.weight");
    add("ffn_norm.weight");
    add("ffn_gate.weight");
    add("ffn_up.weight");
    add("ffn_down.weight");
    if (s.sandwich_norms) add("post_ffw_norm.weight");
  }
  out.push_back("output_norm.weight");
  if (!s.tie_word_embeddings) out.push_back("output.weight");
  return out;
}

bool is_vector_tensor(const std::string& name) {
  auto ends = [&](const char* suf) {
    size_t n = std::char_traits<char>::length(suf);
    return name.size() >= n && name.compare(name.size() - n, n, suf) == 0;
  };
  return ends("norm.weight") || ends(".bias");
}

std::vector<int64_t> canonical_tensor_shape(const ModelSpec& s, const std::string& name) {
  const int64_t H = s.hidden_size, q = s.n_heads * s.head_dim, kv = s.n_kv_heads * s.head_dim, F = s.intermediate_size;
  if (name == "token_embd.weight" || name == "output.weight") return {s.vocab_size, H};
  if (name == "output_norm.weight") return {H};
  if (name.rfind("blk.", 0) != 0) return {};
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos) return {};
  const std::string w = name.substr(dot + 1);
  if (w == "attn_norm.weight" || w == "ffn_norm.weight" || w == "post_attention_norm.weight" || w == "post_ffw_norm.weight") return {H};
  if (w == "attn_q.weight") return {q, H};
  if (w == "attn_k.weight" || w == "attn_v.weight") return {kv, H};
  if (w == "attn_output.weight") return {H, q};
  if (w == "ffn_gate.weight" || w == "ffn_up.weight") return {F, H};
  if (w == "ffn_down.weight") return {H, F};
  if (w == "attn_q.bias") return {q};
  if (w == "attn_k.bias" || w == "attn_v.bias") return {kv};
  if (w == "attn_q_norm.weight" || w == "attn_k_norm.weight") return {s.head_dim};
  return {};
}

}  // namespace ptn
