// GBNF text -> Grammar. A recursive-descent parser over the bytes of the source (nesting bounded
// by Limits::max_nesting), building each rule as alternatives of element sequences; repetitions
// become generated rules; then the rules are flattened into Grammar::elems and checked.
#include <algorithm>
#include <map>

#include "core/error.h"
#include "grammar/grammar.h"
#include "tokenizer/utf8.h"

namespace ptn::grammar {
namespace {

using Seq = std::vector<Elem>;
using Alts = std::vector<Seq>;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& where, const Limits& limits)
      : s_(text), where_(where), lim_(limits) {}

  Grammar run();

 private:
  [[noreturn]] void error(size_t at, const std::string& msg) const;
  bool eof() const { return i_ >= s_.size(); }
  char peek(size_t ahead = 0) const { return i_ + ahead < s_.size() ? s_[i_ + ahead] : '\0'; }
  void skip_space(bool newlines);
  bool at_rule_start() const;
  std::string parse_name();
  void parse_rule();
  Alts parse_alternates(uint32_t rule, int depth);
  Seq parse_sequence(uint32_t rule, int depth);
  Seq parse_item(uint32_t rule, int depth);
  Seq repeat(uint32_t rule, const Seq& item, uint32_t min, int64_t max, size_t at);
  void parse_repeat_bounds(uint32_t& min, int64_t& max);
  uint32_t parse_count();
  uint32_t parse_char(bool in_class);
  Seq parse_literal();
  Seq parse_class();
  uint32_t symbol(const std::string& name, size_t at);
  uint32_t new_rule(uint32_t parent, size_t at);
  uint32_t add_set(CharSet set);
  uint32_t single_char(uint32_t cp);
  void count_elements(size_t n, size_t at);
  Grammar compile();

  std::string_view s_;
  std::string where_;
  Limits lim_;
  size_t i_ = 0;
  std::map<std::string, uint32_t> ids_;
  std::vector<std::string> names_;
  std::vector<size_t> first_use_;  // byte offset of the first reference (or definition)
  std::vector<bool> defined_;
  std::vector<Alts> rules_;
  std::vector<uint32_t> generated_count_;
  std::vector<CharSet> sets_;
  std::map<uint32_t, uint32_t> single_sets_;  // code point -> set index
  size_t n_elems_ = 0;
};

void Parser::error(size_t at, const std::string& msg) const {
  size_t line = 1, col = 1;
  for (size_t k = 0; k < at && k < s_.size(); ++k) {
    if (s_[k] == '\n') {
      ++line;
      col = 1;
    } else if ((static_cast<uint8_t>(s_[k]) & 0xC0) != 0x80) {
      ++col;
    }
  }
  fail(ErrorKind::InvalidArgument, where_ + ":" + std::to_string(line) + ":" + std::to_string(col), msg);
}

// Spaces, tabs, CR and # comments; newlines too when `newlines`.
void Parser::skip_space(bool newlines) {
  while (!eof()) {
    char c = peek();
    if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
      ++i_;
    } else if (c == '#') {
      while (!eof() && peek() != '\n') ++i_;
    } else {
      break;
    }
  }
}

// At `name ::=` (what ends the previous rule's body at the top level).
bool Parser::at_rule_start() const {
  size_t k = i_;
  while (k < s_.size() && is_name_char(s_[k])) ++k;
  if (k == i_) return false;
  while (k < s_.size() && (s_[k] == ' ' || s_[k] == '\t')) ++k;
  return s_.substr(k, 3) == "::=";
}

std::string Parser::parse_name() {
  size_t start = i_;
  while (!eof() && is_name_char(peek())) ++i_;
  if (i_ == start) error(start, "expected a rule name");
  return std::string(s_.substr(start, i_ - start));
}

