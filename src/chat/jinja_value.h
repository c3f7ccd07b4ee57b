// Values of the Jinja engine: undefined, none, bool, int, float, string, list (or tuple),
// dict, namespace and callable. Lists, dicts and namespaces have reference semantics (as in
// Python and @huggingface/jinja): copies of a Value share the container.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ptn::jinja {

class Value;
using List = std::vector<Value>;

// A dict keeps insertion order (what the templates see when they iterate or call tojson).
class Dict {
 public:
  const Value* find(const std::string& key) const;
  Value* find(const std::string& key);
  void set(const std::string& key, Value v);
  bool erase(const std::string& key);
  size_t size() const;  // defined below Value (clang needs Value complete to instantiate it)
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }
  void clear();
  // Moves the list/dict values out (used to free nested values without recursion).
  void drain_containers(std::vector<Value>& out);

 private:
  std::vector<std::pair<std::string, Value>> items_;
  std::unordered_map<std::string, size_t> index_;
};

struct Callable;  // defined by the interpreter (jinja_eval.cpp)

enum class Type { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Function };
const char* type_name(Type t);

class Value {
 public:
  Value() = default;  // undefined
  static Value none() { Value v; v.type_ = Type::None; return v; }
  Value(bool b) : type_(Type::Bool), i_(b) {}
  Value(int v) : type_(Type::Int), i_(v) {}
  Value(int64_t v) : type_(Type::Int), i_(v) {}
  Value(double v) : type_(Type::Float), f_(v) {}
  Value(std::string s) : type_(Type::String), s_(std::make_shared<std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  static Value list(List items = {}, bool tuple = false);
  static Value dict(Dict d = {});
  static Value ns(Dict d = {});
  static Value function(std::shared_ptr<Callable> fn);

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::Undefined; }
  bool is_none() const { return type_ == Type::None; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_int() const { return type_ == Type::Int; }
  bool is_float() const { return type_ == Type::Float; }
  bool is_number() const { return type_ == Type::Int || type_ == Type::Float; }
  bool is_string() const { return type_ == Type::String; }
  bool is_list() const { return type_ == Type::List; }
  bool is_tuple() const { return type_ == Type::List && tuple_; }
  bool is_dict() const { return type_ == Type::Dict; }
  bool is_namespace() const { return type_ == Type::Namespace; }
  bool is_mapping_like() const { return type_ == Type::Dict || type_ == Type::Namespace; }
  bool is_function() const { return type_ == Type::Function; }

  bool as_bool() const { return i_ != 0; }
  int64_t as_int() const { return i_; }
  double as_float() const { return f_; }
  double as_number() const { return type_ == Type::Float ? f_ : static_cast<double>(i_); }
  const std::string& str() const { return *s_; }
  List& items() const { return *list_; }
  Dict& dict_ref() const { return *dict_; }
  const std::shared_ptr<Callable>& fn() const { return fn_; }
  // Identity of a container (for cycle-free checks and `is sameas`).
  const void* identity() const;

  // Python-like truthiness: empty string/list/dict, 0, none and undefined are false.
  bool truthy() const;

 private:
  Type type_ = Type::Undefined;
  bool tuple_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<std::string> s_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Callable> fn_;
};

inline size_t Dict::size() const { return items_.size(); }

// How a value prints inside {{ }}, as @huggingface/jinja prints it: none and undefined as "",
// booleans as true/false, floats with at least one decimal ("1.0"), lists and dicts as JSON.
std::string to_output(const Value& v);
// A number as JavaScript's Number#toString writes it (shortest round trip), e.g. 0.1, 1e-7, 1e+21.
std::string js_number(double d);

struct JsonOptions {
  int indent = -1;           // < 0: single line with ", " and ": "; >= 0: newline + indent spaces
  bool sort_keys = false;
  bool ensure_ascii = false;
  const std::string* item_sep = nullptr;  // overrides (tojson(separators=(a, b)))
  const std::string* key_sep = nullptr;
  bool undefined_as_null = true;  // false: undefined prints as `undefined` (list/dict printing)
};
// JSON text of a value as the `tojson` filter writes it; throws ptn::Error on a callable or a
// structure deeper than `max_depth`.
std::string to_json(const Value& v, const JsonOptions& opt, int max_depth = 512);
// JSON string literal (JSON.stringify of a string): escapes " \ and control characters only.
std::string json_quote(const std::string& s, bool ensure_ascii = false);

// Input conversion. Dict keys that look like array indices ("0", "12") come first in ascending
// order, then the other keys in document order: how a JavaScript object (and so
// @huggingface/jinja) orders them. Integral floats become ints, as in JavaScript. Throws
// ptn::Error when the input nests deeper than max_depth.
Value from_json(const nlohmann::ordered_json& j, int max_depth = 256);

// Equality as the templates use it (==, in, unique, equalto): numbers by value (bool counts as
// 0/1), strings by bytes, none == undefined, containers element-wise.
bool values_equal(const Value& a, const Value& b, int depth = 0);

// UTF-8 helpers: split into code points (each a string), count them.
std::vector<std::string> utf8_chars(const std::string& s);
size_t utf8_length(const std::string& s);

}  // namespace ptn::jinja
