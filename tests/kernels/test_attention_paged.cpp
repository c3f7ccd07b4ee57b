// Paged attention over blocks of a pool (kernels/attention_paged.h) against a dense softmax
// written here in double over the same stored K/V (dequantized), for f32/f16/bf16/q8_0/q4_0 caches:
// prompts deep into a cache (runs of query tiles that read each block once), windows, two
// sequences in one step, every SIMD level and 1/2 threads. Also: a run of tiles gives exactly
// the bits of its tiles one at a time, and attn_rows_to_f32 equals dequantize_row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/quant.h"
#include "kernel_test_util.h"
#include "kernels/attention.h"
#include "kernels/attention_paged.h"

namespace ptn {
namespace {

using test::for_each_config;
using test::nmse;
using test::random_vec;

constexpr int64_t kBs = 16, kHkv = 2, kGroup = 4, kHq = kHkv * kGroup, kD = 64;

// A pool of n_blocks blocks, each [K: Hkv][bs][row] then [V: Hkv][bs][row], filled with random
// values stored as `type`; `back` holds what the stored values read back as, per block/head/slot.
struct Pool {
  DType type;
  int64_t n_blocks;
  size_t row, block_bytes;
  std::vector<uint8_t> bytes;
  std::vector<float> back;  // [block][K=0,V=1][head][slot][d]

  Pool(DType t, int64_t n, uint64_t seed) : type(t), n_blocks(n), row(row_bytes(t, kD)), block_bytes(2 * kHkv * kBs * row) {
    bytes.resize(block_bytes * static_cast<size_t>(n));
    back.resize(static_cast<size_t>(n * 2 * kHkv * kBs * kD));
    const std::vector<float> x = random_vec(back.size(), seed, -1.5f, 1.5f);
    for (int64_t r = 0; r < n * 2 * kHkv * kBs; ++r) {
      quantize_row(t, &x[r * kD], bytes.data() + r * row, kD);
      dequantize_row(t, bytes.data() + r * row, &back[r * kD], kD);
    }
  }
  PagedLayerView view() const {
    return PagedLayerView{bytes.data(), block_bytes, nullptr, kBs, 0, kHkv * kBs * row, row, row, kD, kD, type};
  }
  // Stored K (kv = 0) or V (kv = 1) of position pos of kv head h under block table `table`.
  const float* at(const std::vector<int32_t>& table, int64_t kv, int64_t h, int64_t pos) const {
    const int64_t b = table[static_cast<size_t>(pos / kBs)];
    return &back[static_cast<size_t>((((b * 2 + kv) * kHkv + h) * kBs + pos % kBs) * kD)];
  }
};

// out [Hq][D] of one query row q [Hq][D] over positions lo..hi, in double.
void dense_row(const Pool& p, const std::vector<int32_t>& table, const float* q, int64_t lo, int64_t hi, float scale,
               float* out) {
  for (int64_t h = 0; h < kHq; ++h) {
    std::vector<double> s;
    for (int64_t pos = lo; pos <= hi; ++pos) {
      const float* k = p.at(table, 0, h / kGroup, pos);
      double dot = 0;
      for (int64_t i = 0; i < kD; ++i) dot += double{q[h * kD + i]} * k[i];
      s.push_back(dot * scale);
    }
    const double m = *std::max_element(s.begin(), s.end());
    double z = 0;
    for (double& x : s) z += (x = std::exp(x - m));
    for (int64_t i = 0; i < kD; ++i) {
      double acc = 0;
      for (int64_t pos = lo; pos <= hi; ++pos) acc += s[static_cast<size_t>(pos - lo)] * p.at(table, 1, h / kGroup, pos)[i];
      out[h * kD + i] = static_cast<float>(acc / z);
    }
  }
}

// Two sequences in one step: A continues a cache 150 deep with 40 prompt rows, B is a fresh
// 30-row prompt with a window of 20 positions. Their blocks are interleaved in the pool.
TEST(PagedAttention, DeepPromptsMatchDenseSoftmax) {
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    const int64_t depth_a = 150, rows_a = 40, rows_b = 30, window_b = 20;
    const int64_t blocks_a = (depth_a + rows_a + kBs - 1) / kBs, blocks_b = (rows_b + kBs - 1) / kBs;
    const Pool pool(type, blocks_a + blocks_b, 7);
    std::vector<int32_t> order(static_cast<size_t>(blocks_a + blocks_b));
    std::iota(order.begin(), order.end(), 0);
    std::reverse(order.begin(), order.end());
    const std::vector<int32_t> table_a(order.begin(), order.begin() + blocks_a);
    const std::vector<int32_t> table_b(order.begin() + blocks_a, order.end());
    const int64_t T = rows_a + rows_b;
    std::vector<PagedQuery> rows;
    for (int64_t t = 0; t < rows_a; ++t) rows.push_back({table_a.data(), 0, depth_a + t});
    for (int64_t t = 0; t < rows_b; ++t) rows.push_back({table_b.data(), std::max<int64_t>(0, t - window_b + 1), t});
    const std::vector<float> q = random_vec(static_cast<size_t>(T * kHq * kD), 11, -1, 1);
    const float scale = 0.2f;
    std::vector<float> want(q.size());
    for (int64_t t = 0; t < T; ++t)
      dense_row(pool, t < rows_a ? table_a : table_b, &q[t * kHq * kD], rows[t].lo, rows[t].hi, scale,
                &want[t * kHq * kD]);
    for_each_config([&](ThreadPool& threads, const std::string& cfg) {
      std::vector<float> got(q.size(), -1.0f);
      paged_attention(pool.view(), rows.data(), T, q.data(), kHq, kHkv, scale, 0.0f, got.data(), threads);
      EXPECT_LT(nmse(want, got), 1e-10) << dtype_name(type) << " " << cfg;
    });
  }
}

// paged_attend_tiles over n tiles gives the bits of paged_attend_tile per tile, also where the
// tiles see different parts of a block (causal rows, one row with a window, one that sees nothing).
TEST(PagedAttention, RunOfTilesEqualsTilesOneAtATime) {
  for (DType type : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0}) {
    const int64_t depth = 70, n_tiles = 5, w = attn_tile_width(), nq = std::min<int64_t>(w, 4);
    const Pool pool(type, (depth + n_tiles * nq + kBs - 1) / kBs, 21);
    std::vector<int32_t> table(static_cast<size_t>(pool.n_blocks));
    for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>((i * 3) % table.size());
    PagedLayerView view = pool.view();
    view.table = table.data();
    const std::vector<float> q = random_vec(static_cast<size_t>(n_tiles * nq * kD), 5, -1, 1);
    std::vector<float> one(q.size()), run(q.size());
    std::vector<const float*> qrows(q.size() / kD);
    std::vector<float*> one_rows(qrows.size()), run_rows(qrows.size());
    std::vector<int64_t> lo(qrows.size()), hi(qrows.size());
    for (size_t r = 0; r < qrows.size(); ++r) {
      qrows[r] = &q[r * kD];
      one_rows[r] = &one[r * kD];
      run_rows[r] = &run[r * kD];
      hi[r] = depth + static_cast<int64_t>(r);
      lo[r] = r % 3 == 1 ? hi[r] - 9 : 0;
      if (r == 6) lo[r] = hi[r] + 1;  // sees nothing
    }
    std::vector<PagedTileRows> tiles;
    for (int64_t ti = 0; ti < n_tiles; ++ti) {
      const int64_t r0 = ti * nq;
      paged_attend_tile(view, 1, &qrows[r0], &lo[r0], &hi[r0], nq, 0.3f, 0.0f, &one_rows[r0]);
      tiles.push_back(PagedTileRows{&qrows[r0], &lo[r0], &hi[r0], nq, &run_rows[r0], nullptr});
    }
    paged_attend_tiles(view, 1, tiles.data(), n_tiles, 0.3f, 0.0f);
    for (size_t i = 0; i < one.size(); ++i) ASSERT_EQ(one[i], run[i]) << dtype_name(type) << " element " << i;
    for (int64_t e = 0; e < kD; ++e) EXPECT_EQ(run[6 * kD + e], 0.0f) << "the row that sees nothing";
  }
}

