// Real chat templates (Llama 3 / 3.1 / 3.2, Qwen 2.5 / 3, Gemma 3, Mistral Nemo, Phi-3 / 3.5,
// SmolLM3, gpt-oss) and one-construct engine cases, rendered by ptn and compared byte for byte with the
// renders of @huggingface/jinja stored in tests/data/chat/expected (made by
// tests/js/render_templates.mjs). An expected NAME.error.txt means the reference threw: ptn
// must throw too, with that message in its error.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "chat/chat_template.h"
#include "core/error.h"

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

const fs::path kData = fs::path(PTN_TEST_DATA) / "chat";

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + p.string());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

ojson read_json(const fs::path& p) { return ojson::parse(read_file(p)); }

struct Outcome {
  bool threw = false;
  std::string text;
};

// render_templates.mjs renders with today fixed to this day; ptn prints the real day.
constexpr const char* kFixedDay = "2026-12-03";

std::string with_fixed_day(std::string text) {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char today[16];
  std::strftime(today, sizeof today, "%Y-%m-%d", &tm);
  const std::string from = std::string("Current date: ") + today, to = std::string("Current date: ") + kFixedDay;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

void expect_matches(const std::string& name, const Outcome& raw) {
  const Outcome got{raw.threw, with_fixed_day(raw.text)};
  fs::path ok = kData / "expected" / (name + ".txt");
  fs::path bad = kData / "expected" / (name + ".error.txt");
  if (fs::exists(bad)) {
    ASSERT_TRUE(got.threw) << name << ": the reference threw \"" << read_file(bad) << "\" but ptn rendered:\n" << got.text;
    EXPECT_NE(got.text.find(read_file(bad)), std::string::npos) << name << ": error was " << got.text;
    return;
  }
  ASSERT_TRUE(fs::exists(ok)) << "missing fixture " << ok;
  ASSERT_FALSE(got.threw) << name << ": " << got.text;
  EXPECT_EQ(got.text, read_file(ok)) << name;
}

TEST(ChatTemplates, RealTemplatesMatchHuggingFaceJinja) {
  ojson templates = read_json(kData / "templates.json");
  std::vector<fs::path> sets;
  for (auto& e : fs::directory_iterator(kData / "messages"))
    if (e.path().extension() == ".json") sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  ASSERT_GE(sets.size(), 4u);
  int compared = 0;
  for (auto it = templates.begin(); it != templates.end(); ++it) {
    std::string source = read_file(kData / it.value()["file"].get<std::string>());
    for (auto& set_path : sets) {
      ojson set = read_json(set_path);
      for (bool gen : {false, true}) {
        ptn::chat::ChatOptions opts;
        opts.add_generation_prompt = gen;
        opts.bos_token = it.value()["bos_token"].get<std::string>();
        opts.eos_token = it.value()["eos_token"].get<std::string>();
        if (set.contains("tools")) opts.tools = set["tools"];
        if (set.contains("extra")) opts.extra = set["extra"];
        std::string name = it.key() + "__" + set_path.stem().string() + "__gen" + (gen ? "1" : "0");
        Outcome got;
        try {
          got.text = ptn::chat::render_chat(source, set["messages"], opts);
        } catch (const ptn::Error& e) {
          got.threw = true;
          got.text = e.what();
        }
        expect_matches(name, got);
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, static_cast<int>(templates.size() * sets.size() * 2));
}

TEST(ChatTemplates, EngineCasesMatchHuggingFaceJinja) {
  ojson cases = read_json(kData / "engine_cases.json");
  ASSERT_GE(cases.size(), 30u);
  for (auto& c : cases) {
    std::string name = "engine__" + c["name"].get<std::string>();
    Outcome got;
    try {
      ptn::jinja::Template t(c["template"].get<std::string>());
      got.text = t.render(c["context"]);
    } catch (const ptn::Error& e) {
      got.threw = true;
      got.text = e.what();
    }
    expect_matches(name, got);
  }
}

TEST(ChatTemplates, TokenizerConfigVariants) {
  ojson cfg = ojson::parse(R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ bos_token }}"}],
                              "bos_token": {"content": "<s>", "lstrip": false}, "eos_token": null})");
  auto info = ptn::chat::read_tokenizer_config(cfg, "cfg.json");
  EXPECT_EQ(info.chat_template, "D{{ bos_token }}");
  EXPECT_EQ(info.bos_token, "<s>");
  EXPECT_EQ(info.eos_token, "");
  EXPECT_EQ(ptn::chat::read_tokenizer_config(cfg, "cfg.json", "tool_use").chat_template, "T");
  EXPECT_THROW(ptn::chat::read_tokenizer_config(cfg, "cfg.json", "rag"), ptn::Error);
  EXPECT_THROW(ptn::chat::read_tokenizer_config(ojson::parse(R"({"chat_template": 3})"), "x"), ptn::Error);
  EXPECT_THROW(ptn::chat::read_tokenizer_config(ojson::parse(R"({"bos_token": "<s>"})"), "x"), ptn::Error);
  EXPECT_THROW(ptn::chat::read_tokenizer_config(ojson::parse(R"({"chat_template": "x", "bos_token": 5})"), "x"), ptn::Error);
}

// Message contents may hold bytes that are not UTF-8 (ptn chat replaces them on entry, other
// callers need not): a render passes them through unchanged and never throws, also through
// the filters that walk characters; each ill-formed byte counts as one character.
TEST(ChatTemplates, InvalidUtf8ContentRendersWithoutThrowing) {
  const std::string bad = std::string("a\xff") + "b\xe2\x82";  // a, FF, b, E2 82 (a cut-off sequence)
  const ojson messages = ojson::array({{{"role", "user"}, {"content", bad}}});
  const ptn::chat::ChatOptions o;
  using ptn::chat::render_chat;
  EXPECT_EQ(render_chat("{% for m in messages %}[{{ m.content }}]{% endfor %}", messages, o), "[" + bad + "]");
  EXPECT_EQ(render_chat("{{ messages[0].content | length }}", messages, o), "5");
  EXPECT_EQ(render_chat("{{ messages[0].content | list | length }}", messages, o), "5");
  EXPECT_EQ(render_chat("{{ (' ' + messages[0].content + ' ') | trim }}", messages, o), bad);
  EXPECT_NO_THROW(render_chat("{{ messages[0].content | upper }}{{ messages[0].content[1] }}", messages, o));
  // tojson (ensure_ascii off, as transformers calls it) copies the bytes into the string too
  EXPECT_EQ(render_chat("{{ messages | tojson }}", messages, o), R"([{"role": "user", "content": ")" + bad + R"("}])");
}

}  // namespace
