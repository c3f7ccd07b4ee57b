// `ptn serve`: an OpenAI-compatible HTTP server over a .ptn program (docs/http-api.md).
#include <csignal>
#include <cstdio>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>

#include "cli/command.h"
#include "cli/runtime_flags.h"
#include "cli/sampling_flags.h"
#include "core/error.h"
#include "core/file.h"
#include "core/threadpool.h"
#include "serve/server.h"

namespace {

struct ServeArgs {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8080;
  int threads = 0;
  bool no_repack = false;
  std::string kv_memory;
  int64_t ctx = 0;
  std::string cache_type = "f16";
  int64_t max_batch_tokens = 0;
  int64_t max_queue = 256;
  int64_t parallel = 64;
  int64_t block_size = 16;
  std::string api_key;
  std::vector<std::string> cors_origins;
  std::string model_name;
  std::string template_file;
  bool parse_special = false;
  bool no_webui = false;
  std::string pooling;
  int timeout = 600;
  int shutdown_deadline = 10;
  std::string kv_store;
  std::string slot_save_path;
  ptn::gen::LookupOptions lookup;
  int kv_store_timeout_ms = 50;
  int kv_store_ttl = 3600;
};

// "512M", "2G", "1048576" -> bytes.
size_t parse_bytes(const std::string& s) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || !(v > 0)) ptn::fail(ptn::ErrorKind::InvalidArgument, "--kv-memory", "expected bytes like 512M, got '" + s + "'");
  std::string unit = s.substr(used);
  double mul = 1;
  if (unit == "" || unit == "B") mul = 1;
  else if (unit == "K" || unit == "KiB" || unit == "k") mul = 1024.0;
  else if (unit == "M" || unit == "MiB") mul = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB") mul = 1024.0 * 1024 * 1024;
  else ptn::fail(ptn::ErrorKind::InvalidArgument, "--kv-memory", "unknown unit '" + unit + "' (use K, M or G)");
  const double bytes = v * mul;
  if (bytes > 1e15) ptn::fail(ptn::ErrorKind::InvalidArgument, "--kv-memory", "too large");
  return static_cast<size_t>(bytes);
}

// The KV cache size when neither --ctx nor --kv-memory is given: 16 full contexts, but no more
// than a quarter of the physical memory (at least 256 MiB, at most 32 GiB). A model whose
// context is 128K tokens would otherwise ask for hundreds of GiB.
int64_t default_cache_tokens(const ptn::ProgramMeta& meta, ptn::DType dtype) {
  int64_t ctx = meta.cache_spec.max_positions > 0 ? meta.cache_spec.max_positions : meta.spec.max_position_embeddings;
  if (ctx <= 0) ctx = 4096;
  const double elem = dtype == ptn::DType::F32    ? 4.0
                     : dtype == ptn::DType::Q8_0 ? 34.0 / 32.0
                     : dtype == ptn::DType::Q4_0 ? 18.0 / 32.0
                                                 : 2.0;
  double per_token = 0;  // K and V bytes of one position over every layer (K only where V is its start)
  for (const auto& l : meta.cache_spec.layers)
    per_token += elem * static_cast<double>(l.n_kv_heads) * static_cast<double>(l.head_dim_k + (l.v_in_k ? 0 : l.head_dim_v));
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const double phys = pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 4.0 * (1ull << 30);
  const double budget = std::clamp(phys / 4, 256.0 * (1 << 20), 32.0 * (1ull << 30));
  const double wanted = 16.0 * static_cast<double>(ctx);
  if (per_token <= 0 || per_token * wanted <= budget) return static_cast<int64_t>(wanted);
  return std::max<int64_t>(2, static_cast<int64_t>(budget / per_token));
}

