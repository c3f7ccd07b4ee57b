// The matcher accepts exactly each grammar's language: strings in it are accepted and complete,
// strings out of it are refused at some byte or not complete; the same holds when the string is
// fed in two pieces cut at every byte (tokens that end inside a UTF-8 character).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"

using ptn::grammar::Matcher;

namespace {

std::shared_ptr<const ptn::grammar::Grammar> compile(const std::string& text) {
  return std::make_shared<const ptn::grammar::Grammar>(ptn::grammar::parse_gbnf(text));
}

// In the language: accepted whole, and in two pieces cut at every byte.
bool matches(const std::shared_ptr<const ptn::grammar::Grammar>& g, const std::string& s) {
  Matcher whole(g);
  bool in = whole.accept(s) && whole.is_complete();
  for (size_t cut = 0; cut <= s.size(); ++cut) {
    Matcher m(g);
    bool a = m.accept(s.substr(0, cut));
    bool b = a && m.accept(s.substr(cut));
    EXPECT_EQ(b && m.is_complete(), in) << "cut at " << cut << " of '" << s << "'";
  }
  return in;
}

struct Case {
  const char* grammar;
  std::vector<std::string> in;
  std::vector<std::string> out;
};

}  // namespace

TEST(Matcher, AcceptsExactlyTheLanguage) {
  const Case cases[] = {
      {"root ::= \"a\"", {"a"}, {"", "b", "aa"}},
      {"root ::= \"\"", {""}, {"a"}},
      {"root ::= [a-c]+", {"a", "abc", "cccb"}, {"", "d", "ad"}},
      {"root ::= [^a-c]", {"d", "é", "😀", "\n"}, {"a", "", "dd"}},
      {"root ::= \"x\"{2,4}", {"xx", "xxx", "xxxx"}, {"x", "xxxxx", ""}},
      {"root ::= \"x\"{3}", {"xxx"}, {"xx", "xxxx"}},
      {"root ::= \"x\"{2,}", {"xx", "xxxxxxx"}, {"x"}},
      {"root ::= (\"ab\" | \"c\")* \"d\"?", {"", "ab", "cabc", "abd", "d"}, {"a", "abab d", "dd"}},
      {"root ::= item (\",\" item)*\nitem ::= [0-9]+ | \"[\" root? \"]\"",
       {"1", "1,2", "[]", "[1,[2,3]],4", "[[[[]]]]"},
       {"", "1,", ",1", "[1", "[[]", "1]"}},
      {"root ::= \"é\" [α-ω] . \"😀\"", {"éβx😀", "éωé😀"}, {"éaé😀", "eβx😀", "éβ😀"}},
      {"root ::= [\\u00e0-\\u00ff]", {"à", "ÿ"}, {"ß", "Ā", "a"}},
      {"root ::= [\\U0001F600-\\U0001F64F]+", {"😀", "🙏😀"}, {"🚀", "a"}},
      {"root ::= a a\na ::= \"\" | \"q\"", {"", "q", "qq"}, {"qqq"}},
      {"root ::= \"a\" # c\n  | \"b\"\n", {"a", "b"}, {"ab"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.grammar);
    auto g = compile(c.grammar);
    for (const auto& s : c.in) EXPECT_TRUE(matches(g, s)) << "'" << s << "' should match";
    for (const auto& s : c.out) EXPECT_FALSE(matches(g, s)) << "'" << s << "' should not match";
  }
}

TEST(Matcher, RefusesIllFormedUtf8) {
  auto g = compile("root ::= .*");
  Matcher m(g);
  EXPECT_TRUE(m.accept("ok é"));
  EXPECT_FALSE(m.can_accept("\xff"));
  EXPECT_FALSE(m.can_accept("\x80"));
  EXPECT_FALSE(m.can_accept("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(m.can_accept("\xe0\x80"));          // overlong prefix: refused before its last byte
  EXPECT_FALSE(m.can_accept("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(m.can_accept("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_TRUE(m.can_accept("\xc3"));               // a cut character may be completed
  ASSERT_TRUE(m.accept("\xf0\x9f"));
  EXPECT_FALSE(m.is_complete());                   // pending bytes
  EXPECT_FALSE(m.can_accept("a"));
  EXPECT_TRUE(m.accept("\x98\x80"));
  EXPECT_TRUE(m.is_complete());
}

TEST(Matcher, PartialCharacterIsCheckedAgainstTheSets) {
  auto g = compile("root ::= \"é\"");  // C3 A9
  Matcher m(g);
  EXPECT_TRUE(m.can_accept("\xc3"));
  EXPECT_FALSE(m.can_accept("\xc4"));  // U+0100.. cannot become é
  EXPECT_FALSE(m.can_accept("\xe2"));
  EXPECT_FALSE(m.can_accept("\xc3\xa8"));
}

TEST(Matcher, AcceptFailureChangesNothing) {
  auto g = compile("root ::= \"abc\"");
  Matcher m(g);
  EXPECT_TRUE(m.accept("a"));
  EXPECT_FALSE(m.accept("bx"));
  EXPECT_TRUE(m.accept("bc"));
  EXPECT_TRUE(m.is_complete());
}

TEST(Matcher, DeepNestingIsBounded) {
  auto g = compile("root ::= \"(\" root \")\" | \"\"");
  ptn::grammar::MatcherLimits lim;
  lim.max_stack_depth = 50;
  Matcher m(g, lim);
  std::string open(40, '(');
  EXPECT_TRUE(m.accept(open));
  EXPECT_TRUE(m.accept(std::string(40, ')')));
  EXPECT_TRUE(m.is_complete());
  Matcher deep(g, lim);
  EXPECT_FALSE(deep.accept(std::string(100, '(')));  // nesting past the bound is not allowed
  // Long right-recursive repetitions stay flat (tail calls): no depth limit applies.
  auto star = compile("root ::= [a]*");
  Matcher flat(star, lim);
  EXPECT_TRUE(flat.accept(std::string(10000, 'a')));
}

TEST(Matcher, AmbiguityIsBounded) {
  // Every parse of "aaaa..." by x* x* x* x* is alive: the count grows but stays under the cap;
  // a deliberately tiny cap turns into a clean Capacity error.
  auto g = compile("root ::= x* x* x* x*\nx ::= \"a\"");
  Matcher m(g);
  EXPECT_TRUE(m.accept(std::string(200, 'a')));
  ptn::grammar::MatcherLimits tiny;
  tiny.max_stacks = 2;
  try {
    Matcher t(g, tiny);
    t.accept("aaaa");
    FAIL() << "expected a Capacity error";
  } catch (const ptn::Error& e) {
    EXPECT_EQ(e.kind(), ptn::ErrorKind::Capacity);
  }
}
