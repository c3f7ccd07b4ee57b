// `ptn inspect FILE`: what is in a model file (.ptn program, GGUF, safetensors, HF directory)
// and what ptn would make of it.
#include <cstdio>

#include "cli/command.h"
#include "core/error.h"
#include "core/file.h"
#include "formats/gguf.h"
#include "formats/gguf_spec.h"
#include "formats/hf_config.h"
#include "formats/safetensors.h"
#include "formats/weights.h"
#include "runtime/inspect.h"

namespace {

struct Options {
  std::string path, gguf_weights;
  bool all_tensors = false;
};

constexpr size_t kTensorRows = 40;

void print_gguf_tokenizer(const ptn::GgufFile& g);  // tensors listed before abbreviating (unless --all-tensors)

void print_gguf(const std::string& path, bool all) {
  auto g = ptn::GgufFile::open(path);
  std::printf("%s: GGUF v%u, %zu metadata keys, %zu tensors, alignment %llu, data at byte %llu, %llu bytes\n", path.c_str(), g->version(),
              g->metadata().size(), g->tensors().size(), (unsigned long long)g->alignment(),
              (unsigned long long)g->data_offset(), (unsigned long long)g->file_size());
  std::printf("\nmetadata:\n");
  for (const auto& [k, v] : g->metadata()) std::printf("  %s = %s\n", k.c_str(), v.describe(8).c_str());
  std::printf("\ntensors:\n");
  size_t shown = 0;
  for (const auto& t : g->tensors()) {
    if (!all && shown++ == kTensorRows) {
      std::printf("  ... %zu more (--all-tensors lists them)\n", g->tensors().size() - kTensorRows);
      break;
    }
    std::printf("  %-40s %-5s %-18s offset %llu\n", t.name.c_str(), ptn::dtype_name(t.dtype), ptn::shape_str(t.shape).c_str(),
                (unsigned long long)t.offset);
  }
  print_gguf_tokenizer(*g);
}

void print_safetensors(const ptn::SafetensorsFile& f, bool all) {
  std::printf("%s: safetensors, %zu tensors, %llu bytes\n", f.path().c_str(), f.tensors().size(), (unsigned long long)f.file_size());
  for (const auto& [k, v] : f.metadata()) std::printf("  metadata %s = %s\n", k.c_str(), v.substr(0, 80).c_str());
  size_t shown = 0;
  for (const auto& t : f.tensors()) {
    if (!all && shown++ == kTensorRows) {
      std::printf("  ... %zu more (--all-tensors lists them)\n", f.tensors().size() - kTensorRows);
      break;
    }
    std::printf("  %-48s %-5s %-18s offset %llu\n", t.name.c_str(), t.dtype.c_str(), ptn::shape_str(t.shape).c_str(),
                (unsigned long long)t.offset);
  }
}

// What ptn makes of the model: its spec and whether it can be imported. Returns the exit code:
// 0 when the model is importable or well formed but unsupported, 1 when it is broken.
int print_verdict(const std::string& path, const std::string& gguf_weights) {
  std::printf("\nptn:\n");
  try {
    auto w = ptn::open_weights(path, gguf_weights);
    std::printf("%s", ptn::describe_model_spec(w->spec()).c_str());
    std::printf("supported: yes (%zu tensors)\n", w->names().size());
    return 0;
  } catch (const ptn::Error& e) {
    if (e.kind() == ptn::ErrorKind::Unsupported) {
      std::printf("supported: no: %s\n", e.what());
      return 0;
    }
    std::printf("not importable: %s\n", e.what());
    return 1;
  }
}

void print_gguf_tokenizer(const ptn::GgufFile& g) {
  if (!ptn::gguf_has_tokenizer(g)) return;
  try {
    ptn::TokenizerSpec t = ptn::tokenizer_spec_from_gguf(g);
    std::printf("\ntokenizer: %s, %zu tokens, %zu merges, pre '%s', bos %d, eos %d%s\n",
                t.kind == ptn::TokenizerKind::SentencePiece ? "sentencepiece" : "byte-level BPE", t.tokens.size(),
                t.merges.size(), t.pre_tokenizer.c_str(), t.bos_id.value_or(-1), t.eos_id.value_or(-1),
                t.chat_template.empty() ? "" : ", chat template");
  } catch (const ptn::Error& e) {
    std::printf("\ntokenizer: not usable: %s\n", e.what());
  }
}

int run(const Options& o) {
  using namespace ptn;
  const std::string& p = o.path;
  if (is_directory(p)) {
    std::printf("%s: Hugging Face model directory\n", p.c_str());
    if (o.gguf_weights.empty()) {
      auto set = SafetensorsSet::open_dir(p);
      for (const auto& f : set->files()) print_safetensors(*f, o.all_tensors);
    } else {
      print_gguf(o.gguf_weights, o.all_tensors);
    }
    return print_verdict(p, o.gguf_weights);
  }
  if (!file_exists(p)) fail(ErrorKind::Io, p, "no such file or directory");
  if (is_ptn_file(p)) return inspect_ptn_file(p);
  if (looks_like_gguf(p)) {
    print_gguf(p, o.all_tensors);
    return print_verdict(p, "");
  }
  if (looks_like_safetensors(p)) {
    auto f = SafetensorsFile::open(p);
    print_safetensors(*f, o.all_tensors);
    return print_verdict(p, "");
  }
  std::printf("%s: not a GGUF/safetensors/HF model\n", p.c_str());
  return 1;
}

std::function<int()> setup(CLI::App& app) {
  auto* sub = app.add_subcommand("inspect", "Show what a .ptn, GGUF, safetensors file or HF directory holds, and what ptn makes of it");
  auto o = std::make_shared<Options>();
  sub->add_option("file", o->path, "model file or directory")->required();
  sub->add_option(ptn::cli::opt("gguf-weights"), o->gguf_weights, "with an HF directory: take the weights from this GGUF");
  sub->add_flag(ptn::cli::opt("all-tensors"), o->all_tensors, "list every tensor");
  return [o] { return run(*o); };
}

PTN_COMMAND("inspect", setup);

}  // namespace
