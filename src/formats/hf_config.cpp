#include "formats/hf_config.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file.h"
#include "formats/families.h"
#include "formats/weights.h"

namespace ptn {

namespace {

using json = nlohmann::json;

// Reads fields of one config object with errors that name the file and the field.
struct Cfg {
  const json& j;
  std::string where;
  const json* defaults = nullptr;  // the family's config-class defaults for absent keys

  // The value of k; nullptr when absent or null. An explicit null is None, as in transformers'
  // config classes (Gemma 2's final_logit_softcapping: null turns it off), not the default.
  const json* find(const char* k) const {
    auto it = j.find(k);
    if (it != j.end()) return it->is_null() ? nullptr : &*it;
    if (defaults) {
      auto d = defaults->find(k);
      if (d != defaults->end() && !d->is_null()) return &*d;
    }
    return nullptr;
  }
  bool present(const char* k) const { return find(k) != nullptr; }
  [[noreturn]] void bad(const char* k, const std::string& why) const { fail(ErrorKind::Corrupt, where + ": field '" + k + "'", why); }

  int64_t integer(const char* k, int64_t lo = 1, int64_t hi = int64_t{1} << 40) const {
    const json* v = find(k);
    if (!v) bad(k, "missing");
    return int_value(k, *v, lo, hi);
  }
  int64_t integer_or(const char* k, int64_t dflt, int64_t lo = 0, int64_t hi = int64_t{1} << 40) const {
    const json* v = find(k);
    return v ? int_value(k, *v, lo, hi) : dflt;
  }
  int64_t int_value(const char* k, const json& v, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer()) bad(k, "expected an integer, found " + v.dump());
    int64_t x = v.is_number_unsigned() ? (v.get<uint64_t>() > static_cast<uint64_t>(hi) ? hi + 1 : static_cast<int64_t>(v.get<uint64_t>())) : v.get<int64_t>();
    if (x < lo || x > hi) bad(k, "value " + v.dump() + " is out of range (" + std::to_string(lo) + ".." + std::to_string(hi) + ")");
    return x;
  }
  double number_or(const char* k, double dflt) const {
    const json* v = find(k);
    if (!v) return dflt;
    if (!v->is_number()) bad(k, "expected a number, found " + v->dump());
    double x = v->get<double>();
    if (!std::isfinite(x)) bad(k, "not finite");
    return x;
  }
  bool boolean_or(const char* k, bool dflt) const {
    const json* v = find(k);
    if (!v) return dflt;
    if (v->is_boolean()) return v->get<bool>();
    if (v->is_number_integer()) return v->get<int64_t>() != 0;  // some configs write 0/1
    bad(k, "expected a boolean, found " + v->dump());
  }
  std::string string_or(const char* k, const std::string& dflt) const {
    const json* v = find(k);
    if (!v) return dflt;
    if (!v->is_string()) bad(k, "expected a string, found " + v->dump());
    return v->get<std::string>();
  }
};

// The family's defaults for absent config keys (FamilyInfo::hf_config_defaults), parsed once.
const json* config_defaults(const FamilyInfo& fam) {
  static const std::map<Family, json> parsed = [] {
    std::map<Family, json> m;
    for (const FamilyInfo& r : all_families())
      if (*r.hf_config_defaults) m[r.id] = json::parse(r.hf_config_defaults);
    return m;
  }();
  auto it = parsed.find(fam.id);
  return it == parsed.end() ? nullptr : &it->second;
}

// One RoPE description: a base and its frequency scaling, from `rope_scaling` (v4),
// `rope_parameters` (v5, flat) or one of its per-layer-type entries (v5, nested).
struct LayerRope {
  double theta = 10000.0;
  RopeScaling scaling;
};

bool same_scaling(const RopeScaling& a, const RopeScaling& b) {
  return a.type == b.type && a.factor == b.factor && a.low_freq_factor == b.low_freq_factor &&
         a.high_freq_factor == b.high_freq_factor && a.original_max_position == b.original_max_position &&
         a.beta_fast == b.beta_fast && a.beta_slow == b.beta_slow && a.attn_factor == b.attn_factor &&
         a.yarn_truncate == b.yarn_truncate && a.freq_divisors == b.freq_divisors;
}

// A list of positive numbers (longrope's short_factor / long_factor).
std::vector<double> factor_list(const Cfg& r, const char* k) {
  const json* v = r.find(k);
  if (!v) r.bad(k, "missing (longrope needs it)");
  if (!v->is_array() || v->empty() || v->size() > 65536) r.bad(k, "expected a non-empty list of numbers");
  std::vector<double> out;
  for (const json& x : *v) {
    if (!x.is_number() || !std::isfinite(x.get<double>()) || !(x.get<double>() > 0)) r.bad(k, "element " + x.dump() + " is not a positive number");
    out.push_back(x.get<double>());
  }
  return out;
}

// transformers' get_mscale: 0.1 * m * ln(scale) + 1, or 1 for scale <= 1.
double yarn_mscale(double scale, double m) { return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }

// Parses one RoPE dict `d` (rope_type / type and the keys that type reads). `field` names it in
// errors ("rope_scaling", "rope_parameters", "rope_parameters.full_attention"). A missing
// rope_theta is `theta_default`; a missing original_max_position_embeddings is the config's own
// key or max_position_embeddings, as transformers' standardize_rope_params fills it in. Types ptn
// cannot compute are refused by name.
LayerRope parse_rope_dict(const Cfg& c, const json& d, const std::string& field, double theta_default, int64_t max_pos) {
  if (!d.is_object()) fail(ErrorKind::Corrupt, c.where + ": field '" + field + "'", "expected an object or null, found " + d.dump());
  Cfg r{d, c.where + ": " + field};
  LayerRope out;
  out.theta = r.number_or("rope_theta", theta_default);
  if (!(out.theta > 0)) r.bad("rope_theta", "must be positive");
  RopeScaling& rs = out.scaling;
  const std::string type = r.string_or("rope_type", r.string_or("type", "default"));
  if (type == "default") return out;
  rs.factor = static_cast<float>(r.number_or("factor", 1.0));
  if (!(rs.factor > 0)) r.bad("factor", "must be positive");
  auto original = [&]() -> int64_t {
    if (r.present("original_max_position_embeddings")) return r.integer("original_max_position_embeddings");
    if (c.present("original_max_position_embeddings")) return c.integer("original_max_position_embeddings");
    if (max_pos > 0) return max_pos;
    r.bad("original_max_position_embeddings", "missing (and no max_position_embeddings to default to)");
  };
  if (type == "linear") {
    rs.type = RopeScalingType::Linear;
  } else if (type == "llama3") {
    rs.type = RopeScalingType::Llama3;
    rs.low_freq_factor = static_cast<float>(r.number_or("low_freq_factor", 1.0));
    rs.high_freq_factor = static_cast<float>(r.number_or("high_freq_factor", 4.0));
    rs.original_max_position = original();
    // Equal factors (Llama 4) leave no smooth band between the two wavelength limits.
    if (!(rs.high_freq_factor >= rs.low_freq_factor && rs.low_freq_factor > 0)) r.bad("high_freq_factor", "must be at least low_freq_factor (> 0)");
  } else if (type == "yarn") {
    rs.type = RopeScalingType::Yarn;
    rs.original_max_position = original();
    rs.beta_fast = static_cast<float>(r.number_or("beta_fast", 32.0));
    rs.beta_slow = static_cast<float>(r.number_or("beta_slow", 1.0));
    rs.yarn_truncate = r.boolean_or("truncate", true);
    // attention_factor when given; else from mscale and mscale_all_dim when both are non-zero
    // (DeepSeek's form), else from factor alone.
    const double mscale = r.number_or("mscale", 0.0), mscale_all_dim = r.number_or("mscale_all_dim", 0.0);
    double af = mscale != 0 && mscale_all_dim != 0 ? yarn_mscale(rs.factor, mscale) / yarn_mscale(rs.factor, mscale_all_dim)
                                                   : yarn_mscale(rs.factor, 1.0);
    af = r.number_or("attention_factor", af);
    if (!(af > 0)) r.bad("attention_factor", "must be positive");
    rs.attn_factor = static_cast<float>(af);
  } else if (type == "longrope") {
    // Phi-3.5 / Phi-4-mini. transformers divides each pair's frequency by short_factor[i] while
    // the sequence stays within original_max_position_embeddings and switches every position of
    // a step to long_factor once the step reaches past it, which depends on how the sequence is
    // split into steps. ptn computes the first regime exactly and bounds the positions to it
    // (read_rope); long_factor is checked but not used.
    rs.type = RopeScalingType::LongRope;
    rs.freq_divisors = factor_list(r, "short_factor");
    if (factor_list(r, "long_factor").size() != rs.freq_divisors.size()) r.bad("long_factor", "differs in length from short_factor");
    rs.original_max_position = original();
    // The attention factor, as transformers derives it: from max_position_embeddings /
    // original_max_position_embeddings when the config has the latter (Phi-3), else `factor`.
    double factor = r.number_or("factor", 1.0);
    if (c.present("original_max_position_embeddings") && max_pos > 0) factor = static_cast<double>(max_pos) / static_cast<double>(rs.original_max_position);
    rs.factor = static_cast<float>(factor > 0 ? factor : 1.0);
    double af = factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(static_cast<double>(rs.original_max_position)));
    af = r.number_or("attention_factor", af);
    if (!(af > 0)) r.bad("attention_factor", "must be positive");
    rs.attn_factor = static_cast<float>(af);
  } else if (type == "dynamic") {
    // The base grows with the current sequence length past max_position_embeddings: not a
    // function of the position alone, which is what ptn's RoPE op computes.
    fail(ErrorKind::Unsupported, c.where + ": field '" + field + ".rope_type'",
         "RoPE type '" + type + "' is not supported (default, linear, llama3, yarn and longrope are): its frequencies depend on the sequence length, not only on the position");
  } else {
    fail(ErrorKind::Unsupported, c.where + ": field '" + field + ".rope_type'",
         "RoPE type '" + type + "' is not supported (default, linear, llama3, yarn and longrope are)");
  }
  return out;
}

