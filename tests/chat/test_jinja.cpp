// Unit tests of the Jinja engine: constructs whose expected output is Python Jinja's (where
// @huggingface/jinja has no such construct or differs), error messages that name the construct
// and its line/column, and bounds on hostile templates. Renders compared with
// @huggingface/jinja are in test_chat_templates.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "core/error.h"

using ptn::jinja::Limits;
using ptn::jinja::Template;
using ojson = nlohmann::ordered_json;

namespace {

std::string render(const std::string& src, const ojson& ctx = ojson::object(), Limits lim = {}) {
  return Template(src, lim).render(ctx);
}

// Renders expecting a ptn::Error; returns its what() and kind.
std::pair<std::string, ptn::ErrorKind> error_of(const std::string& src, const ojson& ctx = ojson::object(),
                                                Limits lim = {}) {
  try {
    std::string out = render(src, ctx, lim);
    ADD_FAILURE() << "expected an error, rendered: " << out.substr(0, 200);
  } catch (const ptn::Error& e) {
    return {e.what(), e.kind()};
  }
  return {"", ptn::ErrorKind::Internal};
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)

TEST(Jinja, PythonStringMethods) {
  EXPECT_EQ(render("{{ 'xyx'.strip('x') }}|{{ '--a--'.lstrip('-') }}|{{ '--a--'.rstrip('-') }}|{{ ' a '.strip() }}"),
            "y|a--|--a|a");
  EXPECT_EQ(render("{{ '\\n\\nhi \\n'.strip('\\n') }}"), "hi ");
  EXPECT_EQ(render("{{ 'a b  c'.split(' ') | tojson }}|{{ 'a,b,c'.split(',', 1) | tojson }}"),
            "[\"a\", \"b\", \"\", \"c\"]|[\"a\", \"b,c\"]");
  EXPECT_EQ(render("{{ '{} and {}'.format(1, 'x') }}|{{ '{name}!'.format(name='Bo') }}"), "1 and x|Bo!");
  EXPECT_EQ(render("{{ 'hELLO wORLD'.title() }}|{{ 'hELLO'.capitalize() }}|{{ 'abcabc'.count('bc') }}|{{ 'abc'.find('c') }}"),
            "Hello World|Hello|2|2");
  EXPECT_EQ(render("{{ 'abc'.startswith(('x', 'a')) }}|{{ ', '.join(['a', 'b']) }}"), "true|a, b");
}

TEST(Jinja, PythonOperatorsAndFilters) {
  EXPECT_EQ(render("{{ '-' * 3 }}|{{ -7 % 3 }}|{{ -7 // 2 }}|{{ 7.5 // 2 }}|{{ 2 ** -1 }}"), "---|2|-4|3.0|0.5");
  EXPECT_EQ(render("{{ 9 is divisibleby(3) }}|{{ 10 is divisibleby(3) }}"), "true|false");
  EXPECT_EQ(render("{{ [1, 2, 3, 4] | select('odd') | list | tojson }}|{{ [1, 2, 3, 4] | reject('even') | list | tojson }}"),
            "[1, 3]|[1, 3]");
  EXPECT_EQ(render("{{ [5, 1, 7] | select('gt', 2) | join(',') }}|{{ ['a', 'b'] | map('upper') | join }}"), "5,7|AB");
  EXPECT_EQ(render("{{ 2.5 | round }}|{{ 3.14159 | round(2) }}|{{ 2.7 | round(0, 'floor') }}|{{ [1, 2] | count }}"),
            "2.0|3.14|2.0|2");
  EXPECT_EQ(render("{{ '<a href=\"x\">&\\'' | e }}|{{ 'x' | escape }}"), "&lt;a href=&#34;x&#34;&gt;&amp;&#39;|x");
  EXPECT_EQ(render("{{ dict(a=1, b='x') | tojson }}|{{ [3, 1, 2] | max }}{{ [3, 1, 2] | min }}|{{ [1, 2, 3] | sum }}"),
            "{\"a\": 1, \"b\": \"x\"}|31|6");
  EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.cycle('o', 'e') }}{{ x }}{% endfor %}"), "oaeboc");
  EXPECT_EQ(render("{{ 'ab' < 'b' }}|{{ [1, [2]] == [1, [2]] }}|{{ {'a': 1} == {'a': 1} }}|{{ 1 == 1.0 }}|{{ none == undefined_x }}"),
            "true|true|true|true|true");
  EXPECT_EQ(render("{{ 'x' is in('xyz') }}|{{ 3 is lt(4) }}|{{ 'abc' is lower }}|{{ x is sameas(x) }}", ojson{{"x", ojson::array()}}),
            "true|true|true|true");
}