std::function<int()> setup(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  auto* c = app.add_subcommand("serve", "Serve a .ptn program over an OpenAI-compatible HTTP API");
  using ptn::cli::opt;
  c->add_option(opt("model", "m"), a->model, "the .ptn program")->required();
  c->add_option(opt("host"), a->host, "address to bind (default 127.0.0.1)");
  c->add_option(opt("port"), a->port, "port (default 8080; 0 picks a free port)");
  c->add_option(opt("threads", "t"), a->threads, "compute threads (default: all CPUs)");
  ptn::cli::add_repack_flag(c, &a->no_repack);
  c->add_option(opt("kv-memory"), a->kv_memory, "KV cache budget in bytes (e.g. 256M)");
  c->add_option(opt("ctx"), a->ctx, "KV cache size in tokens over all sequences (default: 16 contexts, at most a quarter of the memory)");
  c->add_option(opt("cache-type"), a->cache_type, "KV cache dtype: f16 (default), f32, bf16, q8_0, q4_0");
  c->add_option(opt("max-batch-tokens"), a->max_batch_tokens, "token rows per step (default: the program's max_seq_length)");
  c->add_option(opt("max-queue"), a->max_queue, "requests waiting before 503 (default 256)");
  c->add_option(opt("parallel"), a->parallel, "sequences generating at once (default 64)");
  c->add_option(opt("block-size"), a->block_size, "tokens per KV block (default 16)");
  c->add_option(opt("api-key"), a->api_key, "require 'Authorization: Bearer KEY' (not on /health nor the chat page's files)");
  c->add_option(opt("cors-origin"), a->cors_origins,
                "let a browser page from this origin call the API (e.g. http://localhost:3000; '*' for any; repeatable)");
  c->add_option(opt("model-name"), a->model_name, "model id reported and accepted (default: the file's name)");
  c->add_option(opt("chat-template"), a->template_file,
                "a Jinja chat template file for /v1/chat/completions instead of the program's");
  c->add_flag(opt("parse-special"), a->parse_special,
              "let request text contain control tokens (e.g. <|im_end|>); off: request text is always text");
  c->add_option(opt("pooling"), a->pooling,
                "/v1/embeddings pooling: last, mean or cls (default: what the model was exported with, else last)");
  c->add_flag(opt("no-webui"), a->no_webui, "do not serve the browser chat page at / (then / answers 404)");
  c->add_option(opt("timeout"), a->timeout, "seconds a non-streaming request may take (default 600)");
  c->add_option(opt("shutdown-deadline"), a->shutdown_deadline, "seconds running requests get on SIGINT/SIGTERM (default 10)");
  c->add_option(opt("kv-store"), a->kv_store,
                "redis://HOST:PORT of a shared prefix tier: full KV blocks written behind requests, read on a "
                "prefix miss (docs/scale-out.md)");
  c->add_option(opt("kv-store-timeout-ms"), a->kv_store_timeout_ms,
                "a store slower than this is skipped and the prefix computed (default 50)");
  c->add_option(opt("kv-store-ttl"), a->kv_store_ttl, "seconds a written block lives in the store (default 3600)");
  ptn::cli::add_lookup_flags(c, &a->lookup);
  c->add_option(opt("slot-save-path"), a->slot_save_path,
                "a directory for POST /slots/{id}?action=save|restore files (KV records; off without it)");
  return [a] {
    if (!a->kv_memory.empty() && a->ctx > 0)
      ptn::fail(ptn::ErrorKind::InvalidArgument, "--kv-memory/--ctx", "give one of them, not both");
    if (a->port < 0 || a->port > 65535) ptn::fail(ptn::ErrorKind::InvalidArgument, "--port", "must be 0..65535");
    if (a->ctx < 0) ptn::fail(ptn::ErrorKind::InvalidArgument, "--ctx", "must be >= 0");
    if (a->timeout < 1 || a->shutdown_deadline < 0)
      ptn::fail(ptn::ErrorKind::InvalidArgument, "--timeout", "must be >= 1 (deadline >= 0)");
    if (a->threads > 0) ptn::set_default_threads(a->threads);
    ptn::cli::apply_repack_flag(a->no_repack);
    auto dtype = ptn::dtype_from_name(a->cache_type);
    if (!dtype) ptn::fail(ptn::ErrorKind::InvalidArgument, "--cache-type", "unknown dtype '" + a->cache_type + "'");

    // SIGINT / SIGTERM are taken by sigwait below; every thread started from here inherits the mask.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

    ptn::serve::ServerOptions so;
    so.host = a->host;
    so.port = a->port;
    so.api_key = a->api_key;
    for (const auto& o : a->cors_origins)
      if (o != "*" && o.find("://") == std::string::npos)
        ptn::fail(ptn::ErrorKind::InvalidArgument, "--cors-origin",
                  "'" + o + "' is not an origin (scheme://host[:port], or '*')");
    so.cors_origins = a->cors_origins;
    so.model_name = a->model_name;
    so.parse_special = a->parse_special;
    if (!a->pooling.empty() && a->pooling != "last" && a->pooling != "mean" && a->pooling != "cls")
      ptn::fail(ptn::ErrorKind::InvalidArgument, "--pooling", "must be last, mean or cls, got '" + a->pooling + "'");
    so.pooling = a->pooling;
    if (!a->template_file.empty()) so.chat_template = ptn::read_text_file(a->template_file, 1u << 20);
    so.request_timeout_s = a->timeout;
    so.webui = !a->no_webui;
    so.slot_save_path = a->slot_save_path;
    ptn::gen::check_lookup_options(a->lookup, "--lookup-draft/--lookup-ngram");
    so.engine.lookup = a->lookup;
    so.engine.cache_dtype = *dtype;
    so.engine.capacity_tokens = a->ctx;
    so.engine.capacity_bytes = a->kv_memory.empty() ? 0 : parse_bytes(a->kv_memory);
    so.engine.max_batch_tokens = a->max_batch_tokens;
    so.engine.max_queue = a->max_queue;
    so.engine.max_running = a->parallel;
    so.engine.block_size = a->block_size;
    so.engine.kv_store = a->kv_store;
    so.engine.kv_store_timeout_ms = a->kv_store_timeout_ms;
    so.engine.kv_store_ttl_seconds = a->kv_store_ttl;
    auto program = ptn::cli::load_model("serve", a->model);
    if (so.engine.capacity_tokens == 0 && so.engine.capacity_bytes == 0)
      so.engine.capacity_tokens = default_cache_tokens(program->meta(), *dtype);
    ptn::serve::Server server(program, so, &ptn::default_pool());
    const int port = server.bind();
    server.start();
    std::printf("ptn serve: model '%s', context %lld tokens, listening on http://%s:%d\n",
                server.model().name.c_str(), static_cast<long long>(server.model().context), a->host.c_str(), port);
    if (so.webui) std::printf("ptn serve: chat page at http://%s:%d/\n", a->host.c_str(), port);
    std::fflush(stdout);
    int sig = 0;
    sigwait(&sigs, &sig);
    std::printf("ptn serve: signal %d, finishing running requests (up to %d s)\n", sig, a->shutdown_deadline);
    std::fflush(stdout);
    server.shutdown(std::chrono::seconds(a->shutdown_deadline));
    std::printf("ptn serve: stopped\n");
    return 0;
  };
}

PTN_COMMAND("serve", setup);

}  // namespace
