// GGUF writer (version 3, little-endian) and the model -> GGUF mapping that llama.cpp loads:
// metadata keys named as llama.cpp names them, tensors under canonical names, with the layout
// facts of the architecture's row in formats/families.h (the llama architecture's attn_q/attn_k
// rows interleaved, Gemma norms stored as 1 + w, Phi-3 q/k/v and gate/up fused), quantized with
// the Q4_K_M mix when asked.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "formats/gguf.h"
#include "formats/tokenizer_spec.h"
#include "formats/weights.h"

namespace ptn {

class GgufWriter {
 public:
  explicit GgufWriter(uint64_t alignment = 32);

  // Metadata; setting a key again replaces its value (order of first setting is kept).
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
  // A value exactly as another GGUF file stores it (GgufValue::type and ::encoded).
  void set_raw(const std::string& key, GgufType type, std::string_view encoded);
  bool has_key(const std::string& key) const;

  // A tensor whose bytes come from `produce` when the file is written (one at a time, so a large
  // model never sits in memory whole). The produced tensor must have exactly `dtype` and `shape`.
  void add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, std::function<Tensor()> produce);
  void add_tensor(const std::string& name, const Tensor& t);

  // Writes `path` (through path.tmp, renamed at the end). `progress(i, n)` after each tensor.
  void write(const std::string& path, const std::function<void(size_t, size_t)>& progress = {}) const;

 private:
  struct Kv { std::string key; uint32_t type; std::string bytes; };
  struct TensorEntry { std::string name; DType dtype; std::vector<int64_t> shape; uint64_t nbytes; std::function<Tensor()> produce; };
  void put(const std::string& key, GgufType type, std::string bytes);
  uint64_t alignment_;
  std::vector<Kv> kv_;
  std::vector<TensorEntry> tensors_;
};

// Target types of `ptn synth --type` and their llama.cpp file types (general.file_type).
enum class GgufFileType { F32, F16, BF16, Q8_0, Q4_0, Q4_K_M, Q3_K_M, Q2_K, TQ1_0, TQ2_0, IQ4_NL, IQ4_XS };
// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k_m", "q3_k_m", "q2_k", "tq1_0", "tq2_0", "iq4_nl", "iq4_xs"
GgufFileType gguf_file_type_from_name(const std::string& name);
const char* gguf_file_type_name(GgufFileType t);

// The type llama-quantize would give the canonical tensor `name` of shape `shape` (ptn order)
// for file type `ft`, including its fallbacks for rows that are not a multiple of the block.
DType gguf_tensor_type(GgufFileType ft, const ModelSpec& spec, const std::string& name, const std::vector<int64_t>& shape);

struct GgufModelOptions {
  GgufFileType type = GgufFileType::F32;
  std::string name = "ptn-synth";                  // general.name
  const TokenizerSpec* tokenizer = nullptr;         // written as tokenizer.ggml.* if given
  const GgufFile* tokenizer_from = nullptr;         // or: copy this file's tokenizer.* keys verbatim
};

// The GGUF architecture name llama.cpp uses for a spec's family; throws Unsupported when the
// spec has something that architecture cannot express.
std::string gguf_arch_for(const ModelSpec& spec);

// Writes the model of `src` as a GGUF file llama.cpp can load.
void write_model_gguf(const WeightSource& src, const std::string& path, const GgufModelOptions& opt,
                      const std::function<void(size_t, size_t)>& progress = {});

// Puts a TokenizerSpec into tokenizer.ggml.* keys (the inverse of tokenizer_spec_from_gguf).
void set_tokenizer_keys(GgufWriter& w, const TokenizerSpec& t);
// A stand-in SentencePiece vocabulary of `vocab` pieces (<unk>, <s>, </s>, the 256 byte pieces,
// then "tok<N>" fillers) so that a synthetic model file is complete and loadable.
TokenizerSpec placeholder_tokenizer(int64_t vocab);

}  // namespace ptn
