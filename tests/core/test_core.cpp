// Tests of the core utilities: errors and checked arithmetic (core/error.h), the bounded reader
// (core/reader.h), tensors (core/tensor.h) and the thread pool (core/threadpool.h).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/blocks.h"
#include "core/error.h"
#include "core/reader.h"
#include "core/tensor.h"
#include "core/threadpool.h"

namespace ptn {
namespace {

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

template <class F>
ErrorKind kind_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no ptn::Error thrown";
  return ErrorKind::Internal;
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST(Error, MessageNamesWhereWhatAndKind) {
  const Error e(ErrorKind::Corrupt, "model.gguf: tensor 'x'", "offset out of range");
  EXPECT_EQ(e.kind(), ErrorKind::Corrupt);
  EXPECT_EQ(e.where(), "model.gguf: tensor 'x'");
  EXPECT_EQ(e.detail(), "offset out of range");
  EXPECT_STREQ(e.what(), "model.gguf: tensor 'x': offset out of range (corrupt input)");
  EXPECT_STREQ(Error(ErrorKind::Io, "", "no such file").what(), "no such file (i/o error)");
  for (ErrorKind k : {ErrorKind::InvalidArgument, ErrorKind::Corrupt, ErrorKind::Unsupported, ErrorKind::Io,
                      ErrorKind::Capacity, ErrorKind::Internal})
    EXPECT_GT(std::strlen(error_kind_name(k)), 3u);
  EXPECT_STRNE(error_kind_name(ErrorKind::Io), error_kind_name(ErrorKind::Capacity));
  // Catchable as std::runtime_error by front ends that do not know ptn::Error.
  EXPECT_THROW(fail(ErrorKind::Capacity, "cache", "full"), std::runtime_error);
}

TEST(Error, CheckMacroThrowsOnlyWhenFalse) {
  int evaluated = 0;
  auto msg = [&] {
    ++evaluated;
    return std::string("bad");
  };
  EXPECT_NO_THROW(PTN_CHECK(1 + 1 == 2, ErrorKind::InvalidArgument, "op", msg()));
  EXPECT_EQ(evaluated, 0);  // the message is only built on failure
  EXPECT_EQ(kind_of([&] { PTN_CHECK(false, ErrorKind::Unsupported, "op", msg()); }), ErrorKind::Unsupported);
  EXPECT_EQ(evaluated, 1);
}

TEST(CheckedArithmetic, ExactAtTheLimits) {
  EXPECT_EQ(checked_add(kU64Max - 5, 5, "x"), kU64Max);
  EXPECT_EQ(checked_add(0, 0, "x"), 0u);
  EXPECT_EQ(checked_mul(0, kU64Max, "x"), 0u);
  EXPECT_EQ(checked_mul(kU64Max, 1, "x"), kU64Max);
  EXPECT_EQ(checked_mul(uint64_t{1} << 32, (uint64_t{1} << 32) - 1, "x"), (uint64_t{1} << 32) * ((uint64_t{1} << 32) - 1));
  EXPECT_EQ(checked_mul(0xffffffffu, 0x100000001ull, "x"), kU64Max);  // (2^32-1)(2^32+1) = 2^64-1
}

TEST(CheckedArithmetic, OverflowThrowsCorruptNamingWhere) {
  try {
    checked_add(kU64Max, 1, "file.gguf: tensor data");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Corrupt);
    EXPECT_EQ(e.where(), "file.gguf: tensor data");
  }
  EXPECT_THROW(checked_add(kU64Max / 2 + 1, kU64Max / 2 + 1, "x"), Error);
  EXPECT_THROW(checked_mul(uint64_t{1} << 32, uint64_t{1} << 32, "x"), Error);
  EXPECT_THROW(checked_mul(kU64Max, 2, "x"), Error);
  EXPECT_THROW(checked_mul(0x100000001ull, 0x100000000ull, "x"), Error);
}

// ---------------------------------------------------------------------------------------------
// ByteReader

TEST(ByteReader, ReadsLittleEndianAndAdvances) {
  const uint8_t data[] = {0x01, 0x02, 0x03, 0x04, 0xff, 0xfe, 'a', 'b', 'c', 0x00, 0x00, 0x80, 0x3f};
  ByteReader r(data, sizeof data, "mem");
  EXPECT_EQ(r.read<uint32_t>("u32"), 0x04030201u);
  EXPECT_EQ(r.read<int16_t>("i16"), static_cast<int16_t>(0xfeff));
  EXPECT_EQ(r.string(3, 16, "s"), "abc");
  EXPECT_EQ(r.pos(), 9u);
  EXPECT_EQ(r.remaining(), 4u);
  EXPECT_EQ(r.read<float>("f32"), 1.0f);
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(r.bytes(0, "empty"), data + sizeof data);  // zero bytes at the end is fine
}

TEST(ByteReader, TruncatedReadsThrowCorruptAndLeavePositionAlone) {
  const uint8_t data[6] = {};
  ByteReader r(data, sizeof data, "x.bin");
  r.skip(4, "head");
  try {
    r.read<uint32_t>("count");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Corrupt);
    EXPECT_NE(e.where().find("x.bin"), std::string::npos);
    EXPECT_NE(e.where().find("byte 4"), std::string::npos);
    EXPECT_NE(e.where().find("count"), std::string::npos);
  }
  EXPECT_EQ(r.pos(), 4u);
  // Lengths that would wrap a pointer or a size_t are refused, not wrapped.
  EXPECT_THROW(r.bytes(kU64Max, "n"), Error);
  EXPECT_THROW(r.bytes(kU64Max - 1, "n"), Error);
  EXPECT_THROW(r.skip(3, "n"), Error);
  EXPECT_EQ(r.pos(), 4u);
  EXPECT_NO_THROW(r.skip(2, "n"));
}

