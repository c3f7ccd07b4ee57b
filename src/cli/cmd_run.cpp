// `ptn run`: generate text from a prompt, streamed to stdout; timings to stderr.
#include <chrono>
#include <cstdio>

#include "cli/command.h"
#include "cli/runtime_flags.h"
#include "cli/sampling_flags.h"
#include "core/error.h"
#include "core/file.h"
#include "generate/session_generate.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "runtime/session.h"
#include "sampling/sampling_params.h"
#include "tokenizer/tokenizer.h"

namespace {

struct RunArgs {
  std::string model, prompt;
  int64_t n_predict = 128;
  int64_t ctx = 0;
  int threads = 0;
  bool no_repack = false;
  ptn::cli::CacheFlags cache;
  ptn::cli::SamplingFlags sampling;
  bool print_ids = false;
  bool no_bos_stop = false;
  bool print_finish = false;
  std::string grammar_file, json_schema_file;
  ptn::gen::LookupOptions lookup;
  ptn::cli::DraftFlags draft;
};

// The output constraint of --grammar-file (GBNF) or --json-schema-file, null when neither.
std::shared_ptr<const ptn::grammar::Grammar> output_grammar(const RunArgs& a) {
  using namespace ptn;
  if (!a.grammar_file.empty() && !a.json_schema_file.empty())
    fail(ErrorKind::InvalidArgument, "--grammar-file", "give --grammar-file or --json-schema-file, not both");
  if (!a.grammar_file.empty())
    return std::make_shared<const grammar::Grammar>(
        grammar::parse_gbnf(read_text_file(a.grammar_file, 256u << 10), a.grammar_file));
  if (!a.json_schema_file.empty())
    return std::make_shared<const grammar::Grammar>(
        grammar::json_schema_grammar(std::string_view(read_text_file(a.json_schema_file, 256u << 10))));
  return nullptr;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::function<int()> setup(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  auto* c = app.add_subcommand("run", "Generate text from a prompt with a .ptn program");
  using ptn::cli::opt;
  c->add_option(opt("model", "m"), a->model, "the .ptn program")->required();
  c->add_option(opt("prompt", "p"), a->prompt, "the prompt text")->required();
  c->add_option(opt("n-predict", "n"), a->n_predict, "tokens to generate (default 128)");
  ptn::cli::add_sampling_flags(c, &a->sampling);
  ptn::cli::add_threads_flag(c, &a->threads);
  ptn::cli::add_repack_flag(c, &a->no_repack);
  ptn::cli::add_cache_flags(c, &a->cache);
  ptn::cli::add_context_flag(c, &a->ctx);
  c->add_flag(opt("print-ids"), a->print_ids, "print the generated token ids to stderr as a JSON array");
  c->add_flag(opt("ignore-bos-stop"), a->no_bos_stop,
              "keep generating when the model emits BOS (by default a BOS ends the text, as llama2.c does)");
  c->add_flag(opt("print-finish"), a->print_finish, "print why the generation ended to stderr (finish: eog|bos|...)");
  c->add_option(opt("grammar-file"), a->grammar_file, "constrain the output to this GBNF grammar (docs/grammar.md)");
  c->add_option(opt("json-schema-file"), a->json_schema_file,
                "constrain the output to JSON following this JSON Schema (the subset of docs/grammar.md)");
  ptn::cli::add_lookup_flags(c, &a->lookup);
  ptn::cli::add_draft_flags(c, &a->draft);
  return [a] {
    using namespace ptn;
    gen::check_lookup_options(a->lookup, "--lookup-draft/--lookup-ngram");
    cli::apply_threads_flag(a->threads);
    cli::apply_repack_flag(a->no_repack);
    if (a->n_predict < 0) throw Error(ErrorKind::InvalidArgument, "--n-predict", "must be >= 0");
    const auto constraint_grammar = output_grammar(*a);  // checked before the model loads
    auto t_load = std::chrono::steady_clock::now();
    auto program = cli::load_model("run", a->model);
    if (!program->meta().tokenizer)
      throw Error(ErrorKind::InvalidArgument, a->model, "the program has no tokenizer: export it with one");
    auto tok = Tokenizer::create(*program->meta().tokenizer);
    SessionOptions so;
    cli::apply_cache_flags(a->cache, &so);
    so.context = a->ctx;
    Session session(program, so);
    auto drafter = cli::make_drafter(a->draft, a->lookup, *tok, so,
                                     [](const std::string& path) { return cli::load_model("run", path); });
    const double load_s = seconds_since(t_load);

    gen::GenerationParams gp;
    gp.sampling = cli::sampling_from_flags(a->sampling, program->meta().spec.vocab_size);
    gp.stop.stop = cli::stop_from_flags(a->sampling);
    gp.stop.max_tokens = a->n_predict;
    gp.stop.stop_at_bos = !a->no_bos_stop;

    std::vector<int32_t> ids = tok->encode(a->prompt, /*add_special=*/true, /*parse_special=*/true);
    if (ids.empty()) throw Error(ErrorKind::InvalidArgument, "--prompt", "encodes to no tokens");
    if (static_cast<int64_t>(ids.size()) >= session.context())
      throw Error(ErrorKind::InvalidArgument, "--prompt",
                  std::to_string(ids.size()) + " tokens do not fit the context of " +
                      std::to_string(session.context()));
    std::fputs(a->prompt.c_str(), stdout);
    std::fflush(stdout);

    auto t_prompt = std::chrono::steady_clock::now();
    const float* logits = session.feed(ids);
    const double prompt_s = seconds_since(t_prompt);

    // The vocabulary index of the grammar is built before the generation is timed.
    std::unique_ptr<grammar::GrammarProcessor> constraint;
    if (constraint_grammar)
      constraint = std::make_unique<grammar::GrammarProcessor>(
          constraint_grammar, std::make_shared<const grammar::TokenTrie>(*tok), *tok);
    std::vector<int32_t> generated;
    gen::Finish finish = gen::Finish::MaxTokens;
    gen::SpeculationStats spec;
    auto t_gen = std::chrono::steady_clock::now();
    if (a->n_predict > 0) {  // -n 0 runs the prompt only
      gen::Generator g(*tok, program->meta().spec.vocab_size, gp, gen::session_room(session));
      if (constraint) g.set_logit_processor(constraint.get());
      auto print = [](const gen::StepResult& st) {
        std::fwrite(st.text.data(), 1, st.text.size(), stdout);
        std::fflush(stdout);
      };
      finish = drafter ? gen::generate_on_session(session, g, logits, print, *drafter, a->draft.max, ids, &spec)
                       : gen::generate_on_session(session, g, logits, print, a->lookup, ids, &spec);
      generated = g.tokens();
    }
    std::fputc('\n', stdout);
    std::fflush(stdout);
    const double gen_s = seconds_since(t_gen);
    if (a->print_finish) std::fprintf(stderr, "finish: %s\n", gen::finish_name(finish));
    if (a->print_ids) {
      std::string s = "[";
      for (size_t i = 0; i < generated.size(); ++i) s += (i ? ", " : "") + std::to_string(generated[i]);
      std::fprintf(stderr, "generated ids: %s]\n", s.c_str());
    }
    std::fprintf(stderr, "load: %.3f s | prompt: %zu tokens, %.1f tokens/s | generation: %zu tokens, %.1f tokens/s\n",
                 load_s, ids.size(), static_cast<double>(ids.size()) / std::max(prompt_s, 1e-9), generated.size(),
                 static_cast<double>(generated.size()) / std::max(gen_s, 1e-9));
    if (a->lookup.draft_tokens > 0 || drafter)
      std::fprintf(stderr, "speculation: %lld steps for %zu tokens, %lld drafted, %lld accepted (%.0f%%)\n",
                   static_cast<long long>(spec.steps), generated.size(), static_cast<long long>(spec.drafted),
                   static_cast<long long>(spec.accepted),
                   spec.drafted ? 100.0 * static_cast<double>(spec.accepted) / static_cast<double>(spec.drafted) : 0.0);
    return 0;
  };
}

PTN_COMMAND("run", setup);

}  // namespace
