// The GBNF parser: what it accepts, and that every malformed grammar is refused with a
// ptn::Error (InvalidArgument) naming line:column and what is wrong.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "grammar/grammar.h"

using ptn::grammar::parse_gbnf;

namespace {

// The error of parsing `text` ("" if it parses).
std::string error_of(const std::string& text, const ptn::grammar::Limits& limits = {}) {
  try {
    parse_gbnf(text, "g", limits);
  } catch (const ptn::Error& e) {
    EXPECT_EQ(e.kind(), ptn::ErrorKind::InvalidArgument) << e.what();
    return e.what();
  }
  return "";
}

void expect_error(const std::string& text, const std::string& where, const std::string& what) {
  std::string e = error_of(text);
  EXPECT_NE(e.find(where), std::string::npos) << "grammar: " << text << "\nerror: " << e;
  EXPECT_NE(e.find(what), std::string::npos) << "grammar: " << text << "\nerror: " << e;
}

}  // namespace

TEST(Gbnf, AcceptsTheSyntax) {
  const char* ok[] = {
      "root ::= \"a\"",
      "root ::= \"\"",
      "root ::= [a-z]+ | [0-9]* \".\" [0-9]?",
      "root ::= (\"ab\" | \"c\"){2,3} x{0,} y{4}\nx ::= \"x\"\ny ::= [^\\n\\]\\x41-\\u00ff]",
      "# comment\nroot ::= item ( \",\" item )*  # trailing\nitem ::=\n  \"a\"\n  | \"b\"\n",
      "root ::= (\n  \"a\"\n  \"b\"\n)\n",
      "root ::= . \"\\t\\r\\n\\\\\\\"\\x7f\\u00e9\\U0001F600\"",
      "root ::= \"é😀\" [α-ω]",
      "root ::= a-b_c\na-b_c ::= [\\-\\^]",
      "root ::= x{ 1 , 2 }\nx ::= \"x\"",
      "root ::= [^]",
  };
  for (const char* g : ok) EXPECT_EQ(error_of(g), "") << g;
}

TEST(Gbnf, RefusesWithPositions) {
  expect_error("root ::= \"a", "g:1:10", "unterminated string literal");
  expect_error("root ::= [a-", "g:1:", "unterminated character class");
  expect_error("root ::= a\n", "g:1:10", "rule 'a' is used but never defined");
  expect_error("x ::= \"a\"", "g", "no rule named 'root'");
  expect_error("root ::= \"a\"\nroot ::= \"b\"", "g:2:1", "defined twice");
  expect_error("root ::= (\"a\"", "g:1:10", "unclosed '('");
  expect_error("root ::= \"a\" )", "g:1:14", "unmatched ')'");
  expect_error("root ::= [z-a]", "g:1:11", "reversed");
  expect_error("root ::= []", "g:1:10", "matches nothing");
  expect_error("root ::= \"\\q\"", "g:1:11", "unknown escape \\q");
  expect_error("root ::= \"\\x4\"", "g:1:", "hex digits");
  expect_error("root ::= \"\\ud800\"", "g:1:11", "not a Unicode scalar value");
  expect_error("root ::= \"a\"{3,2}", "g:1:13", "n < m");
  expect_error("root ::= \"a\"{99999999999}", "g:1:14", "above the limit");
  expect_error("root ::= \"a\"{1", "g:1:", "expected '}'");
  expect_error("root \"a\"", "g:1:6", "expected '::='");
  expect_error("root ::= @", "g:1:10", "unexpected character '@'");
  expect_error("root ::= <[123]>", "g:1:10", "token references");
  expect_error("root ::= \"a\" b ::= \"c\"", "g:1:14", "missing newline");
  expect_error("root ::= \"\xff\"", "g:1:11", "invalid UTF-8");
  expect_error("\n\nroot ::= x\nx ::= x \"a\"", "g", "left recursion");
  expect_error("root ::= a\na ::= b \"x\"\nb ::= \"\" | a", "a -> b -> a", "left recursion");
  expect_error("root ::= (\"\"?)*", "g", "left recursion");
}

TEST(Gbnf, LimitsBoundTheExpansion) {
  // Nested repetitions multiply: each level is a rule reference, so this stays linear...
  EXPECT_EQ(error_of("root ::= ((\"a\"{100}){100}){100}"), "");
  // ...but a long literal repeated many times is refused before any memory is spent.
  std::string lit(1000, 'a');
  EXPECT_NE(error_of("root ::= \"" + lit + "\"{5000}").find("more than"), std::string::npos);
  ptn::grammar::Limits small;
  small.max_nesting = 3;
  EXPECT_NE(error_of("root ::= ((((\"a\"))))", small).find("nested deeper than 3"), std::string::npos);
  small = {};
  small.max_rules = 4;
  EXPECT_NE(error_of("root ::= a b c d e\na ::= \"a\"", small).find("more than 4 rules"), std::string::npos);
  small = {};
  small.max_text_bytes = 8;
  EXPECT_NE(error_of("root ::= \"abc\"", small).find("above the limit"), std::string::npos);
  // Deep nesting at the default limit fails cleanly rather than by stack overflow.
  std::string deep = "root ::= " + std::string(10000, '(') + "\"a\"" + std::string(10000, ')');
  EXPECT_NE(error_of(deep).find("nested deeper"), std::string::npos);
}

TEST(Gbnf, CompiledForm) {
  auto g = parse_gbnf("root ::= \"ab\" | x\nx ::= [0-9]");
  ASSERT_EQ(g.rule_names.size(), 2u);
  EXPECT_EQ(g.rule_names[g.root], "root");
  EXPECT_EQ(g.rule_alts[g.root].size(), 2u);
  // root: 'a' 'b' End x End; x: [0-9] End
  EXPECT_EQ(g.elems.size(), 7u);
}