TEST(ByteReader, StringLimitAndSeek) {
  const uint8_t data[8] = {'h', 'e', 'l', 'l', 'o', 0, 0, 0};
  ByteReader r(data, sizeof data, "mem");
  EXPECT_EQ(kind_of([&] { r.string(5, 4, "name"); }), ErrorKind::Corrupt);  // over the limit
  EXPECT_EQ(r.pos(), 0u);
  EXPECT_EQ(kind_of([&] { r.string(9, 100, "name"); }), ErrorKind::Corrupt);  // past the end
  EXPECT_EQ(r.string(5, 5, "name"), "hello");
  r.seek(8, "end");  // seeking to the very end is allowed
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(kind_of([&] { r.seek(9, "past"); }), ErrorKind::Corrupt);
  EXPECT_EQ(kind_of([&] { r.seek(kU64Max, "past"); }), ErrorKind::Corrupt);
  r.seek(1, "back");
  EXPECT_EQ(r.read<uint8_t>("c"), 'e');
}

TEST(ByteReader, Align) {
  std::vector<uint8_t> data(100);
  ByteReader r(data.data(), data.size(), "mem");
  r.skip(5, "x");
  r.align(32, "pad");
  EXPECT_EQ(r.pos(), 32u);
  r.align(32, "pad");  // already aligned: no move
  EXPECT_EQ(r.pos(), 32u);
  r.align(1, "pad");
  EXPECT_EQ(r.pos(), 32u);
  r.skip(1, "x");
  EXPECT_EQ(kind_of([&] { r.align(128, "pad"); }), ErrorKind::Corrupt);  // 128 is past the end
  // Alignments come from files (GGUF general.alignment): zero, non-powers of two and values
  // that wrap the arithmetic must be errors, not a division by zero or a backwards seek.
  EXPECT_EQ(kind_of([&] { r.align(0, "alignment"); }), ErrorKind::Corrupt);
  EXPECT_EQ(kind_of([&] { r.align(24, "alignment"); }), ErrorKind::Corrupt);
  EXPECT_EQ(kind_of([&] { r.align(kU64Max, "alignment"); }), ErrorKind::Corrupt);
  EXPECT_EQ(kind_of([&] { r.align(uint64_t{1} << 63, "alignment"); }), ErrorKind::Corrupt);
  EXPECT_EQ(r.pos(), 33u);
}

