// Helpers for the tests that replay fuzz inputs (tests/*/test_fuzz_*_regressions): the input
// files of a folder in a stable order, a file's bytes, and the seed and crash-input checks they
// share. Header-only; include it as "../fuzz_test_util.h" from tests/<module>/.
#pragma once
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace ptn_test {

// Regular files of `dir` (not hidden, not README .md files), sorted; empty when `dir` is absent.
inline std::vector<std::filesystem::path> files_in(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  if (!std::filesystem::is_directory(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.' && e.path().extension() != ".md")
      out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace ptn_test

// The two checks every fuzz-replay test makes, for a harness `run` (ptn::fuzz::run_<target>,
// returning 1 when the input was accepted and 0 when it was rejected with a ptn::Error).
#include <gtest/gtest.h>

#include <string>

namespace ptn_test {

using FuzzRun = int (*)(const uint8_t*, size_t);

inline int run_fuzz(FuzzRun run, const std::vector<uint8_t>& b) { return run(b.empty() ? nullptr : b.data(), b.size()); }

// Every committed seed under `corpus_dir` is accepted, and no truncation of one crashes or
// throws. Returns how many seeds there were, for the caller's lower bound.
inline size_t expect_seeds_accepted_and_truncations_safe(FuzzRun run, const std::filesystem::path& corpus_dir) {
  const auto seeds = files_in(corpus_dir);
  for (const auto& p : seeds) {
    SCOPED_TRACE(p.string());
    const auto bytes = read_bytes(p);
    EXPECT_FALSE(bytes.empty());
    EXPECT_EQ(run_fuzz(run, bytes), 1) << "a committed seed is no longer accepted";
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      int result = -1;
      EXPECT_NO_THROW(result = run_fuzz(run, std::vector<uint8_t>(bytes.begin(), bytes.begin() + cut))) << "cut at " << cut;
      EXPECT_TRUE(result == 0 || result == 1) << "cut at " << cut;
    }
  }
  return seeds.size();
}

// Each input the fuzzer ever crashed on (kept under `dir`) is now accepted or rejected cleanly.
// Returns how many there were.
inline size_t expect_crash_inputs_rejected_cleanly(FuzzRun run, const std::filesystem::path& dir) {
  const auto inputs = files_in(dir);
  for (const auto& p : inputs) {
    SCOPED_TRACE(p.string());
    int result = -1;
    EXPECT_NO_THROW(result = run_fuzz(run, read_bytes(p)));
    EXPECT_TRUE(result == 0 || result == 1);
  }
  return inputs.size();
}

}  // namespace ptn_test
