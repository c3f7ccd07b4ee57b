// llama-server's slot endpoints (GET /slots, POST /slots/{id}?action=save|restore|erase) in
// process on free ports: a slot saved on one server and restored on a fresh one makes the next
// request with that prompt reuse the restored blocks and give the same tokens; erase drops them
// again; an action on a busy slot waits for its request; id_slot pins a request to a slot; and
// every bad input is refused by name (file names outside the directory, another program's or a
// damaged record, slots that do not exist, the feature off).
#include <gtest/gtest.h>

#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.h"
#include "running_server.h"
#include "serve/server.h"
#include "serve_test_util.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace ptn;
using ptn::testing::RunningServer;
using ptn::testing::temp_dir;

namespace {

const char* const kScratch = "ptn_slots_test_";
// About 90 tokens of stories260K's vocabulary: five full blocks of 16 and a partial one.
const char* const kPrompt =
    "Once upon a time, there was a little girl named Lily. She loved to play in the park with her "
    "dog. One day, Lily saw a big red ball under a tree. She ran to get it, but";

const std::string& program_path() {
  static const std::string p = ptn::testing::export_stories(temp_dir(kScratch), "slots", 512);
  return p;
}

const fs::path& save_dir() {
  static const fs::path d = [] {
    fs::path p = temp_dir(kScratch) / "saved";
    fs::create_directories(p);
    return p;
  }();
  return d;
}

serve::ServerOptions slot_options(bool with_dir = true) {
  serve::ServerOptions o;
  o.engine.max_running = 2;
  o.webui = false;
  if (with_dir) o.slot_save_path = save_dir().string();
  return o;
}

json completion(const RunningServer& s, int max_tokens, int id_slot = -1) {
  json body = {{"prompt", kPrompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
  if (id_slot >= 0) body["id_slot"] = id_slot;
  return s.post_ok("/v1/completions", body);
}

int64_t cached(const json& r) { return r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(); }

json slots(const RunningServer& s) {
  auto c = s.client();
  auto r = c.Get("/slots");
  EXPECT_TRUE(r);
  if (!r) return json();
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body);
}

// The error reply of a slot action that must answer `status`.
json refused(const RunningServer& s, const std::string& path, const json& body, int status) {
  auto r = s.post(path, body);
  EXPECT_TRUE(r);
  if (!r) return json();
  EXPECT_EQ(r->status, status) << path << " " << body.dump() << " -> " << r->body;
  return json::parse(r->body)["error"];
}

TEST(Slots, SavedOnOneServerRestoredOnAnotherReusesTheBlocksAndEraseDropsThem) {
  const std::string file = "story.bin";
  fs::remove(save_dir() / file);
  json first;
  int64_t saved_tokens = 0, saved_kv = 0;
  {
    RunningServer a(program_path(), slot_options());
    first = completion(a, 8, 0);
    ASSERT_TRUE(first.is_object());
    EXPECT_EQ(cached(first), 0);  // a fresh server computes the whole prompt
    const int64_t prompt_tokens = first["usage"]["prompt_tokens"];
    ASSERT_GE(prompt_tokens, 48);
    const json sl = slots(a);
    ASSERT_EQ(sl.size(), 2u);
    EXPECT_EQ(sl[0]["id"], 0);
    EXPECT_FALSE(sl[0]["is_processing"].get<bool>());
    // The prompt and the generated tokens but the last (sampled, never fed back).
    EXPECT_EQ(sl[0]["n_tokens"].get<int64_t>(), prompt_tokens + 8 - 1);
    EXPECT_EQ(sl[1]["n_tokens"].get<int64_t>(), 0);

    const json saved = a.post_ok("/slots/0?action=save", {{"filename", file}});
    ASSERT_TRUE(saved.is_object());
    saved_tokens = saved["n_tokens"];
    saved_kv = saved["n_saved"];
    EXPECT_EQ(saved["id_slot"], 0);
    EXPECT_EQ(saved["filename"], file);
    EXPECT_EQ(saved_tokens, prompt_tokens + 8 - 1);
    EXPECT_EQ(saved_kv, saved_tokens / 16 * 16);  // every full block was still cached
    EXPECT_EQ(saved["n_written"].get<uint64_t>(), fs::file_size(save_dir() / file));
    EXPECT_TRUE(saved["timings"]["save_ms"].is_number());
  }
  RunningServer b(program_path(), slot_options());
  const json restored = b.post_ok("/slots/0?action=restore", {{"filename", file}});
  ASSERT_TRUE(restored.is_object());
  EXPECT_EQ(restored["n_restored"].get<int64_t>(), saved_kv);
  EXPECT_EQ(restored["n_tokens"].get<int64_t>(), saved_tokens);
  EXPECT_EQ(restored["n_read"].get<uint64_t>(), fs::file_size(save_dir() / file));
  EXPECT_EQ(slots(b)[0]["n_tokens"].get<int64_t>(), saved_tokens);

  const json again = completion(b, 8, 0);
  ASSERT_TRUE(again.is_object());
  const int64_t prompt_tokens = again["usage"]["prompt_tokens"];
  // Every full block of the prompt but a last one holding the prompt's final token came back.
  EXPECT_EQ(cached(again), (prompt_tokens - 1) / 16 * 16);
  EXPECT_EQ(again["choices"][0]["text"], first["choices"][0]["text"]);

  const json erased = b.post_ok("/slots/0?action=erase", json::object());
  ASSERT_TRUE(erased.is_object());
  EXPECT_EQ(erased["n_erased"].get<int64_t>(), prompt_tokens + 8 - 1);
  EXPECT_EQ(erased["n_freed"].get<int64_t>(), (prompt_tokens + 8 - 1) / 16 * 16);
  EXPECT_EQ(slots(b)[0]["n_tokens"].get<int64_t>(), 0);
  const json after = completion(b, 8, 0);
  ASSERT_TRUE(after.is_object());
  EXPECT_EQ(cached(after), 0);  // nothing left to reuse
  EXPECT_EQ(after["choices"][0]["text"], first["choices"][0]["text"]);
}

TEST(Slots, AnActionOnABusySlotWaitsForItsRequest) {
  RunningServer s(program_path(), slot_options());
  auto running = std::async(std::launch::async, [&] { return completion(s, 300, 1); });
  // Wait until the request holds slot 1, then ask to save it while it generates.
  bool busy = false;
  for (int i = 0; i < 2000 && !busy; ++i) {
    busy = slots(s)[1]["is_processing"].get<bool>();
    if (!busy) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(busy) << "the request never ran in slot 1";
  const json saved = s.post_ok("/slots/1?action=save", {{"filename", "busy.bin"}});
  const json done = running.get();
  ASSERT_TRUE(saved.is_object());
  ASSERT_TRUE(done.is_object());
  // The save ran after the request: it holds all of its tokens.
  EXPECT_EQ(saved["n_tokens"].get<int64_t>(),
            done["usage"]["prompt_tokens"].get<int64_t>() + done["usage"]["completion_tokens"].get<int64_t>() - 1);
  EXPECT_EQ(slots(s)[0]["n_tokens"].get<int64_t>(), 0);  // id_slot 1 left slot 0 alone
}

TEST(Slots, BadRequestsAreRefusedByName) {
  RunningServer s(program_path(), slot_options());
  EXPECT_NE(refused(s, "/slots/0?action=save", {{"filename", "empty.bin"}}, 400)["message"].get<std::string>().find(
                "holds no tokens"),
            std::string::npos);
  for (const char* name : {"../escape.bin", "a/b.bin", ".hidden", "", "x y", "..", "a\\b"})
    EXPECT_EQ(refused(s, "/slots/0?action=save", {{"filename", name}}, 400)["param"], "filename") << name;
  EXPECT_EQ(refused(s, "/slots/0?action=save", {{"filename", 5}}, 400)["param"], "filename");
  EXPECT_EQ(refused(s, "/slots/0?action=save", json::object(), 400)["param"], "filename");
  EXPECT_EQ(refused(s, "/slots/2?action=erase", json::object(), 400)["param"], "id_slot");
  EXPECT_EQ(refused(s, "/slots/x?action=erase", json::object(), 400)["param"], "id_slot");
  EXPECT_EQ(refused(s, "/slots/0?action=bogus", json::object(), 400)["param"], "action");
  EXPECT_EQ(refused(s, "/slots/0", json::object(), 400)["param"], "action");
  EXPECT_EQ(refused(s, "/slots/0?action=save", {{"filename", "a.bin"}, {"extra", 1}}, 400)["param"], "extra");
  EXPECT_EQ(refused(s, "/slots/0?action=erase", {{"filename", "a.bin"}}, 400)["param"], "filename");
  EXPECT_EQ(refused(s, "/slots/0?action=restore", {{"filename", "no-such-file.bin"}}, 404)["param"], "filename");
  EXPECT_EQ(refused(s, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}, {"id_slot", 2}}, 400)["param"],
            "id_slot");
  EXPECT_EQ(refused(s, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 2}, {"id_slot", "0"}}, 400)["param"],
            "id_slot");

  // A record of this server, damaged: refused, naming the file.
  ASSERT_TRUE(completion(s, 4, 0).is_object());
  ASSERT_TRUE(s.post_ok("/slots/0?action=save", {{"filename", "good.bin"}}).is_object());
  const int64_t held = slots(s)[0]["n_tokens"];
  ASSERT_GT(held, 0);
  {
    std::fstream f(save_dir() / "good.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(save_dir() / "good.bin") / 2));
    f.put('\x5a');
  }
  const json damaged = refused(s, "/slots/0?action=restore", {{"filename", "good.bin"}}, 400);
  EXPECT_NE(damaged["message"].get<std::string>().find("good.bin"), std::string::npos) << damaged;

  // A record of another program (another context: another manifest): refused, naming the program.
  {
    serve::ServerOptions o = slot_options();
    RunningServer other(ptn::testing::export_stories(temp_dir(kScratch), "slots_other", 256), o);
    ASSERT_TRUE(completion(other, 4, 0).is_object());
    ASSERT_TRUE(other.post_ok("/slots/0?action=save", {{"filename", "other.bin"}}).is_object());
  }
  const json foreign = refused(s, "/slots/0?action=restore", {{"filename", "other.bin"}}, 400);
  EXPECT_NE(foreign["message"].get<std::string>().find("program"), std::string::npos) << foreign;
  EXPECT_EQ(slots(s)[0]["n_tokens"].get<int64_t>(), held) << "a refused restore changed the slot";
}

TEST(Slots, SaveAndRestoreNeedASavePathEraseDoesNot) {
  RunningServer s(program_path(), slot_options(/*with_dir=*/false));
  ASSERT_TRUE(completion(s, 4, 0).is_object());
  EXPECT_EQ(refused(s, "/slots/0?action=save", {{"filename", "a.bin"}}, 501)["type"], "not_supported_error");
  EXPECT_EQ(refused(s, "/slots/0?action=restore", {{"filename", "a.bin"}}, 501)["type"], "not_supported_error");
  const json erased = s.post_ok("/slots/0?action=erase", json::object());
  ASSERT_TRUE(erased.is_object());
  EXPECT_GT(erased["n_erased"].get<int64_t>(), 0);
}

TEST(Slots, ASavePathThatIsNoDirectoryIsRefusedAtStart) {
  serve::ServerOptions o = slot_options(false);
  o.slot_save_path = (save_dir() / "no-such-dir").string();
  try {
    RunningServer s(program_path(), o);
    FAIL() << "a missing --slot-save-path directory was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--slot-save-path"), std::string::npos) << e.what();
  }
}

}  // namespace
