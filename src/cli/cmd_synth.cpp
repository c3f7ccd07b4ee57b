// `ptn synth`: a model with random weights from a preset or a config.json, written as an HF
// directory and/or a GGUF file (optionally quantized), for tests and benchmarks.
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "core/file.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats/hf_config.h"
#include "formats/random_weights.h"
#include "formats/synth.h"
#include "tokenizer/tokenizer_file.h"

namespace {

struct Options {
  std::string preset, config, out_dir, gguf, type = "f32", hf_dtype = "f32", tokenizer, name;
  uint64_t seed = 0;
  bool varied = false;
};

void copy_file(const std::string& from, const std::string& to) {
  std::string text = ptn::read_text_file(from, 256u << 20);
  ptn::FileWriter f(to);
  f.write(text.data(), text.size());
  f.commit();
}

std::string dir_of(const std::string& path) {
  size_t p = path.find_last_of('/');
  return p == std::string::npos ? "." : path.substr(0, p);
}

int run(const Options& o) {
  using namespace ptn;
  if (o.preset.empty() == o.config.empty()) fail(ErrorKind::InvalidArgument, "ptn synth", "give exactly one of --preset NAME or --config FILE");
  if (o.out_dir.empty() && o.gguf.empty()) fail(ErrorKind::InvalidArgument, "ptn synth", "nothing to write: give --out-dir DIR and/or --gguf FILE");
  nlohmann::json cfg;
  std::string where = "preset " + o.preset;
  if (!o.preset.empty()) {
    cfg = synth_preset(o.preset);
  } else {
    where = o.config;
    try {
      cfg = nlohmann::json::parse(read_text_file(o.config, 16u << 20));
    } catch (const nlohmann::json::exception& e) {
      fail(ErrorKind::Corrupt, o.config, std::string("malformed JSON: ") + e.what());
    }
  }
  ModelSpec spec = model_spec_from_hf_config(cfg, where);
  auto src = random_weights(spec, o.seed, o.varied ? RandomWeightSpread::varied() : RandomWeightSpread{});
  const GgufFileType ft = gguf_file_type_from_name(o.type);
  const bool tty = isatty(2);
  auto progress = [tty](const char* what) {
    return [what, tty](size_t i, size_t n) {
      if (!tty) return;
      std::fprintf(stderr, "\r%s: %zu/%zu tensors", what, i, n);
      if (i == n) std::fprintf(stderr, "\n");
    };
  };

  // Tokenizer: a GGUF's keys are copied as they are; a tokenizer.json is copied into the HF
  // directory and converted for the GGUF.
  std::shared_ptr<GgufFile> tok_gguf;
  std::optional<TokenizerSpec> tok_spec;
  std::string tok_json;
  if (!o.tokenizer.empty()) {
    if (looks_like_gguf(o.tokenizer)) {
      tok_gguf = GgufFile::open(o.tokenizer);
    } else {
      tok_json = is_directory(o.tokenizer) ? o.tokenizer + "/tokenizer.json" : o.tokenizer;
      tok_spec = load_tokenizer_spec(tok_json);
      if (!o.gguf.empty()) name_gguf_pre_tokenizer(*tok_spec, tok_json);
    }
  }

  if (!o.out_dir.empty()) {
    if (o.hf_dtype != "f32" && o.hf_dtype != "bf16") fail(ErrorKind::InvalidArgument, "--hf-dtype", "expected f32 or bf16, got '" + o.hf_dtype + "'");
    write_hf_directory(*src, cfg, o.out_dir, o.hf_dtype == "f32" ? DType::F32 : DType::BF16, progress("model.safetensors"));
    if (!tok_json.empty()) {
      copy_file(tok_json, o.out_dir + "/tokenizer.json");
      const std::string tc = dir_of(tok_json) + "/tokenizer_config.json";
      if (file_exists(tc)) copy_file(tc, o.out_dir + "/tokenizer_config.json");
    } else if (tok_gguf) {
      std::fprintf(stderr, "note: the HF directory gets no tokenizer.json (the tokenizer came from a GGUF file)\n");
    }
    std::printf("wrote %s (config.json, model.safetensors %s)\n", o.out_dir.c_str(), o.hf_dtype.c_str());
  }
  if (!o.gguf.empty()) {
    GgufModelOptions opt;
    opt.type = ft;
    opt.name = o.name.empty() ? (o.preset.empty() ? std::string("ptn-synth") : "ptn-synth-" + o.preset) : o.name;
    opt.tokenizer_from = tok_gguf.get();
    opt.tokenizer = tok_spec ? &*tok_spec : nullptr;
    write_model_gguf(*src, o.gguf, opt, progress("gguf"));
    std::printf("wrote %s (%s%s)\n", o.gguf.c_str(), gguf_file_type_name(ft),
                o.tokenizer.empty() ? ", placeholder tokenizer" : "");
  }
  return 0;
}

std::function<int()> setup(CLI::App& app) {
  auto* sub = app.add_subcommand("synth", "Write a model with random weights (preset or config.json) as an HF directory and/or GGUF");
  auto o = std::make_shared<Options>();
  using ptn::cli::opt;
  sub->add_option(opt("preset"), o->preset, "tiny, llama-3.2-1b, qwen3-0.6b, gemma-3-1b, smollm2-135m");
  sub->add_option(opt("config"), o->config, "an HF config.json");
  sub->add_option(opt("out-dir"), o->out_dir, "write an HF directory here (config.json + model.safetensors)");
  sub->add_option(opt("hf-dtype"), o->hf_dtype, "f32 (default) or bf16 for model.safetensors");
  sub->add_option(opt("gguf"), o->gguf, "write a GGUF file");
  sub->add_option(opt("type"), o->type, "GGUF weight type: f32 (default), f16, bf16, q8_0, q4_0, q4_k_m, q3_k_m, q2_k, tq1_0, tq2_0, iq4_nl, iq4_xs (llama-quantize's mixes, docs/cli.md)");
  sub->add_option(opt("tokenizer"), o->tokenizer, "take the tokenizer from this GGUF file or tokenizer.json");
  sub->add_option(opt("seed"), o->seed, "random seed (default 0)");
  sub->add_flag(opt("varied"), o->varied,
                "weights that test more: matrices N(0, 0.1), norm weights 1 + U(-0.5, 0.5), biases N(0, 0.2) (default: N(0, 0.02), unit norms, zero biases)");
  sub->add_option(opt("name"), o->name, "general.name of the GGUF");
  return [o] { return run(*o); };
}

PTN_COMMAND("synth", setup);

}  // namespace
