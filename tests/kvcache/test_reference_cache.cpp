// The reference cache and the attention policies of both caches against an explicit dense
// computation with a written-out mask; sequence controls; the factory's validation.
#include <gtest/gtest.h>

#include "core/error.h"
#include "kernels/attention.h"
#include "kv_test_util.h"
#include "kvcache/factory.h"
#include "kvcache/paged_cache.h"
#include "kvcache/reference_cache.h"

using namespace ptn;
using namespace kvt;

namespace {

CacheOptions opts(int64_t capacity_tokens = 4096, int64_t block_size = 16, DType dt = DType::F32) {
  CacheOptions o;
  o.capacity_tokens = capacity_tokens;
  o.block_size = block_size;
  o.dtype = dt;
  return o;
}

// Expected output of one layer for the rows of a one-sequence step, from the whole token history
// `toks` (positions 0..toks.size()-1), with an explicit visibility rule.
template <class Visible>
std::vector<float> dense_layer(const CacheSpec& spec, int64_t layer, int64_t hq, const std::vector<int32_t>& toks,
                               const StepBatch& batch, float scale, Visible visible) {
  const auto& L = spec.layers[layer];
  const int64_t group = hq / L.n_kv_heads;
  std::vector<float> out(batch.rows.size() * hq * L.head_dim_v);
  for (size_t t = 0; t < batch.rows.size(); ++t) {
    const StepRow& r = batch.rows[t];
    std::vector<float> q(hq * L.head_dim_k);
    make_row(layer, r.pos, r.token, hq, L.head_dim_k, 7 * 1000 + 1, 2.0f, q.data());
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t kh = h / group;
      std::vector<std::vector<float>> keys, values;
      for (int64_t j = 0; j <= r.pos; ++j) {
        std::vector<float> kr(L.n_kv_heads * L.head_dim_k), vr(L.n_kv_heads * L.head_dim_v);
        make_row(layer, static_cast<int32_t>(j), toks[j], L.n_kv_heads, L.head_dim_k, 2, 1.0f, kr.data());
        make_row(layer, static_cast<int32_t>(j), toks[j], L.n_kv_heads, L.head_dim_v, 3, 1.0f, vr.data());
        keys.emplace_back(kr.begin() + kh * L.head_dim_k, kr.begin() + (kh + 1) * L.head_dim_k);
        values.emplace_back(vr.begin() + kh * L.head_dim_v, vr.begin() + (kh + 1) * L.head_dim_v);
      }
      dense_attend(q.data() + h * L.head_dim_k, keys, values, r.pos, scale, visible,
                   out.data() + (t * hq + h) * L.head_dim_v);
    }
  }
  return out;
}

}  // namespace

// Every policy (full, window 1/2/7/64, chunk 4/16) in its own layer; prefill in chunks that
// straddle block and attention-chunk boundaries, then decode; both caches vs the dense mask.
TEST(KvMasks, WindowAndChunkMatchExplicitMask) {
  const std::vector<std::pair<AttnKind, int64_t>> kinds = {
      {AttnKind::Full, 0},   {AttnKind::Window, 1}, {AttnKind::Window, 2}, {AttnKind::Window, 7},
      {AttnKind::Window, 64}, {AttnKind::Chunk, 4},  {AttnKind::Chunk, 16}};
  const CacheSpec spec = small_spec(static_cast<int64_t>(kinds.size()), 2, 16, 8, kinds);
  const int64_t hq = 4;
  const float scale = 0.25f;
  for (const char* kind : {"reference", "paged"}) {
    for (int64_t bs : {int64_t{16}, int64_t{5}}) {
      auto cache = make_cache(kind, spec, opts(4096, bs));
      cache->add_sequence(3);
      std::vector<int32_t> toks;
      const std::vector<int64_t> chunks = {5, 11, 3, 17, 1, 1, 9, 30, 1, 1, 1, 2};
      int32_t next_token = 100;
      for (int64_t n : chunks) {
        StepBatch b;
        const auto nt = tokens_range(next_token, n, 3);
        next_token += static_cast<int32_t>(3 * n);
        append_rows(*cache, 3, nt, &b);
        toks.insert(toks.end(), nt.begin(), nt.end());
        const StepOut got = run_step(*cache, b, hq, AttentionParams{scale, 0.0f});
        for (size_t l = 0; l < kinds.size(); ++l) {
          const auto [k, span] = kinds[l];
          auto visible = [k = k, span = span](int64_t qp, int64_t kp) {
            if (kp > qp) return false;
            if (k == AttnKind::Window) return qp - kp < span;
            if (k == AttnKind::Chunk) return kp / span == qp / span;
            return true;
          };
          const auto want = dense_layer(spec, static_cast<int64_t>(l), hq, toks, b, scale, visible);
          EXPECT_LT(nmse(got.per_layer[l], want), 1e-10)
              << kind << " bs " << bs << " layer " << l << " at length " << toks.size();
        }
      }
      EXPECT_EQ(cache->length(3), static_cast<int64_t>(toks.size()));
    }
  }
}

