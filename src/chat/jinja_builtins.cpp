// Filters, tests, methods of strings and dicts, and global functions. Where @huggingface/jinja
// and Python Jinja agree, so does this; where the JavaScript one lacks a construct or fails
// (`str.strip(chars)` arguments, `is divisibleby(n)`, `select`, `round`, `'-' * 3`) this follows
// Python Jinja.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>

#include "chat/jinja_interp.h"

namespace ptn::jinja {

size_t ws_len_at(const std::string& s, size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f)) return 1;
  if (c == 0xc2 && i + 1 < s.size() && (static_cast<unsigned char>(s[i + 1]) == 0xa0 || static_cast<unsigned char>(s[i + 1]) == 0x85)) return 2;
  if (c == 0xe2 && i + 2 < s.size()) {
    auto c1 = static_cast<unsigned char>(s[i + 1]), c2 = static_cast<unsigned char>(s[i + 2]);
    if (c1 == 0x80 && (c2 <= 0x8a || c2 == 0xa8 || c2 == 0xa9 || c2 == 0xaf)) return 3;
    if (c1 == 0x81 && c2 == 0x9f) return 3;
  }
  if (c == 0xe3 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 && static_cast<unsigned char>(s[i + 2]) == 0x80) return 3;
  return 0;
}

static size_t ws_len_before(const std::string& s, size_t end) {
  for (size_t k = 1; k <= 3 && k <= end; ++k)
    if (ws_len_at(s, end - k) == k) return k;
  return 0;
}

std::string strip_ws(const std::string& s, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left)
    while (b < e) {
      size_t n = ws_len_at(s, b);
      if (!n) break;
      b += n;
    }
  if (right)
    while (e > b) {
      size_t n = ws_len_before(s, e);
      if (!n) break;
      e -= n;
    }
  return s.substr(b, e - b);
}

static std::string strip_chars(const std::string& s, const std::string& chars, bool left, bool right) {
  auto set = utf8_chars(chars);
  auto cs = utf8_chars(s);
  size_t b = 0, e = cs.size();
  auto in = [&](const std::string& c) { return std::find(set.begin(), set.end(), c) != set.end(); };
  if (left)
    while (b < e && in(cs[b])) ++b;
  if (right)
    while (e > b && in(cs[e - 1])) --e;
  std::string out;
  for (size_t i = b; i < e; ++i) out += cs[i];
  return out;
}

static bool is_lower_ascii(char c) { return c >= 'a' && c <= 'z'; }
static bool is_upper_ascii(char c) { return c >= 'A' && c <= 'Z'; }
static bool is_alpha_ascii(char c) { return is_lower_ascii(c) || is_upper_ascii(c); }
static char to_upper(char c) { return is_lower_ascii(c) ? static_cast<char>(c - 32) : c; }
static char to_lower(char c) { return is_upper_ascii(c) ? static_cast<char>(c + 32) : c; }

static std::string upper(std::string s) {
  for (char& c : s) c = to_upper(c);
  return s;
}
static std::string lower(std::string s) {
  for (char& c : s) c = to_lower(c);
  return s;
}
static std::string title(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    if (is_alpha_ascii(c)) {
      c = prev_cased ? to_lower(c) : to_upper(c);
      prev_cased = true;
    } else {
      prev_cased = static_cast<unsigned char>(c) >= 0x80 && prev_cased;
    }
  }
  return out;
}
static std::string capitalize(const std::string& s) {
  std::string out = lower(s);
  if (!out.empty()) out[0] = to_upper(out[0]);
  return out;
}

static std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count,
                        size_t max_bytes, const Node& at) {
  std::string out;
  if (count == 0) return s;
  int64_t done = 0;
  auto check = [&] {
    if (out.size() > max_bytes) err(at, ErrorKind::Capacity, "replace() result exceeds the string size limit");
  };
  if (from.empty()) {  // Python inserts `to` around every character
    auto cs = utf8_chars(s);
    for (auto& c : cs) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      out += c;
      check();
    }
    if (count < 0 || done < count) out += to;
    check();
    return out;
  }
  size_t pos = 0;
  while (true) {
    size_t hit = (count < 0 || done < count) ? s.find(from, pos) : std::string::npos;
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    check();
    pos = hit + from.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  check();
  return out;
}

static std::vector<std::string> split_str(const std::string& s, const Value* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (!sep || sep->is_none() || sep->is_undefined()) {
    size_t i = 0, n = s.size();
    while (true) {
      while (i < n && ws_len_at(s, i)) i += ws_len_at(s, i);
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        out.push_back(strip_ws(s.substr(i), false, true));
        break;
      }
      size_t j = i;
      while (j < n && !ws_len_at(s, j)) ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  const std::string& d = sep->str();
  size_t pos = 0;
  while (true) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) break;
    size_t hit = s.find(d, pos);
    if (hit == std::string::npos) break;
    out.push_back(s.substr(pos, hit - pos));
    pos = hit + d.size();
  }
  out.push_back(s.substr(pos));
  return out;
}

