// POST /v1/embeddings end to end, in process on a free port, against stories260K exported from
// the bundled Hugging Face files: the pooled vectors against the reference executor's hidden
// states pooled here in plain loops, last and mean pooling, normalization, base64, batch order,
// token-id inputs, Matryoshka `dimensions`, embeddings beside generation, the pooling an HF
// directory declares (sentence-transformers) recorded at export, and bad inputs refused by name.
#include <gtest/gtest.h>

#include <httplib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "../oracle_test_util.h"
#include "core/error.h"
#include "export/pooling_config.h"
#include "kvcache/factory.h"
#include "serve/embeddings.h"
#include "serve/server.h"
#include "running_server.h"
#include "serve_test_util.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace ptn;
using ptn::testing::copy_stories_hf;
using ptn::testing::export_hf;
using ptn::testing::stories_hf_dir;
using ptn::testing::temp_dir;

namespace {

const char* const kScratch = "ptn_embed_test_";
const std::vector<std::string> kTexts = {"Once upon a time", "The little dog ran to the park.",
                                         "Lily and Ben were friends", "A"};

serve::ServerOptions named_stories(serve::ServerOptions o) {
  o.model_name = "stories";
  return o;
}

struct Running : ptn::testing::RunningServer {
  Running(const std::string& path, serve::ServerOptions o) : RunningServer(path, named_stories(std::move(o))) {}
  httplib::Result post(const json& body, const char* path = "/v1/embeddings") const {
    return RunningServer::post(path, body);
  }
  json embed(const json& body) const {
    auto r = post(body);
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body);
  }
};

std::vector<double> vec(const json& e) { return e.get<std::vector<double>>(); }

double norm2(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

double nmse(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return num / den;
}

// The reference: the reference executor (plain ops, the reference cache) runs the tokens as one
// step with every row selected; the pooling and the normalization are computed here.
std::vector<double> reference_embedding(const std::shared_ptr<const Program>& p, const std::vector<int32_t>& ids,
                                        const std::string& pooling) {
  Executor exec(p, ExecMode::Reference, static_cast<int64_t>(ids.size()));
  CacheOptions co;
  co.capacity_tokens = static_cast<int64_t>(ids.size()) + 16;
  auto cache = make_cache("reference", p->meta().cache_spec, co);
  CacheScope scope(exec, *cache);
  cache->add_sequence(0);
  StepBatch b;
  for (size_t i = 0; i < ids.size(); ++i) b.rows.push_back({0, static_cast<int32_t>(i), ids[i]});
  int64_t n = 0;
  exec.step(b, OutputRows::All, &n);
  const int64_t H = exec.hidden_size();
  const float* h = exec.hidden();
  std::vector<double> v(static_cast<size_t>(H), 0.0);
  for (int64_t r = 0; r < n; ++r) {
    const bool take = pooling == "mean" || (pooling == "last" && r == n - 1) || (pooling == "cls" && r == 0);
    if (take)
      for (int64_t c = 0; c < H; ++c) v[static_cast<size_t>(c)] += h[r * H + c];
  }
  const double len = norm2(v);
  for (double& x : v) x /= len;
  return v;
}

std::vector<float> from_base64(const std::string& s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i + 3 < s.size(); i += 4) {
    uint32_t w = 0;
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const int d = s[i + static_cast<size_t>(k)] == '=' ? (++pad, 0) : val(s[i + static_cast<size_t>(k)]);
      EXPECT_GE(d, 0) << "not base64: " << s;
      w = w << 6 | static_cast<uint32_t>(d);
    }
    bytes.push_back(static_cast<uint8_t>(w >> 16));
    if (pad < 2) bytes.push_back(static_cast<uint8_t>(w >> 8));
    if (pad < 1) bytes.push_back(static_cast<uint8_t>(w));
  }
  EXPECT_EQ(bytes.size() % 4, 0u);
  std::vector<float> out(bytes.size() / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    const uint32_t u = bytes[4 * i] | bytes[4 * i + 1] << 8 | bytes[4 * i + 2] << 16 | static_cast<uint32_t>(bytes[4 * i + 3]) << 24;
    std::memcpy(&out[i], &u, 4);
  }
  return out;
}

class EmbedTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path dir = temp_dir(kScratch);
    plain_ = new std::string(export_hf(stories_hf_dir(), dir, "stories"));
    // The same weights as a sentence-transformers directory: mean pooling, Matryoshka sizes.
    copy_stories_hf(dir / "st_hf", "config.json", [](json& c) { c["matryoshka_dimensions"] = {16, 32}; });
    std::ofstream(dir / "st_hf/modules.json")
        << R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])";
    fs::create_directories(dir / "st_hf/1_Pooling");
    std::ofstream(dir / "st_hf/1_Pooling/config.json")
        << R"({"word_embedding_dimension": 64, "pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true,
               "pooling_mode_max_tokens": false, "pooling_mode_mean_sqrt_len_tokens": false,
               "pooling_mode_weightedmean_tokens": false, "pooling_mode_lasttoken": false})";
    st_ = new std::string(export_hf(dir / "st_hf", dir, "stories_st"));
    program_ = new std::shared_ptr<const Program>(Program::load(*plain_));
    tok_ = Tokenizer::create(*(*program_)->meta().tokenizer).release();
    server_ = new Running(*plain_, serve::ServerOptions{});
  }
  static void TearDownTestSuite() {
    delete server_;
    delete tok_;
    delete program_;
    fs::remove_all(temp_dir(kScratch));
  }
  static std::vector<int32_t> ids(const std::string& text) { return tok_->encode(text, true, false); }

  static std::string* plain_;
  static std::string* st_;
  static std::shared_ptr<const Program>* program_;
  static Tokenizer* tok_;
  static Running* server_;
};
std::string* EmbedTest::plain_ = nullptr;
std::string* EmbedTest::st_ = nullptr;
std::shared_ptr<const Program>* EmbedTest::program_ = nullptr;
Tokenizer* EmbedTest::tok_ = nullptr;
Running* EmbedTest::server_ = nullptr;

TEST_F(EmbedTest, LastTokenPoolingMatchesTheReferenceAndIsNormalized) {
  const json r = server_->embed({{"model", "stories"}, {"input", kTexts[1]}});
  EXPECT_EQ(r["object"], "list");
  EXPECT_EQ(r["model"], "stories");
  ASSERT_EQ(r["data"].size(), 1u);
  EXPECT_EQ(r["data"][0]["object"], "embedding");
  EXPECT_EQ(r["data"][0]["index"], 0);
  const std::vector<double> got = vec(r["data"][0]["embedding"]);
  ASSERT_EQ(got.size(), 64u);
  EXPECT_NEAR(norm2(got), 1.0, 1e-6);
  const std::vector<int32_t> t = ids(kTexts[1]);
  EXPECT_EQ(r["usage"]["prompt_tokens"], t.size());
  EXPECT_EQ(r["usage"]["total_tokens"], t.size());
  const double e = nmse(got, reference_embedding(*program_, t, "last"));
  std::printf("[ embed    ] last pooling, %zu tokens: NMSE server vs reference %.2e\n", t.size(), e);
  EXPECT_LT(e, 1e-7);
}

TEST_F(EmbedTest, MeanAndClsPoolingMatchTheReferenceAndDifferFromLast) {
  std::map<std::string, std::vector<double>> by;
  for (const char* pooling : {"mean", "cls", "last"}) {
    serve::ServerOptions o;
    o.pooling = pooling;
    // One row per step for mean: the sum is gathered over many steps (chunked prefill).
    o.engine.max_batch_tokens = std::string(pooling) == "mean" ? 3 : 0;
    Running s(*plain_, o);
    const json r = s.embed({{"input", kTexts[1]}});
    by[pooling] = vec(r["data"][0]["embedding"]);
    const double e = nmse(by[pooling], reference_embedding(*program_, ids(kTexts[1]), pooling));
    std::printf("[ embed    ] %s pooling: NMSE server vs reference %.2e\n", pooling, e);
    EXPECT_LT(e, 1e-7) << pooling;
    EXPECT_NEAR(norm2(by[pooling]), 1.0, 1e-6);
  }
  EXPECT_GT(nmse(by["mean"], by["last"]), 1e-3);
  EXPECT_GT(nmse(by["cls"], by["last"]), 1e-3);
}

