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
#include "core/fp16.h"
#include "core/quant.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace ptn {

const std::set<OpType>& engine_ops() {
  static const std::set<OpType> ops = {OpType::Embedding, OpType::RMSNorm,    OpType::Linear,
                                       OpType::Rope,      OpType::UpdateAndAttend, OpType::Add,
                                       OpType::Mul,       OpType::Scale,      OpType::Softcap,
                                       OpType::SwiGLU,    OpType::GeGLU,      OpType::SelectRows,
                                       OpType::CacheWrite, OpType::StaticAttention, OpType::AttnTemperature};
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
  float eps = 0, scalar = 1, cap = 0;
  bool plus_one = false;
  int64_t group = 0;
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
  try {
    return n.attrs.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    bad_node(p, i, n, std::string("attribute '") + key + "' has the wrong type");
  }
}

}  // namespace

struct Executor::Impl {
  ExecMode mode;
  ThreadPool* pool;
  std::vector<ValuePlan> values;
  std::vector<NodePlan> nodes;
  std::shared_ptr<void> arena_owner;
  uint8_t* arena = nullptr;
  size_t arena_size = 0;
  std::unordered_map<int32_t, StaticBuffer> buffers;
  std::vector<float> static_k, static_v;  // f32 views of reduced-precision buffers
  std::vector<int32_t> iota;
  std::vector<int32_t> selected;
  std::unordered_map<SeqId, int64_t> last_row;
  std::vector<SeqId> seq_order;
  std::shared_ptr<uint8_t> packed;  // the weights copied for the kernels (see the constructor)

  float* f32(int32_t v) { return reinterpret_cast<float*>(arena + values[v].offset); }
  int32_t* i32(int32_t v) { return reinterpret_cast<int32_t*>(arena + values[v].offset); }
};

Executor::~Executor() = default;

size_t Executor::arena_bytes() const { return impl_->arena_size; }

