// JSON Schema -> GBNF: one rule per schema node (named after its JSON pointer), the JSON
// primitives written once, every keyword checked against what its type supports.
#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "core/error.h"

namespace ptn::grammar {
namespace {

using json = nlohmann::ordered_json;

constexpr int kMaxDepth = 64;
constexpr uint64_t kMaxItems = 1000;
constexpr uint64_t kMaxLength = 10000;
constexpr size_t kMaxGrammarBytes = 1 << 20;

// The JSON primitives (rule name -> body). Numbers are bounded in length (see the header).
const std::vector<std::pair<const char*, const char*>> kPrimitives = {
    {"ws", R"(( " " | "\n" [ ]{0,20} )?)"},
    {"json-char", R"([^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" ( [0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) ))"},
    {"json-string", R"("\"" json-char* "\"")"},
    {"json-integer", R"("-"? ( "0" | [1-9] [0-9]{0,15} ))"},
    {"json-number", R"(json-integer ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?)"},
    {"json-boolean", R"("true" | "false")"},
    {"json-null", R"("null")"},
    {"json-value", R"(json-object | json-array | json-string | json-number | json-boolean | json-null)"},
    {"json-object", R"("{" ws ( json-member ( "," ws json-member )* )? "}")"},
    {"json-member", R"(json-string ws ":" ws json-value ws)"},
    {"json-array", R"("[" ws ( json-value ws ( "," ws json-value ws )* )? "]")"},
};

// A GBNF string literal for raw bytes.
std::string literal(const std::string& bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// The compact JSON text of a value, as a GBNF literal.
std::string json_literal(const json& v) { return literal(v.dump(-1, ' ', false, json::error_handler_t::strict)); }

std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) out += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
  return out;
}

// The JSON Schema type names a value has ("integer" numbers are also "number").
bool has_type(const json& v, const std::set<std::string>& types) {
  if (v.is_null()) return types.count("null");
  if (v.is_boolean()) return types.count("boolean");
  if (v.is_string()) return types.count("string");
  if (v.is_array()) return types.count("array");
  if (v.is_object()) return types.count("object");
  if (v.is_number_integer() || v.is_number_unsigned()) return types.count("integer") || types.count("number");
  return types.count("number") > 0;
}

// --- integer ranges ------------------------------------------------------------------------

// GBNF alternatives for the digit strings of one length from lo to hi (equal lengths, lo <= hi;
// leading zeros are part of the strings).
std::string fixed_width_range(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "\"\"";
  if (lo == hi) return literal(lo);
  const size_t rest = lo.size() - 1;
  if (lo[0] == hi[0]) return literal(lo.substr(0, 1)) + " ( " + fixed_width_range(lo.substr(1), hi.substr(1)) + " )";
  const std::string any = rest ? " [0-9]{" + std::to_string(rest) + "}" : "";
  std::vector<std::string> alts;
  // lo's first digit with the rest at least lo's rest; hi's first digit with the rest at most
  // hi's; every digit between them with any rest. A rest of all 0s (or all 9s) joins the middle.
  char mid_lo = lo[0], mid_hi = hi[0];
  if (lo.substr(1) != std::string(rest, '0')) {
    alts.push_back(literal(lo.substr(0, 1)) + " ( " + fixed_width_range(lo.substr(1), std::string(rest, '9')) + " )");
    ++mid_lo;
  }
  const bool hi_full = hi.substr(1) == std::string(rest, '9');
  if (!hi_full) --mid_hi;
  if (mid_lo <= mid_hi)
    alts.push_back((mid_lo == mid_hi ? literal(std::string(1, mid_lo)) : "[" + std::string(1, mid_lo) + "-" + std::string(1, mid_hi) + "]") + any);
  if (!hi_full)
    alts.push_back(literal(hi.substr(0, 1)) + " ( " + fixed_width_range(std::string(rest, '0'), hi.substr(1)) + " )");
  std::string out;
  for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
  return out;
}

// The decimal numbers (no leading zero) from a to b, a <= b.
std::string unsigned_range(uint64_t a, uint64_t b) {
  const std::string sa = std::to_string(a), sb = std::to_string(b);
  std::string out;
  for (size_t len = sa.size(); len <= sb.size(); ++len) {
    std::string lo = len == sa.size() ? sa : "1" + std::string(len - 1, '0');
    std::string hi = len == sb.size() ? sb : std::string(len, '9');
    out += (out.empty() ? "" : " | ") + std::string("( ") + fixed_width_range(lo, hi) + " )";
  }
  return out;
}

// JSON integers from lo to hi (lo <= hi).
std::string integer_range(int64_t lo, int64_t hi) {
  std::string out;
  if (hi >= 0) out = unsigned_range(static_cast<uint64_t>(std::max<int64_t>(lo, 0)), static_cast<uint64_t>(hi));
  if (lo < 0) {
    const uint64_t far = static_cast<uint64_t>(-(lo + 1)) + 1;  // |lo|, also for INT64_MIN
    const uint64_t near = hi < 0 ? static_cast<uint64_t>(-(hi + 1)) + 1 : 1;
    out += (out.empty() ? "" : " | ") + std::string("\"-\" ( ") + unsigned_range(near, far) + " )";
  }
  return out;
}

class Converter {
 public:
  Converter(const json& root, std::string root_name) : root_(root), root_name_(std::move(root_name)) {
    for (const auto& [name, body] : kPrimitives) names_.insert(name);
  }
  // The grammar text: the root rule (followed by whitespace) and the primitives, or with
  // `embedded` the schema's rules alone (its root rule without trailing whitespace).
  std::string run(bool embedded = false);