uint32_t Parser::symbol(const std::string& name, size_t at) {
  auto it = ids_.find(name);
  if (it != ids_.end()) return it->second;
  if (names_.size() >= lim_.max_rules) error(at, "more than " + std::to_string(lim_.max_rules) + " rules");
  uint32_t id = static_cast<uint32_t>(names_.size());
  ids_.emplace(name, id);
  names_.push_back(name);
  first_use_.push_back(at);
  defined_.push_back(false);
  rules_.emplace_back();
  generated_count_.push_back(0);
  return id;
}

uint32_t Parser::new_rule(uint32_t parent, size_t at) {
  // Generated names ("value~3") hold a '~', which no written name may contain: a rule written
  // later in the text can never take a name already generated (a '-' here did clash: a JSON
  // schema's property rule "a-2" after the generated "a-2" was "defined twice").
  for (;;) {
    std::string name = names_[parent] + "~" + std::to_string(++generated_count_[parent]);
    if (!ids_.count(name)) {
      uint32_t id = symbol(name, at);
      defined_[id] = true;
      return id;
    }
  }
}

void Parser::count_elements(size_t n, size_t at) {
  if (n > lim_.max_elements || n_elems_ > lim_.max_elements - n)
    error(at, "the grammar expands to more than " + std::to_string(lim_.max_elements) +
                  " elements (repetition counts too large?)");
  n_elems_ += n;
}

uint32_t Parser::add_set(CharSet set) {
  if (sets_.size() >= lim_.max_sets) error(i_, "more than " + std::to_string(lim_.max_sets) + " character sets");
  set.finish();
  sets_.push_back(std::move(set));
  return static_cast<uint32_t>(sets_.size() - 1);
}

uint32_t Parser::single_char(uint32_t cp) {
  auto it = single_sets_.find(cp);
  if (it != single_sets_.end()) return it->second;
  CharSet cs;
  cs.ranges.push_back({cp, cp});
  uint32_t id = add_set(std::move(cs));
  single_sets_.emplace(cp, id);
  return id;
}

// One code point of a literal or class: an escape or a UTF-8 character of the source.
uint32_t Parser::parse_char(bool in_class) {
  size_t at = i_;
  if (eof()) error(at, in_class ? "unterminated character class" : "unterminated string literal");
  if (peek() != '\\') {
    const size_t n = tok::utf8_valid_length(s_, i_);  // strict: no overlong form, surrogate or cut
    if (n == 0) error(at, "invalid UTF-8 in the grammar");
    const uint32_t cp = tok::decode_utf8(s_, i_, n);
    i_ += n;
    return cp;
  }
  ++i_;
  char c = peek();
  ++i_;
  switch (c) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case '0': return 0;
    case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/': return static_cast<uint8_t>(c);
    case 'x': case 'u': case 'U': {
      int digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
      uint32_t v = 0;
      for (int k = 0; k < digits; ++k) {
        int h = hex_value(peek());
        if (h < 0) error(i_, std::string("\\") + c + " needs " + std::to_string(digits) + " hex digits");
        v = v * 16 + static_cast<uint32_t>(h);
        ++i_;
      }
      if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) error(at, "escape is not a Unicode scalar value");
      return v;
    }
    default:
      error(at, c ? std::string("unknown escape \\") + c : "unterminated escape");
  }
}

Seq Parser::parse_literal() {
  size_t at = i_;
  ++i_;  // "
  Seq seq;
  while (peek() != '"') {
    if (eof() || peek() == '\n') error(at, "unterminated string literal");
    seq.push_back({ElemKind::Char, single_char(parse_char(false))});
  }
  ++i_;
  count_elements(seq.size(), at);
  return seq;
}

Seq Parser::parse_class() {
  size_t at = i_;
  ++i_;  // [
  CharSet cs;
  if (peek() == '^') {
    cs.negated = true;
    ++i_;
  }
  while (peek() != ']') {
    if (eof()) error(at, "unterminated character class");
    size_t char_at = i_;
    uint32_t lo = parse_char(true), hi = lo;
    if (peek() == '-' && peek(1) != ']' && i_ + 1 < s_.size()) {
      ++i_;
      hi = parse_char(true);
      if (hi < lo) error(char_at, "character range is reversed (end before start)");
    }
    if (cs.ranges.size() >= 4096) error(char_at, "more than 4096 ranges in one character class");
    cs.ranges.push_back({lo, hi});
  }
  ++i_;
  if (cs.ranges.empty() && !cs.negated) error(at, "empty character class [] matches nothing");
  count_elements(1, at);
  return {{ElemKind::Char, add_set(std::move(cs))}};
}

