#include "kernels/moe.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "kernels/ops.h"

namespace ptn {

namespace {

[[noreturn]] void bad(const char* op, const std::string& what) { fail(ErrorKind::InvalidArgument, op, what); }

// The strings of a message are built only when a check fails (this runs on every call).
void check_view(const char* op, const WeightView& v, int64_t rows, int64_t cols, const char* what, int64_t expert = -1) {
  auto name = [&] { return (expert >= 0 ? "expert " + std::to_string(expert) + " " : std::string()) + what; };
  if (v.data == nullptr || v.rows != rows || v.cols != cols)
    bad(op, name() + " is [" + std::to_string(v.rows) + ", " + std::to_string(v.cols) + "], expected [" +
                std::to_string(rows) + ", " + std::to_string(cols) + "]");
  if (!matmul_supports(v.type)) bad(op, name() + ": no matmul for " + dtype_name(v.type));
  static const float probe[1] = {0.0f};  // matmul_check wants non-null rows; only the weight is checked here
  matmul_check(op, v, probe, 1, probe);
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

void add_bias(float* y, const float* b, int64_t rows, int64_t n) {
  if (b == nullptr) return;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n; ++c) y[r * n + c] += b[c];
}

// gpt-oss's clamped SwiGLU (MoeActivation::SwiGLUOai); out may be g.
void swiglu_oai(const float* g, const float* u, float* out, int64_t n, float alpha, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = std::min(g[i], limit), ui = std::clamp(u[i], -limit, limit);
    out[i] = (ui + 1.0f) * gi / (1.0f + std::exp(-alpha * gi));
  }
}

// The same in double, for the reference op.
void swiglu_oai_ref(const float* g, const float* u, float* out, int64_t n, float alpha, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    const double gi = std::min<double>(g[i], limit), ui = std::clamp<double>(u[i], -limit, limit);
    out[i] = static_cast<float>((ui + 1.0) * gi * sigmoid(alpha * gi));
  }
}

}  // namespace

void moe_check(const char* op, const MoeWeights& w, const MoeParams& p, const float* x, int64_t T, const float* y) {
  const int64_t E = w.router.rows, H = w.router.cols;
  if (E < 1 || E > kMoeMaxExperts) bad(op, "expert count " + std::to_string(E) + " outside 1.." + std::to_string(kMoeMaxExperts));
  if (p.top_k < 1 || p.top_k > E) bad(op, "top_k " + std::to_string(p.top_k) + " outside 1.." + std::to_string(E));
  if (static_cast<int64_t>(w.gate.size()) != E || static_cast<int64_t>(w.up.size()) != E ||
      static_cast<int64_t>(w.down.size()) != E)
    bad(op, "needs gate, up and down weights for each of the " + std::to_string(E) + " experts");
  check_view(op, w.router, E, H, "router");
  const int64_t F = w.gate[0].rows;
  for (int64_t e = 0; e < E; ++e) {
    const size_t i = static_cast<size_t>(e);
    check_view(op, w.gate[i], F, H, "gate", e);
    check_view(op, w.up[i], F, H, "up", e);
    check_view(op, w.down[i], H, F, "down", e);
  }
  for (const auto* b : {&w.gate_bias, &w.up_bias, &w.down_bias}) {
    if (!b->empty() && static_cast<int64_t>(b->size()) != E)
      bad(op, "expert biases must be given for all " + std::to_string(E) + " experts or none");
    for (const float* p : *b)
      if (p == nullptr) bad(op, "null expert bias");
  }
  if (p.activation == MoeActivation::SwiGLUOai && (!std::isfinite(p.alpha) || !(p.limit > 0) || !std::isfinite(p.limit)))
    bad(op, "clamped SwiGLU needs a finite alpha and a finite limit > 0");
  if (w.shared) {
    const int64_t Fs = w.shared_gate.rows;
    check_view(op, w.shared_gate, Fs, H, "shared expert gate");
    check_view(op, w.shared_up, Fs, H, "shared expert up");
    check_view(op, w.shared_down, H, Fs, "shared expert down");
    if (w.shared_router.data != nullptr) check_view(op, w.shared_router, 1, H, "shared expert router");
  }
  if (p.groups < 0 || (p.groups > 0 && (E % p.groups != 0 || p.groups_used < 1 || p.groups_used > p.groups ||
                                        p.groups_used * (E / p.groups) < p.top_k)))
    bad(op, "expert groups must divide the " + std::to_string(E) + " experts and the groups used hold at least top_k experts");
  if (!std::isfinite(p.routed_scale)) bad(op, "routed scale must be finite");
  if (T < 0 || (T > 0 && (x == nullptr || y == nullptr))) bad(op, "bad rows or null pointers");
}

