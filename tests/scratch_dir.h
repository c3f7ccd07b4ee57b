// One scratch directory per test process (under the test temp dir), removed with everything
// in it when the process exits, so repeated runs leave nothing behind.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace ptn::testing {

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix) {
    const std::string t = ::testing::TempDir();
    const std::filesystem::path base = t.empty() ? std::string("/tmp") : t;
    path_ = (base / (prefix + std::to_string(getpid()))).string();
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    std::filesystem::create_directories(path_, ec);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace ptn::testing
