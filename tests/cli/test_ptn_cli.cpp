// The `ptn` binary end to end on the bundled stories260K: --version, --help, export, verify,
// run (greedy text equals expected.json's, with either cache), inspect, and bad flags or inputs
// that must give a clear message and a non-zero exit code, never a crash (exit code < 128, no
// signal).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../cli_test_util.h"

namespace fs = std::filesystem;

namespace {

using ptn_test::RunResult;
using ptn_test::slurp;

std::string stories() { return std::string(PTN_SOURCE_DIR) + "/models/stories260K"; }

class PtnCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("ptn_test_cli_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // Runs `ptn ARGS` (args already shell-quoted where needed), stdin from /dev/null.
  static RunResult ptn(const std::string& args) { return ptn_test::run_ptn(args, dir_); }
  static std::string path(const std::string& f) { return (dir_ / f).string(); }

  // The stories program, exported once through the CLI.
  static const std::string& program() {
    static std::string p;
    if (p.empty()) {
      p = path("stories.ptn");
      RunResult r = ptn("export --model '" + stories() + "/hf' --max_seq_length 64 --samples 2 --output '" + p + "'");
      EXPECT_EQ(r.code, 0) << r.err;
      EXPECT_TRUE(fs::exists(p)) << r.err;
    }
    return p;
  }

  static void expect_clean_failure(const std::string& args, const std::vector<std::string>& in_message) {
    SCOPED_TRACE("ptn " + args);
    RunResult r = ptn(args);
    EXPECT_EQ(r.signal, 0) << "killed by a signal: " << r.err;
    EXPECT_GT(r.code, 0) << r.out << r.err;
    EXPECT_LT(r.code, 128);
    const std::string all = r.out + r.err;
    EXPECT_FALSE(all.empty());
    EXPECT_EQ(all.find("terminate called"), std::string::npos) << all;
    for (const auto& m : in_message) EXPECT_NE(all.find(m), std::string::npos) << "'" << m << "' not in: " << all;
  }

  static fs::path dir_;
};
fs::path PtnCli::dir_;

nlohmann::json expected() { return nlohmann::json::parse(slurp(stories() + "/expected.json")); }

TEST_F(PtnCli, VersionAndHelp) {
  RunResult v = ptn("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out.rfind("ptn ", 0), 0u) << v.out;
  RunResult h = ptn("--help");
  EXPECT_EQ(h.code, 0);
  for (const char* c : {"export", "run", "verify", "inspect"}) EXPECT_NE(h.out.find(c), std::string::npos) << c;
  RunResult none = ptn("");
  EXPECT_EQ(none.code, 0);
  EXPECT_NE(none.out.find("export"), std::string::npos);
  RunResult eh = ptn("export --help");
  EXPECT_EQ(eh.code, 0);
  EXPECT_NE(eh.out.find("--max-seq-length"), std::string::npos) << eh.out;
}

TEST_F(PtnCli, VerifyPassesWithEveryCache) {
  RunResult r = ptn("verify '" + program() + "'");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("all samples pass"), std::string::npos) << r.out;
  for (const char* c : {"reference", "paged-f32", "paged-f16", "paged-bf16"})
    EXPECT_NE(r.out.find(c), std::string::npos) << c << " missing from:\n" << r.out;
  RunResult ref = ptn("verify '" + program() + "' --mode reference --cache paged");
  EXPECT_EQ(ref.code, 0) << ref.out << ref.err;
  EXPECT_NE(ref.out.find("all samples pass"), std::string::npos);
}

TEST_F(PtnCli, RunPrintsTheExpectedGreedyText) {
  const nlohmann::json e = expected();
  const std::string want = e.at("text_prompt_plus_50").get<std::string>() + "\n";
  for (const char* cache : {"paged", "reference"}) {
    SCOPED_TRACE(cache);
    RunResult r = ptn("run -m '" + program() + "' -p 'Once upon a time' -n 50 --temp 0 --print-ids --cache " + cache);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, want);
    // --print-ids: the ids on stderr equal the expected ones.
    const auto ids = e.at("greedy_50_new_token_ids").get<std::vector<int>>();
    std::string list;
    for (size_t i = 0; i < ids.size(); ++i) list += (i ? ", " : "") + std::to_string(ids[i]);
    EXPECT_NE(r.err.find("generated ids: [" + list + "]"), std::string::npos) << r.err;
  }
  // The same from the GGUF export, with an f16 cache.
  const std::string g = path("stories_gguf.ptn");
  ASSERT_EQ(ptn("export --model '" + stories() + "/stories260K.gguf' --max-seq-length 16 --output '" + g + "'").code, 0);
  RunResult r = ptn("run -m '" + g + "' -p 'Once upon a time' -n 50 --temp 0 --cache-type f16 --threads 1");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, want);
}

