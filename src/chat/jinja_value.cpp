#include "chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace ptn::jinja {

const Value* Dict::find(const std::string& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

Value* Dict::find(const std::string& key) {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

void Dict::set(const std::string& key, Value v) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    items_[it->second].second = std::move(v);
    return;
  }
  index_.emplace(key, items_.size());
  items_.emplace_back(key, std::move(v));
}

bool Dict::erase(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(it->second));
  index_.clear();
  for (size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first, i);
  return true;
}

const char* type_name(Type t) {
  switch (t) {
    case Type::Undefined: return "undefined";
    case Type::None: return "none";
    case Type::Bool: return "boolean";
    case Type::Int: return "integer";
    case Type::Float: return "float";
    case Type::String: return "string";
    case Type::List: return "list";
    case Type::Dict: return "dict";
    case Type::Namespace: return "namespace";
    case Type::Function: return "callable";
  }
  return "?";
}

// Containers are freed without recursion: a dying list or dict moves its elements to a
// per-thread queue that the outermost deleter drains, so a value nested a million levels deep
// (which a template can build in a loop) cannot overflow the stack when it is released.
namespace {
thread_local bool g_draining = false;
thread_local std::vector<Value>* g_graveyard = nullptr;

template <class Container, class MoveOut>
void release(Container* c, MoveOut move_out) {
  std::vector<Value> local;
  bool outermost = !g_draining;
  if (outermost) {
    g_draining = true;
    g_graveyard = &local;
  }
  move_out(*c, *g_graveyard);
  delete c;
  if (!outermost) return;
  while (!local.empty()) {
    Value v = std::move(local.back());
    local.pop_back();
  }  // v dies here; its own elements are queued, not freed recursively
  g_graveyard = nullptr;
  g_draining = false;
}
}  // namespace

Value Value::list(List items, bool tuple) {
  Value v;
  v.type_ = Type::List;
  v.tuple_ = tuple;
  v.list_ = std::shared_ptr<List>(new List(std::move(items)), [](List* l) {
    release(l, [](List& c, std::vector<Value>& out) {
      for (auto& x : c)
        if (x.is_list() || x.is_mapping_like()) out.push_back(std::move(x));
    });
  });
  return v;
}

Value Value::dict(Dict d) {
  Value v;
  v.type_ = Type::Dict;
  v.dict_ = std::shared_ptr<Dict>(new Dict(std::move(d)), [](Dict* dd) {
    release(dd, [](Dict& c, std::vector<Value>& out) { c.drain_containers(out); });
  });
  return v;
}

void Dict::drain_containers(std::vector<Value>& out) {
  for (auto& kv : items_)
    if (kv.second.is_list() || kv.second.is_mapping_like()) out.push_back(std::move(kv.second));
}

void Dict::clear() {
  items_.clear();
  index_.clear();
}

Value Value::ns(Dict d) {
  Value v = dict(std::move(d));
  v.type_ = Type::Namespace;
  return v;
}

Value Value::function(std::shared_ptr<Callable> fn) {
  Value v;
  v.type_ = Type::Function;
  v.fn_ = std::move(fn);
  return v;
}

const void* Value::identity() const {
  switch (type_) {
    case Type::List: return list_.get();
    case Type::Dict:
    case Type::Namespace: return dict_.get();
    case Type::Function: return fn_.get();
    case Type::String: return s_.get();
    default: return nullptr;
  }
}

bool Value::truthy() const {
  switch (type_) {
    case Type::Undefined:
    case Type::None: return false;
    case Type::Bool:
    case Type::Int: return i_ != 0;
    case Type::Float: return f_ != 0 && !std::isnan(f_);
    case Type::String: return !s_->empty();
    case Type::List: return !list_->empty();
    case Type::Dict: return dict_->size() > 0;
    case Type::Namespace:
    case Type::Function: return true;
  }
  return false;
}