 private:
  [[noreturn]] void refuse(const std::string& path, const std::string& msg) const {
    fail(ErrorKind::InvalidArgument, "json_schema: " + (path.empty() ? std::string("#") : "#" + path), msg);
  }
  std::string new_rule(const std::string& path, const std::string& body);
  std::string reserve_name(const std::string& path);
  void define(const std::string& name, const std::string& body);
  std::string visit(const json& s, const std::string& path, int depth);
  std::string visit_type(const std::string& type, const json& s, const std::string& path, int depth);
  std::string visit_object(const json& s, const std::string& path, int depth);
  std::string visit_map(const json& value_schema, const std::string& path, int depth);
  std::string visit_array(const json& s, const std::string& path, int depth);
  std::string visit_string(const json& s, const std::string& path);
  std::string visit_ref(const json& s, const std::string& path);
  void check_keywords(const json& s, const std::string& path, const std::set<std::string>& types) const;
  void check_values_have_type(const json& s, const std::set<std::string>& types, const std::string& path) const {
    const char* key = s.contains("enum") ? "enum" : "const";
    const json& values = s[key];
    for (const auto& v : values.is_array() && s.contains("enum") ? values : json::array({values}))
      if (!has_type(v, types)) refuse(path + "/" + key, "value " + v.dump() + " does not have the schema's 'type'");
  }
  uint64_t count(const json& s, const char* key, uint64_t max, const std::string& path) const;

  const json& root_;
  std::string root_name_;
  std::set<std::string> names_;
  std::vector<std::pair<std::string, std::string>> rules_;  // in order of definition
  std::map<std::string, std::string> refs_;                 // "$defs/x" -> rule name
  std::set<std::string> used_primitives_;
  size_t bytes_ = 0;
};

std::string Converter::reserve_name(const std::string& path) {
  std::string base;
  for (char c : root_name_ + path) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (ok) base += c;
    else if (!base.empty() && base.back() != '-') base += '-';
  }
  while (!base.empty() && base.back() == '-') base.pop_back();
  if (base.size() > 48) base.resize(48);
  std::string name = base;
  for (int k = 2; names_.count(name) || name.rfind("json-", 0) == 0 || name == "ws"; ++k) name = base + "-" + std::to_string(k);
  names_.insert(name);
  return name;
}

void Converter::define(const std::string& name, const std::string& body) {
  bytes_ += name.size() + body.size() + 6;
  if (bytes_ > kMaxGrammarBytes) refuse("", "the schema makes a grammar larger than 1 MB");
  rules_.push_back({name, body});
}

std::string Converter::new_rule(const std::string& path, const std::string& body) {
  std::string name = reserve_name(path);
  define(name, body);
  return name;
}

