// The NumPy oracle tests/oracle/hf_forward.py as the tests call it: the interpreter that has
// numpy, and one forward pass of an HF directory (logits, and the final hidden states).
#pragma once
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace ptn::testing {

inline bool command_runs(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

// A python3 that imports numpy: $PTN_PYTHON, python3 on PATH, or Debian's own interpreter (the
// one Debian's python3-numpy, installed by `make deps`, serves) when PATH leads elsewhere.
inline std::string python_with_numpy(std::string* tried) {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("PTN_PYTHON")) candidates.push_back(p);
  candidates.push_back("python3");
  candidates.push_back("/usr/bin/python3");
  for (const std::string& c : candidates) {
    *tried += (tried->empty() ? "" : ", ") + c;
    if (command_runs(c + " -c 'import numpy'")) return c;
  }
  return "";
}

// Reads `count` float64 values from `path`; false unless the file holds exactly that many.
inline bool read_f64(const std::string& path, size_t count, std::vector<double>* out) {
  std::ifstream f(path, std::ios::binary);
  out->assign(count, 0.0);
  f.read(reinterpret_cast<char*>(out->data()), static_cast<std::streamsize>(count * sizeof(double)));
  return f.good() && f.peek() == EOF;
}

// Runs the oracle on `dir` for `ids` (one sequence from position 0), writing the logits to
// `logits_out` and, when `hidden_out` is not empty, the final hidden states there. The command
// on failure, else "".
inline std::string run_oracle(const std::string& python, const std::string& dir, const std::vector<int32_t>& ids,
                              const std::string& logits_out, const std::string& hidden_out = "") {
  std::string list;
  for (int32_t t : ids) list += (list.empty() ? "" : ",") + std::to_string(t);
  const std::string script = std::string(PTN_SOURCE_DIR) + "/tests/oracle/hf_forward.py";
  const std::string cmd = python + " " + script + " " + dir + " " + list + " " + logits_out +
                          (hidden_out.empty() ? "" : " " + hidden_out);
  return std::system(cmd.c_str()) == 0 ? "" : cmd;
}

}  // namespace ptn::testing
