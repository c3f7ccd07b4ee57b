// Checks on a built graph, run at every export and in tests.
#pragma once
#include <map>
#include <set>
#include <string>

#include "graph/graph.h"

namespace ptn {

// Off-graph program: exactly one UpdateAndAttend per layer 0..n_layers-1, no cache-write op,
// no mutable buffer, no in-graph attention. Throws InvalidArgument listing every violation.
void check_offgraph(const Graph& g, int64_t n_layers);
// Static-cache baseline: K and V buffers and their writes for every layer, no UpdateAndAttend.
void check_static_cache(const Graph& g, int64_t n_layers);

struct OpSupportReport {
  std::map<std::string, int> supported;    // op -> count
  std::map<std::string, int> unsupported;  // op -> count (the engine would leave these behind)
  bool ok() const { return unsupported.empty(); }
  std::string to_string() const;
};
OpSupportReport op_support(const Graph& g, const std::set<OpType>& engine_ops);

}  // namespace ptn