void moe_route(const float* logits, int64_t E, const MoeParams& p, int32_t* experts, float* weights) {
  // The softmax's maximum and sum (sigmoid scores need neither).
  const bool sigmoid_scores = p.scoring == MoeScoring::Sigmoid;
  double mx = -INFINITY, sum = 0;
  if (!sigmoid_scores) {
    for (int64_t e = 0; e < E; ++e) mx = std::max(mx, static_cast<double>(logits[e]));
    for (int64_t e = 0; e < E; ++e) sum += std::exp(static_cast<double>(logits[e]) - mx);
  }
  auto score = [&](int64_t e) {
    const double l = static_cast<double>(logits[e]);
    return sigmoid_scores ? sigmoid(l) : std::exp(l - mx) / sum;
  };
  // The choice key: the logit (both scores keep its order), or, with a selection bias or
  // groups, the score plus the bias. A NaN key is never chosen over a number.
  const bool by_score = p.selection_bias != nullptr || p.groups > 0;
  auto key = [&](int64_t e) {
    if (!by_score) return static_cast<double>(logits[e]);
    return score(e) + (p.selection_bias ? static_cast<double>(p.selection_bias[e]) : 0.0);
  };
  auto better = [](double a, double b) { return a > b || (std::isnan(b) && !std::isnan(a)); };
  // Groups: only the experts of the groups_used best groups may be chosen (ties: lower group).
  uint64_t allowed_groups[kMoeMaxExperts / 64] = {};
  const int64_t G = p.groups > 0 ? p.groups : 1, gs = E / G;
  if (p.groups > 0) {
    double gscore[kMoeMaxExperts];
    for (int64_t g = 0; g < G; ++g) {
      double b1 = -INFINITY, b2 = -INFINITY;  // the group's best and second-best key
      for (int64_t e = g * gs; e < (g + 1) * gs; ++e) {
        const double k = key(e);
        if (better(k, b1)) { b2 = b1; b1 = k; }
        else if (better(k, b2)) b2 = k;
      }
      gscore[g] = p.group_top2 && gs > 1 ? b1 + b2 : b1;
    }
    for (int64_t j = 0; j < std::min(p.groups_used, G); ++j) {
      int64_t best = -1;
      for (int64_t g = 0; g < G; ++g)
        if (!(allowed_groups[g / 64] >> (g % 64) & 1) && (best < 0 || better(gscore[g], gscore[best]))) best = g;
      allowed_groups[best / 64] |= uint64_t{1} << (best % 64);
    }
  }
  auto allowed = [&](int64_t e) { return p.groups <= 0 || (allowed_groups[(e / gs) / 64] >> ((e / gs) % 64) & 1); };
  double picked = 0;
  for (int64_t j = 0; j < p.top_k; ++j) {
    int64_t best = -1;
    double best_key = 0;
    for (int64_t e = 0; e < E; ++e) {
      bool taken = !allowed(e);
      for (int64_t i = 0; i < j; ++i) taken = taken || experts[i] == e;
      if (taken) continue;
      const double k = key(e);
      if (best < 0 || better(k, best_key)) { best = e; best_key = k; }
    }
    if (best < 0) {  // fewer experts in the allowed groups than top_k (moe_check refuses it)
      experts[j] = experts[0];
      weights[j] = 0.0f;
      continue;
    }
    experts[j] = static_cast<int32_t>(best);
    const double sc = score(best);
    weights[j] = static_cast<float>(sc);
    picked += sc;
  }
  if (p.norm_topk_prob && picked > 0)
    for (int64_t j = 0; j < p.top_k; ++j) weights[j] = static_cast<float>(weights[j] / picked);
  if (p.routed_scale != 1.0f)
    for (int64_t j = 0; j < p.top_k; ++j) weights[j] *= p.routed_scale;
}

