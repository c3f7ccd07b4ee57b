// The kv_record fuzz harness (fuzz/fuzz_kv_record.cpp, compiled without its libFuzzer entry
// point) over its committed seeds (each must decode), every truncation and every single-byte
// change of them (must not crash or throw) and the crash inputs kept under
// tests/data/fuzz-regressions/kv_record/.
#define PTN_FUZZ_NO_ENTRY
#include "../../fuzz/fuzz_kv_record.cpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../fuzz_test_util.h"

namespace fs = std::filesystem;

namespace {

int run(const std::vector<uint8_t>& b) { return ptn::fuzz::run_kv_record(b.empty() ? nullptr : b.data(), b.size()); }

}  // namespace

TEST(KvRecordFuzzRegressions, SeedsAreAcceptedAndDamageIsRefusedSafely) {
  const auto seeds = ptn_test::files_in(fs::path(PTN_SOURCE_DIR) / "fuzz" / "corpus" / "kv_record");
  ASSERT_GE(seeds.size(), 3u);
  for (const auto& p : seeds) {
    SCOPED_TRACE(p.string());
    const auto bytes = ptn_test::read_bytes(p);
    EXPECT_EQ(run(bytes), 1) << "a committed seed is no longer accepted";
    // As given, every strict prefix fails its checksum or its bounds.
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      std::vector<uint8_t> b(bytes.begin(), bytes.begin() + cut);
      int result = -1;
      EXPECT_NO_THROW(result = run(b)) << "cut at " << cut;
      EXPECT_TRUE(result == 0 || result == 1);
    }
    // One flipped bit anywhere before the CRC: refused by the checksum as given.
    for (size_t at = 0; at + 4 < bytes.size(); at += 7) {
      std::vector<uint8_t> b = bytes;
      b[at] ^= 0x10;
      EXPECT_THROW(ptn::kv::decode_record(b.data(), b.size(), "seed"), ptn::Error) << "byte " << at;
      int result = -1;
      EXPECT_NO_THROW(result = run(b)) << "byte " << at;  // and with the CRC fixed: no crash
      EXPECT_TRUE(result == 0 || result == 1);
    }
  }
}

TEST(KvRecordFuzzRegressions, CrashInputsAreRejectedCleanly) {
  // Each input the fuzzer ever crashed on is kept here (none yet); garbage is refused.
  ptn_test::expect_crash_inputs_rejected_cleanly(ptn::fuzz::run_kv_record,
                                                 fs::path(PTN_TEST_DATA) / "fuzz-regressions" / "kv_record");
  EXPECT_EQ(run(std::vector<uint8_t>{'P', 'T', 'N', 'K', 'V', 0, 1}), 0);
}
