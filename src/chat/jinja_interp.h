// The interpreter's internals, shared by jinja_eval.cpp (statements and expressions) and
// jinja_builtins.cpp (filters, tests, methods, global functions). Not a public header.
#pragma once
#include <optional>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "chat/jinja.h"
#include "chat/jinja_ast.h"
#include "core/error.h"

namespace ptn::jinja {

struct Scope {
  Scope* parent = nullptr;
  std::vector<std::pair<std::string, Value>> vars;

  explicit Scope(Scope* p) : parent(p) {}
  Value* find(const std::string& name) {
    for (Scope* s = this; s; s = s->parent)
      for (auto& kv : s->vars)
        if (kv.first == name) return &kv.second;
    return nullptr;
  }
  void set(const std::string& name, Value v) {
    for (auto& kv : vars)
      if (kv.first == name) {
        kv.second = std::move(v);
        return;
      }
    vars.emplace_back(name, std::move(v));
  }
};

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;

  // The argument at position `i` or named `name` (nullptr when absent).
  const Value* get(size_t i, const char* name) const {
    if (i < pos.size()) return &pos[i];
    for (auto& kv : kw)
      if (kv.first == name) return &kv.second;
    return nullptr;
  }
};

class Interp;

struct Callable {
  virtual ~Callable() = default;
  virtual Value call(Interp& in, const CallArgs& args, Scope& call_scope, const Node& at) = 0;
};

enum class Flow { Normal, Break, Continue };

[[noreturn]] inline void err(const Node& at, ErrorKind kind, const std::string& msg) {
  fail(kind, "chat template " + at.where(), msg);
}
inline std::string describe_type(const Value& v) { return type_name(v.type()); }

// Text helpers with Python's semantics (jinja_builtins.cpp).
size_t ws_len_at(const std::string& s, size_t i);  // bytes of the whitespace character at s[i], 0 if none
std::string strip_ws(const std::string& s, bool left, bool right);
std::string join_text(const Value& v);    // an item as `join` writes it
std::string concat_text(const Value& v);  // an operand as `~` and string `+` write it
// Orders two values for sort/dictsort/min/max: numbers with numbers, strings with strings.
int compare_values(const Value& a, const Value& b, bool case_sensitive, const Node& at);
// `item in container` for strings, lists and dicts (false for an undefined container).
bool contains(const Value& container, const Value& item, const Node& at);

class Interp {
 public:
  explicit Interp(const Limits& lim) : lim_(lim) {}

  void run(const std::vector<NodePtr>& body, Scope& sc, std::string& out) {
    Flow f = exec_block(body, sc, out);
    if (f != Flow::Normal) fail(ErrorKind::Corrupt, "chat template", "'{% break %}' or '{% continue %}' outside a loop");
  }

  const Limits& limits() const { return lim_; }

  void emit(std::string& out, const std::string& s, const Node& at) {
    if (out.size() + s.size() > lim_.max_output_bytes)
      err(at, ErrorKind::Capacity, "rendered text exceeds " + std::to_string(lim_.max_output_bytes) + " bytes");
    out += s;
  }

  void count_iterations(uint64_t n, const Node& at) {
    iterations_ += n;
    if (iterations_ > lim_.max_loop_iterations)
      err(at, ErrorKind::Capacity,
          "more than " + std::to_string(lim_.max_loop_iterations) + " loop iterations (or range items) in one render");
  }

  void check_list(size_t n, const Node& at) {
    if (n > lim_.max_list_items)
      err(at, ErrorKind::Capacity, "a list would hold more than " + std::to_string(lim_.max_list_items) + " items");
  }
  void check_string(size_t n, const Node& at) {
    if (n > lim_.max_output_bytes)
      err(at, ErrorKind::Capacity, "a string would exceed " + std::to_string(lim_.max_output_bytes) + " bytes");
  }

  struct NestGuard {
    Interp& in;
    NestGuard(Interp& i, const Node& at) : in(i) {
      if (++in.nest_ > in.lim_.max_eval_depth)
        err(at, ErrorKind::Capacity,
            "evaluation nests deeper than " + std::to_string(in.lim_.max_eval_depth) + " levels");
    }
    ~NestGuard() { --in.nest_; }
  };

  struct DepthGuard {
    Interp& in;
    DepthGuard(Interp& i, const Node& at) : in(i) {
      if (++in.call_depth_ > in.lim_.max_call_depth)
        err(at, ErrorKind::Capacity,
            "macro calls nest deeper than " + std::to_string(in.lim_.max_call_depth) + " (runaway recursion?)");
    }
    ~DepthGuard() { --in.call_depth_; }
  };