uint64_t Converter::count(const json& s, const char* key, uint64_t max, const std::string& path) const {
  const json& v = s.at(key);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    refuse(path + "/" + key, std::string("'") + key + "' must be a non-negative integer");
  uint64_t n = v.get<uint64_t>();
  if (n > max) refuse(path + "/" + key, std::string("'") + key + "' above " + std::to_string(max) + " is not supported");
  return n;
}

// Keywords every schema may have, and those of each type.
void Converter::check_keywords(const json& s, const std::string& path, const std::set<std::string>& types) const {
  static const std::set<std::string> common = {"type", "enum", "const", "anyOf", "$ref", "$defs", "definitions",
                                               "title", "description", "default", "examples", "$comment",
                                               "$schema", "$id", "strict", "nullable"};
  static const std::map<std::string, std::set<std::string>> by_type = {
      {"object", {"properties", "required", "additionalProperties"}},
      {"array", {"items", "minItems", "maxItems"}},
      {"string", {"minLength", "maxLength", "format"}},
      {"integer", {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}},
      {"number", {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}},
  };
  for (const auto& [key, value] : s.items()) {
    if (common.count(key)) continue;
    bool ok = false;
    for (const auto& t : types) {
      auto it = by_type.find(t);
      ok |= it != by_type.end() && it->second.count(key);
    }
    if (ok) continue;
    bool elsewhere = false;
    for (const auto& [t, keys] : by_type) elsewhere |= keys.count(key) > 0;
    if (elsewhere) refuse(path + "/" + pointer_token(key), "keyword '" + key + "' does not apply to this schema's type");
    refuse(path + "/" + pointer_token(key), "keyword '" + key + "' is not supported");
  }
}

std::string Converter::visit_ref(const json& s, const std::string& path) {
  const json& ref = s.at("$ref");
  if (!ref.is_string()) refuse(path + "/$ref", "'$ref' must be a string");
  const std::string r = ref.get<std::string>();
  if (r == "#") return root_name_;
  std::string section, name;
  for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
    std::string p = prefix;
    if (r.rfind(p, 0) == 0) {
      section = p.substr(2, p.size() - 3);
      name = r.substr(p.size());
    }
  }
  if (section.empty() || name.empty() || name.find('/') != std::string::npos)
    refuse(path + "/$ref", "'$ref' '" + r + "' is not supported (only #, #/$defs/NAME, #/definitions/NAME)");
  std::string key;  // the JSON-pointer-decoded name
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '~' && i + 1 < name.size() && (name[i + 1] == '0' || name[i + 1] == '1')) {
      key += name[++i] == '0' ? '~' : '/';
    } else {
      key += name[i];
    }
  }
  auto it = refs_.find(section + "/" + key);
  if (it != refs_.end()) return it->second;
  if (!root_.is_object() || !root_.contains(section) || !root_[section].is_object() || !root_[section].contains(key))
    refuse(path + "/$ref", "'$ref' '" + r + "' names no definition");
  const std::string def_path = "/" + section + "/" + pointer_token(key);
  std::string rule = reserve_name(def_path);
  refs_[section + "/" + key] = rule;  // before the visit: a recursive reference finds it
  std::string body = visit(root_[section][key], def_path, 1);
  define(rule, body);
  return rule;
}

