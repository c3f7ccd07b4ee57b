// KV records end to end on the bundled stories260K program: a session's saved blocks restored
// into a fresh session give bit-identical logits to the session that computed them, through a
// file too; every mismatch (program, dtype, block size, layer shapes, tokens, damage) is refused
// by name.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/crc32c.h"
#include "kvcache/paged_cache.h"
#include "program_test_util.h"
#include "runtime/kv_state.h"
#include "runtime/session.h"
#include "../scratch_dir.h"

namespace ptn::testing {
namespace {

using Rows = std::vector<std::vector<float>>;

std::shared_ptr<const Program> stories(const char* file = "stories260K-f32.ptn") {
  return Program::load(std::string(PTN_TEST_DATA) + "/programs/" + file);
}

SessionOptions opts(int64_t block_size = 4, DType dtype = DType::F32) {
  SessionOptions so;
  so.context = 64;
  so.block_size = block_size;
  so.cache_dtype = dtype;
  return so;
}

Rows feed_all(Session& s, const std::vector<int32_t>& toks) {
  Rows out;
  const int64_t vocab = s.program().meta().spec.vocab_size;
  s.feed(toks, [&](int64_t, const float* l) { out.emplace_back(l, l + vocab); });
  return out;
}

// Bitwise equality of two logit rows (NaN-safe, -0 != +0).
bool same_bits(const Rows& a, const Rows& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0) return false;
  return true;
}

// 13 prompt tokens (3 full blocks of 4 + 1) and 9 more.
const std::vector<int32_t> kPrompt = some_tokens(13, 512, 41);
const std::vector<int32_t> kTail = some_tokens(9, 512, 42);

}  // namespace

TEST(KvState, RestoredBlocksGiveBitIdenticalLogits) {
  auto p = stories();
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dt));
    // A computes the prompt (12 tokens, then the 13th), saves, then continues with the tail.
    Session a(p, opts(4, dt));
    feed_all(a, std::vector<int32_t>(kPrompt.begin(), kPrompt.begin() + 12));
    const Rows a_last = feed_all(a, {kPrompt[12]});
    const kv::KvRecord rec = a.save_kv();
    ASSERT_EQ(rec.tokens, kPrompt);
    ASSERT_EQ(rec.blocks.size(), 3u);
    const Rows a_tail = feed_all(a, kTail);

    // B restores: 12 tokens attached, none computed; the 13th and the tail computed as A did.
    Session b(p, opts(4, dt));
    ASSERT_EQ(b.restore_kv(rec, "record"), 12);
    EXPECT_EQ(b.position(), 12);
    const Rows b_last = feed_all(b, {kPrompt[12]});
    const Rows b_tail = feed_all(b, kTail);
    EXPECT_TRUE(same_bits(a_last, b_last));
    EXPECT_TRUE(same_bits(a_tail, b_tail));

    // Without the restore, C computes from scratch: its logits are what A's are (the test can
    // fail: a restore that attached wrong blocks would differ from this).
    Session c(p, opts(4, dt));
    feed_all(c, std::vector<int32_t>(kPrompt.begin(), kPrompt.begin() + 12));
    EXPECT_TRUE(same_bits(feed_all(c, {kPrompt[12]}), a_last));
    EXPECT_TRUE(same_bits(feed_all(c, kTail), a_tail));

    // Damaged block bytes restore (the checksum is the file's guard), and then differ: this is
    // what the comparison above would catch.
    kv::KvRecord bad = rec;
    for (auto& byte : bad.blocks[1].data) byte ^= 0x5a;
    Session d(p, opts(4, dt));
    ASSERT_EQ(d.restore_kv(bad, "damaged"), 12);
    EXPECT_FALSE(same_bits(feed_all(d, {kPrompt[12]}), a_last));
  }
}

TEST(KvState, FileRoundTripAndCheckedDecode) {
  auto p = stories();
  Session a(p, opts());
  feed_all(a, kPrompt);
  const kv::KvRecord rec = a.save_kv();
  ScratchDir dir("kv_state");
  const std::string path = dir.path() + "/session.kv";
  write_kv_file(path, rec);
  const kv::KvRecord back = read_kv_file(path);
  EXPECT_EQ(kv::encode_record(back), kv::encode_record(rec));

  std::vector<uint8_t> bytes = kv::encode_record(rec);
  auto decode = [&](const std::vector<uint8_t>& b) { return kv::decode_record(b.data(), b.size(), "rec.kv"); };
  auto fix_crc = [](std::vector<uint8_t>& b) {
    const uint32_t crc = crc32c(b.data(), b.size() - 4);
    std::memcpy(b.data() + b.size() - 4, &crc, 4);
  };
  {  // a flipped byte in a block: the checksum
    auto b = bytes;
    b[b.size() - 10] ^= 1;
    expect_error([&] { decode(b); }, ErrorKind::Corrupt, {"rec.kv", "checksum"});
  }
  {  // a changed token, checksum fixed: the chained hash
    kv::KvRecord r2 = rec;
    r2.tokens.clear();  // a tier-style record of the blocks alone
    r2.blocks[0].tokens[0] ^= 1;
    auto e = kv::encode_record(r2);
    expect_error([&] { decode(e); }, ErrorKind::Corrupt, {"block 0", "hash"});
  }
  {  // truncated
    auto b = std::vector<uint8_t>(bytes.begin(), bytes.end() - 9);
    fix_crc(b);
    expect_error([&] { decode(b); }, ErrorKind::Corrupt, {"rec.kv"});
  }
  {  // the version
    auto b = bytes;
    b[8] = 9;
    fix_crc(b);
    expect_error([&] { decode(b); }, ErrorKind::Corrupt, {"version 9"});
  }
  {  // session tokens that differ from block 1's
    kv::KvRecord r2 = rec;
    r2.tokens[5] ^= 1;
    expect_error([&] { kv::encode_record(r2); }, ErrorKind::InvalidArgument, {"block 1"});
  }
  expect_error([&] { read_kv_file(dir.path() + "/absent.kv"); }, ErrorKind::Io, {"absent.kv"});
}