std::string js_number(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  if (d == 0) return "0";
  std::string out;
  if (d < 0) {
    out = "-";
    d = -d;
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // d.ddddde+XX
  size_t epos = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < epos; ++i)
    if (sci[i] != '.') digits += sci[i];
  int exp10 = std::atoi(sci.c_str() + epos + 1);
  int k = static_cast<int>(digits.size());
  int n = exp10 + 1;  // position of the decimal point relative to the digits
  if (k <= n && n <= 21) {
    out += digits + std::string(static_cast<size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, static_cast<size_t>(n)) + "." + digits.substr(static_cast<size_t>(n));
  } else if (-6 < n && n <= 0) {
    out += "0." + std::string(static_cast<size_t>(-n), '0') + digits;
  } else {
    int e = n - 1;
    out += digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += e < 0 ? "e-" : "e+";
    out += std::to_string(std::abs(e));
  }
  return out;
}

static std::string float_output(double d) {
  if (d == 0 && std::signbit(d)) return "-0.0";
  if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 1e21) return js_number(d) + ".0";
  return js_number(d);
}

std::string to_output(const Value& v) {
  switch (v.type()) {
    case Type::Undefined:
    case Type::None: return "";
    case Type::Bool: return v.as_bool() ? "true" : "false";
    case Type::Int: return std::to_string(v.as_int());
    case Type::Float: return float_output(v.as_float());
    case Type::String: return v.str();
    case Type::List:
    case Type::Dict:
    case Type::Namespace: {
      JsonOptions o;
      o.undefined_as_null = false;
      return to_json(v, o);
    }
    case Type::Function: return "<function>";
  }
  return "";
}

// Decodes one UTF-8 code point at s[i]; invalid bytes come back as themselves (one byte).
static uint32_t decode_utf8(const std::string& s, size_t& i) {
  auto c = static_cast<unsigned char>(s[i]);
  int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || i + static_cast<size_t>(len) > s.size()) {
    ++i;
    return c;
  }
  uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
  for (int k = 1; k < len; ++k) {
    auto cc = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
    if ((cc & 0xc0) != 0x80) {
      ++i;
      return c;
    }
    cp = (cp << 6) | (cc & 0x3f);
  }
  i += static_cast<size_t>(len);
  return cp;
}

std::string json_quote(const std::string& s, bool ensure_ascii) {
  std::string out = "\"";
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80 && ensure_ascii) {
      uint32_t cp = decode_utf8(s, i);
      if (cp >= 0x10000) {
        uint32_t v = cp - 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
      } else {
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      }
      out += buf;
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || (c == 0x7f && ensure_ascii)) {
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

static void json_write(const Value& v, const JsonOptions& opt, int depth, int max_depth,
                       std::string& out) {
  if (depth > max_depth)
    fail(ErrorKind::Capacity, "tojson", "value nests deeper than " + std::to_string(max_depth));
  bool pretty = opt.indent > 0;
  std::string item_sep = opt.item_sep ? *opt.item_sep : (pretty ? "," : ", ");
  std::string key_sep = opt.key_sep ? *opt.key_sep : ": ";
  std::string pad_in, pad_out;
  if (pretty) {
    pad_out = "\n" + std::string(static_cast<size_t>(opt.indent) * static_cast<size_t>(depth), ' ');
    pad_in = pad_out + std::string(static_cast<size_t>(opt.indent), ' ');
  }
  switch (v.type()) {
    case Type::Undefined: out += opt.undefined_as_null ? "null" : "undefined"; return;
    case Type::None: out += "null"; return;
    case Type::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Type::Int: out += std::to_string(v.as_int()); return;
    case Type::Float: out += std::isfinite(v.as_float()) ? js_number(v.as_float()) : "null"; return;
    case Type::String: out += json_quote(v.str(), opt.ensure_ascii); return;
    case Type::List: {
      const List& l = v.items();
      out += '[';
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out += item_sep;
        if (pretty) out += pad_in;
        json_write(l[i], opt, depth + 1, max_depth, out);
      }
      if (pretty && !l.empty()) out += pad_out;
      out += ']';
      return;
    }
    case Type::Dict:
    case Type::Namespace: {
      std::vector<const std::pair<std::string, Value>*> entries;
      for (auto& kv : v.dict_ref().items()) entries.push_back(&kv);
      if (opt.sort_keys)
        std::stable_sort(entries.begin(), entries.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += item_sep;
        if (pretty) out += pad_in;
        out += json_quote(entries[i]->first, opt.ensure_ascii);
        out += key_sep;
        json_write(entries[i]->second, opt, depth + 1, max_depth, out);
      }
      if (pretty && !entries.empty()) out += pad_out;
      out += '}';
      return;
    }
    case Type::Function:
      fail(ErrorKind::InvalidArgument, "tojson", "cannot convert a callable to JSON");
  }
}

