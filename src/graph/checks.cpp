#include "graph/checks.h"

#include <vector>

#include "core/error.h"
#include "core/json_number.h"

namespace ptn {

namespace {

// The node's "layer" attribute, or -1 when it is missing or not an integer in range (the
// callers report -1 as a bad layer).
int64_t node_layer(const Node& n) {
  auto it = n.attrs.find("layer");
  if (it == n.attrs.end()) return -1;
  return json_integer<int64_t>(*it).value_or(-1);
}

}  // namespace

void check_offgraph(const Graph& g, int64_t n_layers) {
  std::vector<std::string> problems;
  std::vector<int> per_layer(static_cast<size_t>(n_layers), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op == OpType::CacheWrite || n.op == OpType::StaticAttention)
      problems.push_back("node " + std::to_string(i) + " is an in-graph cache op (" + op_name(n.op) + ")");
    if (n.op == OpType::UpdateAndAttend) {
      const int64_t l = node_layer(n);
      if (l < 0 || l >= n_layers) problems.push_back("update_and_attend with bad layer " + std::to_string(l));
      else ++per_layer[static_cast<size_t>(l)];
    }
  }
  for (int64_t l = 0; l < n_layers; ++l)
    if (per_layer[static_cast<size_t>(l)] != 1)
      problems.push_back("layer " + std::to_string(l) + " has " + std::to_string(per_layer[static_cast<size_t>(l)]) +
                         " update_and_attend ops (expected 1)");
  for (const auto& v : g.values)
    if (v.kind == ValueKind::Buffer) problems.push_back("mutable buffer '" + v.name + "' in the graph");
  if (!problems.empty()) {
    std::string msg = "the off-graph program is not valid:";
    for (const auto& p : problems) msg += "\n  " + p;
    fail(ErrorKind::InvalidArgument, "graph check", msg);
  }
}

void check_static_cache(const Graph& g, int64_t n_layers) {
  std::vector<std::string> problems;
  std::vector<int> writes(static_cast<size_t>(n_layers), 0);
  for (const Node& n : g.nodes) {
    if (n.op == OpType::UpdateAndAttend) problems.push_back("static program contains update_and_attend");
    if (n.op == OpType::CacheWrite) {
      const int64_t l = node_layer(n);
      if (l >= 0 && l < n_layers) ++writes[static_cast<size_t>(l)];
      if (n.inputs.empty() || g.values[n.inputs[0]].kind != ValueKind::Buffer)
        problems.push_back("cache_write without a buffer");
    }
  }
  for (int64_t l = 0; l < n_layers; ++l)
    if (writes[static_cast<size_t>(l)] != 2)
      problems.push_back("layer " + std::to_string(l) + " writes its cache buffers " +
                         std::to_string(writes[static_cast<size_t>(l)]) + " times (expected 2: K and V)");
  if (!problems.empty()) {
    std::string msg = "the static-cache program is not valid:";
    for (const auto& p : problems) msg += "\n  " + p;
    fail(ErrorKind::InvalidArgument, "graph check", msg);
  }
}

OpSupportReport op_support(const Graph& g, const std::set<OpType>& engine_ops) {
  OpSupportReport r;
  for (const Node& n : g.nodes) {
    if (engine_ops.count(n.op)) ++r.supported[op_name(n.op)];
    else ++r.unsupported[op_name(n.op)];
  }
  return r;
}

std::string OpSupportReport::to_string() const {
  std::string s = "ops the engine runs:";
  for (const auto& [op, n] : supported) s += " " + op + " x" + std::to_string(n);
  if (!unsupported.empty()) {
    s += "\nops the engine cannot run:";
    for (const auto& [op, n] : unsupported) s += " " + op + " x" + std::to_string(n);
  }
  return s;
}

}  // namespace ptn