// A second, independent oracle: ptn::ref::attention over the contiguous K/V of the sequence.
TEST(KvMasks, ReferenceCacheMatchesKernelReferenceAttention) {
  const std::vector<std::pair<AttnKind, int64_t>> kinds = {{AttnKind::Full, 0}, {AttnKind::Window, 5}, {AttnKind::Chunk, 8}};
  const CacheSpec spec = small_spec(3, 2, 16, 24, kinds);
  const int64_t hq = 6, T = 29;
  SequenceReferenceCache c(spec, opts());
  c.add_sequence(0);
  StepBatch first, second;
  append_rows(c, 0, tokens_range(3, 20), &first);
  const auto out1 = run_step(c, first, hq, AttentionParams{0.3f, 2.5f});
  append_rows(c, 0, tokens_range(50, T - 20), &second);
  const auto out2 = run_step(c, second, hq, AttentionParams{0.3f, 2.5f});
  for (size_t l = 0; l < kinds.size(); ++l) {
    const auto& L = spec.layers[l];
    std::vector<float> q(T * hq * 16), k(T * 2 * 16), v(T * 2 * 24), out(T * hq * 24);
    std::vector<int32_t> pos(T);
    for (int64_t t = 0; t < T; ++t) {
      const StepRow& r = t < 20 ? first.rows[t] : second.rows[t - 20];
      pos[t] = r.pos;
      make_row(l, r.pos, r.token, hq, 16, 7 * 1000 + 1, 2.0f, &q[t * hq * 16]);
      make_row(l, r.pos, r.token, 2, 16, 2, 1.0f, &k[t * 2 * 16]);
      make_row(l, r.pos, r.token, 2, 24, 3, 1.0f, &v[t * 2 * 24]);
    }
    AttentionParams ap;
    ap.scale = 0.3f;
    ap.softcap = 2.5f;
    ap.kind = L.kind;
    ap.span = L.span;
    ref::attention(q.data(), k.data(), v.data(), pos.data(), pos.data(), T, T, hq, 2, 16, 24, ap, out.data());
    std::vector<float> got = out1.per_layer[l];
    got.insert(got.end(), out2.per_layer[l].begin(), out2.per_layer[l].end());
    EXPECT_LT(nmse(got, out), 1e-12) << "layer " << l;
  }
}

