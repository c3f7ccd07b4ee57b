// Replays the grammar fuzz harnesses (fuzz/fuzz_grammar.cpp, fuzz/fuzz_json_schema.cpp, compiled
// here without their libFuzzer entry point) over the inputs in tests/data/fuzz-regressions/
// <target>/ (must be rejected with a ptn::Error or accepted, never crash), the committed seeds
// (must be accepted all the way) and every truncation of the seeds.
#define PTN_FUZZ_NO_ENTRY
#include "../../fuzz/fuzz_grammar.cpp"
#include "../../fuzz/fuzz_json_schema.cpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../fuzz_test_util.h"

namespace fs = std::filesystem;

namespace {

struct Target {
  const char* name;
  int (*run)(const uint8_t*, size_t);
};

const Target kTargets[] = {{"grammar", ptn::fuzz::run_grammar}, {"json_schema", ptn::fuzz::run_json_schema}};

int run(const Target& t, const std::vector<uint8_t>& bytes) {
  return t.run(bytes.empty() ? nullptr : bytes.data(), bytes.size());
}

}  // namespace

TEST(GrammarFuzzRegressions, CrashInputsAreRejectedCleanly) {
  size_t n = 0;
  for (const auto& t : kTargets) {
    for (const auto& p : ptn_test::files_in(fs::path(PTN_TEST_DATA) / "fuzz-regressions" / t.name)) {
      SCOPED_TRACE(p.string());
      int result = -1;
      EXPECT_NO_THROW(result = run(t, ptn_test::read_bytes(p)));
      EXPECT_TRUE(result == 0 || result == 1);
      ++n;
    }
  }
  EXPECT_GE(n, 4u);
}

TEST(GrammarFuzzRegressions, SeedsAreAcceptedAndTruncationsAreSafe) {
  size_t n = 0;
  for (const auto& t : kTargets) {
    for (const auto& p : ptn_test::files_in(fs::path(PTN_SOURCE_DIR) / "fuzz" / "corpus" / t.name)) {
      SCOPED_TRACE(p.string());
      auto bytes = ptn_test::read_bytes(p);
      ASSERT_FALSE(bytes.empty());
      EXPECT_EQ(run(t, bytes), 1) << "a committed seed no longer parses";
      for (size_t cut = 0; cut < bytes.size(); ++cut) {
        std::vector<uint8_t> head(bytes.begin(), bytes.begin() + cut);
        int result = -1;
        EXPECT_NO_THROW(result = run(t, head)) << "cut at " << cut;
        EXPECT_TRUE(result == 0 || result == 1);
      }
      ++n;
    }
  }
  EXPECT_GE(n, 2u);
}
