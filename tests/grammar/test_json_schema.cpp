// JSON Schema -> GBNF: strings that must and must not match each schema, and refusals that name
// the keyword and its JSON pointer.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

using json = nlohmann::ordered_json;

namespace {

bool matches(const ptn::grammar::Grammar& g, const std::string& s) {
  ptn::grammar::Matcher m(std::make_shared<const ptn::grammar::Grammar>(g));
  return m.accept(s) && m.is_complete();
}

struct Case {
  const char* schema;
  std::vector<std::string> in;
  std::vector<std::string> out;
};

std::string refusal(const std::string& schema) {
  try {
    ptn::grammar::json_schema_grammar(json::parse(schema));
  } catch (const ptn::Error& e) {
    EXPECT_EQ(e.kind(), ptn::ErrorKind::InvalidArgument);
    return e.what();
  }
  return "";
}

}  // namespace

TEST(JsonSchema, MatchesTheSchemasLanguage) {
  const Case cases[] = {
      {R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},
          "required":["name","age"],"additionalProperties":false})",
       {R"({"name":"Bo","age":3})", "{ \"name\": \"\\u00e9\\n\",\n  \"age\": -12 }", R"({"name":"","age":0})"},
       {R"({"age":3,"name":"Bo"})", R"({"name":"Bo"})", R"({"name":"Bo","age":3.5})", R"({"name":"Bo","age":3,"x":1})",
        R"({"name":"Bo","age":01})", R"({"name":"\ud800","age":1})", "{\"name\":\"a\tb\",\"age\":1}"}},
      {R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"type":"number"}},
          "required":["b"]})",
       {R"({"b":null})", R"({"a":true,"b":null})", R"({"b":null,"c":1.5e3})", R"({"a":false,"b":null,"c":-0.25})"},
       {R"({})", R"({"a":true})", R"({"c":1,"b":null})", R"({,"b":null})", R"({"b":null,})"}},
      {R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
       {"[1]", "[1,2,3]", "[ 1, 2 ]"},
       {"[]", "[1,2,3,4]", "[1,]", "[\"a\"]"}},
      {R"({"type":"array","items":{"enum":["x",1,null]}})", {"[]", R"(["x",1,null,"x"])"}, {R"(["y"])", "[2]"}},
      {R"({"const":{"k":[1,"two"]}})", {R"({"k":[1,"two"]})"}, {R"({"k":[1]})", R"({ "k":[1,"two"]})"}},
      {R"({"type":["string","null"],"maxLength":2})", {"null", "\"ab\"", "\"\""}, {"\"abc\"", "1"}},
      {R"({"type":"string","minLength":2})", {"\"ab\"", "\"abcdef\""}, {"\"a\""}},
      {R"({"anyOf":[{"type":"integer"},{"type":"object","properties":{"v":{"type":"string"}},"required":["v"],
          "additionalProperties":false}]})",
       {"7", R"({"v":"x"})"}, {"\"7\"", "{}"}},
      {R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
          "next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],
          "additionalProperties":false}},"$ref":"#/$defs/node"})",
       {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":{"v":3,"next":null}}})"},
       {R"({"v":1,"next":{"v":2}})", R"({"v":1})"}},
      {R"({"type":"object","properties":{"d":{"type":"string","format":"date"},"t":{"type":"string","format":"date-time"},
          "u":{"type":"string","format":"uuid"}},"required":["d","t","u"],"additionalProperties":false})",
       {R"({"d":"2024-02-29","t":"2024-01-01T12:30:00Z","u":"123e4567-e89b-12d3-a456-426614174000"})"},
       {R"({"d":"2024-13-01","t":"2024-01-01T12:30:00Z","u":"123e4567-e89b-12d3-a456-426614174000"})",
        R"({"d":"2024-01-01","t":"2024-01-01 12:30:00","u":"123e4567-e89b-12d3-a456-426614174000"})"}},
      {R"({"type":"object","additionalProperties":{"type":"integer"}})", {"{}", R"({"a":1,"b":2})"}, {R"({"a":"x"})"}},
      {"{}", {"1", "\"s\"", "[1,{\"a\":null}]", "true"}, {"", "tru", "{\"a\"}"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.schema);
    auto schema = json::parse(c.schema);
    ptn::grammar::Grammar g;
    ASSERT_NO_THROW(g = ptn::grammar::json_schema_grammar(schema)) << ptn::grammar::json_schema_to_gbnf(schema);
    for (const auto& s : c.in) EXPECT_TRUE(matches(g, s)) << "should match: " << s;
    for (const auto& s : c.out) EXPECT_FALSE(matches(g, s)) << "should not match: " << s;
  }
}

TEST(JsonSchema, JsonObjectGrammar) {
  auto g = ptn::grammar::json_object_grammar();
  for (const char* s : {"{}", "{\"a\":[1,{\"b\":null}],\"c\":\"\\\"\"}", "{ }\n"}) EXPECT_TRUE(matches(g, s)) << s;
  for (const char* s : {"[]", "1", "\"x\"", "{\"a\":}", "{'a':1}"}) EXPECT_FALSE(matches(g, s)) << s;
}

