// One generation path: `ptn run`, `ptn chat`, and the server's /v1/completions and
// /v1/chat/completions give the same tokens, the same text and the same finish for the same
// prompt, sampling parameters and seed - greedy and sampled - and stop at the same place: at
// max tokens, at a stop string, at BOS (stories260K writes one after each story) and at an
// end-of-generation id of the model's config.json.
//
// The chat template renders the user message as it is, so all four see the same prompt tokens
// (BOS + "Once upon a time"). run and chat are the built binary; the server runs in process and
// answers each request twice, as one JSON body and streamed.
#include <gtest/gtest.h>

#include <httplib.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "../cli_test_util.h"
#include "../serve/serve_test_util.h"
#include "core/threadpool.h"
#include "runtime/program.h"
#include "serve/server.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using ptn_test::run_ptn;
using ptn_test::spit;

namespace {

const char* const kTemplate = "{% for m in messages %}{{ m.content }}{% endfor %}";
const char* const kPrompt = "Once upon a time";

struct Params {
  float temp = 0;
  uint64_t seed = 0;
  int64_t max_tokens = 40;
  std::string stop;  // "" : none
};

struct Outcome {
  std::string text;
  int64_t tokens = -1;     // tokens generated, the one that ended it included
  std::string finish;      // OpenAI's: "stop" | "length"
  std::vector<int32_t> ids;  // run and chat print them
};

std::ostream& operator<<(std::ostream& o, const Outcome& x) {
  return o << "{" << x.tokens << " tokens, " << x.finish << ", \"" << x.text << "\"}";
}

std::string openai_finish(const std::string& ptn_finish) {
  return ptn_finish == "eog" || ptn_finish == "bos" || ptn_finish == "stop_string" ? "stop" : "length";
}

std::vector<int32_t> parse_ids(const std::string& err, const std::string& label) {
  std::smatch m;
  std::vector<int32_t> ids;
  if (!std::regex_search(err, m, std::regex(label + ": (\\[[^\\]]*\\])"))) return ids;
  for (const auto& v : json::parse(m[1].str())) ids.push_back(v.get<int32_t>());
  return ids;
}

std::string quote(const std::string& s) { return "'" + s + "'"; }

class GenerationPaths : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(PTN_BINARY)) return;
    dir_ = ptn::testing::temp_dir("ptn_generation_paths_");
    plain_ = ptn::testing::export_hf(ptn::testing::stories_hf_dir(), dir_, "plain");
    spit(dir_ / "raw.jinja", kTemplate);
  }
  static void TearDownTestSuite() {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    if (!fs::exists(PTN_BINARY)) GTEST_SKIP() << "ptn binary not built: " << PTN_BINARY;
  }

  static std::string sampling_flags(const Params& p) {
    std::string f = " --temp " + std::to_string(p.temp) + " --top-k 40 --seed " + std::to_string(p.seed);
    if (!p.stop.empty()) f += " --stop " + quote(p.stop);
    return f;
  }

  static Outcome run(const std::string& program, const Params& p) {
    auto r = run_ptn("run -m " + quote(program) + " -p " + quote(kPrompt) + " -n " + std::to_string(p.max_tokens) +
                         sampling_flags(p) + " --print-ids --print-finish",
                     dir_);
    EXPECT_EQ(r.code, 0) << r.err;
    Outcome o;
    EXPECT_EQ(r.out.rfind(kPrompt, 0), 0u) << r.out;
    EXPECT_EQ(r.out.back(), '\n');
    o.text = r.out.substr(std::string(kPrompt).size(), r.out.size() - std::string(kPrompt).size() - 1);
    o.ids = parse_ids(r.err, "generated ids");
    o.tokens = static_cast<int64_t>(o.ids.size());
    std::smatch m;
    if (std::regex_search(r.err, m, std::regex("finish: ([a-z_]+)"))) o.finish = openai_finish(m[1].str());
    return o;
  }

  static Outcome chat(const std::string& program, const Params& p) {
    auto r = run_ptn("chat -m " + quote(program) + " --chat-template " + quote((dir_ / "raw.jinja").string()) + " -n " +
                         std::to_string(p.max_tokens) + sampling_flags(p) + " --print-ids",
                     dir_, std::string(kPrompt) + "\n");
    EXPECT_EQ(r.code, 0) << r.err;
    Outcome o;
    EXPECT_EQ(r.out.back(), '\n');
    o.text = r.out.substr(0, r.out.size() - 1);
    o.ids = parse_ids(r.err, "reply ids");
    o.tokens = static_cast<int64_t>(o.ids.size());
    std::smatch m;
    if (std::regex_search(r.err, m, std::regex("stop: ([a-z_]+)\\]"))) o.finish = openai_finish(m[1].str());
    return o;
  }

  // /v1/completions and /v1/chat/completions of one server.
  static std::pair<Outcome, Outcome> serve(const std::string& program, const Params& p) {
    ptn::serve::ServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    so.chat_template = kTemplate;
    ptn::serve::Server server(ptn::Program::load(program), so, &ptn::default_pool());
    const int port = server.bind();
    server.start();
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120, 0);
    json body = {{"max_tokens", p.max_tokens}, {"temperature", p.temp}, {"top_k", 40}, {"seed", p.seed}};
    if (!p.stop.empty()) body["stop"] = p.stop;
    auto ask = [&](const char* path, json b, bool is_chat) {
      Outcome o;
      auto res = c.Post(path, b.dump(), "application/json");
      EXPECT_TRUE(res && res->status == 200) << path << ": " << (res ? res->body : "no answer");
      if (!res || res->status != 200) return o;
      const json j = json::parse(res->body);
      o.text = is_chat ? j["choices"][0]["message"]["content"].get<std::string>() : j["choices"][0]["text"].get<std::string>();
      o.tokens = j["usage"]["completion_tokens"].get<int64_t>();
      o.finish = j["choices"][0]["finish_reason"].get<std::string>();
      // The same request streamed: the deltas add up to the same text, the last one says why.
      b["stream"] = true;
      auto st = c.Post(path, b.dump(), "application/json");
      EXPECT_TRUE(st && st->status == 200) << path << " (stream): " << (st ? st->body : "no answer");
      if (!st || st->status != 200) return o;
      std::string streamed, stream_finish;
      bool done = false;
      for (size_t at = 0; at < st->body.size();) {
        size_t end = st->body.find("\n\n", at);
        if (end == std::string::npos) end = st->body.size();
        const std::string event = st->body.substr(at, end - at);
        at = end + 2;
        if (event.rfind("data: ", 0) != 0) continue;
        if (event == "data: [DONE]") {
          done = true;
          continue;
        }
        const json e = json::parse(event.substr(6));
        // (const json's operator[] must not be given a missing key: find() only)
        const auto choices = e.find("choices");
        if (choices == e.end() || !choices->is_array() || choices->empty()) continue;
        const json& ch = (*choices)[0];
        auto string_at = [](const json& o, const char* key) {
          const auto it = o.is_object() ? o.find(key) : o.end();
          return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
        };
        if (is_chat) {
          if (const auto d = ch.find("delta"); d != ch.end()) streamed += string_at(*d, "content");
        } else {
          streamed += string_at(ch, "text");
        }
        if (const std::string f = string_at(ch, "finish_reason"); !f.empty()) stream_finish = f;
      }
      EXPECT_TRUE(done) << path << " (stream) did not end with [DONE]";
      EXPECT_EQ(streamed, o.text) << path << " streamed";
      EXPECT_EQ(stream_finish, o.finish) << path << " streamed";
      return o;
    };
    json comp = body;
    comp["prompt"] = kPrompt;
    json chat_body = body;
    chat_body["messages"] = json::array({{{"role", "user"}, {"content", kPrompt}}});
    auto out = std::make_pair(ask("/v1/completions", comp, false), ask("/v1/chat/completions", chat_body, true));
    server.shutdown(std::chrono::seconds(2));
    return out;
  }

  // Runs all four front ends; checks they agree; returns run's outcome.
  static Outcome all_agree(const std::string& program, const Params& p) {
    const Outcome r = run(program, p);
    const Outcome c = chat(program, p);
    const auto [sc, sch] = serve(program, p);
    EXPECT_FALSE(r.ids.empty());
    EXPECT_EQ(r.ids, c.ids) << "run vs chat";
    for (const auto& [name, o] : std::map<std::string, Outcome>{{"chat", c}, {"/v1/completions", sc}, {"/v1/chat/completions", sch}}) {
      EXPECT_EQ(o.text, r.text) << "run vs " << name;
      EXPECT_EQ(o.tokens, r.tokens) << "run vs " << name;
      EXPECT_EQ(o.finish, r.finish) << "run vs " << name << ": " << o << " vs " << r;
    }
    return r;
  }

  static inline fs::path dir_;
  static inline std::string plain_;
};