// ---------------------------------------------------------------------------------------------
// Tensor

TEST(Tensor, ZerosShapeStridesAndBytes) {
  Tensor t = Tensor::zeros(DType::F32, {2, 3, 4});
  EXPECT_EQ(t.ndim(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.rows(), 6);
  EXPECT_EQ(t.row_size(), 4);
  EXPECT_EQ(t.row_bytes(), 16u);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_EQ(t.strides(), (std::vector<int64_t>{48, 16, 4}));
  EXPECT_EQ(t.dim(-1), 4);
  EXPECT_EQ(t.dim(0), 2);
  EXPECT_THROW(t.dim(3), Error);
  EXPECT_THROW(t.dim(-4), Error);
  EXPECT_TRUE(t.contiguous());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % 64, 0u);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(t.data_as<float>()[i], 0.0f);
  EXPECT_EQ(t.describe(), "f32[2, 3, 4]");

  Tensor q = Tensor::zeros(DType::Q4_K, {3, 512});
  EXPECT_EQ(q.row_bytes(), 2 * sizeof(BlockQ4K));
  EXPECT_EQ(q.nbytes(), 6 * sizeof(BlockQ4K));
  EXPECT_EQ(q.row_ptr(2) - q.row_ptr(0), static_cast<ptrdiff_t>(2 * q.row_bytes()));

  Tensor s = Tensor::zeros(DType::F16, {});  // a scalar
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.nbytes(), 2u);
  Tensor e = Tensor::zeros(DType::F32, {0, 8});
  EXPECT_EQ(e.nbytes(), 0u);
}

