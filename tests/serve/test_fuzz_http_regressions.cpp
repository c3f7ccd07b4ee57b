// The http_request fuzz harness (fuzz/fuzz_http_request.cpp, compiled without its libFuzzer entry
// point) over its committed seeds, any crash inputs kept under tests/data/fuzz-regressions/http_request/,
// and every truncation of the seeds. tests/runtime/test_fuzz_regressions does the same for the
// other targets; this one lives here because the harness links ptn_serve.
#define PTN_FUZZ_NO_ENTRY
#include "../../fuzz/fuzz_http_request.cpp"

#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

#include "../fuzz_test_util.h"

namespace fs = std::filesystem;

namespace {

using ptn_test::files_in;

std::string read_text(const fs::path& p) {
  const auto bytes = ptn_test::read_bytes(p);
  return std::string(bytes.begin(), bytes.end());
}

int run(const std::string& s) {
  return ptn::fuzz::run_http_request(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

}  // namespace

TEST(HttpRequestFuzzRegressions, SeedsAreAcceptedAndTheirCutsRejectedCleanly) {
  const auto seeds = files_in(fs::path(PTN_SOURCE_DIR) / "fuzz" / "corpus" / "http_request");
  ASSERT_GE(seeds.size(), 3u);
  size_t accepted = 0;
  for (const auto& p : seeds) {
    SCOPED_TRACE(p.string());
    std::string body = read_text(p);
    while (!body.empty() && std::isspace(static_cast<unsigned char>(body.back()))) body.pop_back();
    int result = -1;
    EXPECT_NO_THROW(result = run(body));
    EXPECT_TRUE(result == 0 || result == 1);
    accepted += result == 1;
    // A JSON object cut short is never a valid request; no cut may crash or throw.
    for (size_t cut = 0; cut + 1 < body.size(); ++cut) {
      result = -1;
      EXPECT_NO_THROW(result = run(body.substr(0, cut))) << "cut at " << cut;
      EXPECT_EQ(result, 0) << "cut at " << cut;
    }
  }
  // Most seeds are valid requests (completion-bias, with a list of prompts, is refused on purpose).
  EXPECT_GE(accepted, seeds.size() - 1) << "a committed seed no longer parses";
}

TEST(HttpRequestFuzzRegressions, CrashInputsAreRejectedCleanly) {
  // Each input the fuzzer ever crashed on is kept here (none yet); the harness must also say no.
  ptn_test::expect_crash_inputs_rejected_cleanly(ptn::fuzz::run_http_request,
                                                 fs::path(PTN_TEST_DATA) / "fuzz-regressions" / "http_request");
  EXPECT_EQ(run("{\"messages\": \"not a list\"}"), 0);
}

TEST(HttpRequestFuzzRegressions, HarnessSaysNo) {
  for (const std::string& bad :
       {std::string(), std::string("{"), std::string("[1,2]"), std::string("{\"prompt\": 5}"),
        std::string("{\"prompt\": \"x\", \"max_tokens\": -1}"), std::string("{\"messages\": [{\"role\": 7}]}"),
        std::string(2000, '[')}) {
    SCOPED_TRACE(bad.substr(0, 40));
    int result = -1;
    EXPECT_NO_THROW(result = run(bad));
    EXPECT_EQ(result, 0);
  }
  EXPECT_EQ(run("{\"prompt\": \"Once upon a time\", \"max_tokens\": 4}"), 1);
}
