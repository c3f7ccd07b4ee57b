// A context-free grammar over Unicode code points, compiled from GBNF text (the llama.cpp grammar
// format, docs/grammar.md) into a flat form the matcher (grammar/matcher.h) walks:
//
//   elems:     every alternative of every rule, one after the other, each ended by an End
//              element; an element is a character set (one code point) or a rule reference.
//   rule_alts: for each rule, the positions in `elems` where its alternatives start.
//
// Repetitions (`*`, `+`, `?`, `{m,n}`) and groups are expanded into generated rules named after
// the rule they appear in ("value-3"). The compiler refuses left recursion (a rule that can reach
// itself without consuming a character), so the matcher's expansion always terminates.
// Every input error is a ptn::Error (InvalidArgument) naming line:column.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ptn::grammar {

// Bounds on what a grammar may cost to compile and to hold. The defaults are generous for
// hand-written and schema-generated grammars and keep a hostile one to a few MB and milliseconds.
struct Limits {
  size_t max_text_bytes = 1 << 20;  // GBNF source
  size_t max_rules = 20000;         // written and generated
  size_t max_elements = 1 << 20;    // compiled elements, after repetitions are expanded
  size_t max_sets = 1 << 16;        // distinct character sets
  int max_nesting = 64;             // depth of ( ) groups
  uint32_t max_repeat = 10000;      // m and n of {m,n}
};

// A set of code points: ranges (sorted, merged, inclusive) or, when negated, their complement.
struct CharSet {
  bool negated = false;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  uint64_t ascii[2] = {0, 0};  // bit c set: matches(c), for c < 128

  bool matches(uint32_t cp) const;
  // Whether some code point in [lo, hi] is in the set.
  bool intersects(uint32_t lo, uint32_t hi) const;
  // Sorts and merges `ranges` and fills the ASCII bitmap.
  void finish();
};

enum class ElemKind : uint8_t { End, Char, Rule };

struct Elem {
  ElemKind kind = ElemKind::End;
  uint32_t arg = 0;  // Char: index in sets; Rule: rule id
};

struct Grammar {
  std::vector<Elem> elems;
  std::vector<std::vector<uint32_t>> rule_alts;
  std::vector<std::string> rule_names;
  std::vector<CharSet> sets;
  uint32_t root = 0;
};

// Parses and compiles GBNF text; `where` names the source in errors ("grammar", a file name).
// Throws ptn::Error (InvalidArgument) with "where:line:column" for every malformed input.
Grammar parse_gbnf(std::string_view text, const std::string& where = "grammar", const Limits& limits = {});

// Checks a parsed grammar: left recursion (refused, naming the cycle). Called by parse_gbnf.
void check_grammar(const Grammar& g, const std::string& where);

}  // namespace ptn::grammar
