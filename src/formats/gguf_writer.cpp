#include "formats/gguf_writer.h"

#include <cmath>
#include <cstring>
#include <map>

#include "core/error.h"
#include "core/file.h"
#include "core/quant.h"
#include "formats/families.h"
#include "formats/gguf_spec.h"

namespace ptn {

namespace {

template <class T>
void append(std::string& s, T v) {
  static_assert(std::is_trivially_copyable_v<T>);
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void append_str(std::string& s, std::string_view v) {
  append<uint64_t>(s, v.size());
  s.append(v.data(), v.size());
}

}  // namespace

// ---- container -------------------------------------------------------------------------------

GgufWriter::GgufWriter(uint64_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    fail(ErrorKind::InvalidArgument, "gguf writer", "alignment " + std::to_string(alignment) + " is not a power of two");
  if (alignment != 32) set_u32("general.alignment", static_cast<uint32_t>(alignment));
}

void GgufWriter::put(const std::string& key, GgufType type, std::string bytes) {
  if (key.empty()) fail(ErrorKind::InvalidArgument, "gguf writer", "empty key");
  for (auto& kv : kv_)
    if (kv.key == key) { kv.type = static_cast<uint32_t>(type); kv.bytes = std::move(bytes); return; }
  kv_.push_back({key, static_cast<uint32_t>(type), std::move(bytes)});
}
bool GgufWriter::has_key(const std::string& key) const {
  for (const auto& kv : kv_) if (kv.key == key) return true;
  return false;
}

void GgufWriter::set_u32(const std::string& k, uint32_t v) { std::string b; append(b, v); put(k, GgufType::U32, b); }
void GgufWriter::set_i32(const std::string& k, int32_t v) { std::string b; append(b, v); put(k, GgufType::I32, b); }
void GgufWriter::set_u64(const std::string& k, uint64_t v) { std::string b; append(b, v); put(k, GgufType::U64, b); }
void GgufWriter::set_f32(const std::string& k, float v) { std::string b; append(b, v); put(k, GgufType::F32, b); }
void GgufWriter::set_bool(const std::string& k, bool v) { std::string b; append<uint8_t>(b, v ? 1 : 0); put(k, GgufType::Bool, b); }
void GgufWriter::set_string(const std::string& k, const std::string& v) { std::string b; append_str(b, v); put(k, GgufType::String, b); }
void GgufWriter::set_string_array(const std::string& k, const std::vector<std::string>& v) {
  std::string b;
  append<uint32_t>(b, static_cast<uint32_t>(GgufType::String));
  append<uint64_t>(b, v.size());
  for (const auto& s : v) append_str(b, s);
  put(k, GgufType::Array, b);
}
void GgufWriter::set_f32_array(const std::string& k, const std::vector<float>& v) {
  std::string b;
  append<uint32_t>(b, static_cast<uint32_t>(GgufType::F32));
  append<uint64_t>(b, v.size());
  for (float x : v) append(b, x);
  put(k, GgufType::Array, b);
}
void GgufWriter::set_i32_array(const std::string& k, const std::vector<int32_t>& v) {
  std::string b;
  append<uint32_t>(b, static_cast<uint32_t>(GgufType::I32));
  append<uint64_t>(b, v.size());
  for (int32_t x : v) append(b, x);
  put(k, GgufType::Array, b);
}
void GgufWriter::set_raw(const std::string& k, GgufType type, std::string_view encoded) { put(k, type, std::string(encoded)); }

void GgufWriter::add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, std::function<Tensor()> produce) {
  for (const auto& t : tensors_)
    if (t.name == name) fail(ErrorKind::InvalidArgument, "gguf writer: tensor '" + name + "'", "added twice");
  if (shape.size() > static_cast<size_t>(kMaxDims)) fail(ErrorKind::InvalidArgument, "gguf writer: tensor '" + name + "'", "more than 4 dimensions");
  uint64_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) rows = checked_mul(rows, static_cast<uint64_t>(shape[i]), name);
  uint64_t nbytes = shape.empty() ? traits(dtype).block_bytes : checked_mul(rows, row_bytes(dtype, shape.back(), "gguf writer: tensor '" + name + "'"), name);
  tensors_.push_back({name, dtype, std::move(shape), nbytes, std::move(produce)});
}

void GgufWriter::add_tensor(const std::string& name, const Tensor& t) {
  Tensor keep = t;
  add_tensor(name, t.dtype(), t.shape(), [keep] { return keep; });
}

void GgufWriter::write(const std::string& path, const std::function<void(size_t, size_t)>& progress) const {
  std::string head;
  append<uint32_t>(head, 0x46554747);  // "GGUF"
  append<uint32_t>(head, 3);
  append<uint64_t>(head, tensors_.size());
  append<uint64_t>(head, kv_.size());
  for (const auto& kv : kv_) {
    append_str(head, kv.key);
    append<uint32_t>(head, kv.type);
    head += kv.bytes;
  }
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const auto& t : tensors_) {
    append_str(head, t.name);
    append<uint32_t>(head, static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) append<uint64_t>(head, static_cast<uint64_t>(*it));
    append<uint32_t>(head, static_cast<uint32_t>(t.dtype));
    append<uint64_t>(head, offset);
    offsets.push_back(offset);
    offset = (offset + t.nbytes + alignment_ - 1) / alignment_ * alignment_;
  }
  FileWriter f(path);
  f.write(head.data(), head.size());
  f.pad_to(alignment_);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const TensorEntry& e = tensors_[i];
    Tensor t = e.produce();
    const std::string w = path + ": tensor '" + e.name + "'";
    if (t.dtype() != e.dtype || t.shape() != e.shape)
      fail(ErrorKind::Internal, w, "produced " + t.describe() + ", expected " + std::string(dtype_name(e.dtype)) + shape_str(e.shape));
    if (!t.contiguous()) t = t.copy();
    f.write(t.data(), e.nbytes);
    f.pad_to(alignment_);
    if (progress) progress(i + 1, tensors_.size());
  }
  f.commit();
}

// ---- file types and the K mixes ---------------------------------------------------------------

GgufFileType gguf_file_type_from_name(const std::string& n) {
  if (n == "f32") return GgufFileType::F32;
  if (n == "f16") return GgufFileType::F16;
  if (n == "bf16") return GgufFileType::BF16;
  if (n == "q8_0") return GgufFileType::Q8_0;
  if (n == "q4_0") return GgufFileType::Q4_0;
  if (n == "q4_k_m") return GgufFileType::Q4_K_M;
  if (n == "q3_k_m") return GgufFileType::Q3_K_M;
  if (n == "q2_k") return GgufFileType::Q2_K;
  if (n == "tq1_0") return GgufFileType::TQ1_0;
  if (n == "tq2_0") return GgufFileType::TQ2_0;
  if (n == "iq4_nl") return GgufFileType::IQ4_NL;
  if (n == "iq4_xs") return GgufFileType::IQ4_XS;
  const std::string known = "(f32, f16, bf16, q8_0, q4_0, q4_k_m, q3_k_m, q2_k, tq1_0, tq2_0, iq4_nl, iq4_xs)";
  if (const auto t = dtype_from_name(n); t && traits(*t).quantized)
    fail(ErrorKind::InvalidArgument, "--type",
         "'" + n + "' is a tensor type ptn reads, not a GGUF file type it writes" +
             (can_quantize(*t) ? "" : std::string(" (ptn has no ") + dtype_name(*t) + " quantizer)") + ": use one of " + known);
  fail(ErrorKind::InvalidArgument, "--type", "unknown type '" + n + "' " + known);
}

