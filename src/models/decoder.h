// Builds the graph of a decoder-only transformer from a ModelSpec. The families ptn supports
// (formats/families.h: Llama 1/2/3, Mistral, Qwen2/2.5, Qwen3, Gemma 2, Gemma 3, Phi-3, SmolLM3,
// dense Llama 4) differ only in what their ModelSpec says (norm style, q/k norms, biases,
// sandwich norms, soft-capping, RoPE per layer, activation) and in their row's Block kind,
// which picks the function that builds one layer (Block::Dense: attention + gated MLP;
// Block::Moe, Mixtral and Qwen3-MoE: attention + one moe_ffn node on the layers of experts).
#pragma once
#include <string>

#include "core/dtype.h"
#include "formats/model_spec.h"
#include "graph/graph.h"

namespace ptn {

struct BuildOptions {
  bool static_cache = false;          // in-graph K/V buffers (the comparison baseline)
  int64_t max_context_length = 0;     // static cache: positions held
  DType static_cache_dtype = DType::F32;
};

// Throws Unsupported naming the family when the spec is of a family ptn cannot build.
Graph build_decoder_graph(const ModelSpec& spec, const BuildOptions& options);

// Families the builder knows.
bool family_supported(const std::string& family);

}  // namespace ptn
