// `ptn export --f16-as-bf16` through the binary: verify of the stories260K program reports the
// conversion's cost (nonzero NMSE under the default threshold) and passes, inspect shows the
// conversion, and contradictory flags fail with a message naming both.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

namespace fs = std::filesystem;

namespace {

struct RunResult {
  int code = -1;  // exit code, or -1 when the process did not exit normally
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class Bf16Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ptn_test_bf16_cli_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  RunResult ptn(const std::string& args) {
    const fs::path out = dir_ / "stdout", err = dir_ / "stderr";
    const std::string cmd = std::string("'") + PTN_BINARY + "' " + args + " > '" + out.string() + "' 2> '" +
                            err.string() + "' < /dev/null";
    const int status = std::system(cmd.c_str());
    RunResult r;
    if (WIFEXITED(status)) r.code = WEXITSTATUS(status);
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }
  std::string path(const std::string& f) const { return (dir_ / f).string(); }
  static std::string hf() { return std::string(PTN_SOURCE_DIR) + "/models/stories260K/hf"; }

  fs::path dir_;
};

TEST_F(Bf16Cli, VerifyReportsTheConversionCostAndPasses) {
  const std::string p = path("s.ptn");
  RunResult r = ptn("export -m '" + hf() + "' --quantize f16 --f16-as-bf16 --max-seq-length 64 -o '" + p + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("f16 as bf16: 36 matrices"), std::string::npos) << r.err;

  r = ptn("verify '" + p + "' -t 1");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(pass threshold: nmse <= ([0-9.e+-]+))"))) << r.out;
  const double threshold = std::stod(m[1]);
  EXPECT_DOUBLE_EQ(threshold, 3e-3);  // the bf16 allowance, not the float default of 1e-4
  EXPECT_NE(r.out.find("before the f16->bf16 conversion of 36 matrices"), std::string::npos) << r.out;
  ASSERT_TRUE(std::regex_search(
      r.out, m, std::regex(R"(f16->bf16 conversion cost \(reference cache, optimized executor, vs the source weights\): nmse mean ([0-9.e+-]+), worst ([0-9.e+-]+); top-1 agreement ([0-9]+)%)")))
      << r.out;
  const double mean = std::stod(m[1]), worst = std::stod(m[2]);
  EXPECT_GT(mean, 1e-7);  // measured ~5e-6: bf16 rounding of the f32 weights
  EXPECT_GE(worst, mean);
  EXPECT_LT(worst, threshold);
  EXPECT_EQ(std::stoi(m[3]), 100);
  // Every per-sample line passes and none prints a zero NMSE.
  const std::regex line(R"(sample \d+ .* nmse ([0-9.e+-]+) .* (ok|FAIL)\n)");
  int lines = 0;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), line); it != std::sregex_iterator(); ++it, ++lines) {
    EXPECT_EQ((*it)[2].str(), "ok") << (*it)[0].str();
    EXPECT_GT(std::stod((*it)[1].str()), 0.0) << (*it)[0].str();
  }
  EXPECT_GE(lines, 8);  // 2 samples x reference, paged-f32, paged-f16, paged-bf16

  // A threshold below the cost makes the same program fail: the cost is really compared.
  r = ptn("verify '" + p + "' -t 1 --cache reference --max-nmse 1e-9");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL"), std::string::npos) << r.out;

  r = ptn("inspect '" + p + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("converted at export: f16->bf16, 36 matrices; golden samples computed on the source"),
            std::string::npos)
      << r.out;
}

// --golden-from-source with --quantize q4_0: verify has no default threshold for that cost and
// says so; with one it prints the cost.
TEST_F(Bf16Cli, GoldenFromSourceNeedsAThresholdAndPrintsTheCost) {
  const std::string p = path("q.ptn");
  RunResult r = ptn("export -m '" + hf() + "' --quantize q4_0 --golden-from-source --max-seq-length 64 -o '" + p + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  r = ptn("verify '" + p + "' -t 1 --cache reference");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("'quantize q4_0'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pass --max-nmse"), std::string::npos) << r.err;
  r = ptn("verify '" + p + "' -t 1 --cache reference --max-nmse 0.5");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(quantize q4_0 conversion cost .*: nmse mean ([0-9.e+-]+), worst)")))
      << r.out;
  EXPECT_GT(std::stod(m[1]), 1e-4);  // 4-bit weights: ~1e-2 measured
}

TEST_F(Bf16Cli, ContradictoryFlagsFailNamingBoth) {
  for (const std::string q : {"bf16", "f32"}) {
    RunResult r = ptn("export -m '" + hf() + "' --quantize " + q + " --f16-as-bf16 --max-seq-length 64 -o '" +
                      path("x.ptn") + "'");
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("--f16-as-bf16"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--quantize " + q), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(path("x.ptn")));
  }
  RunResult r = ptn("export -m '" + hf() + "' --f16-as-bf16 --max-seq-length 64 -o '" + path("x.ptn") + "'");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("nothing to convert"), std::string::npos) << r.err;
}

}  // namespace
