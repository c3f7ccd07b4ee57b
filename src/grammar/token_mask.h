// Which tokens a grammar allows next, for a whole vocabulary at once.
//
// TokenTrie: the token pieces (Tokenizer::token_piece) in a byte trie, laid out in preorder with
// for each node the index just past its subtree. Built once per tokenizer and shared (read-only)
// by every sequence. Control tokens and empty pieces are left out (never allowed by a grammar),
// except harmony's header markers <|channel|>, <|message|> and <|constrain|> (by their text) in
// a tokenizer that has <|return|> and <|call|>; end-of-generation tokens are listed apart.
//
// compute_mask walks the trie once against the matcher's state: a node's state is its parent's
// stepped by one byte, so a prefix shared by many tokens is checked once, and a subtree is skipped
// as soon as its prefix leaves the language. The states met are interned by their canonical form
// (Matcher::state_key) and each (state, byte) is stepped through the matcher only once per walk,
// so where the state repeats (inside a JSON string every content character leads back to the
// same state) a node costs a table read. End-of-generation tokens are allowed exactly when the
// grammar is complete.
//
// GrammarProcessor is the gen::LogitProcessor of constrained decoding: apply() sets the logits of
// the tokens the mask refuses to -inf, accept() advances the matcher by the drawn token's bytes.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "generate/generator.h"
#include "grammar/matcher.h"

namespace ptn {
class Tokenizer;
}

namespace ptn::grammar {

class TokenTrie {
 public:
  explicit TokenTrie(const Tokenizer& tokenizer);

  struct Node {
    uint8_t byte;        // the byte from the parent (the root has none)
    uint16_t depth;      // bytes from the root
    uint32_t skip;       // index just past this node's subtree
    uint32_t tok_begin;  // tokens whose piece ends here: token_ids()[tok_begin, tok_end)
    uint32_t tok_end;
  };
  const std::vector<Node>& nodes() const { return nodes_; }  // [0] is the root (empty prefix)
  const std::vector<int32_t>& token_ids() const { return ids_; }
  const std::vector<int32_t>& eog_ids() const { return eog_; }
  // The control tokens in the trie (by their text): harmony's header markers, else none.
  bool allows_control(int32_t id) const { return std::find(control_.begin(), control_.end(), id) != control_.end(); }
  int32_t vocab_size() const { return vocab_size_; }
  size_t max_depth() const { return max_depth_; }

 private:
  std::vector<Node> nodes_;
  std::vector<int32_t> ids_;
  std::vector<int32_t> eog_;
  std::vector<int32_t> control_;
  int32_t vocab_size_ = 0;
  size_t max_depth_ = 0;
};

// allowed[id] = 1 for every token the grammar allows after what `m` accepted (allowed is resized
// to the trie's vocab_size). The matcher's accepted state is unchanged.
void compute_mask(Matcher& m, const TokenTrie& trie, std::vector<uint8_t>& allowed);

// What compute_mask learns, kept for the next steps of one sequence: the interned states and
// their transitions (up to 65536 states and 32 MB of keys; then it starts over, and a walk that
// alone would pass that steps the matcher at every node instead), and the masks of the last 4 root
// states (inside a string the state before each token is the same, so the mask is a copy). Up to
// about 4 MB of transition rows plus 4 masks. A cache follows one grammar and one trie (it starts
// over when either changes) and one thread at a time.
class MaskCache {
 public:
  MaskCache();
  ~MaskCache();
  MaskCache(const MaskCache&) = delete;
  MaskCache& operator=(const MaskCache&) = delete;
  struct Impl;  // token_mask.cpp's
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// compute_mask through a cache (the same mask).
void compute_mask(Matcher& m, const TokenTrie& trie, std::vector<uint8_t>& allowed, MaskCache& cache);

namespace detail {
// compute_mask with the number of states that keep a dense transition row (the rest use a hash
// map) and the bound on the interned keys' total length (uint32 words) past which a walk drops
// the cache and steps the matcher at every node; compute_mask uses 4096 and 2^23. For the tests.
void compute_mask(Matcher& m, const TokenTrie& trie, std::vector<uint8_t>& allowed, MaskCache& cache,
                  size_t dense_states, size_t max_key_words);
}  // namespace detail

class GrammarProcessor : public gen::LogitProcessor {
 public:
  GrammarProcessor(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                   const Tokenizer& tokenizer, const MatcherLimits& limits = {});

  // Logits of ids the mask refuses, and of ids past the tokenizer's vocabulary, become -inf.
  void apply(float* logits, int64_t n_vocab) override;
  // Throws ptn::Error (InvalidArgument) for a token the grammar does not allow.
  void accept(int32_t token) override;

  const Matcher& matcher() const { return matcher_; }
  bool ended() const { return ended_; }  // an end-of-generation token was accepted

 private:
  std::shared_ptr<const TokenTrie> trie_;
  const Tokenizer& tok_;
  Matcher matcher_;
  MaskCache cache_;
  std::vector<uint8_t> allowed_;
  bool ended_ = false;
};

}  // namespace ptn::grammar
