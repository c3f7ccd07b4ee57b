#include "models/decoder.h"

#include <cmath>

#include "core/error.h"
#include "formats/families.h"

namespace ptn {

namespace {

struct Builder {
  const ModelSpec& s;
  const BuildOptions& o;
  Graph g;
  int32_t pos = -1;

  Value act(const std::string& name, int64_t width, int64_t rows = kDimT) {
    return Value{name, ValueKind::Activation, DType::F32, {rows, width}};
  }
  int32_t norm(int32_t x, const std::string& w, int64_t width, const std::string& name, int64_t group = 0,
               int64_t rows = kDimT) {
    return g.add_node(OpType::RMSNorm, {x}, act(name, width, rows), {w},
                      {{"eps", s.norm_eps}, {"plus_one", s.norm_weight_plus_one}, {"group", group ? group : width}});
  }
  // "x.weight" -> "x.bias"
  static std::string bias_of(const std::string& w) { return w.substr(0, w.size() - std::string("weight").size()) + "bias"; }
  // A pre-norm of the residual stream (attn_norm, ffn_norm, output_norm): RMSNorm, or LayerNorm
  // (with its bias when the spec has norm biases).
  int32_t block_norm(int32_t x, const std::string& w, const std::string& name, int64_t rows = kDimT) {
    const int64_t H = s.hidden_size;
    if (!s.layer_norm) return norm(x, w, H, name, 0, rows);
    std::vector<std::string> ws{w};
    if (s.norm_bias) ws.push_back(bias_of(w));
    return g.add_node(OpType::LayerNorm, {x}, act(name, H, rows), ws, {{"eps", s.norm_eps}, {"group", H}});
  }
  int32_t linear(int32_t x, const std::string& w, int64_t out, const std::string& name, bool bias = false,
                 int64_t rows = kDimT) {
    std::vector<std::string> ws{w};
    if (bias) ws.push_back(bias_of(w));
    return g.add_node(OpType::Linear, {x}, act(name, out, rows), ws, {{"out_features", out}});
  }
  // RoPE of `heads` heads of head_dim (0: the spec's), rotating rope_dim of each (0: the spec's).
  int32_t rope(int32_t x, int64_t heads, const LayerAttention& la, const std::string& name, int64_t head_dim = 0,
               int64_t rope_dim = 0) {
    const int64_t D = head_dim > 0 ? head_dim : s.head_dim;
    const float theta = la.rope_theta > 0 ? la.rope_theta : s.rope_theta;
    // Gemma 3 scales only its global layers' RoPE; its local layers keep their own base unscaled.
    const bool scaled = la.rope_scaling;
    const RopeScaling& rs = s.rope_scaling;
    nlohmann::json a = {{"heads", heads},
                        {"head_dim", D},
                        {"rope_dim", rope_dim > 0 ? rope_dim : s.rope_dim > 0 ? s.rope_dim : s.head_dim},
                        {"theta", theta},
                        {"pairing", s.rope_interleaved ? "interleaved" : "half"},
                        {"scaling", scaled ? rope_scaling_name(rs.type) : "none"},
                        {"factor", rs.factor},
                        {"low_freq_factor", rs.low_freq_factor},
                        {"high_freq_factor", rs.high_freq_factor},
                        {"original_max_position", rs.original_max_position},
                        {"beta_fast", rs.beta_fast},
                        {"beta_slow", rs.beta_slow},
                        {"attn_factor", rs.attn_factor}};
    if (scaled && rs.type == RopeScalingType::Yarn && !rs.yarn_truncate) a["truncate"] = false;  // absent: true
    if (scaled && rs.type == RopeScalingType::LongRope) a["freq_divisors"] = rs.freq_divisors;
    return g.add_node(OpType::Rope, {x, pos}, act(name, heads * D), {}, a);
  }
  int32_t slice(int32_t x, int64_t groups, int64_t offset, int64_t width, const std::string& name) {
    return g.add_node(OpType::Slice, {x}, act(name, groups * width), {}, {{"groups", groups}, {"offset", offset}});
  }

