// The Executor on small hand-built graphs whose results are computed here with plain loops:
// the activation arena must never hand one region to two live values (a value read twice by
// one node, dead outputs), and malformed graphs are refused when the executor is built.
#include <gtest/gtest.h>

#include <cmath>

#include "program_test_util.h"

namespace ptn {
namespace {

using namespace ptn::testing;

constexpr int64_t V = 4;  // vocabulary = width of every value here

Value act(const std::string& name) { return Value{name, ValueKind::Activation, DType::F32, {kDimT, V}}; }

Tensor matrix(float seed) {
  Tensor t = Tensor::zeros(DType::F32, {V, V});
  float* w = t.data_as<float>();
  for (int64_t i = 0; i < V * V; ++i) w[i] = std::sin(seed + 0.7f * static_cast<float>(i));
  return t;
}

// x [V] times W [V, V] (rows are outputs).
std::vector<double> linear(const Tensor& w, const std::vector<double>& x) {
  std::vector<double> y(V, 0.0);
  for (int64_t o = 0; o < V; ++o)
    for (int64_t i = 0; i < V; ++i) y[o] += w.data_as<float>()[o * V + i] * x[i];
  return y;
}

// The one cache layer of these programs: an update_and_attend whose output nobody reads (the
// cache wants every layer updated in a step).
void add_dead_attend(Graph& g, int32_t x) {
  g.add_node(OpType::UpdateAndAttend, {x, x, x, g.cache_position}, act("attend"), {},
             {{"layer", 0}, {"heads", 1}, {"kv_heads", 1}, {"head_dim", V}, {"scale", 0.5f}});
}

struct Built {
  std::shared_ptr<const Program> program;
  std::map<std::string, Tensor> tensors;
};

Built build(Graph g, std::map<std::string, Tensor> tensors) {
  ProgramMeta meta;
  meta.spec.vocab_size = V;
  meta.spec.n_layers = 0;
  meta.graph = std::move(g);
  meta.max_seq_length = 8;
  meta.cache_spec.layers.resize(1);  // see add_dead_attend
  meta.cache_spec.layers[0].n_kv_heads = 1;
  meta.cache_spec.layers[0].head_dim_k = meta.cache_spec.layers[0].head_dim_v = V;
  meta.cache_spec.max_positions = 64;
  auto p = Program::from_memory(std::move(meta), tensors, "hand-built");
  return {p, tensors};
}

// ids -> e = Embedding -> s = Add(e, e) -> h1 = Linear(s) -> h2 = Linear(h1) -> logits.
// `s` reads `e` twice; once `e` is dead its memory must be freed once, or h1 and h2 would
// share it and the second matmul would overwrite its own input.
TEST(ExecutorGraphs, ValueReadTwiceByOneNodeIsFreedOnce) {
  Graph g;
  g.input_ids = g.add_value(Value{"ids", ValueKind::Input, DType::I32, {kDimT}});
  g.cache_position = g.add_value(Value{"pos", ValueKind::Input, DType::I32, {kDimT}});
  const int32_t e = g.add_node(OpType::Embedding, {g.input_ids}, act("e"), {"emb"});
  const int32_t s = g.add_node(OpType::Add, {e, e}, act("s"));
  const int32_t h1 = g.add_node(OpType::Linear, {s}, act("h1"), {"w1"});
  const int32_t h2 = g.add_node(OpType::Linear, {h1}, act("h2"), {"w2"});
  add_dead_attend(g, h2);
  g.logits = g.add_node(OpType::SelectRows, {h2}, Value{"logits", ValueKind::Activation, DType::F32, {kDimR, V}});
  Built b = build(g, {{"emb", matrix(0.1f)}, {"w1", matrix(1.3f)}, {"w2", matrix(2.9f)}});
  for (ExecMode mode : {ExecMode::Reference, ExecMode::Optimized}) {
    Executor exec(b.program, mode, 4);
    auto cache = make_cache("reference", b.program->meta().cache_spec, cache_options(DType::F32, 64));
    CacheScope scope(exec, *cache);
    cache->add_sequence(0);
    int64_t n = 0;
    const float* l = exec.step(StepBatch{{{0, 0, 2}, {0, 1, 1}, {0, 2, 3}}}, OutputRows::All, &n);
    ASSERT_EQ(n, 3);
    const int32_t toks[3] = {2, 1, 3};
    for (int r = 0; r < 3; ++r) {
      std::vector<double> x(V);
      for (int64_t i = 0; i < V; ++i) x[i] = 2.0 * b.tensors["emb"].data_as<float>()[toks[r] * V + i];
      const std::vector<double> want = linear(b.tensors["w2"], linear(b.tensors["w1"], x));
      for (int64_t i = 0; i < V; ++i)
        EXPECT_NEAR(l[r * V + i], want[i], 1e-4) << "row " << r << " col " << i
                                                 << (mode == ExecMode::Reference ? " reference" : " optimized");
    }
  }
}

// A dead output (computed, never read) next to live values.
TEST(ExecutorGraphs, DeadOutputsDoNotClobberLiveValues) {
  Graph g;
  g.input_ids = g.add_value(Value{"ids", ValueKind::Input, DType::I32, {kDimT}});
  g.cache_position = g.add_value(Value{"pos", ValueKind::Input, DType::I32, {kDimT}});
  const int32_t e = g.add_node(OpType::Embedding, {g.input_ids}, act("e"), {"emb"});
  const int32_t a = g.add_node(OpType::Linear, {e}, act("a"), {"w1"});
  g.add_node(OpType::Scale, {e}, act("dead"), {}, {{"scale", 100.0f}});
  const int32_t c = g.add_node(OpType::Linear, {a}, act("c"), {"w2"});
  add_dead_attend(g, c);
  const int32_t d = g.add_node(OpType::Add, {c, e}, act("d"));
  g.logits = g.add_node(OpType::SelectRows, {d}, Value{"logits", ValueKind::Activation, DType::F32, {kDimR, V}});
  Built b = build(g, {{"emb", matrix(0.4f)}, {"w1", matrix(1.1f)}, {"w2", matrix(3.3f)}});
  Executor exec(b.program, ExecMode::Reference, 2);
  auto cache = make_cache("reference", b.program->meta().cache_spec, cache_options(DType::F32, 64));
  CacheScope scope(exec, *cache);
  cache->add_sequence(0);
  int64_t n = 0;
  const float* l = exec.step(StepBatch{{{0, 0, 3}, {0, 1, 0}}}, OutputRows::LastPerSequence, &n);
  ASSERT_EQ(n, 1);
  std::vector<double> x(V);
  for (int64_t i = 0; i < V; ++i) x[i] = b.tensors["emb"].data_as<float>()[0 * V + i];
  std::vector<double> want = linear(b.tensors["w2"], linear(b.tensors["w1"], x));
  for (int64_t i = 0; i < V; ++i) EXPECT_NEAR(l[i], want[i] + x[i], 1e-4) << i;
}

TEST(ExecutorGraphs, MalformedGraphsAreRefusedAtBuild) {
  auto base = [] {
    Graph g;
    g.input_ids = g.add_value(Value{"ids", ValueKind::Input, DType::I32, {kDimT}});
    g.cache_position = g.add_value(Value{"pos", ValueKind::Input, DType::I32, {kDimT}});
    return g;
  };
  {  // logits narrower than the vocabulary
    Graph g = base();
    const int32_t e = g.add_node(OpType::Embedding, {g.input_ids}, act("e"), {"emb"});
    g.logits = g.add_node(OpType::SelectRows, {e}, Value{"logits", ValueKind::Activation, DType::F32, {kDimR, 3}});
    Built b = build(g, {{"emb", matrix(0.1f)}});
    expect_error([&] { Executor x(b.program, ExecMode::Reference, 2); }, ErrorKind::Corrupt, {});
  }
  {  // a Linear whose weight does not map the widths
    Graph g = base();
    const int32_t e = g.add_node(OpType::Embedding, {g.input_ids}, act("e"), {"emb"});
    const int32_t h = g.add_node(OpType::Linear, {e}, act("h"), {"w"});
    g.logits = g.add_node(OpType::SelectRows, {h}, Value{"logits", ValueKind::Activation, DType::F32, {kDimR, V}});
    Built b = build(g, {{"emb", matrix(0.1f)}, {"w", Tensor::zeros(DType::F32, {V, V + 1})}});
    expect_error([&] { Executor x(b.program, ExecMode::Reference, 2); }, ErrorKind::Corrupt, {"graph node 1", "weight w"});
  }
  {  // an update_and_attend whose layer is not in the cache spec
    Graph g = base();
    const int32_t e = g.add_node(OpType::Embedding, {g.input_ids}, act("e"), {"emb"});
    const int32_t at = g.add_node(OpType::UpdateAndAttend, {e, e, e, g.cache_position}, act("at"), {},
                                  {{"layer", 3}, {"heads", 1}, {"kv_heads", 1}, {"head_dim", V}});
    g.logits = g.add_node(OpType::SelectRows, {at}, Value{"logits", ValueKind::Activation, DType::F32, {kDimR, V}});
    Built b = build(g, {{"emb", matrix(0.1f)}});
    expect_error([&] { Executor x(b.program, ExecMode::Reference, 2); }, ErrorKind::Corrupt, {"cache spec"});
  }
  {  // max rows out of range
    Graph g = base();
    const int32_t e = g.add_node(OpType::Embedding, {g.input_ids}, act("e"), {"emb"});
    g.logits = g.add_node(OpType::SelectRows, {e}, Value{"logits", ValueKind::Activation, DType::F32, {kDimR, V}});
    Built b = build(g, {{"emb", matrix(0.1f)}});
    expect_error([&] { Executor x(b.program, ExecMode::Reference, 0); }, ErrorKind::InvalidArgument, {"max rows"});
  }
}

}  // namespace
}  // namespace ptn
