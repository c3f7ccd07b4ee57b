#include "runtime/manifest.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "core/json_number.h"

namespace ptn {

using json = nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& where, const std::string& field, const std::string& what) {
  fail(ErrorKind::Corrupt, where + ": manifest field '" + field + "'", what);
}

// An integer of type I from a JSON number, only when it is one and in I's range.
template <class I>
I json_int(const json& v, const std::string& where, const char* key) {
  if (auto x = json_integer<I>(v)) return *x;
  bad(where, key, v.is_number() ? "integer out of range: " + v.dump() : "has the wrong type");
}

template <class T>
T get(const json& j, const char* key, const std::string& where, T def) {
  if (!j.contains(key)) return def;
  const json& v = j.at(key);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    return json_int<T>(v, where, key);
  } else if constexpr (std::is_same_v<T, std::vector<int32_t>>) {
    if (!v.is_array()) bad(where, key, "has the wrong type");
    T out;
    out.reserve(v.size());
    for (const auto& e : v) out.push_back(json_int<int32_t>(e, where, key));
    return out;
  } else {
    if constexpr (std::is_floating_point_v<T>) {  // a double beyond float's range converts with UB
      if (v.is_number() && !json_real<T>(v)) bad(where, key, "number out of range: " + v.dump());
    }
    try {
      return v.get<T>();
    } catch (const json::exception&) {
      bad(where, key, "has the wrong type");
    }
  }
}

int64_t get_count(const json& j, const char* key, const std::string& where, int64_t lo, int64_t hi) {
  int64_t v = get<int64_t>(j, key, where, 0);
  if (v < lo || v > hi)
    bad(where, key, "value " + std::to_string(v) + " outside " + std::to_string(lo) + ".." + std::to_string(hi));
  return v;
}

AttnKind kind_from(const std::string& s, const std::string& where) {
  if (s == "full") return AttnKind::Full;
  if (s == "window") return AttnKind::Window;
  if (s == "chunk") return AttnKind::Chunk;
  bad(where, "kind", "unknown attention policy '" + s + "'");
}

}  // namespace

