// The chat page's routes (serve/server_webui.cpp): GET / and /webui/<file> give the embedded
// files byte for byte with their type, an ETag that answers 304, no-cache and the page's
// Content-Security-Policy; they need no API key while the API still does; with the page off
// (ServerOptions::webui = false, `ptn serve --no-webui`) / is the 404 it was before.
// The page itself runs in a real browser in tests/js/webui_browser.mjs.
#include <gtest/gtest.h>

#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "serve/server.h"
#include "serve/webui.h"
#include "running_server.h"
#include "serve_test_util.h"

namespace fs = std::filesystem;
using namespace ptn;

namespace {

const char* const kScratch = "ptn_webui_test_";

const std::string& program_path() {
  static const std::string path =
      ptn::testing::export_hf(ptn::testing::stories_hf_dir(), ptn::testing::temp_dir(kScratch), "stories");
  return path;
}

serve::ServerOptions small_cache(serve::ServerOptions o) {
  o.engine.capacity_tokens = 1024;
  return o;
}

struct Running : ptn::testing::RunningServer {
  explicit Running(serve::ServerOptions o) : RunningServer(program_path(), small_cache(std::move(o))) {}
};

std::string source_file(const std::string& name) {
  std::ifstream in(fs::path(PTN_SOURCE_DIR) / "src/serve/webui" / name, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class WebUiTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(ptn::testing::temp_dir(kScratch), ec);
  }
};

TEST_F(WebUiTest, EveryFileOfTheSourceFolderIsEmbeddedAsItIs) {
  size_t on_disk = 0;
  for (const auto& e : fs::directory_iterator(fs::path(PTN_SOURCE_DIR) / "src/serve/webui")) {
    ++on_disk;
    const std::string name = e.path().filename().string();
    const serve::WebFile* f = serve::web_file_for_path(name == "index.html" ? "/" : "/webui/" + name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->data), f->size), source_file(name)) << name;
  }
  EXPECT_EQ(serve::web_files().size(), on_disk);
  EXPECT_EQ(serve::web_file_for_path("/webui/"), nullptr);
  EXPECT_EQ(serve::web_file_for_path("/webui/../index.html"), nullptr);
  EXPECT_EQ(serve::web_file_for_path("/index.html"), nullptr);
}

TEST_F(WebUiTest, PageIsServedWithTypeCachingAndPolicyHeaders) {
  Running r(serve::ServerOptions{});
  auto c = r.client();
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->body, source_file("index.html"));
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(page->get_header_value("Cache-Control"), "no-cache");
  EXPECT_EQ(page->get_header_value("X-Content-Type-Options"), "nosniff");
  const std::string csp = page->get_header_value("Content-Security-Policy");
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << csp;
  EXPECT_EQ(csp.find("unsafe-inline"), std::string::npos) << csp;
  const std::string etag = page->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());

  auto again = c.Get("/", {{"If-None-Match", etag}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());
  auto other = c.Get("/", {{"If-None-Match", "\"something-else\""}});
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 200);

  auto js = c.Get("/webui/app.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  EXPECT_EQ(js->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_NE(js->get_header_value("ETag"), etag);  // one per file
  auto css = c.Get("/webui/style.css");
  ASSERT_TRUE(css);
  EXPECT_EQ(css->get_header_value("Content-Type"), "text/css; charset=utf-8");
  auto missing = c.Get("/webui/nothing.js");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST_F(WebUiTest, PageNeedsNoKeyButTheApiStillDoes) {
  serve::ServerOptions o;
  o.api_key = "sekrit";
  Running r(o);
  auto c = r.client();
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  auto js = c.Get("/webui/app.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  auto unknown = c.Get("/webui/nothing.js");  // not a page file: the key is asked for as anywhere
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 401);
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 401);
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 401);
  auto with_key = c.Get("/v1/models", {{"Authorization", "Bearer sekrit"}});
  ASSERT_TRUE(with_key);
  EXPECT_EQ(with_key->status, 200);
}

TEST_F(WebUiTest, WithThePageOffTheRootIsNotFound) {
  serve::ServerOptions o;
  o.webui = false;
  o.api_key = "sekrit";  // and the page's paths are no longer open without the key
  Running r(o);
  auto c = r.client();
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 401);
  auto keyed = c.Get("/", {{"Authorization", "Bearer sekrit"}});
  ASSERT_TRUE(keyed);
  EXPECT_EQ(keyed->status, 404);
  EXPECT_NE(keyed->body.find("no such endpoint"), std::string::npos) << keyed->body;
  auto js = c.Get("/webui/app.js", {{"Authorization", "Bearer sekrit"}});
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 404);
}

}  // namespace
