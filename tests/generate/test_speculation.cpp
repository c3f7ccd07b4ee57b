// Prompt-lookup speculative decoding: the drafts looked up, and generations with speculation
// against plain ones on the real stories260K program (tests/data/programs): the same tokens at
// temperature 0 and for a seeded sampler, the session left holding what plain decoding leaves,
// and drafts actually accepted on a prompt the output repeats.
#include <gtest/gtest.h>

#include "core/error.h"
#include "generate/chat_session.h"
#include "generate/lookup_draft.h"
#include "generate/session_generate.h"
#include "runtime/program.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

using namespace ptn;
using namespace ptn::gen;

namespace {

TEST(LookupDraft, LongestLatestSuffixMatch) {
  LookupOptions o;
  o.draft_tokens = 3;
  // ... 1 2 3 [7 8 9] ... 1 2 3 [4 5 6] 1 2 3 -> the latest occurrence of "1 2 3" drafts 4 5 6.
  EXPECT_EQ(lookup_draft({1, 2, 3, 7, 8, 9, 1, 2, 3, 4, 5, 6, 1, 2, 3}, o), (std::vector<int32_t>{4, 5, 6}));
  // "9 2 3" never occurred; "2 3" did, followed by 4.
  EXPECT_EQ(lookup_draft({5, 2, 3, 4, 9, 2, 3}, o), (std::vector<int32_t>{4, 9, 2}));
  // The draft stops at the end of the sequence.
  EXPECT_EQ(lookup_draft({1, 2, 1}, o), (std::vector<int32_t>{2, 1}));
  EXPECT_TRUE(lookup_draft({1, 2, 3}, o).empty());
  EXPECT_TRUE(lookup_draft({}, o).empty());
  EXPECT_TRUE(lookup_draft({4}, o).empty());
  o.ngram_min = 2;  // a single repeated token is not enough
  EXPECT_TRUE(lookup_draft({1, 5, 6, 1}, o).empty());
  o.draft_tokens = 0;
  EXPECT_TRUE(lookup_draft({1, 2, 3, 1, 2}, o).empty());
}

TEST(LookupDraft, OptionsAreChecked) {
  LookupOptions o;
  o.draft_tokens = 33;
  EXPECT_THROW(check_lookup_options(o, "--lookup-draft"), Error);
  o.draft_tokens = 4;
  o.ngram_min = 0;
  EXPECT_THROW(check_lookup_options(o, "--lookup-draft"), Error);
  o.ngram_min = 4;
  o.ngram_max = 3;
  EXPECT_THROW(check_lookup_options(o, "--lookup-draft"), Error);
  o.ngram_min = 1;
  EXPECT_NO_THROW(check_lookup_options(o, "--lookup-draft"));
}

class SpeculationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    program_ = new std::shared_ptr<const Program>(
        Program::load(std::string(PTN_TEST_DATA) + "/programs/stories260K-f32.ptn"));
    tok_ = Tokenizer::create(*(*program_)->meta().tokenizer).release();
  }
  static void TearDownTestSuite() {
    delete program_;
    delete tok_;
  }

  struct Run {
    std::vector<int32_t> tokens;
    int64_t position = 0;
    SpeculationStats stats;
  };
  // Generates up to n tokens after `prompt`, with lookup drafts of `draft` tokens (0: plain).
  static Run generate(const std::vector<int32_t>& prompt, int n, int draft, float temperature, uint64_t seed) {
    SessionOptions so;
    so.context = 512;
    Session s(*program_, so);
    const float* logits = s.feed(prompt);
    GenerationParams gp;
    gp.sampling.temperature = temperature;
    gp.sampling.seed = seed;
    gp.stop.max_tokens = n;
    gp.stop.stop_at_bos = false;
    Generator g(*tok_, (*program_)->meta().spec.vocab_size, gp, session_room(s));
    LookupOptions lo;
    lo.draft_tokens = draft;
    Run r;
    generate_on_session(s, g, logits, {}, lo, prompt, &r.stats);
    r.tokens = g.tokens();
    r.position = s.position();
    return r;
  }

  static std::shared_ptr<const Program>* program_;
  static Tokenizer* tok_;
};
std::shared_ptr<const Program>* SpeculationTest::program_ = nullptr;
Tokenizer* SpeculationTest::tok_ = nullptr;

TEST_F(SpeculationTest, GreedyTokensEqualPlainDecoding) {
  const std::vector<int32_t> story = tok_->encode("Once upon a time, there was a little girl named Lily.", true, false);
  const Run plain = generate(story, 120, 0, 0.0f, 1);
  ASSERT_EQ(plain.tokens.size(), 120u);
  // The model's own continuation given back in the prompt: the output repeats it, so drafts are
  // right as they would be for a model editing a text it was given.
  std::vector<int32_t> repeat = story;
  repeat.insert(repeat.end(), plain.tokens.begin(), plain.tokens.end());
  repeat.insert(repeat.end(), story.begin() + 1, story.end());
  const Run want = generate(repeat, 100, 0, 0.0f, 1);
  for (int draft : {1, 4, 8}) {
    const Run got = generate(repeat, 100, draft, 0.0f, 1);
    EXPECT_EQ(got.tokens, want.tokens) << "draft " << draft;
    EXPECT_EQ(got.position, want.position) << "draft " << draft;  // the cache holds what plain decoding leaves
    EXPECT_GT(got.stats.accepted, 0) << "draft " << draft;
    EXPECT_LT(got.stats.steps, static_cast<int64_t>(want.tokens.size())) << "draft " << draft;
    EXPECT_LE(got.stats.accepted, got.stats.drafted);
  }
}

TEST_F(SpeculationTest, SeededSamplingDrawsTheSameTokens) {
  const std::vector<int32_t> story = tok_->encode("Tom had a red ball. Tom had a red ball. Tom had a", true, false);
  for (uint64_t seed : {3u, 11u}) {
    const Run plain = generate(story, 80, 0, 0.8f, seed);
    const Run spec = generate(story, 80, 4, 0.8f, seed);
    EXPECT_EQ(spec.tokens, plain.tokens) << "seed " << seed;
    EXPECT_EQ(spec.position, plain.position) << "seed " << seed;
  }
}

// ptn chat's sessions: the same replies with speculation, turn after turn (the drafts come from
// the whole conversation, earlier replies included).
TEST_F(SpeculationTest, ChatRepliesEqualPlainOnes) {
  std::vector<std::vector<std::string>> replies(2);
  for (int spec = 0; spec < 2; ++spec) {
    SessionOptions so;
    so.context = 512;
    Session s(*program_, so);
    ChatConfig cc;  // the plain fallback format
    cc.max_reply_tokens = 60;
    cc.stop_at_bos = false;
    cc.lookup.draft_tokens = spec ? 6 : 0;
    SamplingParams sp;
    sp.temperature = 0.0f;
    ChatSession chat(s, *tok_, cc, sp);
    for (const char* m : {"Once upon a time there was a cat.", "Once upon a time there was a cat."})
      replies[static_cast<size_t>(spec)].push_back(chat.send(m).text);
  }
  EXPECT_EQ(replies[1], replies[0]);
  EXPECT_FALSE(replies[0][0].empty());
}

}  // namespace
