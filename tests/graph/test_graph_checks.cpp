// The exporter's graph checks on graphs built by the decoder builder: the off-graph graph has
// exactly one update_and_attend per layer, no cache writes, no buffers; check_offgraph rejects
// a static-cache graph and a graph with two attends in one layer; the graph survives its JSON
// encoding; from_json rejects malformed graphs with Corrupt.
#include <gtest/gtest.h>

#include "core/error.h"
#include "formats/hf_config.h"
#include "graph/checks.h"
#include "models/decoder.h"

namespace ptn {
namespace {

ModelSpec tiny_spec(int64_t layers = 3) {
  nlohmann::json c = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", 128},
                      {"hidden_size", 64}, {"intermediate_size", 128}, {"num_hidden_layers", layers},
                      {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
                      {"max_position_embeddings", 256}, {"rms_norm_eps", 1e-5}, {"hidden_act", "silu"}};
  return model_spec_from_hf_config(c, "tiny");
}

int count_ops(const Graph& g, OpType op) {
  int n = 0;
  for (const Node& x : g.nodes) n += x.op == op;
  return n;
}

std::string message_of(const std::function<void()>& f, ErrorKind kind) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no ptn::Error";
  return "";
}

TEST(GraphChecks, OffgraphGraphHasOneAttendPerLayerAndNoState) {
  const ModelSpec s = tiny_spec(3);
  const Graph g = build_decoder_graph(s, BuildOptions{});
  EXPECT_NO_THROW(check_offgraph(g, s.n_layers));
  EXPECT_EQ(count_ops(g, OpType::UpdateAndAttend), 3);
  EXPECT_EQ(count_ops(g, OpType::CacheWrite), 0);
  EXPECT_EQ(count_ops(g, OpType::StaticAttention), 0);
  std::vector<int> layers;
  for (const Node& n : g.nodes)
    if (n.op == OpType::UpdateAndAttend) layers.push_back(n.attrs.at("layer").get<int>());
  EXPECT_EQ(layers, (std::vector<int>{0, 1, 2}));
  for (const Value& v : g.values) EXPECT_NE(v.kind, ValueKind::Buffer) << v.name;
  EXPECT_EQ(g.op_histogram().at("update_and_attend"), 3);
  // The static checker refuses it.
  EXPECT_NE(message_of([&] { check_static_cache(g, s.n_layers); }, ErrorKind::InvalidArgument).find("update_and_attend"),
            std::string::npos);
}

TEST(GraphChecks, OffgraphCheckRejectsStaticGraph) {
  const ModelSpec s = tiny_spec(2);
  BuildOptions bo;
  bo.static_cache = true;
  bo.max_context_length = 32;
  const Graph g = build_decoder_graph(s, bo);
  EXPECT_NO_THROW(check_static_cache(g, s.n_layers));
  EXPECT_EQ(count_ops(g, OpType::CacheWrite), 4);
  const std::string m = message_of([&] { check_offgraph(g, s.n_layers); }, ErrorKind::InvalidArgument);
  EXPECT_NE(m.find("cache_write"), std::string::npos) << m;
  EXPECT_NE(m.find("mutable buffer"), std::string::npos) << m;
  EXPECT_NE(m.find("layer 0 has 0 update_and_attend"), std::string::npos) << m;
}

TEST(GraphChecks, OffgraphCheckRejectsTwoAttendsInOneLayerAndBadLayers) {
  const ModelSpec s = tiny_spec(2);
  Graph g = build_decoder_graph(s, BuildOptions{});
  // Relabel layer 1's attend as layer 0: layer 0 has two, layer 1 none.
  for (Node& n : g.nodes)
    if (n.op == OpType::UpdateAndAttend && n.attrs.at("layer") == 1) n.attrs["layer"] = 0;
  std::string m = message_of([&] { check_offgraph(g, s.n_layers); }, ErrorKind::InvalidArgument);
  EXPECT_NE(m.find("layer 0 has 2 update_and_attend"), std::string::npos) << m;
  EXPECT_NE(m.find("layer 1 has 0 update_and_attend"), std::string::npos) << m;
  for (Node& n : g.nodes)
    if (n.op == OpType::UpdateAndAttend) n.attrs["layer"] = 7;
  m = message_of([&] { check_offgraph(g, s.n_layers); }, ErrorKind::InvalidArgument);
  EXPECT_NE(m.find("bad layer 7"), std::string::npos) << m;
  // A buffer value alone is state too.
  Graph g2 = build_decoder_graph(s, BuildOptions{});
  g2.add_value(Value{"stray", ValueKind::Buffer, DType::F32, {4, 4}});
  m = message_of([&] { check_offgraph(g2, s.n_layers); }, ErrorKind::InvalidArgument);
  EXPECT_NE(m.find("mutable buffer 'stray'"), std::string::npos) << m;
}

TEST(GraphChecks, OpSupportReportNamesMissingOps) {
  const Graph g = build_decoder_graph(tiny_spec(2), BuildOptions{});
  std::set<OpType> all;
  for (const Node& n : g.nodes) all.insert(n.op);
  EXPECT_TRUE(op_support(g, all).ok());
  all.erase(OpType::UpdateAndAttend);
  OpSupportReport r = op_support(g, all);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.unsupported.at("update_and_attend"), 2);
  EXPECT_NE(r.to_string().find("cannot run: update_and_attend x2"), std::string::npos) << r.to_string();
}

TEST(GraphChecks, JsonRoundTripAndCorruptGraphs) {
  const Graph g = build_decoder_graph(tiny_spec(2), BuildOptions{});
  const nlohmann::json j = g.to_json();
  const Graph h = Graph::from_json(j, "test");
  EXPECT_EQ(h.to_json(), j);
  EXPECT_EQ(h.nodes.size(), g.nodes.size());
  EXPECT_EQ(h.logits, g.logits);

  auto corrupt = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json k = j;
    edit(k);
    return message_of([&] { Graph::from_json(k, "file.ptn: graph"); }, ErrorKind::Corrupt);
  };
  // Find the JSON array of nodes and of values, whatever their key names.
  std::string nodes_key, values_key;
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it->is_array() && !it->empty() && it->front().contains("op")) nodes_key = it.key();
    else if (it->is_array() && !it->empty() && it->front().contains("shape")) values_key = it.key();
  ASSERT_FALSE(nodes_key.empty());
  ASSERT_FALSE(values_key.empty());
  std::string m = corrupt([&](nlohmann::json& k) { k[nodes_key][3]["op"] = "frobnicate"; });
  EXPECT_NE(m.find("file.ptn: graph"), std::string::npos) << m;
  EXPECT_NE(m.find("frobnicate"), std::string::npos) << m;
  corrupt([&](nlohmann::json& k) { k[nodes_key][2]["inputs"] = {1000000}; });
  corrupt([&](nlohmann::json& k) { k[nodes_key][2]["inputs"] = {-5}; });
  corrupt([&](nlohmann::json& k) { k[nodes_key][2]["inputs"] = "x"; });
  corrupt([&](nlohmann::json& k) { k[values_key][0]["shape"] = {1, 2, 3, 4, 5}; });
  corrupt([&](nlohmann::json& k) { k[nodes_key] = 5; });
  // An input used before the node that defines it.
  corrupt([&](nlohmann::json& k) {
    const int last_out = k[nodes_key].back()["output"].get<int>();
    k[nodes_key][1]["inputs"] = {last_out};
  });
}

}  // namespace
}  // namespace ptn