TEST(KvState, EveryMismatchIsRefusedByName) {
  auto p = stories();
  Session a(p, opts());
  feed_all(a, kPrompt);
  const kv::KvRecord rec = a.save_kv();

  auto refused = [&](const kv::KvRecord& r, Session& s, const std::vector<std::string>& parts) {
    expect_error([&] { s.restore_kv(r, "rec.kv"); }, ErrorKind::InvalidArgument, parts);
    EXPECT_EQ(s.position(), 0);
    EXPECT_EQ(s.cache()->length(0), 0);
  };
  {  // another program: same shapes, other weights (the q8_0 export)
    Session s(stories("stories260K-q8_0.ptn"), opts());
    refused(rec, s, {"rec.kv", "program"});
  }
  {
    Session s(p, opts(4, DType::F16));
    refused(rec, s, {"cache dtype", "f32", "f16"});
  }
  {
    Session s(p, opts(8));
    refused(rec, s, {"block size 4", "8 in this cache"});
  }
  {
    kv::KvRecord r = rec;
    r.id.layers[3].n_kv_heads += 1;
    Session s(p, opts());
    refused(r, s, {"layer 3"});
    r = rec;
    r.id.layers.pop_back();
    refused(r, s, {"layer count"});
    r = rec;
    r.id.layers[0].kind = AttnKind::Window;
    r.id.layers[0].span = 8;
    refused(r, s, {"layer 0", "window 8"});
  }
  {
    kv::KvRecord r = rec;
    r.tokens[12] = 512;
    Session s(p, opts());
    refused(r, s, {"token 12", "vocabulary"});
    r = rec;
    r.tokens.clear();
    refused(r, s, {"no session tokens"});
  }
  {
    Session s(p, opts());
    s.feed({1});
    expect_error([&] { s.restore_kv(rec, "rec.kv"); }, ErrorKind::InvalidArgument, {"empty session"});
  }
  {
    SessionOptions so = opts();
    so.context = 8;
    Session s(p, so);
    refused(rec, s, {"context of 8"});
  }
  {
    SessionOptions so = opts();
    so.cache_kind = "reference";
    Session s(p, so);
    expect_error([&] { s.restore_kv(rec, "rec.kv"); }, ErrorKind::Unsupported, {"paged"});
    expect_error([&] { (void)s.save_kv(); }, ErrorKind::Unsupported, {"paged"});
  }
}

TEST(KvState, PagedCacheRestoreRunsOutOfRoomWithoutHarm) {
  auto p = stories();
  Session a(p, opts());
  feed_all(a, kPrompt);
  const kv::KvRecord rec = a.save_kv();
  // A cache of 2 blocks per group.
  CacheOptions co;
  co.block_size = 4;
  co.capacity_tokens = 8;
  PagedCache cache(p->meta().cache_spec, co);
  const int64_t G = cache.n_groups();
  EXPECT_TRUE(cache.restore_block(rec.blocks[1]));
  EXPECT_TRUE(cache.restore_block(rec.blocks[1])) << "already held: nothing to do";
  EXPECT_EQ(cache.stats().cached, G);
  EXPECT_TRUE(cache.restore_block(rec.blocks[0]));
  EXPECT_TRUE(cache.restore_block(rec.blocks[2])) << "evicts the least recently used (block 1)";
  cache.add_sequence(0);
  EXPECT_EQ(cache.reuse_prefix(0, rec.tokens), 4) << "block 1 was evicted: only block 0 chains";
  cache.clear(0);
  EXPECT_TRUE(cache.restore_block(rec.blocks[1]));
  cache.add_sequence(1);
  EXPECT_EQ(cache.reuse_prefix(1, rec.tokens), 8);
  EXPECT_EQ(cache.stats().used, 2 * G);
  EXPECT_FALSE(cache.restore_block(rec.blocks[2])) << "every block is held: no room, nothing changes";
  EXPECT_EQ(cache.stats().used, 2 * G);
  kv::BlockData wrong = rec.blocks[1];
  wrong.hash ^= 1;
  expect_error([&] { cache.restore_block(wrong); }, ErrorKind::InvalidArgument, {"hash"});
  wrong = rec.blocks[1];
  wrong.data.pop_back();
  expect_error([&] { cache.restore_block(wrong); }, ErrorKind::InvalidArgument, {"bytes"});
}

}  // namespace ptn::testing