  Flow exec_block(const std::vector<NodePtr>& body, Scope& sc, std::string& out) {
    for (auto& n : body) {
      Flow f = exec(*n, sc, out);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  std::string render_block(const std::vector<NodePtr>& body, Scope& sc, const Node& at) {
    std::string out;
    Flow f = exec_block(body, sc, out);
    if (f != Flow::Normal) err(at, ErrorKind::Corrupt, "'{% break %}' or '{% continue %}' outside a loop");
    return out;
  }

  Value call_macro(const Node& macro, const CallArgs& args, Scope& call_scope, const Node& at);
  Value call_caller(const Node& block, Scope& def_scope, const CallArgs& args, const Node& at);
  Value call_value(const Value& fn, const CallArgs& args, Scope& sc, const Node& at) {
    if (!fn.is_function()) err(at, ErrorKind::InvalidArgument, "cannot call a value of type " + describe_type(fn));
    return fn.fn()->call(*this, args, sc, at);
  }

  Value eval(const Node& n, Scope& sc) {
    NestGuard g(*this, n);
    return eval_inner(n, sc);
  }
  // Namespaces are the only mutable containers, so the only way to build a reference cycle;
  // they are emptied when the render ends so that no cycle outlives it.
  void track_namespace(const Value& ns) {
    if (namespaces_.size() >= lim_.max_list_items)
      fail(ErrorKind::Capacity, "chat template", "too many namespace() objects");
    namespaces_.push_back(ns);
  }
  ~Interp() {
    for (auto& ns : namespaces_) ns.dict_ref().clear();
  }
  Value apply_filter(const std::string& name, const Value& operand, const CallArgs& args, Scope& sc, const Node& at);
  [[noreturn]] void filter_type_error(const std::string& name, const Value& v, const char* expect, const Node& at);
  std::optional<Value> text_filter(const std::string& name, const Value& v, const CallArgs& args, Scope& sc, const Node& at);
  std::optional<Value> sequence_filter(const std::string& name, const Value& v, const CallArgs& args, Scope& sc, const Node& at);
  std::optional<Value> item_filter(const std::string& name, const Value& v, const CallArgs& args, Scope& sc, const Node& at);
  std::optional<Value> scalar_filter(const std::string& name, const Value& v, const CallArgs& args, Scope& sc, const Node& at);
  bool apply_test(const std::string& name, const Value& v, const std::vector<Value>& args, const Node& at);
  Value call_method(const Value& self, const std::string& name, const CallArgs& args, const Node& at);
  std::optional<Value> dict_method(const Value& self, const std::string& name, const CallArgs& args, const Node& at);
  std::optional<Value> string_method(const Value& self, const std::string& name, const CallArgs& args, const Node& at);

 private:
  Flow exec(const Node& n, Scope& sc, std::string& out) {
    NestGuard g(*this, n);
    return exec_inner(n, sc, out);
  }
  Value eval_inner(const Node& n, Scope& sc);
  Flow exec_inner(const Node& n, Scope& sc, std::string& out);
  Flow exec_for(const Node& n, Scope& sc, std::string& out);
  void exec_set(const Node& n, Scope& sc);
  CallArgs eval_args(const std::vector<Arg>& args, Scope& sc);
  Value get_attr(const Value& obj, const std::string& name);
  Value get_item(const Value& obj, const Value& key);
  Value eval_binary(const Node& n, const Value& l, const Value& r);
  Value eval_slice(const Node& n, Scope& sc);

  const Limits& lim_;
  uint64_t iterations_ = 0;
  int call_depth_ = 0;
  int nest_ = 0;
  std::vector<Value> namespaces_;
};


struct BuiltinFn : Callable {
  using Fn = std::function<Value(Interp&, const CallArgs&, Scope&, const Node&)>;
  Fn fn;
  explicit BuiltinFn(Fn f) : fn(std::move(f)) {}
  Value call(Interp& in, const CallArgs& args, Scope& sc, const Node& at) override { return fn(in, args, sc, at); }
};

struct MethodFn : Callable {
  Value self;
  std::string name;
  MethodFn(Value s, std::string n) : self(std::move(s)), name(std::move(n)) {}
  Value call(Interp& in, const CallArgs& args, Scope&, const Node& at) override {
    return in.call_method(self, name, args, at);
  }
};

struct MacroFn : Callable {
  const Node* macro;
  explicit MacroFn(const Node* m) : macro(m) {}
  Value call(Interp& in, const CallArgs& args, Scope& sc, const Node& at) override {
    return in.call_macro(*macro, args, sc, at);
  }
};

struct CallerFn : Callable {
  const Node* block;
  Scope* def_scope;
  std::shared_ptr<bool> alive;
  CallerFn(const Node* b, Scope* s, std::shared_ptr<bool> a) : block(b), def_scope(s), alive(std::move(a)) {}
  Value call(Interp& in, const CallArgs& args, Scope&, const Node& at) override {
    if (!*alive) err(at, ErrorKind::InvalidArgument, "caller() used after its '{% call %}' block ended");
    return in.call_caller(*block, *def_scope, args, at);
  }
};

inline Value make_builtin(BuiltinFn::Fn f) { return Value::function(std::make_shared<BuiltinFn>(std::move(f))); }

inline bool is_dict_method(const std::string& n) { return n == "get" || n == "items" || n == "keys" || n == "values" || n == "dictsort"; }
inline bool is_str_method(const std::string& n) {
  static const char* names[] = {"upper", "lower", "strip", "lstrip", "rstrip", "title", "capitalize",
                                "startswith", "endswith", "split", "replace", "find", "count", "join",
                                "splitlines", "isdigit", "isalpha", "isspace", "format"};
  for (const char* m : names)
    if (n == m) return true;
  return false;
}


// Adds range, namespace, dict, raise_exception and strftime_now to the global scope.
void add_globals(Scope& g);

}  // namespace ptn::jinja