TEST(PagedAttention, RowsToF32EqualsDequantizeRow) {
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    const int64_t n = 7, d = 96;
    const size_t row = row_bytes(type, d), stride = row + 32;  // rows with a gap between them
    const std::vector<float> x = random_vec(static_cast<size_t>(n * d), 3, -4, 4);
    std::vector<uint8_t> bytes(stride * n);
    std::vector<float> want(x.size());
    for (int64_t j = 0; j < n; ++j) {
      quantize_row(type, &x[j * d], bytes.data() + j * stride, d);
      dequantize_row(type, bytes.data() + j * stride, &want[j * d], d);
    }
    for_each_config([&](ThreadPool&, const std::string& cfg) {
      std::vector<float> got(x.size(), -1.0f);
      attn_rows_to_f32(KvRows{bytes.data(), type, static_cast<int64_t>(stride)}, n, d, got.data());
      EXPECT_EQ(want, got) << dtype_name(type) << " " << cfg;
    });
  }
  std::vector<float> out(64);
  EXPECT_THROW(attn_rows_to_f32(KvRows{out.data(), DType::Q4_K, 64}, 1, 64, out.data()), Error);
  EXPECT_THROW(attn_rows_to_f32(KvRows{out.data(), DType::F32, 256}, 1, 64, nullptr), Error);
  EXPECT_THROW(attn_rows_to_f32(KvRows{out.data(), DType::F32, 256}, -1, 64, out.data()), Error);
}

}  // namespace
}  // namespace ptn
