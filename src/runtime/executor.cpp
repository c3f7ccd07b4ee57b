#include "runtime/executor.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include <sys/mman.h>

#include "core/cpu.h"
#include "core/error.h"
#include "core/json_number.h"
#include "core/fp16.h"
#include "core/quant.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/moe.h"
#include "kernels/ops.h"
#include "runtime/arena_plan.h"

namespace ptn {

const std::set<OpType>& engine_ops() {
  static const std::set<OpType> ops = {OpType::Embedding, OpType::RMSNorm,    OpType::Linear,
                                       OpType::Rope,      OpType::UpdateAndAttend, OpType::Add,
                                       OpType::Mul,       OpType::Scale,      OpType::Softcap,
                                       OpType::SwiGLU,    OpType::GeGLU,      OpType::SelectRows,
                                       OpType::CacheWrite, OpType::StaticAttention, OpType::AttnTemperature,
                                       OpType::MoeFfn,    OpType::LayerNorm,  OpType::Gelu, OpType::QueryTemperature,
                                       OpType::Slice,     OpType::Concat,     OpType::HeadLinear};
  return ops;
}

namespace {
std::atomic<bool> g_weight_repack{true};
}  // namespace

void set_weight_repack(bool on) { g_weight_repack.store(on); }
bool weight_repack() { return g_weight_repack.load(); }

namespace {

constexpr int64_t kMaxWidth = int64_t{1} << 28;

struct ValuePlan {
  bool rows_r = false;   // rows are the selected rows R (else T)
  int64_t width = 0;     // innermost size (1 for 1-D inputs)
  DType dtype = DType::F32;
  size_t offset = 0;     // in the arena
  size_t bytes = 0;      // for max rows
  int last_use = -1;
};

struct NodePlan {
  OpType op;
  std::vector<int32_t> in;
  int32_t out = -1;
  WeightView w{};
  const float* bias = nullptr;
  const float* norm_w = nullptr;
  const float* norm_b = nullptr;  // LayerNorm's bias
  float eps = 0, scalar = 1, cap = 0;
  bool plus_one = false;
  bool gelu_erf = false;  // GeGLU: exact GELU ("activation": "gelu") instead of the tanh approximation
  int64_t group = 0;
  int64_t pos_offset = 1;  // AttnTemperature: pos + 1; QueryTemperature: pos
  int64_t offset = 0;      // Slice: the first column taken of each group
  int64_t heads = 0, kv_heads = 0, head_dim = 0, head_dim_v = 0, rope_dim = 0, layer = 0;
  RopeParams rope;
  std::unique_ptr<RopeTable> rope_table;
  AttentionParams attend;
  // static cache buffers
  int32_t kbuf = -1, vbuf = -1;
  // Linear nodes that read the same input back to back (q/k/v, gate/up) run as one
  // matmul_multi: the first holds the count, the others are marked as already computed.
  int multi = 1;
  bool in_multi = false;
  // MoeFfn: the experts' weights, routing and the optimized op's reusable scratch.
  struct Moe {
    MoeWeights w;
    MoeParams p;
    MoeScratch scratch;
  };
  std::unique_ptr<Moe> moe;
  // HeadLinear: one matrix per group (rows g*N.. of w); the optimized op's gathered rows and jobs.
  std::vector<WeightView> group_w;
  std::vector<float> gx, gy;
  std::vector<MatmulJob> jobs;
};

struct StaticBuffer {
  DType dtype = DType::F32;
  int64_t rows = 0, width = 0;
  std::vector<uint8_t> data;
};

[[noreturn]] void bad_node(const Program& p, size_t i, const Node& n, const std::string& what) {
  fail(ErrorKind::Corrupt, p.name() + ": graph node " + std::to_string(i) + " (" + op_name(n.op) + ")", what);
}

template <class T>
T attr(const Program& p, size_t i, const Node& n, const char* key, T def) {
  if (!n.attrs.contains(key)) return def;
  const nlohmann::json& v = n.attrs.at(key);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (auto x = json_integer<T>(v)) return *x;
    bad_node(p, i, n, std::string("attribute '") + key + "' must be an integer in range, got " + v.dump());
  } else if constexpr (std::is_floating_point_v<T>) {
    if (auto x = json_real<T>(v)) return *x;
    bad_node(p, i, n, std::string("attribute '") + key + "' must be a finite number, got " + v.dump());
  } else {
    if constexpr (std::is_same_v<T, std::vector<double>>)  // each element as a real above
      if (v.is_array())
        for (const auto& e : v)
          if (!json_real<double>(e)) bad_node(p, i, n, std::string("attribute '") + key + "' holds " + e.dump());
    try {
      return v.get<T>();
    } catch (const nlohmann::json::exception&) {
      bad_node(p, i, n, std::string("attribute '") + key + "' has the wrong type");
    }
  }
}

// ---- per-op validation: each op's plan from its node, every shape checked against the weights

// What the validators of one node read: the program, the node, the value plans so far and the
// static buffers; and the checks every op shares.
struct NodeCheck {
  const Program& p;
  const Graph& g;
  const ModelSpec& spec;
  size_t i;
  const Node& n;
  const std::vector<ValuePlan>& values;
  const std::unordered_map<int32_t, StaticBuffer>& buffers;