std::vector<int64_t> int_list(const Cfg& c, const char* k, size_t n) {
  const json* v = c.find(k);
  if (!v->is_array() || v->size() != n) c.bad(k, "expected a list of " + std::to_string(n) + " integers");
  std::vector<int64_t> out;
  for (const json& x : *v) {
    if (x.is_boolean()) out.push_back(x.get<bool>());
    else if (x.is_number_integer()) out.push_back(x.get<int64_t>());
    else c.bad(k, "element " + x.dump() + " is not an integer");
  }
  return out;
}

// Windows or chunks by the family's rule, for configs without `layer_types`.
void apply_window_rule(const Cfg& c, const FamilyInfo& fam, int64_t window, ModelSpec& s) {
  const size_t n = s.layers.size();
  auto windowed = [&](LayerAttention& l) { l.kind = AttnKind::Window; l.span = window; };
  switch (fam.hf_window) {
    case WindowRule::None: break;
    case WindowRule::AllLayers:
      if (window > 0)
        for (auto& l : s.layers) windowed(l);
      break;
    case WindowRule::FromMaxWindowLayers:
      if (window > 0 && c.boolean_or("use_sliding_window", false)) {
        const int64_t first = c.integer_or("max_window_layers", s.n_layers, 0);
        for (size_t i = 0; i < n; ++i)
          if (static_cast<int64_t>(i) >= first) windowed(s.layers[i]);
      }
      break;
    case WindowRule::EveryNthGlobal: {
      if (window <= 0) c.bad("sliding_window", std::string("missing (") + fam.display + " interleaves local and global layers)");
      const int64_t pattern = fam.hf_window_pattern_key ? c.integer_or("sliding_window_pattern", fam.window_pattern, 1) : fam.window_pattern;
      for (size_t i = 0; i < n; ++i)
        if ((i + 1) % pattern != 0) windowed(s.layers[i]);
      break;
    }
    case WindowRule::ChunkOnRopeLayers: {
      const int64_t chunk = c.integer_or("attention_chunk_size", 0, 0);
      if (chunk > 0)
        for (auto& l : s.layers)
          if (l.use_rope) { l.kind = AttnKind::Chunk; l.span = chunk; }
      break;
    }
  }
}

// Layer kinds and RoPE use per layer (see the rules in hf_config.h).
void fill_layers(const Cfg& c, const FamilyInfo& fam, ModelSpec& s) {
  const size_t n = static_cast<size_t>(s.n_layers);
  s.layers.assign(n, LayerAttention{});
  const int64_t window = c.present("sliding_window") ? c.integer("sliding_window", 1) : 0;

  if (fam.nope_layers) {  // RoPE on some layers only
    std::vector<int64_t> use;
    if (c.present("no_rope_layers") && !(c.find("no_rope_layers")->is_array() && c.find("no_rope_layers")->empty())) {
      use = int_list(c, "no_rope_layers", n);
    } else {
      int64_t interval = c.integer_or("no_rope_layer_interval", 4, 1);
      for (size_t i = 0; i < n; ++i) use.push_back((i + 1) % interval != 0);
    }
    for (size_t i = 0; i < n; ++i) s.layers[i].use_rope = use[i] != 0;
  }

  if (c.present("layer_types")) {
    const json& lt = *c.find("layer_types");
    if (!lt.is_array() || lt.size() != n) c.bad("layer_types", "expected a list of " + std::to_string(n) + " strings");
    for (size_t i = 0; i < n; ++i) {
      if (!lt[i].is_string()) c.bad("layer_types", "element " + lt[i].dump() + " is not a string");
      const std::string t = lt[i].get<std::string>();
      if (t == "full_attention") continue;
      if (t == "sliding_attention") {
        if (window <= 0) c.bad("sliding_window", "needed by layer_types[" + std::to_string(i) + "] = sliding_attention");
        s.layers[i].kind = AttnKind::Window;
        s.layers[i].span = window;
      } else if (t == "chunked_attention") {
        s.layers[i].kind = AttnKind::Chunk;
        s.layers[i].span = c.integer("attention_chunk_size");
      } else {
        fail(ErrorKind::Unsupported, c.where + ": field 'layer_types'", "layer type '" + t + "' is not supported");
      }
    }
  } else {
    apply_window_rule(c, fam, window, s);
  }

}