const char* gguf_file_type_name(GgufFileType t) {
  switch (t) {
    case GgufFileType::F32: return "f32";
    case GgufFileType::F16: return "f16";
    case GgufFileType::BF16: return "bf16";
    case GgufFileType::Q8_0: return "q8_0";
    case GgufFileType::Q4_0: return "q4_0";
    case GgufFileType::Q4_K_M: return "q4_k_m";
    case GgufFileType::Q3_K_M: return "q3_k_m";
    case GgufFileType::Q2_K: return "q2_k";
    case GgufFileType::TQ1_0: return "tq1_0";
    case GgufFileType::TQ2_0: return "tq2_0";
    case GgufFileType::IQ4_NL: return "iq4_nl";
    case GgufFileType::IQ4_XS: return "iq4_xs";
  }
  return "unknown";
}

static uint32_t llama_ftype(GgufFileType t) {  // llama.cpp's LLAMA_FTYPE_* values
  switch (t) {
    case GgufFileType::F32: return 0;
    case GgufFileType::F16: return 1;
    case GgufFileType::Q4_0: return 2;
    case GgufFileType::Q8_0: return 7;
    case GgufFileType::Q4_K_M: return 15;
    case GgufFileType::Q3_K_M: return 12;
    case GgufFileType::Q2_K: return 10;
    case GgufFileType::TQ1_0: return 36;
    case GgufFileType::TQ2_0: return 37;
    case GgufFileType::IQ4_NL: return 25;
    case GgufFileType::IQ4_XS: return 30;
    case GgufFileType::BF16: return 32;
  }
  return 0;
}

static bool ends_with(const std::string& s, const char* suf) {
  size_t n = std::strlen(suf);
  return s.size() >= n && s.compare(s.size() - n, n, suf) == 0;
}

