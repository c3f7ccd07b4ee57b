// The syntax tree of a Jinja template (internal to src/chat). One node type with a kind; each
// node remembers where it starts in the template source for error messages.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "chat/jinja_value.h"

namespace ptn::jinja {

enum class NodeKind {
  // expressions
  Literal,     // literal
  Name,        // name
  Attr,        // a[0].name
  Index,       // a[0][a[1]]
  Slice,       // a[0][a[1]:a[2]:a[3]] (null parts allowed)
  Call,        // a[0](args)
  Filter,      // a[0] | name(args)
  Test,        // a[0] is [not] name(args); negate
  Unary,       // name in {"-", "+", "not"}, a[0]
  Binary,      // a[0] name a[1]; name is the operator (+ - ~ * / // % ** == != < > <= >= in "not in")
  And,         // a[0] and a[1]
  Or,          // a[0] or a[1]
  Ternary,     // a[1] if a[0] else a[2]; a[2] null: undefined when false
  ListLit,     // [a...]
  TupleLit,    // (a...)
  DictLit,     // {a[0]: a[1], a[2]: a[3], ...}
  // statements
  Text,        // literal (string)
  Output,      // {{ a[0] }}
  If,          // a[0] cond, body, alt
  For,         // targets, a[0] iterable, a[1] condition (or null), body, alt (else)
  Set,         // targets or a[0]: the namespace expr with name the attribute; a[1] value, or body
  Macro,       // name, params, body
  CallBlock,   // a[0] the call expression, params (caller's), body
  FilterBlock, // a[0] the Filter node whose operand is null, body
  Break,
  Continue,
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Arg {
  std::string key;  // keyword argument name; empty for positional
  NodePtr value;
  int spread = 0;   // 1: *value, 2: **value
};

struct Param {
  std::string name;
  NodePtr default_value;  // null: required
};

struct Node {
  NodeKind kind;
  int line = 0, col = 0;
  int depth = 1;  // 1 + the deepest child expression (bounds evaluation recursion)
  std::string name;
  Value literal;
  bool negate = false;
  std::vector<NodePtr> a;
  std::vector<Arg> args;
  std::vector<Param> params;
  std::vector<std::string> targets;  // for / set names
  bool tuple_target = false;
  std::vector<NodePtr> body, alt;

  Node(NodeKind k, int l, int c) : kind(k), line(l), col(c) {}
  std::string where() const;  // "line L col C"
};

struct Limits;
// Parses template source into statements; throws ptn::Error naming the construct and position.
std::vector<NodePtr> parse_template(const std::string& source, const Limits& limits);

}  // namespace ptn::jinja
