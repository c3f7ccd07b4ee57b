// HF tokenizer.json (+ tokenizer_config.json beside it) -> TokenizerSpec.
// Supported: model BPE, either byte-level (ByteLevel pre-tokenizer/decoder: GPT-2, Llama 3,
// Qwen, ...) or SentencePiece-like (byte_fallback, ▁ via Prepend+Replace normalizers or Metaspace).
// Normalizers NFC, Prepend("▁"), Replace(" " -> "▁"); pre-tokenizers Split(Regex|String,
// Isolated), ByteLevel, Digits, Punctuation, Metaspace and Sequences of them. Anything else is
// refused with ErrorKind::Unsupported naming the file and field.
#pragma once
#include <string>

#include "formats/tokenizer_spec.h"

namespace ptn {

// Reads tokenizer.json at `tokenizer_json_path`, and tokenizer_config.json from the same
// directory if present (chat_template, bos/eos/pad token strings, add_bos_token/add_eos_token).
// The eos_token_id of generation_config.json and config.json there (an id or a list of ids)
// join the end-of-generation set (extra_eos_ids).
TokenizerSpec load_hf_tokenizer(const std::string& tokenizer_json_path);

// The same from JSON text already in memory; `source` names it in errors. `config_text` may be
// empty (no tokenizer_config.json).
TokenizerSpec parse_hf_tokenizer(const std::string& tokenizer_json_text, const std::string& config_text,
                                 const std::string& source);

// Adds the eos_token_id of a generation_config.json / config.json text (`where` names it in
// errors) to spec.extra_eos_ids. Ids outside the vocabulary are refused (Corrupt).
void add_generation_eos_ids(TokenizerSpec& spec, const std::string& json_text, const std::string& where);

}  // namespace ptn