// An oracle ptn did not compute: tests/oracle/hf_forward.py's float64 NumPy forward pass of the
// bundled HF files gives the final hidden states; pooled and normalized here, they must be what
// the server answers.
TEST_F(EmbedTest, PooledEmbeddingsMatchTheNumPyOracle) {
  std::string tried;
  const std::string python = ptn::testing::python_with_numpy(&tried);
  ASSERT_FALSE(python.empty()) << "no python3 with numpy (tried " << tried << "); run `make deps`";
  const std::vector<int32_t> t = ids(kTexts[1]);
  const fs::path dir = temp_dir(kScratch);
  const std::string logits = (dir / "oracle_logits.f64").string(), hidden = (dir / "oracle_hidden.f64").string();
  ASSERT_EQ(ptn::testing::run_oracle(python, stories_hf_dir().string(), t, logits, hidden), "");
  const size_t H = 64;
  std::vector<double> h;
  ASSERT_TRUE(ptn::testing::read_f64(hidden, t.size() * H, &h)) << hidden << ": not [" << t.size() << ", 64] float64";
  for (const char* pooling : {"last", "mean"}) {
    std::vector<double> want(H, 0.0);
    for (size_t r = 0; r < t.size(); ++r)
      if (std::string(pooling) == "mean" || r + 1 == t.size())
        for (size_t c = 0; c < H; ++c) want[c] += h[r * H + c];
    const double len = norm2(want);
    for (double& x : want) x /= len;
    serve::ServerOptions o;
    o.pooling = pooling;
    Running s(*plain_, o);
    const std::vector<double> got = vec(s.embed({{"input", kTexts[1]}})["data"][0]["embedding"]);
    const double e = nmse(got, want);
    std::printf("[ oracle   ] stories260K %s pooling, %zu tokens: NMSE server vs NumPy float64 %.2e\n", pooling,
                t.size(), e);
    EXPECT_LT(e, 1e-9) << pooling;
  }
}

TEST_F(EmbedTest, BatchesKeepTheirOrderAndEqualSingleRequests) {
  const json r = server_->embed({{"input", kTexts}});
  ASSERT_EQ(r["data"].size(), kTexts.size());
  int64_t tokens = 0;
  for (size_t i = 0; i < kTexts.size(); ++i) {
    EXPECT_EQ(r["data"][i]["index"], i);
    const json one = server_->embed({{"input", kTexts[i]}});
    EXPECT_LT(nmse(vec(r["data"][i]["embedding"]), vec(one["data"][0]["embedding"])), 1e-10) << i;
    tokens += static_cast<int64_t>(ids(kTexts[i]).size());
  }
  EXPECT_EQ(r["usage"]["prompt_tokens"], tokens);
  // Token ids give what their text gives; one array of ids is one input.
  json arrays = json::array();
  for (const auto& t : kTexts) arrays.push_back(ids(t));
  const json by_ids = server_->embed({{"input", arrays}});
  ASSERT_EQ(by_ids["data"].size(), kTexts.size());
  for (size_t i = 0; i < kTexts.size(); ++i)
    EXPECT_LT(nmse(vec(by_ids["data"][i]["embedding"]), vec(r["data"][i]["embedding"])), 1e-10) << i;
  const json one_array = server_->embed({{"input", ids(kTexts[0])}});
  ASSERT_EQ(one_array["data"].size(), 1u);
  EXPECT_LT(nmse(vec(one_array["data"][0]["embedding"]), vec(r["data"][0]["embedding"])), 1e-10);
}