  [[noreturn]] void bad(const std::string& what) const { bad_node(p, i, n, what); }
  template <class T>
  T attr(const char* key, T def) const { return ptn::attr<T>(p, i, n, key, def); }
  int64_t width(int32_t v) const { return values[v].width; }
  bool is_act(int32_t v) const { return g.values[v].kind == ValueKind::Activation; }
  bool same_rows(int32_t a, int32_t b) const { return values[a].rows_r == values[b].rows_r; }
  void need_inputs(size_t k) const {
    if (n.inputs.size() != k) bad("expects " + std::to_string(k) + " inputs");
  }
  void need_out() const {
    if (n.output < 0) bad("has no output");
  }
  const Tensor& weight(size_t k) const {
    if (n.weights.size() <= k) bad("weight " + std::to_string(k) + " missing");
    return p.tensor(n.weights[k]);
  }
  // One activation input of the output's shape (norms, scales, element-wise maps).
  void need_same_shape(int32_t in) const {
    if (!is_act(in) || width(in) != width(n.output) || !same_rows(in, n.output)) bad("input and output shapes differ");
  }
};

void plan_embedding(const NodeCheck& c, NodePlan& np) {
  const Node& n = c.n;
  c.need_inputs(1);
  c.need_out();
  if (n.inputs[0] != c.g.input_ids) c.bad("must read input_ids");
  const Tensor& t = c.weight(0);
  if (t.ndim() != 2 || t.dim(1) != c.width(n.output) || t.dim(0) != c.spec.vocab_size)
    c.bad("table " + t.describe() + " does not fit vocab " + std::to_string(c.spec.vocab_size) + " x width " +
          std::to_string(c.width(n.output)));
  np.w = WeightView{t.dtype(), t.dim(0), t.dim(1), t.data(), t.row_bytes()};
  np.scalar = c.attr<float>("scale", 1.0f);
}

// RMSNorm and LayerNorm: one input of the output's shape, normalised per group of `group`
// values; each weight (RMSNorm: the scale; LayerNorm: the scale, then the bias; all optional) an
// f32 vector of the group's size; eps in [0, 1].
void plan_norm(const NodeCheck& c, NodePlan& np, bool layer_norm) {
  const Node& n = c.n;
  c.need_inputs(1);
  c.need_out();
  c.need_same_shape(n.inputs[0]);
  np.group = c.attr<int64_t>("group", c.width(n.output));
  if (np.group < 1 || c.width(n.output) % np.group != 0) c.bad("group does not divide the width");
  if (layer_norm && n.weights.size() > 2) c.bad("expects at most 2 weights (scale, bias)");
  const float* vecs[2] = {nullptr, nullptr};  // no weight: plain normalisation (Llama 4's q/k L2 norm)
  for (size_t k = 0; k < (layer_norm ? n.weights.size() : std::min<size_t>(n.weights.size(), 1)); ++k) {
    const Tensor& t = c.weight(k);
    if (t.dtype() != DType::F32 || t.numel() != np.group || t.ndim() != 1)
      c.bad(std::string(k == 0 ? "norm weight" : "norm bias") + " must be f32 [" + std::to_string(np.group) + "], got " + t.describe());
    vecs[k] = t.data_as<float>();
  }
  np.norm_w = vecs[0];
  np.norm_b = vecs[1];
  np.eps = c.attr<float>("eps", layer_norm ? 1e-5f : 1e-6f);
  if (!layer_norm) np.plus_one = c.attr<bool>("plus_one", false);
  if (!(np.eps >= 0.0f) || np.eps > 1.0f) c.bad("eps out of range");
}

// The GELU of geglu and gelu nodes: "gelu_tanh" (default) or "gelu" (exact, erf).
void plan_gelu_kind(const NodeCheck& c, NodePlan& np) {
  const std::string a = c.attr<std::string>("activation", "gelu_tanh");
  if (a != "gelu_tanh" && a != "gelu") c.bad("activation must be gelu_tanh or gelu");
  np.gelu_erf = a == "gelu";
}

void plan_linear(const NodeCheck& c, NodePlan& np) {
  const Node& n = c.n;
  c.need_inputs(1);
  c.need_out();
  if (!c.is_act(n.inputs[0]) || !c.same_rows(n.inputs[0], n.output)) c.bad("bad input");
  const Tensor& t = c.weight(0);
  if (t.ndim() != 2 || t.dim(1) != c.width(n.inputs[0]) || t.dim(0) != c.width(n.output))
    c.bad("weight " + n.weights[0] + " " + t.describe() + " does not map width " + std::to_string(c.width(n.inputs[0])) +
          " to " + std::to_string(c.width(n.output)));
  if (!matmul_supports(t.dtype())) c.bad(std::string("no matmul for ") + dtype_name(t.dtype()));
  np.w = WeightView{t.dtype(), t.dim(0), t.dim(1), t.data(), t.row_bytes()};
  if (n.weights.size() > 1) {
    const Tensor& b = c.weight(1);
    if (b.dtype() != DType::F32 || b.numel() != t.dim(0) || b.ndim() != 1)
      c.bad("bias " + n.weights[1] + " must be f32 [" + std::to_string(t.dim(0)) + "]");
    np.bias = b.data_as<float>();
  }
}

void plan_rope(const NodeCheck& c, NodePlan& np) {
  const Node& n = c.n;
  c.need_inputs(2);
  c.need_out();
  if (n.inputs[1] != c.g.cache_position) c.bad("second input must be cache_position");
  np.heads = c.attr<int64_t>("heads", 0);
  np.head_dim = c.attr<int64_t>("head_dim", 0);
  np.rope_dim = c.attr<int64_t>("rope_dim", np.head_dim);
  if (np.heads < 1 || np.head_dim < 2 || np.heads * np.head_dim != c.width(n.output) ||
      c.width(n.inputs[0]) != c.width(n.output) || np.rope_dim < 2 || np.rope_dim > np.head_dim || np.rope_dim % 2 != 0)
    c.bad("heads x head_dim must equal the width and rope_dim be even and <= head_dim");
  RopeParams& rp = np.rope;
  rp.theta = c.attr<double>("theta", 10000.0);
  if (!(rp.theta > 1.0) || rp.theta > 1e12) c.bad("theta out of range");
  const std::string pairing = c.attr<std::string>("pairing", "half");
  rp.pairing = pairing == "interleaved" ? RopePairing::Interleaved : RopePairing::HalfSplit;
  const std::string sc = c.attr<std::string>("scaling", "none");
  rp.scaling = sc == "linear"   ? RopeFreqScaling::Linear
               : sc == "llama3" ? RopeFreqScaling::Llama3
               : sc == "yarn"   ? RopeFreqScaling::Yarn
               : sc == "longrope" ? RopeFreqScaling::LongRope
                                : RopeFreqScaling::None;
  if (sc != "none" && sc != "linear" && sc != "llama3" && sc != "yarn" && sc != "longrope") c.bad("unknown scaling '" + sc + "'");
  rp.freq_divisors = c.attr<std::vector<double>>("freq_divisors", {});
  rp.factor = c.attr<double>("factor", 1.0);
  rp.low_freq_factor = c.attr<double>("low_freq_factor", 1.0);
  rp.high_freq_factor = c.attr<double>("high_freq_factor", 4.0);
  rp.original_max_position = c.attr<int64_t>("original_max_position", 0);
  rp.beta_fast = c.attr<double>("beta_fast", 32.0);
  rp.beta_slow = c.attr<double>("beta_slow", 1.0);
  rp.yarn_truncate = c.attr<bool>("truncate", true);
  // An attention factor of exactly 1 is a value (yarn with mscale == mscale_all_dim, as Ministral 3
  // and DeepSeek configs have it), not "unset": only an absent attribute lets yarn derive its default.
  rp.attn_factor = c.n.attrs.contains("attn_factor") ? c.attr<double>("attn_factor", 1.0) : 0.0;
  if (rp.scaling != RopeFreqScaling::None && !(rp.factor > 0.0)) c.bad("scaling factor must be > 0");
  np.rope_table = std::make_unique<RopeTable>(rp, np.rope_dim);
}

// UpdateAndAttend (K/V into the installed cache) and StaticAttention (K/V from graph buffers).
void plan_attention(const NodeCheck& c, NodePlan& np) {
  const Node& n = c.n;
  c.need_inputs(4);
  c.need_out();
  np.layer = c.attr<int64_t>("layer", -1);
  np.heads = c.attr<int64_t>("heads", 0);
  np.kv_heads = c.attr<int64_t>("kv_heads", 0);
  np.head_dim = c.attr<int64_t>("head_dim", 0);
  np.head_dim_v = c.attr<int64_t>("head_dim_v", np.head_dim);
  np.attend.scale = c.attr<float>("scale", 1.0f);
  np.attend.softcap = c.attr<float>("softcap", 0.0f);
  const auto& cs = c.p.meta().cache_spec;
  if (np.layer < 0 || np.layer >= static_cast<int64_t>(cs.layers.size())) c.bad("layer out of range of the cache spec");
  const LayerCacheSpec& lc = cs.layers[static_cast<size_t>(np.layer)];
  np.attend.kind = lc.kind;
  np.attend.span = lc.span;
  if (np.heads < 1 || np.kv_heads < 1 || np.heads % np.kv_heads != 0 || np.head_dim < 1 || np.head_dim_v < 1 ||
      lc.n_kv_heads != np.kv_heads || lc.head_dim_k != np.head_dim || lc.head_dim_v != np.head_dim_v)
    c.bad("heads/kv heads/head dims inconsistent with each other or the cache spec");
  if (!(np.attend.softcap >= 0.0f) || !std::isfinite(np.attend.scale)) c.bad("bad scale/softcap");
  // Attention sinks: the node's one weight, f32 [heads], exactly when the layer's spec has them.
  if (n.weights.size() > 1) c.bad("expects at most one weight (the sinks)");
  if (n.weights.empty() == lc.sinks)
    c.bad(lc.sinks ? "the cache spec gives this layer sinks: the node needs its sinks weight"
                   : "has a sinks weight the cache spec does not declare for this layer");
  if (lc.sinks) {
    const Tensor& t = c.weight(0);
    if (t.dtype() != DType::F32 || t.ndim() != 1 || t.numel() != np.heads)
      c.bad("sinks must be f32 [" + std::to_string(np.heads) + "], got " + t.describe());
    for (int64_t h = 0; h < np.heads; ++h)
      if (!std::isfinite(t.data_as<float>()[h])) c.bad("sink of head " + std::to_string(h) + " is not finite");
    np.attend.sinks = t.data_as<float>();
  }
  const int32_t q = n.inputs[0];
  if (c.width(q) != np.heads * np.head_dim || c.width(n.output) != np.heads * np.head_dim_v)
    c.bad("q/output widths do not match heads x head_dim");
  if (n.inputs[3] != c.g.cache_position) c.bad("fourth input must be cache_position");
  if (n.op == OpType::UpdateAndAttend) {
    if (c.width(n.inputs[1]) != np.kv_heads * np.head_dim || c.width(n.inputs[2]) != np.kv_heads * np.head_dim_v)
      c.bad("k/v widths do not match kv_heads x head_dim");
    return;
  }
  np.kbuf = n.inputs[1];
  np.vbuf = n.inputs[2];
  const auto kb = c.buffers.find(np.kbuf), vb = c.buffers.find(np.vbuf);
  if (kb == c.buffers.end() || vb == c.buffers.end() || kb->second.width != np.kv_heads * np.head_dim ||
      vb->second.width != np.kv_heads * np.head_dim_v)
    c.bad("needs K and V buffers of kv_heads x head_dim columns");
}

void plan_cache_write(const NodeCheck& c) {
  const Node& n = c.n;
  c.need_inputs(3);
  const auto b = c.buffers.find(n.inputs[0]);
  if (b == c.buffers.end()) c.bad("first input must be a buffer");
  if (n.inputs[2] != c.g.cache_position) c.bad("third input must be cache_position");
  if (!c.is_act(n.inputs[1]) || c.width(n.inputs[1]) != b->second.width) c.bad("rows do not fit the buffer width");
}

// Add, Mul, SwiGLU, GeGLU: two operands of the output's shape.
void plan_binary(const NodeCheck& c) {
  c.need_inputs(2);
  c.need_out();
  for (int32_t in : c.n.inputs)
    if (!c.is_act(in) || c.width(in) != c.width(c.n.output) || !c.same_rows(in, c.n.output))
      c.bad("operand shapes differ");
}

void plan_scale_softcap(const NodeCheck& c, NodePlan& np) {
  c.need_inputs(1);
  c.need_out();
  c.need_same_shape(c.n.inputs[0]);
  np.scalar = c.attr<float>("scale", 1.0f);
  np.cap = c.attr<float>("cap", 0.0f);
  if (c.n.op == OpType::Softcap && !(np.cap > 0.0f)) c.bad("cap must be > 0");
}

void plan_attn_temperature(const NodeCheck& c, NodePlan& np) {
  c.need_inputs(2);
  c.need_out();
  if (c.n.inputs[1] != c.g.cache_position) c.bad("second input must be cache_position");
  c.need_same_shape(c.n.inputs[0]);
  np.scalar = c.attr<float>("scale", 0.0f);
  np.group = c.attr<int64_t>("floor", 0);
  np.pos_offset = c.n.op == OpType::AttnTemperature ? 1 : 0;
  if (!(np.scalar > 0.0f) || np.group < 1) c.bad("needs scale > 0 and floor >= 1");
}

void plan_select_rows(const NodeCheck& c) {
  const Node& n = c.n;
  c.need_inputs(1);
  c.need_out();
  if (!c.is_act(n.inputs[0]) || c.values[n.inputs[0]].rows_r || !c.values[n.output].rows_r ||
      c.width(n.inputs[0]) != c.width(n.output))
    c.bad("maps [T, H] to [R, H]");
}

// MoeFfn: weights router, (gate, up, down) per expert, then the shared expert's router, gate,
// up, down; every shape checked here and again by moe_check.
void plan_moe(const NodeCheck& c, NodePlan& np) {
  const Node& n = c.n;
  c.need_inputs(1);
  c.need_out();
  c.need_same_shape(n.inputs[0]);
  const int64_t E = c.attr<int64_t>("experts", 0), K = c.attr<int64_t>("top_k", 0);
  const bool shared = c.attr<bool>("shared", false), biases = c.attr<bool>("biases", false);
  const bool shared_gate = shared && c.attr<bool>("shared_gate", true);
  if (E < 1 || E > kMoeMaxExperts) c.bad("experts must be 1.." + std::to_string(kMoeMaxExperts));
  if (K < 1 || K > E) c.bad("top_k must be 1..experts");
  const size_t n_shared = shared ? (shared_gate ? 4 : 3) : 0;
  const bool sel_bias = c.attr<bool>("selection_bias", false);
  const size_t want = 1 + 3 * static_cast<size_t>(E) + n_shared + (biases ? 1 + 3 * static_cast<size_t>(E) : 0) + (sel_bias ? 1 : 0);
  if (n.weights.size() != want) c.bad("expects " + std::to_string(want) + " weights, has " + std::to_string(n.weights.size()));
  const int64_t H = c.width(n.output);
  auto view = [&](size_t k, int64_t rows, int64_t cols) {
    const Tensor& t = c.weight(k);
    if (t.ndim() != 2 || (rows > 0 && t.dim(0) != rows) || t.dim(1) != cols)
      c.bad("weight " + n.weights[k] + " " + t.describe() + " does not fit (" + (rows > 0 ? std::to_string(rows) : "F") + " x " +
            std::to_string(cols) + " expected)");
    if (!matmul_supports(t.dtype()) || t.dim(1) % traits(t.dtype()).block_size != 0)
      c.bad(std::string("no matmul for ") + dtype_name(t.dtype()) + " " + t.describe() + " (" + n.weights[k] + ")");
    return WeightView{t.dtype(), t.dim(0), t.dim(1), t.data(), t.row_bytes()};
  };
  auto m = std::make_unique<NodePlan::Moe>();
  m->p = MoeParams{K, c.attr<bool>("norm_topk_prob", false)};
  const std::string act = c.attr<std::string>("activation", "swiglu");
  if (act != "swiglu" && act != "swiglu_oai") c.bad("activation must be swiglu or swiglu_oai, got '" + act + "'");
  const std::string scoring = c.attr<std::string>("scoring", "softmax");
  if (scoring != "softmax" && scoring != "sigmoid") c.bad("scoring must be softmax or sigmoid, got '" + scoring + "'");
  if (scoring == "sigmoid") m->p.scoring = MoeScoring::Sigmoid;
  m->p.weight_input = c.attr<bool>("weight_input", false);
  m->p.routed_scale = c.attr<float>("routed_scale", 1.0f);
  m->p.groups = c.attr<int64_t>("groups", 0);
  m->p.groups_used = c.attr<int64_t>("groups_used", 0);
  const std::string gscore = c.attr<std::string>("group_score", "max");
  if (gscore != "max" && gscore != "top2_sum") c.bad("group_score must be max or top2_sum, got '" + gscore + "'");
  m->p.group_top2 = gscore == "top2_sum";
  if (sel_bias) {  // the last weight: f32 [E], finite
    const Tensor& t = c.weight(want - 1);
    if (t.dtype() != DType::F32 || t.ndim() != 1 || t.numel() != E)
      c.bad("selection bias " + n.weights[want - 1] + " must be f32 [" + std::to_string(E) + "], got " + t.describe());
    for (int64_t e = 0; e < E; ++e)
      if (!std::isfinite(t.data_as<float>()[e])) c.bad("selection bias of expert " + std::to_string(e) + " is not finite");
    m->p.selection_bias = t.data_as<float>();
  }
  if (act == "swiglu_oai") {
    m->p.activation = MoeActivation::SwiGLUOai;
    m->p.alpha = c.attr<float>("alpha", 1.702f);
    m->p.limit = c.attr<float>("limit", 7.0f);
  }
  m->w.router = view(0, E, H);
  const int64_t F = c.weight(1).ndim() == 2 ? c.weight(1).dim(0) : 0;
  if (F < 1) c.bad("expert width must be >= 1");
  for (int64_t e = 0; e < E; ++e) {
    const size_t k = 1 + 3 * static_cast<size_t>(e);
    m->w.gate.push_back(view(k, F, H));
    m->w.up.push_back(view(k + 1, F, H));
    m->w.down.push_back(view(k + 2, H, F));
  }
  if (shared) {
    size_t k = 1 + 3 * static_cast<size_t>(E);
    m->w.shared = true;
    if (shared_gate) m->w.shared_router = view(k++, 1, H);  // else ungated (Llama 4)
    m->w.shared_gate = view(k, 0, H);
    m->w.shared_up = view(k + 1, m->w.shared_gate.rows, H);
    m->w.shared_down = view(k + 2, H, m->w.shared_gate.rows);
  }
  if (biases) {  // after the matrices: the router's bias [E], then per expert gate [F], up [F], down [H]
    size_t k = 1 + 3 * static_cast<size_t>(E) + n_shared;
    auto vec = [&](size_t i, int64_t len) {
      const Tensor& t = c.weight(i);
      if (t.dtype() != DType::F32 || t.ndim() != 1 || t.numel() != len)
        c.bad("bias " + n.weights[i] + " must be f32 [" + std::to_string(len) + "], got " + t.describe());
      return t.data_as<float>();
    };
    m->w.router_bias = vec(k++, E);
    for (int64_t e = 0; e < E; ++e, k += 3) {
      m->w.gate_bias.push_back(vec(k, F));
      m->w.up_bias.push_back(vec(k + 1, F));
      m->w.down_bias.push_back(vec(k + 2, H));
    }
  }
  try {
    moe_check("moe_ffn", m->w, m->p, nullptr, 0, nullptr);
  } catch (const Error& e) {
    c.bad(e.what());
  }
  np.moe = std::move(m);
}

// Slice: [T, G*W] -> [T, G*w], columns offset..offset+w of each group.
void plan_slice(const NodeCheck& c, NodePlan& np) {
  const Node& n = c.n;
  c.need_inputs(1);
  c.need_out();
  if (!c.is_act(n.inputs[0]) || !c.same_rows(n.inputs[0], n.output)) c.bad("bad input");
  np.group = c.attr<int64_t>("groups", 1);
  np.offset = c.attr<int64_t>("offset", 0);
  const int64_t win = c.width(n.inputs[0]), wout = c.width(n.output);
  if (np.group < 1 || win % np.group != 0 || wout % np.group != 0 || np.offset < 0 ||
      np.offset + wout / np.group > win / np.group)
    c.bad("groups must divide both widths and offset + the output's group width fit the input's group width");
}

// Concat: a[T, G*A], b[T, G*B] -> [T, G*(A+B)].
void plan_concat(const NodeCheck& c, NodePlan& np) {
  const Node& n = c.n;
  c.need_inputs(2);
  c.need_out();
  for (int32_t in : n.inputs)
    if (!c.is_act(in) || !c.same_rows(in, n.output)) c.bad("bad input");
  np.group = c.attr<int64_t>("groups", 1);
  const int64_t wa = c.width(n.inputs[0]), wb = c.width(n.inputs[1]);
  if (np.group < 1 || wa % np.group != 0 || wb % np.group != 0 || wa + wb != c.width(n.output))
    c.bad("groups must divide both inputs' widths, whose sum is the output's");
}

// HeadLinear: x[T, G*K] -> [T, G*N] with W [G*N, K], group g through rows g*N..(g+1)*N.
void plan_head_linear(const NodeCheck& c, NodePlan& np) {
  const Node& n = c.n;
  c.need_inputs(1);
  c.need_out();
  if (n.weights.size() != 1) c.bad("expects 1 weight");
  if (!c.is_act(n.inputs[0]) || !c.same_rows(n.inputs[0], n.output)) c.bad("bad input");
  np.group = c.attr<int64_t>("groups", 0);
  const int64_t G = np.group;
  if (G < 1 || G > 65536 || c.width(n.inputs[0]) % G != 0 || c.width(n.output) % G != 0) c.bad("groups must divide both widths");
  const int64_t K = c.width(n.inputs[0]) / G, N = c.width(n.output) / G;
  const Tensor& t = c.weight(0);
  if (t.ndim() != 2 || t.dim(0) != G * N || t.dim(1) != K)
    c.bad("weight " + n.weights[0] + " " + t.describe() + " is not [" + std::to_string(G * N) + ", " + std::to_string(K) + "]");
  if (!matmul_supports(t.dtype()) || K % traits(t.dtype()).block_size != 0)
    c.bad(std::string("no matmul for ") + dtype_name(t.dtype()) + " " + t.describe());
  const uint8_t* base = static_cast<const uint8_t*>(t.data());
  for (int64_t g = 0; g < G; ++g)
    np.group_w.push_back(WeightView{t.dtype(), N, K, base + static_cast<size_t>(g * N) * t.row_bytes(), t.row_bytes()});
}

NodePlan plan_node(const NodeCheck& c) {
  NodePlan np;
  np.op = c.n.op;
  np.in = c.n.inputs;
  np.out = c.n.output;
  switch (c.n.op) {
    case OpType::Embedding: plan_embedding(c, np); break;
    case OpType::RMSNorm: plan_norm(c, np, false); break;
    case OpType::Linear: plan_linear(c, np); break;
    case OpType::Rope: plan_rope(c, np); break;
    case OpType::UpdateAndAttend:
    case OpType::StaticAttention: plan_attention(c, np); break;
    case OpType::CacheWrite: plan_cache_write(c); break;
    case OpType::Add:
    case OpType::Mul:
    case OpType::SwiGLU: plan_binary(c); break;
    case OpType::GeGLU:
      plan_binary(c);
      plan_gelu_kind(c, np);
      break;
    case OpType::Scale:
    case OpType::Softcap: plan_scale_softcap(c, np); break;
    case OpType::AttnTemperature:
    case OpType::QueryTemperature: plan_attn_temperature(c, np); break;
    case OpType::SelectRows: plan_select_rows(c); break;
    case OpType::MoeFfn: plan_moe(c, np); break;
    case OpType::LayerNorm: plan_norm(c, np, true); break;
    case OpType::Gelu:
      c.need_inputs(1);
      c.need_out();
      c.need_same_shape(c.n.inputs[0]);
      plan_gelu_kind(c, np);
      break;
    case OpType::Slice: plan_slice(c, np); break;
    case OpType::Concat: plan_concat(c, np); break;
    case OpType::HeadLinear: plan_head_linear(c, np); break;
  }
  if (!engine_ops().count(c.n.op)) c.bad("op not supported by this engine");
  return np;
}

// ---- the op functions of a mode, chosen once per executor --------------------------------------
// Reference: the plain ops of ptn::ref on one thread (the pool is not used); Optimized: the SIMD
// ops over the pool. The ops that have one implementation only (copies, bias, temperature,
// row selection) run inline in Executor::step.
struct OpTable {
  void (*embedding)(const WeightView& w, const int32_t* ids, int64_t T, float* out, ThreadPool& pool);
  void (*rms_norm)(const float* x, const NodePlan& np, float* y, int64_t rows, ThreadPool& pool);
  void (*layer_norm)(const float* x, const NodePlan& np, float* y, int64_t rows, ThreadPool& pool);
  void (*matmul)(const WeightView& w, const float* x, int64_t m, float* y, ThreadPool& pool);
  void (*rope)(float* x, const int32_t* pos, int64_t T, const NodePlan& np, ThreadPool& pool);
  void (*attention)(const float* q, const float* k, const float* v, const int32_t* q_pos, const int32_t* kv_pos,
                    int64_t T, int64_t S, const NodePlan& np, float* out, ThreadPool& pool);
  // Element-wise: out[i] = f(a[i], b[i]).
  void (*add)(const float* a, const float* b, float* out, int64_t n, ThreadPool& pool);
  void (*mul)(const float* a, const float* b, float* out, int64_t n, ThreadPool& pool);
  void (*swiglu)(const float* gate, const float* up, float* out, int64_t n, ThreadPool& pool);
  void (*geglu)(const float* gate, const float* up, float* out, int64_t n, ThreadPool& pool);
  void (*geglu_erf)(const float* gate, const float* up, float* out, int64_t n, ThreadPool& pool);
  void (*gelu)(const float* x, float* y, int64_t n, ThreadPool& pool);
  void (*gelu_erf)(const float* x, float* y, int64_t n, ThreadPool& pool);
  void (*scale)(const float* x, float s, float* out, int64_t n, ThreadPool& pool);
  void (*softcap)(float* x, int64_t n, float cap, ThreadPool& pool);
  void (*moe)(NodePlan::Moe& m, const float* x, int64_t T, float* y, ThreadPool& pool);
  void (*head_linear)(NodePlan& np, const float* x, int64_t T, float* y, ThreadPool& pool);
};

// HeadLinear, reference: each group's columns gathered, ref::matmul, scattered back.
void head_linear_ref(NodePlan& np, const float* x, int64_t T, float* y, ThreadPool&) {
  const int64_t G = np.group, K = np.group_w[0].cols, N = np.group_w[0].rows;
  std::vector<float> xs(static_cast<size_t>(T * K)), ys(static_cast<size_t>(T * N));
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t t = 0; t < T; ++t) std::memcpy(&xs[static_cast<size_t>(t * K)], x + (t * G + g) * K, static_cast<size_t>(K) * 4);
    ref::matmul(np.group_w[static_cast<size_t>(g)], xs.data(), T, ys.data());
    for (int64_t t = 0; t < T; ++t) std::memcpy(y + (t * G + g) * N, &ys[static_cast<size_t>(t * N)], static_cast<size_t>(N) * 4);
  }
}

