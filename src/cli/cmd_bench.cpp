// `ptn bench`: llama-bench-style speed figures for a .ptn program or a GGUF file.
#include <cstdio>
#include <iostream>
#include <sstream>

#include "cli/command.h"
#include "cli/runtime_flags.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "export/exporter.h"
#include "runtime/bench.h"
#include "export/model_input.h"

namespace {

struct BenchArgs {
  std::string model;
  int64_t n_prompt = 512, n_gen = 128;
  int threads = 0, reps = 3;
  bool no_repack = false;
  std::string batches;
  std::string depths = "0";
  std::string cache_type = "f16";
  bool json = false;
  std::string quantize;
  bool f16_as_bf16 = false;
  int64_t batch_prompt = 128, batch_gen = 32;
};

std::function<int()> setup(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  auto* c = app.add_subcommand("bench", "Measure prompt processing and generation speed (llama-bench style)");
  using ptn::cli::opt;
  c->add_option(opt("model", "m"), a->model, "a .ptn program, or a GGUF file (exported in memory first)")->required();
  c->add_option(opt("n-prompt", "p"), a->n_prompt, "prompt tokens (default 512; 0 skips)");
  c->add_option(opt("n-gen", "n"), a->n_gen, "generated tokens (default 128; 0 skips)");
  ptn::cli::add_threads_flag(c, &a->threads);
  ptn::cli::add_repack_flag(c, &a->no_repack);
  c->add_option(opt("repetitions", "r"), a->reps, "repetitions after one warm-up (default 3)");
  c->add_option(opt("n-depth", "d"), a->depths,
                "tokens already in the cache before pp and tg, e.g. 0,4096 (llama-bench's -d; default 0)");
  c->add_option(opt("batch"), a->batches, "batched decode with these numbers of sequences, e.g. 1,2,4,8");
  c->add_option(opt("batch-prompt"), a->batch_prompt, "prompt tokens of each sequence before batched decode (default 128)");
  c->add_option(opt("batch-gen"), a->batch_gen, "batched decode steps timed (default 32)");
  c->add_option(opt("cache-type"), a->cache_type, "KV cache dtype (default f16)");
  c->add_option(opt("quantize"), a->quantize, "GGUF input: convert the weights first (as ptn export --quantize)");
  c->add_flag(opt("f16-as-bf16"), a->f16_as_bf16, "GGUF input: run F16 matrices as BF16 (as ptn export --f16-as-bf16)");
  c->add_flag(opt("json"), a->json, "print one JSON object per result");
  return [a] {
    using namespace ptn;
    cli::apply_threads_flag(a->threads);
    cli::apply_repack_flag(a->no_repack);
    BenchOptions o;
    o.n_prompt = a->n_prompt;
    o.n_gen = a->n_gen;
    o.reps = a->reps;
    if (a->batch_prompt < 1 || a->batch_prompt > 65536)
      throw Error(ErrorKind::InvalidArgument, "--batch-prompt", "must be 1..65536");
    if (a->batch_gen < 1 || a->batch_gen > 65536) throw Error(ErrorKind::InvalidArgument, "--batch-gen", "must be 1..65536");
    o.batch_context = a->batch_prompt;
    o.batch_steps = a->batch_gen;
    auto dt = dtype_from_name(a->cache_type);
    if (!dt) throw Error(ErrorKind::InvalidArgument, "--cache-type", "unknown type '" + a->cache_type + "'");
    o.cache_dtype = *dt;
    auto int_list = [](const std::string& text, const char* flag) {
      std::vector<int64_t> v;
      std::stringstream ss(text);
      std::string item;
      while (std::getline(ss, item, ',')) {
        try {
          size_t used = 0;
          v.push_back(std::stoll(item, &used));
          if (used != item.size()) throw std::invalid_argument(item);
        } catch (const std::exception&) {
          throw Error(ErrorKind::InvalidArgument, flag, "not a list of integers: '" + text + "'");
        }
      }
      return v;
    };
    if (!a->batches.empty()) o.batches = int_list(a->batches, "--batch");
    o.depths = int_list(a->depths, "-d");
    std::shared_ptr<const Program> program;
    const ModelInput in = resolve_model_input(a->model);
    if (in.kind == ModelInputKind::Ptn) {
      if (!a->quantize.empty() || a->f16_as_bf16)
        throw Error(ErrorKind::InvalidArgument, a->quantize.empty() ? "--f16-as-bf16" : "--quantize",
                    "applies to a GGUF or HF input only; a .ptn program keeps the weight types it was exported with");
      program = Program::load(in.path);
    } else {
      ExportOptions eo;
      eo.model = in.path;
      eo.quantize = a->quantize;
      eo.f16_as_bf16 = a->f16_as_bf16;
      eo.samples = 0;
      eo.max_seq_length = std::max<int64_t>(512, a->n_prompt > 0 ? std::min<int64_t>(a->n_prompt, 4096) : 512);
      std::ostringstream log;
      program = export_in_memory(eo, log);
    }
    const auto& spec = program->meta().spec;
    BenchReport r = run_bench(program, o, default_pool());
    if (a->json) {
      for (const auto& x : r.results)
        std::printf(
            "{\"model\": \"%s\", \"test\": \"%s\", \"depth\": %lld, \"threads\": %d, \"tokens\": %lld, \"mean_tps\": %.3f, "
            "\"std_tps\": %.3f, \"kv_bytes\": %zu, \"weight_bytes_per_token\": %.0f, \"read_bandwidth_gbs\": %.2f}\n",
            a->model.c_str(), x.test.c_str(), static_cast<long long>(x.depth), default_threads(),
            static_cast<long long>(x.tokens), x.mean_tps,
            x.std_tps, x.kv_bytes, r.weight_bytes_per_token, r.read_bandwidth_gbs);
      return 0;
    }
    std::printf("model: %s (%s, %lld layers, hidden %lld), threads %d, cache %s\n", a->model.c_str(),
                spec.family.c_str(), static_cast<long long>(spec.n_layers), static_cast<long long>(spec.hidden_size),
                default_threads(), a->cache_type.c_str());
    std::printf("%-16s %14s %10s %14s\n", "test", "tokens/s", "± std", "KV MiB");
    for (const auto& x : r.results)
      std::printf("%-16s %14.2f %10.2f %14.2f\n", x.test.c_str(), x.mean_tps, x.std_tps,
                  static_cast<double>(x.kv_bytes) / (1 << 20));
    std::printf("weights streamed per generated token: %.1f MB; read bandwidth in this run: %.1f GB/s\n",
                r.weight_bytes_per_token / 1e6, r.read_bandwidth_gbs);
    for (const auto& x : r.results)
      if (x.test.rfind("tg", 0) == 0 && r.read_bandwidth_gbs > 0)
        std::printf("%s: %.1f GB/s of weights = %.0f%% of the read bandwidth\n", x.test.c_str(),
                    x.mean_tps * r.weight_bytes_per_token / 1e9,
                    100.0 * x.mean_tps * r.weight_bytes_per_token / 1e9 / r.read_bandwidth_gbs);
    return 0;
  };
}

PTN_COMMAND("bench", setup);

}  // namespace