  void check_sizes() const {
    if (s.n_layers <= 0 || s.hidden_size <= 0 || s.n_heads <= 0 || s.n_kv_heads <= 0 || s.head_dim <= 0 ||
        s.vocab_size <= 0 || s.intermediate_size <= 0 || static_cast<int64_t>(s.layers.size()) != s.n_layers)
      fail(ErrorKind::InvalidArgument, "graph builder", "model spec has missing or inconsistent sizes");
    if (s.n_heads % s.n_kv_heads != 0)
      fail(ErrorKind::Unsupported, "graph builder",
           "attention heads (" + std::to_string(s.n_heads) + ") not a multiple of kv heads (" +
               std::to_string(s.n_kv_heads) + ")");
    if (!(s.residual_scale > 0) || !std::isfinite(s.residual_scale) || !(s.logit_scale > 0) || !std::isfinite(s.logit_scale))
      fail(ErrorKind::InvalidArgument, "graph builder", "residual and logit scales must be finite and positive");
    if (!s.pre_norms && !s.sandwich_norms)
      fail(ErrorKind::InvalidArgument, "graph builder", "model spec has neither pre-norms nor post-norms");
    if (s.norm_bias && !s.layer_norm) fail(ErrorKind::InvalidArgument, "graph builder", "norm biases need LayerNorm norms");
    if (s.parallel_ffn_norm && !s.parallel_residual)
      fail(ErrorKind::InvalidArgument, "graph builder", "a second parallel norm needs a parallel residual");
    if (s.parallel_residual && (!s.pre_norms || s.sandwich_norms))
      fail(ErrorKind::InvalidArgument, "graph builder", "a parallel residual needs pre-norms and no sandwich norms");
    if (s.plain_mlp && s.activation == Activation::SiLU)
      fail(ErrorKind::Unsupported, "graph builder", "an MLP without a gate runs GELU (tanh or exact), not SiLU");
    if (s.output_bias && s.tie_word_embeddings)
      fail(ErrorKind::InvalidArgument, "graph builder", "an output bias needs an untied output matrix");
    bool any_moe = false;
    for (const LayerAttention& la : s.layers) any_moe = any_moe || la.moe;
    if (any_moe && (s.n_experts < 1 || s.n_experts > 1024 || s.n_experts_used < 1 || s.n_experts_used > s.n_experts ||
                    s.expert_ffn_size < 1 || s.shared_expert_ffn_size < 0))
      fail(ErrorKind::InvalidArgument, "graph builder", "model spec has inconsistent expert counts or sizes");
    if (any_moe && (s.expert_groups < 0 || (s.expert_groups > 0 && (s.n_experts % s.expert_groups != 0 || s.expert_groups_used < 1 ||
                                                                     s.expert_groups_used > s.expert_groups))))
      fail(ErrorKind::InvalidArgument, "graph builder", "expert groups must divide the experts and 1..groups of them be used");
    if (s.kv_lora_rank > 0 && (s.qk_nope_dim < 1 || s.v_head_dim < 1 || s.rope_dim < 2 || s.rope_dim % 2 != 0 ||
                               s.head_dim != s.qk_nope_dim + s.rope_dim || s.q_lora_rank < 0 || s.qk_norm || s.attn_bias ||
                               s.attn_output_bias || s.attn_sinks || !s.pre_norms))
      fail(ErrorKind::InvalidArgument, "graph builder", "latent attention needs nope, rope (even) and value dims, head_dim = nope + rope, and no q/k norms, biases or sinks");
  }

