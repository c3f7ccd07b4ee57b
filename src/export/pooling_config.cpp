#include "export/pooling_config.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "core/file.h"

namespace ptn {

namespace {

using json = nlohmann::json;

constexpr size_t kMaxConfigBytes = 1u << 20;  // these files are a few hundred bytes

json read_json(const std::string& path) {
  const std::string text = read_text_file(path, kMaxConfigBytes);
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) fail(ErrorKind::Corrupt, path, "is not valid JSON");
  return j;
}

// A module path is relative and stays inside the model directory.
bool safe_relative(const std::string& p) {
  if (p.empty() || p.size() > 256 || p[0] == '/') return false;
  size_t start = 0;
  for (;;) {
    const size_t slash = p.find('/', start);
    const std::string part = p.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part == ".." || part.empty()) return false;
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

}  // namespace

std::string read_pooling_config(const std::string& hf_dir) {
  if (hf_dir.empty()) return "";
  const std::string modules_path = hf_dir + "/modules.json";
  if (!file_exists(modules_path)) return "";
  const json modules = read_json(modules_path);
  if (!modules.is_array() || modules.size() > 64)
    fail(ErrorKind::Corrupt, modules_path, "must be an array of at most 64 modules");
  std::string pooling_dir;
  for (size_t i = 0; i < modules.size(); ++i) {
    const json& m = modules[i];
    const std::string where = modules_path + ": [" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("type") || !m["type"].is_string())
      fail(ErrorKind::Corrupt, where, "needs a string 'type'");
    const std::string type = m["type"].get<std::string>();
    if (type.size() < 8 || type.compare(type.size() - 8, 8, ".Pooling") != 0) continue;
    if (!m.contains("path") || !m["path"].is_string() || !safe_relative(m["path"].get<std::string>()))
      fail(ErrorKind::Corrupt, where + ".path", "must be a relative path inside the model directory");
    if (!pooling_dir.empty()) fail(ErrorKind::Unsupported, where, "a second Pooling module");
    pooling_dir = m["path"].get<std::string>();
  }
  if (pooling_dir.empty()) return "";
  const std::string cfg_path = hf_dir + "/" + pooling_dir + "/config.json";
  if (!file_exists(cfg_path)) fail(ErrorKind::Corrupt, cfg_path, "missing (modules.json names a Pooling module there)");
  const json cfg = read_json(cfg_path);
  if (!cfg.is_object()) fail(ErrorKind::Corrupt, cfg_path, "is not an object");
  struct Mode {
    const char* key;
    const char* ptn;  // nullptr: a mode ptn does not compute
  };
  static const Mode modes[] = {{"pooling_mode_lasttoken", "last"},       {"pooling_mode_mean_tokens", "mean"},
                               {"pooling_mode_cls_token", "cls"},        {"pooling_mode_max_tokens", nullptr},
                               {"pooling_mode_mean_sqrt_len_tokens", nullptr}, {"pooling_mode_weightedmean_tokens", nullptr}};
  std::vector<std::string> on;
  std::string result;
  for (const Mode& m : modes) {
    if (!cfg.contains(m.key) || cfg[m.key].is_null()) continue;
    if (!cfg[m.key].is_boolean()) fail(ErrorKind::Corrupt, cfg_path + ": '" + m.key + "'", "must be a boolean");
    if (!cfg[m.key].get<bool>()) continue;
    on.push_back(m.key);
    if (!m.ptn) fail(ErrorKind::Unsupported, cfg_path + ": '" + m.key + "'", "ptn pools by last token, mean or cls only");
    result = m.ptn;
  }
  if (on.size() > 1)
    fail(ErrorKind::Unsupported, cfg_path, "several pooling modes at once (" + on[0] + ", " + on[1] + "); ptn computes one");
  if (on.empty()) fail(ErrorKind::Corrupt, cfg_path, "names no pooling mode");
  return result;
}

EmbeddingInfo read_embedding_info(const std::string& hf_dir, int64_t hidden_size) {
  EmbeddingInfo info;
  info.pooling = read_pooling_config(hf_dir);
  const std::string cfg_path = hf_dir + "/config.json";
  if (hf_dir.empty() || !file_exists(cfg_path)) return info;
  const json cfg = read_json(cfg_path);
  if (!cfg.is_object()) return info;  // the config reader has refused it already
  if (cfg.contains("is_matryoshka") && !cfg["is_matryoshka"].is_null()) {
    if (!cfg["is_matryoshka"].is_boolean()) fail(ErrorKind::Corrupt, cfg_path + ": 'is_matryoshka'", "must be a boolean");
    info.matryoshka = cfg["is_matryoshka"].get<bool>();
  }
  if (cfg.contains("matryoshka_dimensions") && !cfg["matryoshka_dimensions"].is_null()) {
    const json& d = cfg["matryoshka_dimensions"];
    const std::string where = cfg_path + ": 'matryoshka_dimensions'";
    if (!d.is_array() || d.empty() || d.size() > 64) fail(ErrorKind::Corrupt, where, "must be an array of 1..64 sizes");
    for (size_t i = 0; i < d.size(); ++i) {
      if (!d[i].is_number_integer() || d[i].get<int64_t>() < 1 || d[i].get<int64_t>() > hidden_size)
        fail(ErrorKind::Corrupt, where + "[" + std::to_string(i) + "]",
             "must be an integer in 1.." + std::to_string(hidden_size) + " (the hidden size)");
      info.matryoshka_dimensions.push_back(d[i].get<int64_t>());
    }
    info.matryoshka = true;
  }
  return info;
}

}  // namespace ptn