// {m}, {m,}, {m,n} after the '{'.
uint32_t Parser::parse_count() {
  size_t at = i_;
  if (peek() < '0' || peek() > '9') error(at, "expected a repetition count");
  uint64_t v = 0;
  while (peek() >= '0' && peek() <= '9') {
    v = v * 10 + static_cast<uint64_t>(peek() - '0');
    if (v > lim_.max_repeat) error(at, "repetition count above the limit of " + std::to_string(lim_.max_repeat));
    ++i_;
  }
  return static_cast<uint32_t>(v);
}

void Parser::parse_repeat_bounds(uint32_t& min, int64_t& max) {
  size_t at = i_;
  ++i_;  // {
  skip_space(true);
  min = parse_count();
  max = min;
  skip_space(true);
  if (peek() == ',') {
    ++i_;
    skip_space(true);
    max = -1;
    if (peek() != '}') max = parse_count();
    skip_space(true);
  }
  if (peek() != '}') error(i_, "expected '}' to close the repetition");
  ++i_;
  if (max >= 0 && max < min) error(at, "repetition {m,n} has n < m");
}

// item{min,max} (max -1: unbounded) as a sequence: min copies of the item, then a generated rule
// for the optional rest (R ::= item R | "" when unbounded; a chain of nested options otherwise).
Seq Parser::repeat(uint32_t rule, const Seq& item, uint32_t min, int64_t max, size_t at) {
  const size_t n = item.size();
  const uint64_t optional = max < 0 ? 1 : static_cast<uint64_t>(max) - min;
  // What the expansion adds: min copies, plus each optional level's item and rule reference.
  const uint64_t total = static_cast<uint64_t>(min) * n + optional * (n + 2);
  if (total > lim_.max_elements) count_elements(lim_.max_elements + 1, at);
  count_elements(static_cast<size_t>(total), at);
  Seq out;
  for (uint32_t k = 0; k < min; ++k) out.insert(out.end(), item.begin(), item.end());
  if (max < 0) {
    uint32_t r = new_rule(rule, at);
    Seq body = item;
    body.push_back({ElemKind::Rule, r});
    rules_[r] = {body, Seq{}};
    out.push_back({ElemKind::Rule, r});
  } else if (optional > 0) {
    uint32_t inner = 0;
    for (uint64_t k = 0; k < optional; ++k) {
      uint32_t r = new_rule(rule, at);
      Seq body = item;
      if (k > 0) body.push_back({ElemKind::Rule, inner});
      rules_[r] = {body, Seq{}};
      inner = r;
    }
    out.push_back({ElemKind::Rule, inner});
  }
  return out;
}