static std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// How `join` and `~` turn an item into text.
std::string join_text(const Value& v) {
  switch (v.type()) {
    case Type::Undefined:
    case Type::None: return "";
    case Type::Float: return js_number(v.as_float());
    default: return to_output(v);
  }
}

// How `~` and string `+` turn an operand into text: as @huggingface/jinja does (a float prints
// as JavaScript prints it, 2.0 as "2"), except none, which Python prints as "None" where the
// JavaScript renderer fails.
std::string concat_text(const Value& v) {
  if (v.is_none()) return "None";
  if (v.is_float()) return js_number(v.as_float());
  return to_output(v);
}

// Parses an int the way Jinja's `int` filter does: int(text), else int(float(text)).
static bool parse_int_text(const std::string& text, int64_t base, int64_t& out) {
  std::string t = strip_ws(text, true, true);
  std::string digits;
  for (char c : t)
    if (c != '_') digits += c;
  if (digits.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(digits.c_str(), &end, static_cast<int>(base));
  if (*end == '\0' && errno == 0) {
    out = v;
    return true;
  }
  if (base != 10) return false;
  double d = std::strtod(digits.c_str(), &end);
  if (*end != '\0' || !std::isfinite(d) || std::fabs(d) > 9.2e18) return false;
  out = static_cast<int64_t>(d);
  return true;
}

static bool parse_float_text(const std::string& text, double& out) {
  std::string t = strip_ws(text, true, true);
  if (t.empty()) return false;
  char* end = nullptr;
  out = std::strtod(t.c_str(), &end);
  return *end == '\0';
}

// Orders two values for sort/dictsort/min/max: numbers with numbers, strings with strings.
int compare_values(const Value& a, const Value& b, bool case_sensitive, const Node& at) {
  auto numeric = [](const Value& v) { return v.is_number() || v.is_bool(); };
  if (numeric(a) && numeric(b)) {
    double x = a.is_bool() ? static_cast<double>(a.as_bool()) : a.as_number();
    double y = b.is_bool() ? static_cast<double>(b.as_bool()) : b.as_number();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    std::string x = case_sensitive ? a.str() : lower(a.str());
    std::string y = case_sensitive ? b.str() : lower(b.str());
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if ((a.is_none() && b.is_none()) || (a.is_undefined() && b.is_undefined())) return 0;
  err(at, ErrorKind::InvalidArgument, "cannot compare " + describe_type(a) + " with " + describe_type(b));
}


bool contains(const Value& container, const Value& item, const Node& at) {
  switch (container.type()) {
    case Type::String:
      if (!item.is_string()) err(at, ErrorKind::InvalidArgument, "'in <string>' needs a string on its left, got " + describe_type(item));
      return container.str().find(item.str()) != std::string::npos;
    case Type::List:
      for (auto& x : container.items())
        if (values_equal(x, item)) return true;
      return false;
    case Type::Dict:
    case Type::Namespace: return item.is_string() && container.dict_ref().find(item.str()) != nullptr;
    case Type::Undefined: return false;
    default: err(at, ErrorKind::InvalidArgument, "'in' needs a string, list or dict on its right, got " + describe_type(container));
  }
}

// ---- tests -------------------------------------------------------------------------------

bool Interp::apply_test(const std::string& name, const Value& v, const std::vector<Value>& args, const Node& at) {
  auto need_arg = [&]() -> const Value& {
    if (args.empty()) err(at, ErrorKind::InvalidArgument, "test '" + name + "' needs an argument");
    return args[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_string() || v.is_dict();
  if (name == "sequence") return v.is_list() || v.is_string() || v.is_dict();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "callable") return v.is_function();
  if (name == "odd" || name == "even") {
    if (!v.is_int()) err(at, ErrorKind::InvalidArgument, "test '" + name + "' needs an integer, got " + describe_type(v));
    bool odd = v.as_int() % 2 != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "divisibleby") {
    const Value& d = need_arg();
    if (!v.is_int() || !d.is_int()) err(at, ErrorKind::InvalidArgument, "test 'divisibleby' needs integers");
    if (d.as_int() == 0) err(at, ErrorKind::InvalidArgument, "divisibleby(0)");
    return v.as_int() % d.as_int() == 0;
  }
  if (name == "lower") return v.is_string() && lower(v.str()) == v.str();
  if (name == "upper") return v.is_string() && upper(v.str()) == v.str();
  if (name == "equalto" || name == "eq" || name == "==") return values_equal(v, need_arg());
  if (name == "ne" || name == "!=") return !values_equal(v, need_arg());
  if (name == "sameas") {
    const Value& o = need_arg();
    if (v.identity() || o.identity()) return v.identity() == o.identity();
    return v.type() == o.type() && values_equal(v, o);
  }
  if (name == "in") return contains(need_arg(), v, at);
  if (name == "escaped") return false;
  static const char* cmp_names[] = {"lt", "<", "lessthan", "le", "<=", "gt", ">", "greaterthan", "ge", ">="};
  for (const char* c : cmp_names) {
    if (name != c) continue;
    Node op_node(NodeKind::Binary, at.line, at.col);
    op_node.name = (name == "lt" || name == "lessthan") ? "<" : name == "le" ? "<=" : (name == "gt" || name == "greaterthan") ? ">" : name == "ge" ? ">=" : name;
    return eval_binary(op_node, v, need_arg()).truthy();
  }
  err(at, ErrorKind::Unsupported, "unknown test '" + name + "'");
}

// ---- methods on strings and dicts ---------------------------------------------------------

// Methods of dicts: get, items, keys, values, dictsort; nullopt for another name.
std::optional<Value> Interp::dict_method(const Value& self, const std::string& name, const CallArgs& args, const Node& at) {
  if (name == "get") {
    const Value* k = args.get(0, "key");
    if (!k) err(at, ErrorKind::InvalidArgument, "get() needs a key");
    if (k->is_string())
      if (const Value* v = self.dict_ref().find(k->str())) return *v;
    const Value* d = args.get(1, "default");
    return d ? *d : Value::none();
  }
  if (name == "items" || name == "keys" || name == "values") {
    List out;
    for (auto& [k, v] : self.dict_ref().items()) {
      if (name == "items") out.push_back(Value::list({Value(k), v}, true));
      else if (name == "keys") out.push_back(Value(k));
      else out.push_back(v);
    }
    return Value::list(std::move(out));
  }
  if (name == "dictsort") {
    Scope none(nullptr);
    return apply_filter("dictsort", self, args, none, at);
  }
  return std::nullopt;
}

// Methods of strings (Python's str methods templates use); nullopt for another name.
std::optional<Value> Interp::string_method(const Value& self, const std::string& name, const CallArgs& args, const Node& at) {
  auto arg_str = [&](size_t i, const char* kw) -> const std::string* {
    const Value* v = args.get(i, kw);
    if (!v || v->is_none() || v->is_undefined()) return nullptr;
    if (!v->is_string()) err(at, ErrorKind::InvalidArgument, name + "() argument '" + kw + "' must be a string");
    return &v->str();
  };
  const std::string& s = self.str();
  if (name == "upper") return Value(upper(s));
  if (name == "lower") return Value(lower(s));
  if (name == "title") return Value(title(s));
  if (name == "capitalize") return Value(capitalize(s));
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    bool l = name != "rstrip", r = name != "lstrip";
    const std::string* chars = arg_str(0, "chars");
    return Value(chars ? strip_chars(s, *chars, l, r) : strip_ws(s, l, r));
  }
  if (name == "startswith" || name == "endswith") {
    const Value* p = args.get(0, "prefix");
    if (!p) err(at, ErrorKind::InvalidArgument, name + "() needs an argument");
    auto test = [&](const std::string& x) {
      if (x.size() > s.size()) return false;
      return name == "startswith" ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
    };
    if (p->is_string()) return Value(test(p->str()));
    if (p->is_list()) {
      for (auto& x : p->items()) {
        if (!x.is_string()) err(at, ErrorKind::InvalidArgument, name + "() tuple items must be strings");
        if (test(x.str())) return Value(true);
      }
      return Value(false);
    }
    err(at, ErrorKind::InvalidArgument, name + "() argument must be a string or a tuple of strings");
  }
  if (name == "split") {
    const Value* sep = args.get(0, "sep");
    if (sep && !sep->is_none() && !sep->is_undefined() && !sep->is_string())
      err(at, ErrorKind::InvalidArgument, "split() separator must be a string");
    if (sep && sep->is_string() && sep->str().empty()) err(at, ErrorKind::InvalidArgument, "split() with an empty separator");
    const Value* ms = args.get(1, "maxsplit");
    int64_t maxsplit = ms && ms->is_int() ? ms->as_int() : -1;
    List out;
    for (auto& part : split_str(s, sep, maxsplit)) out.push_back(Value(std::move(part)));
    check_list(out.size(), at);
    return Value::list(std::move(out));
  }
  if (name == "splitlines") {
    List out;
    size_t pos = 0;
    while (pos < s.size()) {
      size_t e = s.find_first_of("\r\n", pos);
      if (e == std::string::npos) {
        out.push_back(Value(s.substr(pos)));
        break;
      }
      out.push_back(Value(s.substr(pos, e - pos)));
      pos = e + ((s[e] == '\r' && e + 1 < s.size() && s[e + 1] == '\n') ? 2 : 1);
    }
    return Value::list(std::move(out));
  }
  if (name == "replace") {
    const std::string* from = arg_str(0, "old");
    const std::string* to = arg_str(1, "new");
    if (!from || !to) err(at, ErrorKind::InvalidArgument, "replace() needs two strings");
    const Value* c = args.get(2, "count");
    int64_t count = c && c->is_int() ? c->as_int() : -1;
    return Value(replace_all(s, *from, *to, count, lim_.max_output_bytes, at));
  }
  if (name == "find" || name == "count") {
    const std::string* sub = arg_str(0, "sub");
    if (!sub) err(at, ErrorKind::InvalidArgument, name + "() needs a string");
    if (name == "find") {
      size_t hit = s.find(*sub);
      return Value(hit == std::string::npos ? int64_t{-1} : static_cast<int64_t>(utf8_length(s.substr(0, hit))));
    }
    if (sub->empty()) return Value(static_cast<int64_t>(utf8_length(s) + 1));
    int64_t n = 0;
    for (size_t p = s.find(*sub); p != std::string::npos; p = s.find(*sub, p + sub->size())) ++n;
    return Value(n);
  }
  if (name == "join") {
    const Value* l = args.get(0, "iterable");
    if (!l || !l->is_list()) err(at, ErrorKind::InvalidArgument, "join() needs a list");
    std::string out;
    for (size_t i = 0; i < l->items().size(); ++i) {
      if (i) out += s;
      out += join_text(l->items()[i]);
      check_string(out.size(), at);
    }
    return Value(std::move(out));
  }
  if (name == "isdigit" || name == "isalpha" || name == "isspace") {
    if (s.empty()) return Value(false);
    for (char c : s) {
      bool ok = name == "isdigit" ? (c >= '0' && c <= '9') : name == "isalpha" ? is_alpha_ascii(c) : (ws_len_at(std::string(1, c), 0) > 0);
      if (!ok) return Value(false);
    }
    return Value(true);
  }
  if (name == "format") {  // str.format with {} / {0} / {name} fields
    std::string out;
    size_t auto_idx = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '{' && i + 1 < s.size() && s[i + 1] == '{') {
        out += '{';
        ++i;
      } else if (s[i] == '}' && i + 1 < s.size() && s[i + 1] == '}') {
        out += '}';
        ++i;
      } else if (s[i] == '{') {
        size_t e = s.find('}', i);
        if (e == std::string::npos) err(at, ErrorKind::InvalidArgument, "format(): unclosed '{'");
        std::string field = s.substr(i + 1, e - i - 1);
        const Value* v = nullptr;
        if (field.empty()) {
          v = auto_idx < args.pos.size() ? &args.pos[auto_idx] : nullptr;
          ++auto_idx;
        } else if (field.size() < 9 && field.find_first_not_of("0123456789") == std::string::npos) {
          size_t k = std::stoul(field);
          v = k < args.pos.size() ? &args.pos[k] : nullptr;
        } else {
          for (auto& kv : args.kw)
            if (kv.first == field) v = &kv.second;
        }
        if (!v) err(at, ErrorKind::InvalidArgument, "format(): no argument for '{" + field + "}'");
        out += concat_text(*v);
        check_string(out.size(), at);
        i = e;
      } else {
        out += s[i];
      }
    }
    return Value(std::move(out));
  }
  return std::nullopt;
}

