// Pre-tokenization of byte-level BPE: the text is cut into words by a list of regexes applied
// in turn, each one cutting every current piece into its matches and the gaps between them
// (HF `Split(behavior=Isolated)`, and the GPT-2 pattern of `ByteLevel(use_regex=true)`).
// Patterns use PCRE2 in UTF mode with Unicode properties (\p{L}, \p{N}, \s follow Unicode);
// invalid UTF-8 in the text never matches and so ends up in gap pieces of its own.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ptn::tok {

// The GPT-2 pattern (HF ByteLevel with use_regex=true).
extern const char* const kGpt2Pattern;

// The split patterns that a GGUF `tokenizer.ggml.pre` name stands for ("llama-bpe", "qwen2",
// "deepseek-llm", "falcon", "gpt-2", "starcoder", ...; "" and "default" give ggml's default list).
// Throws Unsupported for an unknown name.
std::vector<std::string> pre_tokenizer_patterns(const std::string& pre_name);

// Whether llama.cpp takes a whole pre-token found in the vocabulary as one token for this name
// (its `ignore_merges`: the Llama 3 names and "tekken").
bool pre_tokenizer_ignores_merges(const std::string& pre_name);

// The GGUF pre-tokenizer name whose patterns are exactly `patterns` (preferring one whose
// ignore_merges is `ignore_merges`), or "" when no name stands for them.
std::string pre_tokenizer_name_for(const std::vector<std::string>& patterns, bool ignore_merges);

// A pattern that starts with this PCRE2 comment keeps only its matches: the text between them
// is dropped (HF `Split(behavior=Removed, invert=true)`).
extern const char* const kDropGapsMarker;

class RegexSplitter {
 public:
  // Compiles the patterns; throws ptn::Error (InvalidArgument) naming the pattern on a bad one.
  explicit RegexSplitter(const std::vector<std::string>& patterns);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Cuts `text` into consecutive non-empty pieces whose concatenation is `text` (less the gaps
  // of a kDropGapsMarker pattern).
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Compiled;
  std::vector<std::unique_ptr<Compiled>> regexes_;
};

}  // namespace ptn::tok