// HeadLinear, optimized: the G products as one batch of matmul_jobs (one pool hand-off); a
// single row reads and writes its groups in place, more rows are gathered by group first.
void head_linear_opt(NodePlan& np, const float* x, int64_t T, float* y, ThreadPool& pool) {
  const int64_t G = np.group, K = np.group_w[0].cols, N = np.group_w[0].rows;
  np.jobs.clear();
  if (T == 1) {
    for (int64_t g = 0; g < G; ++g) np.jobs.push_back({np.group_w[static_cast<size_t>(g)], x + g * K, 1, y + g * N});
    matmul_jobs(np.jobs.data(), static_cast<int>(G), pool);
    return;
  }
  if (np.gx.size() < static_cast<size_t>(T * G * K)) np.gx.resize(static_cast<size_t>(T * G * K));
  if (np.gy.size() < static_cast<size_t>(T * G * N)) np.gy.resize(static_cast<size_t>(T * G * N));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t g = 0; g < G; ++g)
      std::memcpy(&np.gx[static_cast<size_t>((g * T + t) * K)], x + (t * G + g) * K, static_cast<size_t>(K) * 4);
  for (int64_t g = 0; g < G; ++g)
    np.jobs.push_back({np.group_w[static_cast<size_t>(g)], &np.gx[static_cast<size_t>(g * T * K)], T, &np.gy[static_cast<size_t>(g * T * N)]});
  matmul_jobs(np.jobs.data(), static_cast<int>(G), pool);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t g = 0; g < G; ++g)
      std::memcpy(y + (t * G + g) * N, &np.gy[static_cast<size_t>((g * T + t) * N)], static_cast<size_t>(N) * 4);
}