Value Interp::call_method(const Value& self, const std::string& name, const CallArgs& args, const Node& at) {
  if (self.is_dict())
    if (auto r = dict_method(self, name, args, at)) return *r;
  if (self.is_string())
    if (auto r = string_method(self, name, args, at)) return *r;
  err(at, ErrorKind::Unsupported, "a " + describe_type(self) + " has no method '" + name + "'");
}

// ---- filters ------------------------------------------------------------------------------

namespace {

// Follows a dotted attribute path ("function.name", "items.0") through dicts and lists.
Value attr_path(const Value& item, const Value& attribute) {
  std::string path = attribute.is_int() ? std::to_string(attribute.as_int()) : attribute.is_string() ? attribute.str() : "";
  Value v = item;
  size_t pos = 0;
  while (true) {
    size_t dot = path.find('.', pos);
    std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (v.is_mapping_like()) {
      const Value* f = v.dict_ref().find(part);
      v = f ? *f : Value();
    } else if (v.is_list() && !part.empty() && part.find_first_not_of("0123456789") == std::string::npos && part.size() < 10) {
      size_t i = std::stoul(part);
      v = i < v.items().size() ? v.items()[i] : Value();
    } else {
      return Value();
    }
    if (dot == std::string::npos) return v;
    pos = dot + 1;
  }
}

const Value& false_value() {
  static const Value f(false);
  return f;
}

const Value& bool_arg(const CallArgs& args, size_t i, const char* name, const Value& def) {
  const Value* v = args.get(i, name);
  return v ? *v : def;
}

}  // namespace