TEST(Jinja, MacrosWithVarargsKwargsAndCaller) {
  EXPECT_EQ(render("{% macro m(a, b=a ~ '!') %}{{ a }}{{ b }}{{ varargs | tojson }}{{ kwargs | tojson }}{% endmacro %}"
                   "{{ m(1) }}|{{ m(1, 2, 3, k=4) }}"),
            "11![]{}|12[3]{\"k\": 4}");
  EXPECT_EQ(render("{% macro list(items) %}{% for i in items %}[{{ caller(i) }}]{% endfor %}{% endmacro %}"
                   "{% call(x) list([1, 2]) %}{{ x * 10 }}{% endcall %}"),
            "[10][20]");
}

TEST(Jinja, WhitespaceRulesOfTransformers) {
  // trim_blocks drops the newline after a block tag, lstrip_blocks the indentation before it;
  // neither touches {{ }}.
  EXPECT_EQ(render("{% if true %}\n  yes\n{% endif %}\n"), "  yes\n");
  EXPECT_EQ(render("  {{ 'a' }}\n  {% if true %}b{% endif %}\n"), "  a\nb");
  EXPECT_EQ(render("x\n\n"), "x\n");  // only one trailing newline is dropped
  EXPECT_EQ(render("a {%- if true -%} b {%- endif -%} c"), "abc");
  EXPECT_EQ(render("A{% generation %}B{% endgeneration %}C"), "ABC");
}

TEST(Jinja, UndefinedSemantics) {
  EXPECT_EQ(render("[{{ a }}][{{ a.b.c }}][{{ a[0] }}][{{ a | default('d') }}][{{ a is defined }}][{{ a | length }}]"),
            "[][][][d][false][0]");
  EXPECT_EQ(render("{% for x in a %}{{ x }}{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{{ 'x' in a }}|{{ 'x' ~ a ~ 'y' }}"), "false|xy");
  EXPECT_EQ(render("[{{ a | trim }}][{{ a | upper }}][{{ a | string }}][{{ a | tojson }}][{{ a | list | length }}]"),
            "[][][][null][0]");
}

TEST(Jinja, JsonInputKeepsJavaScriptKeyOrder) {
  ojson ctx = ojson::parse(R"({"d": {"b": 1, "10": 2, "a": 3, "2": 4, "007": 5}})");
  EXPECT_EQ(render("{{ d | tojson }}", ctx), "{\"2\": 4, \"10\": 2, \"b\": 1, \"a\": 3, \"007\": 5}");
  // Integral floats become ints, as JSON.parse makes them.
  EXPECT_EQ(render("{{ x }} {{ y }} {{ [x, y] | tojson }}", ojson::parse(R"({"x": 1.0, "y": 1.5})")), "1 1.5 [1, 1.5]");
  // A plain nlohmann::json converts (with its keys already sorted).
  nlohmann::json plain = {{"role", "user"}, {"content", "hi"}};
  EXPECT_EQ(ptn::chat::render_chat("{{ messages[0] | tojson }}", nlohmann::json::array({plain}), {}),
            "{\"content\": \"hi\", \"role\": \"user\"}");
}

TEST(Jinja, ChatContextVariables) {
  ptn::chat::ChatOptions o;
  o.bos_token = "<s>";
  o.eos_token = "</s>";
  o.add_generation_prompt = true;
  o.extra = ojson{{"enable_thinking", false}, {"bos_token", "<override>"}};
  std::string out = ptn::chat::render_chat(
      "{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}{{ tools is none }}{{ documents is none }}"
      "{{ enable_thinking }}{{ messages | length }}",
      ojson::array({{{"role", "user"}, {"content", "x"}}}), o);
  EXPECT_EQ(out, "<override></s>truetruetruefalse1");
  EXPECT_THROW(ptn::chat::render_chat("x", ojson::object(), {}), ptn::Error);  // messages must be a list
  o.tools = ojson::object();
  EXPECT_THROW(ptn::chat::render_chat("x", ojson::array(), o), ptn::Error);  // tools must be a list
}