const OpTable kReferenceOps = {
    [](const WeightView& w, const int32_t* ids, int64_t T, float* out, ThreadPool&) {
      ref::embedding(w.data, w.type, w.rows, w.cols, ids, T, out);
    },
    [](const float* x, const NodePlan& np, float* y, int64_t rows, ThreadPool&) {
      ref::rms_norm(x, np.norm_w, y, rows, np.group, np.eps, np.plus_one);
    },
    [](const float* x, const NodePlan& np, float* y, int64_t rows, ThreadPool&) {
      ref::layer_norm(x, np.norm_w, np.norm_b, y, rows, np.group, np.eps);
    },
    [](const WeightView& w, const float* x, int64_t m, float* y, ThreadPool&) { ref::matmul(w, x, m, y); },
    [](float* x, const int32_t* pos, int64_t T, const NodePlan& np, ThreadPool&) {
      ref::rope(x, pos, T, np.heads, np.head_dim, np.rope_dim, np.rope);
    },
    [](const float* q, const float* k, const float* v, const int32_t* q_pos, const int32_t* kv_pos, int64_t T,
       int64_t S, const NodePlan& np, float* out, ThreadPool&) {
      ref::attention(q, k, v, q_pos, kv_pos, T, S, np.heads, np.kv_heads, np.head_dim, np.head_dim_v, np.attend, out);
    },
    [](const float* a, const float* b, float* out, int64_t n, ThreadPool&) { ref::add(a, b, out, n); },
    [](const float* a, const float* b, float* out, int64_t n, ThreadPool&) { ref::mul(a, b, out, n); },
    [](const float* a, const float* b, float* out, int64_t n, ThreadPool&) { ref::swiglu(a, b, out, n); },
    [](const float* a, const float* b, float* out, int64_t n, ThreadPool&) { ref::geglu(a, b, out, n); },
    [](const float* a, const float* b, float* out, int64_t n, ThreadPool&) { ref::geglu_erf(a, b, out, n); },
    [](const float* x, float* y, int64_t n, ThreadPool&) { ref::gelu_tanh(x, y, n); },
    [](const float* x, float* y, int64_t n, ThreadPool&) { ref::gelu_erf(x, y, n); },
    [](const float* x, float s, float* out, int64_t n, ThreadPool&) { ref::scale(x, s, out, n); },
    [](float* x, int64_t n, float cap, ThreadPool&) { ref::softcap(x, n, cap); },
    [](NodePlan::Moe& m, const float* x, int64_t T, float* y, ThreadPool&) { ref::moe_ffn(m.w, m.p, x, T, y); },
    head_linear_ref,
};