// A filter applied to a value of the wrong type.
[[noreturn]] void Interp::filter_type_error(const std::string& name, const Value& v, const char* expect, const Node& at) {
  err(at, ErrorKind::InvalidArgument, "filter '" + name + "' needs " + expect + ", got " + describe_type(v));
}

// Filters that give strings or sizes: safe, tojson, string, length/count, the case and trim
// filters, replace, join, indent, wordcount; nullopt for a name not in this group.
std::optional<Value> Interp::text_filter(const std::string& name, const Value& v, const CallArgs& args, Scope& sc, const Node& at) {
  auto bad = [&](const char* expect) -> Value { filter_type_error(name, v, expect, at); };
  if (name == "safe") return v;
  if (name == "tojson") {
    JsonOptions o;
    if (const Value* ind = args.get(0, "indent"); ind && !ind->is_none()) {
      if (!ind->is_int()) err(at, ErrorKind::InvalidArgument, "tojson indent must be an integer");
      if (ind->as_int() > 64) err(at, ErrorKind::InvalidArgument, "tojson indent above 64");
      o.indent = static_cast<int>(ind->as_int());
    }
    o.ensure_ascii = bool_arg(args, 99, "ensure_ascii", false_value()).truthy();
    o.sort_keys = bool_arg(args, 99, "sort_keys", false_value()).truthy();
    std::string item_sep, key_sep;
    if (const Value* seps = args.get(99, "separators"); seps && !seps->is_none()) {
      if (!seps->is_list() || seps->items().size() != 2 || !seps->items()[0].is_string() || !seps->items()[1].is_string())
        err(at, ErrorKind::InvalidArgument, "tojson separators must be two strings");
      item_sep = seps->items()[0].str();
      key_sep = seps->items()[1].str();
      o.item_sep = &item_sep;
      o.key_sep = &key_sep;
    }
    try {
      std::string s = to_json(v, o, 256);
      check_string(s.size(), at);
      return Value(std::move(s));
    } catch (const Error& e) {
      err(at, e.kind(), "tojson: " + e.detail());
    }
  }
  if (name == "string") {
    if (v.is_string()) return v;
    if (v.is_none()) return Value("None");
    return Value(to_output(v));
  }
  if (name == "length" || name == "count") {
    if (v.is_string()) return Value(static_cast<int64_t>(utf8_length(v.str())));
    if (v.is_list()) return Value(static_cast<int64_t>(v.items().size()));
    if (v.is_mapping_like()) return Value(static_cast<int64_t>(v.dict_ref().size()));
    if (v.is_undefined()) return Value(int64_t{0});
    return bad("a string, list or dict");
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" || name == "trim" ||
      name == "e" || name == "escape") {
    if (v.is_undefined()) return Value("");  // Python Jinja: an undefined value is "" here
    if (!v.is_string()) {
      if (name == "e" || name == "escape" || v.is_number() || v.is_bool()) return apply_filter(name, Value(to_output(v)), args, sc, at);
      return bad("a string");
    }
    const std::string& s = v.str();
    if (name == "upper") return Value(upper(s));
    if (name == "lower") return Value(lower(s));
    if (name == "title") return Value(title(s));
    if (name == "capitalize") return Value(capitalize(s));
    if (name == "trim") {
      const Value* chars = args.get(0, "chars");
      if (chars && chars->is_string()) return Value(strip_chars(s, chars->str(), true, true));
      return Value(strip_ws(s, true, true));
    }
    return Value(html_escape(s));
  }
  if (name == "replace") {
    if (!v.is_string()) return bad("a string");
    return call_method(v, "replace", args, at);
  }
  if (name == "join") {
    const Value* sep = args.get(0, "d");
    const Value* attribute = args.get(1, "attribute");
    std::string d = sep && sep->is_string() ? sep->str() : "";
    List items;
    if (v.is_list()) items = v.items();
    else if (v.is_string()) for (auto& c : utf8_chars(v.str())) items.push_back(Value(c));
    else if (v.is_undefined()) return Value("");
    else return bad("a list");
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out += d;
      out += join_text(attribute ? attr_path(items[i], *attribute) : items[i]);
      check_string(out.size(), at);
    }
    return Value(std::move(out));
  }
  if (name == "indent") {
    if (!v.is_string()) return bad("a string");
    const Value* w = args.get(0, "width");
    std::string pad = !w ? "    " : w->is_string() ? w->str() : w->is_int() ? std::string(static_cast<size_t>(std::clamp<int64_t>(w->as_int(), 0, 256)), ' ') : "    ";
    bool first = bool_arg(args, 1, "first", false_value()).truthy();
    bool blank = bool_arg(args, 2, "blank", false_value()).truthy();
    std::string out;
    const std::string& s = v.str();
    size_t pos = 0;
    bool first_line = true;
    while (true) {
      size_t nl = s.find('\n', pos);
      std::string line = s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
      if (!first_line) out += '\n';
      if ((first || !first_line) && (blank || !line.empty())) out += pad;
      out += line;
      check_string(out.size(), at);
      first_line = false;
      if (nl == std::string::npos) break;
      pos = nl + 1;
    }
    return Value(std::move(out));
  }
  if (name == "wordcount") {
    if (!v.is_string()) return bad("a string");
    return Value(static_cast<int64_t>(split_str(v.str(), nullptr, -1).size()));
  }
  return std::nullopt;
}