  // Inputs and the (scaled) token embedding; returns the residual stream.
  int32_t embed() {
    g.input_ids = g.add_value(Value{"input_ids", ValueKind::Input, DType::I32, {kDimT}});
    pos = g.cache_position = g.add_value(Value{"cache_position", ValueKind::Input, DType::I32, {kDimT}});
    return g.add_node(OpType::Embedding, {g.input_ids}, act("embed", s.hidden_size), {"token_embd.weight"},
                      {{"scale", s.embed_scale}});
  }

  // Self-attention of layer l on the residual x: norm, q/k/v (biases, q/k norms), RoPE or the
  // NoPE temperature, update_and_attend (or the static cache), output projection (bias), post-norm.
  int32_t attention(int64_t l, int32_t x) {
    // OLMo 2: no pre-norm
    return attend(l, s.pre_norms ? block_norm(x, layer_tensor(l, "attn_norm.weight"), "blk." + std::to_string(l) + ".attn_in") : x);
  }
  // Multi-head latent attention (DeepSeek) of layer l on its (normed) input h, attn_k_b absorbed
  // into the query and attn_v_b applied after attention, so the cache holds per token one
  // "head": K = [norm(latent), rope(k_pe)] (kv_lora_rank + rope_dim), V = norm(latent).
  //   q = attn_q(h) or attn_q_b(norm(attn_q_a(h)))          [T, Hq*(nope+rope)]
  //   q' = [attn_k_b_h^T-applied q_nope_h, rope(q_pe_h)]     per head, [T, Hq*(L+rope)]
  //   o = attn_output(attn_v_b_h . attend(q', K, V)_h)
  int32_t attend_mla(int64_t l, int32_t h) {
    const int64_t H = s.hidden_size, Hq = s.n_heads, L = s.kv_lora_rank, R = s.rope_dim, N = s.qk_nope_dim, V = s.v_head_dim;
    const LayerAttention& la = s.layers[l];
    auto t = [&](const char* what) { return layer_tensor(l, what); };
    auto nm = [&](const char* what) { return "blk." + std::to_string(l) + "." + what; };
    // The two products of h next to each other, so that the executor runs them as one.
    int32_t q = s.q_lora_rank > 0 ? linear(h, t("attn_q_a.weight"), s.q_lora_rank, nm("q_a"))
                                  : linear(h, t("attn_q.weight"), Hq * (N + R), nm("q"));
    int32_t kv = linear(h, t("attn_kv_a_mqa.weight"), L + R, nm("kv_a"));
    if (s.q_lora_rank > 0) {
      q = norm(q, t("attn_q_a_norm.weight"), s.q_lora_rank, nm("q_a_normed"));
      q = linear(q, t("attn_q_b.weight"), Hq * (N + R), nm("q"));
    }
    int32_t q_nope = slice(q, Hq, 0, N, nm("q_nope"));
    int32_t q_pe = rope(slice(q, Hq, N, R, nm("q_pe")), Hq, la, nm("q_pe_rope"), R, R);
    int32_t q_lat = g.add_node(OpType::HeadLinear, {q_nope}, act(nm("q_latent"), Hq * L), {t("attn_k_b.weight")}, {{"groups", Hq}});
    int32_t qf = g.add_node(OpType::Concat, {q_lat, q_pe}, act(nm("q_mla"), Hq * (L + R)), {}, {{"groups", Hq}});
    int32_t c = norm(slice(kv, 1, 0, L, nm("kv_latent")), t("attn_kv_a_norm.weight"), L, nm("kv_latent_normed"));
    int32_t k_pe = rope(slice(kv, 1, L, R, nm("k_pe")), 1, la, nm("k_pe_rope"), R, R);
    int32_t k = g.add_node(OpType::Concat, {c, k_pe}, act(nm("k_mla"), L + R), {}, {{"groups", 1}});
    const float scale = s.attn_scale > 0 ? s.attn_scale : 1.0f / std::sqrt(static_cast<float>(N + R));
    nlohmann::json aa = {{"layer", l}, {"heads", Hq}, {"kv_heads", 1}, {"head_dim", L + R}, {"head_dim_v", L}, {"scale", scale},
                         {"softcap", s.attn_logit_softcap}};
    int32_t a;
    if (!o.static_cache) {
      a = g.add_node(OpType::UpdateAndAttend, {qf, k, c, pos}, act(nm("attn_latent"), Hq * L), {}, aa);
    } else {
      int32_t kbi = g.add_value(Value{nm("k_cache"), ValueKind::Buffer, o.static_cache_dtype, {o.max_context_length, L + R}});
      int32_t vbi = g.add_value(Value{nm("v_cache"), ValueKind::Buffer, o.static_cache_dtype, {o.max_context_length, L}});
      g.add_node(OpType::CacheWrite, {kbi, k, pos}, Value{}, {}, {{"layer", l}});
      g.add_node(OpType::CacheWrite, {vbi, c, pos}, Value{}, {}, {{"layer", l}});
      a = g.add_node(OpType::StaticAttention, {qf, kbi, vbi, pos}, act(nm("attn_latent"), Hq * L), {}, aa);
    }
    a = g.add_node(OpType::HeadLinear, {a}, act(nm("attn"), Hq * V), {t("attn_v_b.weight")}, {{"groups", Hq}});
    return linear(a, t("attn_output.weight"), H, nm("attn_out"));
  }