namespace ref {

void moe_ffn(const MoeWeights& w, const MoeParams& p, const float* x, int64_t T, float* y) {
  moe_check("moe_ffn", w, p, x, T, y);
  const int64_t E = w.router.rows, H = w.router.cols, F = w.gate[0].rows;
  const int64_t Fs = w.shared ? w.shared_gate.rows : 0;
  std::vector<float> logits(static_cast<size_t>(E)), rw(static_cast<size_t>(p.top_k));
  std::vector<int32_t> re(static_cast<size_t>(p.top_k));
  const int64_t F_max = std::max(F, Fs);
  std::vector<float> g(static_cast<size_t>(F_max)), u(g.size()), h(g.size()), o(static_cast<size_t>(H));
  std::vector<double> acc(static_cast<size_t>(H));
  std::vector<float> xw(p.weight_input ? static_cast<size_t>(H) : 0);
  for (int64_t t = 0; t < T; ++t) {
    const float* xt = x + t * H;
    std::fill(acc.begin(), acc.end(), 0.0);
    ref::matmul(w.router, xt, 1, logits.data());
    add_bias(logits.data(), w.router_bias, 1, E);
    moe_route(logits.data(), E, p, re.data(), rw.data());
    for (int64_t j = 0; j < p.top_k; ++j) {
      const size_t e = static_cast<size_t>(re[static_cast<size_t>(j)]);
      const float* in = xt;
      if (p.weight_input) {  // the weight scales the expert's input (and its output counts in full)
        for (int64_t c = 0; c < H; ++c) xw[static_cast<size_t>(c)] = rw[static_cast<size_t>(j)] * xt[c];
        in = xw.data();
      }
      ref::matmul(w.gate[e], in, 1, g.data());
      ref::matmul(w.up[e], in, 1, u.data());
      if (!w.gate_bias.empty()) {
        add_bias(g.data(), w.gate_bias[e], 1, F);
        add_bias(u.data(), w.up_bias[e], 1, F);
      }
      if (p.activation == MoeActivation::SwiGLUOai) swiglu_oai_ref(g.data(), u.data(), h.data(), F, p.alpha, p.limit);
      else ref::swiglu(g.data(), u.data(), h.data(), F);
      ref::matmul(w.down[e], h.data(), 1, o.data());
      if (!w.down_bias.empty()) add_bias(o.data(), w.down_bias[e], 1, H);
      const double wt = p.weight_input ? 1.0 : static_cast<double>(rw[static_cast<size_t>(j)]);
      for (int64_t c = 0; c < H; ++c) acc[static_cast<size_t>(c)] += wt * o[static_cast<size_t>(c)];
    }
    if (w.shared) {
      float sl = 0;
      double s = 1.0;
      if (w.shared_router.data != nullptr) {
        ref::matmul(w.shared_router, xt, 1, &sl);
        s = sigmoid(sl);
      }
      ref::matmul(w.shared_gate, xt, 1, g.data());
      ref::matmul(w.shared_up, xt, 1, u.data());
      ref::swiglu(g.data(), u.data(), h.data(), Fs);
      ref::matmul(w.shared_down, h.data(), 1, o.data());
      for (int64_t c = 0; c < H; ++c) acc[static_cast<size_t>(c)] += s * o[static_cast<size_t>(c)];
    }
    for (int64_t c = 0; c < H; ++c) y[t * H + c] = static_cast<float>(acc[static_cast<size_t>(c)]);
  }
}

}  // namespace ref