// Integer bounds: the grammar holds exactly the integers in range, checked on every value near
// each bound and around zero, for ranges on both sides of zero and across digit counts.
TEST(JsonSchema, IntegerBoundsHoldExactlyTheRange) {
  const std::pair<int64_t, int64_t> ranges[] = {{0, 0},        {0, 9},          {1, 7},        {-5, 5},
                                                {10, 99},      {15, 2345},      {-1234, -17},  {-100, 1000},
                                                {99, 101},     {1000, 1000},    {-9, -9},      {7, 123456789},
                                                {-9007199254740991, 9007199254740991}};
  for (const auto& [lo, hi] : ranges) {
    SCOPED_TRACE(std::to_string(lo) + ".." + std::to_string(hi));
    json schema = {{"type", "integer"}, {"minimum", lo}, {"maximum", hi}};
    const auto g = ptn::grammar::json_schema_grammar(schema);
    std::vector<int64_t> probe;
    for (int64_t b : {lo, hi, int64_t{0}, int64_t{10}, int64_t{-10}, int64_t{100}, int64_t{99}, int64_t{1000}})
      for (int64_t d = -3; d <= 3; ++d) probe.push_back(b + d);
    for (int64_t v : probe) EXPECT_EQ(matches(g, std::to_string(v)), v >= lo && v <= hi) << v;
    EXPECT_FALSE(matches(g, "0" + std::to_string(std::max<int64_t>(lo, 1))));  // no leading zero
    EXPECT_FALSE(matches(g, "-0"));
  }
  // Exclusive bounds and bounds written as fractions round inwards; one bound alone keeps the
  // other side of the default domain.
  const auto g = ptn::grammar::json_schema_grammar(json{{"type", "integer"}, {"exclusiveMinimum", 2.5}, {"exclusiveMaximum", 6}});
  for (int v = 0; v < 8; ++v) EXPECT_EQ(matches(g, std::to_string(v)), v >= 3 && v <= 5) << v;
  const auto pos = ptn::grammar::json_schema_grammar(json{{"type", "integer"}, {"minimum", 1}});
  EXPECT_TRUE(matches(pos, "1"));
  EXPECT_TRUE(matches(pos, "9999999999999999"));
  EXPECT_FALSE(matches(pos, "0"));
  EXPECT_FALSE(matches(pos, "-1"));
  // In a list of types the bounds apply to the integer.
  const auto n = ptn::grammar::json_schema_grammar(json{{"type", {"integer", "null"}}, {"minimum", 0}, {"maximum", 3}});
  EXPECT_TRUE(matches(n, "null"));
  EXPECT_TRUE(matches(n, "3"));
  EXPECT_FALSE(matches(n, "4"));
}

TEST(JsonSchema, RefusesWhatItDoesNotEnforceByName) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type":"object","properties":{"a":{"type":"string","pattern":"^x"}}})", "#/properties/a/pattern: keyword 'pattern'"},
      {R"({"type":"number","minimum":0})", "#/minimum: 'minimum' on a number that may have a fraction"},
      {R"({"type":"number","exclusiveMaximum":1})", "'exclusiveMaximum' on a number"},
      {R"({"type":"integer","minimum":5,"maximum":4})", "no integer lies within"},
      {R"({"type":"integer","multipleOf":2})", "keyword 'multipleOf'"},
      {R"({"oneOf":[{"type":"string"}]})", "#/oneOf: keyword 'oneOf'"},
      {R"({"allOf":[{"type":"string"}]})", "keyword 'allOf'"},
      {R"({"type":"object","properties":{"a":{}},"additionalProperties":true})", "#/additionalProperties"},
      {R"({"type":"object","patternProperties":{"x":{}}})", "keyword 'patternProperties'"},
      {R"({"type":"array","prefixItems":[{}]})", "keyword 'prefixItems'"},
      {R"({"type":"array","uniqueItems":true})", "keyword 'uniqueItems'"},
      {R"({"type":"string","format":"email"})", "format 'email'"},
      {R"({"type":"string","minItems":1})", "#/minItems: keyword 'minItems' does not apply"},
      {R"({"$ref":"other.json#/x"})", "#/$ref: '$ref' 'other.json#/x' is not supported"},
      {R"({"$ref":"#/$defs/missing"})", "names no definition"},
      {R"({"type":"thing"})", "type 'thing'"},
      {R"({"enum":[]})", "#/enum"},
      {R"({"type":"string","enum":[1]})", "does not have the schema's 'type'"},
      {R"({"enum":["a"],"maxLength":3})", "keyword 'maxLength'"},
      {R"({"type":"array","maxItems":100000})", "'maxItems' above 1000"},
      {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "#/required: 'required' names \"b\""},
      {"false", "matches nothing"},
      {"3", "must be an object or a boolean"},
      {R"({"anyOf":[{"$ref":"#"},{"type":"null"}]})", "left recursion"},
  };
  for (const auto& [schema, what] : cases) {
    std::string e = refusal(schema);
    EXPECT_NE(e.find(what), std::string::npos) << schema << "\nerror: " << e;
  }
  // Deep nesting is refused, not a stack overflow.
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += R"({"type":"array","items":)";
  deep += "{}" + std::string(200, '}');
  EXPECT_NE(refusal(deep).find("nested deeper"), std::string::npos);
}