json spec_to_json(const ModelSpec& s) {
  json layers = json::array();
  for (const auto& l : s.layers) {
    layers.push_back({{"kind", attn_kind_name(l.kind)}, {"span", l.span}, {"use_rope", l.use_rope}, {"rope_theta", l.rope_theta}});
    if (l.moe) layers.back()["moe"] = true;  // only when set: dense files keep their bytes
  }
  json j = {{"family", s.family},
          {"architecture", s.architecture},
          {"vocab_size", s.vocab_size},
          {"hidden_size", s.hidden_size},
          {"intermediate_size", s.intermediate_size},
          {"n_layers", s.n_layers},
          {"n_heads", s.n_heads},
          {"n_kv_heads", s.n_kv_heads},
          {"head_dim", s.head_dim},
          {"max_position_embeddings", s.max_position_embeddings},
          {"norm_eps", s.norm_eps},
          {"norm_weight_plus_one", s.norm_weight_plus_one},
          {"activation", activation_name(s.activation)},
          {"rope_theta", s.rope_theta},
          {"rope_dim", s.rope_dim},
          {"rope_scaling", rope_scaling_name(s.rope_scaling.type)},
          {"rope_factor", s.rope_scaling.factor},
          {"attn_scale", s.attn_scale},
          {"attn_logit_softcap", s.attn_logit_softcap},
          {"final_logit_softcap", s.final_logit_softcap},
          {"embed_scale", s.embed_scale},
          {"tie_word_embeddings", s.tie_word_embeddings},
          {"attn_bias", s.attn_bias},
          {"qk_norm", s.qk_norm},
          {"qk_norm_full", s.qk_norm_full},
          {"sandwich_norms", s.sandwich_norms},
          {"layers", layers}};
  // Written only when set, so that files without them keep their bytes.
  if (s.attn_output_bias) j["attn_output_bias"] = true;
  if (s.mlp_bias) j["mlp_bias"] = true;
  if (s.attn_sinks) j["attn_sinks"] = true;
  if (!s.pre_norms) j["pre_norms"] = false;
  if (s.layer_norm) j["layer_norm"] = true;
  if (s.norm_bias) j["norm_bias"] = true;
  if (s.parallel_residual) j["parallel_residual"] = true;
  if (s.parallel_ffn_norm) j["parallel_ffn_norm"] = true;
  if (s.plain_mlp) j["plain_mlp"] = true;
  if (s.rope_interleaved) j["rope_interleaved"] = true;
  if (s.output_bias) j["output_bias"] = true;
  if (s.residual_scale != 1.0f) j["residual_scale"] = s.residual_scale;
  if (s.logit_scale != 1.0f) j["logit_scale"] = s.logit_scale;
  if (s.n_experts > 0) {
    j["experts"] = s.n_experts;
    j["experts_used"] = s.n_experts_used;
    j["expert_ffn"] = s.expert_ffn_size;
    j["norm_topk_prob"] = s.norm_topk_prob;
    if (s.shared_expert_ffn_size > 0) j["shared_expert_ffn"] = s.shared_expert_ffn_size;
    if (s.expert_bias) j["expert_bias"] = true;
    if (s.expert_swiglu_limit > 0) j["expert_swiglu_limit"] = s.expert_swiglu_limit;
    if (s.expert_sigmoid) j["expert_scoring"] = "sigmoid";
    if (s.expert_weight_input) j["expert_weight_input"] = true;
    if (s.shared_expert_ffn_size > 0 && !s.shared_expert_gate) j["shared_expert_gate"] = false;
    if (s.expert_routed_scale != 1.0f) j["expert_routed_scale"] = s.expert_routed_scale;
    if (s.expert_selection_bias) j["expert_selection_bias"] = true;
    if (s.expert_groups > 0) {
      j["expert_groups"] = s.expert_groups;
      j["expert_groups_used"] = s.expert_groups_used;
      j["expert_group_score"] = s.expert_group_top2 ? "top2_sum" : "max";
    }
  }
  if (s.kv_lora_rank > 0) {
    j["kv_lora_rank"] = s.kv_lora_rank;
    if (s.q_lora_rank > 0) j["q_lora_rank"] = s.q_lora_rank;
    j["qk_nope_dim"] = s.qk_nope_dim;
    j["v_head_dim"] = s.v_head_dim;
  }
  return j;
}

