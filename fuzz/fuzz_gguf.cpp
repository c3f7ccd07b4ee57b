// GGUF: header, metadata and tensor table (GgufFile), the first row of every tensor decoded from
// its blocks, then the model and tokenizer specs read from that metadata. Any input must either load or throw ptn::Error.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/quant.h"
#include "formats/gguf.h"
#include "formats/gguf_spec.h"
#include "fuzz_common.h"

namespace ptn::fuzz {

// 1 if the input was accepted all the way, 0 if a stage rejected it with a documented error.
int run_gguf(const uint8_t* data, size_t size) {
  static const std::string path = ptn::fuzz::scratch_dir() + "/input.gguf";
  ptn::fuzz::write_file(path, data, size);
  std::shared_ptr<ptn::GgufFile> g;
  try {
    g = ptn::GgufFile::open(path);
  } catch (const ptn::Error&) {
    return 0;
  }
  // Everything the readers expose on a loaded file must also be safe.
  for (const auto& [key, value] : g->metadata()) (void)value.describe();
  // Block decoding: the first row (at most 4096 elements) of every tensor whose type reads as
  // floats; any bytes must decode (f16 scales may be inf or NaN) without a crash.
  std::vector<float> row;
  for (const auto& t : g->tensors()) {
    try {
      const ptn::Tensor v = g->tensor(t.name);
      if (!ptn::can_dequantize(v.dtype()) || v.numel() == 0 || v.row_size() > 4096) continue;
      row.resize(static_cast<size_t>(v.row_size()));
      ptn::dequantize_row(v.dtype(), v.row_ptr(0), row.data(), v.row_size());
    } catch (const ptn::Error&) {
    }
  }
  int ok = 1;
  try {
    (void)ptn::model_spec_from_gguf(*g);
  } catch (const ptn::Error&) {
    ok = 0;
  }
  try {
    if (ptn::gguf_has_tokenizer(*g)) (void)ptn::tokenizer_spec_from_gguf(*g);
  } catch (const ptn::Error&) {
    ok = 0;
  }
  return ok;
}

}  // namespace ptn::fuzz

PTN_FUZZ_ENTRY(run_gguf)
