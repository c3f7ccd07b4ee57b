// `ptn run` and `ptn chat` with --draft-model: the output is the model's own whatever the draft
// proposes - the same token ids as without a draft, greedy and seeded, with the model itself as a
// draft (which then has almost every draft accepted) and with a random-weight model of the same
// tokenizer (`ptn synth --tokenizer`, which has next to none accepted); a draft model of another
// tokenizer, --draft-max out of range and --draft-model beside --lookup-draft are refused by name,
// and so are --draft-max without --draft-model and --lookup-ngram without --lookup-draft.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "../cli_test_util.h"
#include "../scratch_dir.h"

using ptn_test::run_ptn;

namespace {

const std::string kGguf = std::string(PTN_SOURCE_DIR) + "/models/stories260K/stories260K.gguf";

std::string q(const std::string& s) { return "'" + s + "'"; }

std::string ids_of(const std::string& err) {
  const size_t at = err.find("generated ids: ");
  return at == std::string::npos ? std::string() : err.substr(at, err.find('\n', at) - at);
}

// "speculation: S steps for N tokens, D drafted, A accepted": {D, A}; {-1, -1} when absent.
std::pair<long, long> drafted_accepted(const std::string& err) {
  const size_t at = err.find("speculation: ");
  long steps = 0, n = 0, d = -1, a = -1;
  if (at == std::string::npos ||
      std::sscanf(err.c_str() + at, "speculation: %ld steps for %ld tokens, %ld drafted, %ld accepted", &steps, &n, &d,
                  &a) != 4)
    return {-1, -1};
  return {d, a};
}

class DraftModelCli : public ::testing::Test {
 protected:
  void SetUp() override {
    random_draft_ = (std::filesystem::path(dir_.path()) / "random-draft.gguf").string();
    auto r = run_ptn("synth --preset tiny --seed 3 --tokenizer " + q(kGguf) + " --gguf " + q(random_draft_), dir_.path());
    ASSERT_EQ(r.code, 0) << r.err;
  }
  ptn::testing::ScratchDir dir_{"ptn_draft_model_"};
  std::string random_draft_;
};

TEST_F(DraftModelCli, RunGivesTheModelsOwnTokensWhateverTheDraft) {
  for (const char* sampling : {"--temp 0", "--temp 0.9 --seed 11 --top-k 40"}) {
    SCOPED_TRACE(sampling);
    const std::string base = "run -m " + q(kGguf) + " -p 'Once upon a time' -n 120 -t 1 --print-ids " + sampling;
    auto plain = run_ptn(base, dir_.path());
    ASSERT_EQ(plain.code, 0) << plain.err;
    ASSERT_FALSE(ids_of(plain.err).empty()) << plain.err;
    auto self = run_ptn(base + " --draft-model " + q(kGguf) + " --draft-max 6", dir_.path());
    ASSERT_EQ(self.code, 0) << self.err;
    EXPECT_EQ(ids_of(self.err), ids_of(plain.err));
    EXPECT_EQ(self.out, plain.out);
    auto random = run_ptn(base + " --draft-model " + q(random_draft_) + " --draft-max 3", dir_.path());
    ASSERT_EQ(random.code, 0) << random.err;
    EXPECT_EQ(ids_of(random.err), ids_of(plain.err));
    const auto [d_self, a_self] = drafted_accepted(self.err);
    const auto [d_random, a_random] = drafted_accepted(random.err);
    ASSERT_GT(d_self, 0) << self.err;
    ASSERT_GT(d_random, 0) << random.err;
    if (std::string(sampling) == "--temp 0") {
      // The model drafting for itself greedily is right at almost every draft token (a wider
      // step rounds differently, so not always); a random model almost never.
      EXPECT_GT(a_self * 10, d_self * 9) << self.err;
      EXPECT_LT(a_random * 10, d_random) << random.err;
    }
  }
}

TEST_F(DraftModelCli, ChatGivesTheSameRepliesWithADraft) {
  const std::string base = "chat -m " + q(kGguf) + " --temp 0 -n 40 -t 1";
  const std::string turns = "Tell me a story\nAnd then?\n";
  auto plain = run_ptn(base, dir_.path(), turns);
  ASSERT_EQ(plain.code, 0) << plain.err;
  auto drafted = run_ptn(base + " --draft-model " + q(kGguf), dir_.path(), turns);
  ASSERT_EQ(drafted.code, 0) << drafted.err;
  EXPECT_EQ(drafted.out, plain.out);
  EXPECT_GT(plain.out.size(), 40u) << plain.out;
  // Each reply reports its drafts: the model drafting for itself has them accepted.
  long steps = 0, d = 0, a = 0;
  const size_t at = drafted.err.find("[speculation: ");
  ASSERT_NE(at, std::string::npos) << drafted.err;
  ASSERT_EQ(std::sscanf(drafted.err.c_str() + at, "[speculation: %ld steps, %ld drafted, %ld accepted]", &steps, &d, &a), 3);
  EXPECT_GT(a, 0) << drafted.err;
  EXPECT_EQ(plain.err.find("[speculation: "), std::string::npos);
}

TEST_F(DraftModelCli, WhatCannotDraftIsRefusedByName) {
  const std::string other = (std::filesystem::path(dir_.path()) / "other-tokenizer.gguf").string();
  ASSERT_EQ(run_ptn("synth --preset tiny --seed 3 --gguf " + q(other), dir_.path()).code, 0);
  auto r = run_ptn("run -m " + q(kGguf) + " -p Once -n 4 --draft-model " + q(other), dir_.path());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--draft-model"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("same tokenizer"), std::string::npos) << r.err;
  for (const char* bad : {"0", "33"}) {
    r = run_ptn("run -m " + q(kGguf) + " -p Once -n 4 --draft-model " + q(kGguf) + " --draft-max " + bad, dir_.path());
    EXPECT_NE(r.code, 0) << bad;
    EXPECT_NE(r.err.find("--draft-max"), std::string::npos) << r.err;
  }
  r = run_ptn("run -m " + q(kGguf) + " -p Once -n 4 --draft-model " + q(kGguf) + " --lookup-draft 2", dir_.path());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("not both"), std::string::npos) << r.err;
  r = run_ptn("chat -m " + q(kGguf) + " -n 4 --draft-model " + q(other), dir_.path(), "Hi\n");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("same tokenizer"), std::string::npos) << r.err;
  // A setting of a speculation mode that is off would be accepted and do nothing: refused.
  for (const char* cmd : {"run -p Once", "chat"}) {
    r = run_ptn(std::string(cmd) + " -m " + q(kGguf) + " -n 4 --draft-max 4", dir_.path(), "Hi\n");
    EXPECT_NE(r.code, 0) << cmd;
    EXPECT_NE(r.err.find("--draft-max"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--draft-model"), std::string::npos) << r.err;
    r = run_ptn(std::string(cmd) + " -m " + q(kGguf) + " -n 4 --lookup-ngram 2", dir_.path(), "Hi\n");
    EXPECT_NE(r.code, 0) << cmd;
    EXPECT_NE(r.err.find("--lookup-ngram"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--lookup-draft"), std::string::npos) << r.err;
  }
}

}  // namespace