std::string to_json(const Value& v, const JsonOptions& opt, int max_depth) {
  std::string out;
  json_write(v, opt, 0, max_depth, out);
  return out;
}

// "0", "7", "123" up to 2^32-2: the keys a JavaScript object lists first, in numeric order.
static bool is_array_index(const std::string& k, uint64_t& value) {
  if (k.empty() || k.size() > 10) return false;
  if (k.size() > 1 && k[0] == '0') return false;
  value = 0;
  for (char c : k) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return value <= 4294967294ULL;
}

static Value convert(const nlohmann::ordered_json& j, int depth, int max_depth) {
  if (depth > max_depth)
    fail(ErrorKind::Capacity, "chat template input",
         "JSON nests deeper than " + std::to_string(max_depth) + " levels");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: {
      double d = j.get<double>();
      if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.2e18)
        return Value(static_cast<int64_t>(d));
      return Value(d);
    }
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List l;
      l.reserve(j.size());
      for (auto& e : j) l.push_back(convert(e, depth + 1, max_depth));
      return Value::list(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      std::vector<std::pair<uint64_t, const std::string*>> numeric;
      for (auto it = j.begin(); it != j.end(); ++it) {
        uint64_t idx;
        if (is_array_index(it.key(), idx)) numeric.emplace_back(idx, &it.key());
      }
      std::sort(numeric.begin(), numeric.end());
      Dict d;
      for (auto& [idx, key] : numeric) d.set(*key, convert(j.at(*key), depth + 1, max_depth));
      for (auto it = j.begin(); it != j.end(); ++it) {
        uint64_t idx;
        if (!is_array_index(it.key(), idx)) d.set(it.key(), convert(it.value(), depth + 1, max_depth));
      }
      return Value::dict(std::move(d));
    }
    default:
      fail(ErrorKind::Unsupported, "chat template input", "binary JSON values are not supported");
  }
}

Value from_json(const nlohmann::ordered_json& j, int max_depth) { return convert(j, 0, max_depth); }

bool values_equal(const Value& a, const Value& b, int depth) {
  if (depth > 256) fail(ErrorKind::Capacity, "==", "values nest too deep to compare");
  bool a_nil = a.is_undefined() || a.is_none();
  bool b_nil = b.is_undefined() || b.is_none();
  if (a_nil || b_nil) return a_nil && b_nil;
  auto numeric = [](const Value& v) { return v.is_number() || v.is_bool(); };
  if (numeric(a) && numeric(b)) {
    if (a.is_float() || b.is_float()) {
      double x = a.is_float() ? a.as_float() : static_cast<double>(a.as_int());
      double y = b.is_float() ? b.as_float() : static_cast<double>(b.as_int());
      return x == y;
    }
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Type::String: return a.str() == b.str();
    case Type::List: {
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i)
        if (!values_equal(a.items()[i], b.items()[i], depth + 1)) return false;
      return true;
    }
    case Type::Dict: {
      if (a.dict_ref().size() != b.dict_ref().size()) return false;
      for (auto& [k, v] : a.dict_ref().items()) {
        const Value* o = b.dict_ref().find(k);
        if (!o || !values_equal(v, *o, depth + 1)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    decode_utf8(s, i);
    out.emplace_back(s, start, i - start);
  }
  return out;
}

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    decode_utf8(s, i);
    ++n;
  }
  return n;
}

}  // namespace ptn::jinja