// Filters on sequences: first/last, list, reverse, sort, unique; nullopt for another name.
std::optional<Value> Interp::sequence_filter(const std::string& name, const Value& v, const CallArgs& args, Scope& sc, const Node& at) {
  auto bad = [&](const char* expect) -> Value { filter_type_error(name, v, expect, at); };
  if (name == "first" || name == "last") {
    if (v.is_list()) {
      if (v.items().empty()) return Value();
      return name == "first" ? v.items().front() : v.items().back();
    }
    if (v.is_string()) {
      auto cs = utf8_chars(v.str());
      if (cs.empty()) return Value();
      return Value(name == "first" ? cs.front() : cs.back());
    }
    if (v.is_undefined()) return Value();
    return bad("a list or string");
  }
  if (name == "list") {
    if (v.is_list()) return Value::list(v.items());
    if (v.is_string()) {
      List out;
      for (auto& c : utf8_chars(v.str())) out.push_back(Value(c));
      return Value::list(std::move(out));
    }
    if (v.is_dict()) {
      List out;
      for (auto& kv : v.dict_ref().items()) out.push_back(Value(kv.first));
      return Value::list(std::move(out));
    }
    if (v.is_undefined()) return Value::list();
    return bad("a list, string or dict");
  }
  if (name == "reverse") {
    if (v.is_list()) {
      List out(v.items().rbegin(), v.items().rend());
      return Value::list(std::move(out));
    }
    if (v.is_string()) {
      auto cs = utf8_chars(v.str());
      std::string out;
      for (auto it = cs.rbegin(); it != cs.rend(); ++it) out += *it;
      return Value(std::move(out));
    }
    return bad("a list or string");
  }
  if (name == "sort") {
    if (!v.is_list()) return bad("a list");
    bool reverse = bool_arg(args, 0, "reverse", false_value()).truthy();
    bool cs = bool_arg(args, 1, "case_sensitive", false_value()).truthy();
    const Value* attribute = args.get(2, "attribute");
    List out = v.items();
    std::stable_sort(out.begin(), out.end(), [&](const Value& a, const Value& b) {
      Value x = attribute ? attr_path(a, *attribute) : a, y = attribute ? attr_path(b, *attribute) : b;
      int c = compare_values(x, y, cs, at);
      return reverse ? c > 0 : c < 0;
    });
    return Value::list(std::move(out));
  }
  if (name == "unique") {
    if (!v.is_list()) return bad("a list");
    List out;
    for (auto& x : v.items()) {
      bool seen = false;
      for (auto& y : out)
        if (values_equal(x, y) && x.type() == y.type()) seen = true;
      if (!seen) out.push_back(x);
    }
    return Value::list(std::move(out));
  }
  return std::nullopt;
}

