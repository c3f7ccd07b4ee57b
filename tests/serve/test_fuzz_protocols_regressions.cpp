// The protocols fuzz harness (fuzz/fuzz_protocols.cpp, compiled without its libFuzzer entry
// point) over its committed seeds (each must be accepted), every truncation of them (must not
// crash or throw) and the crash inputs kept under tests/data/fuzz-regressions/protocols/.
#define PTN_FUZZ_NO_ENTRY
#include "../../fuzz/fuzz_protocols.cpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../fuzz_test_util.h"

namespace fs = std::filesystem;

namespace {

int run(const std::vector<uint8_t>& b) { return ptn::fuzz::run_protocols(b.empty() ? nullptr : b.data(), b.size()); }

}  // namespace

TEST(ProtocolsFuzzRegressions, SeedsAreAcceptedAndTruncationsAreSafe) {
  const auto seeds = ptn_test::files_in(fs::path(PTN_SOURCE_DIR) / "fuzz" / "corpus" / "protocols");
  ASSERT_GE(seeds.size(), 3u);
  for (const auto& p : seeds) {
    SCOPED_TRACE(p.string());
    const auto bytes = ptn_test::read_bytes(p);
    EXPECT_EQ(run(bytes), 1) << "a committed seed is no longer accepted";
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      int result = -1;
      EXPECT_NO_THROW(result = run(std::vector<uint8_t>(bytes.begin(), bytes.begin() + cut))) << "cut at " << cut;
      EXPECT_TRUE(result == 0 || result == 1);
    }
  }
}

TEST(ProtocolsFuzzRegressions, CrashInputsAreRejectedCleanly) {
  // Empty until the fuzzer finds something: each input it ever crashed on is kept here.
  for (const auto& p : ptn_test::files_in(fs::path(PTN_TEST_DATA) / "fuzz-regressions" / "protocols")) {
    SCOPED_TRACE(p.string());
    int result = -1;
    EXPECT_NO_THROW(result = run(ptn_test::read_bytes(p)));
    EXPECT_TRUE(result == 0 || result == 1);
  }
}
