// Runs the fuzz targets' harnesses (fuzz/fuzz_<name>.cpp, compiled here without their libFuzzer
// entry point) over every input that once crashed a parser (tests/data/fuzz-regressions/<name>/)
// and over the committed seeds (fuzz/corpus/<name>/). A regression input must be rejected with a
// ptn::Error or accepted, never crash or let another exception escape; the seeds are valid files
// and must be accepted all the way. Run under `make test SANITIZE=1` to catch memory errors too.
// http_request needs ptn_serve, which tests/runtime does not link: tests/serve/test_fuzz_http_regressions.
#define PTN_FUZZ_NO_ENTRY
#include "../../fuzz/fuzz_chat_template.cpp"
#include "../../fuzz/fuzz_gguf.cpp"
#include "../../fuzz/fuzz_hf_config.cpp"
#include "../../fuzz/fuzz_ptn.cpp"
#include "../../fuzz/fuzz_safetensors.cpp"
#include "../../fuzz/fuzz_tokenizer_json.cpp"

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

const Target kTargets[] = {
    {"gguf", ptn::fuzz::run_gguf},
    {"safetensors", ptn::fuzz::run_safetensors},
    {"hf_config", ptn::fuzz::run_hf_config},
    {"ptn", ptn::fuzz::run_ptn},
    {"tokenizer_json", ptn::fuzz::run_tokenizer_json},
    {"chat_template", ptn::fuzz::run_chat_template},
};

using ptn_test::files_in;
using ptn_test::read_bytes;

int run(const Target& t, const std::vector<uint8_t>& bytes) {
  return t.run(bytes.empty() ? nullptr : bytes.data(), bytes.size());
}

}  // namespace

// The GGUF seeds scripts/fuzz.sh adds from the real fixtures: llama.cpp's stories260K files, whose
// blocks (Q4_0, Q5_0, Q5_1, IQ4_NL, Q8_0, F16, BF16) the harness decodes.
TEST(FuzzRegressions, LlamaCppGgufsAreAcceptedAllTheWay) {
  size_t n = 0;
  for (const auto& p : files_in(fs::path(PTN_SOURCE_DIR) / "models" / "stories260K" / "quantized")) {
    SCOPED_TRACE(p.string());
    const auto bytes = read_bytes(p);
    int result = -1;
    EXPECT_NO_THROW(result = run(kTargets[0], bytes));
    EXPECT_EQ(result, 1);
    ++n;
  }
  EXPECT_GE(n, 8u);
}

TEST(FuzzRegressions, SeedsAreAcceptedAllTheWay) {
  size_t n = 0;
  for (const auto& t : kTargets) {
    for (const auto& p : files_in(fs::path(PTN_SOURCE_DIR) / "fuzz" / "corpus" / t.name)) {
      SCOPED_TRACE(p.string());
      auto bytes = read_bytes(p);
      ASSERT_FALSE(bytes.empty());
      int result = -1;
      EXPECT_NO_THROW(result = run(t, bytes));
      EXPECT_EQ(result, 1) << "a committed seed no longer parses";
      ++n;
    }
  }
  EXPECT_GE(n, 6u);  // at least one seed per target
  // Every input that ever crashed a parser (none kept yet) must now be handled cleanly.
  for (const auto& t : kTargets)
    ptn_test::expect_crash_inputs_rejected_cleanly(t.run, fs::path(PTN_TEST_DATA) / "fuzz-regressions" / t.name);
}

// The harnesses themselves must be able to say no: these inputs are wrong for every parser (any
// text is a valid template, so the chat target gets an unclosed block instead).
TEST(FuzzRegressions, GarbageIsRejected) {
  const std::vector<uint8_t> garbage = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0xff, 0xff};
  const std::string bad_template = "{% for m in messages %}{{ m.content }}";
  for (const auto& t : kTargets) {
    SCOPED_TRACE(t.name);
    if (std::string(t.name) == "chat_template") {
      EXPECT_EQ(run(t, std::vector<uint8_t>(bad_template.begin(), bad_template.end())), 0);
      continue;
    }
    EXPECT_EQ(run(t, garbage), 0);
    EXPECT_EQ(run(t, {}), 0);
  }
}

// Truncating a valid seed at every 97th byte must never crash (and a cut file never loads whole).
TEST(FuzzRegressions, TruncatedSeedsAreRejectedCleanly) {
  for (const char* name : {"gguf", "ptn", "safetensors"}) {
    const Target* t = nullptr;
    for (const auto& k : kTargets)
      if (std::string(k.name) == name) t = &k;
    ASSERT_NE(t, nullptr);
    for (const auto& p : files_in(fs::path(PTN_SOURCE_DIR) / "fuzz" / "corpus" / name)) {
      auto bytes = read_bytes(p);
      for (size_t cut = 0; cut < bytes.size(); cut += 97) {
        SCOPED_TRACE(p.string() + " cut at " + std::to_string(cut));
        std::vector<uint8_t> head(bytes.begin(), bytes.begin() + cut);
        int result = -1;
        EXPECT_NO_THROW(result = run(*t, head));
        EXPECT_EQ(result, 0);
      }
    }
  }
}