TEST_F(GenerationPaths, MaxTokensGreedyAndSampled) {
  const Outcome g = all_agree(plain_, {0.0f, 0, 40, ""});
  EXPECT_EQ(g.tokens, 40);
  EXPECT_EQ(g.finish, "length");
  const Outcome s = all_agree(plain_, {0.8f, 1234, 40, ""});
  EXPECT_EQ(s.tokens, 40);
  EXPECT_EQ(s.finish, "length");
  EXPECT_NE(s.ids, g.ids);  // sampling did draw
  const Outcome s2 = all_agree(plain_, {0.8f, 99, 40, ""});
  EXPECT_NE(s2.ids, s.ids);  // and the seed matters
}

TEST_F(GenerationPaths, StopStringGreedyAndSampled) {
  for (const Params& base : {Params{0.0f, 0, 60, ""}, Params{0.8f, 77, 60, ""}}) {
    const Outcome full = run(plain_, base);
    ASSERT_GT(full.text.size(), 40u);
    Params p = base;
    p.stop = full.text.substr(30, 6);  // a piece of the text that follows without a stop string
    const Outcome cut = all_agree(plain_, p);
    EXPECT_EQ(cut.finish, "stop");
    EXPECT_EQ(cut.text, full.text.substr(0, full.text.find(p.stop))) << "stop '" << p.stop << "'";
    EXPECT_LT(cut.tokens, full.tokens);
  }
}