const OpTable kOptimizedOps = {
    [](const WeightView& w, const int32_t* ids, int64_t T, float* out, ThreadPool& pool) {
      embedding(w.data, w.type, w.rows, w.cols, ids, T, out, pool);
    },
    [](const float* x, const NodePlan& np, float* y, int64_t rows, ThreadPool& pool) {
      rms_norm(x, np.norm_w, y, rows, np.group, np.eps, np.plus_one, pool);
    },
    [](const float* x, const NodePlan& np, float* y, int64_t rows, ThreadPool& pool) {
      layer_norm(x, np.norm_w, np.norm_b, y, rows, np.group, np.eps, pool);
    },
    [](const WeightView& w, const float* x, int64_t m, float* y, ThreadPool& pool) { matmul(w, x, m, y, pool); },
    [](float* x, const int32_t* pos, int64_t T, const NodePlan& np, ThreadPool& pool) {
      rope(x, pos, T, np.heads, np.head_dim, *np.rope_table, pool);
    },
    [](const float* q, const float* k, const float* v, const int32_t* q_pos, const int32_t* kv_pos, int64_t T,
       int64_t S, const NodePlan& np, float* out, ThreadPool& pool) {
      attention(q, k, v, q_pos, kv_pos, T, S, np.heads, np.kv_heads, np.head_dim, np.head_dim_v, np.attend, out, pool);
    },
    [](const float* a, const float* b, float* out, int64_t n, ThreadPool& pool) { add(a, b, out, n, pool); },
    [](const float* a, const float* b, float* out, int64_t n, ThreadPool& pool) { mul(a, b, out, n, pool); },
    [](const float* a, const float* b, float* out, int64_t n, ThreadPool& pool) { swiglu(a, b, out, n, pool); },
    [](const float* a, const float* b, float* out, int64_t n, ThreadPool& pool) { geglu(a, b, out, n, pool); },
    [](const float* a, const float* b, float* out, int64_t n, ThreadPool& pool) { geglu_erf(a, b, out, n, pool); },
    [](const float* x, float* y, int64_t n, ThreadPool& pool) { gelu_tanh(x, y, n, pool); },
    [](const float* x, float* y, int64_t n, ThreadPool& pool) { gelu_erf(x, y, n, pool); },
    [](const float* x, float s, float* out, int64_t n, ThreadPool& pool) { scale(x, s, out, n, pool); },
    [](float* x, int64_t n, float cap, ThreadPool& pool) { softcap(x, n, cap, pool); },
    [](NodePlan::Moe& m, const float* x, int64_t T, float* y, ThreadPool& pool) {
      moe_ffn(m.w, m.p, x, T, y, m.scratch, pool);
    },
    head_linear_opt,
};

void buffer_write_row(StaticBuffer& b, int64_t row, const float* src) {
  uint8_t* dst = b.data.data() + static_cast<size_t>(row * b.width) * traits(b.dtype).block_bytes;
  if (b.dtype == DType::F32) std::memcpy(dst, src, static_cast<size_t>(b.width) * 4);
  else quantize_row(b.dtype, src, dst, b.width);
}

const float* buffer_rows_f32(const StaticBuffer& b, int64_t rows, std::vector<float>& scratch) {
  if (b.dtype == DType::F32) return reinterpret_cast<const float*>(b.data.data());
  for (int64_t r = 0; r < rows; ++r)
    dequantize_row(b.dtype, b.data.data() + static_cast<size_t>(r * b.width) * 2, scratch.data() + r * b.width, b.width);
  return scratch.data();
}

}  // namespace

// What one step sees: its row counts, the input ids and positions (in the arena), and the
// cache transaction of an off-graph program.
struct StepRun {
  int64_t T = 0, R = 0;  // token rows, selected rows
  const int32_t* ids = nullptr;
  const int32_t* pos = nullptr;
  StepTxn* txn = nullptr;
  KVCache* cache = nullptr;
};

struct Executor::Impl {
  ExecMode mode;
  ThreadPool* pool;
  const OpTable* ops = nullptr;  // kReferenceOps or kOptimizedOps, by mode
  std::vector<ValuePlan> values;
  std::vector<NodePlan> nodes;
  std::shared_ptr<void> arena_owner;
  uint8_t* arena = nullptr;
  size_t arena_size = 0;
  std::unordered_map<int32_t, StaticBuffer> buffers;
  std::vector<float> static_k, static_v;  // f32 views of reduced-precision buffers
  std::vector<int32_t> iota;
  std::vector<int32_t> selected;
  size_t hidden_node = SIZE_MAX;  // the node computing the graph's `hidden` output (SIZE_MAX: none)
  std::unordered_map<SeqId, int64_t> last_row;
  std::vector<SeqId> seq_order;
  std::shared_ptr<uint8_t> packed;  // the weights copied for the kernels (see lay_out_weights)

  float* f32(int32_t v) { return reinterpret_cast<float*>(arena + values[v].offset); }
  int32_t* i32(int32_t v) { return reinterpret_cast<int32_t*>(arena + values[v].offset); }

  // The constructor's phases, in order.
  void plan_values(const Program& p);
  void plan_nodes(const Program& p);
  void fuse_linear_runs();
  void lay_out_weights(const Program& p);
  void plan_arena(const Graph& g, int64_t max_rows);
  void size_static_scratch();