std::string Converter::visit(const json& s, const std::string& path, int depth) {
  if (depth > kMaxDepth) refuse(path, "schema nested deeper than " + std::to_string(kMaxDepth));
  if (s.is_boolean()) {
    if (!s.get<bool>()) refuse(path, "schema false matches nothing");
    return "json-value";
  }
  if (!s.is_object()) refuse(path, "a schema must be an object or a boolean");
  std::set<std::string> types;
  if (s.contains("type")) {
    const json& t = s["type"];
    if (t.is_string()) {
      types.insert(t.get<std::string>());
    } else if (t.is_array() && !t.empty()) {
      for (const auto& x : t) {
        if (!x.is_string()) refuse(path + "/type", "'type' must be a string or an array of strings");
        types.insert(x.get<std::string>());
      }
    } else {
      refuse(path + "/type", "'type' must be a string or a non-empty array of strings");
    }
    static const std::set<std::string> known = {"object", "array", "string", "number", "integer", "boolean", "null"};
    for (const auto& t2 : types)
      if (!known.count(t2)) refuse(path + "/type", "type '" + t2 + "' is not a JSON Schema type");
  } else {
    if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) types.insert("object");
    if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) types.insert("array");
    if (s.contains("minLength") || s.contains("maxLength") || s.contains("format")) types.insert("string");
  }
  if (s.contains("nullable")) {
    if (!s["nullable"].is_boolean()) refuse(path + "/nullable", "'nullable' must be a boolean");
    if (s["nullable"].get<bool>() && !types.empty()) types.insert("null");
  }
  const int shapes = s.contains("$ref") + s.contains("enum") + s.contains("const") + s.contains("anyOf");
  if (shapes > 1) refuse(path, "only one of '$ref', 'enum', 'const', 'anyOf' may appear in a schema");
  if (shapes == 1) {
    // The value is fixed by the shape: a type-specific keyword beside it would be ignored.
    check_keywords(s, path, {});
    if (s.contains("type") && (s.contains("anyOf") || s.contains("$ref")))
      refuse(path + "/type", std::string("'type' next to '") + (s.contains("anyOf") ? "anyOf" : "$ref") +
                                 "' is not supported");
    if (s.contains("type")) check_values_have_type(s, types, path);
  } else {
    check_keywords(s, path, types);
  }
  if (s.contains("$ref")) return visit_ref(s, path);
  if (s.contains("const")) return json_literal(s["const"]);
  if (s.contains("enum")) {
    const json& e = s["enum"];
    if (!e.is_array() || e.empty()) refuse(path + "/enum", "'enum' must be a non-empty array");
    if (e.size() > 10000) refuse(path + "/enum", "'enum' with more than 10000 values is not supported");
    std::string out;
    for (const auto& v : e) out += (out.empty() ? "" : " | ") + json_literal(v);
    return out;
  }
  if (s.contains("anyOf")) {
    const json& a = s["anyOf"];
    if (!a.is_array() || a.empty()) refuse(path + "/anyOf", "'anyOf' must be a non-empty array");
    std::string out;
    for (size_t i = 0; i < a.size(); ++i) {
      std::string sub = path + "/anyOf/" + std::to_string(i);
      out += (out.empty() ? "" : " | ") + new_rule(sub, visit(a[i], sub, depth + 1));
    }
    return out;
  }
  if (types.empty()) return "json-value";
  std::string out;
  for (const auto& t : types) out += (out.empty() ? "" : " | ") + visit_type(t, s, path, depth);
  return out;
}

