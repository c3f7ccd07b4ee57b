// Speculative decoding in the server (--lookup-draft): on a task whose output repeats its input
// (stories260K given its own greedy story back), a server with prompt-lookup drafts returns the
// same tokens as one without - greedy, seeded sampling, with stop strings, with a JSON grammar,
// n > 1, streamed and several requests at once - while its timings and metrics show drafts made
// and accepted; a model with window layers (whose rewound blocks may be gone) is refused at start.
#include <gtest/gtest.h>

#include <httplib.h>

#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "running_server.h"
#include "serve/server.h"
#include "serve_test_util.h"

using json = nlohmann::json;
using namespace ptn;
using ptn::testing::RunningServer;
using ptn::testing::temp_dir;

namespace {

const char* const kScratch = "ptn_spec_test_";

const std::string& program_path() {
  static const std::string p = ptn::testing::export_stories(temp_dir(kScratch), "spec", 1024);
  return p;
}

serve::ServerOptions options(int draft) {
  serve::ServerOptions o;
  o.webui = false;
  o.engine.max_running = 4;
  o.engine.lookup.draft_tokens = draft;
  return o;
}

// Both servers, started once for the suite (ServeSpeculation's SetUpTestSuite) and stopped after it.
struct Pair {
  RunningServer plain{program_path(), options(0)};
  RunningServer spec{program_path(), options(4)};
};
Pair* g_servers = nullptr;
Pair& servers() { return *g_servers; }
std::string* g_repeat = nullptr;

// The repeating task: the model's own greedy story, then the story's first words again.
const std::string& repeat_prompt() {
  if (!g_repeat) {
    const json r = servers().plain.post_ok("/v1/completions",
                                           {{"prompt", "Once upon a time"}, {"max_tokens", 200}, {"temperature", 0}});
    g_repeat = new std::string("Once upon a time" + r["choices"][0]["text"].get<std::string>() + "\nOnce upon a time");
  }
  return *g_repeat;
}

class ServeSpeculation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { g_servers = new Pair(); }
  static void TearDownTestSuite() {
    delete g_servers;
    g_servers = nullptr;
    delete g_repeat;
    g_repeat = nullptr;
  }
};

json ask(const RunningServer& s, json body) {
  body["prompt"] = repeat_prompt();
  if (!body.contains("max_tokens")) body["max_tokens"] = 120;
  return s.post_ok("/v1/completions", body);
}

int64_t metric(const RunningServer& s, const std::string& name) {
  auto c = s.client();
  auto r = c.Get("/metrics");
  if (!r) return -1;
  const size_t at = r->body.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stoll(r->body.substr(at + name.size() + 2));
}

void expect_same_choices(const json& a, const json& b) {
  ASSERT_TRUE(a.is_object());
  ASSERT_TRUE(b.is_object());
  ASSERT_EQ(a["choices"].size(), b["choices"].size());
  for (size_t i = 0; i < a["choices"].size(); ++i) {
    EXPECT_EQ(a["choices"][i]["text"], b["choices"][i]["text"]) << "choice " << i;
    EXPECT_EQ(a["choices"][i]["finish_reason"], b["choices"][i]["finish_reason"]) << "choice " << i;
  }
  EXPECT_EQ(a["usage"]["completion_tokens"], b["usage"]["completion_tokens"]);
}

TEST_F(ServeSpeculation, GreedyOutputIsUnchangedAndDraftsAreAccepted) {
  const int64_t drafted0 = metric(servers().spec, "ptn_speculative_drafted_tokens_total");
  const int64_t accepted0 = metric(servers().spec, "ptn_speculative_accepted_tokens_total");
  const json a = ask(servers().plain, {{"temperature", 0}});
  const json b = ask(servers().spec, {{"temperature", 0}});
  expect_same_choices(a, b);
  EXPECT_FALSE(a["timings"].contains("draft_n"));
  ASSERT_TRUE(b["timings"].contains("draft_n")) << b["timings"];
  const int64_t drafted = b["timings"]["draft_n"], accepted = b["timings"]["draft_n_accepted"];
  EXPECT_GT(accepted, 0) << "the story repeats: drafts must be accepted";
  EXPECT_LE(accepted, drafted);
  EXPECT_EQ(metric(servers().spec, "ptn_speculative_drafted_tokens_total") - drafted0, drafted);
  EXPECT_EQ(metric(servers().spec, "ptn_speculative_accepted_tokens_total") - accepted0, accepted);
  EXPECT_EQ(metric(servers().plain, "ptn_speculative_drafted_tokens_total"), 0);
}

TEST_F(ServeSpeculation, SeededSamplingStopStringsAndGrammarGiveTheSameTokens) {
  for (const json& extra : {json{{"temperature", 0.8}, {"seed", 7}}, json{{"temperature", 1.0}, {"seed", 123}, {"top_k", 40}},
                            json{{"temperature", 0}, {"stop", {"park"}}},
                            json{{"temperature", 0.7}, {"seed", 3}, {"logprobs", 2}},
                            json{{"temperature", 0}, {"response_format", {{"type", "json_object"}}}, {"max_tokens", 60}}}) {
    SCOPED_TRACE(extra.dump());
    const json a = ask(servers().plain, extra);
    const json b = ask(servers().spec, extra);
    expect_same_choices(a, b);
    if (extra.contains("logprobs")) {
      // The same tokens; their log-probabilities come from steps of another width (a decode row
      // and its draft rows), so they agree to rounding only.
      const json& la = a["choices"][0]["logprobs"];
      const json& lb = b["choices"][0]["logprobs"];
      EXPECT_EQ(la["tokens"], lb["tokens"]);
      EXPECT_EQ(la["text_offset"], lb["text_offset"]);
      ASSERT_EQ(la["token_logprobs"].size(), lb["token_logprobs"].size());
      for (size_t i = 0; i < la["token_logprobs"].size(); ++i)
        EXPECT_NEAR(la["token_logprobs"][i].get<double>(), lb["token_logprobs"][i].get<double>(), 1e-4) << i;
    }
  }
}

TEST_F(ServeSpeculation, SeveralRequestsAtOnceAndNChoicesMatch) {
  std::vector<json> bodies;
  for (int i = 0; i < 4; ++i) bodies.push_back({{"temperature", 0.9}, {"seed", 100 + i}, {"n", i % 2 + 1}});
  std::vector<json> plain;
  for (const json& b : bodies) plain.push_back(ask(servers().plain, b));
  std::vector<std::future<json>> spec;
  for (const json& b : bodies) spec.push_back(std::async(std::launch::async, [b] { return ask(servers().spec, b); }));
  for (size_t i = 0; i < bodies.size(); ++i) {
    SCOPED_TRACE(bodies[i].dump());
    expect_same_choices(plain[i], spec[i].get());
  }
}

TEST_F(ServeSpeculation, AModelWithWindowLayersIsRefusedAtStart) {
  const auto dir = temp_dir(kScratch);
  ptn::testing::copy_stories_hf(dir / "window_hf", "config.json", [](json& cfg) {
    cfg["architectures"] = {"MistralForCausalLM"};
    cfg["model_type"] = "mistral";
    cfg["sliding_window"] = 32;
  });
  const std::string path = ptn::testing::export_hf(dir / "window_hf", dir, "window");
  try {
    RunningServer s(path, options(4));
    FAIL() << "--lookup-draft was accepted for a model with window layers";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--lookup-draft"), std::string::npos) << e.what();
  }
  RunningServer without(path, options(0));  // the same model serves without speculation
  EXPECT_TRUE(without.post_ok("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 4}}).is_object());
}

}  // namespace
