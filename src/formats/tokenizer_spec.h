// TokenizerSpec: the tokenizer data of a model, from GGUF `tokenizer.ggml.*` keys or from an HF
// tokenizer.json + tokenizer_config.json. src/tokenizer builds a tokenizer from it; the .ptn
// file stores it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ptn {

enum class TokenizerKind {
  SentencePiece,  // scores + byte fallback (GGUF "llama", HF BPE with byte_fallback and ▁)
  ByteLevelBPE,   // merges by rank over GPT-2 byte-to-unicode symbols (GGUF "gpt2")
  WordPiece,      // BERT (GGUF "bert"): longest match; word-initial pieces start with ▁, continuations
                  // are written without "##" (llama.cpp's converter); uncased, accents stripped
};

enum class TokenType : int32_t {  // GGUF token_type values
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

struct TokenizerSpec {
  TokenizerKind kind = TokenizerKind::SentencePiece;
  std::vector<std::string> tokens;          // id -> piece as stored (▁ for space in SPM; byte-level chars in BPE)
  std::vector<float> scores;                // SPM merge scores (may be empty for BPE)
  std::vector<TokenType> token_types;       // may be empty: all Normal
  std::vector<std::string> merges;          // BPE merges "a b", in rank order
  std::string pre_tokenizer;                // GGUF tokenizer.ggml.pre name ("llama-bpe", "qwen2", ...) or ""
  std::vector<std::string> pre_split_regexes;  // explicit split patterns (from tokenizer.json), in order
  bool pre_split_explicit = false;          // pre_split_regexes is the whole pre-tokenizer, even if empty
                                            // (tokenizer.json); otherwise pre_tokenizer's name decides
  bool bpe_add_prefix_space = false;        // BPE: prepend " " to text not starting with one (ByteLevel add_prefix_space)

  std::optional<int32_t> bos_id, eos_id, unk_id, pad_id, eot_id;
  std::vector<int32_t> extra_eos_ids;       // other end-of-generation ids (e.g. <|eot_id|>, <|im_end|>)
  std::vector<int32_t> lstrip_ids, rstrip_ids;  // added tokens that swallow the whitespace before / after
                                                // them in the text (HF AddedToken lstrip / rstrip)
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = true;             // SPM: prepend ▁ to the text (the leading-space rule)
  bool space_prefix_first_only = false;     // SPM: only to text at the very start, not after special
                                            // tokens (HF Metaspace prepend_scheme "first")
  bool byte_fallback = true;                // SPM: unknown characters as <0xXX> tokens
  bool ignore_merges = false;               // BPE (Llama 3): a word that is itself a token is not split
  std::string normalizer;                   // "" or "nfc" (Qwen); SPM space replacement is implied

  std::string chat_template;                // Jinja source, "" if none
  std::string bos_token, eos_token;         // as strings, for templates
};

}  // namespace ptn
