// Synthetic models: a config (a named preset with a real model's shapes, or any config.json)
// with random weights, written as an HF directory (config.json + model.safetensors) and/or a
// GGUF file. Used to test import, export and the runtime on every family without downloads.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "formats/weights.h"

namespace ptn {

// Preset names: "tiny", "llama-3.2-1b", "qwen3-0.6b", "gemma-3-1b", "smollm2-135m".
std::vector<std::string> synth_preset_names();
// The preset's config.json; throws InvalidArgument listing the presets for an unknown name.
nlohmann::json synth_preset(const std::string& name);

// Writes `dir`/config.json (`config` with torch_dtype set) and `dir`/model.safetensors holding the
// tensors of `src` under the HF names of src.spec().tensor_sources (fused tensors re-fused,
// Llama 4 q/k rows re-interleaved), in F32 or BF16. Creates `dir` if needed.
void write_hf_directory(const WeightSource& src, const nlohmann::json& config, const std::string& dir, DType dtype,
                        const std::function<void(size_t, size_t)>& progress = {});

}  // namespace ptn
