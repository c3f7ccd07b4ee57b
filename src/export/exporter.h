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
  int64_t max_seq_length = 0;
  int samples = 2;
  int64_t sample_prompt_tokens = 0;   // 0: min(max_seq_length, 24)
  int sample_decode_tokens = 6;
  std::string output;
  std::string command_line;           // recorded in the provenance
  bool allow_windows = true;          // the runtime caches honour window and chunk policies
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

}  // namespace ptn
