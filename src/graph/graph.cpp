#include "graph/graph.h"

#include "core/error.h"

namespace ptn {

namespace {
struct OpInfo {
  OpType op;
  const char* name;
};
constexpr OpInfo kOps[] = {
    {OpType::Embedding, "embedding"},
    {OpType::RMSNorm, "rms_norm"},
    {OpType::Linear, "linear"},
    {OpType::Rope, "rope"},
    {OpType::UpdateAndAttend, "update_and_attend"},
    {OpType::Add, "add"},
    {OpType::Mul, "mul"},
    {OpType::Scale, "scale"},
    {OpType::Softcap, "softcap"},
    {OpType::SwiGLU, "swiglu"},
    {OpType::GeGLU, "geglu"},
    {OpType::SelectRows, "select_rows"},
    {OpType::CacheWrite, "cache_write"},
    {OpType::StaticAttention, "static_attention"},
    {OpType::AttnTemperature, "attn_temperature"},
    {OpType::MoeFfn, "moe_ffn"},
    {OpType::LayerNorm, "layer_norm"},
    {OpType::Gelu, "gelu"},
    {OpType::QueryTemperature, "query_temperature"},
    {OpType::Slice, "slice"},
    {OpType::Concat, "concat"},
    {OpType::HeadLinear, "head_linear"},
};

const char* kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::Input: return "input";
    case ValueKind::Activation: return "activation";
    case ValueKind::Buffer: return "buffer";
  }
  return "?";
}
}  // namespace

const char* op_name(OpType op) {
  for (const auto& o : kOps)
    if (o.op == op) return o.name;
  return "?";
}

std::optional<OpType> op_from_name(const std::string& name) {
  for (const auto& o : kOps)
    if (name == o.name) return o.op;
  return std::nullopt;
}

int32_t Graph::add_value(Value v) {
  values.push_back(std::move(v));
  return static_cast<int32_t>(values.size() - 1);
}

int32_t Graph::add_node(OpType op, std::vector<int32_t> inputs, Value out, std::vector<std::string> weights,
                        nlohmann::json attrs) {
  Node n{op, std::move(inputs), -1, std::move(weights), std::move(attrs)};
  if (!out.name.empty() || !out.shape.empty()) n.output = add_value(std::move(out));
  nodes.push_back(std::move(n));
  return nodes.back().output;
}

nlohmann::json Graph::to_json() const {
  nlohmann::json j;
  auto& vals = j["values"] = nlohmann::json::array();
  for (const auto& v : values)
    vals.push_back({{"name", v.name}, {"kind", kind_name(v.kind)}, {"dtype", dtype_name(v.dtype)}, {"shape", v.shape}});
  auto& ns = j["nodes"] = nlohmann::json::array();
  for (const auto& n : nodes) {
    nlohmann::json jn = {{"op", op_name(n.op)}, {"inputs", n.inputs}, {"output", n.output}};
    if (!n.weights.empty()) jn["weights"] = n.weights;
    if (!n.attrs.empty()) jn["attrs"] = n.attrs;
    ns.push_back(std::move(jn));
  }
  j["input_ids"] = input_ids;
  j["cache_position"] = cache_position;
  j["logits"] = logits;
  if (hidden >= 0) j["hidden"] = hidden;  // absent: a program without the hidden output
  return j;
}

