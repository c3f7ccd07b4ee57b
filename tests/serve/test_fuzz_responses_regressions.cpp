// The responses fuzz harness (fuzz/fuzz_responses.cpp, compiled without its libFuzzer entry point) over
// its committed seeds (each must be accepted), every truncation of them (must not crash or
// throw) and any input it ever crashed on, kept under tests/data/fuzz-regressions/responses/.
#define PTN_FUZZ_NO_ENTRY
#include "../../fuzz/fuzz_responses.cpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "../fuzz_test_util.h"

namespace fs = std::filesystem;

TEST(ResponsesFuzzRegressions, SeedsTruncationsAndCrashInputsAreHandled) {
  EXPECT_GE(ptn_test::expect_seeds_accepted_and_truncations_safe(ptn::fuzz::run_responses,
                                                                 fs::path(PTN_SOURCE_DIR) / "fuzz" / "corpus" / "responses"),
            3u);
  ptn_test::expect_crash_inputs_rejected_cleanly(ptn::fuzz::run_responses,
                                                 fs::path(PTN_TEST_DATA) / "fuzz-regressions" / "responses");
}
