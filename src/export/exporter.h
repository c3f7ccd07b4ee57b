// `ptn export`: model files -> a .ptn program (graph + weights + cache spec + tokenizer +
// golden samples + provenance), with the checks of DESIGN.md: one update_and_attend per layer
// and no cache state in the off-graph program, an op-support report, and golden samples
// computed by the reference ops with the reference cache.
#pragma once
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "core/dtype.h"
#include <memory>

#include "runtime/manifest.h"
#include "runtime/program.h"

namespace ptn {

struct ExportOptions {
  std::string model;         // HF directory, a config.json (with random_weights), or a .gguf
  std::string gguf;          // weights (and tokenizer if the directory has none) from this GGUF
  bool random_weights = false;
  uint64_t seed = 0;
  bool offgraph_cache = false;  // given explicitly (the default anyway)
  bool static_cache = false;
  int64_t max_context_length = 0;     // static cache only
  std::string kv_cache_dtype;         // static cache only
  std::string quantize;               // "" (keep source types), f32, f16, bf16, q8_0, q4_0, q4_k_m
  // Matrices that would be stored as F16 (under `quantize`, or kept from the source) are stored
  // as BF16 instead, converted straight from the source values; the golden samples then come
  // from the source weights, so `ptn verify` shows what the conversion costs.
  bool f16_as_bf16 = false;
  // Golden samples from the source weights for every weight whose type changes lossily (any
  // --quantize, not only --f16-as-bf16), so `ptn verify --max-nmse X` measures the whole cost.
  bool golden_from_source = false;
  int64_t max_seq_length = 0;
  int samples = 2;
  int64_t sample_prompt_tokens = 0;   // 0: min(max_seq_length, 24)
  int sample_decode_tokens = 6;
  std::string output;
  std::string command_line;           // recorded in the provenance
  bool allow_windows = true;          // the runtime caches honour window and chunk policies
  bool progress = true;               // progress lines on stderr while converting and sampling
};

struct ExportResult {
  ProgramMeta meta;
  uint64_t bytes = 0;
  std::string op_report;
};

// Checks the option combinations (without touching any file); throws InvalidArgument with a
// message that names the flags and what replaces them.
void validate_export_options(const ExportOptions& o);

ExportResult export_program(const ExportOptions& o, std::ostream& log);

// Everything export_program does except writing the file: the program in memory (the weights
// converted, golden samples computed when o.samples > 0). `ptn bench` runs a GGUF this way.
// o.output may be empty here.
std::shared_ptr<const Program> export_in_memory(const ExportOptions& o, std::ostream& log);

// Weight type for a tensor under a --quantize policy ("" keeps `source`): norms and biases
// stay f32; rows that do not fit a block fall back as llama.cpp does.
DType export_weight_type(const std::string& policy, const std::string& name, DType source,
                         const std::vector<int64_t>& shape, const ModelSpec& spec);

// The same with --f16-as-bf16 applied when `f16_as_bf16`: a matrix export_weight_type makes F16
// becomes BF16; every other tensor keeps its type.
DType export_weight_type(const std::string& policy, bool f16_as_bf16, const std::string& name, DType source,
                         const std::vector<int64_t>& shape, const ModelSpec& spec);

// The value of the provenance field "weight_conversion" for --f16-as-bf16 (with
// --golden-from-source and other lossy conversions: "quantize <policy>[ + f16->bf16]"), and of
// "golden_weights" when the golden samples were computed on the source weights.
inline constexpr const char* kF16AsBf16Conversion = "f16->bf16";
inline constexpr const char* kGoldenFromSource = "source";
// `ptn verify`'s default NMSE threshold for such programs: the conversion's cost is part of what
// it compares (see cmd_verify.cpp for the measured costs behind the value).
inline constexpr double kF16AsBf16VerifyMaxNmse = 3e-3;

}  // namespace ptn
