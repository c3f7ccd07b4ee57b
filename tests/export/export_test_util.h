// Helpers of the export tests: a per-test temporary directory, expected.json, quiet exports,
// tiny configs written as HF directories, and "every golden sample passes with every cache".
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../runtime/program_test_util.h"
#include "export/exporter.h"
#include "runtime/verify.h"

namespace ptn::testing {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("ptn_test_export_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& f) const { return (path / f).string(); }
};

inline nlohmann::json expected() {
  std::ifstream f(stories_dir() + "/expected.json");
  return nlohmann::json::parse(f);
}

inline ExportOptions base_options(const std::string& model, const std::string& out) {
  ExportOptions o;
  o.model = model;
  o.output = out;
  o.max_seq_length = 32;
  o.samples = 2;
  return o;
}

inline ExportResult quiet_export(const ExportOptions& o) {
  std::ostringstream log;
  return export_program(o, log);
}

inline std::string write_config(const TempDir& d, const std::string& name, const nlohmann::json& cfg) {
  fs::create_directories(d.path / name);
  std::ofstream(d / (name + "/config.json")) << cfg.dump(1);
  return d / name;
}

// Every golden sample passes with the reference cache and the paged cache in each dtype that
// fits the head dims. f32_nmse: threshold with the f32 caches (f32 weights: only summation
// order differs; quantized weights: the optimized matmul also quantizes the activations).
inline void expect_verifies(const std::shared_ptr<const Program>& p, bool with_q8, double f32_nmse = 1e-6) {
  ASSERT_FALSE(p->meta().samples.empty());
  struct V {
    std::string kind;
    DType dtype;
    double nmse;
  };
  std::vector<V> vs = {{"reference", DType::F32, f32_nmse}, {"paged", DType::F32, f32_nmse}, {"paged", DType::F16, 3e-3},
                       {"paged", DType::BF16, 1e-2}};
  if (with_q8) vs.push_back({"paged", DType::Q8_0, 1e-2});
  for (const auto& v : vs) {
    VerifyOptions vo;
    vo.cache_kind = v.kind;
    vo.cache.dtype = v.dtype;
    vo.cache.block_size = 4;
    vo.max_nmse = v.nmse;
    for (const auto& r : verify_samples(p, vo))
      EXPECT_TRUE(r.pass) << p->name() << " " << v.kind << " " << dtype_name(v.dtype) << " sample " << r.sample
                          << ": nmse " << r.cmp.nmse << " max|err| " << r.cmp.max_abs_err;
  }
}

}  // namespace ptn::testing