// Experts (families with hf_moe): counts, widths, routing and which layers have them.
// DeepSeek's experts: layer i is sparse when n_routed_experts is set, i >= first_k_dense_replace and
// i % moe_layer_freq == 0; n_shared_experts ungated shared experts in one MLP of n_shared x
// moe_intermediate_size. V2: softmax scores, greedy or group_limited_greedy (a group's score its
// best), times routed_scaling_factor. V3: sigmoid scores plus e_score_correction_bias for choosing,
// noaux_tc (a group's score the sum of its two best), renormalised with norm_topk_prob, then scaled.
void read_deepseek_experts(const Cfg& c, const FamilyInfo& fam, ModelSpec& s) {
  const bool v3 = fam.hf_moe == HfMoe::DeepseekV3;
  const json* nr = c.find("n_routed_experts");
  if (!nr || nr->is_null()) {
    if (!v3) return;  // DeepseekV2Config's default: a dense model
    c.bad("n_routed_experts", "missing");
  }
  s.n_experts = c.integer("n_routed_experts", 1, 1024);
  s.n_experts_used = c.integer("num_experts_per_tok", 1, s.n_experts);
  s.expert_ffn_size = c.integer("moe_intermediate_size", 1, int64_t{1} << 24);
  const json* ns = c.find("n_shared_experts");
  const int64_t shared = ns && !ns->is_null() ? c.integer_or("n_shared_experts", 0, 0, 64) : 0;
  s.shared_expert_ffn_size = shared * s.expert_ffn_size;
  s.shared_expert_gate = false;
  s.norm_topk_prob = c.boolean_or("norm_topk_prob", v3);
  s.expert_routed_scale = static_cast<float>(c.number_or("routed_scaling_factor", v3 ? 2.5 : 1.0));
  if (!(s.expert_routed_scale > 0) || !std::isfinite(s.expert_routed_scale)) c.bad("routed_scaling_factor", "must be positive");
  const std::string scoring = c.string_or("scoring_func", v3 ? "sigmoid" : "softmax");
  const std::string method = c.string_or("topk_method", v3 ? "noaux_tc" : "greedy");
  if (!v3) {
    if (scoring != "softmax") c.bad("scoring_func", "'" + scoring + "' is not supported for DeepSeek V2 (softmax is)");
    // The remote code renormalises and then skips routed_scaling_factor; transformers' own class
    // never renormalises: the two disagree, so only configs where they agree are read.
    if (s.norm_topk_prob) c.bad("norm_topk_prob", "true is not supported for DeepSeek V2 (implementations disagree on it)");
    if (method == "group_limited_greedy") {
      s.expert_groups = c.integer("n_group", 1, s.n_experts);
      s.expert_groups_used = c.integer("topk_group", 1, s.expert_groups);
    } else if (method != "greedy") {
      c.bad("topk_method", "'" + method + "' is not supported for DeepSeek V2 (greedy and group_limited_greedy are)");
    }
  } else {
    if (scoring != "sigmoid") c.bad("scoring_func", "'" + scoring + "' is not supported for DeepSeek V3 (sigmoid is)");
    if (method != "noaux_tc") c.bad("topk_method", "'" + method + "' is not supported for DeepSeek V3 (noaux_tc is)");
    s.expert_sigmoid = true;
    s.expert_selection_bias = true;
    s.expert_groups = c.integer("n_group", 1, s.n_experts);
    s.expert_groups_used = c.integer("topk_group", 1, s.expert_groups);
    s.expert_group_top2 = true;
    s.mtp_layers = c.integer_or("num_nextn_predict_layers", 0, 0, 16);
    // DeepSeek's own V3 code skips layers off moe_layer_freq, transformers' class does not.
    if (c.integer_or("moe_layer_freq", 1, 1, 4096) != 1) c.bad("moe_layer_freq", "other than 1 is not supported for DeepSeek V3 (implementations disagree on it)");
  }
  if (s.expert_groups > 0) {
    if (s.n_experts % s.expert_groups != 0) c.bad("n_group", std::to_string(s.expert_groups) + " does not divide n_routed_experts " + std::to_string(s.n_experts));
    if (s.expert_groups_used * (s.n_experts / s.expert_groups) < s.n_experts_used)
      c.bad("topk_group", "its groups hold fewer experts than num_experts_per_tok");
    if (s.expert_groups == 1) s.expert_groups = s.expert_groups_used = 0;  // one group: no restriction
  }
  const int64_t first_dense = c.integer_or("first_k_dense_replace", 0, 0, s.n_layers);
  const int64_t freq = c.integer_or("moe_layer_freq", 1, 1, 4096);
  int64_t moe_layers = 0;
  for (int64_t i = 0; i < s.n_layers; ++i) moe_layers += (s.layers[static_cast<size_t>(i)].moe = i >= first_dense && i % freq == 0);
  if (moe_layers == 0) {  // a dense model after all
    s.n_experts = s.n_experts_used = s.expert_ffn_size = s.shared_expert_ffn_size = 0;
    s.expert_sigmoid = s.expert_selection_bias = false;
    s.expert_groups = s.expert_groups_used = 0;
    s.expert_routed_scale = 1.0f;
    s.shared_expert_gate = true;
    return;
  }
  if (moe_layers * s.n_experts * 3 > (int64_t{1} << 19))
    c.bad("n_routed_experts", std::to_string(s.n_experts) + " experts on " + std::to_string(moe_layers) + " layers are more expert tensors than ptn holds");
}

void read_experts(const Cfg& c, const FamilyInfo& fam, ModelSpec& s) {
  if (fam.hf_moe == HfMoe::None) return;
  if (fam.hf_moe == HfMoe::DeepseekV2 || fam.hf_moe == HfMoe::DeepseekV3) return read_deepseek_experts(c, fam, s);
  if (fam.hf_moe == HfMoe::Llama4) {  // "moe_layers": [] is a dense model, whatever the expert count says
    const json* ml = c.find("moe_layers");
    if (ml && ml->is_array() && ml->empty()) return;
  }
  const bool granite = fam.hf_moe == HfMoe::GraniteMoe || fam.hf_moe == HfMoe::GraniteMoeShared;
  const char* count_key = fam.hf_moe == HfMoe::Mixtral || fam.hf_moe == HfMoe::Llama4 || granite ? "num_local_experts" : "num_experts";
  // transformers 5 maps Qwen's num_experts onto num_local_experts: either spelling, not two values.
  if (fam.hf_moe != HfMoe::Mixtral && !granite && !c.j.contains("num_experts") && c.j.contains("num_local_experts")) count_key = "num_local_experts";
  s.n_experts = c.integer(count_key, 1, 1024);
  s.n_experts_used = c.integer("num_experts_per_tok", 1, s.n_experts);
  if (fam.hf_moe == HfMoe::Mixtral || granite) {
    // Mixtral, Granite MoE (JetMoE's top-k gating: softmax over the k largest logits).
    s.expert_ffn_size = s.intermediate_size;  // every layer is sparse; its experts have the MLP's width
    s.norm_topk_prob = true;                  // top-k of the logits, softmax over the k
    for (LayerAttention& l : s.layers) l.moe = true;
    if (fam.hf_moe == HfMoe::GraniteMoeShared) {  // GraniteMoeSharedMLP beside the experts, ungated; 0: none
      s.shared_expert_ffn_size = c.integer_or("shared_intermediate_size", 0, 0, int64_t{1} << 24);
      s.shared_expert_gate = false;
    }
    return;
  }
  if (fam.hf_moe == HfMoe::GptOss) {
    // GptOssMLP: every layer; experts of intermediate_size with biases; the router (with a bias)
    // keeps the top-k logits and takes their softmax. GptOssExperts has alpha 1.702 and limit 7
    // written into its code in the transformers versions read; newer configs carry them as
    // swiglu_alpha / swiglu_limit, so other values there would be read differently by different
    // versions: refused. The same for the YaRN scaling, whose default differs between versions.
    s.expert_ffn_size = s.intermediate_size;
    s.norm_topk_prob = true;
    s.expert_bias = true;
    const double limit = c.number_or("swiglu_limit", 7.0), alpha = c.number_or("swiglu_alpha", 1.702);
    if (limit != 7.0) c.bad("swiglu_limit", "gpt-oss's experts clamp at 7 in transformers; " + std::to_string(limit) + " is not supported");
    if (std::abs(alpha - 1.702) > 1e-9) c.bad("swiglu_alpha", "gpt-oss's experts use 1.702 in transformers; " + std::to_string(alpha) + " is not supported");
    s.expert_swiglu_limit = 7.0f;
    auto given = [&](const char* k) { const json* v = c.find(k); return v && v->is_object() && !v->empty(); };
    if (!given("rope_scaling") && !given("rope_parameters"))
      c.bad("rope_scaling", "gpt-oss configs state their YaRN scaling, and transformers versions default it differently; give rope_scaling");
    for (LayerAttention& l : s.layers) l.moe = true;
    if (s.n_layers * s.n_experts * 6 > (int64_t{1} << 19))  // 3 matrices and 3 biases per expert; the .ptn table holds 2^20 tensors
      c.bad("num_local_experts", std::to_string(s.n_experts) + " experts on " + std::to_string(s.n_layers) + " layers are more expert tensors than ptn holds");
    return;
  }
  if (fam.hf_moe == HfMoe::Llama4) {
    // Llama4TextMoe: experts and an ungated shared expert, both of intermediate_size (the dense
    // layers' MLP is intermediate_size_mlp); the top-k logits' sigmoids scale the experts' input.
    s.expert_ffn_size = s.shared_expert_ffn_size = c.integer("intermediate_size", 1, int64_t{1} << 24);
    s.expert_sigmoid = s.expert_weight_input = true;
    s.shared_expert_gate = false;
    std::vector<bool> moe(s.layers.size(), false);
    if (const json* ml = c.find("moe_layers"); ml && !ml->is_null()) {
      if (!ml->is_array() || ml->size() > s.layers.size()) c.bad("moe_layers", "expected a list of at most " + std::to_string(s.layers.size()) + " layer indices");
      for (const json& v : *ml) {
        if (!v.is_number_integer()) c.bad("moe_layers", "element " + v.dump() + " is not an integer");
        const int64_t i = v.get<int64_t>();
        if (i < 0 || i >= s.n_layers) c.bad("moe_layers", "layer " + v.dump() + " outside 0.." + std::to_string(s.n_layers - 1));
        moe[static_cast<size_t>(i)] = true;
      }
    } else {  // transformers: every step-th layer, counting from step - 1
      const int64_t step = c.integer("interleave_moe_layer_step", 1, 4096);
      for (int64_t i = step - 1; i < s.n_layers; i += step) moe[static_cast<size_t>(i)] = true;
    }
    int64_t moe_layers = 0;
    for (size_t i = 0; i < s.layers.size(); ++i) moe_layers += (s.layers[i].moe = moe[i]);
    if (moe_layers == 0) {  // a dense model
      s.n_experts = s.n_experts_used = s.expert_ffn_size = s.shared_expert_ffn_size = 0;
      s.expert_sigmoid = s.expert_weight_input = false;
      s.shared_expert_gate = true;
      return;
    }
    if (moe_layers * s.n_experts * 3 > (int64_t{1} << 19))
      c.bad(count_key, std::to_string(s.n_experts) + " experts on " + std::to_string(moe_layers) + " layers are more expert tensors than ptn holds");
    return;
  }
  if (fam.hf_moe == HfMoe::Olmoe) {  // OlmoeSparseMoeBlock: every layer, experts of intermediate_size
    s.expert_ffn_size = s.intermediate_size;
    s.norm_topk_prob = c.boolean_or("norm_topk_prob", false);
    for (LayerAttention& l : s.layers) l.moe = true;
    return;
  }
  s.expert_ffn_size = c.integer("moe_intermediate_size", 1, int64_t{1} << 24);
  s.norm_topk_prob = c.boolean_or("norm_topk_prob", false);
  if (c.boolean_or("use_sliding_window", false))
    c.bad("use_sliding_window", std::string("sliding windows in ") + fam.display + " are not supported");
  const int64_t step = c.integer_or("decoder_sparse_step", 1, 1, 4096);
  std::vector<bool> dense(s.layers.size(), false);
  if (const json* ml = c.find("mlp_only_layers")) {
    if (!ml->is_array() || ml->size() > s.layers.size()) c.bad("mlp_only_layers", "expected a list of at most " + std::to_string(s.layers.size()) + " layer indices");
    for (const json& v : *ml) {
      if (!v.is_number_integer()) c.bad("mlp_only_layers", "element " + v.dump() + " is not an integer");
      const int64_t i = v.get<int64_t>();
      if (i < 0 || i >= s.n_layers) c.bad("mlp_only_layers", "layer " + v.dump() + " outside 0.." + std::to_string(s.n_layers - 1));
      dense[static_cast<size_t>(i)] = true;
    }
  }
  for (size_t i = 0; i < s.layers.size(); ++i) s.layers[i].moe = !dense[i] && (static_cast<int64_t>(i) + 1) % step == 0;
  if (fam.hf_moe == HfMoe::QwenShared) s.shared_expert_ffn_size = c.integer("shared_expert_intermediate_size", 1, int64_t{1} << 24);
  int64_t moe_layers = 0;
  for (const LayerAttention& l : s.layers) moe_layers += l.moe;
  if (moe_layers * s.n_experts * 3 > (int64_t{1} << 19))  // the .ptn tensor table holds at most 2^20 tensors
    c.bad(count_key, std::to_string(s.n_experts) + " experts on " + std::to_string(moe_layers) + " layers are more expert tensors than ptn holds");
}

