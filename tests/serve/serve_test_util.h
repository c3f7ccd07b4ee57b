// Helpers of the serve tests: a per-process scratch directory and stories260K exported from
// the bundled Hugging Face files, as is or with one of its JSON files edited.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/file.h"
#include "export/exporter.h"
#include "serve/api.h"
#include "serve/protocol.h"

namespace ptn::testing {

// <system temp dir>/<prefix><pid>, created if missing: one scratch directory per test process,
// the same path on every call. The suite removes it when it ends.
inline std::filesystem::path temp_dir(const std::string& prefix) {
  const std::filesystem::path d = std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

// The bundled stories260K Hugging Face directory.
inline std::filesystem::path stories_hf_dir() {
  return std::filesystem::path(PTN_SOURCE_DIR) / "models/stories260K/hf";
}

// Exports the Hugging Face model in hf_dir to <out_dir>/<name>.ptn with one golden sample and
// max_seq_length 64 (the export log is dropped); returns the .ptn path.
inline std::string export_hf(const std::filesystem::path& hf_dir, const std::filesystem::path& out_dir,
                             const std::string& name) {
  ExportOptions o;
  o.model = hf_dir.string();
  o.max_seq_length = 64;
  o.samples = 1;
  o.output = (out_dir / (name + ".ptn")).string();
  std::ostringstream log;
  export_program(o, log);
  return o.output;
}

// Copies the stories260K Hugging Face files into dst (created), with `edit` applied to the JSON
// file named `edited` ("config.json" or "tokenizer_config.json"); the other files as they are.
inline void copy_stories_hf(const std::filesystem::path& dst, const std::string& edited,
                            const std::function<void(nlohmann::json&)>& edit) {
  const std::filesystem::path src = stories_hf_dir();
  std::filesystem::create_directories(dst);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}) {
    if (f == edited) continue;
    std::filesystem::copy_file(src / f, dst / f, std::filesystem::copy_options::overwrite_existing);
  }
  nlohmann::json j = nlohmann::json::parse(std::ifstream(src / edited));
  edit(j);
  std::ofstream(dst / edited) << j.dump(1);
}

// stories260K with its config's max_position_embeddings set to `context` (RoPE takes any
// position, so the model runs at any context), exported to <dir>/<name>.ptn from the edited
// copy in <dir>/<name>_hf; returns the .ptn path.
inline std::string export_stories(const std::filesystem::path& dir, const std::string& name, int64_t context) {
  const std::filesystem::path hf = dir / (name + "_hf");
  copy_stories_hf(hf, "config.json", [&](nlohmann::json& cfg) { cfg["max_position_embeddings"] = context; });
  return export_hf(hf, dir, name);
}

// Qwen 3's chat template (tests/data/chat/templates/), which knows tools and think sections.
inline std::string qwen3_template() {
  return read_text_file(std::string(PTN_TEST_DATA) + "/chat/templates/Qwen-Qwen3.jinja", 1 << 20);
}

// The param of the ApiError (status 400, its message naming the param) that `p` raises for
// `body`; a test failure and "" when the body is accepted.
inline std::string refused_param(serve::Protocol& p, const std::string& body) {
  try {
    p.translate(body);
  } catch (const serve::ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_NE(std::string(e.what()).find(e.param), std::string::npos) << e.what();
    return e.param;
  }
  ADD_FAILURE() << "accepted: " << body;
  return "";
}

}  // namespace ptn::testing
