// Hugging Face config.json -> ModelSpec for the families of formats/families.h (Llama 1/2/3.x,
// Mistral, Qwen2/2.5, Qwen3, Gemma 2, Gemma 3 (text), Phi-3, SmolLM2/3 and dense Llama 4 text).
// A nested `text_config` is used when present. Layer attention types follow transformers' rules:
// - `layer_types` is authoritative when present;
// - otherwise the family row's WindowRule: Mistral, Phi-3 (AllLayers): a non-null
//   `sliding_window` windows every layer; Qwen2, Qwen3, SmolLM3 (FromMaxWindowLayers): only with
//   `use_sliding_window`, and then only layers i >= `max_window_layers` (a `sliding_window`
//   without `use_sliding_window` is unused); Gemma 2 and 3 (EveryNthGlobal): layer i is global
//   when (i + 1) % pattern == 0, else local (pattern 2 for Gemma 2; Gemma 3's
//   `sliding_window_pattern`, default 6); Llama 4 (ChunkOnRopeLayers): layers with RoPE
//   (`no_rope_layers[i]` == 1) are chunked (`attention_chunk_size`), the others full without
//   RoPE. SmolLM3's `no_rope_layers` zeros are NoPE layers.
// RoPE is read from `rope_scaling` (transformers 4) or `rope_parameters` (transformers 5, flat or
// keyed by layer type), which give the same spec; types ptn cannot compute (dynamic, longrope)
// are refused by name. Biases follow the family row (AttnBias, hf_mlp_bias); absent keys take the
// family's config-class defaults and an explicit null is None. See docs/cli.md, "What is read
// from an HF directory".
// Errors name the file (or `where`) and the field.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "formats/model_spec.h"

namespace ptn {

// `where` names the source in errors (usually the config.json path).
ModelSpec model_spec_from_hf_config(const nlohmann::json& config, const std::string& where);
// Reads and parses `path` (a config.json, at most 16 MB).
ModelSpec model_spec_from_hf_config_file(const std::string& path);

}  // namespace ptn