// Filters over items: items, dictsort, select/reject(attr), map, sum, min/max; nullopt for another name.
std::optional<Value> Interp::item_filter(const std::string& name, const Value& v, const CallArgs& args, Scope& sc, const Node& at) {
  auto bad = [&](const char* expect) -> Value { filter_type_error(name, v, expect, at); };
  if (name == "items") {
    if (v.is_undefined()) return Value::list();
    if (!v.is_mapping_like()) return bad("a dict");
    List out;
    for (auto& [k, x] : v.dict_ref().items()) out.push_back(Value::list({Value(k), x}, true));
    return Value::list(std::move(out));
  }
  if (name == "dictsort") {
    if (!v.is_mapping_like()) return bad("a dict");
    bool cs = bool_arg(args, 0, "case_sensitive", false_value()).truthy();
    const Value* by = args.get(1, "by");
    bool by_value = by && by->is_string() && by->str() == "value";
    if (by && !(by->is_string() && (by->str() == "key" || by->str() == "value")))
      err(at, ErrorKind::InvalidArgument, "dictsort 'by' must be 'key' or 'value'");
    bool reverse = bool_arg(args, 2, "reverse", false_value()).truthy();
    List out;
    for (auto& [k, x] : v.dict_ref().items()) out.push_back(Value::list({Value(k), x}, true));
    std::stable_sort(out.begin(), out.end(), [&](const Value& a, const Value& b) {
      int c = compare_values(a.items()[by_value ? 1 : 0], b.items()[by_value ? 1 : 0], cs, at);
      return reverse ? c > 0 : c < 0;
    });
    return Value::list(std::move(out));
  }
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
    if (v.is_undefined()) return Value::list();
    if (!v.is_list()) return bad("a list");
    bool by_attr = name == "selectattr" || name == "rejectattr";
    bool keep_when = name == "selectattr" || name == "select";
    size_t first_test = by_attr ? 1 : 0;
    if (by_attr && args.pos.empty()) err(at, ErrorKind::InvalidArgument, "filter '" + name + "' needs an attribute name");
    std::string test;
    if (args.pos.size() > first_test) {
      if (!args.pos[first_test].is_string()) err(at, ErrorKind::InvalidArgument, "filter '" + name + "' needs a test name");
      test = args.pos[first_test].str();
    }
    std::vector<Value> test_args(args.pos.begin() + static_cast<std::ptrdiff_t>(std::min(args.pos.size(), first_test + 1)), args.pos.end());
    List out;
    for (auto& item : v.items()) {
      Value x = by_attr ? attr_path(item, args.pos[0]) : item;
      bool r = test.empty() ? x.truthy() : apply_test(test, x, test_args, at);
      if (r == keep_when) out.push_back(item);
    }
    return Value::list(std::move(out));
  }
  if (name == "map") {
    if (v.is_undefined()) return Value::list();
    if (!v.is_list()) return bad("a list");
    List out;
    const Value* attribute = nullptr;
    for (auto& kv : args.kw)
      if (kv.first == "attribute") attribute = &kv.second;
    if (attribute) {
      const Value* def = nullptr;
      for (auto& kv : args.kw)
        if (kv.first == "default") def = &kv.second;
      for (auto& item : v.items()) {
        Value x = attr_path(item, *attribute);
        out.push_back(x.is_undefined() && def ? *def : x);
      }
      return Value::list(std::move(out));
    }
    if (args.pos.empty() || !args.pos[0].is_string()) err(at, ErrorKind::InvalidArgument, "map needs attribute= or a filter name");
    CallArgs rest;
    rest.pos.assign(args.pos.begin() + 1, args.pos.end());
    rest.kw = args.kw;
    for (auto& item : v.items()) out.push_back(apply_filter(args.pos[0].str(), item, rest, sc, at));
    return Value::list(std::move(out));
  }
  if (name == "sum") {
    if (!v.is_list()) return bad("a list");
    const Value* attribute = args.get(0, "attribute");
    Node plus(NodeKind::Binary, at.line, at.col);
    plus.name = "+";
    Value total = args.get(1, "start") ? *args.get(1, "start") : Value(int64_t{0});
    for (auto& x : v.items()) total = eval_binary(plus, total, attribute ? attr_path(x, *attribute) : x);
    return total;
  }
  if (name == "min" || name == "max") {
    if (!v.is_list()) return bad("a list");
    if (v.items().empty()) return Value();
    bool cs = bool_arg(args, 0, "case_sensitive", false_value()).truthy();
    const Value* attribute = args.get(1, "attribute");
    const Value* best = &v.items()[0];
    for (auto& x : v.items()) {
      Value a = attribute ? attr_path(x, *attribute) : x, b = attribute ? attr_path(*best, *attribute) : *best;
      int c = compare_values(a, b, cs, at);
      if (name == "min" ? c < 0 : c > 0) best = &x;
    }
    return *best;
  }
  return std::nullopt;
}