  // The attention of layer l on its (normed) input h.
  int32_t attend(int64_t l, int32_t h) {
    if (s.kv_lora_rank > 0) return attend_mla(l, h);
    const int64_t H = s.hidden_size, D = s.head_dim, Hq = s.n_heads, Hkv = s.n_kv_heads;
    const LayerAttention& la = s.layers[l];
    auto t = [&](const char* what) { return layer_tensor(l, what); };
    auto nm = [&](const char* what) { return "blk." + std::to_string(l) + "." + what; };
    int32_t q = linear(h, t("attn_q.weight"), Hq * D, nm("q"), s.attn_bias);
    int32_t k = linear(h, t("attn_k.weight"), Hkv * D, nm("k"), s.attn_bias);
    int32_t v = linear(h, t("attn_v.weight"), Hkv * D, nm("v"), s.attn_bias);
    if (s.qk_norm) {
      // Per head (Qwen3, Gemma 3), or over all heads at once (OLMoE).
      q = norm(q, t("attn_q_norm.weight"), Hq * D, nm("q_normed"), s.qk_norm_full ? Hq * D : D);
      k = norm(k, t("attn_k_norm.weight"), Hkv * D, nm("k_normed"), s.qk_norm_full ? Hkv * D : D);
    }
    if (la.use_rope) {
      q = rope(q, Hq, la, nm("q_rope"));
      k = rope(k, Hkv, la, nm("k_rope"));
      if (s.qk_l2_norm) {  // Llama 4: weightless RMS normalisation of each head after RoPE
        q = g.add_node(OpType::RMSNorm, {q}, act(nm("q_l2"), Hq * D), {},
                       {{"eps", s.norm_eps}, {"plus_one", false}, {"group", D}});
        k = g.add_node(OpType::RMSNorm, {k}, act(nm("k_l2"), Hkv * D), {},
                       {{"eps", s.norm_eps}, {"plus_one", false}, {"group", D}});
      }
    } else if (s.attn_temperature_scale > 0 && !s.attn_temperature_all_layers) {
      // Llama 4 NoPE layers: q *= log(floor((pos + 1) / floor) + 1) * scale + 1.
      q = g.add_node(OpType::AttnTemperature, {q, pos}, act(nm("q_temp"), Hq * D), {},
                     {{"scale", s.attn_temperature_scale}, {"floor", s.attn_temperature_floor}});
    }
    if (s.attn_temperature_all_layers && s.attn_temperature_scale > 0) {
      // Ministral 3: every layer, after RoPE: q *= 1 + scale * log(1 + floor(pos / floor)).
      q = g.add_node(OpType::QueryTemperature, {q, pos}, act(nm("q_temp"), Hq * D), {},
                     {{"scale", s.attn_temperature_scale}, {"floor", s.attn_temperature_floor}});
    }
    const float scale = s.attn_scale > 0 ? s.attn_scale : 1.0f / std::sqrt(static_cast<float>(D));
    nlohmann::json aa = {{"layer", l},        {"heads", Hq},         {"kv_heads", Hkv},
                         {"head_dim", D},     {"head_dim_v", D},     {"scale", scale},
                         {"softcap", s.attn_logit_softcap}};
    std::vector<std::string> sinks;  // the op's one weight when the layers have sinks (gpt-oss)
    if (s.attn_sinks) sinks.push_back(t("attn_sinks.weight"));
    int32_t a;
    if (!o.static_cache) {
      a = g.add_node(OpType::UpdateAndAttend, {q, k, v, pos}, act(nm("attn"), Hq * D), sinks, aa);
    } else {
      Value kb{nm("k_cache"), ValueKind::Buffer, o.static_cache_dtype, {o.max_context_length, Hkv * D}};
      Value vb{nm("v_cache"), ValueKind::Buffer, o.static_cache_dtype, {o.max_context_length, Hkv * D}};
      int32_t kbi = g.add_value(kb), vbi = g.add_value(vb);
      g.add_node(OpType::CacheWrite, {kbi, k, pos}, Value{}, {}, {{"layer", l}});
      g.add_node(OpType::CacheWrite, {vbi, v, pos}, Value{}, {}, {{"layer", l}});
      a = g.add_node(OpType::StaticAttention, {q, kbi, vbi, pos}, act(nm("attn"), Hq * D), sinks, aa);
    }
    int32_t ao = linear(a, t("attn_output.weight"), H, nm("attn_out"), s.attn_output_bias);
    if (s.sandwich_norms) ao = norm(ao, t("post_attention_norm.weight"), H, nm("attn_post"));
    return ao;
  }

