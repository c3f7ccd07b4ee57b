// The interpreter: statements write into an output string, expressions evaluate to Values.
// Scoping follows @huggingface/jinja: a for loop has one scope for all its iterations, macros
// see the caller's variables, `{% if %}` opens no scope.
#include <algorithm>
#include <cmath>

#include "chat/jinja_interp.h"

namespace ptn::jinja {

Value Interp::get_attr(const Value& obj, const std::string& name) {
  switch (obj.type()) {
    case Type::Dict: {
      if (const Value* v = obj.dict_ref().find(name)) return *v;
      if (is_dict_method(name)) return Value::function(std::make_shared<MethodFn>(obj, name));
      return Value();
    }
    case Type::Namespace: {
      if (const Value* v = obj.dict_ref().find(name)) return *v;
      return Value();
    }
    case Type::List:
      if (name == "length") return Value(static_cast<int64_t>(obj.items().size()));
      return Value();
    case Type::String:
      if (name == "length") return Value(static_cast<int64_t>(utf8_length(obj.str())));
      if (is_str_method(name)) return Value::function(std::make_shared<MethodFn>(obj, name));
      return Value();
    default: return Value();
  }
}

Value Interp::get_item(const Value& obj, const Value& key) {
  if (obj.is_mapping_like()) {
    if (key.is_string()) return get_attr(obj, key.str());
    if (key.is_int() && obj.is_dict()) {
      if (const Value* v = obj.dict_ref().find(std::to_string(key.as_int()))) return *v;
    }
    return Value();
  }
  if (obj.is_list() || obj.is_string()) {
    if (key.is_string()) return get_attr(obj, key.str());
    if (!key.is_int() && !key.is_bool()) return Value();
    int64_t i = key.as_int();
    if (obj.is_list()) {
      auto n = static_cast<int64_t>(obj.items().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();
      return obj.items()[static_cast<size_t>(i)];
    }
    auto cs = utf8_chars(obj.str());
    auto n = static_cast<int64_t>(cs.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value();
    return Value(cs[static_cast<size_t>(i)]);
  }
  return Value();
}

CallArgs Interp::eval_args(const std::vector<Arg>& args, Scope& sc) {
  CallArgs out;
  for (auto& a : args) {
    if (a.spread == 1) {
      Value v = eval(*a.value, sc);
      if (!v.is_list()) err(*a.value, ErrorKind::InvalidArgument, "'*' needs a list, got " + describe_type(v));
      for (auto& x : v.items()) out.pos.push_back(x);
    } else if (a.spread == 0 && a.key.empty()) {
      out.pos.push_back(eval(*a.value, sc));
    }
  }
  for (auto& a : args) {
    if (a.spread == 2) {
      Value v = eval(*a.value, sc);
      if (!v.is_mapping_like()) err(*a.value, ErrorKind::InvalidArgument, "'**' needs a mapping, got " + describe_type(v));
      for (auto& kv : v.dict_ref().items()) out.kw.emplace_back(kv.first, kv.second);
    } else if (!a.key.empty()) {
      for (auto& kv : out.kw)
        if (kv.first == a.key) err(*a.value, ErrorKind::InvalidArgument, "keyword argument '" + a.key + "' given twice");
      out.kw.emplace_back(a.key, eval(*a.value, sc));
    }
  }
  return out;
}

Value Interp::eval_slice(const Node& n, Scope& sc) {
  Value obj = eval(*n.a[0], sc);
  int64_t part[3];
  bool given[3];
  for (int k = 0; k < 3; ++k) {
    given[k] = false;
    if (!n.a[static_cast<size_t>(k) + 1]) continue;
    Value v = eval(*n.a[static_cast<size_t>(k) + 1], sc);
    if (v.is_none() || v.is_undefined()) continue;
    if (!v.is_int()) err(n, ErrorKind::InvalidArgument, "slice bounds must be integers, got " + describe_type(v));
    part[k] = v.as_int();
    given[k] = true;
  }
  int64_t step = given[2] ? part[2] : 1;
  if (step == 0) err(n, ErrorKind::InvalidArgument, "slice step cannot be zero");
  std::vector<std::string> chars;
  int64_t len;
  if (obj.is_list()) {
    len = static_cast<int64_t>(obj.items().size());
  } else if (obj.is_string()) {
    chars = utf8_chars(obj.str());
    len = static_cast<int64_t>(chars.size());
  } else if (obj.is_undefined()) {
    return Value();
  } else {
    err(n, ErrorKind::InvalidArgument, "cannot slice a " + describe_type(obj));
  }
  auto clamp = [&](int64_t v, bool is_given, int64_t def, int64_t lo, int64_t hi) {
    if (!is_given) return def;
    if (v < 0) v += len;
    return std::clamp(v, lo, hi);
  };
  int64_t start, stop;
  if (step > 0) {
    start = clamp(given[0] ? part[0] : 0, given[0], 0, 0, len);
    stop = clamp(given[1] ? part[1] : 0, given[1], len, 0, len);
  } else {
    start = clamp(given[0] ? part[0] : 0, given[0], len - 1, -1, len - 1);
    stop = clamp(given[1] ? part[1] : 0, given[1], -1, -1, len - 1);
  }
  List out_list;
  std::string out_str;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (obj.is_list()) out_list.push_back(obj.items()[static_cast<size_t>(i)]);
    else out_str += chars[static_cast<size_t>(i)];
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  if (obj.is_list()) return Value::list(std::move(out_list));
  return Value(std::move(out_str));
}


Value Interp::eval_binary(const Node& n, const Value& l, const Value& r) {
  const std::string& op = n.name;
  if (op == "==") return Value(values_equal(l, r));
  if (op == "!=") return Value(!values_equal(l, r));
  if (op == "in") return Value(contains(r, l, n));
  if (op == "not in") return Value(!contains(r, l, n));
  if (op == "~") {
    std::string s = concat_text(l) + concat_text(r);
    check_string(s.size(), n);
    return Value(std::move(s));
  }
  auto numeric = [](const Value& v) { return v.is_number() || v.is_bool(); };
  if (numeric(l) && numeric(r)) {
    bool flt = l.is_float() || r.is_float();
    double x = l.is_float() ? l.as_float() : static_cast<double>(l.as_int());
    double y = r.is_float() ? r.as_float() : static_cast<double>(r.as_int());
    int64_t a = l.is_float() ? 0 : l.as_int(), b = r.is_float() ? 0 : r.as_int();
    if (op == "<") return Value(x < y);
    if (op == ">") return Value(x > y);
    if (op == "<=") return Value(x <= y);
    if (op == ">=") return Value(x >= y);
    if (op == "+" || op == "-" || op == "*") {
      if (!flt) {
        int64_t res;
        bool ovf = op == "+" ? __builtin_add_overflow(a, b, &res)
                   : op == "-" ? __builtin_sub_overflow(a, b, &res)
                               : __builtin_mul_overflow(a, b, &res);
        if (!ovf) return Value(res);
      }
      return Value(op == "+" ? x + y : op == "-" ? x - y : x * y);
    }
    if (op == "/") {
      if (y == 0) err(n, ErrorKind::InvalidArgument, "division by zero");
      return Value(x / y);
    }
    if (op == "//" || op == "%") {
      if (y == 0) err(n, ErrorKind::InvalidArgument, op == "//" ? "integer division by zero" : "modulo by zero");
      if (!flt && !(a == INT64_MIN && b == -1)) {
        int64_t q = a / b, m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) {
          --q;
          m += b;
        }
        return Value(op == "//" ? q : m);
      }
      double q = std::floor(x / y);
      return Value(op == "//" ? q : x - q * y);
    }
    if (op == "**") {
      if (x == 0 && y < 0) err(n, ErrorKind::InvalidArgument, "0 cannot be raised to a negative power");
      double res = std::pow(x, y);
      if (!std::isfinite(res)) err(n, ErrorKind::InvalidArgument, "'**' result is not a finite number");
      if (!flt && b >= 0 && std::fabs(res) < 9.0e15) return Value(static_cast<int64_t>(res));
      return Value(res);
    }
  }
  if (op == "+") {
    if (l.is_list() && r.is_list()) {
      check_list(l.items().size() + r.items().size(), n);
      List out = l.items();
      out.insert(out.end(), r.items().begin(), r.items().end());
      return Value::list(std::move(out));
    }
    if ((l.is_string() || r.is_string()) && !l.is_undefined() && !r.is_undefined() && !l.is_none() && !r.is_none()) {
      std::string s = concat_text(l) + concat_text(r);
      check_string(s.size(), n);
      return Value(std::move(s));
    }
  }
  if (op == "*" && (l.is_string() || l.is_list()) && r.is_int()) {
    int64_t times = std::max<int64_t>(0, r.as_int());
    if (l.is_string()) {
      if (times > 0 && l.str().size() > lim_.max_output_bytes / static_cast<uint64_t>(times)) check_string(SIZE_MAX, n);
      std::string s;
      for (int64_t i = 0; i < times; ++i) s += l.str();
      return Value(std::move(s));
    }
    if (times > 0 && l.items().size() > lim_.max_list_items / static_cast<uint64_t>(times)) check_list(SIZE_MAX, n);
    List out;
    for (int64_t i = 0; i < times; ++i) out.insert(out.end(), l.items().begin(), l.items().end());
    return Value::list(std::move(out));
  }
  if ((op == "<" || op == ">" || op == "<=" || op == ">=") && l.is_string() && r.is_string()) {
    int c = l.str().compare(r.str());
    return Value(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
  }
  err(n, ErrorKind::InvalidArgument,
      "operator '" + op + "' is not defined for " + describe_type(l) + " and " + describe_type(r));
}

Value Interp::eval_inner(const Node& n, Scope& sc) {
  switch (n.kind) {
    case NodeKind::Literal: return n.literal;
    case NodeKind::Name: {
      Value* v = sc.find(n.name);
      return v ? *v : Value();
    }
    case NodeKind::Attr: return get_attr(eval(*n.a[0], sc), n.name);
    case NodeKind::Index: {
      Value obj = eval(*n.a[0], sc);
      return get_item(obj, eval(*n.a[1], sc));
    }
    case NodeKind::Slice: return eval_slice(n, sc);
    case NodeKind::Call: {
      const Node& callee = *n.a[0];
      Value fn = eval(callee, sc);
      if (!fn.is_function()) {
        if (callee.kind == NodeKind::Name)
          err(n, fn.is_undefined() ? ErrorKind::Unsupported : ErrorKind::InvalidArgument,
              fn.is_undefined() ? "unknown function '" + callee.name + "'" : "'" + callee.name + "' is a " + describe_type(fn) + ", not a function");
        if (callee.kind == NodeKind::Attr) {
          Value obj = eval(*callee.a[0], sc);
          err(n, ErrorKind::Unsupported, "a " + describe_type(obj) + " has no method '" + callee.name + "'");
        }
        err(n, ErrorKind::InvalidArgument, "cannot call a value of type " + describe_type(fn));
      }
      CallArgs args = eval_args(n.args, sc);
      return fn.fn()->call(*this, args, sc, n);
    }
    case NodeKind::Filter: {
      Value operand = eval(*n.a[0], sc);
      return apply_filter(n.name, operand, eval_args(n.args, sc), sc, n);
    }
    case NodeKind::Test: {
      Value operand = eval(*n.a[0], sc);
      CallArgs args = eval_args(n.args, sc);
      bool r = apply_test(n.name, operand, args.pos, n);
      return Value(n.negate ? !r : r);
    }
    case NodeKind::Unary: {
      Value v = eval(*n.a[0], sc);
      if (n.name == "not") return Value(!v.truthy());
      if (v.is_float()) return Value(n.name == "-" ? -v.as_float() : v.as_float());
      if (v.is_int() || v.is_bool()) {
        int64_t i = v.as_int();
        if (n.name == "+") return Value(i);
        if (i == INT64_MIN) return Value(-static_cast<double>(i));
        return Value(-i);
      }
      err(n, ErrorKind::InvalidArgument, "unary '" + n.name + "' is not defined for " + describe_type(v));
    }
    case NodeKind::Binary: {
      Value l = eval(*n.a[0], sc);
      Value r = eval(*n.a[1], sc);
      return eval_binary(n, l, r);
    }
    case NodeKind::And: {
      Value l = eval(*n.a[0], sc);
      return l.truthy() ? eval(*n.a[1], sc) : l;
    }
    case NodeKind::Or: {
      Value l = eval(*n.a[0], sc);
      return l.truthy() ? l : eval(*n.a[1], sc);
    }
    case NodeKind::Ternary: {
      if (eval(*n.a[0], sc).truthy()) return eval(*n.a[1], sc);
      return n.a[2] ? eval(*n.a[2], sc) : Value();
    }
    case NodeKind::ListLit:
    case NodeKind::TupleLit: {
      List items;
      for (auto& e : n.a) items.push_back(eval(*e, sc));
      return Value::list(std::move(items), n.kind == NodeKind::TupleLit);
    }
    case NodeKind::DictLit: {
      Dict d;
      for (size_t i = 0; i + 1 < n.a.size(); i += 2) {
        Value k = eval(*n.a[i], sc);
        if (!k.is_string()) err(*n.a[i], ErrorKind::InvalidArgument, "dict keys must be strings, got " + describe_type(k));
        d.set(k.str(), eval(*n.a[i + 1], sc));
      }
      return Value::dict(std::move(d));
    }
    default: err(n, ErrorKind::Internal, "statement evaluated as an expression");
  }
}

Flow Interp::exec_inner(const Node& n, Scope& sc, std::string& out) {
  switch (n.kind) {
    case NodeKind::Text: emit(out, n.literal.str(), n); return Flow::Normal;
    case NodeKind::Output: emit(out, to_output(eval(*n.a[0], sc)), n); return Flow::Normal;
    case NodeKind::If: return exec_block(eval(*n.a[0], sc).truthy() ? n.body : n.alt, sc, out);
    case NodeKind::For: return exec_for(n, sc, out);
    case NodeKind::Set: exec_set(n, sc); return Flow::Normal;
    case NodeKind::Macro: sc.set(n.name, Value::function(std::make_shared<MacroFn>(&n))); return Flow::Normal;
    case NodeKind::CallBlock: {
      auto alive = std::make_shared<bool>(true);
      struct Kill {
        std::shared_ptr<bool> a;
        ~Kill() { *a = false; }
      } kill{alive};
      const Node& call = *n.a[0];
      Value fn = eval(*call.a[0], sc);
      if (!fn.is_function()) err(n, ErrorKind::InvalidArgument, "'{% call %}' needs a macro, '" + call.a[0]->name + "' is " + describe_type(fn));
      CallArgs args = eval_args(call.args, sc);
      Scope with_caller(&sc);
      with_caller.set("caller", Value::function(std::make_shared<CallerFn>(&n, &sc, alive)));
      emit(out, to_output(fn.fn()->call(*this, args, with_caller, n)), n);
      return Flow::Normal;
    }
    case NodeKind::FilterBlock: {
      std::string text = render_block(n.body, sc, n);
      const Node& f = *n.a[0];
      emit(out, to_output(apply_filter(f.name, Value(std::move(text)), eval_args(f.args, sc), sc, f)), n);
      return Flow::Normal;
    }
    case NodeKind::Break: return Flow::Break;
    case NodeKind::Continue: return Flow::Continue;
    default: err(n, ErrorKind::Internal, "expression executed as a statement");
  }
}

static void bind_targets(const Node& n, Scope& sc, const Value& v) {
  if (!n.tuple_target) {
    sc.set(n.targets[0], v);
    return;
  }
  List chars;
  const List* items = nullptr;
  if (v.is_list()) {
    items = &v.items();
  } else if (v.is_string()) {
    for (auto& c : utf8_chars(v.str())) chars.push_back(Value(c));
    items = &chars;
  } else {
    err(n, ErrorKind::InvalidArgument, "cannot unpack a " + describe_type(v) + " into " + std::to_string(n.targets.size()) + " names");
  }
  if (items->size() != n.targets.size())
    err(n, ErrorKind::InvalidArgument,
        "cannot unpack " + std::to_string(items->size()) + " values into " + std::to_string(n.targets.size()) + " names");
  for (size_t i = 0; i < n.targets.size(); ++i) sc.set(n.targets[i], (*items)[i]);
}

void Interp::exec_set(const Node& n, Scope& sc) {
  Value v = n.a[1] ? eval(*n.a[1], sc) : Value(render_block(n.body, sc, n));
  if (n.a[0]) {
    Value obj = eval(*n.a[0], sc);
    if (!obj.is_namespace())
      err(n, ErrorKind::InvalidArgument, "'{% set x.attr %}' only works on a namespace(), not on a " + describe_type(obj));
    obj.dict_ref().set(n.name, std::move(v));
    return;
  }
  bind_targets(n, sc, v);
}

Flow Interp::exec_for(const Node& n, Scope& sc, std::string& out) {
  Scope loop_scope(&sc);
  Value iterable = eval(*n.a[0], loop_scope);
  List items;
  switch (iterable.type()) {
    case Type::List: items = iterable.items(); break;
    case Type::Dict:
      for (auto& kv : iterable.dict_ref().items()) items.push_back(Value(kv.first));
      break;
    case Type::String:
      for (auto& c : utf8_chars(iterable.str())) items.push_back(Value(c));
      break;
    case Type::Undefined: break;
    default: err(*n.a[0], ErrorKind::InvalidArgument, "'{% for %}' cannot iterate over a " + describe_type(iterable));
  }
  if (n.a[1]) {  // loop filter: `for x in xs if cond`
    List kept;
    for (auto& item : items) {
      count_iterations(1, n);
      Scope test_scope(&loop_scope);
      bind_targets(n, test_scope, item);
      if (eval(*n.a[1], test_scope).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec_block(n.alt, loop_scope, out);
  auto len = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < len; ++i) {
    count_iterations(1, n);
    Dict loop;
    loop.set("index", Value(i + 1));
    loop.set("index0", Value(i));
    loop.set("revindex", Value(len - i));
    loop.set("revindex0", Value(len - i - 1));
    loop.set("first", Value(i == 0));
    loop.set("last", Value(i == len - 1));
    loop.set("length", Value(len));
    loop.set("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value());
    loop.set("nextitem", i + 1 < len ? items[static_cast<size_t>(i + 1)] : Value());
    loop.set("depth", Value(int64_t{1}));
    loop.set("depth0", Value(int64_t{0}));
    loop.set("cycle", make_builtin([i](Interp&, const CallArgs& args, Scope&, const Node& at) -> Value {
      if (args.pos.empty()) err(at, ErrorKind::InvalidArgument, "loop.cycle() needs at least one value");
      return args.pos[static_cast<size_t>(i) % args.pos.size()];
    }));
    loop_scope.set("loop", Value::dict(std::move(loop)));
    bind_targets(n, loop_scope, items[static_cast<size_t>(i)]);
    Flow f = exec_block(n.body, loop_scope, out);
    if (f == Flow::Break) break;
  }
  return Flow::Normal;
}

static void bind_params(Interp& in, const std::vector<Param>& params, const CallArgs& args, Scope& scope,
                        const std::string& what, const Node& at) {
  std::vector<bool> bound(params.size(), false);
  for (size_t i = 0; i < params.size() && i < args.pos.size(); ++i) {
    scope.set(params[i].name, args.pos[i]);
    bound[i] = true;
  }
  Dict extra_kw;
  for (auto& [k, v] : args.kw) {
    bool used = false;
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].name != k) continue;
      if (bound[i]) err(at, ErrorKind::InvalidArgument, what + " got two values for '" + k + "'");
      scope.set(k, v);
      bound[i] = true;
      used = true;
    }
    if (!used) extra_kw.set(k, v);
  }
  for (size_t i = 0; i < params.size(); ++i)
    if (!bound[i]) scope.set(params[i].name, Value());
  List varargs;
  for (size_t i = params.size(); i < args.pos.size(); ++i) varargs.push_back(args.pos[i]);
  scope.set("varargs", Value::list(std::move(varargs)));
  scope.set("kwargs", Value::dict(std::move(extra_kw)));
  for (size_t i = 0; i < params.size(); ++i)
    if (!bound[i] && params[i].default_value) scope.set(params[i].name, in.eval(*params[i].default_value, scope));
}

Value Interp::call_macro(const Node& macro, const CallArgs& args, Scope& call_scope, const Node& at) {
  DepthGuard g(*this, at);
  Scope scope(&call_scope);
  bind_params(*this, macro.params, args, scope, "macro '" + macro.name + "'", at);
  return Value(render_block(macro.body, scope, macro));
}

Value Interp::call_caller(const Node& block, Scope& def_scope, const CallArgs& args, const Node& at) {
  DepthGuard g(*this, at);
  Scope scope(&def_scope);
  bind_params(*this, block.params, args, scope, "caller()", at);
  return Value(render_block(block.body, scope, block));
}

Template::Template(const std::string& source, Limits limits) : limits_(limits), body_(parse_template(source, limits_)) {}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const Value& context) const {
  if (!context.is_mapping_like() && !context.is_undefined() && !context.is_none())
    fail(ErrorKind::InvalidArgument, "chat template", "the render context must be a dict of variables");
  Scope globals(nullptr);
  add_globals(globals);
  Scope vars(&globals);
  if (context.is_mapping_like())
    for (auto& [k, v] : context.dict_ref().items()) vars.set(k, v);
  Interp in(limits_);
  std::string out;
  in.run(body_, vars, out);
  return out;
}

std::string Template::render(const nlohmann::ordered_json& context) const {
  if (!context.is_object() && !context.is_null())
    fail(ErrorKind::InvalidArgument, "chat template", "the render context must be a JSON object");
  return render(from_json(context));
}

}  // namespace ptn::jinja