// gpt-oss's experts: one tensor per layer for all experts' gate|up (rows interleaved: gate 2i,
// up 2i + 1) and one for their down, as MXFP4 blocks + scales [E, rows, cols / 32, 16] /
// [E, rows, cols / 32] (`mxfp4`, what OpenAI ships) or as float matrices [E, in, out] (what
// transformers saves dequantized); the biases [E, 2F] (interleaved as well) and [E, H].
void gpt_oss_expert_sources(int64_t layer, const std::string& block, bool mxfp4, ModelSpec& s) {
  auto& m = s.tensor_sources;
  m[layer_tensor(layer, "ffn_gate_inp.weight")] = block + "router.weight";
  m[layer_tensor(layer, "ffn_gate_inp.bias")] = block + "router.bias";
  const int64_t F2 = 2 * s.expert_ffn_size;
  const std::string ex = block + "experts.";
  for (int64_t e = 0; e < s.n_experts; ++e) {
    for (int part = 0; part < 2; ++part) {  // 0: gate (even rows), 1: up (odd rows)
      const char* what = part == 0 ? "ffn_gate" : "ffn_up";
      TensorSourceRef w;
      w.name = ex + (mxfp4 ? "gate_up_proj_blocks" : "gate_up_proj");
      w.expert = e;
      w.row_begin = part;
      w.row_end = F2;
      w.row_step = 2;
      if (mxfp4) w.mxfp4_scales = ex + "gate_up_proj_scales";
      else w.transposed = true;
      m[expert_tensor(layer, what, e)] = format_tensor_source(w);
      TensorSourceRef b{ex + "gate_up_proj_bias", part, F2};
      b.row_step = 2;
      b.expert = e;
      m[expert_tensor(layer, what, e, "bias")] = format_tensor_source(b);
    }
    TensorSourceRef d;
    d.name = ex + (mxfp4 ? "down_proj_blocks" : "down_proj");
    d.expert = e;
    if (mxfp4) d.mxfp4_scales = ex + "down_proj_scales";
    else d.transposed = true;
    m[expert_tensor(layer, "ffn_down", e)] = format_tensor_source(d);
    TensorSourceRef db;
    db.name = ex + "down_proj_bias";
    db.expert = e;
    m[expert_tensor(layer, "ffn_down", e, "bias")] = format_tensor_source(db);
  }
}

// Experts stacked in two tensors of a layer: gate|up halves of one (gate the first F rows of
// expert e, up the last F) and down the other, each read transposed or as stored.
void stacked_expert_sources(int64_t layer, const std::string& gate_up, const std::string& down, bool transposed, ModelSpec& s) {
  auto& m = s.tensor_sources;
  const int64_t F = s.expert_ffn_size;
  for (int64_t e = 0; e < s.n_experts; ++e) {
    for (int part = 0; part < 2; ++part) {
      TensorSourceRef w{gate_up, part * F, (part + 1) * F};
      w.expert = e;
      w.transposed = transposed;
      m[expert_tensor(layer, part == 0 ? "ffn_gate" : "ffn_up", e)] = format_tensor_source(w);
    }
    TensorSourceRef d{down};
    d.expert = e;
    d.transposed = transposed;
    m[expert_tensor(layer, "ffn_down", e)] = format_tensor_source(d);
  }
}

// Llama 4's experts: router.weight [E, H]; experts.gate_up_proj [E, H, 2F] and experts.down_proj
// [E, F, H], both read transposed; the shared expert as an MLP of its own.
void llama4_expert_sources(int64_t layer, const std::string& block, ModelSpec& s) {
  auto& m = s.tensor_sources;
  m[layer_tensor(layer, "ffn_gate_inp.weight")] = block + "router.weight";
  stacked_expert_sources(layer, block + "experts.gate_up_proj", block + "experts.down_proj", true, s);
  m[layer_tensor(layer, "ffn_gate_shexp.weight")] = block + "shared_expert.gate_proj.weight";
  m[layer_tensor(layer, "ffn_up_shexp.weight")] = block + "shared_expert.up_proj.weight";
  m[layer_tensor(layer, "ffn_down_shexp.weight")] = block + "shared_expert.down_proj.weight";
}