TEST_F(GenerationPaths, BosEndsTheStoryEverywhere) {
  // Greedy, stories260K writes BOS after its first story (341 tokens); the server used to go on.
  const Outcome o = all_agree(plain_, {0.0f, 0, 500, ""});
  EXPECT_EQ(o.finish, "stop");
  EXPECT_LT(o.tokens, 500);
  ASSERT_FALSE(o.ids.empty());
  EXPECT_EQ(o.ids.back(), 1);  // the BOS that ended it, counted
  EXPECT_EQ(o.text.find("Once upon a time", 10), std::string::npos) << "a second story was glued on";
  // run says why it stopped, and the text is that of the tokens before the BOS.
  auto r = run_ptn("run -m " + quote(plain_) + " -p " + quote(kPrompt) + " -n 500 --temp 0 --print-finish", dir_);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("finish: bos\n"), std::string::npos) << r.err;
  EXPECT_EQ(run(plain_, {0.0f, 0, o.tokens - 1, ""}).text, o.text);
}

TEST_F(GenerationPaths, EndOfGenerationIdFromTheConfig) {
  // A config.json eos_token_id list names a token the model writes early in its greedy text:
  // every front end stops right there, greedy and sampled.
  const Outcome free_run = run(plain_, {0.0f, 0, 40, ""});
  ASSERT_GE(free_run.ids.size(), 20u);
  const int32_t end_id = free_run.ids[12];
  const size_t first = static_cast<size_t>(std::find(free_run.ids.begin(), free_run.ids.end(), end_id) - free_run.ids.begin());
  const fs::path hf = dir_ / "eos_hf";
  ptn::testing::copy_stories_hf(hf, "config.json", [&](json& cfg) { cfg["eos_token_id"] = json::array({2, end_id}); });
  const std::string eos_program = ptn::testing::export_hf(hf, dir_, "eos");
  const Outcome g = all_agree(eos_program, {0.0f, 0, 40, ""});
  EXPECT_EQ(g.finish, "stop");
  EXPECT_EQ(g.tokens, static_cast<int64_t>(first) + 1);
  EXPECT_EQ(g.ids.back(), end_id);
  // The end token is counted but its text is not part of the reply in any front end (all_agree
  // compared them with run's): the text is that of the tokens before it, which differs from the
  // text with it.
  const Outcome before = run(plain_, {0.0f, 0, static_cast<int64_t>(first), ""});
  const Outcome with_end = run(plain_, {0.0f, 0, static_cast<int64_t>(first) + 1, ""});
  EXPECT_EQ(g.text, before.text);
  EXPECT_NE(g.text, with_end.text);
  auto r = run_ptn("run -m " + quote(eos_program) + " -p " + quote(kPrompt) + " -n 40 --temp 0 --print-finish", dir_);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("finish: eog\n"), std::string::npos) << r.err;
  const Outcome s = all_agree(eos_program, {0.8f, 5, 200, ""});
  if (s.finish == "stop") {
    EXPECT_TRUE(s.ids.back() == end_id || s.ids.back() == 1 || s.ids.back() == 2) << s;
  }
}

}  // namespace
