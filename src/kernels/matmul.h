// Matrix multiplication y = x · W^T for every weight type of the engine.
//
//   W: [N, K] weight matrix (N output rows, K inputs), rows in one of the GGUF element/block
//      types: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, Q4_K, Q5_K, Q6_K. K must be a
//      multiple of the type's block size (1, 32 or 256).
//   x: [m, K] f32 activations, row-major, contiguous.
//   y: [m, N] f32 outputs, row-major, contiguous; must not overlap x.
//
// ptn::ref::matmul is the readable definition: every weight dequantized with
// ptn::dequantize_row (core/quant.h), products accumulated in double, no activation
// quantization. ptn::matmul is the fast version: the SIMD level is simd_level() at call time,
// rows of W are split over the threads of `pool`.
//
// How the fast version computes (and so how far it may differ from ref):
//   * F32 / F16 weights: f32 products with f32 FMA accumulation (error ~1e-7 relative).
//   * BF16 weights: the same, except on AVX-512 with BF16 dot products (simd_has_bf16()) and
//     m >= 20 rows, where the activations are rounded to bf16 (error ~1e-6..1e-5).
//   * Quantized weights: each activation row is quantized once per call (before the rows of
//     W are split over the threads) to int8 with one f32 scale per weight block (32 elements
//     for the 32-element types, 256 for the K-quants, as ggml's Q8_0 / Q8_K activations; round to
//     nearest even, scale = max|x| / 127), and the dot products are integer (AVX-512 VNNI,
//     AVX2 maddubs, AVX-VNNI on ymm). The error is that of 8-bit activations (NMSE ~1e-5..1e-4).
// Kernels (kernels/matmul_*avx512.cpp, matmul_avx2.cpp, matmul_generic.h): for m < 20 rows
// (decode) each weight row is decoded in registers and dotted with up to 4 activation rows,
// so the weights stream from memory once; for m >= 20 (prefill, AVX-512) 32 weight rows at a
// time are decoded into an L1-sized transposed panel and multiplied with all activation rows
// by a register-blocked VNNI / FMA / BF16 micro-kernel (AVX2 and avx2-vnni, quantized weights:
// 8 weight rows per panel, maddubs or ymm VNNI, kernels/matmul_quant_panels_x86.h). Weights are used in their GGUF layout,
// except Q4_K, Q8_0, Q4_0, IQ4_NL and MXFP4 matrices that the executor interleaves 16 rows at a time
// (WeightLayout::X16, see interleave_rows): the AVX-512 kernels then multiply 16 weight rows
// per VNNI instruction with no per-row unpacking; and BF16 matrices it stores as 32-row panels
// (WeightLayout::P32) where the CPU has BF16 dot products. Other levels de-interleave.
// Scratch memory (quantized activations, decoded weight panels) is thread_local and reused:
// after the first call of a given size no call allocates.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/threadpool.h"