  // A step's parts.
  // `listed`: the rows to select, by index into the batch (nullptr: as `which` says).
  int64_t load_rows(const Program& p, const StepBatch& batch, OutputRows which, const std::vector<int32_t>* listed,
                    int64_t max_rows);
  void run_node(NodePlan& np, const StepRun& s);
};

Executor::~Executor() = default;

size_t Executor::arena_bytes() const { return impl_->arena_size; }

Executor::Executor(std::shared_ptr<const Program> program, ExecMode mode, int64_t max_rows, ThreadPool* pool)
    : impl_(std::make_unique<Impl>()), program_(std::move(program)), max_rows_(max_rows) {
  const Program& p = *program_;
  if (max_rows < 1 || max_rows > (int64_t{1} << 20))
    fail(ErrorKind::InvalidArgument, "executor", "max rows per step must be 1..1048576, got " + std::to_string(max_rows));
  Impl& im = *impl_;
  im.mode = mode;
  im.pool = pool ? pool : &default_pool();
  im.ops = mode == ExecMode::Reference ? &kReferenceOps : &kOptimizedOps;
  im.plan_values(p);
  im.plan_nodes(p);
  // The reference path multiplies node by node: golden samples stay independent of the fusion.
  if (mode == ExecMode::Optimized) im.fuse_linear_runs();
  if (mode == ExecMode::Optimized && weight_repack() && simd_level() == SimdLevel::AVX512) im.lay_out_weights(p);
  if (!im.buffers.empty() != p.meta().static_cache)
    fail(ErrorKind::Corrupt, p.name(), "cache mode and graph buffers disagree");
  im.plan_arena(p.graph(), max_rows);
  im.selected.reserve(static_cast<size_t>(max_rows));
  im.size_static_scratch();
}

// Values: widths and row kinds of the activations, the static buffers, each checked.
void Executor::Impl::plan_values(const Program& p) {
  const Graph& g = p.graph();
  values.resize(g.values.size());
  for (size_t i = 0; i < g.values.size(); ++i) {
    const Value& v = g.values[i];
    ValuePlan& vp = values[i];
    vp.dtype = v.dtype;
    const std::string where = p.name() + ": graph value '" + v.name + "'";
    if (v.kind == ValueKind::Buffer) {
      if (v.shape.size() != 2 || v.shape[0] < 1 || v.shape[1] < 1 || v.shape[0] > (int64_t{1} << 24) ||
          v.shape[1] > kMaxWidth)
        fail(ErrorKind::Corrupt, where, "a buffer must be [positions, width]");
      if (v.dtype != DType::F32 && v.dtype != DType::F16 && v.dtype != DType::BF16)
        fail(ErrorKind::Unsupported, where, "buffer dtype must be f32, f16 or bf16");
      StaticBuffer b;
      b.dtype = v.dtype;
      b.rows = v.shape[0];
      b.width = v.shape[1];
      b.data.assign(static_cast<size_t>(b.rows * b.width) * traits(v.dtype).block_bytes, 0);
      buffers.emplace(static_cast<int32_t>(i), std::move(b));
      continue;
    }
    if (v.kind == ValueKind::Input) {
      if (v.shape != std::vector<int64_t>{kDimT} || v.dtype != DType::I32)
        fail(ErrorKind::Corrupt, where, "inputs must be i32 [T]");
      vp.width = 1;
      continue;
    }
    if (v.shape.size() != 2 || (v.shape[0] != kDimT && v.shape[0] != kDimR) || v.shape[1] < 1 ||
        v.shape[1] > kMaxWidth || v.dtype != DType::F32)
      fail(ErrorKind::Corrupt, where, "activations must be f32 [T or R, width]");
    vp.rows_r = v.shape[0] == kDimR;
    vp.width = v.shape[1];
  }
  if (g.values[g.logits].shape.size() != 2 || g.values[g.logits].shape[1] != p.meta().spec.vocab_size)
    fail(ErrorKind::Corrupt, p.name(), "logits width differs from the vocabulary size");
  if (g.hidden >= 0 && (!values[g.hidden].rows_r || g.values[g.hidden].kind != ValueKind::Activation))
    fail(ErrorKind::Corrupt, p.name() + ": graph output 'hidden'", "must be an activation of the selected rows [R, H]");
}

// Nodes: one typed plan each (plan_node), and the last use of every value.
void Executor::Impl::plan_nodes(const Program& p) {
  const Graph& g = p.graph();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    nodes.push_back(plan_node(NodeCheck{p, g, p.meta().spec, i, n, values, buffers}));
    if (g.hidden >= 0 && n.output == g.hidden) hidden_node = i;
    for (int32_t in : n.inputs) values[in].last_use = static_cast<int>(i);
  }
}

// Linear nodes with one input, back to back: one thread hand-off for all of them.
void Executor::Impl::fuse_linear_runs() {
  for (size_t i = 0; i < nodes.size();) {
    NodePlan& head = nodes[i];
    size_t j = i + 1;
    if (head.op == OpType::Linear && values[head.out].last_use >= 0) {
      while (j < nodes.size() && j - i < static_cast<size_t>(kMatmulMultiMax) && nodes[j].op == OpType::Linear &&
             nodes[j].in[0] == head.in[0] && values[nodes[j].out].last_use >= 0 && nodes[j].w.cols == head.w.cols)
        ++j;
      head.multi = static_cast<int>(j - i);
      for (size_t t = i + 1; t < j; ++t) nodes[t].in_multi = true;
    }
    i = j;
  }
}

namespace {

// Copies matrix `src` into dst (row_bytes x rows, 64-byte aligned): as it is (copy_rows) or
// interleaved for the kernels; returns the view of the copy. The threads of `pool` take a share
// of the row groups each (`g` rows per group or panel).
WeightView copy_matrix(const WeightView& src, uint8_t* dst, bool copy_rows, bool file_backed, ThreadPool& pool) {
  const int64_t g = copy_rows ? 1 : src.type == DType::BF16 ? kP32Rows : kX16Rows;  // rows per group or panel
  const size_t row = row_bytes(src.type, src.cols), group = row * static_cast<size_t>(g);
  WeightView v = src;
  pool.parallel_for(src.rows / g, 16, [&](int64_t g0, int64_t g1, int) {
    WeightView part = src;
    part.rows = (g1 - g0) * g;
    part.data = static_cast<const uint8_t*>(src.data) + static_cast<size_t>(g0 * g) * src.row_stride;
    // Each thread maps its share of the source in one call (rather than one fault per
    // 4 KB page) and copies it. A program mapped from its file then unmaps the pages
    // that lie wholly inside the share: they are not read again, and if they ever are
    // they come back from the file (the page cache keeps them for the next start).
    // A program held in memory keeps its bytes.
    const uintptr_t page = 4096, b = reinterpret_cast<uintptr_t>(part.data),
                    e = b + static_cast<uintptr_t>(part.rows) * part.row_stride;
#ifdef MADV_POPULATE_READ
    ::madvise(reinterpret_cast<void*>(b / page * page), (e + page - 1) / page * page - b / page * page,
              MADV_POPULATE_READ);
#endif
    if (copy_rows) {
      for (int64_t r = 0; r < part.rows; ++r)
        std::memcpy(dst + static_cast<size_t>(g0 + r) * row, static_cast<const uint8_t*>(part.data) + r * part.row_stride,
                    row);
    } else {
      const WeightView done = interleave_rows(part, dst + static_cast<size_t>(g0) * group);
      if (g0 == 0) v.layout = done.layout;
    }
    const uintptr_t ib = (b + page - 1) / page * page, ie = e / page * page;
    if (file_backed && ie > ib) ::madvise(reinterpret_cast<void*>(ib), ie - ib, MADV_DONTNEED);
  });
  v.data = dst;
  v.row_stride = row;
  return v;
}

}  // namespace

