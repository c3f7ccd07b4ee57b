// What `-m` names for the commands that run a model (run, chat, serve, perplexity, verify,
// bench): a .ptn program, a GGUF file, an HF directory (config.json + safetensors), or a
// Hugging Face repository id "org/name" found in the local Hugging Face cache (never fetched).
// Anything but a .ptn program is exported in memory first: the weights the program keeps in
// their source type stay views of the mapped source file, so this costs no copy of them.
#pragma once
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "formats/ptn_file.h"
#include "runtime/program.h"

namespace ptn {

enum class ModelInputKind { Ptn, Gguf, HfDirectory };

struct ModelInput {
  ModelInputKind kind = ModelInputKind::Ptn;
  std::string path;  // the file or directory to open (a cache snapshot for "org/name")
  std::string note;  // how an "org/name" was resolved, "" otherwise
};

// The Hugging Face hub cache folders looked in, in order: $HF_HUB_CACHE, $HF_HOME/hub,
// $XDG_CACHE_HOME/huggingface/hub, $HOME/.cache/huggingface/hub (each once, when set).
std::vector<std::string> hf_hub_cache_dirs();

// Resolves `arg`: an existing path is classified by its content (a directory must hold
// config.json); otherwise "org/name" or "org/name:TAG" (TAG picks the GGUF whose file name holds
// it, as in "org/name:Q4_K_M") is looked up in hf_hub_cache_dirs(). Throws InvalidArgument naming
// the argument and, for a repository id, every folder looked in.
ModelInput resolve_model_input(const std::string& arg, const std::string& flag = "--model");

struct OpenModelOptions {
  std::string flag = "--model";  // named in errors
  VerifyLevel verify = VerifyLevel::Cheap;  // for .ptn files
  int64_t max_seq_length = 512;  // prefill chunk of a program exported in memory
  int samples = 0;               // golden samples computed for it (verify wants some)
};

// The program for `arg` (resolve_model_input, then load or export in memory). The export's
// log (source, model, op report) goes to `log`.
std::shared_ptr<const Program> open_model(const std::string& arg, const OpenModelOptions& o, std::ostream& log);

}  // namespace ptn
