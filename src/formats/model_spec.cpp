#include "formats/model_spec.h"

#include <cstdio>
#include <string>

namespace ptn {

std::string layer_tensor(int64_t layer, const char* what) {
  return "blk." + std::to_string(layer) + "." + what;
}

std::string expert_tensor(int64_t layer, const char* what, int64_t expert, const char* kind) {
  return "blk." + std::to_string(layer) + "." + what + "." + std::to_string(expert) + "." + kind;
}

bool parse_expert_tensor(const std::string& w, std::string* what, int64_t* expert, bool* bias) {
  // "ffn_gate.12.weight" -> ("ffn_gate", 12); "ffn_gate.12.bias" when bias is asked for
  const size_t a = w.find('.');
  const size_t b = a == std::string::npos ? a : w.find('.', a + 1);
  if (b == std::string::npos || b == a + 1 || b - a > 6) return false;
  const bool is_bias = bias != nullptr && w.compare(b, std::string::npos, ".bias") == 0;
  if (!is_bias && w.compare(b, std::string::npos, ".weight") != 0) return false;
  if (bias != nullptr) *bias = is_bias;
  int64_t e = 0;
  for (size_t i = a + 1; i < b; ++i) {
    if (w[i] < '0' || w[i] > '9') return false;
    e = e * 10 + (w[i] - '0');
  }
  *what = w.substr(0, a);
  *expert = e;
  return true;
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
    case RopeScalingType::LongRope: return "longrope";
  }
  return "unknown";
}

}  // namespace ptn

