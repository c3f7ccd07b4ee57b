// Tokenizer: text <-> token ids for the families of LLM vocabularies, built from a
// TokenizerSpec (GGUF tokenizer.ggml.* keys or an HF tokenizer.json):
//  - SentencePiece style (Llama 1/2, Gemma, Phi-3): spaces as ▁, a leading ▁ (add_space_prefix),
//    pairs merged by score (GGUF: highest score first) or by merge rank (tokenizer.json), leftmost
//    first on ties; characters without a token become <0xXX> byte tokens (or <unk>).
//  - Byte-level BPE (GPT-2, Llama 3, Qwen, DeepSeek, StarCoder, Falcon, ...): the text is cut into
//    words by the family's regexes, each byte written as a GPT-2 byte-level character, then merged
//    by rank. Any bytes encode.
//  - WordPiece (BERT, from GGUF): uncased BERT normalization, then longest-match pieces.
// Added tokens (control, user-defined, unknown) are cut out of the text first, longest
// match first; control and unknown ones only when parse_special is set.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "formats/tokenizer_spec.h"

namespace ptn {

struct ByteSpan {
  size_t begin = 0, end = 0;  // [begin, end) in bytes
};

class Tokenizer {
 public:
  // Validates the spec (ids in range, merges and patterns usable); throws ptn::Error.
  static std::unique_ptr<Tokenizer> create(const TokenizerSpec& spec);
  virtual ~Tokenizer();

  // add_special: BOS/EOS as the spec says. parse_special: control tokens written in the text
  // (e.g. "<|im_start|>") become their ids; otherwise they are encoded as plain text.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
  // encode(text, add_special, parse_special=true), except that no control token is recognised
  // that overlaps a `literal` span (sorted, disjoint byte ranges of text): there its text is
  // encoded as plain text. Chat prompts use it so that text from a request never becomes
  // control tokens while the template's own markup does.
  std::vector<int32_t> encode_with_literals(std::string_view text, bool add_special,
                                            const std::vector<ByteSpan>& literal) const;
  // Where control (or unknown) token texts occur in `text`, leftmost-longest, as encode with
  // parse_special would cut them.
  std::vector<ByteSpan> find_control_tokens(std::string_view text) const;

  // The bytes the ids stand for (not necessarily valid UTF-8 for a cut sequence). skip_special
  // leaves out control and unknown tokens. Ids out of range throw ptn::Error.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const;

  // The bytes of one token as decode would emit them in the middle of a text (no leading-space
  // strip). Control tokens give their text.
  std::string token_piece(int32_t id) const;
  // The token as stored in the vocabulary (▁ / byte-level characters as written).
  const std::string& token_text(int32_t id) const;
  std::optional<int32_t> token_id(std::string_view token_text) const;

  int32_t vocab_size() const;
  TokenizerKind kind() const;
  TokenType token_type(int32_t id) const;
  bool is_control(int32_t id) const;  // control or unknown: what skip_special leaves out
  // End of generation: eos, eot, extra_eos_ids, and non-normal tokens named like the usual
  // end-of-turn markers (<|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>, ...).
  bool is_eog(int32_t id) const;
  std::optional<int32_t> bos() const;
  std::optional<int32_t> eos() const;
  const TokenizerSpec& spec() const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::vector<int32_t> encode_impl(std::string_view text, bool add_special, bool parse_special,
                                   const std::vector<ByteSpan>& literal) const;
  std::unique_ptr<Impl> impl_;
  friend class StreamDecoder;
};

// Decodes ids one at a time into text that never ends inside a UTF-8 character: bytes of an
// incomplete character wait for the next token; ill-formed bytes become U+FFFD. Concatenating
// every push() and finish() gives sanitize_utf8(decode(all ids)).
class StreamDecoder {
 public:
  // text_start: the first token pushed begins the text, so SentencePiece drops the leading space
  // that encode added (as decode does). Pass false when the tokens continue a text already shown
  // (generation after a prompt): then "▁time" after "Once upon a" gives " time".
  StreamDecoder(const Tokenizer& tokenizer, bool skip_special, bool text_start = true);
  std::string push(int32_t id);
  std::string finish();  // flushes a trailing incomplete character as U+FFFD; resets
  void reset();          // forget pending bytes; the next token is treated as at construction

 private:
  std::string take_complete(bool final);
  const Tokenizer& tok_;
  bool skip_special_;
  bool text_start_;
  bool at_start_;  // nothing emitted yet and text_start_ (SPM strips one leading space)
  std::string pending_;
};

}  // namespace ptn