// Ollama's /api/embed: the same vectors as /v1/embeddings, in its shape; its errors in its shape.
TEST_F(EmbedTest, OllamaEmbedGivesTheSameVectors) {
  const json want = server_->embed({{"input", kTexts}});
  auto r = server_->post({{"model", "stories"}, {"input", kTexts}, {"truncate", false}, {"keep_alive", "5m"}}, "/api/embed");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json o = json::parse(r->body);
  ASSERT_EQ(o["embeddings"].size(), kTexts.size());
  for (size_t i = 0; i < kTexts.size(); ++i)
    EXPECT_LT(nmse(vec(o["embeddings"][i]), vec(want["data"][i]["embedding"])), 1e-10) << i;
  EXPECT_EQ(o["prompt_eval_count"], want["usage"]["prompt_tokens"]);
  EXPECT_GT(o["total_duration"].get<int64_t>(), 0);
  auto one = server_->post({{"input", kTexts[0]}}, "/api/embed");
  ASSERT_TRUE(one);
  ASSERT_EQ(one->status, 200) << one->body;
  EXPECT_EQ(json::parse(one->body)["embeddings"].size(), 1u);
  for (const json& bad : {json{{"input", 5}}, json{{"input", {"a", 7}}}, json{{"prompt", "x"}},
                          json{{"input", "x"}, {"options", {{"temperature", 1}}}}, json{{"input", "x"}, {"model", "other"}}}) {
    auto e = server_->post(bad, "/api/embed");
    ASSERT_TRUE(e);
    EXPECT_GE(e->status, 400) << bad.dump();
    const json b = json::parse(e->body);
    EXPECT_TRUE(b["error"].is_string()) << e->body;  // Ollama's shape
  }
}