  // Gated MLP of layer l on the residual x: norm, gate/up, SwiGLU or GeGLU (tanh or exact erf,
  // the node's "activation"), down (biases with mlp_bias), post-norm.
  int32_t glu_ffn(int64_t l, int32_t x) {
    return mlp(l, s.pre_norms ? block_norm(x, layer_tensor(l, "ffn_norm.weight"), "blk." + std::to_string(l) + ".ffn_in") : x);
  }
  // The MLP of layer l on its (normed) input f: gated, or down(gelu(up(f))) with plain_mlp.
  int32_t mlp(int64_t l, int32_t f) {
    const int64_t H = s.hidden_size, I = s.intermediate_size;
    auto t = [&](const char* what) { return layer_tensor(l, what); };
    auto nm = [&](const char* what) { return "blk." + std::to_string(l) + "." + what; };
    if (s.plain_mlp) {
      int32_t up = linear(f, t("ffn_up.weight"), I, nm("up"), s.mlp_bias);
      int32_t a = g.add_node(OpType::Gelu, {up}, act(nm("act"), I), {}, {{"activation", activation_name(s.activation)}});
      return linear(a, t("ffn_down.weight"), H, nm("ffn_out"), s.mlp_bias);
    }
    int32_t gate = linear(f, t("ffn_gate.weight"), I, nm("gate"), s.mlp_bias);
    int32_t up = linear(f, t("ffn_up.weight"), I, nm("up"), s.mlp_bias);
    int32_t m = g.add_node(s.activation == Activation::SiLU ? OpType::SwiGLU : OpType::GeGLU, {gate, up},
                           act(nm("glu"), I), {}, {{"activation", activation_name(s.activation)}});
    int32_t d = linear(m, t("ffn_down.weight"), H, nm("ffn_out"), s.mlp_bias);
    if (s.sandwich_norms) d = norm(d, t("post_ffw_norm.weight"), H, nm("ffn_post"));
    return d;
  }