ModelSpec spec_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) bad(where, "model", "is not an object");
  ModelSpec s;
  s.family = get<std::string>(j, "family", where, "");
  s.architecture = get<std::string>(j, "architecture", where, "");
  const int64_t big = int64_t{1} << 31;
  s.vocab_size = get_count(j, "vocab_size", where, 1, big);
  s.hidden_size = get_count(j, "hidden_size", where, 1, big);
  s.intermediate_size = get_count(j, "intermediate_size", where, 1, big);
  s.n_layers = get_count(j, "n_layers", where, 1, 4096);
  s.n_heads = get_count(j, "n_heads", where, 1, 65536);
  s.n_kv_heads = get_count(j, "n_kv_heads", where, 1, 65536);
  s.head_dim = get_count(j, "head_dim", where, 1, 65536);
  s.max_position_embeddings = get_count(j, "max_position_embeddings", where, 0, big);
  s.norm_eps = get<float>(j, "norm_eps", where, 1e-5f);
  s.norm_weight_plus_one = get<bool>(j, "norm_weight_plus_one", where, false);
  std::string act = get<std::string>(j, "activation", where, "silu");
  s.activation = act == "gelu_tanh" ? Activation::GeLUTanh : act == "gelu" ? Activation::GeLU : Activation::SiLU;
  s.rope_theta = get<float>(j, "rope_theta", where, 10000.f);
  s.rope_dim = get_count(j, "rope_dim", where, 0, 65536);
  std::string rs = get<std::string>(j, "rope_scaling", where, "none");
  s.rope_scaling.type = rs == "linear" ? RopeScalingType::Linear
                        : rs == "llama3" ? RopeScalingType::Llama3
                        : rs == "yarn"   ? RopeScalingType::Yarn
                        : rs == "longrope" ? RopeScalingType::LongRope
                                         : RopeScalingType::None;
  s.rope_scaling.factor = get<float>(j, "rope_factor", where, 1.f);
  s.attn_scale = get<float>(j, "attn_scale", where, 0.f);
  s.attn_logit_softcap = get<float>(j, "attn_logit_softcap", where, 0.f);
  s.final_logit_softcap = get<float>(j, "final_logit_softcap", where, 0.f);
  s.embed_scale = get<float>(j, "embed_scale", where, 1.f);
  s.tie_word_embeddings = get<bool>(j, "tie_word_embeddings", where, false);
  s.attn_bias = get<bool>(j, "attn_bias", where, false);
  s.attn_output_bias = get<bool>(j, "attn_output_bias", where, false);
  s.mlp_bias = get<bool>(j, "mlp_bias", where, false);
  s.attn_sinks = get<bool>(j, "attn_sinks", where, false);
  s.qk_norm = get<bool>(j, "qk_norm", where, false);
  s.qk_norm_full = get<bool>(j, "qk_norm_full", where, false);
  s.sandwich_norms = get<bool>(j, "sandwich_norms", where, false);
  s.pre_norms = get<bool>(j, "pre_norms", where, true);
  s.layer_norm = get<bool>(j, "layer_norm", where, false);
  s.norm_bias = get<bool>(j, "norm_bias", where, false);
  s.parallel_residual = get<bool>(j, "parallel_residual", where, false);
  s.parallel_ffn_norm = get<bool>(j, "parallel_ffn_norm", where, false);
  if (s.parallel_ffn_norm && !s.parallel_residual) bad(where, "model.parallel_ffn_norm", "true needs parallel_residual");
  s.plain_mlp = get<bool>(j, "plain_mlp", where, false);
  s.rope_interleaved = get<bool>(j, "rope_interleaved", where, false);
  s.output_bias = get<bool>(j, "output_bias", where, false);
  if (s.norm_bias && !s.layer_norm) bad(where, "model.norm_bias", "true needs layer_norm (RMSNorm has no bias)");
  if (s.parallel_residual && (!s.pre_norms || s.sandwich_norms)) bad(where, "model.parallel_residual", "true needs pre-norms and no sandwich norms");
  s.residual_scale = get<float>(j, "residual_scale", where, 1.f);
  s.logit_scale = get<float>(j, "logit_scale", where, 1.f);
  for (const auto& [key, v] : {std::pair<const char*, float>{"residual_scale", s.residual_scale}, {"logit_scale", s.logit_scale}})
    if (!(v > 0) || !std::isfinite(v)) bad(where, std::string("model.") + key, "must be finite and positive");
  if (!s.pre_norms && !s.sandwich_norms) bad(where, "model.pre_norms", "false needs sandwich_norms (a layer without any norm)");
  s.n_experts = get_count(j, "experts", where, 0, 1024);
  if (s.n_experts > 0) {
    s.n_experts_used = get_count(j, "experts_used", where, 1, s.n_experts);
    s.expert_ffn_size = get_count(j, "expert_ffn", where, 1, big);
    s.norm_topk_prob = get<bool>(j, "norm_topk_prob", where, false);
    s.shared_expert_ffn_size = get_count(j, "shared_expert_ffn", where, 0, big);
    s.expert_bias = get<bool>(j, "expert_bias", where, false);
    s.expert_swiglu_limit = get<float>(j, "expert_swiglu_limit", where, 0.f);
    const std::string scoring = get<std::string>(j, "expert_scoring", where, "softmax");
    if (scoring != "softmax" && scoring != "sigmoid") bad(where, "model.expert_scoring", "must be \"softmax\" or \"sigmoid\", got '" + scoring + "'");
    s.expert_sigmoid = scoring == "sigmoid";
    s.expert_weight_input = get<bool>(j, "expert_weight_input", where, false);
    s.shared_expert_gate = get<bool>(j, "shared_expert_gate", where, true);
    if (!(s.expert_swiglu_limit >= 0) || !std::isfinite(s.expert_swiglu_limit))
      bad(where, "model.expert_swiglu_limit", "must be finite and >= 0");
    s.expert_routed_scale = get<float>(j, "expert_routed_scale", where, 1.f);
    if (!(s.expert_routed_scale > 0) || !std::isfinite(s.expert_routed_scale)) bad(where, "model.expert_routed_scale", "must be finite and positive");
    s.expert_selection_bias = get<bool>(j, "expert_selection_bias", where, false);
    s.expert_groups = get_count(j, "expert_groups", where, 0, s.n_experts);
    if (s.expert_groups > 0) {
      s.expert_groups_used = get_count(j, "expert_groups_used", where, 1, s.expert_groups);
      const std::string gs = get<std::string>(j, "expert_group_score", where, "max");
      if (gs != "max" && gs != "top2_sum") bad(where, "model.expert_group_score", "must be \"max\" or \"top2_sum\", got '" + gs + "'");
      s.expert_group_top2 = gs == "top2_sum";
    }
  }
  s.kv_lora_rank = get_count(j, "kv_lora_rank", where, 0, 65536);
  if (s.kv_lora_rank > 0) {
    s.q_lora_rank = get_count(j, "q_lora_rank", where, 0, 65536);
    s.qk_nope_dim = get_count(j, "qk_nope_dim", where, 1, 65536);
    s.v_head_dim = get_count(j, "v_head_dim", where, 1, 65536);
  }
  if (!j.contains("layers") || !j["layers"].is_array() || static_cast<int64_t>(j["layers"].size()) != s.n_layers)
    bad(where, "model.layers", "must list one entry per layer");
  for (const auto& l : j["layers"]) {
    LayerAttention la;
    la.kind = kind_from(get<std::string>(l, "kind", where, "full"), where);
    la.span = get_count(l, "span", where, 0, big);
    la.use_rope = get<bool>(l, "use_rope", where, true);
    la.rope_theta = get<float>(l, "rope_theta", where, 0.f);
    la.moe = get<bool>(l, "moe", where, false);
    if (la.moe && s.n_experts == 0) bad(where, "model.layers.moe", "a layer of experts in a model without model.experts");
    s.layers.push_back(la);
  }
  return s;
}

