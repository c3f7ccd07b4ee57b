#include "formats/synth.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "core/error.h"
#include "core/file.h"
#include "core/fp16.h"
#include "core/quant.h"
#include "formats/safetensors.h"

namespace ptn {

namespace {

using json = nlohmann::json;

// Shapes of the real models (their public config.json files, optional fields trimmed).
const std::map<std::string, json>& presets() {
  static const std::map<std::string, json> p = {
      {"tiny", {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", 512},
                {"hidden_size", 256}, {"intermediate_size", 512}, {"num_hidden_layers", 2},
                {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 64},
                {"max_position_embeddings", 512}, {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0},
                {"hidden_act", "silu"}, {"tie_word_embeddings", false}, {"bos_token_id", 1}, {"eos_token_id", 2}}},
      {"llama-3.2-1b", {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", 128256},
                        {"hidden_size", 2048}, {"intermediate_size", 8192}, {"num_hidden_layers", 16},
                        {"num_attention_heads", 32}, {"num_key_value_heads", 8}, {"head_dim", 64},
                        {"max_position_embeddings", 131072}, {"rms_norm_eps", 1e-5}, {"rope_theta", 500000.0},
                        {"rope_scaling", {{"factor", 32.0}, {"high_freq_factor", 4.0}, {"low_freq_factor", 1.0},
                                          {"original_max_position_embeddings", 8192}, {"rope_type", "llama3"}}},
                        {"hidden_act", "silu"}, {"tie_word_embeddings", true}, {"bos_token_id", 128000}, {"eos_token_id", 128001}}},
      {"qwen3-0.6b", {{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"}, {"vocab_size", 151936},
                      {"hidden_size", 1024}, {"intermediate_size", 3072}, {"num_hidden_layers", 28},
                      {"num_attention_heads", 16}, {"num_key_value_heads", 8}, {"head_dim", 128},
                      {"max_position_embeddings", 40960}, {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0},
                      {"use_sliding_window", false}, {"sliding_window", nullptr}, {"max_window_layers", 28},
                      {"attention_bias", false}, {"hidden_act", "silu"}, {"tie_word_embeddings", true},
                      {"bos_token_id", 151643}, {"eos_token_id", 151645}}},
      {"gemma-3-1b", {{"architectures", {"Gemma3ForCausalLM"}}, {"model_type", "gemma3_text"}, {"vocab_size", 262144},
                      {"hidden_size", 1152}, {"intermediate_size", 6912}, {"num_hidden_layers", 26},
                      {"num_attention_heads", 4}, {"num_key_value_heads", 1}, {"head_dim", 256},
                      {"query_pre_attn_scalar", 256}, {"sliding_window", 512}, {"sliding_window_pattern", 6},
                      {"rope_theta", 1000000.0}, {"rope_local_base_freq", 10000.0}, {"rope_scaling", nullptr},
                      {"hidden_activation", "gelu_pytorch_tanh"}, {"max_position_embeddings", 32768},
                      {"rms_norm_eps", 1e-6}, {"bos_token_id", 2}, {"eos_token_id", 1}}},
      {"smollm2-135m", {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", 49152},
                        {"hidden_size", 576}, {"intermediate_size", 1536}, {"num_hidden_layers", 30},
                        {"num_attention_heads", 9}, {"num_key_value_heads", 3}, {"head_dim", 64},
                        {"max_position_embeddings", 8192}, {"rms_norm_eps", 1e-5}, {"rope_theta", 100000.0},
                        {"hidden_act", "silu"}, {"tie_word_embeddings", true}, {"bos_token_id", 1}, {"eos_token_id", 2}}},
  };
  return p;
}

void make_dir(const std::string& dir) {
  if (is_directory(dir)) return;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    fail(ErrorKind::Io, dir, std::string("cannot create directory: ") + std::strerror(errno));
}

Tensor to_dtype(const Tensor& t, DType dt) {
  if (t.dtype() == dt) return t;
  Tensor f = t;
  if (t.dtype() != DType::F32) {
    f = Tensor::zeros(DType::F32, t.shape());
    const int64_t rows = t.ndim() < 2 ? 1 : t.rows();
    for (int64_t r = 0; r < rows; ++r) dequantize_row(t.dtype(), t.row_ptr(r), f.data_as<float>() + r * t.row_size(), t.row_size());
  }
  if (dt == DType::F32) return f;
  Tensor out = Tensor::zeros(dt, t.shape());
  const int64_t rows = t.ndim() < 2 ? 1 : t.rows();
  for (int64_t r = 0; r < rows; ++r) quantize_row(dt, f.data_as<float>() + r * t.row_size(), out.row_ptr(r), t.row_size());
  return out;
}

}  // namespace

std::vector<std::string> synth_preset_names() {
  std::vector<std::string> out;
  for (const auto& [n, j] : presets()) out.push_back(n);
  return out;
}

json synth_preset(const std::string& name) {
  auto it = presets().find(name);
  if (it == presets().end()) {
    std::string list;
    for (const auto& n : synth_preset_names()) list += (list.empty() ? "" : ", ") + n;
    fail(ErrorKind::InvalidArgument, "--preset", "unknown preset '" + name + "' (" + list + ")");
  }
  return it->second;
}

void write_hf_directory(const WeightSource& src, const json& config, const std::string& dir, DType dtype,
                        const std::function<void(size_t, size_t)>& progress) {
  if (dtype != DType::F32 && dtype != DType::BF16)
    fail(ErrorKind::InvalidArgument, dir, std::string("HF weights are written as f32 or bf16, not ") + dtype_name(dtype));
  const ModelSpec& s = src.spec();
  // HF tensor -> its pieces (canonical name + row range / permutation).
  struct Piece { std::string canon; TensorSourceRef ref; };
  std::map<std::string, std::vector<Piece>> by_hf;
  std::vector<std::string> order;
  for (const std::string& canon : canonical_tensor_names(s)) {
    auto it = s.tensor_sources.find(canon);
    if (it == s.tensor_sources.end()) fail(ErrorKind::InvalidArgument, dir, "no HF name for tensor " + canon);
    TensorSourceRef r = parse_tensor_source(it->second);
    if (r.head_period > 0 || r.transposed_blocks > 0)
      fail(ErrorKind::Unsupported, dir + ": " + r.name,
           "a tensor split per head (" + s.family + "'s kv_b_proj) is not written by synth; write a GGUF, or export with --random-weights");
    if (r.transposed || (r.row_step != 1 && r.row_block == 1) || !r.mxfp4_scales.empty())
      fail(ErrorKind::Unsupported, dir + ": " + r.name,
           "an HF tensor holding all experts of a layer transposed or in MXFP4 (" + s.family +
               ") is not written by synth; write a GGUF, or export with --random-weights");
    if (!by_hf.count(r.name)) order.push_back(r.name);
    by_hf[r.name].push_back({canon, r});
  }
  std::vector<SafetensorsEntry> entries;
  for (const std::string& hf : order) {
    std::vector<Piece> pieces = by_hf[hf];
    std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.ref.row_begin < b.ref.row_begin; });
    std::vector<int64_t> shape = canonical_tensor_shape(s, pieces[0].canon);
    // Where row i of a piece lands in the fused tensor: its range, in blocks of row_block rows
    // every row_step blocks (per-head q|k|v), or consecutively; an expert's piece in that
    // expert's slab of a tensor stacking all experts ([E, rows, cols], Granite MoE). The pieces
    // must cover each row of each slab once.
    int64_t slabs = 0;  // experts stacked (0: none)
    for (const auto& p : pieces) slabs = std::max(slabs, p.ref.expert + 1);
    if (slabs > 0)
      for (const auto& p : pieces)
        if (p.ref.expert < 0) fail(ErrorKind::InvalidArgument, dir + ": " + hf, "mixes expert and non-expert pieces");
    int64_t rows = shape[0];
    auto dst_row = [](const TensorSourceRef& r, int64_t i, int64_t rows) {
      const int64_t b = r.row_block;
      return std::max<int64_t>(r.expert, 0) * rows + std::max<int64_t>(r.row_begin, 0) + (i / b) * r.row_step * b + i % b;
    };
    if (pieces.size() > 1 || pieces[0].ref.row_begin >= 0) {
      rows = 0;
      for (const auto& p : pieces) rows = std::max(rows, p.ref.row_end >= 0 ? p.ref.row_end : canonical_tensor_shape(s, p.canon)[0]);
      std::vector<uint8_t> covered(static_cast<size_t>(rows * std::max<int64_t>(slabs, 1)), 0);
      for (const auto& p : pieces) {
        const int64_t n = canonical_tensor_shape(s, p.canon)[0];
        const int64_t end = std::max<int64_t>(p.ref.expert, 0) * rows + (p.ref.row_end >= 0 ? p.ref.row_end : n);
        for (int64_t i = 0; i < n; ++i) {
          const int64_t d = dst_row(p.ref, i, rows);
          if (d >= end || covered[static_cast<size_t>(d)]++) fail(ErrorKind::InvalidArgument, dir + ": " + hf, "row ranges of its pieces do not tile it");
        }
      }
      if (std::count(covered.begin(), covered.end(), 0)) fail(ErrorKind::InvalidArgument, dir + ": " + hf, "row ranges of its pieces do not tile it");
      shape[0] = rows;
    }
    if (slabs > 0) shape.insert(shape.begin(), slabs);
    const WeightSource* ws = &src;
    entries.push_back({hf, dtype, shape, [ws, pieces, dtype, shape, dst_row, rows] {
      Tensor out = Tensor::zeros(dtype, shape);
      uint8_t* dst = static_cast<uint8_t*>(out.data());
      for (const auto& p : pieces) {
        Tensor t = ws->get(p.canon);
        if (p.ref.interleaved_heads > 0) t = interleave_heads(t, p.ref.interleaved_heads, p.canon);
        t = to_dtype(t, dtype);
        if (!t.contiguous()) t = t.copy();
        const int64_t n = t.dim(0);
        const size_t unit = t.nbytes() / static_cast<size_t>(n);  // one row (one element of a vector)
        for (int64_t i = 0; i < n; ++i)
          std::memcpy(dst + static_cast<size_t>(dst_row(p.ref, i, rows)) * unit, static_cast<const uint8_t*>(t.data()) + static_cast<size_t>(i) * unit, unit);
      }
      return out;
    }});
  }
  make_dir(dir);
  json cfg = config;
  cfg["torch_dtype"] = dtype == DType::F32 ? "float32" : "bfloat16";
  {
    FileWriter f(dir + "/config.json");
    std::string text = cfg.dump(2) + "\n";
    f.write(text.data(), text.size());
    f.commit();
  }
  size_t done = 0;
  std::vector<SafetensorsEntry> counted = entries;
  if (progress)
    for (auto& e : counted) {
      auto inner = e.produce;
      const size_t total = entries.size();
      e.produce = [inner, &done, total, &progress] { Tensor t = inner(); progress(++done, total); return t; };
    }
  write_safetensors(dir + "/model.safetensors", counted, {{"format", "pt"}});
}

}  // namespace ptn
