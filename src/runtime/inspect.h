// `ptn inspect FILE.ptn`: header, provenance, hyper-parameters, cache spec, op histogram,
// weight bytes by dtype, tokenizer and golden-sample summary.
#pragma once
#include <string>

namespace ptn {

// Prints to stdout; returns the process exit code. Throws ptn::Error for unreadable files.
int inspect_ptn_file(const std::string& path);
// True when the file starts with the .ptn magic.
bool is_ptn_file(const std::string& path);

}  // namespace ptn