TEST(Jinja, RaiseExceptionBecomesError) {
  auto [msg, kind] = error_of("ok\n{{ raise_exception('Roles must alternate!') }}");
  EXPECT_EQ(kind, ptn::ErrorKind::InvalidArgument);
  EXPECT_CONTAINS(msg, "Roles must alternate!");
  EXPECT_CONTAINS(msg, "line 2");
}

TEST(Jinja, ErrorsNameConstructAndPosition) {
  struct Case {
    std::string src, needle1, needle2;
  } cases[] = {
      {"{{ x | frobnicate }}", "unknown filter 'frobnicate'", "line 1 col 8"},
      {"a\nb {{ foo(1) }}", "unknown function 'foo'", "line 2 col 6"},
      {"{% for x in y %}abc", "'{% for %}' is never closed", "line 1 col 1"},
      {"{% if x %}a{% endfor %}", "found '{% endfor %}' inside '{% if %}' (line 1 col 1), expected '{% endif %}'", "line 1 col 15"},
      {"{% include 'other.jinja' %}", "statement '{% include %}' is not supported", "line 1 col 4"},
      {"{{ a ? b }}", "unexpected character '?'", "line 1 col 6"},
      {"{{ 'never closed }}", "string literal is never closed", "line 1 col 4"},
      {"{# open comment", "comment '{#' is never closed", "line 1 col 1"},
      {"\n\n  {{ 1 is frob }}", "unknown test 'frob'", "line 3"},
      {"{% break %}", "outside a loop", ""},
      {"{{ 'a' - 1 }}", "operator '-' is not defined for string and integer", "line 1 col 8"},
      {"{{ 'role: ' + none }}", "operator '+' is not defined for string and none", "line 1"},
      {"{{ 'abc'.nope() }}", "has no method 'nope'", "line 1"},
      {"{% set x = 1 %}{% set x.y = 2 %}", "only works on a namespace()", "line 1 col 16"},
      {"{{ 1 / 0 }}", "division by zero", "line 1"},
      {"{% for a, b in [1] %}{% endfor %}", "cannot unpack a integer", "line 1"},
      {"{% for x in xs recursive %}{% endfor %}", "recursive '{% for %}' loops are not supported", "line 1"},
      {"{{ [1, 2] | tojson(indent='x') }}", "tojson indent must be an integer", "line 1"},
      {"{% macro m(a=1, b) %}{% endmacro %}", "without a default follows one with a default", "line 1"},
  };
  for (auto& c : cases) {
    auto [msg, kind] = error_of(c.src, ojson{{"xs", ojson::array()}});
    EXPECT_CONTAINS(msg, c.needle1);
    EXPECT_CONTAINS(msg, c.needle2);
    EXPECT_CONTAINS(msg, "chat template");
  }
}

TEST(Jinja, InfiniteMacroRecursionIsStopped) {
  auto [msg, kind] = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_EQ(kind, ptn::ErrorKind::Capacity);
  EXPECT_CONTAINS(msg, "macro calls nest deeper than");
  auto [msg2, kind2] = error_of("{% macro a() %}{% call a() %}x{% endcall %}{% endmacro %}{{ a() }}");
  EXPECT_EQ(kind2, ptn::ErrorKind::Capacity);
}

TEST(Jinja, HugeRangesAndLoopsAreCapped) {
  auto t0 = std::chrono::steady_clock::now();
  auto [msg, kind] = error_of("{% for i in range(100000000000) %}{% endfor %}");
  EXPECT_EQ(kind, ptn::ErrorKind::Capacity);
  EXPECT_CONTAINS(msg, "range()");
  Limits small;
  small.max_loop_iterations = 20000;
  auto [msg2, kind2] = error_of(
      "{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}{% endfor %}{% endfor %}{% endfor %}",
      ojson::object(), small);
  EXPECT_EQ(kind2, ptn::ErrorKind::Capacity);
  EXPECT_CONTAINS(msg2, "loop iterations");
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 10.0);
}

TEST(Jinja, OutputAndStringGrowthAreCapped) {
  Limits lim;
  lim.max_output_bytes = 100000;
  auto [msg, kind] = error_of("{% for i in range(1000) %}{{ 'x' * 1000 }}{% endfor %}", ojson::object(), lim);
  EXPECT_EQ(kind, ptn::ErrorKind::Capacity);
  EXPECT_CONTAINS(msg, "rendered text exceeds");
  auto [msg2, kind2] = error_of(
      "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}");
  EXPECT_EQ(kind2, ptn::ErrorKind::Capacity);
  auto [msg3, kind3] = error_of("{{ 'x' * 100000000000 }}");
  EXPECT_EQ(kind3, ptn::ErrorKind::Capacity);
  auto [msg4, kind4] = error_of(
      "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}");
  EXPECT_EQ(kind4, ptn::ErrorKind::Capacity);
}

