// Helpers for the tests that replay fuzz inputs (tests/runtime/test_fuzz_regressions,
// tests/serve/test_fuzz_http_regressions): the input files of a folder in a stable order, and a
// file's bytes. Header-only; include it as "../fuzz_test_util.h" from tests/<module>/.
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