// Granite MoE's experts: router.layer.weight [E, H]; input_linear.weight [E, 2F, H] and
// output_linear.weight [E, H, F], as stored. Granite MoE Shared's shared MLP, under the layer
// (`p`): shared_mlp.input_linear [2Fs, H] (gate rows, then up) and output_linear [H, Fs].
void granite_moe_expert_sources(int64_t layer, const std::string& p, const std::string& block, ModelSpec& s) {
  auto& m = s.tensor_sources;
  m[layer_tensor(layer, "ffn_gate_inp.weight")] = block + "router.layer.weight";
  stacked_expert_sources(layer, block + "input_linear.weight", block + "output_linear.weight", false, s);
  if (const int64_t Fs = s.shared_expert_ffn_size; Fs > 0) {
    m[layer_tensor(layer, "ffn_gate_shexp.weight")] = format_tensor_source({p + "shared_mlp.input_linear.weight", 0, Fs});
    m[layer_tensor(layer, "ffn_up_shexp.weight")] = format_tensor_source({p + "shared_mlp.input_linear.weight", Fs, 2 * Fs});
    m[layer_tensor(layer, "ffn_down_shexp.weight")] = p + "shared_mlp.output_linear.weight";
  }
}

// The HF names of a mixture-of-experts layer's tensors.
void expert_sources(const FamilyInfo& fam, int64_t layer, const std::string& p, bool mxfp4, ModelSpec& s) {
  auto& m = s.tensor_sources;
  const std::string block = p + fam.hf_moe_block + ".";
  if (fam.hf_moe == HfMoe::GptOss) return gpt_oss_expert_sources(layer, block, mxfp4, s);
  if (fam.hf_moe == HfMoe::Llama4) return llama4_expert_sources(layer, block, s);
  if (fam.hf_moe == HfMoe::GraniteMoe || fam.hf_moe == HfMoe::GraniteMoeShared) return granite_moe_expert_sources(layer, p, block, s);
  m[layer_tensor(layer, "ffn_gate_inp.weight")] = block + "gate.weight";
  if (s.expert_selection_bias) m[layer_tensor(layer, "exp_probs_b.bias")] = block + "gate.e_score_correction_bias";
  const char* names[3][2] = {{"ffn_gate", fam.hf_expert_w123 ? "w1" : "gate_proj"},
                             {"ffn_up", fam.hf_expert_w123 ? "w3" : "up_proj"},
                             {"ffn_down", fam.hf_expert_w123 ? "w2" : "down_proj"}};
  for (int64_t e = 0; e < s.n_experts; ++e)
    for (const auto& n : names) m[expert_tensor(layer, n[0], e)] = block + "experts." + std::to_string(e) + "." + n[1] + ".weight";
  if (s.shared_expert_ffn_size > 0 && (fam.hf_moe == HfMoe::DeepseekV2 || fam.hf_moe == HfMoe::DeepseekV3)) {
    // DeepSeek: the shared experts as one ungated MLP
    m[layer_tensor(layer, "ffn_gate_shexp.weight")] = block + "shared_experts.gate_proj.weight";
    m[layer_tensor(layer, "ffn_up_shexp.weight")] = block + "shared_experts.up_proj.weight";
    m[layer_tensor(layer, "ffn_down_shexp.weight")] = block + "shared_experts.down_proj.weight";
  } else if (s.shared_expert_ffn_size > 0) {
    m[layer_tensor(layer, "ffn_gate_inp_shexp.weight")] = block + "shared_expert_gate.weight";
    m[layer_tensor(layer, "ffn_gate_shexp.weight")] = block + "shared_expert.gate_proj.weight";
    m[layer_tensor(layer, "ffn_up_shexp.weight")] = block + "shared_expert.up_proj.weight";
    m[layer_tensor(layer, "ffn_down_shexp.weight")] = block + "shared_expert.down_proj.weight";
  }
}

// Part `which` (0 q, 1 k, 2 v) of a q|k|v tensor fused per head: every third block of head_dim rows.
TensorSourceRef head_rows(const std::string& hf, int64_t which, const ModelSpec& s) {
  TensorSourceRef r;
  r.name = hf;
  r.row_begin = which * s.head_dim;
  r.row_end = 3 * s.n_heads * s.head_dim;
  r.row_step = 3;
  r.row_block = s.head_dim;
  return r;
}

// The source of one canonical per-layer tensor: a whole HF tensor, rows of a fused one, or
// (hf_qk_interleaved) q/k rows to permute to half-split order.
std::string hf_layer_source(const ModelSpec& s, const FamilyInfo& fam, const HfLayerTensor& t, const std::string& hf) {
  const int64_t q = s.n_heads * s.head_dim, kv = s.n_kv_heads * s.head_dim, F = s.intermediate_size;
  const std::string canon = t.canonical;
  switch (t.part) {
    case RowPart::Whole: break;
    case RowPart::Q: return format_tensor_source({hf, 0, q, 0});
    case RowPart::K: return format_tensor_source({hf, q, q + kv, 0});
    case RowPart::V: return format_tensor_source({hf, q + kv, q + 2 * kv, 0});
    case RowPart::Gate: return format_tensor_source({hf, 0, F, 0});
    case RowPart::Up: return format_tensor_source({hf, F, 2 * F, 0});
    // Per head: D rows of q, then k, then v (no grouped-query attention: q == kv).
    case RowPart::HeadQ: return format_tensor_source(head_rows(hf, 0, s));
    case RowPart::HeadK: return format_tensor_source(head_rows(hf, 1, s));
    case RowPart::HeadV: return format_tensor_source(head_rows(hf, 2, s));
    case RowPart::KvbK:
    case RowPart::KvbV: {
      TensorSourceRef r{hf};
      r.head_period = s.qk_nope_dim + s.v_head_dim;
      r.head_begin = t.part == RowPart::KvbK ? 0 : s.qk_nope_dim;
      r.head_end = t.part == RowPart::KvbK ? s.qk_nope_dim : r.head_period;
      if (t.part == RowPart::KvbK) r.transposed_blocks = s.n_heads;
      return format_tensor_source(r);
    }
  }
  // The q/k biases (attention_bias) are rows of the same outputs: permuted like the weights.
  const bool is_q = canon == "attn_q.weight" || canon == "attn_q.bias", is_k = canon == "attn_k.weight" || canon == "attn_k.bias";
  if (fam.hf_qk_interleaved && is_q) return format_tensor_source({hf, -1, -1, s.n_heads});
  if (fam.hf_qk_interleaved && is_k) return format_tensor_source({hf, -1, -1, s.n_kv_heads});
  return hf;
}

// Every canonical tensor the spec implies, mapped to its HF name by the family's table.
void fill_tensor_sources(const FamilyInfo& fam, bool mxfp4, ModelSpec& s) {
  const std::vector<std::string> wanted = canonical_tensor_names(s);
  const std::set<std::string> want(wanted.begin(), wanted.end());
  auto& m = s.tensor_sources;
  const HfTensorNames& names = fam.hf_names;
  m["token_embd.weight"] = names.embedding;
  m["output_norm.weight"] = names.final_norm;
  if (!s.tie_word_embeddings) m["output.weight"] = names.output;
  auto bias_of = [](const std::string& w) { return w.substr(0, w.size() - std::string("weight").size()) + "bias"; };
  if (s.norm_bias) m["output_norm.bias"] = bias_of(names.final_norm);
  if (s.output_bias) m["output.bias"] = bias_of(names.output);
  bool fused = false;
  for (int64_t i = 0; i < s.n_layers; ++i) {
    const std::string p = names.layers + std::to_string(i) + ".";
    for (const HfLayerTensor& t : names.layer) {
      const std::string canon = layer_tensor(i, t.canonical);
      if (!want.count(canon)) continue;
      m[canon] = hf_layer_source(s, fam, t, p + t.hf);
      fused = fused || t.part != RowPart::Whole;
    }
    if (s.layers[static_cast<size_t>(i)].moe) expert_sources(fam, i, p, mxfp4, s);
  }
  for (const std::string& n : wanted)
    if (!m.count(n)) fail(ErrorKind::Internal, "family table", std::string(fam.name) + " has no HF name for tensor '" + n + "'");
  if (fused) s.source_notes.push_back("fused q|k|v (and gate|up) projections split into q/k/v (and gate/up)");
  if (fam.hf_qk_interleaved) s.source_notes.push_back("q_proj/k_proj rows permuted from interleaved (Llama 4) to half-split RoPE order");
}

