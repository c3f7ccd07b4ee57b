// The pooling an embedding model declares in its Hugging Face directory: sentence-transformers
// lists its modules in `modules.json`, and the Pooling module's `config.json` (for example
// `1_Pooling/config.json`) says which of its modes is on. ptn records it in the program
// (ProgramMeta::embedding) so that `ptn serve` pools as the model was trained to.
#pragma once
#include <string>

#include "runtime/manifest.h"

namespace ptn {

// "last", "mean" or "cls" as the directory's sentence-transformers files say; "" when the
// directory has no modules.json (or no Pooling module). Throws Unsupported naming the file and
// the mode for a pooling ptn cannot compute (max, weighted mean, sqrt-length mean, several at
// once), and Corrupt naming the file and field for malformed files.
std::string read_pooling_config(const std::string& hf_dir);

// The program's EmbeddingInfo from the directory: the pooling above, and the Matryoshka claim of
// its config.json (`is_matryoshka: true`, or a `matryoshka_dimensions` list of sizes in
// 1..hidden_size, as vLLM reads them). Malformed values are Corrupt naming the key.
EmbeddingInfo read_embedding_info(const std::string& hf_dir, int64_t hidden_size);

}  // namespace ptn