namespace ptn {

std::vector<std::string> canonical_tensor_names(const ModelSpec& s) {
  std::vector<std::string> out = {"token_embd.weight"};
  for (int64_t i = 0; i < s.n_layers; ++i) {
    auto add = [&](const char* w) { out.push_back(layer_tensor(i, w)); };
    if (s.pre_norms) add("attn_norm.weight");
    if (s.pre_norms && s.norm_bias) add("attn_norm.bias");
    if (s.kv_lora_rank > 0) {
      if (s.q_lora_rank > 0) { add("attn_q_a.weight"); add("attn_q_a_norm.weight"); add("attn_q_b.weight"); }
      else add("attn_q.weight");
      add("attn_kv_a_mqa.weight");
      add("attn_kv_a_norm.weight");
      add("attn_k_b.weight");
      add("attn_v_b.weight");
    } else {
      add("attn_q.weight");
      add("attn_k.weight");
      add("attn_v.weight");
    }
    if (s.attn_bias) { add("attn_q.bias"); add("attn_k.bias"); add("attn_v.bias"); }
    if (s.qk_norm) { add("attn_q_norm.weight"); add("attn_k_norm.weight"); }
    add("attn_output.weight");
    if (s.attn_output_bias) add("attn_output.bias");
    if (s.attn_sinks) add("attn_sinks.weight");
    if (s.sandwich_norms) add("post_attention_norm.weight");
    const bool ffn_norm = s.pre_norms && (!s.parallel_residual || s.parallel_ffn_norm);
    if (ffn_norm) add("ffn_norm.weight");
    if (ffn_norm && s.norm_bias) add("ffn_norm.bias");
    if (s.layers.size() == static_cast<size_t>(s.n_layers) && s.layers[static_cast<size_t>(i)].moe) {
      add("ffn_gate_inp.weight");
      if (s.expert_bias) add("ffn_gate_inp.bias");
      if (s.expert_selection_bias) add("exp_probs_b.bias");
      for (int64_t e = 0; e < s.n_experts; ++e)
        for (const char* w : {"ffn_gate", "ffn_up", "ffn_down"}) {
          out.push_back(expert_tensor(i, w, e));
          if (s.expert_bias) out.push_back(expert_tensor(i, w, e, "bias"));
        }
      if (s.shared_expert_ffn_size > 0) {
        if (s.shared_expert_gate) add("ffn_gate_inp_shexp.weight");
        add("ffn_gate_shexp.weight");
        add("ffn_up_shexp.weight");
        add("ffn_down_shexp.weight");
      }
      if (s.sandwich_norms) add("post_ffw_norm.weight");
      continue;
    }
    if (!s.plain_mlp) add("ffn_gate.weight");
    add("ffn_up.weight");
    add("ffn_down.weight");
    if (s.mlp_bias && !s.plain_mlp) add("ffn_gate.bias");
    if (s.mlp_bias) { add("ffn_up.bias"); add("ffn_down.bias"); }
    if (s.sandwich_norms) add("post_ffw_norm.weight");
  }
  out.push_back("output_norm.weight");
  if (s.norm_bias) out.push_back("output_norm.bias");
  if (!s.tie_word_embeddings) out.push_back("output.weight");
  if (s.output_bias) out.push_back("output.bias");
  return out;
}

bool is_vector_tensor(const std::string& name) {
  auto ends = [&](const char* suf) {
    size_t n = std::char_traits<char>::length(suf);
    return name.size() >= n && name.compare(name.size() - n, n, suf) == 0;
  };
  return ends("norm.weight") || ends(".bias") || ends(".attn_sinks.weight");
}

std::vector<int64_t> canonical_tensor_shape(const ModelSpec& s, const std::string& name) {
  const int64_t H = s.hidden_size, q = s.n_heads * s.head_dim, kv = s.n_kv_heads * s.head_dim, F = s.intermediate_size;
  if (name == "token_embd.weight" || name == "output.weight") return {s.vocab_size, H};
  if (name == "output_norm.weight" || (name == "output_norm.bias" && s.norm_bias)) return {H};
  if (name == "output.bias" && s.output_bias) return {s.vocab_size};
  if (name.rfind("blk.", 0) != 0) return {};
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos) return {};
  const std::string w = name.substr(dot + 1);
  if (w == "attn_norm.weight" || w == "ffn_norm.weight" || w == "post_attention_norm.weight" || w == "post_ffw_norm.weight") return {H};
  if ((w == "attn_norm.bias" || w == "ffn_norm.bias") && s.norm_bias) return {H};
  if (s.kv_lora_rank > 0) {  // MLA
    const int64_t L = s.kv_lora_rank, Lq = s.q_lora_rank, R = s.rope_dim, Hq = s.n_heads, V = s.v_head_dim;
    if (w == "attn_q.weight" && Lq == 0) return {q, H};
    if (Lq > 0 && w == "attn_q_a.weight") return {Lq, H};
    if (Lq > 0 && w == "attn_q_a_norm.weight") return {Lq};
    if (Lq > 0 && w == "attn_q_b.weight") return {q, Lq};
    if (w == "attn_kv_a_mqa.weight") return {L + R, H};
    if (w == "attn_kv_a_norm.weight") return {L};
    if (w == "attn_k_b.weight") return {Hq * L, s.qk_nope_dim};
    if (w == "attn_v_b.weight") return {Hq * V, L};
    if (w == "attn_output.weight") return {H, Hq * V};
    if (w == "attn_k.weight" || w == "attn_v.weight") return {};
  }
  if (w == "attn_q.weight") return {q, H};
  if (w == "attn_k.weight" || w == "attn_v.weight") return {kv, H};
  if (w == "attn_output.weight") return {H, q};
  if (w == "ffn_gate.weight" || w == "ffn_up.weight") return {F, H};
  if (w == "ffn_down.weight") return {H, F};
  if (w == "attn_q.bias") return {q};
  if (w == "attn_sinks.weight" && s.attn_sinks) return {s.n_heads};
  if (w == "attn_k.bias" || w == "attn_v.bias") return {kv};
  if (w == "attn_output.bias" || w == "ffn_down.bias") return {H};
  if (w == "ffn_gate.bias" || w == "ffn_up.bias") return {F};
  if (w == "attn_q_norm.weight") return {s.qk_norm_full ? q : s.head_dim};
  if (w == "attn_k_norm.weight") return {s.qk_norm_full ? kv : s.head_dim};
  const int64_t Fe = s.expert_ffn_size, Fs = s.shared_expert_ffn_size;
  if (s.n_experts > 0) {
    if (w == "ffn_gate_inp.weight") return {s.n_experts, H};
    if (w == "ffn_gate_inp.bias" && s.expert_bias) return {s.n_experts};
    if (w == "exp_probs_b.bias" && s.expert_selection_bias) return {s.n_experts};
    std::string what;
    int64_t e = 0;
    bool bias = false;
    if (parse_expert_tensor(w, &what, &e, &bias) && e < s.n_experts && (!bias || s.expert_bias)) {
      if (what == "ffn_gate" || what == "ffn_up") return bias ? std::vector<int64_t>{Fe} : std::vector<int64_t>{Fe, H};
      if (what == "ffn_down") return bias ? std::vector<int64_t>{H} : std::vector<int64_t>{H, Fe};
    }
    if (Fs > 0) {
      if (w == "ffn_gate_inp_shexp.weight" && s.shared_expert_gate) return {1, H};
      if (w == "ffn_gate_shexp.weight" || w == "ffn_up_shexp.weight") return {Fs, H};
      if (w == "ffn_down_shexp.weight") return {H, Fs};
    }
  }
  return {};
}

}  // namespace ptn

