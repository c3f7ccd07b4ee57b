// WeightSource: a model's spec and its tensors under canonical (GGUF) names, whatever the
// source: an HF directory (config.json + safetensors, single or sharded), a GGUF file, an HF
// directory whose weights come from a separate GGUF, or random weights (random_weights.h).
//
// Tensors come back in ptn conventions (model_spec.h): [out, in] row-major, Q/K rows in
// half-split RoPE order. Views of the mapped files where possible; owned copies where the
// source needs a transformation (rows permuted back from llama.cpp's interleaved layout,
// fused Phi-3 tensors split).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "formats/model_spec.h"
#include "formats/tokenizer_spec.h"

namespace ptn {

struct SourceFile {
  std::string path;
  uint64_t size = 0;
  std::string sha256;  // lowercase hex
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual const ModelSpec& spec() const = 0;
  // The tokenizer stored with the weights (GGUF files only; HF tokenizer.json is read elsewhere).
  virtual std::optional<TokenizerSpec> tokenizer() const { return std::nullopt; }
  virtual bool has(const std::string& name) const = 0;
  virtual std::vector<std::string> names() const = 0;  // canonical names, sorted
  // Throws InvalidArgument naming the tensor if absent.
  virtual Tensor get(const std::string& name) const = 0;
  // The files read, with their sizes and SHA-256 (computed on call: reads every byte).
  virtual std::vector<SourceFile> source_files() const { return {}; }
  // A one-line description of the source ("GGUF file x.gguf", "HF directory d", ...).
  virtual std::string describe() const = 0;
  // Tensors of the source files that no canonical tensor reads, sorted (safetensors sources;
  // empty for GGUF and random weights).
  virtual std::vector<std::string> unused_source_tensors() const { return {}; }
};

// Unused source tensors sorted into known optional parts, each left out with a note that says
// so ("vision tower left out: text-only program (12 tensors)"), and the rest, which an exporter
// must refuse: a weight ptn does not understand is never dropped silently.
struct UnusedTensors {
  std::vector<std::string> notes;
  std::vector<std::string> refused;
};
UnusedTensors classify_unused_tensors(const ModelSpec& spec, const std::vector<std::string>& unused);

// Opens `path`: a GGUF file, an HF directory (config.json + safetensors), or a single
// .safetensors file next to a config.json. If `gguf_weights` is given, `path` must be an HF
// directory whose config gives the spec while the tensors come from that GGUF.
std::unique_ptr<WeightSource> open_weights(const std::string& path, const std::string& gguf_weights = "");

// How a canonical tensor is obtained from a tensor of the source, written in
// ModelSpec::tensor_sources as text:
//   "name"                          the tensor as stored
//   "name[rows A:B]"                rows [A, B) of the outermost dimension
//   "name[rows A:B:S]"              rows A, A + S, ... below B (gpt-oss's interleaved gate/up)
//   "name[expert E]"                matrix E of a [experts, rows, cols] tensor, or vector E of
//                                   an [experts, n] one (taken first, before the rest)
//   "name (mxfp4 scales: S)"        name holds MXFP4 codes as OpenAI ships them, U8
//                                   [rows, cols / 32, 16] (two codes a byte, low nibble first),
//                                   S their U8 [rows, cols / 32] exponents: read as ptn's MXFP4
//                                   [rows, cols] (the same values; the nibbles reordered)
//   "name (transposed)"             a float matrix [in, out] read as [out, in]
//   "name (interleaved, H heads)"   rows permuted from interleaved RoPE pairs to half-split
//   "name[head rows A:B of C]"      rows [A, B) of every C rows (DeepSeek's per-head k|v of kv_b_proj)
//   "name (transposed in N blocks)" a float matrix [N a, b] read as [N b, a], each [a, b] block
//                                   transposed (kv_b_proj's key part as llama.cpp's attn_k_b)
// Order: expert, MXFP4 unpacking, transpose, rows, head rows, block transpose, permutation.
struct TensorSourceRef {
  std::string name;
  int64_t row_begin = -1, row_end = -1;  // -1: all rows
  int64_t interleaved_heads = 0;         // 0: no permutation
  int64_t expert = -1;                   // >= 0: matrix `expert` of a [E, rows, cols] tensor (GGUF's merged experts)
  int64_t row_step = 1;                  // with row_begin: every row_step-th row ...
  int64_t row_block = 1;                 // ... block of row_block rows (GPT-NeoX's per-head q|k|v)
  bool transposed = false;
  int64_t head_period = 0, head_begin = 0, head_end = 0;  // head_period > 0: rows [head_begin, head_end) of every head_period
  int64_t transposed_blocks = 0;                          // > 0: each of this many row blocks transposed
  std::string mxfp4_scales;              // non-empty: `name` is MXFP4 blocks with these scales
};
std::string format_tensor_source(const TensorSourceRef& r);
// Throws Internal for text that format_tensor_source did not produce.
TensorSourceRef parse_tensor_source(const std::string& text);

// The row permutation: rows of each of `heads` heads of size D, stored as interleaved pairs
// (2i, 2i+1), returned in half-split order (i, i + D/2): out[h*D + j*D/2 + i] = in[h*D + 2i + j].
// Works for any dtype (rows are copied whole); 1-D tensors (biases) are permuted per element.
Tensor deinterleave_heads(const Tensor& t, int64_t heads, const std::string& where);
// The inverse (half-split -> interleaved), used by the GGUF writer for the llama architecture.
Tensor interleave_heads(const Tensor& t, int64_t heads, const std::string& where);

}  // namespace ptn