std::string Converter::visit_type(const std::string& type, const json& s, const std::string& path, int depth) {
  if (type == "object") return visit_object(s, path, depth);
  if (type == "array") return visit_array(s, path, depth);
  if (type == "string") return visit_string(s, path);
  static const char* const kBounds[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
  if (type == "number") {
    for (const char* k : kBounds)
      if (s.contains(k))
        refuse(path + "/" + k, std::string("'") + k + "' on a number that may have a fraction is not supported "
                                                     "(an \"integer\" takes bounds)");
    return "json-number";
  }
  if (type == "integer") {
    // Bounds: the default domain is json-integer's (at most 16 digits); a bound narrows it.
    constexpr double kDomain = 9999999999999999.0;
    double lo = -kDomain, hi = kDomain;
    for (const char* k : kBounds) {
      if (!s.contains(k)) continue;
      const json& v = s[k];
      if (!v.is_number()) refuse(path + "/" + k, std::string("'") + k + "' must be a number");
      const double x = v.get<double>();
      const std::string key = k;
      if (key == "minimum") lo = std::max(lo, std::ceil(x));
      if (key == "exclusiveMinimum") lo = std::max(lo, std::floor(x) + 1);
      if (key == "maximum") hi = std::min(hi, std::floor(x));
      if (key == "exclusiveMaximum") hi = std::min(hi, std::ceil(x) - 1);
    }
    if (lo == -kDomain && hi == kDomain) return "json-integer";
    if (!(lo <= hi)) refuse(path, "no integer lies within its 'minimum' / 'maximum' bounds");
    return new_rule(path + "/range", integer_range(static_cast<int64_t>(lo), static_cast<int64_t>(hi)));
  }
  if (type == "boolean") return "json-boolean";
  return "json-null";
}

// Properties in the order of `properties`; optional ones may be left out. F(i): the members from
// i on when none was written yet; R(i): the same after at least one (each starts with ",").
std::string Converter::visit_object(const json& s, const std::string& path, int depth) {
  const json* props = s.contains("properties") ? &s["properties"] : nullptr;
  if (props && !props->is_object()) refuse(path + "/properties", "'properties' must be an object");
  if (s.contains("additionalProperties")) {
    const json& ap = s["additionalProperties"];
    if (ap.is_object() && (!props || props->empty())) return visit_map(ap, path + "/additionalProperties", depth + 1);
    if (!(ap.is_boolean() && !ap.get<bool>()) && !(ap.is_boolean() && (!props || props->empty())))
      refuse(path + "/additionalProperties",
             "'additionalProperties' other than false is not supported next to 'properties'");
  }
  if (!props || props->empty()) {
    bool closed = s.contains("additionalProperties") && s["additionalProperties"].is_boolean() &&
                  !s["additionalProperties"].get<bool>();
    return closed ? std::string(R"("{" ws "}")") : std::string("json-object");
  }
  if (props->size() > 1000) refuse(path + "/properties", "more than 1000 properties are not supported");
  std::set<std::string> required;
  if (s.contains("required")) {
    const json& r = s["required"];
    if (!r.is_array()) refuse(path + "/required", "'required' must be an array of property names");
    for (const auto& n : r) {
      if (!n.is_string() || !props->contains(n.get<std::string>()))
        refuse(path + "/required", "'required' names " + n.dump() + ", which is not in 'properties'");
      required.insert(n.get<std::string>());
    }
  }
  std::vector<std::string> member, names;
  for (const auto& [key, sub] : props->items()) {
    std::string sub_path = path + "/properties/" + pointer_token(key);
    std::string value = new_rule(sub_path, visit(sub, sub_path, depth + 1));
    member.push_back(json_literal(json(key)) + " ws \":\" ws " + value + " ws");
    names.push_back(key);
  }
  const size_t n = member.size();
  std::vector<std::string> first(n + 1), rest(n + 1);
  first[n] = rest[n] = "\"\"";
  for (size_t i = n; i-- > 0;) {
    bool req = required.count(names[i]) > 0;
    std::string next_rest = i + 1 < n ? rest[i + 1] : "\"\"";
    std::string r_body = req ? "\",\" ws " + member[i] + " " + next_rest
                             : "( \",\" ws " + member[i] + " )? " + next_rest;
    rest[i] = new_rule(path + "/rest" + std::to_string(i), r_body);
    std::string f_body = member[i] + " " + next_rest;
    if (!req) f_body += " | " + first[i + 1];
    first[i] = new_rule(path + "/first" + std::to_string(i), f_body);
  }
  return "\"{\" ws " + first[0] + " \"}\"";
}

std::string Converter::visit_map(const json& value_schema, const std::string& path, int depth) {
  std::string value = new_rule(path, visit(value_schema, path, depth));
  std::string m = new_rule(path + "/member", "json-string ws \":\" ws " + value + " ws");
  return "\"{\" ws ( " + m + " ( \",\" ws " + m + " )* )? \"}\"";
}

std::string Converter::visit_array(const json& s, const std::string& path, int depth) {
  std::string item = "json-value";
  if (s.contains("items")) {
    if (!s["items"].is_object() && !s["items"].is_boolean())
      refuse(path + "/items", "'items' must be a schema (tuple forms are not supported)");
    item = new_rule(path + "/items", visit(s["items"], path + "/items", depth + 1));
  }
  const uint64_t min = s.contains("minItems") ? count(s, "minItems", kMaxItems, path) : 0;
  const bool bounded = s.contains("maxItems");
  const uint64_t max = bounded ? count(s, "maxItems", kMaxItems, path) : 0;
  if (bounded && max < min) refuse(path + "/maxItems", "'maxItems' is smaller than 'minItems'");
  if (bounded && max == 0) return R"("[" ws "]")";
  const std::string more = "( \",\" ws " + item + " ws )";
  std::string reps = "{" + std::to_string(min > 0 ? min - 1 : 0) + "," + (bounded ? std::to_string(max - 1) : "") + "}";
  std::string body = item + " ws " + more + reps;
  if (min == 0) body = "( " + body + " )?";
  return "\"[\" ws " + body + " \"]\"";
}

std::string Converter::visit_string(const json& s, const std::string& path) {
  if (s.contains("format")) {
    const json& f = s["format"];
    static const std::map<std::string, std::string> formats = {
        {"date", R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ))"},
        {"time", R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))"},
        {"uuid", R"([0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12})"},
    };
    if (!f.is_string()) refuse(path + "/format", "'format' must be a string");
    std::string name = f.get<std::string>();
    if (s.contains("minLength") || s.contains("maxLength"))
      refuse(path + "/format", "'format' together with 'minLength'/'maxLength' is not supported");
    if (name == "date-time")
      return "\"\\\"\" " + new_rule(path + "/date", formats.at("date")) + " \"T\" " + new_rule(path + "/time", formats.at("time")) + " \"\\\"\"";
    auto it = formats.find(name);
    if (it == formats.end()) refuse(path + "/format", "format '" + name + "' is not supported (date, time, date-time, uuid are)");
    return "\"\\\"\" " + new_rule(path + "/" + name, it->second) + " \"\\\"\"";
  }
  if (!s.contains("minLength") && !s.contains("maxLength")) return "json-string";
  const uint64_t min = s.contains("minLength") ? count(s, "minLength", kMaxLength, path) : 0;
  const bool bounded = s.contains("maxLength");
  const uint64_t max = bounded ? count(s, "maxLength", kMaxLength, path) : 0;
  if (bounded && max < min) refuse(path + "/maxLength", "'maxLength' is smaller than 'minLength'");
  return "\"\\\"\" json-char{" + std::to_string(min) + "," + (bounded ? std::to_string(max) : "") + "} \"\\\"\"";
}

