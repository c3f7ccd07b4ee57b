// Finding the tokenizer of a model file: a GGUF (tokenizer.ggml.* keys), an HF tokenizer.json
// (with tokenizer_config.json beside it), or a model directory holding tokenizer.json.
// .ptn programs are recognised (magic "PTN\0PROG" or the extension) but not read yet.
#pragma once
#include <memory>
#include <string>

#include "formats/tokenizer_spec.h"
#include "tokenizer/tokenizer.h"

namespace ptn {

class GgufFile;

enum class TokenizerSource { Gguf, HfJson, Ptn };

// Which kind of file `path` is, by its first bytes (then its extension); throws
// InvalidArgument for anything else and Io if it cannot be read.
TokenizerSource detect_tokenizer_source(const std::string& path);

// The tokenizer spec stored in `path`. Throws Unsupported for .ptn files (not yet wired).
TokenizerSpec load_tokenizer_spec(const std::string& path);

// A GGUF WordPiece (BERT) vocabulary, which formats/gguf_spec does not cover: tokens, types,
// unknown/separator/cls/padding ids; [CLS] text [SEP] when adding special tokens.
TokenizerSpec wordpiece_spec_from_gguf(const GgufFile& g);

// Flags that GGUF files do not store but the reference tokenizer has, added by model: Phi-3's
// chat markers swallow the whitespace after them (rstrip). load_tokenizer_spec applies it.
void apply_gguf_strip_rules(const GgufFile& g, TokenizerSpec& spec);

// Before writing `spec` (from a tokenizer.json at `where`) into a GGUF file: sets its
// pre_tokenizer to the llama.cpp name that stands for its split regexes; throws Unsupported,
// naming the regexes, when no name does.
void name_gguf_pre_tokenizer(TokenizerSpec& spec, const std::string& where);

// Tokenizer::create(load_tokenizer_spec(path)).
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace ptn
