// Helpers for tests that run the built `ptn` binary (PTN_BINARY, a compile definition of every
// test target) through the shell: read and write whole files, and run one command with its
// stdin from a string and its stdout / stderr captured in files of a scratch directory.
// Header-only; include it as "../cli_test_util.h" from tests/<module>/.
#pragma once
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace ptn_test {

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void spit(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}

struct RunResult {
  int code = -1;    // exit code, or -1 when the process did not exit normally
  int signal = 0;   // the signal that ended it, if one did
  std::string out, err;
};

// Runs `ptn <args>` (args are shell words: quote paths) with stdin from `input` (written to
// dir/stdin; empty: /dev/null) and stdout / stderr captured through dir/out and dir/err.
inline RunResult run_ptn(const std::string& args, const std::filesystem::path& dir, const std::string& input = "") {
  std::string in = "/dev/null";
  if (!input.empty()) {
    in = (dir / "stdin").string();
    spit(in, input);
  }
  const std::string cmd = std::string("'") + PTN_BINARY + "' " + args + " < '" + in + "' > '" + (dir / "out").string() +
                          "' 2> '" + (dir / "err").string() + "'";
  const int status = std::system(cmd.c_str());
  RunResult r;
  if (status != -1 && WIFEXITED(status)) r.code = WEXITSTATUS(status);
  if (status != -1 && WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  return r;
}

}  // namespace ptn_test
