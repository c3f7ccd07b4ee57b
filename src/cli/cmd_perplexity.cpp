// `ptn perplexity`: the perplexity of a text file under a .ptn program, computed as llama.cpp's
// llama-perplexity does (runtime/perplexity.h has the rule). Prints the running figure after
// each chunk, "[1]12.3456,[2]11.9012,...", then "Final estimate: PPL = X +/- SE".
#include <chrono>
#include <cstdio>

#include "cli/command.h"
#include "cli/runtime_flags.h"
#include "core/error.h"
#include "core/file.h"
#include "runtime/perplexity.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace {

constexpr size_t kMaxTextBytes = 256u << 20;
constexpr int64_t kDefaultCtx = 512;

struct Args {
  std::string model, file;
  int64_t ctx = 0, chunks = 0;
  int threads = 0;
  bool no_repack = false;
  ptn::cli::CacheFlags cache;
};

std::function<int()> setup(CLI::App& app) {
  auto a = std::make_shared<Args>();
  auto* c = app.add_subcommand("perplexity", "Perplexity of a text file under a .ptn program (as llama-perplexity)");
  using ptn::cli::opt;
  c->add_option(opt("model", "m"), a->model, "the .ptn program")->required();
  c->add_option(opt("file", "f"), a->file, "the text file (UTF-8)")->required();
  c->add_option(opt("ctx", "c"), a->ctx, "tokens per chunk (default: 512, or the model's context if smaller)");
  c->add_option(opt("chunks"), a->chunks, "evaluate at most this many chunks (default: all)");
  ptn::cli::add_threads_flag(c, &a->threads);
  ptn::cli::add_repack_flag(c, &a->no_repack);
  ptn::cli::add_cache_flags(c, &a->cache);
  return [a] {
    using namespace ptn;
    cli::apply_threads_flag(a->threads);
    cli::apply_repack_flag(a->no_repack);
    if (a->ctx < 0) fail(ErrorKind::InvalidArgument, "--ctx", "must be >= 0");
    if (a->chunks < 0) fail(ErrorKind::InvalidArgument, "--chunks", "must be >= 0");
    auto program = cli::load_model("perplexity", a->model);
    if (!program->meta().tokenizer)
      fail(ErrorKind::InvalidArgument, a->model, "the program has no tokenizer: export it with one");
    auto tok = Tokenizer::create(*program->meta().tokenizer);
    SessionOptions so;
    cli::apply_cache_flags(a->cache, &so);
    so.context = a->ctx;  // 0: the model's
    Session session(program, so);
    if (a->ctx > session.context())
      fail(ErrorKind::InvalidArgument, "--ctx",
           std::to_string(a->ctx) + " is more than the model's context of " + std::to_string(session.context()));

    const std::string text = read_text_file(a->file, kMaxTextBytes);
    // As llama-perplexity: special-token text is not parsed; BOS first when the model adds it.
    std::vector<int32_t> tokens;
    if (tok->spec().add_bos && tok->bos()) tokens.push_back(*tok->bos());
    const std::vector<int32_t> body = tok->encode(text, /*add_special=*/false, /*parse_special=*/false);
    tokens.insert(tokens.end(), body.begin(), body.end());

    PerplexityOptions po;
    po.n_ctx = a->ctx > 0 ? a->ctx : std::min(kDefaultCtx, session.context());
    po.max_chunks = a->chunks;
    if (tok->spec().add_bos) po.bos = tok->bos();
    const int64_t n_chunks = perplexity_chunks(static_cast<int64_t>(tokens.size()), po);  // checks the sizes
    std::fprintf(stderr, "perplexity: %zu tokens, %lld chunks of %lld tokens (scoring the second half of each)\n",
                 tokens.size(), static_cast<long long>(n_chunks), static_cast<long long>(po.n_ctx));
    auto t0 = std::chrono::steady_clock::now();
    PerplexityResult r = session_perplexity(session, tokens, po, [](int64_t k, double ppl) {
      std::printf("[%lld]%.4f,", static_cast<long long>(k), ppl);
      std::fflush(stdout);
    });
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_stderr);
    std::fprintf(stderr, "perplexity: %lld tokens scored in %lld chunks, %.3f s (%.1f tokens/s evaluated)\n",
                 static_cast<long long>(r.count), static_cast<long long>(r.chunks), secs,
                 static_cast<double>(r.chunks * po.n_ctx) / std::max(secs, 1e-9));
    return 0;
  };
}

PTN_COMMAND("perplexity", setup);

}  // namespace