Executor::Executor(std::shared_ptr<const Program> program, ExecMode mode, int64_t max_rows, ThreadPool* pool)
    : impl_(std::make_unique<Impl>()), program_(std::move(program)), max_rows_(max_rows) {
  const Program& p = *program_;
  const Graph& g = p.graph();
  const ModelSpec& spec = p.meta().spec;
  if (max_rows < 1 || max_rows > (int64_t{1} << 20))
    fail(ErrorKind::InvalidArgument, "executor", "max rows per step must be 1..1048576, got " + std::to_string(max_rows));
  Impl& im = *impl_;
  im.mode = mode;
  im.pool = pool ? pool : &default_pool();

  // --- values: widths, row kinds ---------------------------------------------------------
  im.values.resize(g.values.size());
  for (size_t i = 0; i < g.values.size(); ++i) {
    const Value& v = g.values[i];
    ValuePlan& vp = im.values[i];
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
      im.buffers.emplace(static_cast<int32_t>(i), std::move(b));
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
  if (g.values[g.logits].shape.size() != 2 || g.values[g.logits].shape[1] != spec.vocab_size)
    fail(ErrorKind::Corrupt, p.name(), "logits width differs from the vocabulary size");

  // --- nodes: typed plans, every shape checked against the weights -------------------------
  auto width = [&](int32_t v) { return im.values[v].width; };
  auto is_act = [&](int32_t v) { return g.values[v].kind == ValueKind::Activation; };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    NodePlan np;
    np.op = n.op;
    np.in = n.inputs;
    np.out = n.output;
    auto need_inputs = [&](size_t k) {
      if (n.inputs.size() != k) bad_node(p, i, n, "expects " + std::to_string(k) + " inputs");
    };
    auto need_out = [&]() {
      if (n.output < 0) bad_node(p, i, n, "has no output");
    };
    auto weight = [&](size_t k) -> const Tensor& {
      if (n.weights.size() <= k) bad_node(p, i, n, "weight " + std::to_string(k) + " missing");
      return p.tensor(n.weights[k]);
    };
    auto same_rows = [&](int32_t a, int32_t b) { return im.values[a].rows_r == im.values[b].rows_r; };
    switch (n.op) {
      case OpType::Embedding: {
        need_inputs(1);
        need_out();
        if (n.inputs[0] != g.input_ids) bad_node(p, i, n, "must read input_ids");
        const Tensor& t = weight(0);
        if (t.ndim() != 2 || t.dim(1) != width(n.output) || t.dim(0) != spec.vocab_size)
          bad_node(p, i, n, "table " + t.describe() + " does not fit vocab " + std::to_string(spec.vocab_size) +
                                " x width " + std::to_string(width(n.output)));
        np.w = WeightView{t.dtype(), t.dim(0), t.dim(1), t.data(), t.row_bytes()};
        np.scalar = attr<float>(p, i, n, "scale", 1.0f);
        break;
      }
      case OpType::RMSNorm: {
        need_inputs(1);
        need_out();
        if (!is_act(n.inputs[0]) || width(n.inputs[0]) != width(n.output) || !same_rows(n.inputs[0], n.output))
          bad_node(p, i, n, "input and output shapes differ");
        np.group = attr<int64_t>(p, i, n, "group", width(n.output));
        if (np.group < 1 || width(n.output) % np.group != 0) bad_node(p, i, n, "group does not divide the width");
        if (!n.weights.empty()) {  // no weight: plain RMS normalisation (Llama 4's q/k L2 norm)
          const Tensor& t = weight(0);
          if (t.dtype() != DType::F32 || t.numel() != np.group || t.ndim() != 1)
            bad_node(p, i, n, "norm weight must be f32 [" + std::to_string(np.group) + "], got " + t.describe());
          np.norm_w = t.data_as<float>();
        }
        np.eps = attr<float>(p, i, n, "eps", 1e-6f);
        np.plus_one = attr<bool>(p, i, n, "plus_one", false);
        if (!(np.eps >= 0.0f) || np.eps > 1.0f) bad_node(p, i, n, "eps out of range");
        break;
      }
      case OpType::Linear: {
        need_inputs(1);
        need_out();
        if (!is_act(n.inputs[0]) || !same_rows(n.inputs[0], n.output)) bad_node(p, i, n, "bad input");
        const Tensor& t = weight(0);
        if (t.ndim() != 2 || t.dim(1) != width(n.inputs[0]) || t.dim(0) != width(n.output))
          bad_node(p, i, n, "weight " + n.weights[0] + " " + t.describe() + " does not map width " +
                                std::to_string(width(n.inputs[0])) + " to " + std::to_string(width(n.output)));
        if (!matmul_supports(t.dtype())) bad_node(p, i, n, std::string("no matmul for ") + dtype_name(t.dtype()));
        np.w = WeightView{t.dtype(), t.dim(0), t.dim(1), t.data(), t.row_bytes()};
        if (n.weights.size() > 1) {
          const Tensor& b = weight(1);
          if (b.dtype() != DType::F32 || b.numel() != t.dim(0) || b.ndim() != 1)
            bad_node(p, i, n, "bias " + n.weights[1] + " must be f32 [" + std::to_string(t.dim(0)) + "]");
          np.bias = b.data_as<float>();
        }
        break;
      }
      case OpType::Rope: {
        need_inputs(2);
        need_out();
        if (n.inputs[1] != g.cache_position) bad_node(p, i, n, "second input must be cache_position");
        np.heads = attr<int64_t>(p, i, n, "heads", 0);
        np.head_dim = attr<int64_t>(p, i, n, "head_dim", 0);
        np.rope_dim = attr<int64_t>(p, i, n, "rope_dim", np.head_dim);
        if (np.heads < 1 || np.head_dim < 2 || np.heads * np.head_dim != width(n.output) ||
            width(n.inputs[0]) != width(n.output) || np.rope_dim < 2 || np.rope_dim > np.head_dim ||
            np.rope_dim % 2 != 0)
          bad_node(p, i, n, "heads x head_dim must equal the width and rope_dim be even and <= head_dim");
        RopeParams& rp = np.rope;
        rp.theta = attr<double>(p, i, n, "theta", 10000.0);
        if (!(rp.theta > 1.0) || rp.theta > 1e12) bad_node(p, i, n, "theta out of range");
        std::string pairing = attr<std::string>(p, i, n, "pairing", "half");
        rp.pairing = pairing == "interleaved" ? RopePairing::Interleaved : RopePairing::HalfSplit;
        std::string sc = attr<std::string>(p, i, n, "scaling", "none");
        rp.scaling = sc == "linear"   ? RopeFreqScaling::Linear
                     : sc == "llama3" ? RopeFreqScaling::Llama3
                     : sc == "yarn"   ? RopeFreqScaling::Yarn
                                      : RopeFreqScaling::None;
        rp.factor = attr<double>(p, i, n, "factor", 1.0);
        rp.low_freq_factor = attr<double>(p, i, n, "low_freq_factor", 1.0);
        rp.high_freq_factor = attr<double>(p, i, n, "high_freq_factor", 4.0);
        rp.original_max_position = attr<int64_t>(p, i, n, "original_max_position", 0);
        rp.beta_fast = attr<double>(p, i, n, "beta_fast", 32.0);
        rp.beta_slow = attr<double>(p, i, n, "beta_slow", 1.0);
        double af = attr<double>(p, i, n, "attn_factor", 1.0);
        rp.attn_factor = af == 1.0 ? 0.0 : af;
        if (rp.scaling != RopeFreqScaling::None && !(rp.factor > 0.0)) bad_node(p, i, n, "scaling factor must be > 0");
        np.rope_table = std::make_unique<RopeTable>(rp, np.rope_dim);
        break;
      }
      case OpType::UpdateAndAttend:
      case OpType::StaticAttention: {
        need_inputs(n.op == OpType::UpdateAndAttend ? 4 : 4);
        need_out();
        np.layer = attr<int64_t>(p, i, n, "layer", -1);
        np.heads = attr<int64_t>(p, i, n, "heads", 0);
        np.kv_heads = attr<int64_t>(p, i, n, "kv_heads", 0);
        np.head_dim = attr<int64_t>(p, i, n, "head_dim", 0);
        np.head_dim_v = attr<int64_t>(p, i, n, "head_dim_v", np.head_dim);
        np.attend.scale = attr<float>(p, i, n, "scale", 1.0f);
        np.attend.softcap = attr<float>(p, i, n, "softcap", 0.0f);
        const auto& cs = p.meta().cache_spec;
        if (np.layer < 0 || np.layer >= static_cast<int64_t>(cs.layers.size()))
          bad_node(p, i, n, "layer out of range of the cache spec");
        const LayerCacheSpec& lc = cs.layers[static_cast<size_t>(np.layer)];
        np.attend.kind = lc.kind;
        np.attend.span = lc.span;
        if (np.heads < 1 || np.kv_heads < 1 || np.heads % np.kv_heads != 0 || np.head_dim < 1 || np.head_dim_v < 1 ||
            lc.n_kv_heads != np.kv_heads || lc.head_dim_k != np.head_dim || lc.head_dim_v != np.head_dim_v)
          bad_node(p, i, n, "heads/kv heads/head dims inconsistent with each other or the cache spec");
        if (!(np.attend.softcap >= 0.0f) || !std::isfinite(np.attend.scale)) bad_node(p, i, n, "bad scale/softcap");
        int32_t q = n.inputs[0];
        if (width(q) != np.heads * np.head_dim || width(n.output) != np.heads * np.head_dim_v)
          bad_node(p, i, n, "q/output widths do not match heads x head_dim");
        if (n.inputs[3] != g.cache_position) bad_node(p, i, n, "fourth input must be cache_position");
        if (n.op == OpType::UpdateAndAttend) {
          if (width(n.inputs[1]) != np.kv_heads * np.head_dim || width(n.inputs[2]) != np.kv_heads * np.head_dim_v)
            bad_node(p, i, n, "k/v widths do not match kv_heads x head_dim");
        } else {
          np.kbuf = n.inputs[1];
          np.vbuf = n.inputs[2];
          if (!im.buffers.count(np.kbuf) || !im.buffers.count(np.vbuf) ||
              im.buffers[np.kbuf].width != np.kv_heads * np.head_dim ||
              im.buffers[np.vbuf].width != np.kv_heads * np.head_dim_v)
            bad_node(p, i, n, "needs K and V buffers of kv_heads x head_dim columns");
        }
        break;
      }
      case OpType::CacheWrite: {
        need_inputs(3);
        if (!im.buffers.count(n.inputs[0])) bad_node(p, i, n, "first input must be a buffer");
        if (n.inputs[2] != g.cache_position) bad_node(p, i, n, "third input must be cache_position");
        if (!is_act(n.inputs[1]) || width(n.inputs[1]) != im.buffers[n.inputs[0]].width)
          bad_node(p, i, n, "rows do not fit the buffer width");
        break;
      }
      case OpType::Add:
      case OpType::Mul:
      case OpType::SwiGLU:
      case OpType::GeGLU:
        need_inputs(2);
        need_out();
        for (int32_t in : n.inputs)
          if (!is_act(in) || width(in) != width(n.output) || !same_rows(in, n.output))
            bad_node(p, i, n, "operand shapes differ");
        break;
      case OpType::Scale:
      case OpType::Softcap:
        need_inputs(1);
        need_out();
        if (!is_act(n.inputs[0]) || width(n.inputs[0]) != width(n.output) || !same_rows(n.inputs[0], n.output))
          bad_node(p, i, n, "input and output shapes differ");
        np.scalar = attr<float>(p, i, n, "scale", 1.0f);
        np.cap = attr<float>(p, i, n, "cap", 0.0f);
        if (n.op == OpType::Softcap && !(np.cap > 0.0f)) bad_node(p, i, n, "cap must be > 0");
        break;
      case OpType::AttnTemperature:
        need_inputs(2);
        need_out();
        if (n.inputs[1] != g.cache_position) bad_node(p, i, n, "second input must be cache_position");
        if (!is_act(n.inputs[0]) || width(n.inputs[0]) != width(n.output) || !same_rows(n.inputs[0], n.output))
          bad_node(p, i, n, "input and output shapes differ");
        np.scalar = attr<float>(p, i, n, "scale", 0.0f);
        np.group = attr<int64_t>(p, i, n, "floor", 0);
        if (!(np.scalar > 0.0f) || np.group < 1) bad_node(p, i, n, "needs scale > 0 and floor >= 1");
        break;
      case OpType::SelectRows:
        need_inputs(1);
        need_out();
        if (!is_act(n.inputs[0]) || im.values[n.inputs[0]].rows_r || !im.values[n.output].rows_r ||
            width(n.inputs[0]) != width(n.output))
          bad_node(p, i, n, "maps [T, H] to [R, H]");
        break;
    }
    if (!engine_ops().count(n.op)) bad_node(p, i, n, "op not supported by this engine");
    for (int32_t in : n.inputs) im.values[in].last_use = static_cast<int>(i);
    im.nodes.push_back(std::move(np));
  }
  // --- Linear nodes with one input, back to back: one thread hand-off for all of them -------
  for (size_t i = 0; i < im.nodes.size();) {
    NodePlan& head = im.nodes[i];
    size_t j = i + 1;
    if (head.op == OpType::Linear && im.values[head.out].last_use >= 0) {
      while (j < im.nodes.size() && j - i < static_cast<size_t>(kMatmulMultiMax) && im.nodes[j].op == OpType::Linear &&
             im.nodes[j].in[0] == head.in[0] && im.values[im.nodes[j].out].last_use >= 0 &&
             im.nodes[j].w.cols == head.w.cols)
        ++j;
      head.multi = static_cast<int>(j - i);
      for (size_t t = i + 1; t < j; ++t) im.nodes[t].in_multi = true;
    }
    i = j;
  }
  // --- weights copied for the kernels: Q4_K / Q8_0 interleaved, BF16 panels, 2 MB pages -----
  // Every matrix of a linear op is copied once (a matrix two nodes share, once) into one buffer
  // in 2 MB pages where the system allows: a decode step streams all of it, and with 4 KB pages
  // every 4 KB read also walks the page table (Q4_K_M's Q6_K matrices, copied as they are:
  // decode 84-87% -> 90-94% of the read bandwidth, docs/performance.md). Q4_K and Q8_0 are
  // interleaved 16 rows at a time and BF16 goes in 32-row panels on the way (kernels/matmul.h,
  // WeightLayout::X16 / P32; the panels only where the CPU has BF16 dot products). The other
  // SIMD levels run from the program's bytes (the copy is untried there).
  if (mode == ExecMode::Optimized && weight_repack() && simd_level() == SimdLevel::AVX512) {
    auto interleaved = [](const NodePlan& np) {
      return can_interleave(np.w) && (np.w.type != DType::BF16 || simd_has_bf16());
    };
    auto wanted = [](const NodePlan& np) {
      return np.op == OpType::Linear && np.w.layout == WeightLayout::Rows && np.w.rows > 0 && np.w.cols > 0 &&
             np.w.row_stride >= row_bytes(np.w.type, np.w.cols);
    };
    std::unordered_map<const void*, size_t> offset;  // by the program's data pointer
    size_t total = 0;
    for (const NodePlan& np : im.nodes)
      if (wanted(np) && offset.emplace(np.w.data, total).second)
        total += (row_bytes(np.w.type, np.w.cols) * static_cast<size_t>(np.w.rows) + 63) / 64 * 64;
    if (total > 0) {
      constexpr size_t kHuge = size_t{2} << 20;
      const size_t bytes = (total + kHuge - 1) / kHuge * kHuge;
      uint8_t* mem = static_cast<uint8_t*>(std::aligned_alloc(kHuge, bytes));
      if (!mem)
        fail(ErrorKind::Capacity, p.name(),
             "out of memory for the kernels' copy of the weights (" + std::to_string(bytes) +
                 " bytes; --no-repack runs without it)");
      im.packed.reset(mem, std::free);
      ::madvise(mem, bytes, MADV_HUGEPAGE);
      std::unordered_map<const void*, WeightView> packed;
      const bool file_backed = p.file() != nullptr;  // tensors are views of the read-only file mapping
      for (NodePlan& np : im.nodes) {
        if (!wanted(np)) continue;
        auto it = packed.find(np.w.data);
        if (it == packed.end()) {
          const WeightView src = np.w;
          const bool copy_rows = !interleaved(np);
          const int64_t g = copy_rows ? 1 : src.type == DType::BF16 ? kP32Rows : kX16Rows;  // rows per group or panel
          const size_t row = row_bytes(src.type, src.cols), group = row * static_cast<size_t>(g);
          uint8_t* dst = mem + offset.at(src.data);
          WeightView v = src;
          im.pool->parallel_for(src.rows / g, 16, [&](int64_t g0, int64_t g1, int) {
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
                std::memcpy(dst + static_cast<size_t>(g0 + r) * row,
                            static_cast<const uint8_t*>(part.data) + r * part.row_stride, row);
            } else {
              const WeightView done = interleave_rows(part, dst + static_cast<size_t>(g0) * group);
              if (g0 == 0) v.layout = done.layout;
            }
            const uintptr_t ib = (b + page - 1) / page * page, ie = e / page * page;
            if (file_backed && ie > ib) ::madvise(reinterpret_cast<void*>(ib), ie - ib, MADV_DONTNEED);
          });
          v.data = dst;
          v.row_stride = row;
          it = packed.emplace(src.data, v).first;
        }
        np.w = it->second;
      }
    }
  }
  const bool has_buffers = !im.buffers.empty();
  if (has_buffers != p.meta().static_cache)
    fail(ErrorKind::Corrupt, p.name(), "cache mode and graph buffers disagree");

  // --- arena plan: reuse the memory of values after their last use --------------------------
  struct Free {
    size_t off, size;
  };
  std::vector<Free> free_list;
  size_t top = 0;
  auto alloc = [&](size_t bytes) -> size_t {
    bytes = (bytes + 63) / 64 * 64;
    size_t best = SIZE_MAX;
    for (size_t k = 0; k < free_list.size(); ++k)
      if (free_list[k].size >= bytes && (best == SIZE_MAX || free_list[k].size < free_list[best].size)) best = k;
    if (best != SIZE_MAX) {
      size_t off = free_list[best].off;
      free_list[best].off += bytes;
      free_list[best].size -= bytes;
      if (free_list[best].size == 0) free_list.erase(free_list.begin() + static_cast<long>(best));
      return off;
    }
    size_t off = top;
    top += bytes;
    return off;
  };
  auto release = [&](int32_t v) {
    ValuePlan& vp = im.values[v];
    size_t bytes = (vp.bytes + 63) / 64 * 64;
    free_list.push_back({vp.offset, bytes});
    std::sort(free_list.begin(), free_list.end(), [](const Free& a, const Free& b) { return a.off < b.off; });
    std::vector<Free> merged;
    for (const Free& f : free_list) {
      if (!merged.empty() && merged.back().off + merged.back().size == f.off) merged.back().size += f.size;
      else merged.push_back(f);
    }
    free_list.swap(merged);
  };
  auto value_bytes = [&](int32_t v) {
    return static_cast<size_t>(max_rows) * static_cast<size_t>(im.values[v].width) * 4;
  };
  for (int32_t v : {g.input_ids, g.cache_position}) {
    im.values[v].bytes = value_bytes(v);
    im.values[v].offset = alloc(im.values[v].bytes);
  }
  im.values[g.logits].last_use = INT32_MAX;
  for (size_t i = 0; i < im.nodes.size(); ++i) {
    NodePlan& np = im.nodes[i];
    if (np.out >= 0) {
      im.values[np.out].bytes = value_bytes(np.out);
      im.values[np.out].offset = alloc(im.values[np.out].bytes);
    }
    for (size_t k = 0; k < np.in.size(); ++k) {
      const int32_t in = np.in[k];
      // A value this node reads twice (add(x, x)) is freed once: a second free would hand
      // its memory to two later values at the same time.
      if (std::find(np.in.begin(), np.in.begin() + static_cast<long>(k), in) != np.in.begin() + static_cast<long>(k))
        continue;
      const ValuePlan& vp = im.values[in];
      if (vp.last_use == static_cast<int>(i) && g.values[in].kind == ValueKind::Activation) release(in);
    }
    // An output nobody reads is released at once (a dead value).
    if (np.out >= 0 && im.values[np.out].last_use < 0) release(np.out);
  }
  im.arena_size = top;
  im.arena_owner = aligned_buffer(top);
  im.arena = static_cast<uint8_t*>(im.arena_owner.get());
  im.selected.reserve(static_cast<size_t>(max_rows));
  if (has_buffers) {
    int64_t rows = 0, widest = 0;
    for (auto& [id, b] : im.buffers) {
      rows = std::max(rows, b.rows);
      widest = std::max(widest, b.width);
    }
    im.iota.resize(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) im.iota[static_cast<size_t>(r)] = static_cast<int32_t>(r);
    im.static_k.resize(static_cast<size_t>(rows * widest));
    im.static_v.resize(static_cast<size_t>(rows * widest));
  }
}

