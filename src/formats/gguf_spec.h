// GGUF metadata -> ModelSpec (the architectures of formats/families.h rows with gguf_reads:
// llama, qwen2, qwen3, gemma2, gemma3, phi3) and -> TokenizerSpec
// (tokenizer.ggml.*). Errors name the file and the key.
#pragma once
#include "formats/families.h"
#include "formats/gguf.h"
#include "formats/model_spec.h"
#include "formats/tokenizer_spec.h"

namespace ptn {

// The model described by a GGUF file. tensor_sources maps canonical names to the GGUF tensors
// they come from; for the llama architecture, attn_q/attn_k rows are noted as interleaved (the
// WeightSource undoes that). GGUF Gemma norm weights already include the +1 (llama.cpp adds it
// at conversion), so norm_weight_plus_one is false for them. Throws Unsupported for other
// architectures (naming general.architecture) and for features ptn cannot run (MoE, longrope).
ModelSpec model_spec_from_gguf(const GgufFile& g);

// The query scale llama.cpp uses for a family with query_pre_attn_scalar when the file has no
// attention.scale: 1/sqrt(hidden/heads) for the 27B models, else 1/sqrt(head_dim).
float gguf_default_query_scale(const FamilyInfo& fam, const ModelSpec& s);

// The tokenizer stored in the file. Throws Corrupt if tokenizer.ggml.tokens is absent or the
// arrays disagree, Unsupported for tokenizer models other than llama (SPM) and gpt2 (BPE).
TokenizerSpec tokenizer_spec_from_gguf(const GgufFile& g);
bool gguf_has_tokenizer(const GgufFile& g);

}  // namespace ptn