Graph Graph::from_json(const nlohmann::json& j, const std::string& where) {
  auto bad = [&](const std::string& field, const std::string& what) -> void {
    fail(ErrorKind::Corrupt, where + ": graph " + field, what);
  };
  if (!j.is_object()) bad("", "is not an object");
  for (const char* k : {"values", "nodes"})
    if (!j.contains(k) || !j[k].is_array()) bad(k, "missing or not an array");
  const auto& jv = j["values"];
  const auto& jn = j["nodes"];
  if (jv.size() > (1u << 22) || jn.size() > (1u << 22)) bad("", "too many values or nodes");
  Graph g;
  for (size_t i = 0; i < jv.size(); ++i) {
    const auto& v = jv[i];
    std::string f = "values[" + std::to_string(i) + "]";
    if (!v.is_object() || !v.contains("name") || !v["name"].is_string() || !v.contains("shape") ||
        !v["shape"].is_array() || !v.contains("dtype") || !v["dtype"].is_string() || !v.contains("kind") ||
        !v["kind"].is_string())
      bad(f, "needs name, kind, dtype and shape");
    Value val;
    val.name = v["name"].get<std::string>();
    std::string kind = v["kind"].get<std::string>();
    if (kind == "input") val.kind = ValueKind::Input;
    else if (kind == "activation") val.kind = ValueKind::Activation;
    else if (kind == "buffer") val.kind = ValueKind::Buffer;
    else bad(f, "unknown kind '" + kind + "'");
    auto dt = dtype_from_name(v["dtype"].get<std::string>());
    if (!dt) bad(f, "unknown dtype");
    val.dtype = *dt;
    if (v["shape"].size() > 4) bad(f, "more than 4 dimensions");
    for (const auto& d : v["shape"]) {
      if (!d.is_number_integer()) bad(f, "shape entries must be integers");
      int64_t x = d.get<int64_t>();
      if (x < kDimR || x > (int64_t{1} << 32)) bad(f, "dimension out of range");
      val.shape.push_back(x);
    }
    g.values.push_back(std::move(val));
  }
  const int32_t nv = static_cast<int32_t>(g.values.size());
  std::vector<bool> defined(g.values.size(), false);
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].kind != ValueKind::Activation) defined[i] = true;
  for (size_t i = 0; i < jn.size(); ++i) {
    const auto& n = jn[i];
    std::string f = "nodes[" + std::to_string(i) + "]";
    if (!n.is_object() || !n.contains("op") || !n["op"].is_string() || !n.contains("inputs") ||
        !n["inputs"].is_array() || !n.contains("output") || !n["output"].is_number_integer())
      bad(f, "needs op, inputs and output");
    auto op = op_from_name(n["op"].get<std::string>());
    if (!op) bad(f, "unknown op '" + n["op"].get<std::string>() + "'");
    Node node{*op, {}, -1, {}, nlohmann::json::object()};
    for (const auto& in : n["inputs"]) {
      if (!in.is_number_integer()) bad(f, "input ids must be integers");
      int64_t id = in.get<int64_t>();
      if (id < 0 || id >= nv) bad(f, "input id " + std::to_string(id) + " out of range");
      if (!defined[id]) bad(f, "input '" + g.values[id].name + "' is used before it is computed");
      node.inputs.push_back(static_cast<int32_t>(id));
    }
    int64_t out = n["output"].get<int64_t>();
    if (out < -1 || out >= nv) bad(f, "output id out of range");
    if (out >= 0) {
      if (g.values[out].kind != ValueKind::Activation) bad(f, "output is not an activation");
      if (defined[out]) bad(f, "value '" + g.values[out].name + "' is computed twice");
      defined[out] = true;
    }
    node.output = static_cast<int32_t>(out);
    if (n.contains("weights")) {
      if (!n["weights"].is_array()) bad(f, "weights must be an array");
      for (const auto& w : n["weights"]) {
        if (!w.is_string()) bad(f, "weight names must be strings");
        node.weights.push_back(w.get<std::string>());
      }
    }
    if (n.contains("attrs")) {
      if (!n["attrs"].is_object()) bad(f, "attrs must be an object");
      node.attrs = n["attrs"];
    }
    g.nodes.push_back(std::move(node));
  }
  auto get_id = [&](const char* key) -> int32_t {
    if (!j.contains(key) || !j[key].is_number_integer()) bad(key, "missing");
    int64_t id = j[key].get<int64_t>();
    if (id < 0 || id >= nv) bad(key, "id out of range");
    return static_cast<int32_t>(id);
  };
  g.input_ids = get_id("input_ids");
  g.cache_position = get_id("cache_position");
  g.logits = get_id("logits");
  if (g.values[g.input_ids].kind != ValueKind::Input || g.values[g.cache_position].kind != ValueKind::Input)
    bad("inputs", "input_ids and cache_position must be inputs");
  if (!defined[g.logits]) bad("logits", "never computed");
  if (j.contains("hidden")) {  // optional: programs written before embeddings have none
    g.hidden = get_id("hidden");
    const Value& h = g.values[g.hidden];
    if (!defined[g.hidden] || h.kind != ValueKind::Activation) bad("hidden", "never computed");
    if (h.dtype != DType::F32 || h.shape.size() != 2 || h.shape[0] != kDimR || h.shape[1] < 1)
      bad("hidden", "must be an f32 activation of shape [R, H]");
  }
  return g;
}

std::map<std::string, int> Graph::op_histogram() const {
  std::map<std::string, int> h;
  for (const auto& n : nodes) ++h[op_name(n.op)];
  return h;
}

}  // namespace ptn
