// Helpers shared by the fuzz targets.
#pragma once
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

namespace ptn::fuzz {

// A per-process scratch path for readers that only take a file name (GGUF and safetensors map
// their files). Prefers /dev/shm (tmpfs) so a write per input stays cheap; removed at exit.
inline std::string scratch_dir() {
  // Heap-held and never freed, so the exit hook below can still read it after static destructors.
  static const std::string* dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (tmp ? tmp : "/tmp");
    auto* d = new std::string(base + "/ptn-fuzz-" + std::to_string(getpid()));
    (void)::mkdir(d->c_str(), 0700);
    return d;
  }();
  static const bool hooked = [] {
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(*dir, ec);
    });
    return true;
  }();
  (void)hooked;
  return *dir;
}

inline void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();  // the harness's own failure, not the parser's
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
}

// Splits the input at the first occurrence of `sep` (a separator the seeds use); without one the
// whole input is the first part.
inline std::pair<std::string_view, std::string_view> split(const uint8_t* data, size_t size, std::string_view sep) {
  std::string_view all(reinterpret_cast<const char*>(data), size);
  size_t at = all.find(sep);
  if (at == std::string_view::npos) return {all, {}};
  return {all.substr(0, at), all.substr(at + sep.size())};
}

}  // namespace ptn::fuzz

// The libFuzzer entry point of a target whose harness is ptn::fuzz::<fn>(data, size). Left out
// when PTN_FUZZ_NO_ENTRY is defined (the regression tests compile every harness into one binary).
#ifndef PTN_FUZZ_NO_ENTRY
#define PTN_FUZZ_ENTRY(fn)                                                  \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { \
    (void)ptn::fuzz::fn(data, size);                                        \
    return 0;                                                               \
  }
#else
#define PTN_FUZZ_ENTRY(fn)
#endif