TEST(Jinja, DeepNestingIsRefusedNotCrashed) {
  std::string parens = "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  EXPECT_THROW(render(parens), ptn::Error);
  std::string chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) chain += " + 1";
  chain += " }}";
  EXPECT_THROW(render(chain), ptn::Error);
  std::string ifs;
  for (int i = 0; i < 20000; ++i) ifs += "{% if true %}";
  EXPECT_THROW(render(ifs), ptn::Error);
  std::string nots = "{{ " ;
  for (int i = 0; i < 100000; ++i) nots += "not ";
  EXPECT_THROW(render(nots + "1 }}"), ptn::Error);
  // A moderately nested but legal expression still works.
  EXPECT_EQ(render("{{ " + std::string(50, '(') + "7" + std::string(50, ')') + " }}"), "7");
  // Deep JSON input is refused too.
  std::string deep = std::string(5000, '[') + std::string(5000, ']');
  EXPECT_THROW(render("{{ x }}", ojson{{"x", ojson::parse(deep)}}), ptn::Error);
  Limits lim;
  lim.max_template_bytes = 100;
  EXPECT_THROW(Template(std::string(101, 'x'), lim), ptn::Error);
}

TEST(Jinja, DeepValuesAndCyclesAreSafe) {
  // A list nested 200000 levels deep is built and released without recursion.
  EXPECT_EQ(render("{% set ns = namespace(l=[]) %}{% for i in range(200000) %}{% set ns.l = [ns.l] %}{% endfor %}done"),
            "done");
  auto [msg, kind] = error_of("{% set ns = namespace(l=[]) %}{% for i in range(2000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}");
  EXPECT_EQ(kind, ptn::ErrorKind::Capacity);
  // A namespace that holds itself: attribute chains work, printing it is refused.
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me.me is defined }}"), "true");
  EXPECT_THROW(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"), ptn::Error);
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = [ns] %}{{ ns.me == ns.me }}"), "true");
}

TEST(Jinja, DeepRecursionWithDeepBodiesIsStopped) {
  // Each macro level nests 150 ifs: total evaluation depth, not just call depth, is capped.
  std::string body;
  for (int i = 0; i < 150; ++i) body += "{% if true %}";
  body += "{{ f() }}";
  for (int i = 0; i < 150; ++i) body += "{% endif %}";
  auto [msg, kind] = error_of("{% macro f() %}" + body + "{% endmacro %}{{ f() }}");
  EXPECT_EQ(kind, ptn::ErrorKind::Capacity);
  EXPECT_CONTAINS(msg, "nests deeper than");
}

TEST(Jinja, TemplateIsReusable) {
  Template t("{% for m in messages %}{{ m.role }};{% endfor %}");
  EXPECT_EQ(t.render(ojson{{"messages", ojson::parse(R"([{"role": "a"}])")}}), "a;");
  EXPECT_EQ(t.render(ojson{{"messages", ojson::parse(R"([{"role": "b"}, {"role": "c"}])")}}), "b;c;");
  Template moved = std::move(t);
  EXPECT_EQ(moved.render(ojson{{"messages", ojson::array()}}), "");
}

TEST(Jinja, OneTemplateRendersFromManyThreads) {
  Template t("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ m.role | upper }}"
             "{{ [m.content, 'lit'] | tojson }}{% endfor %}{{ ns.n }}");
  ojson ctx = {{"messages", ojson::parse(R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])")}};
  const std::string want = "USER[\"a\", \"lit\"]ASSISTANT[\"b\", \"lit\"]2";
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int i = 0; i < 300; ++i)
        if (t.render(ctx) != want) ++bad[static_cast<size_t>(k)];
    });
  for (auto& th : threads) th.join();
  for (int b : bad) EXPECT_EQ(b, 0);
}

TEST(Jinja, StrftimeNowFormatsTheCurrentDate) {
  std::string year = render("{{ strftime_now('%Y') }}");
  ASSERT_EQ(year.size(), 4u);
  EXPECT_GE(std::stoi(year), 2024);
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') | length }}"), "11");
}

}  // namespace