json cache_spec_to_json(const CacheSpec& c) {
  json layers = json::array();
  for (const auto& l : c.layers)
    layers.push_back({{"kv_heads", l.n_kv_heads}, {"head_dim_k", l.head_dim_k}, {"head_dim_v", l.head_dim_v},
                      {"policy", attn_kind_name(l.kind)}, {"span", l.span}});
  for (size_t i = 0; i < c.layers.size(); ++i)
    if (c.layers[i].sinks) layers[i]["sinks"] = true;  // written only when used: older programs stay byte-identical
  for (size_t i = 0; i < c.layers.size(); ++i)
    if (c.layers[i].v_in_k) layers[i]["v_in_k"] = true;
  return {{"layers", layers}, {"max_positions", c.max_positions}};
}

CacheSpec cache_spec_from_json(const json& j, const std::string& where) {
  if (!j.is_object() || !j.contains("layers") || !j["layers"].is_array()) bad(where, "cache", "missing layers");
  CacheSpec c;
  c.max_positions = get_count(j, "max_positions", where, 0, int64_t{1} << 31);
  if (j["layers"].size() > 4096) bad(where, "cache.layers", "too many layers");
  for (const auto& l : j["layers"]) {
    LayerCacheSpec s;
    s.n_kv_heads = get_count(l, "kv_heads", where, 1, 65536);
    s.head_dim_k = get_count(l, "head_dim_k", where, 1, 65536);
    s.head_dim_v = get_count(l, "head_dim_v", where, 1, 65536);
    s.kind = kind_from(get<std::string>(l, "policy", where, "full"), where);
    s.span = get_count(l, "span", where, 0, int64_t{1} << 31);
    if (s.kind != AttnKind::Full && s.span < 1) bad(where, "cache.layers.span", "window/chunk needs a span >= 1");
    s.sinks = get<bool>(l, "sinks", where, false);
    s.v_in_k = get<bool>(l, "v_in_k", where, false);
    if (s.v_in_k && s.head_dim_v > s.head_dim_k) bad(where, "cache.layers.v_in_k", "V as a prefix of K needs head_dim_v <= head_dim_k");
    c.layers.push_back(s);
  }
  return c;
}

