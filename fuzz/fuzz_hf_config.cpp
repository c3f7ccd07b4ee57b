// config.json -> ModelSpec on arbitrary text. Malformed JSON is nlohmann's parse_error, which
// the CLI turns into an error too; the parser proper must throw only ptn::Error.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/hf_config.h"
#include "fuzz_common.h"

namespace ptn::fuzz {

// 1 if the input was accepted all the way, 0 if a stage rejected it with a documented error.
int run_hf_config(const uint8_t* data, size_t size) {
  nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  try {
    (void)ptn::model_spec_from_hf_config(j, "fuzz/config.json");
  } catch (const ptn::Error&) {
    return 0;
  }
  return 1;
}

}  // namespace ptn::fuzz

PTN_FUZZ_ENTRY(run_hf_config)