TEST(KvMasks, SoftcapMatchesBetweenCaches) {
  const CacheSpec spec = small_spec(2, 2, 32, 32, {{AttnKind::Full, 0}, {AttnKind::Window, 5}});
  auto ref = make_cache("reference", spec, opts());
  auto paged = make_cache("paged", spec, opts());
  for (auto* c : {ref.get(), paged.get()}) c->add_sequence(0);
  const AttentionParams params{0.5f, 3.0f};
  for (int64_t n : {20, 1, 1, 13}) {
    StepBatch b;
    append_rows(*ref, 0, tokens_range(static_cast<int32_t>(ref->length(0)) * 2 + 1, n), &b);
    const auto a = run_step(*ref, b, 4, params);
    const auto p = run_step(*paged, b, 4, params);
    EXPECT_LT(nmse(p, a), 1e-10);
  }
  // A softcap changes the result (the test would notice if it were ignored).
  StepBatch b;
  append_rows(*ref, 0, {5}, &b);
  const auto capped = run_step(*ref, b, 4, params);
  ref->rewind(0, ref->length(0) - 1);
  const auto uncapped = run_step(*ref, b, 4, AttentionParams{0.5f, 0.0f});
  EXPECT_GT(nmse(capped, uncapped), 1e-8);
}

TEST(ReferenceCache, SequenceControls) {
  const CacheSpec spec = small_spec(2, 2, 8, 8);
  SequenceReferenceCache c(spec, opts(100));
  EXPECT_EQ(c.capacity_tokens(), 100);
  c.add_sequence(1);
  EXPECT_THROW(c.add_sequence(1), Error);
  StepBatch b;
  append_rows(c, 1, tokens_range(1, 30), &b);
  const auto first = run_step(c, b, 2, AttentionParams{});
  EXPECT_EQ(c.length(1), 30);
  EXPECT_EQ(c.bytes_used(), 30u * 2 * 2 * (8 + 8) * 4);
  c.fork(1, 2);
  EXPECT_EQ(c.length(2), 30);
  EXPECT_THROW(c.fork(1, 2), Error);
  EXPECT_THROW(c.fork(9, 3), Error);
  c.rewind(2, 10);
  EXPECT_EQ(c.length(2), 10);
  EXPECT_EQ(c.length(1), 30);
  EXPECT_THROW(c.rewind(2, 11), Error);
  EXPECT_THROW(c.rewind(2, -1), Error);
  // Capacity: 40 tokens held of 100.
  EXPECT_TRUE(c.can_extend(1, 60));
  EXPECT_FALSE(c.can_extend(1, 61));
  StepBatch big;
  append_rows(c, 2, tokens_range(1, 61), &big);
  try {
    c.prepare(big);
    FAIL() << "expected Capacity";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Capacity);
  }
  EXPECT_EQ(c.length(2), 10);
  c.clear(2);
  EXPECT_FALSE(c.has_sequence(2));
  EXPECT_THROW(c.length(2), Error);
  // Re-running the first step on a fresh sequence gives the same outputs.
  c.add_sequence(5);
  StepBatch again;
  append_rows(c, 5, tokens_range(1, 30), &again);
  EXPECT_EQ(nmse(run_step(c, again, 2, AttentionParams{}), first), 0.0);
}