void Executor::reset_static_cache() {
  for (auto& [id, b] : impl_->buffers) std::fill(b.data.begin(), b.data.end(), 0);
}

namespace {

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

const float* Executor::step(const StepBatch& batch, OutputRows which, int64_t* n_out) {
  Impl& im = *impl_;
  const Program& p = *program_;
  const Graph& g = p.graph();
  const ModelSpec& spec = p.meta().spec;
  const int64_t T = static_cast<int64_t>(batch.rows.size());
  if (T < 1 || T > max_rows_)
    fail(ErrorKind::InvalidArgument, "executor step",
         "a step needs 1.." + std::to_string(max_rows_) + " rows, got " + std::to_string(T));
  int32_t* ids = im.i32(g.input_ids);
  int32_t* pos = im.i32(g.cache_position);
  im.last_row.clear();
  im.seq_order.clear();
  for (int64_t r = 0; r < T; ++r) {
    const StepRow& row = batch.rows[static_cast<size_t>(r)];
    if (row.token < 0 || row.token >= spec.vocab_size)
      fail(ErrorKind::InvalidArgument, "executor step",
           "row " + std::to_string(r) + ": token id " + std::to_string(row.token) + " outside the vocabulary of " +
               std::to_string(spec.vocab_size));
    if (row.pos < 0) fail(ErrorKind::InvalidArgument, "executor step", "negative position");
    ids[r] = row.token;
    pos[r] = row.pos;
    if (!im.last_row.count(row.seq)) im.seq_order.push_back(row.seq);
    im.last_row[row.seq] = r;
  }
  im.selected.clear();
  if (which == OutputRows::All) {
    for (int64_t r = 0; r < T; ++r) im.selected.push_back(static_cast<int32_t>(r));
  } else {
    for (SeqId s : im.seq_order) im.selected.push_back(static_cast<int32_t>(im.last_row[s]));
  }
  const int64_t R = static_cast<int64_t>(im.selected.size());

  StepTxn txn;
  if (p.meta().static_cache) {
    if (im.seq_order.size() != 1)
      fail(ErrorKind::InvalidArgument, "executor step", "a static-cache program runs one sequence");
    for (int64_t r = 0; r < T; ++r)
      if (pos[r] >= p.meta().static_context)
        fail(ErrorKind::Capacity, "executor step",
             "position " + std::to_string(pos[r]) + " is beyond the static cache's " +
                 std::to_string(p.meta().static_context) + " positions");
  } else {
    if (!cache_) fail(ErrorKind::InvalidArgument, "executor step", "no KV cache is installed for this program");
    txn = cache_->prepare(batch);
  }

  const bool ref_mode = im.mode == ExecMode::Reference;
  ThreadPool& pool = *im.pool;
  for (NodePlan& np : im.nodes) {
    const int64_t rows_out = np.out >= 0 ? (im.values[np.out].rows_r ? R : T) : T;
    const int64_t wout = np.out >= 0 ? im.values[np.out].width : 0;
    const int64_t n_el = rows_out * wout;
    float* out = np.out >= 0 ? im.f32(np.out) : nullptr;
    switch (np.op) {
      case OpType::Embedding:
        if (ref_mode) ref::embedding(np.w.data, np.w.type, np.w.rows, np.w.cols, ids, T, out);
        else embedding(np.w.data, np.w.type, np.w.rows, np.w.cols, ids, T, out, pool);
        if (np.scalar != 1.0f) {
          if (ref_mode) ref::scale(out, np.scalar, out, n_el);
          else scale(out, np.scalar, out, n_el, pool);
        }
        break;
      case OpType::RMSNorm: {
        const int64_t rows = rows_out * (wout / np.group);
        if (ref_mode) ref::rms_norm(im.f32(np.in[0]), np.norm_w, out, rows, np.group, np.eps, np.plus_one);
        else rms_norm(im.f32(np.in[0]), np.norm_w, out, rows, np.group, np.eps, np.plus_one, pool);
        break;
      }
      case OpType::Linear:
        if (ref_mode) {
          ref::matmul(np.w, im.f32(np.in[0]), rows_out, out);
        } else if (np.multi > 1) {
          // This node and the next multi - 1 (same input): one pass over the pool.
          const size_t first = static_cast<size_t>(&np - im.nodes.data());
          WeightView ws[kMatmulMultiMax];
          float* ys[kMatmulMultiMax];
          for (int t = 0; t < np.multi; ++t) {
            const NodePlan& o = im.nodes[first + static_cast<size_t>(t)];
            ws[t] = o.w;
            ys[t] = im.f32(o.out);
          }
          matmul_multi(ws, ys, np.multi, im.f32(np.in[0]), rows_out, pool);
        } else if (!np.in_multi) {
          matmul(np.w, im.f32(np.in[0]), rows_out, out, pool);
        }
        if (np.bias)
          for (int64_t r = 0; r < rows_out; ++r)
            for (int64_t c = 0; c < wout; ++c) out[r * wout + c] += np.bias[c];
        break;
      case OpType::Rope:
        std::memcpy(out, im.f32(np.in[0]), static_cast<size_t>(n_el) * 4);
        if (ref_mode) ref::rope(out, pos, T, np.heads, np.head_dim, np.rope_dim, np.rope);
        else rope(out, pos, T, np.heads, np.head_dim, *np.rope_table, pool);
        break;
      case OpType::UpdateAndAttend:
        cache_->update_and_attend(txn, np.layer, im.f32(np.in[0]), im.f32(np.in[1]), im.f32(np.in[2]), np.heads,
                                  np.attend, out);
        break;
      case OpType::CacheWrite: {
        StaticBuffer& b = im.buffers[np.in[0]];
        const float* src = im.f32(np.in[1]);
        for (int64_t r = 0; r < T; ++r) buffer_write_row(b, pos[r], src + r * b.width);
        break;
      }
      case OpType::StaticAttention: {
        int64_t S = 0;
        for (int64_t r = 0; r < T; ++r) S = std::max<int64_t>(S, pos[r] + 1);
        const StaticBuffer& kb = im.buffers[np.kbuf];
        const StaticBuffer& vb = im.buffers[np.vbuf];
        const float* k = buffer_rows_f32(kb, S, im.static_k);
        const float* v = buffer_rows_f32(vb, S, im.static_v);
        if (ref_mode)
          ref::attention(im.f32(np.in[0]), k, v, pos, im.iota.data(), T, S, np.heads, np.kv_heads, np.head_dim,
                         np.head_dim_v, np.attend, out);
        else
          attention(im.f32(np.in[0]), k, v, pos, im.iota.data(), T, S, np.heads, np.kv_heads, np.head_dim,
                    np.head_dim_v, np.attend, out, pool);
        break;
      }
      case OpType::Add:
        if (ref_mode) ref::add(im.f32(np.in[0]), im.f32(np.in[1]), out, n_el);
        else add(im.f32(np.in[0]), im.f32(np.in[1]), out, n_el, pool);
        break;
      case OpType::Mul:
        if (ref_mode) ref::mul(im.f32(np.in[0]), im.f32(np.in[1]), out, n_el);
        else mul(im.f32(np.in[0]), im.f32(np.in[1]), out, n_el, pool);
        break;
      case OpType::SwiGLU:
        if (ref_mode) ref::swiglu(im.f32(np.in[0]), im.f32(np.in[1]), out, n_el);
        else swiglu(im.f32(np.in[0]), im.f32(np.in[1]), out, n_el, pool);
        break;
      case OpType::GeGLU:
        if (ref_mode) ref::geglu(im.f32(np.in[0]), im.f32(np.in[1]), out, n_el);
        else geglu(im.f32(np.in[0]), im.f32(np.in[1]), out, n_el, pool);
        break;
      case OpType::Scale:
        if (ref_mode) ref::scale(im.f32(np.in[0]), np.scalar, out, n_el);
        else scale(im.f32(np.in[0]), np.scalar, out, n_el, pool);
        break;
      case OpType::Softcap:
        std::memcpy(out, im.f32(np.in[0]), static_cast<size_t>(n_el) * 4);
        if (ref_mode) ref::softcap(out, n_el, np.cap);
        else softcap(out, n_el, np.cap, pool);
        break;
      case OpType::AttnTemperature: {
        const float* src = im.f32(np.in[0]);
        for (int64_t r = 0; r < T; ++r) {
          const double f = std::floor(static_cast<double>(pos[r] + 1) / static_cast<double>(np.group));
          const float t = static_cast<float>(std::log(f + 1.0) * np.scalar + 1.0);
          for (int64_t c = 0; c < wout; ++c) out[r * wout + c] = src[r * wout + c] * t;
        }
        break;
      }
      case OpType::SelectRows: {
        const float* src = im.f32(np.in[0]);
        for (int64_t r = 0; r < R; ++r)
          std::memcpy(out + r * wout, src + im.selected[static_cast<size_t>(r)] * wout, static_cast<size_t>(wout) * 4);
        break;
      }
    }
  }
  if (txn.active()) cache_->commit(txn);
  *n_out = R;
  return im.f32(g.logits);
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
           a.kind == b.kind && a.span == b.span;
  }
  if (!fits) fail(ErrorKind::InvalidArgument, "cache scope", "the cache was sized for a different cache spec");
  exec.cache_ = &cache;
}

CacheScope::~CacheScope() { exec_.cache_ = nullptr; }

}  // namespace ptn
