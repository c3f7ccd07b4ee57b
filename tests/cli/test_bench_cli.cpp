// `ptn bench` on the bundled stories260K GGUF: every test it was asked for is reported, with
// llama-bench's names ("pp32 @ d64"), and at depth D the cache really holds the D tokens before
// the timed ones (its KV bytes are those of D + N tokens in 16-token blocks, read against the
// bytes of the same test at depth 0); bad lists are refused by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../cli_test_util.h"
#include "../scratch_dir.h"

using json = nlohmann::json;
using ptn_test::run_ptn;

namespace {

const std::string kGguf = std::string(PTN_SOURCE_DIR) + "/models/stories260K/stories260K.gguf";

int64_t blocks(int64_t tokens) { return (tokens + 15) / 16; }

TEST(BenchCli, DepthRunsTheTestsAfterThatManyTokensInTheCache) {
  ptn::testing::ScratchDir dir("ptn_bench_cli_");
  auto r = run_ptn("bench -m '" + kGguf + "' -p 32 -n 8 -r 2 -t 1 -d 0,64 --json", dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  std::map<std::string, json> by_test;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) {
      json j = json::parse(line);
      by_test[j["test"].get<std::string>()] = j;
    }
  ASSERT_EQ(by_test.size(), 4u) << r.out;
  for (const char* t : {"pp32", "tg8", "pp32 @ d64", "tg8 @ d64"}) {
    ASSERT_TRUE(by_test.count(t)) << t << " missing in\n" << r.out;
    EXPECT_GT(by_test[t]["mean_tps"].get<double>(), 0.0) << t;
  }
  EXPECT_EQ(by_test["pp32"]["depth"], 0);
  EXPECT_EQ(by_test["tg8 @ d64"]["depth"], 64);
  EXPECT_EQ(by_test["pp32 @ d64"]["tokens"], 32);
  // The bytes of one block, from the depth-0 prompt test; then the depth tests hold D + N tokens.
  const double block_bytes = by_test["pp32"]["kv_bytes"].get<double>() / static_cast<double>(blocks(32));
  ASSERT_GT(block_bytes, 0.0);
  EXPECT_EQ(by_test["tg8"]["kv_bytes"].get<double>(), block_bytes * static_cast<double>(blocks(8)));
  EXPECT_EQ(by_test["pp32 @ d64"]["kv_bytes"].get<double>(), block_bytes * static_cast<double>(blocks(64 + 32)));
  EXPECT_EQ(by_test["tg8 @ d64"]["kv_bytes"].get<double>(), block_bytes * static_cast<double>(blocks(64 + 8)));

  auto table = run_ptn("bench -m '" + kGguf + "' -p 16 -n 0 -r 1 -t 1 -d 32", dir.path());
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("pp16 @ d32"), std::string::npos) << table.out;
}

TEST(BenchCli, BadDepthsAreRefusedByName) {
  ptn::testing::ScratchDir dir("ptn_bench_cli_");
  for (const char* bad : {"x", "1,,2", "-1", "2000000", "4096x"}) {
    auto r = run_ptn("bench -m '" + kGguf + "' -p 8 -n 0 -r 1 -t 1 -d '" + std::string(bad) + "'", dir.path());
    EXPECT_NE(r.code, 0) << bad;
    EXPECT_NE(r.err.find("-d"), std::string::npos) << bad << ": " << r.err;
  }
  // The GGUF's context is 2048 positions: a depth beyond it is refused, not run past the model.
  auto r = run_ptn("bench -m '" + kGguf + "' -p 8 -n 0 -r 1 -t 1 -d 2041", dir.path());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("context"), std::string::npos) << r.err;
}

}  // namespace