TEST(KvCaches, InvalidPositionsAndSequencesRejected) {
  const CacheSpec spec = small_spec(1, 1, 8, 8, {}, /*max_positions=*/40);
  for (const char* kind : {"reference", "paged"}) {
    auto c = make_cache(kind, spec, opts(256, 4));
    c->add_sequence(0);
    auto kind_of = [&](const StepBatch& b) {
      try {
        c->prepare(b);
      } catch (const Error& e) {
        return static_cast<int>(e.kind());
      }
      return -1;
    };
    const int inval = static_cast<int>(ErrorKind::InvalidArgument);
    EXPECT_EQ(kind_of(StepBatch{{{0, 1, 5}}}), inval) << kind;              // gap: expects 0
    EXPECT_EQ(kind_of(StepBatch{{{0, 0, 5}, {0, 2, 6}}}), inval) << kind;   // gap inside the step
    EXPECT_EQ(kind_of(StepBatch{{{0, 0, 5}, {0, 0, 6}}}), inval) << kind;   // repeated position
    EXPECT_EQ(kind_of(StepBatch{{{1, 0, 5}}}), inval) << kind;              // unknown sequence
    EXPECT_EQ(c->length(0), 0);
    StepBatch ok;
    append_rows(*c, 0, tokens_range(0, 40), &ok);
    run_step(*c, ok, 1, AttentionParams{});
    EXPECT_EQ(kind_of(StepBatch{{{0, 40, 5}}}), static_cast<int>(ErrorKind::Capacity)) << kind;  // past context
    EXPECT_FALSE(c->can_extend(0, 1));
    // Only one step may be prepared at a time; controls on its sequences are refused.
    c->rewind(0, 10);
    auto txn = c->prepare(StepBatch{{{0, 10, 1}}});
    EXPECT_THROW(c->prepare(StepBatch{{{0, 10, 1}}}), Error);
    EXPECT_THROW(c->rewind(0, 5), Error);
    EXPECT_THROW(c->clear(0), Error);
    c->rollback(txn);
    c->rewind(0, 5);
    EXPECT_EQ(c->length(0), 5);
    // A step is refused by update_and_attend for a bad layer or head count.
    auto t2 = c->prepare(StepBatch{{{0, 5, 1}}});
    std::vector<float> q(8, 0.1f), out(8);
    EXPECT_THROW(c->update_and_attend(t2, 1, q.data(), q.data(), q.data(), 1, AttentionParams{}, out.data()), Error);
    EXPECT_THROW(c->update_and_attend(t2, -1, q.data(), q.data(), q.data(), 1, AttentionParams{}, out.data()), Error);
    EXPECT_THROW(c->update_and_attend(t2, 0, q.data(), q.data(), q.data(), 0, AttentionParams{}, out.data()), Error);
    // Commit without every layer updated is refused; the destructor then rolls back.
    EXPECT_THROW(c->commit(t2), Error);
  }
}