// Weights copied for the kernels: Q4_K / Q8_0 / Q4_0 / IQ4_NL / MXFP4 interleaved, BF16 panels, 2 MB pages.
// Every matrix of a linear op is copied once (a matrix two nodes share, once) into one buffer
// in 2 MB pages where the system allows: a decode step streams all of it, and with 4 KB pages
// every 4 KB read also walks the page table (Q4_K_M's Q6_K matrices, copied as they are:
// decode 84-87% -> 90-94% of the read bandwidth, docs/performance.md). Q4_K, Q8_0, Q4_0,
// IQ4_NL and MXFP4 are interleaved 16 rows at a time and BF16 goes in 32-row panels on the way (kernels/matmul.h,
// WeightLayout::X16 / P32; the panels only where the CPU has BF16 dot products). The other
// SIMD levels run from the program's bytes (the copy is untried there): AVX-512 only.
void Executor::Impl::lay_out_weights(const Program& p) {
  auto interleaved = [](const WeightView& w) {
    return can_interleave(w) && (w.type != DType::BF16 || simd_has_bf16());
  };
  auto wanted = [](const WeightView& w) {
    return w.layout == WeightLayout::Rows && w.rows > 0 && w.cols > 0 && w.row_stride >= row_bytes(w.type, w.cols);
  };
  // The matrices of linear nodes and of moe_ffn nodes (router, every expert, the shared expert).
  std::vector<WeightView*> mats;
  for (NodePlan& np : nodes) {
    if (np.op == OpType::Linear) mats.push_back(&np.w);
    if (np.op == OpType::MoeFfn && np.moe) {
      MoeWeights& m = np.moe->w;
      mats.push_back(&m.router);
      for (auto* v : {&m.gate, &m.up, &m.down})
        for (WeightView& w : *v) mats.push_back(&w);
      if (m.shared)
        for (WeightView* w : {&m.shared_router, &m.shared_gate, &m.shared_up, &m.shared_down}) mats.push_back(w);
    }
  }
  std::unordered_map<const void*, size_t> offset;  // by the program's data pointer
  size_t total = 0;
  for (const WeightView* w : mats)
    if (wanted(*w) && offset.emplace(w->data, total).second)
      total += (row_bytes(w->type, w->cols) * static_cast<size_t>(w->rows) + 63) / 64 * 64;
  if (total == 0) return;
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t bytes = (total + kHuge - 1) / kHuge * kHuge;
  uint8_t* mem = static_cast<uint8_t*>(std::aligned_alloc(kHuge, bytes));
  if (!mem)
    fail(ErrorKind::Capacity, p.name(),
         "out of memory for the kernels' copy of the weights (" + std::to_string(bytes) +
             " bytes; --no-repack runs without it)");
  packed.reset(mem, std::free);
  ::madvise(mem, bytes, MADV_HUGEPAGE);
  std::unordered_map<const void*, WeightView> copies;
  const bool file_backed = p.file() != nullptr;  // tensors are views of the read-only file mapping
  for (WeightView* w : mats) {
    if (!wanted(*w)) continue;
    auto it = copies.find(w->data);
    if (it == copies.end())
      it = copies.emplace(w->data, copy_matrix(*w, mem + offset.at(w->data), !interleaved(*w), file_backed, *pool)).first;
    *w = it->second;
  }
}

// Arena plan: every activation gets max_rows rows of the arena from its node on, and gives
// them back after its last use, for values born later to reuse (runtime/arena_plan.h).
void Executor::Impl::plan_arena(const Graph& g, int64_t max_rows) {
  ArenaPlanner plan;
  auto place = [&](int32_t v) {
    values[v].bytes = static_cast<size_t>(max_rows) * static_cast<size_t>(values[v].width) * 4;
    values[v].offset = plan.allocate(values[v].bytes);
  };
  auto release = [&](int32_t v) { plan.release(values[v].offset, values[v].bytes); };
  for (int32_t v : {g.input_ids, g.cache_position}) place(v);
  values[g.logits].last_use = INT32_MAX;
  if (g.hidden >= 0) values[g.hidden].last_use = INT32_MAX;  // read after the step, as the logits
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodePlan& np = nodes[i];
    if (np.out >= 0) place(np.out);
    for (size_t k = 0; k < np.in.size(); ++k) {
      const int32_t in = np.in[k];
      // A value this node reads twice (add(x, x)) is freed once: a second free would hand
      // its memory to two later values at the same time.
      if (std::find(np.in.begin(), np.in.begin() + static_cast<long>(k), in) != np.in.begin() + static_cast<long>(k))
        continue;
      if (values[in].last_use == static_cast<int>(i) && g.values[in].kind == ValueKind::Activation) release(in);
    }
    // An output nobody reads is released at once (a dead value).
    if (np.out >= 0 && values[np.out].last_use < 0) release(np.out);
  }
  arena_size = plan.total();
  arena_owner = aligned_buffer(arena_size);
  arena = static_cast<uint8_t*>(arena_owner.get());
}

// Static-cache programs: position indices and f32 scratch for the widest buffer.
void Executor::Impl::size_static_scratch() {
  if (buffers.empty()) return;
  int64_t rows = 0, widest = 0;
  for (auto& [id, b] : buffers) {
    rows = std::max(rows, b.rows);
    widest = std::max(widest, b.width);
  }
  iota.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) iota[static_cast<size_t>(r)] = static_cast<int32_t>(r);
  static_k.resize(static_cast<size_t>(rows * widest));
  static_v.resize(static_cast<size_t>(rows * widest));
}

void Executor::reset_static_cache() {
  for (auto& [id, b] : impl_->buffers) std::fill(b.data.begin(), b.data.end(), 0);
}

// Writes the batch's ids and positions into the arena and picks the output rows; returns R.
int64_t Executor::Impl::load_rows(const Program& p, const StepBatch& batch, OutputRows which,
                                  const std::vector<int32_t>* listed, int64_t max_rows) {
  const Graph& g = p.graph();
  const ModelSpec& spec = p.meta().spec;
  const int64_t T = static_cast<int64_t>(batch.rows.size());
  if (T < 1 || T > max_rows)
    fail(ErrorKind::InvalidArgument, "executor step",
         "a step needs 1.." + std::to_string(max_rows) + " rows, got " + std::to_string(T));
  int32_t* ids = i32(g.input_ids);
  int32_t* pos = i32(g.cache_position);
  last_row.clear();
  seq_order.clear();
  for (int64_t r = 0; r < T; ++r) {
    const StepRow& row = batch.rows[static_cast<size_t>(r)];
    if (row.token < 0 || row.token >= spec.vocab_size)
      fail(ErrorKind::InvalidArgument, "executor step",
           "row " + std::to_string(r) + ": token id " + std::to_string(row.token) + " outside the vocabulary of " +
               std::to_string(spec.vocab_size));
    if (row.pos < 0) fail(ErrorKind::InvalidArgument, "executor step", "negative position");
    ids[r] = row.token;
    pos[r] = row.pos;
    if (!last_row.count(row.seq)) seq_order.push_back(row.seq);
    last_row[row.seq] = r;
  }
  selected.clear();
  if (listed) {
    if (listed->empty() || static_cast<int64_t>(listed->size()) > T)
      fail(ErrorKind::InvalidArgument, "executor step",
           "a step selects 1.." + std::to_string(T) + " rows, got " + std::to_string(listed->size()));
    for (size_t k = 0; k < listed->size(); ++k) {
      const int32_t r = (*listed)[k];
      if (r < 0 || r >= T)
        fail(ErrorKind::InvalidArgument, "executor step",
             "selected row " + std::to_string(k) + " is " + std::to_string(r) + ", outside the step's " +
                 std::to_string(T) + " rows");
      selected.push_back(r);
    }
  } else if (which == OutputRows::All) {
    for (int64_t r = 0; r < T; ++r) selected.push_back(static_cast<int32_t>(r));
  } else {
    for (SeqId s : seq_order) selected.push_back(static_cast<int32_t>(last_row[s]));
  }
  return static_cast<int64_t>(selected.size());
}

