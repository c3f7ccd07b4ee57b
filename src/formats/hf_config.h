// Hugging Face config.json -> ModelSpec for Llama 1/2/3.x, Mistral, Qwen2/2.5, Qwen3, Gemma 2,
// Gemma 3 (text), Phi-3, SmolLM2/3 and dense Llama 4 text. A nested `text_config` is used when
// present. Layer attention types follow transformers' rules:
// - `layer_types` is authoritative when present;
// - Mistral, Mixtral, Phi-3, Starcoder2: a non-null `sliding_window` windows every layer;
// - Qwen2, Qwen3, SmolLM3: only with `use_sliding_window`, and then only layers
//   i >= `max_window_layers` (a `sliding_window` without `use_sliding_window` is unused);
// - Gemma 2: even layers are local (window), odd layers global;
// - Gemma 3: layer i is global when (i + 1) % sliding_window_pattern == 0 (default 6), else local;
// - Llama 4: layers with RoPE (`no_rope_layers[i]` == 1) are chunked (`attention_chunk_size`),
//   the others full without RoPE. SmolLM3's `no_rope_layers` zeros are NoPE layers.
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