// -m takes a GGUF, an HF directory or a cached "org/name" as well as a .ptn program: each is
// exported in memory and gives the same greedy text as the exported program.
TEST_F(PtnCli, RunTakesGgufHfDirectoryAndCachedRepositories) {
  const std::string want = expected().at("text_prompt_plus_50").get<std::string>() + "\n";
  for (const std::string& m : {stories() + "/stories260K.gguf", stories() + "/hf"}) {
    SCOPED_TRACE(m);
    RunResult r = ptn("run -m '" + m + "' -p 'Once upon a time' -n 50 --temp 0");
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, want);
    EXPECT_NE(r.err.find("in memory"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("converting weights"), std::string::npos) << "no progress lines in a log: " << r.err;
  }
  // verify computes golden samples on the reference path for the in-memory program and checks
  // the optimized path against them; perplexity runs the GGUF as it is.
  RunResult v = ptn("verify '" + stories() + "/stories260K.gguf' --cache paged-f32");
  EXPECT_EQ(v.code, 0) << v.out << v.err;
  EXPECT_NE(v.out.find("2 golden samples"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("all samples pass"), std::string::npos) << v.out;

  // config.json with --gguf: the config's directory with the GGUF's weights.
  RunResult e = ptn("export -m '" + stories() + "/hf/config.json' --gguf '" + stories() +
                    "/stories260K.gguf' --max-seq-length 16 -o '" + path("cfg_gguf.ptn") + "'");
  EXPECT_EQ(e.code, 0) << e.err;
  EXPECT_EQ(e.err.find("ptn export: ptn export"), std::string::npos) << e.err;

  // A Hugging Face cache laid out as the hub library writes it: refs/main names the snapshot.
  const fs::path hub = dir_ / "hub";
  const fs::path repo = hub / "models--ptn-test--stories260K";
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "snapshots" / "0123abcd");
  std::ofstream(repo / "refs" / "main") << "0123abcd";
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"})
    fs::create_symlink(fs::path(stories()) / "hf" / f, repo / "snapshots" / "0123abcd" / f);
  const fs::path grepo = hub / "models--ptn-test--stories260K-GGUF";
  fs::create_directories(grepo / "snapshots" / "feed");
  fs::create_symlink(fs::path(stories()) / "stories260K.gguf", grepo / "snapshots" / "feed" / "stories260K-F32.gguf");
  fs::create_symlink(fs::path(stories()) / "quantized" / "stories260K-F16.gguf",
                     grepo / "snapshots" / "feed" / "stories260K-F16.gguf");
  ASSERT_EQ(setenv("HF_HUB_CACHE", hub.c_str(), 1), 0);
  RunResult r = ptn("run -m ptn-test/stories260K -p 'Once upon a time' -n 50 --temp 0");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, want);
  r = ptn("run -m ptn-test/stories260K-GGUF:f32 -p 'Once upon a time' -n 50 --temp 0");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, want);
  expect_clean_failure("run -m ptn-test/stories260K-GGUF -p hi", {"several GGUF files", "stories260K-F16.gguf"});
  expect_clean_failure("run -m ptn-test/stories260K-GGUF:q3_k -p hi", {"matches 'q3_k'"});
  expect_clean_failure("run -m ptn-test/absent -p hi", {"models--ptn-test--absent", hub.string()});
  unsetenv("HF_HUB_CACHE");
}