CacheSpec cache_spec_from_model(const ModelSpec& s) {
  CacheSpec c;
  c.max_positions = s.max_position_embeddings;
  // MLA (DeepSeek): one cached "head" per token, the latent and the RoPE key as K, the latent as V.
  const bool mla = s.kv_lora_rank > 0;
  const int64_t hkv = mla ? 1 : s.n_kv_heads, dk = mla ? s.kv_lora_rank + s.rope_dim : s.head_dim, dv = mla ? s.kv_lora_rank : s.head_dim;
  for (const auto& l : s.layers) c.layers.push_back({hkv, dk, dv, l.kind, l.span, s.attn_sinks, mla});
  return c;
}

void pack_strings(const std::vector<std::string>& strs, const std::string& name, std::map<std::string, Tensor>& out) {
  size_t total = 0;
  for (const auto& s : strs) total += s.size();
  Tensor bytes = Tensor::zeros(DType::I8, {static_cast<int64_t>(total)});
  Tensor offs = Tensor::zeros(DType::I64, {static_cast<int64_t>(strs.size() + 1)});
  int64_t* o = offs.data_as<int64_t>();
  char* b = bytes.data_as<char>();
  size_t pos = 0;
  for (size_t i = 0; i < strs.size(); ++i) {
    o[i] = static_cast<int64_t>(pos);
    if (!strs[i].empty()) std::memcpy(b + pos, strs[i].data(), strs[i].size());
    pos += strs[i].size();
  }
  o[strs.size()] = static_cast<int64_t>(pos);
  out[name + ".bytes"] = bytes;
  out[name + ".offsets"] = offs;
}

std::vector<std::string> unpack_strings(const std::map<std::string, Tensor>& tensors, const std::string& name,
                                        const std::string& where) {
  auto ib = tensors.find(name + ".bytes");
  auto io = tensors.find(name + ".offsets");
  if (ib == tensors.end() || io == tensors.end()) bad(where, name, "string tensors missing");
  const Tensor& b = ib->second;
  const Tensor& o = io->second;
  if (b.dtype() != DType::I8 || b.ndim() != 1 || o.dtype() != DType::I64 || o.ndim() != 1 || o.dim(0) < 1)
    bad(where, name, "string tensors have the wrong type or shape");
  const int64_t n = o.dim(0) - 1;
  const int64_t* off = o.data_as<int64_t>();
  const char* bytes = b.data_as<char>();
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (off[i] < 0 || off[i + 1] < off[i] || off[i + 1] > b.dim(0))
      bad(where, name, "string " + std::to_string(i) + " has bad offsets");
    out.emplace_back(bytes + off[i], static_cast<size_t>(off[i + 1] - off[i]));
  }
  return out;
}