TEST(Tensor, InvalidShapesAreRefused) {
  EXPECT_EQ(kind_of([] { Tensor::zeros(DType::F32, {2, -1}); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind_of([] { Tensor::zeros(DType::F32, {1, 1, 1, 1, 1}); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind_of([] { Tensor::zeros(DType::Q8_0, {4, 33}); }), ErrorKind::InvalidArgument);
  EXPECT_THROW(Tensor::view(DType::Q4_K, {2, 128}, nullptr), Error);
  // Element counts or byte sizes beyond 64 bits (as a corrupt file header could claim) are errors
  // before anything is allocated or indexed.
  const int64_t big = int64_t{1} << 40;
  EXPECT_THROW(Tensor::view(DType::F32, {big, big}, nullptr), Error);
  EXPECT_THROW(Tensor::view(DType::F32, {int64_t{1} << 62, 3}, nullptr), Error);  // bytes overflow
  EXPECT_THROW(Tensor::view(DType::I8, {int64_t{1} << 62, 3}, nullptr), Error);  // > INT64_MAX elements
  EXPECT_THROW(Tensor::view(DType::F64, {int64_t{1} << 61, 1}, nullptr), Error);
  const Tensor ok = Tensor::view(DType::I8, {int64_t{1} << 31, 1 << 30}, nullptr);  // 2^61 bytes: fine as a view
  EXPECT_EQ(ok.nbytes(), uint64_t{1} << 61);
}

TEST(Tensor, AlignedBufferRefusesImpossibleSizes) {
  auto b = aligned_buffer(100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.get()) % 64, 0u);
  // A size near SIZE_MAX must not wrap to a tiny allocation.
  EXPECT_THROW(aligned_buffer(std::numeric_limits<size_t>::max() - 10), std::bad_alloc);
  EXPECT_THROW(aligned_buffer(std::numeric_limits<size_t>::max()), std::bad_alloc);
}

TEST(Tensor, ViewsSlicesReshapesCopies) {
  std::vector<float> data(12);
  for (int i = 0; i < 12; ++i) data[i] = static_cast<float>(i);
  auto owner = std::make_shared<std::vector<float>>(data);
  Tensor v = Tensor::view(DType::F32, {3, 4}, owner->data(), owner);
  std::weak_ptr<std::vector<float>> weak = owner;
  owner.reset();
  EXPECT_FALSE(weak.expired());  // the view keeps its owner alive
  EXPECT_EQ(v.data_as<float>()[5], 5.0f);

  Tensor s = v.slice_rows(1, 3);
  EXPECT_EQ(s.shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(s.data_as<float>()[0], 4.0f);
  EXPECT_EQ(v.slice_rows(3, 3).numel(), 0);
  EXPECT_THROW(v.slice_rows(2, 1), Error);
  EXPECT_THROW(v.slice_rows(0, 4), Error);
  EXPECT_THROW(v.slice_rows(-1, 1), Error);
  Tensor one_d = Tensor::view(DType::F32, {12}, data.data());
  EXPECT_EQ(one_d.slice_rows(10, 12).data_as<float>()[1], 11.0f);

  Tensor r = v.reshaped({2, 6});
  EXPECT_EQ(r.data(), v.data());
  EXPECT_EQ(r.row_size(), 6);
  EXPECT_THROW(v.reshaped({5, 2}), Error);

  Tensor c = v.copy();
  EXPECT_NE(c.data(), v.data());
  EXPECT_EQ(std::memcmp(c.data(), v.data(), 48), 0);
  c.data_as<float>()[0] = 99.0f;
  EXPECT_EQ(v.data_as<float>()[0], 0.0f);
  v = s = r = Tensor();  // the last views sharing the owner
  EXPECT_TRUE(weak.expired());
}

TEST(Tensor, CheckShape) {
  Tensor t = Tensor::zeros(DType::F32, {2, 8});
  EXPECT_NO_THROW(check_shape("op", t, {2, 8}));
  EXPECT_NO_THROW(check_shape("op", t, {-1, 8}));  // -1: any size
  try {
    check_shape("matmul", t, {2, 9});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_EQ(e.where(), "matmul");
    EXPECT_NE(e.detail().find("[2, 9]"), std::string::npos);
    EXPECT_NE(e.detail().find("f32[2, 8]"), std::string::npos);
  }
  EXPECT_THROW(check_shape("op", t, {2, 8, 1}), Error);
}

// ---------------------------------------------------------------------------------------------
// ThreadPool

TEST(ThreadPool, RunCallsEveryThreadOnce) {
  for (int n : {1, 2, 5}) {
    ThreadPool pool(n);
    EXPECT_EQ(pool.size(), n);
    std::vector<std::atomic<int>> calls(n);
    pool.run([&](int ti, int nt) {
      EXPECT_EQ(nt, n);
      calls[ti].fetch_add(1);
    });
    for (int i = 0; i < n; ++i) EXPECT_EQ(calls[i].load(), 1) << "thread " << i;
  }
  EXPECT_EQ(ThreadPool(0).size(), 1);
  EXPECT_EQ(ThreadPool(-3).size(), 1);
}

TEST(ThreadPool, ParallelForCoversTheRangeExactlyOnce) {
  ThreadPool pool(4);
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{64}, int64_t{1000}, int64_t{1023}}) {
    for (int64_t grain : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{16}, int64_t{5000}}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<bool> misaligned{false};
      pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int) {
        if (grain > 0 && b % grain != 0) misaligned = true;  // ranges start on a grain boundary
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << "/" << grain << " @" << i;
      EXPECT_FALSE(misaligned);
    }
  }
}

TEST(ThreadPool, ParallelForDynamicCoversTheRangeExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{64}, int64_t{1000}, int64_t{1023}}) {
    for (int64_t grain : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{16}, int64_t{5000}}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<bool> bad_range{false};
      pool.parallel_for_dynamic(n, grain, [&](int64_t b, int64_t e, int ti) {
        const int64_t g = grain < 1 ? 1 : grain;
        if (b % g != 0 || e <= b || e - b > g || ti < 0 || ti >= 3) bad_range = true;
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << "/" << grain << " @" << i;
      EXPECT_FALSE(bad_range) << n << "/" << grain;
    }
  }
}