TEST_F(PtnCli, InspectDescribesTheProgram) {
  RunResult r = ptn("inspect '" + program() + "'");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("update_and_attend"), std::string::npos) << r.out;
}

TEST_F(PtnCli, BadFlagsAndInputsFailCleanly) {
  const std::string p = "'" + program() + "'";
  expect_clean_failure("frobnicate", {});
  expect_clean_failure("run --bogus-flag", {});
  expect_clean_failure("run -m " + p, {"--prompt"});
  expect_clean_failure("run -m " + p + " -p hi -n many", {"-n"});
  expect_clean_failure("run -m " + p + " -p hi -n -5", {"--n-predict"});
  expect_clean_failure("run -m " + p + " -p hi --temp -1", {"temp"});
  expect_clean_failure("run -m " + p + " -p hi --cache-type q9_9", {"--cache-type", "q9_9"});
  expect_clean_failure("run -m " + p + " -p hi --cache-type q8_0", {"32"});  // stories' head dim is 8
  expect_clean_failure("run -m " + p + " -p hi --cache sideways", {"sideways"});
  expect_clean_failure("run -m " + p + " -p hi --ctx -1", {"--ctx"});
  expect_clean_failure("run -m " + p + " -p 'Once upon a time' --ctx 3", {"context"});
  expect_clean_failure("run -m " + p + " -p hi --threads 100000", {"--threads"});
  expect_clean_failure("run -m '" + path("missing.ptn") + "' -p hi", {"missing.ptn"});
  expect_clean_failure("run -m '" + stories() + "/hf/config.json' -p hi", {"config alone", "--random-weights"});
  expect_clean_failure("run -m '" + stories() + "' -p hi", {"without config.json"});
  expect_clean_failure("run -m no-such-org/no-such-model -p hi", {"models--no-such-org--no-such-model"});
  expect_clean_failure("verify '" + path("missing.ptn") + "'", {"missing.ptn"});
  expect_clean_failure("verify " + p + " --cache nope", {"nope"});
  expect_clean_failure("verify " + p + " --threads 5000", {"--threads"});
  expect_clean_failure("verify " + p + " -t -2", {"--threads"});
  expect_clean_failure("verify", {"file"});
  expect_clean_failure("inspect '" + path("missing.ptn") + "'", {"missing.ptn"});
  const std::string out = "'" + path("never.ptn") + "'";
  const std::string hf = "'" + stories() + "/hf'";
  expect_clean_failure("export --model " + hf + " --max_seq_length 64 --output " + out + " --max_context_length 128",
                       {"--max_context_length", "--ctx"});
  expect_clean_failure("export --model " + hf + " --max_seq_length 64 --output " + out + " --kv_cache_dtype f16",
                       {"--kv_cache_dtype", "--cache-type"});
  expect_clean_failure("export --model '" + stories() + "/hf/config.json' --max_seq_length 64 --output " + out,
                       {"--random-weights"});
  expect_clean_failure("export --model " + hf + " --max_seq_length 64 --output " + out + " --quantize q3", {"q3"});
  expect_clean_failure("export --model " + hf + " --max_seq_length 0 --output " + out, {"--max_seq_length"});
  expect_clean_failure("export --model " + hf + " --max_seq_length abc --output " + out, {});
  expect_clean_failure("export --model '" + path("nothing-here") + "' --max_seq_length 8 --output " + out,
                       {"nothing-here"});
  expect_clean_failure("export --model " + hf + " --output " + out, {"max"});
  EXPECT_FALSE(fs::exists(path("never.ptn")));
  // A damaged program: half of the file.
  std::string bytes = slurp(program());
  std::ofstream(path("half.ptn"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  expect_clean_failure("run -m '" + path("half.ptn") + "' -p hi", {"truncated"});
  expect_clean_failure("verify '" + path("half.ptn") + "'", {"truncated"});
}

}  // namespace
