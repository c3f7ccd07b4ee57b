// Internal to src/kernels: argument checks shared by the reference and optimized ops, and the
// per-ISA tables of single-thread row kernels (built from ops_impl.h / attention_impl.h, one
// copy per instruction set in ops.cpp / ops_avx2.cpp / ops_avx512.cpp and attention*.cpp).
#pragma once
#include <cstdint>

#include "core/cpu.h"
#include "core/dtype.h"
#include "kernels/attention.h"
#include "kernels/ops.h"

namespace ptn::kdetail {

// ---- argument checks (throw ptn::Error InvalidArgument naming op and sizes) ----
void check_rows(const char* op, const void* x, const void* y, int64_t rows, int64_t dim);
void check_n(const char* op, int64_t n, const void* a, const void* b, const void* c);
void check_eps(const char* op, float eps);
void check_rope(const char* op, const float* x, const int32_t* positions, int64_t rows,
                int64_t n_heads, int64_t head_dim, int64_t rope_dim);
void check_rope_params(const char* op, const RopeParams& p, int64_t rope_dim);
void check_embedding(const char* op, const void* table, DType type, int64_t vocab, int64_t dim,
                     const int32_t* ids, int64_t n, const float* out);
void check_attention(const char* op, const float* q, const float* k, const float* v,
                     const int32_t* q_pos, const int32_t* kv_pos, int64_t T, int64_t S,
                     int64_t Hq, int64_t Hkv, int64_t D, int64_t Dv, const AttentionParams& p,
                     const float* out);

// ---- per-ISA kernels ----
struct OpsKernels {
  // One row of dim elements each.
  void (*rms_norm)(const float* x, const float* w, float* y, int64_t dim, float eps, bool plus_one);
  void (*layer_norm)(const float* x, const float* w, const float* b, float* y, int64_t dim,
                     float eps);
  void (*softmax)(float* x, int64_t n);
  // Element-wise over n.
  void (*silu)(const float* x, float* y, int64_t n);
  void (*gelu_tanh)(const float* x, float* y, int64_t n);
  void (*gelu_erf)(const float* x, float* y, int64_t n);
  void (*swiglu)(const float* g, const float* u, float* y, int64_t n);
  void (*geglu)(const float* g, const float* u, float* y, int64_t n);
  void (*geglu_erf)(const float* g, const float* u, float* y, int64_t n);
  void (*add)(const float* a, const float* b, float* y, int64_t n);
  void (*mul)(const float* a, const float* b, float* y, int64_t n);
  void (*scale)(const float* x, float s, float* y, int64_t n);
  void (*softcap)(float* x, int64_t n, float cap);
  // Half-split rotation of n pairs (x0[i], x1[i]) by angles with cos c[i], sin s[i].
  void (*rotate)(float* x0, float* x1, const float* c, const float* s, int64_t n);
};

const OpsKernels& ops_kernels_scalar();
const OpsKernels& ops_kernels_avx2();
const OpsKernels& ops_kernels_avx512();
const OpsKernels& ops_kernels_neon();  // aarch64: every NEON level (f32 ops need no dot products)
const OpsKernels& ops_kernels(SimdLevel level);

struct AttnKernels {
  // attend_block_group after argument checks: G states, q [G, d].
  void (*attend)(AttnAccumulator* st, const float* q, int64_t G, int64_t d, const KvRows& k,
                 const KvRows& v, int64_t n, float scale, float softcap);
  // attn_tile_block after argument checks, for tiles of this level's width.
  void (*tile_block)(AttnTile& t, const KvRows& k, const KvRows& v, int64_t n, const int32_t* lo,
                     const int32_t* hi);
  // attn_rows_to_f32 after argument checks: n rows of r, d values each, into out [n][d].
  void (*rows_f32)(const KvRows& r, int64_t n, int64_t d, float* out);
  int64_t tile_width;
};

const AttnKernels& attn_kernels_scalar();
const AttnKernels& attn_kernels_avx2();
const AttnKernels& attn_kernels_avx512();
const AttnKernels& attn_kernels_neon();
const AttnKernels& attn_kernels(SimdLevel level);

}  // namespace ptn::kdetail