// The argument checks both caches share (kvcache/kv_common.h) give the same kind and the same
// message in both, naming the cache; the texts are written out here so a change shows.
TEST(KvCaches, SharedArgumentChecksSayTheSame) {
  const CacheSpec spec = small_spec(2, 1, 8, 8, {}, /*max_positions=*/40);
  for (const char* kind : {"reference", "paged"}) {
    CacheOptions o = opts(256, 4);
    o.max_step_tokens = 8;
    auto c = make_cache(kind, spec, o);
    const std::string who = std::string(kind) + " kv cache";
    // The Error of `f`, or a failure when it does not throw one.
    auto error_of = [&](auto&& f) -> std::pair<ErrorKind, std::string> {
      try {
        f();
      } catch (const Error& e) {
        EXPECT_EQ(e.where(), who);
        return {e.kind(), e.detail()};
      }
      ADD_FAILURE() << kind << ": no error";
      return {ErrorKind::Internal, ""};
    };
    const auto inval = ErrorKind::InvalidArgument;
    using Want = std::pair<ErrorKind, std::string>;
    EXPECT_EQ(error_of([&] { c->length(3); }), (Want{inval, "length: unknown sequence 3"})) << kind;
    EXPECT_EQ(error_of([&] { c->rewind_floor(3); }), (Want{inval, "rewind_floor: unknown sequence 3"})) << kind;
    EXPECT_EQ(error_of([&] { c->can_extend(3, 1); }), (Want{inval, "can_extend: unknown sequence 3"})) << kind;
    c->add_sequence(0);
    c->add_sequence(1);
    EXPECT_EQ(error_of([&] { c->add_sequence(0); }), (Want{inval, "add_sequence: sequence 0 exists"})) << kind;
    EXPECT_EQ(error_of([&] { c->fork(0, 1); }), (Want{inval, "fork: destination sequence 1 exists"})) << kind;
    EXPECT_EQ(error_of([&] { c->fork(2, 3); }), (Want{inval, "fork: unknown sequence 2"})) << kind;
    StepBatch b;
    append_rows(*c, 0, tokens_range(1, 6), &b);
    run_step(*c, b, 2, AttentionParams{});
    EXPECT_EQ(error_of([&] { c->rewind(0, 7); }), (Want{inval, "rewind: length 7 is outside 0..6 for sequence 0"})) << kind;
    EXPECT_EQ(error_of([&] { c->rewind(0, -1); }), (Want{inval, "rewind: length -1 is outside 0..6 for sequence 0"}))
        << kind;
    // can_extend: a negative count, max_step_tokens (8), the model's 40 positions
    EXPECT_FALSE(c->can_extend(0, -1)) << kind;
    EXPECT_TRUE(c->can_extend(0, 8)) << kind;
    EXPECT_FALSE(c->can_extend(0, 9)) << kind;
    for (int i = 0; i < 4; ++i) {
      StepBatch more;
      append_rows(*c, 0, tokens_range(10, 7), &more);
      run_step(*c, more, 2, AttentionParams{});
    }
    ASSERT_EQ(c->length(0), 34) << kind;
    EXPECT_TRUE(c->can_extend(0, 6)) << kind;
    EXPECT_FALSE(c->can_extend(0, 7)) << kind;
    c->rewind(0, 6);

    // A prepared step: its sequence refuses controls; the arguments of update_and_attend and
    // commit are checked.
    auto txn = c->prepare(StepBatch{{{0, 6, 1}}});
    auto in_step = [](const char* what) {
      return Want{ErrorKind::InvalidArgument, std::string(what) + ": sequence 0 is part of a prepared, uncommitted step"};
    };
    EXPECT_EQ(error_of([&] { c->rewind(0, 1); }), in_step("rewind")) << kind;
    EXPECT_EQ(error_of([&] { c->clear(0); }), in_step("clear")) << kind;
    EXPECT_EQ(error_of([&] { c->fork(0, 5); }), in_step("fork")) << kind;
    EXPECT_EQ(error_of([&] { c->prepare(StepBatch{}); }),
              (Want{inval, "prepare: another step is prepared and not committed"}))
        << kind;
    std::vector<float> q(2 * 8, 0.25f), kv(8, 0.5f), out(2 * 8);
    auto attend = [&](StepTxn& t, int64_t layer, int64_t hq, const float* qp) {
      c->update_and_attend(t, layer, qp, kv.data(), kv.data(), hq, AttentionParams{}, out.data());
    };
    EXPECT_EQ(error_of([&] { attend(txn, 2, 2, q.data()); }), (Want{inval, "update_and_attend: layer 2 is out of range"}))
        << kind;
    EXPECT_EQ(error_of([&] { attend(txn, -1, 2, q.data()); }),
              (Want{inval, "update_and_attend: layer -1 is out of range"}))
        << kind;
    EXPECT_EQ(error_of([&] { attend(txn, 1, 0, q.data()); }),
              (Want{inval, "update_and_attend: n_q_heads 0 is not a positive multiple of 1 kv heads (layer 1)"}))
        << kind;
    EXPECT_EQ(error_of([&] { attend(txn, 0, 2, nullptr); }), (Want{inval, "update_and_attend: null tensor pointer"}))
        << kind;
    StepTxn none;
    EXPECT_EQ(error_of([&] { attend(none, 0, 2, q.data()); }),
              (Want{inval, "update_and_attend: the step is not prepared on this cache"}))
        << kind;
    attend(txn, 0, 2, q.data());
    EXPECT_EQ(error_of([&] { c->commit(txn); }), (Want{inval, "commit: layer 1 was not updated in this step"})) << kind;
    c->rollback(txn);
    EXPECT_EQ(c->length(0), 6) << kind;
    c->rewind(0, 2);  // the sequence is free again
    EXPECT_EQ(c->length(0), 2) << kind;
  }
}