namespace {
template <class V>
void grow(V& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

// The input row of choice c (row t = c / K's k-th expert): x[t], scaled by the choice's weight
// when the weight goes in (Llama 4).
void gather_choice(const float* x, int64_t H, const MoeParams& p, const float* route_w, int32_t c, float* dst) {
  const float* xt = x + c / p.top_k * H;
  if (p.weight_input) {
    const float wt = route_w[c];
    for (int64_t j = 0; j < H; ++j) dst[j] = wt * xt[j];
  } else {
    std::copy(xt, xt + H, dst);
  }
}

// y[t] += w * o for choice c's expert output o (w = 1 when the weight went in).
void add_choice(float* y, int64_t H, const MoeParams& p, const float* route_w, int32_t c, const float* o) {
  const float wt = p.weight_input ? 1.0f : route_w[c];
  float* yt = y + c / p.top_k * H;
  for (int64_t j = 0; j < H; ++j) yt[j] += wt * o[j];
}

// y [T, H] times the shared expert's sigmoid gate of each row (logits sl [T]).
void gate_shared(float* y, const float* sl, int64_t T, int64_t H) {
  for (int64_t t = 0; t < T; ++t) {
    const float g = static_cast<float>(sigmoid(sl[t]));
    for (int64_t c = 0; c < H; ++c) y[t * H + c] *= g;
  }
}

// moe_ffn once the rows are grouped by expert (s.count / s.start / s.order filled): the same
// products and the same order of additions as the per-expert loop, hence the same results
// (bit for bit when F is a multiple of 16, so the element-wise activation's vector tails fall
// alike).
void moe_batched(const MoeWeights& w, const MoeParams& p, const float* x, int64_t T, float* y, MoeScratch& s,
                 ThreadPool& pool) {
  const int64_t E = w.router.rows, H = w.router.cols, F = w.gate[0].rows, K = p.top_k;
  const size_t TK = static_cast<size_t>(T * K);
  grow(s.g, TK * static_cast<size_t>(F));
  grow(s.u, TK * static_cast<size_t>(F));
  grow(s.o, TK * static_cast<size_t>(H));
  // Gathered inputs: with one row and unweighted inputs every expert reads x itself (and the
  // activations are prepared once for all of them).
  const bool gather = T > 1 || p.weight_input;
  if (gather) {
    grow(s.xs, TK * static_cast<size_t>(H));
    for (size_t i = 0; i < TK; ++i)
      gather_choice(x, H, p, s.route_w.data(), s.order[i], s.xs.data() + static_cast<int64_t>(i) * H);
  }
  const int64_t Fs = w.shared ? w.shared_gate.rows : 0;
  const bool gated = w.shared && w.shared_router.data != nullptr;
  if (w.shared) {
    grow(s.sg, static_cast<size_t>(T * Fs));
    grow(s.su, static_cast<size_t>(T * Fs));
    grow(s.sl, static_cast<size_t>(T));
  }
  std::vector<MatmulJob>& jobs = s.jobs;
  // Every active expert's gate and up (and the shared expert's gate, up and router) at once.
  jobs.clear();
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = s.count[static_cast<size_t>(e)], r = s.start[static_cast<size_t>(e)];
    if (n == 0) continue;
    const float* in = gather ? s.xs.data() + r * H : x;
    jobs.push_back({w.gate[static_cast<size_t>(e)], in, n, s.g.data() + r * F});
    jobs.push_back({w.up[static_cast<size_t>(e)], in, n, s.u.data() + r * F});
  }
  if (w.shared) {
    jobs.push_back({w.shared_gate, x, T, s.sg.data()});
    jobs.push_back({w.shared_up, x, T, s.su.data()});
    if (gated) jobs.push_back({w.shared_router, x, T, s.sl.data()});
  }
  matmul_jobs(jobs.data(), static_cast<int>(jobs.size()), pool);
  if (!w.gate_bias.empty())
    for (int64_t e = 0; e < E; ++e) {
      const int64_t n = s.count[static_cast<size_t>(e)], r = s.start[static_cast<size_t>(e)];
      if (n == 0) continue;
      add_bias(s.g.data() + r * F, w.gate_bias[static_cast<size_t>(e)], n, F);
      add_bias(s.u.data() + r * F, w.up_bias[static_cast<size_t>(e)], n, F);
    }
  const int64_t rows = static_cast<int64_t>(TK);
  if (p.activation == MoeActivation::SwiGLUOai)
    swiglu_oai(s.g.data(), s.u.data(), s.g.data(), rows * F, p.alpha, p.limit);
  else
    swiglu(s.g.data(), s.u.data(), s.g.data(), rows * F, pool);
  if (w.shared) swiglu(s.sg.data(), s.su.data(), s.sg.data(), T * Fs, pool);

  // Every expert's down (and the shared expert's, straight into y).
  jobs.clear();
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = s.count[static_cast<size_t>(e)], r = s.start[static_cast<size_t>(e)];
    if (n == 0) continue;
    jobs.push_back({w.down[static_cast<size_t>(e)], s.g.data() + r * F, n, s.o.data() + r * H});
  }
  if (w.shared) jobs.push_back({w.shared_down, s.sg.data(), T, y});
  matmul_jobs(jobs.data(), static_cast<int>(jobs.size()), pool);
  if (gated)
    gate_shared(y, s.sl.data(), T, H);
  else if (!w.shared)
    std::fill(y, y + T * H, 0.0f);

  // Scatter-add in expert order, rows in order within an expert, as the per-expert loop does.
  for (size_t i = 0; i < TK; ++i) {
    const int32_t c = s.order[i];
    float* o = s.o.data() + static_cast<int64_t>(i) * H;
    if (!w.down_bias.empty()) add_bias(o, w.down_bias[static_cast<size_t>(s.route_e[static_cast<size_t>(c)])], 1, H);
    add_choice(y, H, p, s.route_w.data(), c, o);
  }
}
}  // namespace