static int64_t layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  int64_t v = 0;
  for (size_t i = 4; i < name.size() && name[i] != '.'; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

// Which layers get more bits in llama.cpp's K mixes: the first eighth of the layers, the last
// eighth, and in between every third layer counted from the end of the first eighth (the ones
// whose distance from it leaves remainder 2). Integer division throughout, as llama.cpp does.
static bool more_bits_layer(int64_t i, int64_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// llama-quantize's rules (llama.cpp 3f545becc, llama_tensor_get_type without an importance
// matrix) for the file types ptn writes, with the architectures ptn writes (no Falcon). The
// categories match by substring as llama.cpp's do: "ffn_down" also takes ffn_down_exps and
// ffn_down_shexp, and a fused attn_qkv counts as an attn_v (its counter is the layer).
DType gguf_tensor_type(GgufFileType ft, const ModelSpec& spec, const std::string& name, const std::vector<int64_t>& shape) {
  if (shape.size() < 2 || name == "rope_freqs.weight" || ends_with(name, ".bias")) return DType::F32;  // merged expert biases are 2-D
  switch (ft) {
    case GgufFileType::F32: return DType::F32;
    case GgufFileType::F16: return DType::F16;
    case GgufFileType::BF16: return DType::BF16;
    default: break;
  }
  // MoE routers are never quantized (llama-quantize leaves ffn_gate_inp* as they are).
  if (contains(name, ".ffn_gate_inp")) return DType::F32;
  const DType base = ft == GgufFileType::Q8_0   ? DType::Q8_0
                     : ft == GgufFileType::Q4_0 ? DType::Q4_0
                     : ft == GgufFileType::Q2_K ? DType::Q2_K
                     : ft == GgufFileType::Q3_K_M ? DType::Q3_K
                     : ft == GgufFileType::TQ1_0 ? DType::TQ1_0
                     : ft == GgufFileType::TQ2_0 ? DType::TQ2_0
                     : ft == GgufFileType::IQ4_NL ? DType::IQ4_NL
                     : ft == GgufFileType::IQ4_XS ? DType::IQ4_XS
                                                  : DType::Q4_K;
  const bool iq4 = ft == GgufFileType::IQ4_NL || ft == GgufFileType::IQ4_XS;
  const bool ternary = ft == GgufFileType::TQ1_0 || ft == GgufFileType::TQ2_0;
  const int64_t nx = shape.back();  // row length (GGUF ne[0])
  const int64_t layer = layer_of(name), n = spec.n_layers;
  const bool moe8 = spec.n_experts == 8;  // llama.cpp's rules for Mixtral-like models
  const int64_t gqa = spec.n_kv_heads > 0 ? spec.n_heads / spec.n_kv_heads : 1;
  // llama.cpp calls a llama-architecture model of 80 layers with grouped KV heads a 70B.
  const FamilyInfo* fam = find_family(spec.family);
  const bool is_70b = fam && std::string_view(fam->gguf_arch) == "llama" && n == 80 && gqa > 1;
  DType t = base;
  const bool is_output = name == "output.weight" || (spec.tie_word_embeddings && name == "token_embd.weight");
  if (is_output) {
    // The classifier gets Q6_K (Q8_0 stays Q8_0); rows that do not fit the base block get Q8_0.
    if (nx % traits(base).block_size != 0) t = DType::Q8_0;
    else if (base != DType::Q8_0) t = DType::Q6_K;
  } else if (name == "token_embd.weight" && ternary) {
    t = DType::Q4_K;  // (llama.cpp keeps the ternary types for the matrices trained ternary)
  } else if (contains(name, "attn_v.weight") || contains(name, "attn_qkv.weight")) {
    if (ft == GgufFileType::Q2_K) t = gqa >= 4 ? DType::Q4_K : DType::Q3_K;
    else if (ft == GgufFileType::Q3_K_M) t = layer < 2 ? DType::Q5_K : DType::Q4_K;
    else if (ft == GgufFileType::Q4_K_M && more_bits_layer(layer, n)) t = DType::Q6_K;
    else if (iq4 && gqa >= 4) t = DType::Q5_K;
    if (is_70b && (t == DType::Q3_K || t == DType::Q4_K)) t = DType::Q5_K;
    if (moe8) t = DType::Q8_0;
  } else if (contains(name, "attn_k.weight")) {
    if (moe8) t = DType::Q8_0;
  } else if (contains(name, "ffn_down")) {
    if (ft == GgufFileType::Q2_K) t = DType::Q3_K;
    else if (ft == GgufFileType::Q3_K_M) t = layer < n / 16 ? DType::Q5_K : DType::Q4_K;
    else if (ft == GgufFileType::Q4_K_M && more_bits_layer(layer, n)) t = DType::Q6_K;
    else if (iq4 && layer < n / 8) t = DType::Q5_K;  // (only without an importance matrix)
  } else if (contains(name, "attn_output.weight")) {
    const bool k_mix = ft == GgufFileType::Q2_K || ft == GgufFileType::Q3_K_M || ft == GgufFileType::Q4_K_M || iq4;
    if (moe8 && k_mix) t = DType::Q5_K;
    else if (!moe8 && ft == GgufFileType::Q2_K) t = DType::Q3_K;
    else if (!moe8 && ft == GgufFileType::Q3_K_M) t = DType::Q4_K;
  }
  // Rows that are not a multiple of the block: llama.cpp's fallbacks (Q2_K, Q3_K, TQ1_0, TQ2_0 ->
  // Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL), then F16 if that still does
  // not fit (where llama.cpp has no fallback, for IQ4_NL, it stops; ptn keeps F16).
  if (nx % traits(t).block_size != 0) {
    if (t == DType::Q2_K || t == DType::Q3_K || t == DType::TQ1_0 || t == DType::TQ2_0) t = DType::Q4_0;
    else if (t == DType::IQ4_XS) t = DType::IQ4_NL;
    else if (t == DType::Q4_K) t = DType::Q5_0;
    else if (t == DType::Q5_K) t = DType::Q5_1;
    else if (t == DType::Q6_K) t = DType::Q8_0;
    if (nx % traits(t).block_size != 0) t = DType::F16;
  }
  return t;
}

// ---- model -> GGUF ----------------------------------------------------------------------------

// The row whose architecture a family is written as; its gguf_* facts are the file layout.
static const FamilyInfo& gguf_layout_of(const ModelSpec& s) {
  const FamilyInfo* fam = find_family(s.family);
  const FamilyInfo* layout = fam && *fam->gguf_arch ? find_family_by_gguf_arch(fam->gguf_arch) : nullptr;
  if (!layout)
    fail(ErrorKind::Unsupported, "GGUF output", "family '" + s.family + "' has no GGUF writer in ptn (" + gguf_writable_family_list() + ")");
  return *layout;
}

// Experts on layer i when (i + 1) % step == 0: the step that gives the spec's MoE layers, or 0.
static int64_t llama4_moe_step(const ModelSpec& s) {
  for (int64_t step = 1; step <= s.n_layers; ++step) {
    bool same = true;
    for (int64_t i = 0; i < s.n_layers; ++i) same = same && s.layers[static_cast<size_t>(i)].moe == ((i + 1) % step == 0);
    if (same) return step;
  }
  return 0;
}

// What llama.cpp's llama4 graph fixes in its code (formats/gguf_spec.cpp reads the same): a spec
// that differs would run differently there, so it is refused by name.
static void check_llama4(const ModelSpec& s, const std::string& arch) {
  auto refuse = [&](const std::string& where, const std::string& what) {
    fail(ErrorKind::Unsupported, "GGUF output" + where, what + " cannot be expressed in the '" + arch + "' GGUF architecture");
  };
  if (s.n_experts == 0) refuse("", "a Llama 4 without experts (llama.cpp's llama4 architecture requires them)");
  if (!s.expert_sigmoid || !s.expert_weight_input || s.shared_expert_gate || s.shared_expert_ffn_size != s.expert_ffn_size || s.norm_topk_prob)
    refuse("", "experts other than Llama 4's (sigmoid scores on the expert's input, not renormalised, an ungated shared expert as wide as the experts)");
  if (llama4_moe_step(s) == 0) refuse("", "layers of experts that are not every n-th layer");
  if (s.qk_l2_norm != (s.n_experts != 128))
    refuse("", std::string("the q/k L2 norm ") + (s.qk_l2_norm ? "on" : "off") + " with " + std::to_string(s.n_experts) +
                   " experts (llama.cpp turns it off for 128 experts only)");
  bool nope = false;
  for (int64_t i = 0; i < s.n_layers; ++i) {
    const LayerAttention& l = s.layers[static_cast<size_t>(i)];
    const std::string where = ": layer " + std::to_string(i);
    if (l.use_rope != ((i + 1) % 4 != 0)) refuse(where, std::string(l.use_rope ? "RoPE" : "NoPE") + " (llama.cpp skips RoPE on every 4th layer exactly)");
    if (l.kind == AttnKind::Window) refuse(where, "a window layer");
    if (l.kind == AttnKind::Chunk && l.span != 8192) refuse(where, "a chunk of " + std::to_string(l.span) + " tokens (llama.cpp's is 8192)");
    if (l.kind == AttnKind::Full && l.use_rope) refuse(where, "a full-attention RoPE layer (llama.cpp chunks these)");
    if (l.kind == AttnKind::Chunk && !l.use_rope) refuse(where, "a chunked NoPE layer (llama.cpp's NoPE layers attend to everything)");
    if (l.rope_theta != s.rope_theta || !l.rope_scaling) refuse(where, "a RoPE base or scaling of its own");
    nope = nope || !l.use_rope;
  }
  if (nope && (s.attn_temperature_scale != 0.1f || s.attn_temperature_floor != 8192))
    refuse("", "attention temperature scale " + std::to_string(s.attn_temperature_scale) + ", floor " + std::to_string(s.attn_temperature_floor) +
                   " (llama.cpp's are 0.1 and 8192)");
}

// The layer's form - norm kind and biases, parallel residual, gated or plain MLP, RoPE pairs,
// the classifier's bias - as llama.cpp's graph for the architecture fixes it.
static void check_layer_form(const ModelSpec& s, const FamilyInfo& layout, const std::string& arch) {
  auto refuse = [&](const std::string& what, const std::string& why = "") {
    fail(ErrorKind::Unsupported, "GGUF output", what + " cannot be expressed in the '" + arch + "' GGUF architecture" + (why.empty() ? "" : " (" + why + ")"));
  };
  if (s.layer_norm != layout.layer_norm) refuse(s.layer_norm ? "LayerNorm norms" : "RMSNorm norms");
  if (s.layer_norm && s.norm_bias != layout.layer_norm_bias)
    refuse(s.norm_bias ? "LayerNorms with biases" : "LayerNorms without biases", "llama.cpp's graph " + std::string(layout.layer_norm_bias ? "requires" : "has no") + " norm biases");
  const bool parallel_ok = layout.parallel_residual || *layout.hf_parallel_key;
  const bool sequential_ok = !layout.parallel_residual;
  if (s.parallel_residual ? !parallel_ok : !sequential_ok) refuse(s.parallel_residual ? "a parallel residual" : "a sequential residual");
  if (s.parallel_residual && s.parallel_ffn_norm != layout.parallel_ffn_norm)
    refuse(s.parallel_ffn_norm ? "a parallel MLP on a norm of its own" : "a parallel MLP on the attention's norm");
  if (layout.gguf_fused_qkv && !s.attn_bias) refuse("q/k/v without biases", "llama.cpp requires the attn_qkv bias");
  if (s.plain_mlp != layout.plain_mlp) refuse(s.plain_mlp ? "an MLP without a gate" : "a gated MLP");
  if (s.rope_interleaved != layout.rope_interleaved) refuse(s.rope_interleaved ? "RoPE on interleaved pairs" : "RoPE on half-split pairs");
  if (s.output_bias != layout.output_bias) refuse(s.output_bias ? "an output bias" : "an output without a bias", layout.output_bias ? "llama.cpp requires output.bias" : "");
  // phi2 and starcoder2 load the o_proj and MLP biases as required tensors.
  if (layout.gguf_untied_only && s.tie_word_embeddings) refuse("a tied embedding", "llama.cpp requires output.weight");
  if (layout.plain_mlp && (!s.attn_output_bias || !s.mlp_bias)) refuse("projections without biases", "llama.cpp requires the o_proj and MLP biases");
}

// The first leading_dense_block_count of a deepseek2 file: the layers before the first layer of experts.
static int64_t deepseek2_lead(const ModelSpec& s) {
  int64_t lead = 0;
  while (lead < s.n_layers && !s.layers[static_cast<size_t>(lead)].moe) ++lead;
  return lead;
}

// What llama.cpp's deepseek2 graph computes, checked: latent attention with RoPE on adjacent
// pairs on every full layer, the softmax scale from yarn's mscale_all_dim (mscale equal to it),
// dense layers first and experts on all others, ungated shared experts of whole expert widths,
// groups scored by their two best.
static void check_deepseek2(const ModelSpec& s, const std::string& arch) {
  auto refuse = [&](const std::string& what) {
    fail(ErrorKind::Unsupported, "GGUF output", what + " cannot be expressed in the '" + arch + "' GGUF architecture");
  };
  if (s.kv_lora_rank <= 0) refuse("attention without a latent");
  if (s.attn_bias || s.attn_output_bias || s.mlp_bias || s.qk_norm || s.attn_sinks || s.sandwich_norms || !s.pre_norms || s.layer_norm ||
      s.residual_scale != 1.0f || s.logit_scale != 1.0f || s.embed_scale != 1.0f || s.attn_logit_softcap != 0 || s.final_logit_softcap != 0)
    refuse("biases, extra norms or scales");
  if (!s.rope_interleaved) refuse("RoPE on half-split pairs (rope_interleave false)");
  if (s.activation != Activation::SiLU) refuse(std::string("activation '") + activation_name(s.activation) + "'");
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const LayerAttention& l = s.layers[i];
    if (l.kind != AttnKind::Full || !l.use_rope || l.rope_theta != s.rope_theta || !l.rope_scaling)
      refuse("layer " + std::to_string(i) + "'s attention (a window, chunk, NoPE or RoPE of its own)");
    if (s.n_experts > 0 && static_cast<int64_t>(i) >= deepseek2_lead(s) && !l.moe) refuse("a dense layer after a layer of experts");
  }
  const double d = std::sqrt(static_cast<double>(s.qk_nope_dim + s.rope_dim));
  if (s.rope_scaling.type == RopeScalingType::Yarn) {
    const double f = s.rope_scaling.factor, m = s.attn_mscale_all_dim;
    const double ms = f > 1 ? 0.1 * m * std::log(f) + 1.0 : 1.0;
    if (m <= 0 || s.rope_scaling.attn_factor != 1.0f || std::fabs(s.attn_scale * d - ms * ms) > 1e-6 * ms * ms)
      refuse("yarn other than DeepSeek's (mscale equal to mscale_all_dim > 0, the softmax scale times mscale_all_dim's mscale squared)");
    if (!s.rope_scaling.yarn_truncate || s.rope_scaling.beta_fast != 32.0f || s.rope_scaling.beta_slow != 1.0f)
      refuse("yarn with its own beta_fast/beta_slow or truncate");
  } else if (s.rope_scaling.type != RopeScalingType::None) {
    refuse(std::string("RoPE scaling '") + rope_scaling_name(s.rope_scaling.type) + "'");
  } else if (std::fabs(s.attn_scale * d - 1.0) > 1e-6) {
    refuse("a softmax scale other than 1/sqrt(nope + rope)");
  }
  if (s.n_experts > 0) {
    if (s.expert_bias || s.expert_weight_input || s.expert_swiglu_limit > 0) refuse("gpt-oss's or Llama 4's experts");
    if (s.shared_expert_ffn_size > 0 && (s.shared_expert_gate || s.shared_expert_ffn_size % s.expert_ffn_size != 0))
      refuse("a gated shared expert, or one that is not a whole number of experts wide");
    if (s.expert_groups > 0 && !s.expert_group_top2) refuse("expert groups scored by their best (llama.cpp sums each group's two best)");
    if (s.expert_selection_bias && !s.expert_sigmoid) refuse("a selection bias with softmax scores");
  }
}

std::string gguf_arch_for(const ModelSpec& s) {
  const FamilyInfo& layout = gguf_layout_of(s);
  const std::string arch = layout.gguf_arch;
  if (layout.hf_mla) {
    check_deepseek2(s, arch);
    return arch;
  }
  if (s.pre_norms == layout.no_pre_norms)
    fail(ErrorKind::Unsupported, "GGUF output", std::string(s.pre_norms ? "norms before attention and the FFN" : "post-norms without pre-norms") +
                                                    " cannot be expressed in the '" + arch + "' GGUF architecture");
  if (!layout.granite_multipliers && (s.residual_scale != 1.0f || (s.logit_scale != 1.0f && !layout.hf_logit_scale_mul)))
    fail(ErrorKind::Unsupported, "GGUF output", "a residual or logit scale (Granite's multipliers) cannot be expressed in the '" + arch + "' GGUF architecture");
  check_layer_form(s, layout, arch);
  if (layout.no_pre_norms) {
    // llama.cpp's olmo2: q rows as wide as the hidden state, an output matrix of its own, no biases.
    if (s.n_heads * s.head_dim != s.hidden_size)
      fail(ErrorKind::Unsupported, "GGUF output", "heads x head_dim " + std::to_string(s.n_heads * s.head_dim) + " other than hidden_size " +
                                                      std::to_string(s.hidden_size) + " cannot be expressed in the '" + arch + "' GGUF architecture");
    if (s.tie_word_embeddings)
      fail(ErrorKind::Unsupported, "GGUF output", "a tied embedding cannot be expressed in the '" + arch + "' GGUF architecture (llama.cpp needs output.weight)");
    if (s.attn_bias || s.attn_output_bias || s.mlp_bias)
      fail(ErrorKind::Unsupported, "GGUF output", "attention or MLP biases cannot be expressed in the '" + arch + "' GGUF architecture");
  }
  if (layout.gguf_window == WindowRule::ChunkOnRopeLayers) {
    check_llama4(s, arch);
  } else {
    const bool windows_ok = layout.gguf_window != WindowRule::None;
    const int64_t step = layout.gguf_nope_step;
    for (size_t i = 0; i < s.layers.size(); ++i) {
      const LayerAttention& l = s.layers[i];
      const std::string where = "GGUF output: layer " + std::to_string(i);
      if (step > 0 && l.use_rope != ((static_cast<int64_t>(i) + 1) % step != 0))
        fail(ErrorKind::Unsupported, where,
             std::string(l.use_rope ? "RoPE" : "NoPE") + " on this layer cannot be expressed in the '" + arch +
                 "' GGUF architecture (llama.cpp skips RoPE on every " + std::to_string(step) + "th layer exactly)");
      if ((step == 0 && !l.use_rope) || l.kind == AttnKind::Chunk || (l.kind == AttnKind::Window && !windows_ok))
        fail(ErrorKind::Unsupported, where,
             std::string("a ") + attn_kind_name(l.kind) + (l.use_rope ? "" : " NoPE") + " layer cannot be expressed in the '" + arch + "' GGUF architecture");
    }
    if (layout.sliding_rope_unscaled) {
      // llama.cpp's olmo2: every layer at rope.freq_base; the scaling on the full layers only;
      // with a window (OLMo 3), the windowed layers are those of its fixed period.
      bool windows = false;
      for (const LayerAttention& l : s.layers) windows = windows || l.kind == AttnKind::Window;
      for (size_t i = 0; i < s.layers.size(); ++i) {
        const LayerAttention& l = s.layers[i];
        const bool scaled = l.kind != AttnKind::Window;
        if (l.rope_theta != s.rope_theta || (s.rope_scaling.type != RopeScalingType::None && l.rope_scaling != scaled))
          fail(ErrorKind::Unsupported, "GGUF output: layer " + std::to_string(i),
               std::string("RoPE ") + (l.rope_theta != s.rope_theta ? "at a base of its own" : l.rope_scaling ? "scaled" : "unscaled") +
                   " on a " + attn_kind_name(l.kind) + " layer cannot be expressed in the '" + arch +
                   "' GGUF architecture (llama.cpp scales the full layers only)");
        if (windows && (l.kind == AttnKind::Window) != ((static_cast<int64_t>(i) + 1) % layout.window_pattern != 0))
          fail(ErrorKind::Unsupported, "GGUF output: layer " + std::to_string(i),
               std::string("a ") + attn_kind_name(l.kind) + " layer here cannot be expressed in the '" + arch +
                   "' GGUF architecture (llama.cpp's graph windows every layer but each " + std::to_string(layout.window_pattern) +
                   "th, whatever sliding_window_pattern lists)");
      }
    }
    if (layout.gguf_tied_only && !s.tie_word_embeddings)
      fail(ErrorKind::Unsupported, "GGUF output",
           "an output matrix of its own cannot be expressed in the '" + arch + "' GGUF architecture (llama.cpp's classifier is token_embd)");
    if (layout.gguf_qkv_bias_only && (s.attn_output_bias || s.mlp_bias))
      fail(ErrorKind::Unsupported, "GGUF output",
           std::string(s.mlp_bias ? "MLP biases" : "an o_proj bias") + " cannot be expressed in the '" + arch +
               "' GGUF architecture (llama.cpp loads q/k/v biases only)");
    if (s.qk_l2_norm || (s.attn_temperature_scale != 0 && !s.attn_temperature_all_layers))
      fail(ErrorKind::Unsupported, "GGUF output", "Llama 4 features cannot be expressed in the '" + arch + "' GGUF architecture");
    if (s.attn_temperature_scale != 0 && s.attn_temperature_all_layers && !layout.rope_temperature)
      fail(ErrorKind::Unsupported, "GGUF output", "a query temperature on every layer (Ministral 3) cannot be expressed in the '" + arch + "' GGUF architecture");
  }
  // gpt-oss's sinks, expert biases and clamped SwiGLU exist in its own architecture only, and
  // that architecture has all of them.
  if (s.attn_sinks != layout.attn_sinks)
    fail(ErrorKind::Unsupported, "GGUF output", std::string(s.attn_sinks ? "attention sinks cannot be expressed in" : "attention without sinks cannot be expressed in") +
                                                    " the '" + arch + "' GGUF architecture");
  const bool oai = layout.hf_moe == HfMoe::GptOss;
  if (s.n_experts > 0 && (s.expert_bias != oai || (s.expert_swiglu_limit == 7.0f) != oai))
    fail(ErrorKind::Unsupported, "GGUF output",
         std::string("experts ") + (s.expert_bias ? "with" : "without") + " biases and with a " +
             (s.expert_swiglu_limit > 0 ? "SwiGLU clamped at " + std::to_string(s.expert_swiglu_limit) : std::string("plain SwiGLU")) +
             " cannot be expressed in the '" + arch + "' GGUF architecture");
  const bool llama4 = layout.hf_moe == HfMoe::Llama4;
  const bool ungated_ok = layout.gguf_shared_expert_ungated;  // granitemoe: an ungated shared expert, optional
  if (s.n_experts > 0 && !llama4 && (s.expert_sigmoid || s.expert_weight_input || (s.shared_expert_ffn_size > 0 && !s.shared_expert_gate && !ungated_ok)))
    fail(ErrorKind::Unsupported, "GGUF output",
         "Llama 4's experts (sigmoid scores applied to the expert's input, an ungated shared expert) cannot be expressed in the '" +
             arch + "' GGUF architecture");
  // llama.cpp's MoE graphs put experts on every layer (llama4: on every step-th); llama
  // (Mixtral) and qwen3moe renormalise the top-k weights and have no shared expert, qwen2moe and
  // llama4 do not renormalise and have one.
  if (s.n_experts > 0) {
    if (!llama4)
      for (size_t i = 0; i < s.layers.size(); ++i)
        if (!s.layers[i].moe)
          fail(ErrorKind::Unsupported, "GGUF output: layer " + std::to_string(i), "a dense layer between layers of experts cannot be expressed in the '" + arch + "' GGUF architecture");
    if (s.norm_topk_prob != layout.gguf_moe_norm_topk)
      fail(ErrorKind::Unsupported, "GGUF output",
           std::string("top-k expert weights that are ") + (s.norm_topk_prob ? "" : "not ") + "renormalised (norm_topk_prob " +
               (s.norm_topk_prob ? "true" : "false") + ") cannot be expressed in the '" + arch + "' GGUF architecture");
    if (ungated_ok && s.shared_expert_ffn_size > 0 && s.shared_expert_gate)
      fail(ErrorKind::Unsupported, "GGUF output", "a gated shared expert cannot be expressed in the '" + arch + "' GGUF architecture");
    if (!ungated_ok && (s.shared_expert_ffn_size > 0) != layout.gguf_shared_expert)
      fail(ErrorKind::Unsupported, "GGUF output",
           std::string(s.shared_expert_ffn_size > 0 ? "a shared expert cannot be expressed in" : "experts without a shared expert cannot be expressed in") +
               " the '" + arch + "' GGUF architecture");
  }
  // GGUF has no activation key: the architecture fixes it (Gemma's tanh GELU), so another one
  // would be read back, by ptn and by llama.cpp, as the architecture's.
  if (s.activation != layout.gguf_activation)
    fail(ErrorKind::Unsupported, "GGUF output",
         std::string("activation '") + activation_name(s.activation) + "' cannot be expressed: the '" + arch + "' GGUF architecture runs '" +
             activation_name(layout.gguf_activation) + "'");
  return arch;
}

static Tensor to_f32(const Tensor& t) {
  if (t.dtype() == DType::F32) return t;
  Tensor out = Tensor::zeros(DType::F32, t.shape());
  const int64_t rows = t.shape().empty() ? 1 : t.rows(), n = t.row_size();
  for (int64_t r = 0; r < rows; ++r) dequantize_row(t.dtype(), t.row_ptr(r), out.data_as<float>() + r * n, n);
  return out;
}

// Row-wise concatenation of 2-D tensors (same column count); byte copies when dtypes agree.
static Tensor concat_rows(const std::vector<Tensor>& parts) {
  bool same = true;
  for (const auto& p : parts) same = same && p.dtype() == parts[0].dtype();
  std::vector<Tensor> ps;
  for (const auto& p : parts) ps.push_back(same ? p : to_f32(p));
  int64_t rows = 0;
  for (const auto& p : ps) rows += p.dim(0);
  std::vector<int64_t> shape = ps[0].shape();
  shape[0] = rows;
  Tensor out = Tensor::zeros(ps[0].dtype(), shape);
  uint8_t* dst = static_cast<uint8_t*>(out.data());
  for (const auto& p : ps) {
    Tensor c = p.contiguous() ? p : p.copy();
    std::memcpy(dst, c.data(), c.nbytes());
    dst += c.nbytes();
  }
  return out;
}

static std::vector<float> llama3_rope_factors(const ModelSpec& s) {
  const RopeScaling& rs = s.rope_scaling;
  const double pi = 3.14159265358979323846;
  const double low_wavelen = rs.original_max_position / rs.low_freq_factor;
  const double high_wavelen = rs.original_max_position / rs.high_freq_factor;
  std::vector<float> f;
  for (int64_t k = 0; k < s.rope_dim / 2; ++k) {
    const double freq = 1.0 / std::pow(static_cast<double>(s.rope_theta), 2.0 * k / s.rope_dim);
    const double wavelen = 2 * pi / freq;
    double v;
    if (wavelen < high_wavelen) v = 1;
    else if (wavelen > low_wavelen) v = rs.factor;
    else {
      const double smooth = (rs.original_max_position / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
      v = 1 / ((1 - smooth) / rs.factor + smooth);
    }
    f.push_back(static_cast<float>(v));
  }
  return f;
}

TokenizerSpec placeholder_tokenizer(int64_t vocab) {
  if (vocab < 259) fail(ErrorKind::InvalidArgument, "placeholder tokenizer", "a vocabulary of " + std::to_string(vocab) + " is smaller than the 259 special and byte pieces");
  TokenizerSpec t;
  t.kind = TokenizerKind::SentencePiece;
  t.tokens = {"<unk>", "<s>", "</s>"};
  t.token_types = {TokenType::Unknown, TokenType::Control, TokenType::Control};
  char b[8];
  for (int i = 0; i < 256; ++i) {
    std::snprintf(b, sizeof b, "<0x%02X>", i);
    t.tokens.push_back(b);
    t.token_types.push_back(TokenType::Byte);
  }
  for (int64_t i = 259; i < vocab; ++i) {
    t.tokens.push_back("tok" + std::to_string(i));
    t.token_types.push_back(TokenType::Normal);
  }
  t.scores.assign(t.tokens.size(), 0.0f);
  for (int64_t i = 259; i < vocab; ++i) t.scores[i] = -static_cast<float>(i - 259);
  t.unk_id = 0;
  t.bos_id = 1;
  t.eos_id = 2;
  t.add_bos = true;
  t.bos_token = "<s>";
  t.eos_token = "</s>";
  return t;
}

void set_tokenizer_keys(GgufWriter& w, const TokenizerSpec& t) {
  w.set_string("tokenizer.ggml.model", t.kind == TokenizerKind::SentencePiece ? "llama" : "gpt2");
  if (!t.pre_tokenizer.empty()) {
    w.set_string("tokenizer.ggml.pre", t.pre_tokenizer);
  } else if (t.kind == TokenizerKind::ByteLevelBPE) {
    // A GGUF file names its split regexes; the caller finds the name for a tokenizer.json's
    // (tok::pre_tokenizer_name_for). Writing "default" for other regexes would tokenize differently.
    if (t.pre_split_explicit || !t.pre_split_regexes.empty())
      fail(ErrorKind::InvalidArgument, "tokenizer pre-tokenizer", "split regexes without a GGUF 'tokenizer.ggml.pre' name");
    w.set_string("tokenizer.ggml.pre", "default");
  }
  w.set_string_array("tokenizer.ggml.tokens", t.tokens);
  if (!t.scores.empty()) w.set_f32_array("tokenizer.ggml.scores", t.scores);
  if (!t.token_types.empty()) {
    std::vector<int32_t> types;
    for (TokenType tt : t.token_types) types.push_back(static_cast<int32_t>(tt));
    w.set_i32_array("tokenizer.ggml.token_type", types);
  }
  if (!t.merges.empty()) w.set_string_array("tokenizer.ggml.merges", t.merges);
  auto id = [&](const char* k, const std::optional<int32_t>& v) { if (v) w.set_u32(k, static_cast<uint32_t>(*v)); };
  id("tokenizer.ggml.bos_token_id", t.bos_id);
  id("tokenizer.ggml.eos_token_id", t.eos_id);
  id("tokenizer.ggml.unknown_token_id", t.unk_id);
  id("tokenizer.ggml.padding_token_id", t.pad_id);
  id("tokenizer.ggml.eot_token_id", t.eot_id);
  w.set_bool("tokenizer.ggml.add_bos_token", t.add_bos);
  w.set_bool("tokenizer.ggml.add_eos_token", t.add_eos);
  if (t.kind == TokenizerKind::SentencePiece) w.set_bool("tokenizer.ggml.add_space_prefix", t.add_space_prefix);
  if (!t.chat_template.empty()) w.set_string("tokenizer.chat_template", t.chat_template);
}

// general.* and <arch>.* keys, named as llama.cpp names them.
static void set_model_keys(GgufWriter& w, const ModelSpec& s, const FamilyInfo& layout, GgufFileType type,
                           const std::string& name, const std::string& path) {
  const std::string arch = layout.gguf_arch;
  auto k = [&](const char* key) { return arch + "." + key; };
  auto u32 = [&](const char* key, int64_t v) {
    if (v < 0 || v > 0xffffffffLL) fail(ErrorKind::InvalidArgument, path + ": key " + k(key), "value " + std::to_string(v) + " does not fit u32");
    w.set_u32(k(key), static_cast<uint32_t>(v));
  };
  w.set_string("general.architecture", arch);
  w.set_string("general.name", name);
  w.set_u32("general.file_type", llama_ftype(type));
  if (type != GgufFileType::F32 && type != GgufFileType::F16 && type != GgufFileType::BF16)
    w.set_u32("general.quantization_version", 2);
  u32("context_length", s.max_position_embeddings > 0 ? s.max_position_embeddings : 2048);
  u32("embedding_length", s.hidden_size);
  u32("block_count", s.n_layers);
  u32("feed_forward_length", s.intermediate_size);
  u32("attention.head_count", s.n_heads);
  const bool mla = layout.hf_mla;  // deepseek2: one key/value head of the latent (+ RoPE key) per token
  u32("attention.head_count_kv", mla ? 1 : s.n_kv_heads);
  u32("attention.key_length", mla ? s.kv_lora_rank + s.rope_dim : s.head_dim);
  u32("attention.value_length", mla ? s.kv_lora_rank : s.head_dim);
  u32("vocab_size", s.vocab_size);
  if (mla) {
    u32("attention.key_length_mla", s.qk_nope_dim + s.rope_dim);
    u32("attention.value_length_mla", s.v_head_dim);
    u32("attention.kv_lora_rank", s.kv_lora_rank);
    if (s.q_lora_rank > 0) u32("attention.q_lora_rank", s.q_lora_rank);
  }
  if (s.n_experts > 0) {
    u32("expert_count", s.n_experts);
    u32("expert_used_count", s.n_experts_used);
    u32("expert_feed_forward_length", s.expert_ffn_size);
    if (layout.hf_moe == HfMoe::Llama4) {
      u32("interleave_moe_layer_step", llama4_moe_step(s));  // the shared expert's width is the experts'
    } else if (mla) {
      u32("leading_dense_block_count", deepseek2_lead(s));
      u32("expert_shared_count", s.shared_expert_ffn_size / s.expert_ffn_size);
      if (s.expert_routed_scale != 1.0f) w.set_f32(k("expert_weights_scale"), s.expert_routed_scale);
      if (s.norm_topk_prob) w.set_bool(k("expert_weights_norm"), true);
      u32("expert_gating_func", s.expert_sigmoid ? 2 : 1);
      if (s.expert_groups > 0) {
        u32("expert_group_count", s.expert_groups);
        u32("expert_group_used_count", s.expert_groups_used);
      }
    } else if (s.shared_expert_ffn_size > 0) {
      u32("expert_shared_feed_forward_length", s.shared_expert_ffn_size);
    }
  }
  w.set_f32(k(layout.layer_norm ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon"), s.norm_eps);
  if (layout.hf_logit_scale_mul && s.logit_scale != 1.0f) w.set_f32(k("logit_scale"), 1.0f / s.logit_scale);
  if (layout.parallel_ffn_norm) w.set_bool(k("use_parallel_residual"), s.parallel_residual);  // gptneox
  w.set_f32(k("rope.freq_base"), s.rope_theta);
  u32("rope.dimension_count", s.rope_dim);
  switch (s.rope_scaling.type) {
    case RopeScalingType::None: break;
    case RopeScalingType::Linear:
      w.set_string(k("rope.scaling.type"), "linear");
      w.set_f32(k("rope.scaling.factor"), s.rope_scaling.factor);
      break;
    case RopeScalingType::Yarn: {
      // Only the keys ptn's GGUF import reads are written: refuse what they cannot carry.
      const RopeScaling& rs = s.rope_scaling;
      const double dflt = rs.factor > 1 ? 0.1 * std::log(static_cast<double>(rs.factor)) + 1.0 : 1.0;
      if (!rs.yarn_truncate || rs.beta_fast != 32.0f || rs.beta_slow != 1.0f)
        fail(ErrorKind::Unsupported, path, "yarn with its own beta_fast/beta_slow or truncate is not written as GGUF");
      w.set_string(k("rope.scaling.type"), "yarn");
      w.set_f32(k("rope.scaling.factor"), s.rope_scaling.factor);
      u32("rope.scaling.original_context_length", s.rope_scaling.original_max_position);
      // An attention factor of its own (mscale / mscale_all_dim): llama.cpp multiplies its
      // default, mscale(factor), by rope.scaling.attn_factor. deepseek2: llama.cpp's converter
      // writes 0.1 x mscale_all_dim as yarn_log_multiplier (and its loader divides it back).
      if (layout.hf_mla) w.set_f32(k("rope.scaling.yarn_log_multiplier"), 0.1f * s.attn_mscale_all_dim);
      else if (std::fabs(rs.attn_factor - dflt) > 1e-6) w.set_f32(k("rope.scaling.attn_factor"), static_cast<float>(rs.attn_factor / dflt));
      break;
    }
    case RopeScalingType::Llama3:
      if (!layout.gguf_rope_freqs) fail(ErrorKind::Unsupported, path, "llama3 rope scaling is written for the llama architecture only");
      break;
    case RopeScalingType::LongRope:
      fail(ErrorKind::Unsupported, path, "longrope scaling is not written as GGUF (llama.cpp keeps it as rope_factors tensors)");
  }
  if (s.attn_temperature_all_layers && s.attn_temperature_scale != 0) {
    // mistral3: the temperature's period is llama.cpp's original context length (yarn's).
    if (s.rope_scaling.type == RopeScalingType::Yarn && s.rope_scaling.original_max_position != s.attn_temperature_floor)
      fail(ErrorKind::Unsupported, path, "a query temperature period (" + std::to_string(s.attn_temperature_floor) +
                                             ") other than yarn's original context (" + std::to_string(s.rope_scaling.original_max_position) +
                                             ") cannot be expressed in the '" + layout.gguf_arch + "' GGUF architecture");
    if (s.rope_scaling.type != RopeScalingType::Yarn) u32("rope.scaling.original_context_length", s.attn_temperature_floor);
    w.set_f32(k("attention.temperature_scale"), s.attn_temperature_scale);
  }
  int64_t window = 0;
  for (const auto& l : s.layers) if (l.kind == AttnKind::Window) window = l.span;
  if (window > 0) u32("attention.sliding_window", window);
  if (layout.logit_softcaps) {
    if (s.attn_logit_softcap != 0) w.set_f32(k("attn_logit_softcapping"), s.attn_logit_softcap);
    if (s.final_logit_softcap != 0) w.set_f32(k("final_logit_softcapping"), s.final_logit_softcap);
  }
  if (layout.granite_multipliers) {
    w.set_f32(k("embedding_scale"), s.embed_scale);
    w.set_f32(k("residual_scale"), s.residual_scale);
    w.set_f32(k("attention.scale"), s.attn_scale > 0 ? s.attn_scale : 1.0f / std::sqrt(static_cast<float>(s.head_dim)));
    w.set_f32(k("logit_scale"), s.logit_scale);
  }
  if (layout.query_pre_attn_scalar) {
    const float dflt = gguf_default_query_scale(layout, s);
    if (s.attn_scale != 0 && std::fabs(s.attn_scale - dflt) > 1e-7f * dflt) w.set_f32(k("attention.scale"), s.attn_scale);
  }
  if (layout.gguf_window == WindowRule::EveryNthGlobal) {
    const int64_t pattern = layout.window_pattern;
    bool default_pattern = true;
    for (int64_t i = 0; i < s.n_layers; ++i)
      default_pattern = default_pattern && ((s.layers[i].kind == AttnKind::Window) == ((i + 1) % pattern != 0));
    if (!default_pattern) {
      std::vector<int32_t> per_layer;
      for (const auto& l : s.layers) per_layer.push_back(l.kind == AttnKind::Window);
      w.set_i32_array(k("attention.sliding_window_pattern"), per_layer);
    }
  }
  if (layout.local_rope_base)
    for (const auto& l : s.layers)
      if (l.kind == AttnKind::Window && l.rope_theta != 10000.0f) { w.set_f32(k("rope.freq_base_swa"), l.rope_theta); break; }
}

// tokenizer.ggml.*: copied from another GGUF, or the given (or a placeholder) tokenizer padded
// to the vocabulary as llama.cpp needs.
static void set_model_tokenizer(GgufWriter& w, const ModelSpec& s, const GgufModelOptions& opt, const std::string& path) {
  if (opt.tokenizer_from) {
    for (const auto& [key, v] : opt.tokenizer_from->metadata())
      if (key.rfind("tokenizer.", 0) == 0) w.set_raw(key, v.type, v.encoded);
    return;
  }
  TokenizerSpec t = opt.tokenizer ? *opt.tokenizer : placeholder_tokenizer(s.vocab_size);
  if (static_cast<int64_t>(t.tokens.size()) > s.vocab_size)
    fail(ErrorKind::InvalidArgument, path, "the tokenizer has " + std::to_string(t.tokens.size()) + " tokens, more than the model's vocabulary of " + std::to_string(s.vocab_size));
  // An SPM vocabulary from tokenizer.json has merges but no scores; llama.cpp's SPM merges by
  // score, so give each piece minus the rank of the first merge that makes it (0 otherwise).
  if (t.kind == TokenizerKind::SentencePiece && t.scores.empty() && !t.merges.empty()) {
    std::map<std::string, size_t> id;
    for (size_t i = 0; i < t.tokens.size(); ++i) id.emplace(t.tokens[i], i);
    t.scores.assign(t.tokens.size(), 0.0f);
    std::vector<bool> set(t.tokens.size(), false);
    for (size_t r = 0; r < t.merges.size(); ++r) {
      const std::string& m = t.merges[r];
      const size_t sp = m.find(' ');
      if (sp == std::string::npos) continue;
      auto it = id.find(m.substr(0, sp) + m.substr(sp + 1));
      if (it != id.end() && !set[it->second]) { t.scores[it->second] = -static_cast<float>(r); set[it->second] = true; }
    }
  }
  // llama.cpp needs one token per embedding row: pad as its converter does.
  for (int64_t i = static_cast<int64_t>(t.tokens.size()); i < s.vocab_size; ++i) {
    t.tokens.push_back("[PAD" + std::to_string(i) + "]");
    if (!t.scores.empty()) t.scores.push_back(0.0f);
    if (!t.token_types.empty()) t.token_types.push_back(TokenType::Unused);
  }
  set_tokenizer_keys(w, t);
}

// Tensors, in canonical order, with the layout changes the architecture has in llama.cpp.
static void add_model_tensors(GgufWriter& w, const WeightSource& src, const FamilyInfo& layout, GgufFileType ft) {
  const ModelSpec& s = src.spec();
  const WeightSource* ws = &src;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, std::function<Tensor()> make_native) {
    const DType dt = gguf_tensor_type(ft, s, name, shape);
    w.add_tensor(name, dt, shape, [make_native, dt, name] {
      Tensor t = make_native();
      if (t.dtype() == dt) return t;
      Tensor f = to_f32(t);
      if (dt == DType::F32) return f;
      Tensor out = Tensor::zeros(dt, f.shape());
      const int64_t rows = f.shape().size() < 2 ? 1 : f.rows();
      quantize_matrix(dt, f.data_as<float>(), out.data(), rows, f.row_size());
      return out;
    });
  };
  if (s.rope_scaling.type == RopeScalingType::Llama3) {
    std::vector<float> fac = llama3_rope_factors(s);
    add("rope_freqs.weight", {static_cast<int64_t>(fac.size())}, [fac] {
      Tensor t = Tensor::zeros(DType::F32, {static_cast<int64_t>(fac.size())});
      std::memcpy(t.data(), fac.data(), fac.size() * 4);
      return t;
    });
  }
  const bool interleave = layout.gguf_qk_interleaved, fused = layout.gguf_fused_qkv_gate_up || layout.gguf_fused_gate_up;
  const bool fused_qkv = layout.gguf_fused_qkv_gate_up || layout.gguf_fused_qkv;
  const bool plus_one = layout.norm_weight_plus_one && s.norm_weight_plus_one;
  for (const std::string& name : canonical_tensor_names(s)) {
    std::vector<int64_t> shape = canonical_tensor_shape(s, name);
    // Experts as llama.cpp merges them: blk.N.ffn_{gate,up,down}_exps [E, rows, cols].
    std::string what;
    int64_t expert = -1;
    bool bias = false;
    const size_t dot = name.find('.', 4);
    if (name.rfind("blk.", 0) == 0 && dot != std::string::npos && parse_expert_tensor(name.substr(dot + 1), &what, &expert, &bias)) {
      if (expert != 0) continue;
      const std::string blk = name.substr(0, dot);
      const int64_t layer = layer_of(name), E = s.n_experts;
      std::vector<int64_t> merged = {E, shape[0]};
      if (!bias) merged.push_back(shape[1]);
      const char* kind = bias ? "bias" : "weight";
      add(blk + "." + what + "_exps." + kind, merged, [ws, layer, what, E, merged, kind] {
        std::vector<Tensor> parts;
        for (int64_t e = 0; e < E; ++e) {
          Tensor t = ws->get(expert_tensor(layer, what.c_str(), e, kind));
          parts.push_back(t.ndim() == 1 ? (t.contiguous() ? t : t.copy()).reshaped({1, t.dim(0)}) : t);
        }
        return concat_rows(parts).reshaped(merged);
      });
      continue;
    }
    if (std::string_view(layout.gguf_ffn_norm) != "ffn_norm" && ends_with(name, ".ffn_norm.weight")) {  // gpt-oss's name for it
      const std::string blk = name.substr(0, name.size() - std::strlen(".ffn_norm.weight"));
      add(blk + "." + layout.gguf_ffn_norm + ".weight", shape, [ws, name] { return ws->get(name); });
      continue;
    }
    if (ends_with(name, ".ffn_gate_inp_shexp.weight")) {  // llama.cpp keeps the shared expert's gate as a vector
      const int64_t H = shape[1];
      add(name, {H}, [ws, name, H] { Tensor t = ws->get(name);
        return (t.contiguous() ? t : t.copy()).reshaped({H}); });
      continue;
    }
    if (fused && ends_with(name, ".ffn_gate.weight")) continue;
    if (fused_qkv && (ends_with(name, ".attn_k.weight") || ends_with(name, ".attn_v.weight") || ends_with(name, ".attn_k.bias") ||
                      ends_with(name, ".attn_v.bias")))
      continue;
    if (fused_qkv && (ends_with(name, ".attn_q.weight") || ends_with(name, ".attn_q.bias"))) {  // q|k|v rows, as llama.cpp reads attn_qkv
      const std::string kind = ends_with(name, ".bias") ? "bias" : "weight";
      const std::string blk = name.substr(0, name.size() - std::strlen(".attn_q.") - kind.size());
      shape[0] = (s.n_heads + 2 * s.n_kv_heads) * s.head_dim;
      add(blk + ".attn_qkv." + kind, shape, [ws, blk, kind] {
        return concat_rows({ws->get(blk + ".attn_q." + kind), ws->get(blk + ".attn_k." + kind), ws->get(blk + ".attn_v." + kind)});
      });
      continue;
    }
    if (fused && ends_with(name, ".ffn_up.weight")) {
      const std::string blk = name.substr(0, name.size() - std::strlen(".ffn_up.weight"));
      shape[0] = 2 * s.intermediate_size;
      add(name, shape, [ws, blk] { return concat_rows({ws->get(blk + ".ffn_gate.weight"), ws->get(blk + ".ffn_up.weight")}); });
      continue;
    }
    if (layout.hf_mla && (ends_with(name, ".attn_k_b.weight") || ends_with(name, ".attn_v_b.weight"))) {
      // llama.cpp's 3-D per-head form, [heads, rows, cols]: the same bytes
      const int64_t H = s.n_heads;
      add(name, {H, shape[0] / H, shape[1]}, [ws, name, H] {
        Tensor t = ws->get(name);
        return (t.contiguous() ? t : t.copy()).reshaped({H, t.dim(0) / H, t.dim(1)});
      });
      continue;
    }
    const bool is_q = ends_with(name, ".attn_q.weight") || ends_with(name, ".attn_q.bias");
    const bool is_k = ends_with(name, ".attn_k.weight") || ends_with(name, ".attn_k.bias");
    const int64_t heads = interleave && is_q ? s.n_heads : interleave && is_k ? s.n_kv_heads : 0;
    const bool norm = plus_one && ends_with(name, "norm.weight");
    add(name, shape, [ws, name, heads, norm] {
      Tensor t = ws->get(name);
      if (heads) t = interleave_heads(t, heads, name);
      if (norm) {
        Tensor f = to_f32(t).copy();
        float* p = f.data_as<float>();
        for (int64_t i = 0; i < f.numel(); ++i) p[i] += 1.0f;
        return f;
      }
      return t;
    });
  }
}

void write_model_gguf(const WeightSource& src, const std::string& path, const GgufModelOptions& opt,
                      const std::function<void(size_t, size_t)>& progress) {
  const ModelSpec& s = src.spec();
  gguf_arch_for(s);  // refuses what the architecture cannot express
  const FamilyInfo& layout = gguf_layout_of(s);
  GgufWriter w;
  set_model_keys(w, s, layout, opt.type, opt.name, path);
  set_model_tokenizer(w, s, opt, path);
  add_model_tensors(w, src, layout, opt.type);
  w.write(path, progress);
}

}  // namespace ptn
