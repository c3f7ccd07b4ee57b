// `ptn export`: HF directory / config.json / GGUF -> .ptn program.
#include <iostream>

#include "cli/command.h"
#include "export/exporter.h"

namespace {

std::function<int()> setup(CLI::App& app) {
  auto o = std::make_shared<ptn::ExportOptions>();
  auto* c = app.add_subcommand("export", "Export a model (HF directory, config.json or GGUF) into a .ptn program");
  using ptn::cli::opt;
  c->add_option(opt("model", "m"), o->model, "HF model directory, a config.json (with --random_weights), or a GGUF file")
      ->required();
  c->add_option(opt("gguf"), o->gguf, "take the weights (and the tokenizer if the directory has none) from this GGUF");
  c->add_flag(opt("random-weights"), o->random_weights, "random weights from the config alone (N(0, 0.02), norms 1)");
  c->add_option(opt("seed"), o->seed, "seed for random weights and golden-sample prompts");
  c->add_flag(opt("offgraph-cache"), o->offgraph_cache, "no KV cache in the program: the runtime supplies it (default)");
  c->add_flag(opt("static-cache"), o->static_cache, "in-graph K/V buffers (the comparison baseline; one sequence)");
  c->add_option(opt("max-context-length"), o->max_context_length, "static cache only: positions held in the program");
  c->add_option(opt("kv-cache-dtype"), o->kv_cache_dtype, "static cache only: f32, f16 or bf16");
  c->add_option(opt("quantize"), o->quantize, "weight types: f32, f16, bf16, q8_0, q4_0, q4_k_m (default: keep the source's)");
  c->add_flag(opt("f16-as-bf16"), o->f16_as_bf16,
              "store the matrices that would be F16 as BF16 (BF16 dot products); golden samples then come from "
              "the source weights, so `ptn verify` reports the accuracy this costs");
  c->add_flag(opt("golden-from-source"), o->golden_from_source,
              "golden samples from the source weights for every lossily converted weight (any --quantize), so "
              "`ptn verify --max-nmse X` measures the whole conversion's cost instead of the runtime alone");
  c->add_option(opt("max-seq-length"), o->max_seq_length, "most tokens one call may process (prefill chunk)")->required();
  c->add_option(opt("samples"), o->samples, "golden samples to compute with the reference path (default 2)");
  c->add_option(opt("sample-prompt-tokens"), o->sample_prompt_tokens,
                "prompt length of the first golden sample (default min(max_seq_length, 24))");
  c->add_option(opt("output", "o"), o->output, "the .ptn file to write")->required();
  return [o, &app] {
    o->command_line = "ptn export";
    for (const auto* opt_ : app.get_subcommand("export")->get_options()) {
      if (opt_->count() == 0 || opt_->get_name() == "--help") continue;
      o->command_line += " " + opt_->get_name();
      for (const auto& r : opt_->results()) o->command_line += " " + r;
    }
    ptn::export_program(*o, std::cerr);
    return 0;
  };
}

PTN_COMMAND("export", setup);

}  // namespace