TEST_F(EmbedTest, Base64IsTheLittleEndianFloats) {
  const json f = server_->embed({{"input", kTexts[0]}, {"encoding_format", "float"}});
  const json b = server_->embed({{"input", kTexts[0]}, {"encoding_format", "base64"}});
  ASSERT_TRUE(b["data"][0]["embedding"].is_string());
  const std::vector<float> decoded = from_base64(b["data"][0]["embedding"].get<std::string>());
  const std::vector<double> want = vec(f["data"][0]["embedding"]);
  ASSERT_EQ(decoded.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(decoded[i], static_cast<float>(want[i])) << i;
  EXPECT_EQ(serve::base64_f32({1.0f}), "AACAPw==");  // 00 00 80 3f
  EXPECT_EQ(serve::base64_f32({}), "");
}

TEST_F(EmbedTest, EmbeddingsRunBesideGeneration) {
  const json solo = server_->embed({{"input", kTexts}});
  std::thread gen([&] {
    auto r = server_->post({{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0}}, "/v1/completions");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const json mixed = server_->embed({{"input", kTexts}});
  gen.join();
  for (size_t i = 0; i < kTexts.size(); ++i)
    EXPECT_LT(nmse(vec(mixed["data"][i]["embedding"]), vec(solo["data"][i]["embedding"])), 1e-10) << i;
}

// The engine itself, with a cache of 6 blocks of 16 and steps of 2 rows: a generating sequence
// (admitted first) and a 60-token input (mean pooling, one row a step) grow together until they
// need 7 blocks, so the input, the younger, is preempted at about its 48th token and computed
// again from its first token once the generation is done. Its vector must be the quiet one (a
// pooled sum not restarted would count the first tokens twice).
TEST_F(EmbedTest, APreemptedInputIsPooledAgainFromItsStart) {
  std::vector<int32_t> input;
  for (int i = 0; i < 60; ++i) input.push_back(3 + (i * 37) % 500);
  auto collect = [](serve::Channel& ch, std::vector<float>* vec) {
    serve::Event e;
    for (int waited = 0; waited < 600; ++waited) {
      if (!ch.pop(&e, std::chrono::milliseconds(100))) continue;
      if (e.kind == serve::Event::Kind::Embedding) *vec = e.embedding;
      if (e.kind == serve::Event::Kind::Error) ADD_FAILURE() << e.message;
      if (e.kind != serve::Event::Kind::Delta && e.kind != serve::Event::Kind::Embedding) return e;
    }
    ADD_FAILURE() << "no end event";
    return e;
  };
  // The input must reach the engine while the generation holds at most one block (else it
  // waits for the generation to end and is never preempted): a loaded machine can delay it
  // past that, so the scenario is tried again, up to 5 times, until it preempts.
  std::vector<float> got;
  std::string m;
  for (int attempt = 0; attempt < 5; ++attempt) {
    serve::EngineOptions eo;
    eo.capacity_tokens = 96;
    eo.block_size = 16;
    eo.max_batch_tokens = 2;
    eo.max_running = 2;
    serve::Metrics metrics;
    serve::Engine engine(*program_, *tok_, eo, &ptn::testing::serve_pool(), &metrics);
    serve::GenRequest g;
    g.prompt = {1};
    g.max_tokens = 95;
    g.sampling.temperature = 0;
    g.sampling.logit_bias = {{1, -100.0f}, {2, -100.0f}};  // no early end at BOS / EOS
    auto gen = engine.submit(g);
    serve::EmbedRequest er;
    er.inputs = {input};
    er.pooling = serve::Pooling::Mean;
    auto emb = engine.submit_embed(er);
    std::vector<float> none;
    got.clear();
    const serve::Event done = collect(*emb, &got);
    const serve::Event gen_done = collect(*gen, &none);
    EXPECT_EQ(done.prompt_tokens, 60);
    EXPECT_EQ(gen_done.completion_tokens, 95);
    m = metrics.render();
    if (m.find("\nptn_preemptions_total 1") != std::string::npos) break;
  }
  ASSERT_NE(m.find("\nptn_preemptions_total 1"), std::string::npos) << "the scenario did not preempt in 5 tries:\n" << m;
  std::vector<double> pooled(got.begin(), got.end());
  const double len = norm2(pooled);
  for (double& x : pooled) x /= len;
  const double e = nmse(pooled, reference_embedding(*program_, input, "mean"));
  std::printf("[ embed    ] preempted mean-pooled input: NMSE vs reference %.2e\n", e);
  EXPECT_LT(e, 1e-7);
}

TEST_F(EmbedTest, TheDeclaredPoolingIsRecordedAndDimensionsTruncate) {
  auto st = Program::load(*st_);
  EXPECT_EQ(st->meta().embedding.pooling, "mean");
  EXPECT_EQ(st->meta().embedding.matryoshka_dimensions, (std::vector<int64_t>{16, 32}));
  EXPECT_TRUE((*program_)->meta().embedding.empty());
  Running s(*st_, serve::ServerOptions{});
  const json full = s.embed({{"input", kTexts[2]}});
  const std::vector<double> f = vec(full["data"][0]["embedding"]);
  EXPECT_LT(nmse(f, reference_embedding(st, ids(kTexts[2]), "mean")), 1e-7);
  const json cut = s.embed({{"input", kTexts[2]}, {"dimensions", 16}});
  const std::vector<double> c = vec(cut["data"][0]["embedding"]);
  ASSERT_EQ(c.size(), 16u);
  EXPECT_NEAR(norm2(c), 1.0, 1e-6);
  const double len = norm2(std::vector<double>(f.begin(), f.begin() + 16));
  for (size_t i = 0; i < 16; ++i) EXPECT_NEAR(c[i], f[i] / len, 1e-6) << i;
  auto r = s.post({{"input", "x"}, {"dimensions", 20}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("16, 32"), std::string::npos) << r->body;
  // A model that claims no Matryoshka training refuses to shorten (as vLLM does); the full size is fine.
  r = server_->post({{"input", "x"}, {"dimensions", 16}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "dimensions");
  EXPECT_EQ(server_->embed({{"input", "x"}, {"dimensions", 64}})["data"][0]["embedding"].size(), 64u);
}

TEST_F(EmbedTest, BadInputsAreRefusedNamingTheField) {
  json long_ids = json::array();
  for (int i = 0; i < 600; ++i) long_ids.push_back(5);
  const std::vector<std::pair<json, std::string>> cases = {
      {json::object(), "input"},
      {{{"input", json::array()}}, "input"},
      {{{"input", 5}}, "input"},
      {{{"input", ""}}, "input"},
      {{{"input", {"a", 5}}}, "input[1]"},
      {{{"input", {"a", ""}}}, "input[1]"},
      {{{"input", json::array({json::array({1, 2}), "a"})}}, "input[1]"},
      {{{"input", json::array({json::array({1, 2}), json::array()})}}, "input[1]"},
      {{{"input", {1, 512}}}, "input[1]"},
      {{{"input", {1, -1}}}, "input[1]"},
      {{{"input", json::array({json::array({1, 2}), json::array({3, 9999})})}}, "input[1][1]"},
      {{{"input", long_ids}}, "input"},
      {{{"input", "hi"}, {"encoding_format", "hex"}}, "encoding_format"},
      {{{"input", "hi"}, {"dimensions", 0}}, "dimensions"},
      {{{"input", "hi"}, {"dimensions", 65}}, "dimensions"},
      {{{"input", "hi"}, {"dimensions", "8"}}, "dimensions"},
      {{{"input", "hi"}, {"user", 3}}, "user"},
      {{{"input", "hi"}, {"temperature", 0}}, "temperature"},
  };
  for (const auto& [body, param] : cases) {
    auto r = server_->post(body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << body.dump() << " -> " << r->body;
    const json e = json::parse(r->body)["error"];
    EXPECT_EQ(e["param"], param) << body.dump() << " -> " << r->body;
    EXPECT_EQ(e["type"], "invalid_request_error");
  }
  json many = json::array();
  for (size_t i = 0; i <= serve::kMaxEmbeddingInputs; ++i) many.push_back("a");
  auto r = server_->post({{"input", many}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  r = server_->post({{"input", long_ids}});
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "context_length_exceeded");
  r = server_->post({{"input", "hi"}, {"model", "other"}});
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(server_->embed({{"input", "hi"}, {"user", "u1"}})["data"].size(), 1u);  // user: accepted, ignored
}

TEST_F(EmbedTest, AFullQueueAnswers503WithRetryAfter) {
  serve::ServerOptions o;
  o.engine.max_queue = 0;
  Running s(*plain_, o);
  auto r = s.post({{"input", "hi"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "server_busy");
}

TEST(PoolingConfig, ModesAreReadAndUnsupportedOnesRefusedByName) {
  const fs::path dir = temp_dir("ptn_pooling_cfg_");
  EXPECT_EQ(read_pooling_config(dir.string()), "");  // no modules.json: nothing declared
  std::ofstream(dir / "modules.json") << R"([{"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])";
  fs::create_directories(dir / "1_Pooling");
  auto write = [&](const std::string& cfg) { std::ofstream(dir / "1_Pooling/config.json") << cfg; };
  write(R"({"pooling_mode_lasttoken": true, "pooling_mode_mean_tokens": false})");
  EXPECT_EQ(read_pooling_config(dir.string()), "last");
  write(R"({"pooling_mode_cls_token": true})");
  EXPECT_EQ(read_pooling_config(dir.string()), "cls");
  for (const auto& [cfg, name] : std::vector<std::pair<std::string, std::string>>{
           {R"({"pooling_mode_max_tokens": true})", "pooling_mode_max_tokens"},
           {R"({"pooling_mode_lasttoken": true, "pooling_mode_mean_tokens": true})", "pooling_mode_lasttoken"},
           {R"({"pooling_mode_lasttoken": "yes"})", "pooling_mode_lasttoken"},
           {R"({"pooling_mode_lasttoken": false})", "config.json"},
           {"{", "config.json"}}) {
    write(cfg);
    try {
      read_pooling_config(dir.string());
      ADD_FAILURE() << cfg << " was accepted";
    } catch (const ptn::Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
  std::ofstream(dir / "modules.json") << R"([{"idx": 1, "path": "../x", "type": "sentence_transformers.models.Pooling"}])";
  EXPECT_THROW(read_pooling_config(dir.string()), ptn::Error);
  fs::remove_all(dir);
}

}  // namespace
