#include "export/model_input.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <system_error>

#include "core/error.h"
#include "core/file.h"
#include "export/exporter.h"
#include "formats/ptn_file.h"

namespace ptn {
namespace {

namespace fs = std::filesystem;

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : std::string();
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "org/name" as the hub spells repository ids: two non-empty parts of letters, digits, '-', '_'
// and '.', neither "." nor "..".
bool is_repo_id(const std::string& id) {
  const size_t slash = id.find('/');
  if (slash == std::string::npos || id.find('/', slash + 1) != std::string::npos) return false;
  const std::string a = id.substr(0, slash), b = id.substr(slash + 1);
  auto ok = [](const std::string& p) {
    if (p.empty() || p.size() > 96 || p == "." || p == "..") return false;
    return std::all_of(p.begin(), p.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    });
  };
  return ok(a) && ok(b);
}

// The snapshot folder of a cached repository: the commit refs/main names, else the only one.
std::string snapshot_of(const std::string& repo_dir, const std::string& arg) {
  const std::string refs = repo_dir + "/refs/main";
  if (file_exists(refs)) {
    std::string rev = read_text_file(refs, 256);
    while (!rev.empty() && std::isspace(static_cast<unsigned char>(rev.back()))) rev.pop_back();
    const std::string snap = repo_dir + "/snapshots/" + rev;
    if (!rev.empty() && rev.find('/') == std::string::npos && is_directory(snap)) return snap;
  }
  std::vector<std::string> snaps;
  std::error_code ec;
  for (fs::directory_iterator it(repo_dir + "/snapshots", ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) snaps.push_back(it->path().string());
  if (snaps.size() == 1) return snaps[0];
  fail(ErrorKind::InvalidArgument, arg,
       snaps.empty() ? "the Hugging Face cache folder " + repo_dir + " holds no snapshot"
                     : "the Hugging Face cache folder " + repo_dir + " holds " + std::to_string(snaps.size()) +
                           " snapshots and no refs/main: give the snapshot's path");
}

// What a snapshot offers: an HF directory (config.json), or a GGUF picked by `tag`.
ModelInput pick_in_snapshot(const std::string& snap, const std::string& tag, const std::string& arg) {
  std::vector<std::string> ggufs;
  std::error_code ec;
  for (fs::directory_iterator it(snap, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > 5 && lower(name.substr(name.size() - 5)) == ".gguf") ggufs.push_back(name);
  }
  std::sort(ggufs.begin(), ggufs.end());
  if (tag.empty() && file_exists(snap + "/config.json") && file_exists(snap + "/model.safetensors"))
    return {ModelInputKind::HfDirectory, snap, arg + " -> " + snap};
  if (tag.empty() && file_exists(snap + "/config.json") && ggufs.empty())
    return {ModelInputKind::HfDirectory, snap, arg + " -> " + snap};
  std::vector<std::string> match;
  for (const auto& g : ggufs)
    if (tag.empty() || lower(g).find(lower(tag)) != std::string::npos) match.push_back(g);
  if (match.size() == 1) return {ModelInputKind::Gguf, snap + "/" + match[0], arg + " -> " + snap + "/" + match[0]};
  std::string list;
  for (const auto& g : ggufs) list += (list.empty() ? "" : ", ") + g;
  if (ggufs.empty())
    fail(ErrorKind::InvalidArgument, arg, "the cached snapshot " + snap + " has no config.json and no .gguf file");
  fail(ErrorKind::InvalidArgument, arg,
       (match.empty() ? "no GGUF file of the cached snapshot matches '" + tag + "'"
                      : std::string("the cached snapshot holds several GGUF files")) +
           ": name one as " + arg.substr(0, arg.find(':')) + ":TAG (files: " + list + ")");
}

ModelInputKind kind_of_path(const std::string& path, const std::string& flag) {
  if (is_directory(path)) {
    if (!file_exists(path + "/config.json"))
      fail(ErrorKind::InvalidArgument, flag,
           "'" + path + "' is a directory without config.json (not an HF model directory)");
    return ModelInputKind::HfDirectory;
  }
  // One read of the first bytes tells a GGUF file from a program.
  char magic[8] = {};
  size_t n = 0;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    n = std::fread(magic, 1, sizeof magic, f);
    std::fclose(f);
  }
  if (n >= 4 && std::memcmp(magic, "GGUF", 4) == 0) return ModelInputKind::Gguf;
  if (has_ptn_magic(magic, n)) return ModelInputKind::Ptn;
  const fs::path p(path);
  if (p.filename() == "config.json")
    fail(ErrorKind::InvalidArgument, flag,
         "'" + path + "' is a config alone: give the directory that holds it with its safetensors, or make a program "
         "with `ptn export -m " + path + " --random-weights` (or --gguf FILE for the weights)");
  // Loading names what is wrong with the file (empty, truncated, other magic).
  return ModelInputKind::Ptn;
}

}  // namespace

std::vector<std::string> hf_hub_cache_dirs() {
  std::vector<std::string> dirs;
  auto add = [&](const std::string& d) {
    if (!d.empty() && std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
  };
  add(env_or_empty("HF_HUB_CACHE"));
  if (const std::string h = env_or_empty("HF_HOME"); !h.empty()) add(h + "/hub");
  if (const std::string x = env_or_empty("XDG_CACHE_HOME"); !x.empty()) add(x + "/huggingface/hub");
  if (const std::string home = env_or_empty("HOME"); !home.empty()) add(home + "/.cache/huggingface/hub");
  return dirs;
}

ModelInput resolve_model_input(const std::string& arg, const std::string& flag) {
  if (arg.empty()) fail(ErrorKind::InvalidArgument, flag, "is empty");
  if (file_exists(arg) || is_directory(arg)) return {kind_of_path(arg, flag), arg, ""};
  const size_t colon = arg.find(':');
  const std::string id = arg.substr(0, colon);
  const std::string tag = colon == std::string::npos ? "" : arg.substr(colon + 1);
  if (!is_repo_id(id) || (colon != std::string::npos && tag.empty()))
    fail(ErrorKind::Io, arg, "no such file or directory");
  const std::string entry = "models--" + id.substr(0, id.find('/')) + "--" + id.substr(id.find('/') + 1);
  const std::vector<std::string> dirs = hf_hub_cache_dirs();
  for (const auto& d : dirs)
    if (is_directory(d + "/" + entry)) return pick_in_snapshot(snapshot_of(d + "/" + entry, arg), tag, arg);
  std::string looked;
  for (const auto& d : dirs) looked += (looked.empty() ? "" : ", ") + d;
  fail(ErrorKind::InvalidArgument, arg,
       "no such file or directory, and no Hugging Face cache entry " + entry + " in " +
           (looked.empty() ? std::string("(no cache folder: HF_HUB_CACHE, HF_HOME and HOME are unset)") : looked) +
           "; ptn does not download models: fetch it first (e.g. `hf download " + id + "`)");
}

std::shared_ptr<const Program> open_model(const std::string& arg, const OpenModelOptions& o, std::ostream& log) {
  const ModelInput in = resolve_model_input(arg, o.flag);
  if (!in.note.empty()) log << "model: " << in.note << "\n";
  if (in.kind == ModelInputKind::Ptn) return Program::load(in.path, o.verify);
  ExportOptions eo;
  eo.model = in.path;
  eo.samples = o.samples;
  eo.max_seq_length = o.max_seq_length;
  eo.output = in.path;  // the program's name in messages
  eo.command_line = "in memory from " + in.path;
  eo.progress = isatty(2) != 0;  // a bar on a terminal; no lines in a log
  return export_in_memory(eo, log);
}

}  // namespace ptn