// The other filters: default, int, float, abs, round, attr, bool; nullopt for another name.
std::optional<Value> Interp::scalar_filter(const std::string& name, const Value& v, const CallArgs& args, Scope& sc, const Node& at) {
  auto bad = [&](const char* expect) -> Value { filter_type_error(name, v, expect, at); };
  if (name == "default" || name == "d") {
    const Value* def = args.get(0, "default_value");
    bool boolean = bool_arg(args, 1, "boolean", false_value()).truthy();
    if (v.is_undefined() || (boolean && !v.truthy())) return def ? *def : Value("");
    return v;
  }
  if (name == "int") {
    const Value* def = args.get(0, "default");
    const Value* base = args.get(1, "base");
    Value d = def ? *def : Value(int64_t{0});
    if (v.is_int()) return v;
    if (v.is_bool()) return Value(static_cast<int64_t>(v.as_bool()));
    if (v.is_float()) {
      if (!std::isfinite(v.as_float()) || std::fabs(v.as_float()) > 9.2e18) return d;
      return Value(static_cast<int64_t>(v.as_float()));
    }
    if (v.is_string()) {
      int64_t out;
      int64_t b = base && base->is_int() ? base->as_int() : 10;
      if (b < 2 || b > 36) err(at, ErrorKind::InvalidArgument, "int base must be 2..36");
      return parse_int_text(v.str(), b, out) ? Value(out) : d;
    }
    return d;
  }
  if (name == "float") {
    const Value* def = args.get(0, "default");
    Value d = def ? *def : Value(0.0);
    if (v.is_number() || v.is_bool()) return Value(v.is_bool() ? (v.as_bool() ? 1.0 : 0.0) : v.as_number());
    if (v.is_string()) {
      double out;
      return parse_float_text(v.str(), out) ? Value(out) : d;
    }
    return d;
  }
  if (name == "abs") {
    if (v.is_int()) return v.as_int() == INT64_MIN ? Value(std::fabs(static_cast<double>(v.as_int()))) : Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
    if (v.is_float()) return Value(std::fabs(v.as_float()));
    return bad("a number");
  }
  if (name == "round") {
    if (!v.is_number()) return bad("a number");
    const Value* p = args.get(0, "precision");
    const Value* m = args.get(1, "method");
    int64_t prec = p && p->is_int() ? p->as_int() : 0;
    if (prec < -15 || prec > 15) err(at, ErrorKind::InvalidArgument, "round precision out of range");
    std::string method = m && m->is_string() ? m->str() : "common";
    double scale = std::pow(10.0, static_cast<double>(prec));
    double x = v.as_number() * scale;
    double r;
    if (method == "common") {  // Python's round(): halves to even
      r = std::nearbyint(x);
    } else if (method == "ceil") {
      r = std::ceil(x);
    } else if (method == "floor") {
      r = std::floor(x);
    } else {
      err(at, ErrorKind::InvalidArgument, "round method must be common, ceil or floor");
    }
    return Value(r / scale);
  }
  if (name == "attr") {
    const Value* a = args.get(0, "name");
    if (!a || !a->is_string()) err(at, ErrorKind::InvalidArgument, "attr needs a name");
    return get_attr(v, a->str());
  }
  if (name == "bool") return Value(v.truthy());
  return std::nullopt;
}

