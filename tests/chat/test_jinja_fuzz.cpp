// Robustness: real chat templates with random byte edits (deletions, insertions of Jinja
// punctuation, duplications, truncations) and random token soup must render or throw
// ptn::Error; nothing else (no other exception type, no crash, no hang).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "chat/chat_template.h"
#include "core/error.h"

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

// PTN_CHAT_FUZZ_SCALE=N multiplies the iteration counts (default 1, for CI).
int scale() {
  const char* s = std::getenv("PTN_CHAT_FUZZ_SCALE");
  int v = s ? std::atoi(s) : 1;
  return v > 0 ? v : 1;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const char* kPieces[] = {"{%", "%}", "{{", "}}", "{#", "#}", "-", "(", ")", "[", "]", "{", "}", "'", "\"", "\\",
                         "|", ".", ",", ":", "=", "==", " if ", " else ", " for ", " in ", " not ", " is ",
                         "endif", "endfor", "macro", "set", "loop", "messages", "0", "-1", "**", "//", "~", "\n",
                         " ", "caller()", "namespace()", "range(9)", "tojson", "|length", "[::-1]", "\xc3\xa9", "\xff"};

// Renders and classifies: 0 rendered, 1 ptn::Error; any other exception fails the test.
int try_render(const std::string& src, const ojson& messages, const ptn::chat::ChatOptions& opts, const std::string& label) {
  try {
    ptn::chat::render_chat(src, messages, opts);
    return 0;
  } catch (const ptn::Error&) {
    return 1;
  } catch (const std::exception& e) {
    ADD_FAILURE() << label << ": non-ptn exception " << e.what() << "\n--- template ---\n" << src;
    return 2;
  }
}

TEST(JinjaFuzz, MutatedRealTemplatesOnlyThrowPtnErrors) {
  const fs::path dir = fs::path(PTN_TEST_DATA) / "chat";
  ojson set = ojson::parse(read_file(dir / "messages" / "agent_step.json"));
  ojson templates = ojson::parse(read_file(dir / "templates.json"));
  ptn::chat::ChatOptions opts;
  opts.tools = set["tools"];
  opts.extra = set["extra"];
  opts.add_generation_prompt = true;
  opts.limits.max_loop_iterations = 20000;  // keep mutated loops fast
  opts.limits.max_output_bytes = 1 << 20;
  std::mt19937 rng(12345);
  int rendered = 0, errors = 0, iterations = 0;
  auto start = std::chrono::steady_clock::now();
  for (auto it = templates.begin(); it != templates.end(); ++it) {
    std::string base = read_file(dir / it.value()["file"].get<std::string>());
    for (int round = 0; round < 150 * scale(); ++round) {
      std::string s = base;
      int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !s.empty(); ++e) {
        size_t pos = rng() % s.size();
        switch (rng() % 5) {
          case 0: s.erase(pos, 1 + rng() % 8); break;
          case 1: s.insert(pos, kPieces[rng() % (sizeof(kPieces) / sizeof(*kPieces))]); break;
          case 2: s.insert(pos, s.substr(rng() % s.size(), rng() % 40)); break;
          case 3: s.resize(pos); break;
          case 4: s[pos] = static_cast<char>(rng() % 256); break;
        }
      }
      int r = try_render(s, set["messages"], opts, it.key() + " round " + std::to_string(round));
      (r == 0 ? rendered : errors) += 1;
      ++iterations;
      if (r == 2) return;
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%d mutated templates: %d rendered, %d ptn::Error, %.2f s\n", iterations, rendered, errors, secs);
  EXPECT_GT(rendered, 0);
  EXPECT_GT(errors, 0);
}

TEST(JinjaFuzz, TokenSoupOnlyThrowsPtnErrors) {
  std::mt19937 rng(777);
  ptn::chat::ChatOptions opts;
  opts.limits.max_loop_iterations = 20000;
  opts.limits.max_output_bytes = 1 << 20;
  ojson messages = ojson::parse(R"([{"role": "user", "content": "hi"}])");
  for (int i = 0; i < 3000 * scale(); ++i) {
    std::string s;
    int n = 1 + static_cast<int>(rng() % 30);
    for (int k = 0; k < n; ++k) s += kPieces[rng() % (sizeof(kPieces) / sizeof(*kPieces))];
    if (try_render(s, messages, opts, "soup " + std::to_string(i)) == 2) return;
  }
}

}  // namespace