std::string Converter::run(bool embedded) {
  reserve_name("");  // root_name_
  std::string body = visit(root_, "", 0);
  rules_.insert(rules_.begin(), {root_name_, embedded ? body : body + " ws"});
  std::string out;
  for (const auto& [name, b] : rules_) out += name + " ::= " + b + "\n";
  if (!embedded) out += json_primitives_gbnf();
  return out;
}

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) { return Converter(schema, "root").run(); }

std::string json_schema_rules(const nlohmann::ordered_json& schema, const std::string& root_name) {
  for (char c : root_name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') || root_name.rfind("json-", 0) == 0 ||
        root_name == "ws" || root_name.empty())
      fail(ErrorKind::InvalidArgument, "json_schema", "bad root rule name '" + root_name + "'");
  return Converter(schema, root_name).run(/*embedded=*/true);
}

std::string json_primitives_gbnf() {
  std::string out;
  for (const auto& [name, b] : kPrimitives) out += std::string(name) + " ::= " + b + "\n";
  return out;
}

std::string json_schema_to_gbnf(const nlohmann::json& schema) {
  return json_schema_to_gbnf(nlohmann::ordered_json::parse(schema.dump()));
}

std::string json_schema_to_gbnf(std::string_view schema_text) {
  nlohmann::ordered_json schema;
  try {
    schema = nlohmann::ordered_json::parse(schema_text);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::InvalidArgument, "json_schema", std::string("the schema is not JSON: ") + e.what());
  }
  return json_schema_to_gbnf(schema);
}

std::string json_object_gbnf() { return "root ::= json-object ws\n" + json_primitives_gbnf(); }

Grammar json_schema_grammar(const nlohmann::ordered_json& schema) {
  return parse_gbnf(json_schema_to_gbnf(schema), "json_schema");
}
Grammar json_schema_grammar(std::string_view schema_text) {
  return parse_gbnf(json_schema_to_gbnf(schema_text), "json_schema");
}

Grammar json_object_grammar() { return parse_gbnf(json_object_gbnf(), "json_object"); }

}  // namespace ptn::grammar
