// The Executor on small hand-built graphs whose results are computed here with plain loops:
// the activation arena must never hand one region to two live values (a value read twice by
// one node, dead outputs), and malformed graphs are refused when the executor is built.
#include <gtest/gtest.h>

#include <cmath>

#include "core/quant.h"
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

// Latent attention's ops (slice, concat, head_linear) on a hand-built graph, against plain loops
// in double: ids -> e [T, 128] -> a = slice(e; 2 groups of 64, columns 16..48 of each)
// -> h = head_linear(a; W [2*48, 32], Q8_0 or F32) -> c = concat(h, a; 2 groups) [T, 160]
// -> logits = linear(c; Wo [8, 160]). One row a step (the optimized head_linear's in-place path)
// and three rows a step (its gathered path), reference and optimized.
TEST(ExecutorGraphs, SliceConcatHeadLinearMatchPlainLoops) {
  constexpr int64_t kV = 8, kE = 128, kG = 2, kK = 32, kN = 48, kOff = 16;
  auto value = [](const std::string& name, int64_t w) { return Value{name, ValueKind::Activation, DType::F32, {kDimT, w}}; };
  auto filled = [](int64_t rows, int64_t cols, float seed) {
    Tensor t = Tensor::zeros(DType::F32, {rows, cols});
    float* w = t.data_as<float>();
    for (int64_t i = 0; i < rows * cols; ++i) w[i] = std::sin(seed + 0.37f * static_cast<float>(i)) * (1.0f + 0.5f * std::cos(0.11f * static_cast<float>(i)));
    return t;
  };
  for (DType wt : {DType::F32, DType::Q8_0}) {
    SCOPED_TRACE(dtype_name(wt));
    Graph g;
    g.input_ids = g.add_value(Value{"ids", ValueKind::Input, DType::I32, {kDimT}});
    g.cache_position = g.add_value(Value{"pos", ValueKind::Input, DType::I32, {kDimT}});
    const int32_t e = g.add_node(OpType::Embedding, {g.input_ids}, value("e", kE), {"emb"});
    const int32_t a = g.add_node(OpType::Slice, {e}, value("a", kG * kK), {}, {{"groups", kG}, {"offset", kOff}});
    const int32_t h = g.add_node(OpType::HeadLinear, {a}, value("h", kG * kN), {"wh"}, {{"groups", kG}});
    const int32_t c = g.add_node(OpType::Concat, {h, a}, value("c", kG * (kN + kK)), {}, {{"groups", kG}});
    const int32_t o = g.add_node(OpType::Linear, {c}, value("o", kV), {"wo"});
    g.add_node(OpType::UpdateAndAttend, {o, o, o, g.cache_position}, value("attend", kV), {},
               {{"layer", 0}, {"heads", 1}, {"kv_heads", 1}, {"head_dim", kV}, {"scale", 0.5f}});
    g.logits = g.add_node(OpType::SelectRows, {o}, Value{"logits", ValueKind::Activation, DType::F32, {kDimR, kV}});
    Tensor wh32 = filled(kG * kN, kK, 0.3f);
    Tensor wh = wh32;
    if (wt == DType::Q8_0) {
      wh = Tensor::zeros(DType::Q8_0, {kG * kN, kK});
      for (int64_t r = 0; r < kG * kN; ++r) quantize_row(DType::Q8_0, wh32.data_as<float>() + r * kK, wh.row_ptr(r), kK);
    }
    std::vector<float> whf(static_cast<size_t>(kG * kN * kK));  // the values the weight holds
    for (int64_t r = 0; r < kG * kN; ++r) dequantize_row(wh.dtype(), wh.row_ptr(r), whf.data() + r * kK, kK);
    const Tensor emb = filled(kV, kE, 1.1f), wo = filled(kV, kG * (kN + kK), 2.3f);
    ProgramMeta meta;
    meta.spec.vocab_size = kV;
    meta.graph = g;
    meta.max_seq_length = 8;
    meta.cache_spec.layers.resize(1);
    meta.cache_spec.layers[0].n_kv_heads = 1;
    meta.cache_spec.layers[0].head_dim_k = meta.cache_spec.layers[0].head_dim_v = kV;
    meta.cache_spec.max_positions = 64;
    auto p = Program::from_memory(std::move(meta), {{"emb", emb}, {"wh", wh}, {"wo", wo}}, "hand-built");
    // The logits of token id, in double.
    auto want = [&](int32_t id) {
      const float* x = emb.data_as<float>() + id * kE;
      std::vector<double> cat;
      for (int64_t gi = 0; gi < kG; ++gi) {
        const float* xa = x + gi * (kE / kG) + kOff;
        for (int64_t n = 0; n < kN; ++n) {
          double acc = 0;
          for (int64_t k = 0; k < kK; ++k) acc += static_cast<double>(whf[static_cast<size_t>((gi * kN + n) * kK + k)]) * xa[k];
          cat.push_back(acc);
        }
        for (int64_t k = 0; k < kK; ++k) cat.push_back(xa[k]);
      }
      std::vector<double> out(kV, 0.0);
      for (int64_t v = 0; v < kV; ++v)
        for (size_t i = 0; i < cat.size(); ++i) out[static_cast<size_t>(v)] += static_cast<double>(wo.data_as<float>()[v * kG * (kN + kK) + static_cast<int64_t>(i)]) * cat[i];
      return out;
    };
    const std::vector<int32_t> ids = {3, 6, 1, 5};
    for (ExecMode mode : {ExecMode::Reference, ExecMode::Optimized}) {
      SCOPED_TRACE(mode == ExecMode::Reference ? "reference" : "optimized");
      Executor exec(p, mode, 4);
      auto cache = make_cache("reference", p->meta().cache_spec, cache_options(DType::F32, 64));
      CacheScope scope(exec, *cache);
      cache->add_sequence(0);
      double num = 0, den = 0;
      auto compare = [&](const float* l, int64_t rows, size_t first) {
        for (int64_t r = 0; r < rows; ++r) {
          const std::vector<double> w = want(ids[first + static_cast<size_t>(r)]);
          for (int64_t v = 0; v < kV; ++v) {
            const double d = l[r * kV + v] - w[static_cast<size_t>(v)];
            num += d * d;
            den += w[static_cast<size_t>(v)] * w[static_cast<size_t>(v)];
          }
        }
      };
      int64_t n = 0;
      const float* l = exec.step(StepBatch{{{0, 0, ids[0]}, {0, 1, ids[1]}, {0, 2, ids[2]}}}, OutputRows::All, &n);
      ASSERT_EQ(n, 3);
      compare(l, 3, 0);
      l = exec.step(StepBatch{{{0, 3, ids[3]}}}, OutputRows::All, &n);
      ASSERT_EQ(n, 1);
      compare(l, 1, 3);
      const double nmse = num / den;
      // The reference multiplies the weight's values by f32 activations; the optimized Q8_0
      // kernel quantizes the activations to 8 bits as llama.cpp does.
      EXPECT_LT(nmse, mode == ExecMode::Optimized && wt == DType::Q8_0 ? 5e-4 : 1e-10);
      EXPECT_GT(den, 1.0);
    }
  }
  // A head_linear whose weight does not hold the groups' rows is refused when the executor is built.
  Graph g;
  g.input_ids = g.add_value(Value{"ids", ValueKind::Input, DType::I32, {kDimT}});
  g.cache_position = g.add_value(Value{"pos", ValueKind::Input, DType::I32, {kDimT}});
  const int32_t e = g.add_node(OpType::Embedding, {g.input_ids}, act("e"), {"emb"});
  const int32_t h = g.add_node(OpType::HeadLinear, {e}, act("h"), {"w"}, {{"groups", 2}});
  add_dead_attend(g, h);
  g.logits = g.add_node(OpType::SelectRows, {h}, Value{"logits", ValueKind::Activation, DType::F32, {kDimR, V}});
  Built b = build(g, {{"emb", matrix(0.1f)}, {"w", Tensor::zeros(DType::F32, {V, V})}});
  expect_error([&] { Executor x(b.program, ExecMode::Reference, 2); }, ErrorKind::Corrupt, {"head_linear", "weight w"});
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