void moe_ffn(const MoeWeights& w, const MoeParams& p, const float* x, int64_t T, float* y, MoeScratch& s,
             ThreadPool& pool) {
  moe_check("moe_ffn", w, p, x, T, y);
  if (T == 0) return;
  const int64_t E = w.router.rows, H = w.router.cols, F = w.gate[0].rows, K = p.top_k;
  const size_t TK = static_cast<size_t>(T * K);
  grow(s.logits, static_cast<size_t>(T * E));
  grow(s.route_w, TK);
  grow(s.route_e, TK);
  grow(s.order, TK);
  grow(s.count, static_cast<size_t>(E));
  grow(s.start, static_cast<size_t>(E + 1));

  // Routing: one router product for every row, then each row's top-k.
  matmul(w.router, x, T, s.logits.data(), pool);
  add_bias(s.logits.data(), w.router_bias, T, E);
  for (int64_t t = 0; t < T; ++t)
    moe_route(s.logits.data() + t * E, E, p, s.route_e.data() + t * K, s.route_w.data() + t * K);

  // Group the T * K choices by expert (counting sort, rows in order within an expert).
  std::fill(s.count.begin(), s.count.begin() + E, 0);
  for (size_t i = 0; i < TK; ++i) ++s.count[static_cast<size_t>(s.route_e[i])];
  s.start[0] = 0;
  int32_t most = 0;
  for (int64_t e = 0; e < E; ++e) {
    s.start[static_cast<size_t>(e + 1)] = s.start[static_cast<size_t>(e)] + s.count[static_cast<size_t>(e)];
    most = std::max(most, s.count[static_cast<size_t>(e)]);
  }
  std::fill(s.count.begin(), s.count.begin() + E, 0);
  for (size_t i = 0; i < TK; ++i) {
    const size_t e = static_cast<size_t>(s.route_e[i]);
    s.order[static_cast<size_t>(s.start[e] + s.count[e]++)] = static_cast<int32_t>(i);
  }

  if (most <= s.batched_rows) return moe_batched(w, p, x, T, y, s, pool);

  // The shared expert (every row) first: y starts as its gated output, or zero.
  if (w.shared) {
    const int64_t Fs = w.shared_gate.rows;
    grow(s.sg, static_cast<size_t>(T * Fs));
    grow(s.su, static_cast<size_t>(T * Fs));
    grow(s.sl, static_cast<size_t>(T));
    const bool gated = w.shared_router.data != nullptr;
    const WeightView ws[3] = {w.shared_gate, w.shared_up, w.shared_router};
    float* ys[3] = {s.sg.data(), s.su.data(), s.sl.data()};
    matmul_multi(ws, ys, gated ? 3 : 2, x, T, pool);
    swiglu(s.sg.data(), s.su.data(), s.sg.data(), T * Fs, pool);
    matmul(w.shared_down, s.sg.data(), T, y, pool);
    if (gated) gate_shared(y, s.sl.data(), T, H);
  } else {
    std::fill(y, y + T * H, 0.0f);
  }

  // Each expert that has rows: gather them, one gate/up pass and one down pass over its weights.
  const size_t n_max = static_cast<size_t>(most);
  grow(s.xs, n_max * static_cast<size_t>(H));
  grow(s.g, n_max * static_cast<size_t>(F));
  grow(s.u, n_max * static_cast<size_t>(F));
  grow(s.o, n_max * static_cast<size_t>(H));
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = s.count[static_cast<size_t>(e)];
    if (n == 0) continue;
    const int32_t* idx = s.order.data() + s.start[static_cast<size_t>(e)];
    for (int64_t i = 0; i < n; ++i) gather_choice(x, H, p, s.route_w.data(), idx[i], s.xs.data() + i * H);
    const WeightView gu[2] = {w.gate[static_cast<size_t>(e)], w.up[static_cast<size_t>(e)]};
    float* gy[2] = {s.g.data(), s.u.data()};
    matmul_multi(gu, gy, 2, s.xs.data(), n, pool);
    if (!w.gate_bias.empty()) {
      add_bias(s.g.data(), w.gate_bias[static_cast<size_t>(e)], n, F);
      add_bias(s.u.data(), w.up_bias[static_cast<size_t>(e)], n, F);
    }
    if (p.activation == MoeActivation::SwiGLUOai) swiglu_oai(s.g.data(), s.u.data(), s.g.data(), n * F, p.alpha, p.limit);
    else swiglu(s.g.data(), s.u.data(), s.g.data(), n * F, pool);
    matmul(w.down[static_cast<size_t>(e)], s.g.data(), n, s.o.data(), pool);
    if (!w.down_bias.empty()) add_bias(s.o.data(), w.down_bias[static_cast<size_t>(e)], n, H);
    for (int64_t i = 0; i < n; ++i) add_choice(y, H, p, s.route_w.data(), idx[i], s.o.data() + i * H);
  }
}

}  // namespace ptn
