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
  ptn_test::FuzzRun run;
};

const Target kTargets[] = {{"grammar", ptn::fuzz::run_grammar}, {"json_schema", ptn::fuzz::run_json_schema}};

}  // namespace

TEST(GrammarFuzzRegressions, CrashInputsAreRejectedCleanly) {
  size_t n = 0;
  for (const auto& t : kTargets)
    n += ptn_test::expect_crash_inputs_rejected_cleanly(t.run, fs::path(PTN_TEST_DATA) / "fuzz-regressions" / t.name);
  EXPECT_GE(n, 4u);
}

TEST(GrammarFuzzRegressions, SeedsAreAcceptedAndTruncationsAreSafe) {
  size_t n = 0;
  for (const auto& t : kTargets)
    n += ptn_test::expect_seeds_accepted_and_truncations_safe(t.run, fs::path(PTN_SOURCE_DIR) / "fuzz" / "corpus" / t.name);
  EXPECT_GE(n, 2u);
}