// The family row of config.json's `architectures[0]`; throws Unsupported naming it.
const FamilyInfo& family_of(const json& root, const std::string& where, ModelSpec& s) {
  auto arch_it = root.find("architectures");
  if (arch_it == root.end() || !arch_it->is_array() || arch_it->empty() || !(*arch_it)[0].is_string())
    fail(ErrorKind::Corrupt, where + ": field 'architectures'", "missing or not a list of names");
  s.architecture = (*arch_it)[0].get<std::string>();
  const FamilyInfo* fam = find_family_by_hf_arch(s.architecture);
  if (!fam)
    fail(ErrorKind::Unsupported, where + ": field 'architectures'",
         "architecture '" + s.architecture + "' is not supported (" + supported_family_list() + " are)");
  if (fam->block == Block::Unsupported) fail(ErrorKind::Unsupported, where + ": field 'architectures'", s.architecture + ": " + fam->unsupported_why);
  if (s.architecture == "Mistral3ForConditionalGeneration") {
    // Its text model is the text_config's: Ministral 3, or Mistral (Mistral Small 3.1 / 3.2).
    const json* tc = root.contains("text_config") && root["text_config"].is_object() ? &root["text_config"] : nullptr;
    const json* mt = tc && tc->contains("model_type") ? &(*tc)["model_type"] : nullptr;
    const std::string type = mt && mt->is_string() ? mt->get<std::string>() : "";
    if (type == "mistral") fam = &family_info(Family::Mistral);
    else if (type != "ministral3")
      fail(ErrorKind::Unsupported, where + ": field 'text_config.model_type'",
           "Mistral3ForConditionalGeneration with a text model '" + type + "' is not supported ('ministral3' and 'mistral' are)");
  }
  s.family = fam->name;
  return *fam;
}

void read_dimensions(const Cfg& c, const FamilyInfo& fam, ModelSpec& s) {
  s.vocab_size = c.integer("vocab_size");
  s.hidden_size = c.integer("hidden_size");
  s.n_layers = c.integer("num_hidden_layers", 1, 4096);
  s.n_heads = c.integer("num_attention_heads", 1, 1 << 16);
  s.n_kv_heads = c.integer_or("num_key_value_heads", s.n_heads, 1, 1 << 16);
  if (!fam.hf_kv_heads && s.n_kv_heads != s.n_heads)
    c.bad("num_key_value_heads", std::string(fam.display) + "'s modeling gives every query head its own k/v head (" +
                                     std::to_string(s.n_heads) + "), not " + std::to_string(s.n_kv_heads));
  if (s.n_heads % s.n_kv_heads != 0) c.bad("num_key_value_heads", std::to_string(s.n_kv_heads) + " does not divide num_attention_heads " + std::to_string(s.n_heads));
  if (fam.hf_mla) {
    // Latent attention: each head's query/key is qk_nope + qk_rope wide, its value v_head_dim.
    // transformers 5 writes head_dim = qk_rope_head_dim (the rotary width); any other is refused.
    s.kv_lora_rank = c.integer("kv_lora_rank", 1, 1 << 16);
    const json* ql = c.find("q_lora_rank");
    s.q_lora_rank = ql && !ql->is_null() ? c.integer("q_lora_rank", 1, 1 << 16) : 0;
    s.qk_nope_dim = c.integer("qk_nope_head_dim", 1, 1 << 16);
    s.rope_dim = c.integer("qk_rope_head_dim", 2, 1 << 16);
    if (s.rope_dim % 2) c.bad("qk_rope_head_dim", "must be even");
    s.v_head_dim = c.integer("v_head_dim", 1, 1 << 16);
    s.head_dim = s.qk_nope_dim + s.rope_dim;
    if (c.j.contains("head_dim") && !c.j["head_dim"].is_null() && c.integer("head_dim") != s.rope_dim)
      c.bad("head_dim", "is not qk_rope_head_dim (" + std::to_string(s.rope_dim) + "), as " + fam.display + "'s config class sets it");
    if (s.n_kv_heads != s.n_heads)
      c.bad("num_key_value_heads", std::string(fam.display) + "'s latent attention has one key and value per query head (" + std::to_string(s.n_heads) + ")");
  } else if ((!fam.hf_head_dim || !c.present("head_dim")) && s.hidden_size % s.n_heads != 0)
    c.bad("num_attention_heads", "does not divide hidden_size" + std::string(fam.hf_head_dim ? " and no head_dim is given" : ""));
  if (!fam.hf_mla) s.head_dim = c.integer_or("head_dim", s.hidden_size / s.n_heads, 1, 1 << 16);
  if (!fam.hf_head_dim && !fam.hf_mla && s.head_dim != s.hidden_size / s.n_heads)
    c.bad("head_dim", std::to_string(s.head_dim) + " differs from hidden_size / num_attention_heads (" + std::to_string(s.hidden_size / s.n_heads) +
                          "), which " + fam.display + "'s modeling uses whatever the config says");
  s.max_position_embeddings = c.integer_or("max_position_embeddings", 0);
  s.norm_eps = static_cast<float>(c.number_or(fam.hf_norm_eps_key, 1e-6));
  if (!(s.norm_eps >= 0) || s.norm_eps > 1) c.bad(fam.hf_norm_eps_key, "must be in [0, 1]");
  s.intermediate_size = c.integer(fam.hf_ffn_size_key);
  if (fam.qk_l2_norm) s.qk_l2_norm = c.boolean_or("use_qk_norm", true);
  if (fam.attn_temperature && c.boolean_or("attn_temperature_tuning", true)) {
    s.attn_temperature_scale = static_cast<float>(c.number_or("attn_scale", 0.1));
    s.attn_temperature_floor = c.integer_or("floor_scale", 8192, 1);
  }
}

// RoPE per kind of layer: the v4 form (rope_theta + rope_scaling, Gemma 3's
// rope_local_base_freq for its sliding layers) and the v5 form (rope_parameters, flat or nested
// by layer type) give the same values.
struct RopeByKind {
  LayerRope full, sliding, chunked;
  bool nested = false;  // rope_parameters keyed by layer type: every kind must have its entry
  std::set<std::string> given;  // the nested form's keys
};

constexpr const char* kLayerTypeNames[] = {"full_attention", "sliding_attention", "chunked_attention"};

bool keyed_by_layer_type(const json& d) {
  if (!d.is_object() || d.empty()) return false;
  for (auto it = d.begin(); it != d.end(); ++it)
    if (std::find(std::begin(kLayerTypeNames), std::end(kLayerTypeNames), it.key()) == std::end(kLayerTypeNames)) return false;
  return true;
}

// partial_rotary_factor: v5 may keep it inside rope_parameters (per layer type, too); ptn has one
// rotary width per model.
double partial_rotary(const Cfg& c, const FamilyInfo& fam, const json* d, bool nested) {
  std::optional<double> found;
  std::string found_at;
  auto take = [&](const json& obj, const std::string& field) {
    if (!obj.is_object() || !obj.contains("partial_rotary_factor") || obj["partial_rotary_factor"].is_null()) return;
    Cfg r{obj, c.where + ": " + field};
    const double v = r.number_or("partial_rotary_factor", 1.0);
    if (found && *found != v)
      fail(ErrorKind::Unsupported, c.where + ": field '" + field + ".partial_rotary_factor'",
           "differs from " + found_at + " (" + std::to_string(*found) + "); ptn rotates the same width on every layer");
    found = v;
    found_at = field + ".partial_rotary_factor";
  };
  if (d && nested) {
    for (auto it = d->begin(); it != d->end(); ++it) take(it.value(), "rope_parameters." + it.key());
  } else if (d) {
    take(*d, "rope_parameters");
  }
  // The top-level key (GPT-NeoX 4.x: rotary_pct); the family's default for it only when
  // rope_parameters does not say (transformers 5 moves it there).
  const char* key = fam.hf_partial_rotary_key;
  if (c.j.contains(key) || (!found && c.present(key))) {
    const double top = c.number_or(key, 1.0);
    if (found && *found != top) c.bad(key, "differs from " + found_at + " (" + std::to_string(*found) + ")");
    found = top;
  }
  return found.value_or(1.0);
}