TEST(KvCaches, RollbackOnExceptionLeavesCacheUnchanged) {
  const CacheSpec spec = small_spec(3, 2, 16, 16, {{AttnKind::Full, 0}, {AttnKind::Window, 3}});
  for (const char* kind : {"reference", "paged"}) {
    auto c = make_cache(kind, spec, opts(512, 8));
    auto oracle = make_cache("reference", spec, opts(512, 8));
    for (auto* x : {c.get(), oracle.get()}) {
      x->add_sequence(0);
      StepBatch b;
      append_rows(*x, 0, tokens_range(10, 13), &b);
      run_step(*x, b, 4, AttentionParams{});
    }
    const size_t used = c->bytes_used();
    {
      StepBatch b;
      append_rows(*c, 0, tokens_range(500, 9), &b);
      try {
        auto txn = c->prepare(b);
        std::vector<float> q(9 * 4 * 16, 0.5f), kv(9 * 2 * 16, -0.5f), out(9 * 4 * 16);
        c->update_and_attend(txn, 0, q.data(), kv.data(), kv.data(), 4, AttentionParams{}, out.data());
        throw std::runtime_error("model failed in layer 1");
      } catch (const std::runtime_error&) {
      }
    }
    EXPECT_EQ(c->length(0), 13) << kind;
    EXPECT_EQ(c->bytes_used(), used) << kind;
    // The rolled-back K/V left no trace: the same continuation matches a cache that never saw it.
    StepBatch b;
    append_rows(*c, 0, tokens_range(40, 6), &b);
    EXPECT_LT(nmse(run_step(*c, b, 4, AttentionParams{}), run_step(*oracle, b, 4, AttentionParams{})), 1e-10) << kind;
  }
}

TEST(KvFactory, ValidatesKindAndOptions) {
  const CacheSpec spec = small_spec(2, 2, 32, 32);
  auto invalid = [&](const std::string& kind, const CacheSpec& s, const CacheOptions& o) {
    try {
      make_cache(kind, s, o);
    } catch (const Error& e) {
      return e.kind() == ErrorKind::InvalidArgument;
    }
    return false;
  };
  EXPECT_TRUE(invalid("lru", spec, opts()));
  EXPECT_TRUE(invalid("paged", spec, opts(4096, 0)));
  EXPECT_TRUE(invalid("paged", spec, opts(4096, 4097)));
  EXPECT_TRUE(invalid("paged", spec, opts(0)));  // no capacity
  EXPECT_TRUE(invalid("paged", spec, opts(4096, 16, DType::Q4_K)));
  EXPECT_TRUE(invalid("paged", small_spec(2, 2, 24, 32), opts(4096, 16, DType::Q8_0)));
  EXPECT_TRUE(invalid("reference", small_spec(2, 2, 32, 40), opts(4096, 16, DType::Q8_0)));
  EXPECT_TRUE(invalid("paged", CacheSpec{}, opts()));
  EXPECT_TRUE(invalid("paged", small_spec(1, 0, 32, 32), opts()));
  EXPECT_TRUE(invalid("paged", small_spec(1, 2, 32, 32, {{AttnKind::Window, 0}}), opts()));
  CacheOptions tiny = opts(0);
  tiny.capacity_bytes = 100;  // less than one block
  EXPECT_TRUE(invalid("paged", spec, tiny));

  EXPECT_EQ(make_cache("paged", spec, opts(4096, 16, DType::Q8_0))->name(), "paged kv cache");
  EXPECT_EQ(make_cache("reference", spec, opts(0))->name(), "reference kv cache");  // 0 = unlimited
  CacheOptions by_bytes = opts(0, 16, DType::F16);
  by_bytes.capacity_bytes = 1 << 20;
  auto p = make_cache("paged", spec, by_bytes);
  // One block: 16 tokens x 2 layers x 2 heads x (32 + 32) x 2 bytes = 8192 bytes -> 128 blocks.
  EXPECT_EQ(static_cast<PagedCache&>(*p).block_bytes(), 8192u);
  EXPECT_EQ(p->bytes_reserved(), size_t{1} << 20);
}