namespace ptn {

// How the rows of a weight matrix are laid out.
enum class WeightLayout : uint8_t {
  Rows,  // row i at data + i * row_stride, in the GGUF block layout of its type
  X16,   // Q4_K, Q8_0, Q4_0, IQ4_NL or MXFP4 rows interleaved 16 at a time (interleave_rows); row_stride = bytes of one row
  P32,   // BF16 rows in panels of 32 (interleave_rows); row_stride = bytes of one row
};

// A weight matrix W[rows = N, cols = K]; row i starts at data + i * row_stride bytes
// (row_stride >= row_bytes(type, cols)), unless layout says otherwise.
struct WeightView {
  DType type;
  int64_t rows;
  int64_t cols;
  const void* data;
  size_t row_stride;
  WeightLayout layout = WeightLayout::Rows;
};

// Rows interleaved 16 at a time (WeightLayout::X16). Rows go in groups of 16 (group g = rows
// 16g..16g+15); a group holds one tile per 256 columns (Q4_K), 64 (Q8_0) or 32 (Q4_0, IQ4_NL, MXFP4), tiles of a
// group in column order, groups one after another; every tile but those of the 32-column types is a whole number
// of 64-byte lines. A tile carries the 16 rows' blocks of its columns, regrouped so that one 64-byte load
// holds 4 consecutive columns of all 16 rows, ready for a VNNI dot product against 4
// activation bytes broadcast to every lane:
//   Q4_K (2304 bytes): [0, 32) d of rows 0..15 (f16), [32, 64) dmin (f16), [64, 256) the packed
//     scales (byte b of row r's 12 at 64 + 16 b + r), [256, 2304) codes: for sub-block pair t
//     (sub-blocks 2t and 2t + 1, columns 64t..64t+63) and quad q (0..7), 64 bytes at
//     256 + 64 (8t + q) whose byte 4r + i is Q4_K byte qs[32t + 4q + i] of row r (low nibble:
//     column 64t + 4q + i, high nibble: 32 columns later).
//   Q8_0 (1088 bytes, blocks 2i and 2i + 1 as e = 0, 1): [32 e, 32 e + 32) d of block 2i + e of
//     rows 0..15 (f16), then codes: for quad q, 64 bytes at 64 + 512 e + 64 q whose byte 4r + i
//     is qs[4q + i] + 128 of row r's block 2i + e (unsigned, as VNNI wants).
//   Q4_0, IQ4_NL (288 bytes) and MXFP4 (272 bytes), one block per tile (the tiles that are not
//     whole lines): [0, 16 h) the scales of rows 0..15 (h = 2: f16 d; h = 1: MXFP4's exponent
//     e), then for quad j (0..3) 64 bytes at 16 h + 64 j whose byte 4r + i is qs[4j + i] of
//     row r (low nibble: column 4j + i, high nibble: column 16 + 4j + i).
// Nothing is re-quantized: deinterleave_row gives back the original blocks.
// BF16 rows in panels of 32 (WeightLayout::P32): panel p = rows 32p..32p+31, panels one after
// another; a panel holds, for each pair of columns (2i, 2i + 1), 32 dwords (one per row, column
// 2i in the low half): the layout the AVX-512 BF16 dot product reads, so the panel kernels use
// the weights where they lie.
constexpr int64_t kX16Rows = 16;
constexpr int64_t kP32Rows = 32;
// True when w can be interleaved: Q4_K, Q8_0 with K a multiple of 64, Q4_0, IQ4_NL, MXFP4 (rows
// a positive multiple of 16), or BF16 with K even (rows a positive multiple of 32); row layout.
bool can_interleave(const WeightView& w);
// Writes w's rows interleaved into dst (rows * row_bytes(type, cols) bytes; 64-byte alignment
// is fastest) and returns the view of them. Throws InvalidArgument if !can_interleave(w).
WeightView interleave_rows(const WeightView& w, void* dst);
// Row n of an interleaved view back in its type's blocks (row_bytes(type, cols) bytes) into dst.
void deinterleave_row(const WeightView& w, int64_t n, void* dst);

// True if matmul accepts weights of type t.
bool matmul_supports(DType t);

// Throws ptn::Error (InvalidArgument / Unsupported) naming `op` and the shapes if w, x, m, y do
// not describe a valid product: unknown type, K not a multiple of the block, row_stride too
// small, null pointers, negative sizes.
void matmul_check(const char* op, const WeightView& w, const float* x, int64_t m, const float* y);

namespace ref {
// y[m, N] = x[m, K] · W^T, plain loops, double accumulation over dequantized weights.
void matmul(const WeightView& w, const float* x, int64_t m, float* y);
}  // namespace ref

// Optimized: SIMD level from simd_level() at call time, multi-threaded on `pool` (it runs
// jobs on the pool, so it must not be called from inside a job of that same pool).
void matmul(const WeightView& w, const float* x, int64_t m, float* y, ThreadPool& pool);

// Several products of one activation matrix in one pass over the pool: y[i][m, N_i] =
// x[m, K] · W_i^T for i < count (count <= kMatmulMultiMax; every W_i has K columns; y[i] must
// not overlap x or each other). The same results as `count` calls of matmul, with one thread
// hand-off instead of `count` (a decode step's q/k/v and gate/up products are each too small
// to be worth a hand-off of their own). A matmul_jobs call with one shared x.
constexpr int kMatmulMultiMax = 8;
void matmul_multi(const WeightView* w, float* const* y, int count, const float* x, int64_t m, ThreadPool& pool);

// One product of a batch: y[m, w.rows] = x[m, w.cols] · w^T.
struct MatmulJob {
  WeightView w;
  const float* x = nullptr;
  int64_t m = 0;
  float* y = nullptr;
};

// Any number of independent products in one pass over the pool, each with the results of its
// own matmul call (a decode step of a mixture of experts: every active expert's gate and up,
// then every expert's down). No y may overlap an x or another y. Each distinct activation
// matrix (same x, m, K and activation format) is prepared once; the rows of all the weights,
// end to end, are split over the threads by cost (weight bytes times ceil(m / 4), the passes
// the row kernels make over a weight row), boundaries on multiples of 32 rows of a matrix.
// Few jobs or little work: one matmul call per job.
void matmul_jobs(const MatmulJob* jobs, int count, ThreadPool& pool);

}  // namespace ptn