void Executor::Impl::run_node(NodePlan& np, const StepRun& s) {
  const OpTable& op = *ops;
  ThreadPool& tp = *pool;
  const int64_t T = s.T;
  const int32_t* pos = s.pos;
  const int64_t rows_out = np.out >= 0 ? (values[np.out].rows_r ? s.R : T) : T;
  const int64_t wout = np.out >= 0 ? values[np.out].width : 0;
  const int64_t n_el = rows_out * wout;
  float* out = np.out >= 0 ? f32(np.out) : nullptr;
  switch (np.op) {
    case OpType::Embedding:
      op.embedding(np.w, s.ids, T, out, tp);
      if (np.scalar != 1.0f) op.scale(out, np.scalar, out, n_el, tp);
      break;
    case OpType::RMSNorm: op.rms_norm(f32(np.in[0]), np, out, rows_out * (wout / np.group), tp); break;
    case OpType::LayerNorm: op.layer_norm(f32(np.in[0]), np, out, rows_out * (wout / np.group), tp); break;
    case OpType::Gelu: (np.gelu_erf ? op.gelu_erf : op.gelu)(f32(np.in[0]), out, n_el, tp); break;
    case OpType::Linear:
      if (np.multi > 1) {
        // This node and the next multi - 1 (same input): one pass over the pool.
        const size_t first = static_cast<size_t>(&np - nodes.data());
        WeightView ws[kMatmulMultiMax];
        float* ys[kMatmulMultiMax];
        for (int t = 0; t < np.multi; ++t) {
          const NodePlan& o = nodes[first + static_cast<size_t>(t)];
          ws[t] = o.w;
          ys[t] = f32(o.out);
        }
        matmul_multi(ws, ys, np.multi, f32(np.in[0]), rows_out, tp);
      } else if (!np.in_multi) {
        op.matmul(np.w, f32(np.in[0]), rows_out, out, tp);
      }
      if (np.bias)
        for (int64_t r = 0; r < rows_out; ++r)
          for (int64_t c = 0; c < wout; ++c) out[r * wout + c] += np.bias[c];
      break;
    case OpType::Rope:
      std::memcpy(out, f32(np.in[0]), static_cast<size_t>(n_el) * 4);
      op.rope(out, pos, T, np, tp);
      break;
    case OpType::UpdateAndAttend:
      s.cache->update_and_attend(*s.txn, np.layer, f32(np.in[0]), f32(np.in[1]), f32(np.in[2]), np.heads, np.attend,
                                 out);
      break;
    case OpType::CacheWrite: {
      StaticBuffer& b = buffers[np.in[0]];
      const float* src = f32(np.in[1]);
      for (int64_t r = 0; r < T; ++r) buffer_write_row(b, pos[r], src + r * b.width);
      break;
    }
    case OpType::StaticAttention: {
      int64_t S = 0;
      for (int64_t r = 0; r < T; ++r) S = std::max<int64_t>(S, pos[r] + 1);
      const float* k = buffer_rows_f32(buffers[np.kbuf], S, static_k);
      const float* v = buffer_rows_f32(buffers[np.vbuf], S, static_v);
      op.attention(f32(np.in[0]), k, v, pos, iota.data(), T, S, np, out, tp);
      break;
    }
    case OpType::Add: op.add(f32(np.in[0]), f32(np.in[1]), out, n_el, tp); break;
    case OpType::Mul: op.mul(f32(np.in[0]), f32(np.in[1]), out, n_el, tp); break;
    case OpType::SwiGLU: op.swiglu(f32(np.in[0]), f32(np.in[1]), out, n_el, tp); break;
    case OpType::GeGLU: (np.gelu_erf ? op.geglu_erf : op.geglu)(f32(np.in[0]), f32(np.in[1]), out, n_el, tp); break;
    case OpType::Scale: op.scale(f32(np.in[0]), np.scalar, out, n_el, tp); break;
    case OpType::Softcap:
      std::memcpy(out, f32(np.in[0]), static_cast<size_t>(n_el) * 4);
      op.softcap(out, n_el, np.cap, tp);
      break;
    case OpType::AttnTemperature:
    case OpType::QueryTemperature: {
      const float* src = f32(np.in[0]);
      for (int64_t r = 0; r < T; ++r) {
        const double f = std::floor(static_cast<double>(pos[r] + np.pos_offset) / static_cast<double>(np.group));
        const float t = static_cast<float>(std::log(f + 1.0) * np.scalar + 1.0);
        for (int64_t c = 0; c < wout; ++c) out[r * wout + c] = src[r * wout + c] * t;
      }
      break;
    }
    case OpType::MoeFfn: op.moe(*np.moe, f32(np.in[0]), rows_out, out, tp); break;
    case OpType::HeadLinear: op.head_linear(np, f32(np.in[0]), rows_out, out, tp); break;
    case OpType::Slice: {
      const float* src = f32(np.in[0]);
      const int64_t G = np.group, W = values[np.in[0]].width / G, w = wout / G;
      for (int64_t r = 0; r < rows_out; ++r)
        for (int64_t g = 0; g < G; ++g)
          std::memcpy(out + r * wout + g * w, src + r * G * W + g * W + np.offset, static_cast<size_t>(w) * 4);
      break;
    }
    case OpType::Concat: {
      const float* a = f32(np.in[0]);
      const float* b = f32(np.in[1]);
      const int64_t G = np.group, A = values[np.in[0]].width / G, B = values[np.in[1]].width / G;
      for (int64_t r = 0; r < rows_out; ++r)
        for (int64_t g = 0; g < G; ++g) {
          std::memcpy(out + r * wout + g * (A + B), a + (r * G + g) * A, static_cast<size_t>(A) * 4);
          std::memcpy(out + r * wout + g * (A + B) + A, b + (r * G + g) * B, static_cast<size_t>(B) * 4);
        }
      break;
    }
    case OpType::SelectRows: {
      const float* src = f32(np.in[0]);
      for (int64_t r = 0; r < s.R; ++r)
        std::memcpy(out + r * wout, src + selected[static_cast<size_t>(r)] * wout, static_cast<size_t>(wout) * 4);
      break;
    }
  }
}

const float* Executor::step(const StepBatch& batch, OutputRows which, int64_t* n_out) {
  return run_step(batch, which, nullptr, true, n_out);
}

const float* Executor::step_rows(const StepBatch& batch, const std::vector<int32_t>& rows, bool logits,
                                 int64_t* n_out) {
  if (!logits && impl_->hidden_node == SIZE_MAX)
    fail(ErrorKind::Unsupported, program_->name(),
         "the program has no 'hidden' output (exported before embeddings); export it again with this ptn");
  return run_step(batch, OutputRows::All, &rows, logits, n_out);
}

int64_t Executor::hidden_size() const {
  const int32_t h = program_->graph().hidden;
  return h >= 0 && impl_->hidden_node != SIZE_MAX ? impl_->values[h].width : 0;
}

const float* Executor::hidden() const {
  return hidden_size() > 0 ? impl_->f32(program_->graph().hidden) : nullptr;
}

const float* Executor::run_step(const StepBatch& batch, OutputRows which, const std::vector<int32_t>* listed,
                                bool logits, int64_t* n_out) {
  Impl& im = *impl_;
  const Program& p = *program_;
  const Graph& g = p.graph();
  StepRun s;
  s.R = im.load_rows(p, batch, which, listed, max_rows_);
  s.T = static_cast<int64_t>(batch.rows.size());
  s.ids = im.i32(g.input_ids);
  s.pos = im.i32(g.cache_position);
  StepTxn txn;
  if (p.meta().static_cache) {
    if (im.seq_order.size() != 1)
      fail(ErrorKind::InvalidArgument, "executor step", "a static-cache program runs one sequence");
    for (int64_t r = 0; r < s.T; ++r)
      if (s.pos[r] >= p.meta().static_context)
        fail(ErrorKind::Capacity, "executor step",
             "position " + std::to_string(s.pos[r]) + " is beyond the static cache's " +
                 std::to_string(p.meta().static_context) + " positions");
  } else {
    if (!cache_) fail(ErrorKind::InvalidArgument, "executor step", "no KV cache is installed for this program");
    txn = cache_->prepare(batch);
  }
  s.txn = &txn;
  s.cache = cache_;
  // Without logits the step ends with the node computing `hidden`: the ones after it (the
  // classifier) feed only the logits, and every node before it comes first in the graph.
  const size_t end = logits ? im.nodes.size() : im.hidden_node + 1;
  for (size_t i = 0; i < end; ++i) im.run_node(im.nodes[i], s);
  if (txn.active()) cache_->commit(txn);
  *n_out = s.R;
  return logits ? im.f32(g.logits) : nullptr;
}

CacheScope::CacheScope(Executor& exec, KVCache& cache) : exec_(exec) {
  if (exec.program().meta().static_cache)
    fail(ErrorKind::InvalidArgument, "cache scope", "a static-cache program holds its own cache");
  if (exec.cache_) fail(ErrorKind::InvalidArgument, "cache scope", "a cache is already installed for this program");
  const CacheSpec& want = exec.program().meta().cache_spec;
  const CacheSpec& have = cache.spec();
  bool fits = want.layers.size() == have.layers.size();
  for (size_t l = 0; fits && l < want.layers.size(); ++l) {
    const auto &a = want.layers[l], &b = have.layers[l];
    fits = a.n_kv_heads == b.n_kv_heads && a.head_dim_k == b.head_dim_k && a.head_dim_v == b.head_dim_v &&
           a.kind == b.kind && a.span == b.span && a.sinks == b.sinks;
  }
  if (!fits) fail(ErrorKind::InvalidArgument, "cache scope", "the cache was sized for a different cache spec");
  exec.cache_ = &cache;
}

CacheScope::~CacheScope() { exec_.cache_ = nullptr; }

}  // namespace ptn