  // Mixture of experts of layer l on the residual x: norm, one moe_ffn node (router, top-k,
  // routed SwiGLU experts, the shared expert when the spec has one), post-norm.
  int32_t moe_ffn(int64_t l, int32_t x) {
    const int64_t H = s.hidden_size, E = s.n_experts;
    auto t = [&](const char* what) { return layer_tensor(l, what); };
    auto nm = [&](const char* what) { return "blk." + std::to_string(l) + "." + what; };
    int32_t f = s.pre_norms ? norm(x, t("ffn_norm.weight"), H, nm("ffn_in")) : x;
    std::vector<std::string> ws{t("ffn_gate_inp.weight")};
    for (int64_t e = 0; e < E; ++e)
      for (const char* w : {"ffn_gate", "ffn_up", "ffn_down"}) ws.push_back(expert_tensor(l, w, e));
    const bool shared = s.shared_expert_ffn_size > 0;
    if (shared) {
      if (s.shared_expert_gate) ws.push_back(t("ffn_gate_inp_shexp.weight"));
      for (const char* w : {"ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight"}) ws.push_back(t(w));
    }
    if (s.expert_bias) {  // gpt-oss: the router's bias, then each expert's three
      ws.push_back(t("ffn_gate_inp.bias"));
      for (int64_t e = 0; e < E; ++e)
        for (const char* w : {"ffn_gate", "ffn_up", "ffn_down"}) ws.push_back(expert_tensor(l, w, e, "bias"));
    }
    if (s.expert_selection_bias) ws.push_back(t("exp_probs_b.bias"));  // DeepSeek V3: the last weight
    nlohmann::json attrs = {{"experts", E}, {"top_k", s.n_experts_used}, {"norm_topk_prob", s.norm_topk_prob}, {"shared", shared}};
    if (s.expert_selection_bias) attrs["selection_bias"] = true;
    if (s.expert_routed_scale != 1.0f) attrs["routed_scale"] = s.expert_routed_scale;
    if (s.expert_groups > 0) {
      attrs["groups"] = s.expert_groups;
      attrs["groups_used"] = s.expert_groups_used;
      attrs["group_score"] = s.expert_group_top2 ? "top2_sum" : "max";
    }
    if (s.expert_bias) attrs["biases"] = true;
    if (s.expert_sigmoid) attrs["scoring"] = "sigmoid";
    if (s.expert_weight_input) attrs["weight_input"] = true;
    if (shared && !s.shared_expert_gate) attrs["shared_gate"] = false;
    if (s.expert_swiglu_limit > 0) {
      attrs["activation"] = "swiglu_oai";
      attrs["alpha"] = 1.702f;
      attrs["limit"] = s.expert_swiglu_limit;
    }
    int32_t d = g.add_node(OpType::MoeFfn, {f}, act(nm("ffn_out"), H), ws, attrs);
    if (s.sandwich_norms) d = norm(d, t("post_ffw_norm.weight"), H, nm("ffn_post"));
    return d;
  }

  // Block::Moe: attention, then the experts on the layers the spec marks (the gated MLP on the others).
  int32_t moe_layer(int64_t l, int32_t x) {
    if (!s.layers[static_cast<size_t>(l)].moe) return dense_layer(l, x);
    const int64_t H = s.hidden_size;
    const std::string p = "blk." + std::to_string(l) + ".";
    x = g.add_node(OpType::Add, {x, residual_part(attention(l, x), p + "attn_scaled")}, act(p + "resid_attn", H));
    return g.add_node(OpType::Add, {x, residual_part(moe_ffn(l, x), p + "ffn_scaled")}, act(p + "resid_ffn", H));
  }

  // A sublayer's output as it joins the residual stream (Granite scales it by residual_multiplier).
  int32_t residual_part(int32_t y, const std::string& name) {
    if (s.residual_scale == 1.0f) return y;
    return g.add_node(OpType::Scale, {y}, act(name, s.hidden_size), {}, {{"scale", s.residual_scale}});
  }