namespace ptn {

std::string describe_model_spec(const ModelSpec& s) {
  char b[512];
  std::string o;
  std::snprintf(b, sizeof b, "family %s (%s)\n", s.family.c_str(), s.architecture.c_str());
  o += b;
  std::snprintf(b, sizeof b,
                "vocab %lld, hidden %lld, ffn %lld, layers %lld, heads %lld, kv heads %lld, head dim %lld, max positions %lld\n",
                (long long)s.vocab_size, (long long)s.hidden_size, (long long)s.intermediate_size, (long long)s.n_layers,
                (long long)s.n_heads, (long long)s.n_kv_heads, (long long)s.head_dim, (long long)s.max_position_embeddings);
  o += b;
  std::snprintf(b, sizeof b, "norm eps %g%s, activation %s, rope theta %g, rope dim %lld, rope scaling %s",
                s.norm_eps, s.norm_weight_plus_one ? " (scale 1 + w)" : "", activation_name(s.activation), s.rope_theta,
                (long long)s.rope_dim, rope_scaling_name(s.rope_scaling.type));
  o += b;
  if (s.rope_scaling.type != RopeScalingType::None) {
    std::snprintf(b, sizeof b, " (factor %g, low %g, high %g, original %lld)", s.rope_scaling.factor, s.rope_scaling.low_freq_factor,
                  s.rope_scaling.high_freq_factor, (long long)s.rope_scaling.original_max_position);
    o += b;
    if (s.rope_scaling.type == RopeScalingType::LongRope) {
      std::snprintf(b, sizeof b, " (attention factor %g, %zu frequency divisors)", s.rope_scaling.attn_factor, s.rope_scaling.freq_divisors.size());
      o += b;
    }
    if (s.rope_scaling.type == RopeScalingType::Yarn) {
      std::snprintf(b, sizeof b, " (beta fast %g, slow %g, attention factor %g%s)", s.rope_scaling.beta_fast, s.rope_scaling.beta_slow,
                    s.rope_scaling.attn_factor, s.rope_scaling.yarn_truncate ? "" : ", not truncated");
      o += b;
    }
  }
  o += "\n";
  std::string feats;
  auto feat = [&](bool on, const std::string& what) { if (on) feats += (feats.empty() ? "" : ", ") + what; };
  feat(s.tie_word_embeddings, "tied embeddings");
  feat(s.attn_bias, "q/k/v bias");
  feat(s.attn_output_bias, "o_proj bias");
  feat(s.mlp_bias, "MLP bias");
  feat(s.qk_norm, s.qk_norm_full ? "q/k norm over all heads" : "q/k norm");
  feat(s.qk_l2_norm, "q/k L2 norm");
  feat(s.attn_sinks, "attention sinks");
  feat(s.sandwich_norms && s.pre_norms, "sandwich norms");
  feat(s.layer_norm, s.norm_bias ? "LayerNorm with bias" : "LayerNorm");
  feat(s.parallel_residual, s.parallel_ffn_norm ? "parallel attention and MLP, each on its own norm" : "parallel attention and MLP");
  feat(s.plain_mlp, "MLP without gate");
  feat(s.rope_interleaved, "interleaved RoPE pairs");
  feat(s.output_bias, "output bias");
  feat(!s.pre_norms, "post-norms only");
  feat(s.residual_scale != 1.0f, "residual scale " + std::to_string(s.residual_scale));
  feat(s.logit_scale != 1.0f, "logits / " + std::to_string(s.logit_scale));
  feat(s.attn_scale != 0, "attn scale " + std::to_string(s.attn_scale));
  feat(s.attn_logit_softcap != 0, "attn softcap " + std::to_string(s.attn_logit_softcap));
  feat(s.final_logit_softcap != 0, "final softcap " + std::to_string(s.final_logit_softcap));
  feat(s.embed_scale != 1.0f, "embed scale " + std::to_string(s.embed_scale));
  if (s.kv_lora_rank > 0)
    feat(true, "latent attention (kv rank " + std::to_string(s.kv_lora_rank) +
                   (s.q_lora_rank > 0 ? ", q rank " + std::to_string(s.q_lora_rank) : std::string()) + ", nope " +
                   std::to_string(s.qk_nope_dim) + " + rope " + std::to_string(s.rope_dim) + ", v " + std::to_string(s.v_head_dim) + ")");
  feat(s.attn_temperature_scale != 0, std::string("attn temperature tuning") + (s.attn_temperature_all_layers ? " (every layer)" : ""));
  if (s.n_experts > 0) {
    int64_t moe_layers = 0;
    for (const LayerAttention& l : s.layers) moe_layers += l.moe;
    feat(true, std::to_string(s.n_experts_used) + " of " + std::to_string(s.n_experts) + " experts (ffn " +
                   std::to_string(s.expert_ffn_size) + ") on " + std::to_string(moe_layers) + " layers" +
                   (s.norm_topk_prob ? ", top-k renormalised" : "") +
                   (s.expert_sigmoid ? ", sigmoid scores" : "") + (s.expert_weight_input ? " scaling the expert's input" : "") +
                   (s.shared_expert_ffn_size > 0 ? std::string(s.shared_expert_gate ? ", " : ", ungated ") + "shared expert (ffn " +
                                                       std::to_string(s.shared_expert_ffn_size) + ")"
                                                 : "") +
                   (s.expert_bias ? ", router and expert biases" : "") +
                   (s.expert_selection_bias ? ", selection bias" : "") +
                   (s.expert_groups > 0 ? ", best " + std::to_string(s.expert_groups_used) + " of " + std::to_string(s.expert_groups) + " groups" : "") +
                   (s.expert_routed_scale != 1.0f ? ", weights x " + std::to_string(s.expert_routed_scale) : "") +
                   (s.expert_swiglu_limit > 0 ? ", SwiGLU clamped at " + std::to_string(s.expert_swiglu_limit) : ""));
  }
  o += "features: " + (feats.empty() ? std::string("none") : feats) + "\n";
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const LayerAttention& l = s.layers[i];
    std::snprintf(b, sizeof b, "  layer %zu: %s", i, attn_kind_name(l.kind));
    o += b;
    if (l.kind != AttnKind::Full) o += " " + std::to_string(l.span);
    if (l.moe) o += ", experts";
    if (!l.use_rope) o += ", no rope";
    else {
      std::snprintf(b, sizeof b, ", rope theta %g%s", l.rope_theta, l.rope_scaling || s.rope_scaling.type == RopeScalingType::None ? "" : " (unscaled)");
      o += b;
    }
    o += "\n";
  }
  for (const auto& n : s.source_notes) o += "note: " + n + "\n";
  return o;
}

}  // namespace ptn
