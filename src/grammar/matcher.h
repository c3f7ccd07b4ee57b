// The incremental recogniser of a Grammar over UTF-8 bytes: a pushdown automaton whose state is a
// set of stacks of grammar positions (an LL-style parse of every alternative at once).
//
// A stack is a chain of nodes in an arena: the top node is a character-set element the next code
// point must match, and each node below it holds where to continue in the calling rule after the
// rule above returns. Stacks share their lower parts (a node never changes once made), so
// stepping the whole set costs only the nodes that change. The empty stack (-1) means the root
// has been matched in full.
//
// Bytes are consumed one at a time; a character cut between two tokens waits as a partial code
// point: the stacks whose next character set cannot contain any completion of it are dropped
// at once, and the rest advance when the last byte arrives. Ill-formed UTF-8 is never accepted.
//
// Bounds: a stack deeper than Limits::max_stack_depth is dropped (that nesting is not allowed);
// more than max_stacks live stacks or max_expand_steps expansion steps for one character throw
// ptn::Error (Capacity): the grammar is too ambiguous.
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace ptn::grammar {

struct MatcherLimits {
  uint32_t max_stack_depth = 4096;
  size_t max_stacks = 4096;
  size_t max_expand_steps = 1 << 18;
};

class Matcher {
 public:
  // The position of a parse: the stacks and a partial UTF-8 character.
  struct State {
    std::vector<int32_t> heads;  // top node of each stack (-1: the empty stack)
    uint32_t partial = 0;        // the bits of the cut character read so far
    uint8_t need = 0;            // continuation bytes still missing (0: none pending)
    uint8_t length = 0;          // the cut character's full length in bytes
  };

  explicit Matcher(std::shared_ptr<const Grammar> grammar, const MatcherLimits& limits = {});

  // Consumes the bytes if the language has a string that starts with what was accepted so far
  // followed by them; returns false and changes nothing otherwise.
  bool accept(std::string_view bytes);
  // Whether accept(bytes) would succeed.
  bool can_accept(std::string_view bytes);
  // The root is matched in full (no character pending): the text may end here.
  bool is_complete() const { return is_complete(state_); }
  // No string of the language starts with what was accepted (only when the language is empty,
  // or every parse was dropped for depth).
  bool is_dead() const { return state_.heads.empty(); }

  const Grammar& grammar() const { return *g_; }
  const State& state() const { return state_; }

  // The building blocks of the token mask (grammar/token_mask.h): step a state by one byte into
  // `out` (nodes it makes go to the end of the arena), and cut the arena back to a mark.
  bool step(const State& in, uint8_t byte, State& out);
  bool is_complete(const State& s) const;
  size_t arena_mark() const { return nodes_.size(); }
  void arena_reset(size_t mark) { nodes_.resize(mark); }
  // A state's canonical form, independent of where its nodes sit in the arena: appends the
  // pending character and, per head in order, the stack's length and its positions from the top
  // down. Two states with equal keys step alike on every byte. state_from_key rebuilds a state
  // from a key (its nodes go to the end of the arena, unshared) and returns the key's length.
  void state_key(const State& s, std::vector<uint32_t>& key) const;
  size_t state_from_key(const uint32_t* key, State& out);

 private:
  struct Node {
    uint32_t pos;    // an element of grammar().elems
    int32_t parent;  // the node below (-1: none)
    uint32_t depth;  // nodes in the stack, this one included
  };

  int32_t push(uint32_t pos, int32_t parent);
  void expand(uint32_t pos, int32_t parent, std::vector<int32_t>& heads);
  void add_head(int32_t node, std::vector<int32_t>& heads) const;
  bool same_stack(int32_t a, int32_t b) const;
  void advance(const std::vector<int32_t>& heads, uint32_t cp, std::vector<int32_t>& out);
  void keep_if_possible(const std::vector<int32_t>& heads, uint32_t lo, uint32_t hi, std::vector<int32_t>& out) const;
  void compact();

  std::shared_ptr<const Grammar> g_;
  MatcherLimits lim_;
  std::vector<Node> nodes_;
  State state_;
  std::vector<std::pair<uint32_t, int32_t>> work_;  // expand()'s pending (position, parent)
};

}  // namespace ptn::grammar
