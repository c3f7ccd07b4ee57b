// The sampling flags `ptn run` and `ptn chat` share (docs/cli.md lists them under `run`):
// --temp, --top-k, --top-p, --min-p, --repeat-penalty, -s/--seed and --stop, with one set of defaults
// and help texts. Header-only: the ptn target compiles src/cli/cmd_*.cpp and main.cpp only.
#pragma once
#include <chrono>
#include <cstdint>

#include "cli/command.h"
#include "core/error.h"
#include "generate/draft_model.h"
#include "generate/lookup_draft.h"
#include "sampling/sampling_params.h"

namespace ptn::cli {

struct SamplingFlags {
  float temp = 0.8f;
  int64_t top_k = 40;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repeat_penalty = 1.0f;
  uint64_t seed = 0;
  const CLI::Option* seed_option = nullptr;  // set by add_sampling_flags: was --seed given?
  std::vector<std::string> stop;             // --stop, repeatable
};

// Adds the flags to `cmd`, bound to *flags (which must outlive the parse).
inline void add_sampling_flags(CLI::App* cmd, SamplingFlags* flags) {
  cmd->add_option(opt("temp"), flags->temp, "temperature (0 = greedy; default 0.8)");
  cmd->add_option(opt("top-k"), flags->top_k, "top-k (0 = off; default 40)");
  cmd->add_option(opt("top-p"), flags->top_p, "top-p (default 1 = off)");
  cmd->add_option(opt("min-p"), flags->min_p, "min-p (default 0 = off)");
  cmd->add_option(opt("repeat-penalty"), flags->repeat_penalty, "repetition penalty (default 1 = off)");
  flags->seed_option = cmd->add_option(opt("seed", "s"), flags->seed, "random seed (default: from the clock)");
  cmd->add_option(opt("stop"), flags->stop,
                  "a stop string: the text ends before it (repeatable, at most 4, 1..256 bytes each)")
      ->allow_extra_args(false);
}

// The --stop strings, checked as the server checks a request's "stop".
inline std::vector<std::string> stop_from_flags(const SamplingFlags& flags) {
  if (flags.stop.size() > 4) ptn::fail(ErrorKind::InvalidArgument, "--stop", "at most 4 stop strings");
  for (const auto& s : flags.stop)
    if (s.empty() || s.size() > 256) ptn::fail(ErrorKind::InvalidArgument, "--stop", "stop strings must be 1..256 bytes");
  return flags.stop;
}

// The parsed flags as SamplingParams checked by validate_sampling_params for a vocabulary of
// `vocab` tokens (it throws ptn::Error naming "sampling.<field>"). Without --seed the seed is
// the clock's tick count.
inline SamplingParams sampling_from_flags(const SamplingFlags& flags, int64_t vocab) {
  SamplingParams sp;
  sp.temperature = flags.temp;
  sp.top_k = flags.top_k;
  sp.top_p = flags.top_p;
  sp.min_p = flags.min_p;
  sp.repetition_penalty = flags.repeat_penalty;
  const bool seed_given = flags.seed_option != nullptr && flags.seed_option->count() > 0;
  sp.seed = seed_given ? flags.seed
                       : static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  return validate_sampling_params(sp, vocab);
}

// --lookup-draft / --lookup-ngram: prompt-lookup speculative decoding (run and chat).
inline void add_lookup_flags(CLI::App* cmd, gen::LookupOptions* o) {
  CLI::Option* draft = cmd->add_option(
      opt("lookup-draft"), o->draft_tokens,
      "speculative decoding with prompt-lookup drafts: at most this many tokens drafted per step from an "
      "earlier occurrence of the last tokens (0 = off, the default; at most 32)");
  // (needs: without --lookup-draft the n-gram size would be accepted and have no effect.)
  cmd->add_option(opt("lookup-ngram"), o->ngram_max,
                  "the longest suffix looked up for a draft (default 3; shorter ones down to 1 are tried next)")
      ->needs(draft);
}

// --draft-model / --draft-max (ptn run, ptn chat): speculative decoding with a draft model.
struct DraftFlags {
  std::string model;
  int64_t max = 8;
};

inline void add_draft_flags(CLI::App* cmd, DraftFlags* d) {
  CLI::Option* model = cmd->add_option(
      opt("draft-model"), d->model,
      "speculative decoding with a draft model (.ptn, GGUF or HF directory) of the same tokenizer: it "
      "proposes tokens greedily and the model verifies them in one step (the output is the model's own)");
  cmd->add_option(opt("draft-max"), d->max, "the most tokens the draft model proposes per step (default 8, 1..32)")
      ->needs(model);
}

// The draft model of --draft-model on a session of its own (null when the flag is not given);
// load(path) loads it as -m would. Refused beside --lookup-draft, and for another tokenizer.
template <typename Load>
std::shared_ptr<gen::ModelDrafter> make_drafter(const DraftFlags& d, const gen::LookupOptions& lookup,
                                                const Tokenizer& target, const SessionOptions& so, Load&& load) {
  if (d.model.empty()) return nullptr;
  if (lookup.draft_tokens > 0)
    fail(ErrorKind::InvalidArgument, "--draft-model", "give --draft-model or --lookup-draft, not both");
  if (d.max < 1 || d.max > 32) fail(ErrorKind::InvalidArgument, "--draft-max", "must be 1..32");
  return std::make_shared<gen::ModelDrafter>(load(d.model), target, so, "--draft-model");
}

}  // namespace ptn::cli