RopeByKind read_rope(const Cfg& c, const FamilyInfo& fam, ModelSpec& s) {
  const double top_theta = c.number_or(fam.hf_rope_theta_key, 10000.0);
  if (!(top_theta > 0)) c.bad(fam.hf_rope_theta_key, "must be positive");
  // transformers 5 reads `rope_scaling` as an alias of `rope_parameters` and prefers it.
  auto non_empty = [&](const char* k) -> const json* {
    const json* v = c.find(k);
    return v && !(v->is_object() && v->empty()) ? v : nullptr;
  };
  const json* scaling = non_empty("rope_scaling");
  const json* params = non_empty("rope_parameters");
  RopeByKind rk;
  const json* d = scaling ? scaling : params;
  const std::string field = scaling ? "rope_scaling" : "rope_parameters";
  const double local_theta = fam.local_rope_base ? c.number_or("rope_local_base_freq", 10000.0) : top_theta;
  if (fam.local_rope_base && !(local_theta > 0)) c.bad("rope_local_base_freq", "must be positive");
  if (d && keyed_by_layer_type(*d)) {
    rk.nested = true;
    for (auto it = d->begin(); it != d->end(); ++it) {
      const std::string key = it.key();
      const double theta = key == "sliding_attention" ? local_theta : top_theta;
      // A null entry is the default RoPE at the kind's base (as Gemma 3's config class fills it).
      LayerRope lr = it.value().is_null() ? LayerRope{theta, {}}
                                          : parse_rope_dict(c, it.value(), field + "." + key, theta, s.max_position_embeddings);
      (key == "full_attention" ? rk.full : key == "sliding_attention" ? rk.sliding : rk.chunked) = lr;
      rk.given.insert(key);
    }
  } else {
    LayerRope lr = d ? parse_rope_dict(c, *d, field, top_theta, s.max_position_embeddings) : LayerRope{top_theta, {}};
    rk.full = rk.sliding = rk.chunked = lr;
    // Gemma 3: the scaling is the global layers'; sliding layers keep their own base, unscaled.
    if (fam.local_rope_base) rk.sliding = LayerRope{local_theta, {}};
    if (fam.sliding_rope_unscaled) rk.sliding = LayerRope{top_theta, {}};
  }
  if (fam.rope_temperature) {
    // Ministral 3: q *= 1 + beta * log(1 + floor(pos / original_max_position_embeddings)) on every
    // layer, both read from the rope parameters (its modeling requires them: no defaults).
    if (!d || rk.nested) fail(ErrorKind::Unsupported, c.where + ": field '" + field + "'", std::string(fam.display) + " needs one rope parameters dict with llama_4_scaling_beta");
    const std::string w = c.where + ": field '" + field + ".";
    const json* beta = d->contains("llama_4_scaling_beta") ? &(*d)["llama_4_scaling_beta"] : nullptr;
    if (!beta || !beta->is_number() || !(beta->get<double>() >= 0) || beta->get<double>() > 100)
      fail(ErrorKind::Corrupt, w + "llama_4_scaling_beta'", "missing or not a number in [0, 100]");
    if (beta->get<double>() > 0) {
      const json* orig = d->contains("original_max_position_embeddings") ? &(*d)["original_max_position_embeddings"] : nullptr;
      if (!orig || !orig->is_number_integer() || orig->get<int64_t>() < 1 || orig->get<int64_t>() > (int64_t{1} << 40))
        fail(ErrorKind::Corrupt, w + "original_max_position_embeddings'", "missing or not a positive integer (the query temperature's period)");
      s.attn_temperature_scale = static_cast<float>(beta->get<double>());
      s.attn_temperature_floor = orig->get<int64_t>();
      s.attn_temperature_all_layers = true;
    }
  }
  if (fam.hf_mla) {  // the rotary part is qk_rope_head_dim (read_dimensions); DeepSeek's softmax scale grows with
                     // yarn's mscale_all_dim: 1/sqrt(qk_nope + qk_rope) * mscale(factor, mscale_all_dim)^2
    s.attn_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
    if (d && !rk.nested && rk.full.scaling.type == RopeScalingType::Yarn) {
      Cfg r{*d, c.where + ": " + field};
      const double m = r.number_or("mscale_all_dim", 0.0);
      s.attn_mscale_all_dim = static_cast<float>(m);
      if (m != 0) s.attn_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)) *
                                                    yarn_mscale(rk.full.scaling.factor, m) * yarn_mscale(rk.full.scaling.factor, m));
    } else if (d && rk.full.scaling.type != RopeScalingType::None) {
      fail(ErrorKind::Unsupported, c.where + ": field '" + field + "'", std::string(fam.display) + " with RoPE scaling other than one yarn dict is not supported");
    }
    return rk;
  }
  const double partial = partial_rotary(c, fam, params && !scaling ? params : nullptr, rk.nested);
  if (!(partial > 0 && partial <= 1)) c.bad(fam.hf_partial_rotary_key, "must be in (0, 1]");
  s.rope_dim = static_cast<int64_t>(s.head_dim * partial);
  if (s.rope_dim % 2) c.bad(fam.hf_partial_rotary_key, "gives an odd rotary dimension");
  for (const LayerRope* lr : {&rk.full, &rk.sliding, &rk.chunked})
    if (lr->scaling.type == RopeScalingType::LongRope && static_cast<int64_t>(lr->scaling.freq_divisors.size()) != s.rope_dim / 2)
      fail(ErrorKind::Corrupt, c.where + ": field '" + field + ".short_factor'",
           "has " + std::to_string(lr->scaling.freq_divisors.size()) + " values for a rotary dimension of " + std::to_string(s.rope_dim) +
               " (needs " + std::to_string(s.rope_dim / 2) + ")");
  return rk;
}

// Each layer's RoPE base and scaling from its kind. ModelSpec holds one scaling and a flag per
// layer for whether it applies, so kinds that scale differently are refused. Without any scaling
// the flag stays as before: false only on the sliding layers of a family with a local base.
void assign_rope(const Cfg& c, const FamilyInfo& fam, const RopeByKind& rk, ModelSpec& s) {
  auto kind_name = [](const LayerAttention& l) {
    return l.kind == AttnKind::Window ? "sliding_attention" : l.kind == AttnKind::Chunk ? "chunked_attention" : "full_attention";
  };
  auto rope_of = [&](const LayerAttention& l) -> const LayerRope& {
    return l.kind == AttnKind::Window ? rk.sliding : l.kind == AttnKind::Chunk ? rk.chunked : rk.full;
  };
  const RopeScaling* scaling = nullptr;
  std::string scaling_kind;
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const LayerAttention& l = s.layers[i];
    const char* kind = kind_name(l);
    if (!l.use_rope) continue;
    if (rk.nested && !rk.given.count(kind))
      fail(ErrorKind::Corrupt, c.where + ": field 'rope_parameters'",
           std::string("has no entry for '") + kind + "' (layer " + std::to_string(i) + " is one)");
    const RopeScaling& rs = rope_of(l).scaling;
    if (rs.type == RopeScalingType::None) continue;
    if (scaling && !same_scaling(*scaling, rs))
      fail(ErrorKind::Unsupported, c.where + ": field 'rope_parameters." + kind + "'",
           "scales RoPE differently from '" + scaling_kind + "'; ptn has one RoPE scaling per model");
    scaling = &rs;
    scaling_kind = kind;
  }
  for (LayerAttention& l : s.layers) {
    const LayerRope& lr = rope_of(l);
    l.rope_theta = static_cast<float>(lr.theta);
    l.rope_scaling = scaling ? lr.scaling.type != RopeScalingType::None
                             : !((fam.local_rope_base || fam.sliding_rope_unscaled) && l.kind == AttnKind::Window);
  }
  s.rope_theta = static_cast<float>(rk.full.theta);
  s.rope_scaling = scaling ? *scaling : RopeScaling{};
  if (s.rope_scaling.type == RopeScalingType::LongRope) {
    const int64_t orig = s.rope_scaling.original_max_position;
    if (s.max_position_embeddings == 0 || s.max_position_embeddings > orig) {
      s.source_notes.push_back("longrope: positions limited to original_max_position_embeddings " + std::to_string(orig) +
                               " (max_position_embeddings " + std::to_string(s.max_position_embeddings) +
                               "); past it transformers switches whole steps to long_factor, which ptn does not express");
      s.max_position_embeddings = orig;
    }
  }
}