  // Block::Dense: attention then the MLP, each added to the residual stream; or, with a parallel
  // residual, both on one norm of the layer's input and added together.
  int32_t dense_layer(int64_t l, int32_t x) {
    const int64_t H = s.hidden_size;
    const std::string p = "blk." + std::to_string(l) + ".";
    if (s.parallel_residual) {
      int32_t h = block_norm(x, layer_tensor(l, "attn_norm.weight"), p + "attn_in");
      int32_t a = attend(l, h);
      // GPT-NeoX: the MLP's own norm of the layer input; else the attention's.
      int32_t f = mlp(l, s.parallel_ffn_norm ? block_norm(x, layer_tensor(l, "ffn_norm.weight"), p + "ffn_in") : h);
      x = g.add_node(OpType::Add, {x, residual_part(a, p + "attn_scaled")}, act(p + "resid_attn", H));
      return g.add_node(OpType::Add, {x, residual_part(f, p + "ffn_scaled")}, act(p + "resid_ffn", H));
    }
    x = g.add_node(OpType::Add, {x, residual_part(attention(l, x), p + "attn_scaled")}, act(p + "resid_attn", H));
    return g.add_node(OpType::Add, {x, residual_part(glu_ffn(l, x), p + "ffn_scaled")}, act(p + "resid_ffn", H));
  }

  // Final norm on the rows whose logits are wanted (the `hidden` output), classifier, optional
  // soft-cap.
  void head(int32_t x) {
    const int64_t H = s.hidden_size;
    int32_t xs = g.add_node(OpType::SelectRows, {x}, act("selected", H, kDimR));
    xs = block_norm(xs, "output_norm.weight", "final_norm", kDimR);
    g.hidden = xs;  // the hidden state embeddings pool
    const std::string w = s.tie_word_embeddings ? "token_embd.weight" : "output.weight";
    int32_t logits = linear(xs, w, s.vocab_size, "logits_raw", s.output_bias, kDimR);
    if (s.logit_scale != 1.0f)  // Granite: logits / logits_scaling
      logits = g.add_node(OpType::Scale, {logits}, act("logits_scaled", s.vocab_size, kDimR), {}, {{"scale", 1.0f / s.logit_scale}});
    if (s.final_logit_softcap > 0)
      logits = g.add_node(OpType::Softcap, {logits}, act("logits_capped", s.vocab_size, kDimR), {},
                          {{"cap", s.final_logit_softcap}});
    g.logits = logits;
  }

  // One builder function per Block kind of the family table.
  void build(Block block) {
    check_sizes();
    int32_t x = embed();
    for (int64_t l = 0; l < s.n_layers; ++l) {
      switch (block) {
        case Block::Dense: x = dense_layer(l, x); break;
        case Block::Moe: x = moe_layer(l, x); break;
        case Block::Unsupported: fail(ErrorKind::Internal, "graph builder", "unsupported block kind");
      }
    }
    head(x);
  }
};

}  // namespace

bool family_supported(const std::string& family) {
  const FamilyInfo* f = find_family(family);
  return f && f->block != Block::Unsupported;
}

Graph build_decoder_graph(const ModelSpec& spec, const BuildOptions& options) {
  const FamilyInfo* fam = find_family(spec.family);
  if (!fam || fam->block == Block::Unsupported)
    fail(ErrorKind::Unsupported, "graph builder",
         "no graph builder for model family '" + spec.family + "'" + (fam ? std::string(" (") + fam->unsupported_why + ")" : std::string()));
  if (options.static_cache && options.max_context_length <= 0)
    fail(ErrorKind::InvalidArgument, "graph builder", "the static cache needs --max_context_length > 0");
  Builder b{spec, options, {}};
  b.build(fam->block);
  return std::move(b.g);
}

}  // namespace ptn