Value Interp::apply_filter(const std::string& name, const Value& v, const CallArgs& args, Scope& sc, const Node& at) {
  if (auto r = text_filter(name, v, args, sc, at)) return *r;
  if (auto r = sequence_filter(name, v, args, sc, at)) return *r;
  if (auto r = item_filter(name, v, args, sc, at)) return *r;
  if (auto r = scalar_filter(name, v, args, sc, at)) return *r;
  err(at, ErrorKind::Unsupported, "unknown filter '" + name + "'");
}

// ---- globals and the Template front -------------------------------------------------------


void add_globals(Scope& g) {
  g.set("range", make_builtin([](Interp& in, const CallArgs& a, Scope&, const Node& at) -> Value {
    for (auto& x : a.pos)
      if (!x.is_int()) err(at, ErrorKind::InvalidArgument, "range() needs integers, got " + describe_type(x));
    int64_t start = 0, stop = 0, step = 1;
    if (a.pos.size() == 1) stop = a.pos[0].as_int();
    else if (a.pos.size() == 2 || a.pos.size() == 3) {
      start = a.pos[0].as_int();
      stop = a.pos[1].as_int();
      if (a.pos.size() == 3) step = a.pos[2].as_int();
    } else {
      err(at, ErrorKind::InvalidArgument, "range() takes 1 to 3 integers");
    }
    if (step == 0) err(at, ErrorKind::InvalidArgument, "range() step must not be zero");
    double count = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step));
    if (count < 0) count = 0;
    if (count > static_cast<double>(in.limits().max_list_items) || count > static_cast<double>(in.limits().max_loop_iterations))
      err(at, ErrorKind::Capacity, "range() of " + js_number(count) + " items is above the limit");
    in.count_iterations(static_cast<uint64_t>(count), at);
    List out;
    auto n = static_cast<int64_t>(count);
    out.reserve(static_cast<size_t>(n));
    // start + i * step stays between start and stop, so it cannot overflow.
    for (int64_t i = 0; i < n; ++i) out.push_back(Value(static_cast<int64_t>(static_cast<__int128>(start) + static_cast<__int128>(i) * step)));
    return Value::list(std::move(out));
  }));
  g.set("namespace", make_builtin([](Interp& in, const CallArgs& a, Scope&, const Node& at) -> Value {
    Dict d;
    if (a.pos.size() > 1) err(at, ErrorKind::InvalidArgument, "namespace() takes at most one positional argument");
    if (a.pos.size() == 1) {
      if (!a.pos[0].is_mapping_like()) err(at, ErrorKind::InvalidArgument, "namespace() needs a dict, got " + describe_type(a.pos[0]));
      for (auto& kv : a.pos[0].dict_ref().items()) d.set(kv.first, kv.second);
    }
    for (auto& kv : a.kw) d.set(kv.first, kv.second);
    Value ns = Value::ns(std::move(d));
    in.track_namespace(ns);
    return ns;
  }));
  g.set("dict", make_builtin([](Interp&, const CallArgs& a, Scope&, const Node& at) -> Value {
    Dict d;
    for (auto& x : a.pos) {
      if (!x.is_mapping_like()) err(at, ErrorKind::InvalidArgument, "dict() needs a dict, got " + describe_type(x));
      for (auto& kv : x.dict_ref().items()) d.set(kv.first, kv.second);
    }
    for (auto& kv : a.kw) d.set(kv.first, kv.second);
    return Value::dict(std::move(d));
  }));
  g.set("raise_exception", make_builtin([](Interp&, const CallArgs& a, Scope&, const Node& at) -> Value {
    std::string msg = a.pos.empty() ? "raise_exception() called" : to_output(a.pos[0]);
    fail(ErrorKind::InvalidArgument, "chat template " + at.where() + ": raise_exception", msg);
  }));
  g.set("strftime_now", make_builtin([](Interp&, const CallArgs& a, Scope&, const Node& at) -> Value {
    if (a.pos.empty() || !a.pos[0].is_string()) err(at, ErrorKind::InvalidArgument, "strftime_now() needs a format string");
    const std::string& fmt = a.pos[0].str();
    if (fmt.size() > 256) err(at, ErrorKind::InvalidArgument, "strftime_now() format longer than 256 bytes");
    std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[2048];
    size_t n = fmt.empty() ? 0 : std::strftime(buf, sizeof(buf), fmt.c_str(), &tm);
    return Value(std::string(buf, n));
  }));
}


}  // namespace ptn::jinja