json tokenizer_to_manifest(const TokenizerSpec& t, std::map<std::string, Tensor>& tensors) {
  pack_strings(t.tokens, "tokenizer.tokens", tensors);
  if (!t.merges.empty()) pack_strings(t.merges, "tokenizer.merges", tensors);
  if (!t.scores.empty()) {
    Tensor s = Tensor::zeros(DType::F32, {static_cast<int64_t>(t.scores.size())});
    std::memcpy(s.data(), t.scores.data(), t.scores.size() * sizeof(float));
    tensors["tokenizer.scores"] = s;
  }
  if (!t.token_types.empty()) {
    Tensor s = Tensor::zeros(DType::I32, {static_cast<int64_t>(t.token_types.size())});
    for (size_t i = 0; i < t.token_types.size(); ++i) s.data_as<int32_t>()[i] = static_cast<int32_t>(t.token_types[i]);
    tensors["tokenizer.token_types"] = s;
  }
  pack_strings(t.pre_split_regexes, "tokenizer.pre_split", tensors);
  pack_strings({t.chat_template, t.bos_token, t.eos_token, t.pre_tokenizer, t.normalizer}, "tokenizer.text", tensors);
  json j = {{"kind", t.kind == TokenizerKind::SentencePiece ? "spm" : t.kind == TokenizerKind::WordPiece ? "wordpiece" : "bpe"},
            {"add_bos", t.add_bos},
            {"add_eos", t.add_eos},
            {"add_space_prefix", t.add_space_prefix},
            {"byte_fallback", t.byte_fallback},
            {"ignore_merges", t.ignore_merges},
            {"pre_split_explicit", t.pre_split_explicit},
            {"bpe_add_prefix_space", t.bpe_add_prefix_space},
            {"space_prefix_first_only", t.space_prefix_first_only},
            {"lstrip_ids", t.lstrip_ids},
            {"rstrip_ids", t.rstrip_ids},
            {"extra_eos_ids", t.extra_eos_ids}};
  auto opt = [&](const char* k, const std::optional<int32_t>& v) {
    if (v) j[k] = *v;
  };
  opt("bos_id", t.bos_id);
  opt("eos_id", t.eos_id);
  opt("unk_id", t.unk_id);
  opt("pad_id", t.pad_id);
  opt("eot_id", t.eot_id);
  return j;
}

TokenizerSpec tokenizer_from_manifest(const json& j, const std::map<std::string, Tensor>& tensors,
                                      const std::string& where) {
  if (!j.is_object()) bad(where, "tokenizer", "is not an object");
  TokenizerSpec t;
  const std::string kind = get<std::string>(j, "kind", where, "spm");
  if (kind == "spm") t.kind = TokenizerKind::SentencePiece;
  else if (kind == "bpe") t.kind = TokenizerKind::ByteLevelBPE;
  else if (kind == "wordpiece") t.kind = TokenizerKind::WordPiece;
  else bad(where, "tokenizer.kind", "unknown tokenizer kind '" + kind + "'");
  t.tokens = unpack_strings(tensors, "tokenizer.tokens", where);
  if (tensors.count("tokenizer.merges.bytes")) t.merges = unpack_strings(tensors, "tokenizer.merges", where);
  const int64_t V = static_cast<int64_t>(t.tokens.size());
  if (auto it = tensors.find("tokenizer.scores"); it != tensors.end()) {
    if (it->second.dtype() != DType::F32 || it->second.numel() != V) bad(where, "tokenizer.scores", "wrong size");
    t.scores.assign(it->second.data_as<float>(), it->second.data_as<float>() + V);
  }
  if (auto it = tensors.find("tokenizer.token_types"); it != tensors.end()) {
    if (it->second.dtype() != DType::I32 || it->second.numel() != V) bad(where, "tokenizer.token_types", "wrong size");
    for (int64_t i = 0; i < V; ++i) t.token_types.push_back(static_cast<TokenType>(it->second.data_as<int32_t>()[i]));
  }
  t.pre_split_regexes = unpack_strings(tensors, "tokenizer.pre_split", where);
  auto text = unpack_strings(tensors, "tokenizer.text", where);
  if (text.size() != 5) bad(where, "tokenizer.text", "expected 5 strings");
  t.chat_template = text[0];
  t.bos_token = text[1];
  t.eos_token = text[2];
  t.pre_tokenizer = text[3];
  t.normalizer = text[4];
  t.add_bos = get<bool>(j, "add_bos", where, false);
  t.add_eos = get<bool>(j, "add_eos", where, false);
  t.add_space_prefix = get<bool>(j, "add_space_prefix", where, true);
  t.byte_fallback = get<bool>(j, "byte_fallback", where, true);
  t.ignore_merges = get<bool>(j, "ignore_merges", where, false);
  t.pre_split_explicit = get<bool>(j, "pre_split_explicit", where, false);
  t.bpe_add_prefix_space = get<bool>(j, "bpe_add_prefix_space", where, false);
  t.space_prefix_first_only = get<bool>(j, "space_prefix_first_only", where, false);
  t.extra_eos_ids = get<std::vector<int32_t>>(j, "extra_eos_ids", where, {});
  t.lstrip_ids = get<std::vector<int32_t>>(j, "lstrip_ids", where, {});
  t.rstrip_ids = get<std::vector<int32_t>>(j, "rstrip_ids", where, {});
  auto id = [&](const char* k) -> std::optional<int32_t> {
    if (!j.contains(k)) return std::nullopt;
    int64_t v = get<int64_t>(j, k, where, -1);
    if (v < 0 || v >= V) bad(where, std::string("tokenizer.") + k, "token id out of range");
    return static_cast<int32_t>(v);
  };
  t.bos_id = id("bos_id");
  t.eos_id = id("eos_id");
  t.unk_id = id("unk_id");
  t.pad_id = id("pad_id");
  t.eot_id = id("eot_id");
  for (const auto* ids : {&t.extra_eos_ids, &t.lstrip_ids, &t.rstrip_ids})
    for (int32_t e : *ids)
      if (e < 0 || e >= V) bad(where, "tokenizer ids", "token id out of range");
  return t;
}