TEST(ThreadPool, ExceptionsReachTheCaller) {
  ThreadPool pool(3);
  // From a worker thread and from the calling thread; the pool stays usable afterwards.
  EXPECT_THROW(pool.run([](int ti, int) {
    if (ti == 2) fail(ErrorKind::Internal, "job", "worker failed");
  }), Error);
  EXPECT_THROW(pool.run([](int ti, int) {
    if (ti == 0) throw std::runtime_error("caller failed");
  }), std::runtime_error);
  std::atomic<int> sum{0};
  pool.run([&](int ti, int) { sum += ti + 1; });
  EXPECT_EQ(sum.load(), 6);
  EXPECT_THROW(pool.parallel_for(100, 1, [](int64_t b, int64_t, int) {
    if (b > 0) throw std::runtime_error("range failed");
  }), std::runtime_error);
}

TEST(ThreadPool, ManySmallJobsBackToBack) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  for (int i = 0; i < 2000; ++i) pool.run([&](int ti, int) { total += ti; });
  EXPECT_EQ(total.load(), 2000 * 3);  // 0 + 1 + 2 per job
}

TEST(ThreadPool, JobsFromSeveralThreadsAreSerialised) {
  // Two threads sharing a pool (e.g. two server workers using default_pool()) must each get
  // their whole job run, once per pool thread.
  ThreadPool pool(3);
  std::atomic<int64_t> a{0}, b{0};
  auto client = [&](std::atomic<int64_t>& counter) {
    for (int i = 0; i < 200; ++i) pool.run([&](int, int) { counter += 1; });
  };
  std::thread t1(client, std::ref(a)), t2(client, std::ref(b));
  t1.join();
  t2.join();
  EXPECT_EQ(a.load(), 200 * 3);
  EXPECT_EQ(b.load(), 200 * 3);
}

TEST(ThreadPool, NestedRunOnTheSamePoolRunsInline) {
  ThreadPool pool(3), other(2);
  std::atomic<int> inner_calls{0}, other_calls{0};
  pool.run([&](int, int) {
    pool.run([&](int ti, int nt) {  // would wait for itself if dispatched
      EXPECT_EQ(ti, 0);
      EXPECT_EQ(nt, 1);
      inner_calls += 1;
    });
  });
  EXPECT_EQ(inner_calls.load(), 3);
  // A job may still use a different pool (from the calling thread only: that pool is not
  // reentrant across threads either, it serialises them).
  pool.run([&](int ti, int) {
    if (ti == 0) other.run([&](int, int) { other_calls += 1; });
  });
  EXPECT_EQ(other_calls.load(), 2);
  std::atomic<int64_t> covered{0};
  pool.parallel_for(10, 1, [&](int64_t b, int64_t e, int) {
    pool.parallel_for(e - b, 1, [&](int64_t b2, int64_t e2, int) { covered += e2 - b2; });
  });
  EXPECT_EQ(covered.load(), 10);
}

TEST(ThreadPool, DefaultPool) {
  EXPECT_EQ(kind_of([] { set_default_threads(0); }), ErrorKind::InvalidArgument);
  EXPECT_EQ(kind_of([] { set_default_threads(5000); }), ErrorKind::InvalidArgument);
  set_default_threads(2);
  EXPECT_EQ(default_threads(), 2);
  EXPECT_EQ(default_pool().size(), 2);
  set_default_threads(3);
  EXPECT_EQ(default_pool().size(), 3);
  EXPECT_EQ(&default_pool(), &default_pool());
}

}  // namespace
}  // namespace ptn