// One item with its optional postfix operator.
Seq Parser::parse_item(uint32_t rule, int depth) {
  size_t at = i_;
  Seq item;
  char c = peek();
  if (c == '"') {
    item = parse_literal();
  } else if (c == '[') {
    item = parse_class();
  } else if (c == '.') {
    ++i_;
    CharSet any;
    any.negated = true;
    count_elements(1, at);
    item = {{ElemKind::Char, add_set(std::move(any))}};
  } else if (c == '(') {
    if (depth + 1 > lim_.max_nesting) error(at, "groups nested deeper than " + std::to_string(lim_.max_nesting));
    ++i_;
    skip_space(true);
    Alts alts = parse_alternates(rule, depth + 1);
    if (peek() != ')') error(at, "unclosed '(': expected ')'");
    ++i_;
    uint32_t r = new_rule(rule, at);
    rules_[r] = std::move(alts);
    count_elements(1, at);
    item = {{ElemKind::Rule, r}};
  } else if (is_name_char(c)) {
    std::string name = parse_name();
    count_elements(1, at);
    item = {{ElemKind::Rule, symbol(name, at)}};
  } else if (c == '<') {
    error(at, "token references <...> are not supported");
  } else {
    error(at, eof() ? "unexpected end of grammar" : std::string("unexpected character '") + c + "'");
  }
  c = peek();
  if (c == '*') return ++i_, repeat(rule, item, 0, -1, at);
  if (c == '+') return ++i_, repeat(rule, item, 1, -1, at);
  if (c == '?') return ++i_, repeat(rule, item, 0, 1, at);
  if (c == '{') {
    uint32_t min = 0;
    int64_t max = 0;
    parse_repeat_bounds(min, max);
    return repeat(rule, item, min, max, at);
  }
  return item;
}

// Items until '|', ')', the end, or (at the top level) a newline followed by the next rule.
Seq Parser::parse_sequence(uint32_t rule, int depth) {
  Seq seq;
  for (;;) {
    skip_space(depth > 0);
    if (depth == 0 && peek() == '\n') {
      skip_space(true);
      if (eof() || at_rule_start()) return seq;
    }
    char c = peek();
    if (eof() || c == '|' || c == ')') return seq;
    if (depth == 0 && at_rule_start()) error(i_, "missing newline before the next rule");
    Seq item = parse_item(rule, depth);
    seq.insert(seq.end(), item.begin(), item.end());
  }
}

Alts Parser::parse_alternates(uint32_t rule, int depth) {
  Alts alts;
  alts.push_back(parse_sequence(rule, depth));
  while (peek() == '|') {
    ++i_;
    skip_space(true);
    alts.push_back(parse_sequence(rule, depth));
  }
  return alts;
}

void Parser::parse_rule() {
  size_t at = i_;
  std::string name = parse_name();
  skip_space(false);
  if (s_.substr(i_, 3) != "::=") error(i_, "expected '::=' after the rule name '" + name + "'");
  i_ += 3;
  uint32_t id = symbol(name, at);
  if (defined_[id]) error(at, "rule '" + name + "' is defined twice");
  defined_[id] = true;
  first_use_[id] = std::min(first_use_[id], at);
  skip_space(true);
  rules_[id] = parse_alternates(id, 0);
  if (peek() == ')') error(i_, "unmatched ')'");
}

Grammar Parser::compile() {
  Grammar g;
  g.rule_names = names_;
  g.sets = std::move(sets_);
  g.rule_alts.resize(rules_.size());
  for (size_t r = 0; r < rules_.size(); ++r) {
    for (const Seq& alt : rules_[r]) {
      g.rule_alts[r].push_back(static_cast<uint32_t>(g.elems.size()));
      g.elems.insert(g.elems.end(), alt.begin(), alt.end());
      g.elems.push_back({ElemKind::End, 0});
    }
  }
  g.root = ids_.at("root");
  return g;
}

Grammar Parser::run() {
  if (s_.size() > lim_.max_text_bytes)
    fail(ErrorKind::InvalidArgument, where_, "grammar text of " + std::to_string(s_.size()) +
                                                 " bytes is above the limit of " + std::to_string(lim_.max_text_bytes));
  skip_space(true);
  while (!eof()) {
    parse_rule();
    skip_space(true);
  }
  for (size_t r = 0; r < names_.size(); ++r)
    if (!defined_[r]) error(first_use_[r], "rule '" + names_[r] + "' is used but never defined");
  if (!ids_.count("root")) fail(ErrorKind::InvalidArgument, where_, "the grammar has no rule named 'root'");
  Grammar g = compile();
  check_grammar(g, where_);
  return g;
}

}  // namespace

Grammar parse_gbnf(std::string_view text, const std::string& where, const Limits& limits) {
  return Parser(text, where, limits).run();
}

}  // namespace ptn::grammar