bool pooling_known(const std::string& name) { return name == "last" || name == "mean" || name == "cls"; }

json meta_to_json(const ProgramMeta& m, std::map<std::string, Tensor>& extra) {
  json j;
  j["schema_version"] = kProgramSchemaVersion;
  j["model"] = spec_to_json(m.spec);
  j["graph"] = m.graph.to_json();
  j["cache"] = cache_spec_to_json(m.cache_spec);
  j["max_seq_length"] = m.max_seq_length;
  j["cache_mode"] = m.static_cache ? "static" : "offgraph";
  if (m.static_cache) {
    j["static_context"] = m.static_context;
    j["static_cache_dtype"] = dtype_name(m.static_cache_dtype);
  }
  if (m.tokenizer) j["tokenizer"] = tokenizer_to_manifest(*m.tokenizer, extra);
  json samples = json::array();
  for (const auto& s : m.samples)
    samples.push_back({{"prompt", s.prompt}, {"decode", s.decode}, {"logits", s.logits_tensor}});
  j["golden_samples"] = samples;
  if (!m.embedding.empty()) {  // written only when the model says something
    json e = json::object();
    if (!m.embedding.pooling.empty()) e["pooling"] = m.embedding.pooling;
    if (m.embedding.matryoshka) e["matryoshka"] = true;
    if (!m.embedding.matryoshka_dimensions.empty()) e["matryoshka_dimensions"] = m.embedding.matryoshka_dimensions;
    j["embedding"] = e;
  }
  j["provenance"] = m.provenance;
  // Paths and command lines in the provenance (and names read from a GGUF) need not be UTF-8,
  // which JSON cannot store: invalid bytes become U+FFFD rather than failing the whole export.
  return json::parse(j.dump(-1, ' ', false, json::error_handler_t::replace));
}