// Activation, biases, norms, embedding and attention scales: the family's facts, and the
// config keys that the family reads.
void read_features(const Cfg& c, const FamilyInfo& fam, const json& root, ModelSpec& s) {
  std::string act = c.string_or("hidden_activation", c.string_or("hidden_act", "silu"));
  if (act == "silu" || act == "swish") s.activation = Activation::SiLU;
  // gelu_new and gelu_fast are transformers' other spellings of the same tanh formula.
  else if (act == "gelu_pytorch_tanh" || act == "gelu_tanh" || act == "gelu_new" || act == "gelu_fast") s.activation = Activation::GeLUTanh;
  else if (act == "gelu") s.activation = Activation::GeLU;
  else fail(ErrorKind::Unsupported, c.where + ": field 'hidden_act'", "activation '" + act + "' is not supported");
  if (fam.plain_mlp && s.activation == Activation::SiLU)
    fail(ErrorKind::Unsupported, c.where + ": field 'hidden_act'",
         "activation '" + act + "' in " + fam.display + "'s MLP without a gate is not supported (ptn runs GELU there, tanh or exact)");

  s.tie_word_embeddings = c.boolean_or("tie_word_embeddings", root.is_object() && root.contains("tie_word_embeddings") && root["tie_word_embeddings"].is_boolean() ? root["tie_word_embeddings"].get<bool>() : fam.tie_by_default);
  switch (fam.attn_bias) {
    case AttnBias::None: break;
    case AttnBias::QkvAlways: s.attn_bias = true; break;
    case AttnBias::FromConfig: s.attn_bias = s.attn_output_bias = c.boolean_or("attention_bias", false); break;
    case AttnBias::QkvFromConfig: s.attn_bias = c.boolean_or("use_qkv_bias", false); break;
    case AttnBias::All: s.attn_bias = s.attn_output_bias = s.mlp_bias = true; break;
    case AttnBias::AllFromConfig: s.attn_bias = s.attn_output_bias = s.mlp_bias = c.boolean_or("use_bias", true); break;
    case AttnBias::QkvFromAttentionBias: s.attn_bias = c.boolean_or("attention_bias", true); break;
  }
  s.layer_norm = fam.layer_norm;
  s.norm_bias = fam.layer_norm_bias;
  if (fam.mlp_bias_always) s.mlp_bias = true;
  s.parallel_residual = fam.parallel_residual || (*fam.hf_parallel_key && c.boolean_or(fam.hf_parallel_key, false));
  s.parallel_ffn_norm = s.parallel_residual && fam.parallel_ffn_norm;
  s.plain_mlp = fam.plain_mlp;
  s.rope_interleaved = fam.rope_interleaved;
  // DeepSeek V3: q_pe/k_pe on interleaved pairs unless rope_interleave is false (rotate_half then).
  if (fam.hf_moe == HfMoe::DeepseekV3) s.rope_interleaved = c.boolean_or("rope_interleave", true);
  s.output_bias = fam.output_bias;
  if (*fam.hf_qk_layernorm_key && c.boolean_or(fam.hf_qk_layernorm_key, false))
    fail(ErrorKind::Unsupported, c.where + ": field '" + fam.hf_qk_layernorm_key + "'",
         std::string("per-head q/k LayerNorms (") + fam.display + ") are not supported");
  if (fam.hf_logit_scale_mul) {
    const double v = c.number_or("logit_scale", 1.0);
    if (!(v > 0) || !std::isfinite(v)) c.bad("logit_scale", "must be a finite positive number");
    s.logit_scale = static_cast<float>(1.0 / v);  // the graph divides by logit_scale
  }
  if (c.boolean_or("mlp_bias", false)) {
    if (!fam.hf_mlp_bias)
      fail(ErrorKind::Unsupported, c.where + ": field 'mlp_bias'", std::string(fam.display) + "'s MLP has no biases in transformers; this config cannot be run as written");
    s.mlp_bias = true;
  }
  s.qk_norm = fam.qk_norm;
  s.qk_norm_full = fam.qk_norm_full;
  if (fam.hf_moe == HfMoe::Olmoe && c.find("clip_qkv"))
    c.bad("clip_qkv", "clamping q/k/v (OLMoE's clip_qkv) is not supported");
  s.norm_weight_plus_one = fam.norm_weight_plus_one;
  s.sandwich_norms = fam.sandwich_norms;
  s.pre_norms = !fam.no_pre_norms;
  if (fam.granite_multipliers) {
    auto positive = [&](const char* key) {
      const double v = c.number_or(key, 1.0);
      if (!(v > 0) || !std::isfinite(v)) c.bad(key, "must be a finite positive number");
      return static_cast<float>(v);
    };
    s.embed_scale = positive("embedding_multiplier");
    s.attn_scale = positive("attention_multiplier");
    s.residual_scale = positive("residual_multiplier");
    s.logit_scale = positive("logits_scaling");
  }
  if (fam.embed_scale == EmbedScale::SqrtHidden) s.embed_scale = std::sqrt(static_cast<float>(s.hidden_size));
  if (fam.query_pre_attn_scalar) {
    const double qpas = c.number_or("query_pre_attn_scalar", static_cast<double>(s.head_dim));
    if (!(qpas > 0)) c.bad("query_pre_attn_scalar", "must be positive");
    s.attn_scale = static_cast<float>(1.0 / std::sqrt(qpas));
  }
  if (fam.logit_softcaps) {
    s.attn_logit_softcap = static_cast<float>(c.number_or("attn_logit_softcapping", 0.0));
    s.final_logit_softcap = static_cast<float>(c.number_or("final_logit_softcapping", 0.0));
  }
}

}  // namespace

ModelSpec model_spec_from_hf_config(const json& root, const std::string& where) {
  if (!root.is_object()) fail(ErrorKind::Corrupt, where, "config is not a JSON object");
  ModelSpec s;
  const FamilyInfo& fam = family_of(root, where, s);
  const json* text = &root;
  std::string cwhere = where;
  if (auto tc = root.find("text_config"); tc != root.end() && tc->is_object()) {
    text = &*tc;
    cwhere = where + ": text_config";
  }
  Cfg c{*text, cwhere, config_defaults(fam)};
  read_dimensions(c, fam, s);
  const RopeByKind rope = read_rope(c, fam, s);
  read_features(c, fam, root, s);
  fill_layers(c, fam, s);
  read_experts(c, fam, s);
  assign_rope(c, fam, rope, s);
  s.attn_sinks = fam.attn_sinks;
  // A checkpoint's quantization: only gpt-oss's own MXFP4 experts are read as they are.
  bool mxfp4 = false;
  if (auto q = root.find("quantization_config"); q != root.end() && !q->is_null()) {
    const std::string qwhere = where + ": field 'quantization_config.quant_method'";
    const json* m = q->is_object() && q->contains("quant_method") ? &(*q)["quant_method"] : nullptr;
    const std::string method = m && m->is_string() ? m->get<std::string>() : "";
    if (method != "mxfp4" || fam.hf_moe != HfMoe::GptOss)
      fail(ErrorKind::Unsupported, qwhere,
           "'" + method + "': checkpoints quantized by transformers are not read" +
               (fam.hf_moe == HfMoe::GptOss ? " (gpt-oss's own mxfp4 is)" : " (give the unquantized checkpoint, or a GGUF)"));
    s.source_notes.push_back("MXFP4 experts read as they are (blocks and scales repacked, values unchanged)");
    mxfp4 = true;
  }
  fill_tensor_sources(fam, mxfp4, s);
  return s;
}

ModelSpec model_spec_from_hf_config_file(const std::string& path) {
  std::string text = read_text_file(path, 16u << 20);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(ErrorKind::Corrupt, path, std::string("malformed JSON: ") + e.what());
  }
  return model_spec_from_hf_config(j, path);
}

}  // namespace ptn
