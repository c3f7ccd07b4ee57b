// The runtime flags several commands share, each with one name, help text and check:
//   -t/--threads        run, chat, perplexity, bench, verify
//   --no-repack         run, chat, perplexity, bench, verify, serve
//   --cache/--cache-type run, chat, perplexity (a Session's cache kind and dtype)
//   --ctx               run, chat (perplexity's --ctx is tokens per chunk: its own flag)
// and load_model, how those commands open what -m names.
// Each flag is added by its own call so that a command keeps its order of options in --help.
// Header-only: the ptn target compiles src/cli/cmd_*.cpp and main.cpp only.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>

#include "cli/command.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "export/model_input.h"
#include "runtime/executor.h"
#include "runtime/session.h"

namespace ptn::cli {

// -t/--threads bound to *threads (0: all CPUs).
inline void add_threads_flag(CLI::App* cmd, int* threads) {
  cmd->add_option(opt("threads", "t"), *threads, "threads (default: all CPUs)");
}

// Checks --threads (0, or 1..1024) and makes it the default thread count.
inline void apply_threads_flag(int threads) {
  if (threads < 0 || threads > 1024) fail(ErrorKind::InvalidArgument, "--threads", "must be 1..1024");
  if (threads > 0) set_default_threads(threads);
}

// --no-repack bound to *off: optimized executors run from the program's weight bytes (no copy).
inline void add_repack_flag(CLI::App* cmd, bool* off) {
  cmd->add_flag(opt("no-repack"), *off,
                "run from the program's weight bytes instead of a copy laid out for the AVX-512 kernels "
                "(faster start, slower decode and prompts)");
}
inline void apply_repack_flag(bool off) { set_weight_repack(!off); }

// The program -m names: a .ptn file, or a GGUF / HF directory / cached "org/name" exported in
// memory, which `command` reports on stderr in one line ("ptn run: exported X in memory ...").
inline std::shared_ptr<const Program> load_model(const std::string& command, const std::string& arg,
                                                 OpenModelOptions o = {}) {
  std::ostringstream log;
  auto program = open_model(arg, o, log);
  if (!program->file()) {
    std::string source = log.str();
    const size_t at = source.find("source: ");
    source = at == std::string::npos ? arg : source.substr(at + 8, source.find('\n', at) - at - 8);
    std::fprintf(stderr, "ptn %s: exported %s in memory (%lld layers, prefill chunk %lld)\n", command.c_str(),
                 source.c_str(), static_cast<long long>(program->meta().spec.n_layers),
                 static_cast<long long>(program->meta().max_seq_length));
  }
  return program;
}

// --ctx bound to *ctx: the cache's context in tokens (0: the model's).
inline void add_context_flag(CLI::App* cmd, int64_t* ctx) {
  cmd->add_option(opt("ctx"), *ctx, "context size in tokens (default: the model's)");
}

struct CacheFlags {
  std::string kind = "paged";  // --cache: paged | reference (Session checks it)
  std::string dtype = "f16";   // --cache-type: a dtype name (f16 as llama.cpp's default)
};

// --cache and --cache-type, in that order, bound to *flags (which must outlive the parse).
inline void add_cache_flags(CLI::App* cmd, CacheFlags* flags) {
  cmd->add_option(opt("cache"), flags->kind, "KV cache: paged (default) or reference");
  cmd->add_option(opt("cache-type"), flags->dtype, "KV cache dtype: f16 (default), f32, bf16, q8_0, q4_0");
}

// Sets so->cache_kind and so->cache_dtype; an unknown --cache-type throws ptn::Error.
inline void apply_cache_flags(const CacheFlags& flags, SessionOptions* so) {
  so->cache_kind = flags.kind;
  const auto dt = dtype_from_name(flags.dtype);
  if (!dt) fail(ErrorKind::InvalidArgument, "--cache-type", "unknown type '" + flags.dtype + "'");
  so->cache_dtype = *dt;
}

}  // namespace ptn::cli