ProgramMeta meta_from_json(const json& j, const std::map<std::string, Tensor>& tensors, const std::string& where) {
  if (!j.is_object()) bad(where, "", "manifest is not an object");
  ProgramMeta m;
  int64_t sv = get<int64_t>(j, "schema_version", where, 0);
  if (sv < 1) bad(where, "schema_version", "missing");
  if (sv > kProgramSchemaVersion)
    fail(ErrorKind::Unsupported, where,
         "program schema version " + std::to_string(sv) + " is newer than this ptn understands (" +
             std::to_string(kProgramSchemaVersion) + "); upgrade ptn");
  if (!j.contains("model")) bad(where, "model", "missing");
  m.spec = spec_from_json(j["model"], where);
  if (!j.contains("graph")) bad(where, "graph", "missing");
  m.graph = Graph::from_json(j["graph"], where);
  if (!j.contains("cache")) bad(where, "cache", "missing");
  m.cache_spec = cache_spec_from_json(j["cache"], where);
  if (static_cast<int64_t>(m.cache_spec.layers.size()) != m.spec.n_layers)
    bad(where, "cache.layers", "count differs from the model's layers");
  m.max_seq_length = get_count(j, "max_seq_length", where, 1, int64_t{1} << 20);
  std::string mode = get<std::string>(j, "cache_mode", where, "offgraph");
  if (mode != "offgraph" && mode != "static") bad(where, "cache_mode", "unknown mode '" + mode + "'");
  m.static_cache = mode == "static";
  if (m.static_cache) {
    m.static_context = get_count(j, "static_context", where, 1, int64_t{1} << 24);
    auto dt = dtype_from_name(get<std::string>(j, "static_cache_dtype", where, "f32"));
    if (!dt || (*dt != DType::F32 && *dt != DType::F16 && *dt != DType::BF16))
      bad(where, "static_cache_dtype", "must be f32, f16 or bf16");
    m.static_cache_dtype = *dt;
  }
  if (j.contains("tokenizer")) m.tokenizer = tokenizer_from_manifest(j["tokenizer"], tensors, where);
  if (j.contains("golden_samples")) {
    const auto& gs = j["golden_samples"];
    if (!gs.is_array() || gs.size() > 1024) bad(where, "golden_samples", "must be an array of at most 1024");
    for (const auto& s : gs) {
      GoldenSample g;
      g.prompt = get<std::vector<int32_t>>(s, "prompt", where, {});
      g.decode = get<std::vector<int32_t>>(s, "decode", where, {});
      g.logits_tensor = get<std::string>(s, "logits", where, "");
      if (g.prompt.empty()) bad(where, "golden_samples.prompt", "empty");
      for (int32_t id : g.prompt)
        if (id < 0 || id >= m.spec.vocab_size) bad(where, "golden_samples.prompt", "token id out of range");
      for (int32_t id : g.decode)
        if (id < 0 || id >= m.spec.vocab_size) bad(where, "golden_samples.decode", "token id out of range");
      auto it = tensors.find(g.logits_tensor);
      if (it == tensors.end()) bad(where, "golden_samples.logits", "tensor '" + g.logits_tensor + "' missing");
      const Tensor& t = it->second;
      if (t.dtype() != DType::F32 || t.ndim() != 2 || t.dim(0) != static_cast<int64_t>(1 + g.decode.size()) ||
          t.dim(1) != m.spec.vocab_size)
        bad(where, "golden_samples.logits", "tensor '" + g.logits_tensor + "' has the wrong shape " + t.describe());
      m.samples.push_back(std::move(g));
    }
  }
  if (j.contains("embedding")) {
    const json& e = j["embedding"];
    if (!e.is_object()) bad(where, "embedding", "is not an object");
    EmbeddingInfo& info = m.embedding;
    const std::string ew = where + " (embedding)";
    info.pooling = get<std::string>(e, "pooling", ew, "");
    if (e.contains("pooling") && !pooling_known(info.pooling))
      bad(where, "embedding.pooling", "must be \"last\", \"mean\" or \"cls\"");
    info.matryoshka = get<bool>(e, "matryoshka", ew, false);
    if (e.contains("matryoshka_dimensions")) {
      const json& d = e["matryoshka_dimensions"];
      if (!d.is_array() || d.size() > 64) bad(where, "embedding.matryoshka_dimensions", "must be an array of at most 64");
      for (const json& x : d) {
        const int64_t v = json_int<int64_t>(x, where, "embedding.matryoshka_dimensions");
        if (v < 1 || v > m.spec.hidden_size)
          bad(where, "embedding.matryoshka_dimensions",
              "entry " + std::to_string(v) + " outside 1.." + std::to_string(m.spec.hidden_size));
        info.matryoshka_dimensions.push_back(v);
      }
      info.matryoshka = true;
    }
  }
  if (j.contains("provenance")) m.provenance = j["provenance"];
  return m;
}

}  // namespace ptn
