// .ptn programs: PtnFile::from_memory at both verify levels, the manifest's meaning
// (meta_from_json), then the Executor's constructor, which checks every graph node against its
// weights and plans the arena. Any input must either load or throw ptn::Error.
// The container CRCs its manifest, so a mutated file rarely gets past PtnFile. An input that
// starts with '{' is therefore taken as a manifest (the container keys removed, as
// PtnFile::manifest() returns it) and paired with the tensors of the committed seed program
// fuzz/corpus/ptn/llama-micro.ptn: that drives meta_from_json and the Executor checks directly.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <cstdint>
#include <map>
#include <vector>

#include "core/error.h"
#include "formats/ptn_file.h"
#include "runtime/executor.h"
#include "runtime/manifest.h"
#include "runtime/program.h"
#include "fuzz_common.h"

namespace {

// Executor plans activation memory for the largest step; a manifest may claim a huge model.
// Programs beyond these bounds are still parsed and checked, only not planned.
bool small_enough(const ptn::ModelSpec& s) {
  return s.vocab_size <= (1 << 16) && s.hidden_size <= 4096 && s.intermediate_size <= 16384 &&
         s.n_layers <= 64 && s.n_heads * s.head_dim <= 8192 && s.n_kv_heads * s.head_dim <= 8192;
}

// The tensors of the seed program, loaded once.
const std::map<std::string, ptn::Tensor>& seed_tensors() {
  static const auto tensors = [] {
    auto file = ptn::PtnFile::open(std::string(PTN_SOURCE_DIR) + "/fuzz/corpus/ptn/llama-micro.ptn",
                                   ptn::VerifyLevel::Full);
    std::map<std::string, ptn::Tensor> t;
    for (const auto& n : file->tensor_names()) t.emplace(n, file->tensor(n));
    return t;
  }();
  return tensors;
}

// meta_from_json, then an Executor when the model is of a size the harness plans.
int check_program(const nlohmann::json& manifest, std::map<std::string, ptn::Tensor> tensors) {
  ptn::ProgramMeta meta;
  try {
    meta = ptn::meta_from_json(manifest, tensors, "fuzz.ptn");
  } catch (const ptn::Error&) {
    return 0;
  }
  if (!small_enough(meta.spec)) return 0;
  auto program = ptn::Program::from_memory(std::move(meta), std::move(tensors), "fuzz.ptn");
  try {
    ptn::Executor exec(program, ptn::ExecMode::Reference, /*max_rows=*/4);
  } catch (const ptn::Error&) {
    return 0;
  }
  return 1;
}

}  // namespace

namespace ptn::fuzz {

// 1 if the input was accepted all the way, 0 if a stage rejected it with a documented error.
int run_ptn(const uint8_t* data, size_t size) {
  if (size > 0 && data[0] == '{') {
    nlohmann::json manifest = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
    if (manifest.is_discarded()) return 0;
    return check_program(manifest, seed_tensors());
  }
  std::vector<uint8_t> bytes(data, data + size);
  int ok = 1;
  try {
    (void)ptn::PtnFile::from_memory(bytes, "fuzz.ptn", ptn::VerifyLevel::Full);
  } catch (const ptn::Error&) {
    ok = 0;
  }
  std::shared_ptr<ptn::PtnFile> file;
  try {
    file = ptn::PtnFile::from_memory(std::move(bytes), "fuzz.ptn", ptn::VerifyLevel::Cheap);
  } catch (const ptn::Error&) {
    return 0;
  }
  std::map<std::string, ptn::Tensor> tensors;
  try {
    for (const auto& n : file->tensor_names()) tensors.emplace(n, file->tensor(n));
  } catch (const ptn::Error&) {
    return 0;
  }
  if (!check_program(file->manifest(), std::move(tensors))) return 0;
  return ok;
}

}  // namespace ptn::fuzz

PTN_FUZZ_ENTRY(run_ptn)
