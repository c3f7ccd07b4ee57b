// `ptn verify`: re-run a program's golden samples through the runtime with every cache.
#include <cstdio>

#include "cli/command.h"
#include "cli/runtime_flags.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "export/exporter.h"
#include "runtime/verify.h"

namespace {

// A string field of the provenance, "" when absent; throws Corrupt naming the file and field
// when it is there but not a string.
std::string provenance_string(const nlohmann::json& prov, const char* field, const std::string& file) {
  if (!prov.is_object() || !prov.contains(field)) return "";
  const auto& v = prov[field];
  if (!v.is_string())
    throw ptn::Error(ptn::ErrorKind::Corrupt, file, std::string("provenance field '") + field + "' must be a string");
  return v.get<std::string>();
}

struct VerifyArgs {
  std::string file;
  std::string cache = "all";
  std::string mode = "optimized";
  double max_nmse = 0;  // 0: chosen from the program's weight types
  int threads = 0;
  bool no_repack = false;
};

std::function<int()> setup(CLI::App& app) {
  auto a = std::make_shared<VerifyArgs>();
  auto* c = app.add_subcommand("verify", "Check that the runtime reproduces a program's golden samples");
  using ptn::cli::opt;
  c->add_option("file", a->file, "the .ptn program (a GGUF or HF directory: exported in memory with 2 golden samples)")->required();
  c->add_option(opt("cache"), a->cache, "reference, paged-f32, paged-f16, paged-bf16, paged-q8_0, paged-q4_0, or all (default)");
  c->add_option(opt("mode"), a->mode, "optimized (default) or reference executor");
  auto* nmse_opt = c->add_option(opt("max-nmse"), a->max_nmse,
                "pass threshold on the logits' NMSE (default 1e-4 for float weights, 1e-2 when integer kernels "
                "quantize activations for quantized weights)");
  ptn::cli::add_threads_flag(c, &a->threads);
  ptn::cli::add_repack_flag(c, &a->no_repack);
  return [a, nmse_opt] {
    if (nmse_opt->count() && !(a->max_nmse > 0))
      throw ptn::Error(ptn::ErrorKind::InvalidArgument, "--max-nmse", "must be a positive number");
    ptn::cli::apply_threads_flag(a->threads);
    ptn::cli::apply_repack_flag(a->no_repack);
    // A GGUF or HF directory is exported in memory with two golden samples from the reference
    // path, so the optimized path is checked against them as for a .ptn program.
    ptn::OpenModelOptions mo;
    mo.flag = "file";
    mo.verify = ptn::VerifyLevel::Full;
    mo.samples = 2;
    auto program = ptn::cli::load_model("verify", a->file, mo);
    const auto& meta = program->meta();
    std::printf("%s: %zu golden samples, %s cache program, kernels %s\n", a->file.c_str(), meta.samples.size(),
                meta.static_cache ? "static" : "off-graph", ptn::simd_level_name(ptn::simd_level()));
    if (meta.samples.empty()) {
      std::printf("no golden samples to verify (export with --samples K)\n");
      return 1;
    }
    // Float weights run through float kernels: the optimized path must match the reference
    // closely. Quantized weights run through integer kernels that quantize activations to 8 bits
    // (as llama.cpp's do), which the reference does not; on random-weight models whose logits
    // are nearly flat that noise reaches NMSE ~3e-3, while a wrong kernel gives ~1.
    bool quantized = false;
    for (const auto& [name, t] : program->tensors())
      if (name.rfind("golden.", 0) != 0 && name.rfind("tokenizer.", 0) != 0 && ptn::traits(t.dtype()).quantized)
        quantized = true;
    // Golden samples computed on the source weights before a lossy conversion at export
    // (--f16-as-bf16) measure that conversion: its cost is part of every comparison below.
    const std::string conversion = provenance_string(meta.provenance, "weight_conversion", a->file);
    const bool from_source = provenance_string(meta.provenance, "golden_weights", a->file) == ptn::kGoldenFromSource;
    if (from_source && conversion != ptn::kF16AsBf16Conversion && !nmse_opt->count())
      throw ptn::Error(ptn::ErrorKind::Unsupported, a->file,
                       conversion.empty()
                           ? std::string("golden samples were computed on the source weights but the provenance "
                                         "records no weight_conversion: pass --max-nmse")
                           : "golden samples were computed on the source weights before the weight conversion '" +
                                 conversion + "', whose cost this ptn has no default threshold for: pass --max-nmse");
    if (from_source) {
      const auto& n = meta.provenance.value("converted_tensors", nlohmann::json());
      const std::string count = n.is_number_unsigned() ? std::to_string(n.get<uint64_t>()) + " " : "";
      std::printf("golden samples come from the source weights, before the %s conversion of %smatrices: the nmse "
                  "and top-1 below are what the conversion costs, plus the runtime's own error (%s)\n",
                  conversion.empty() ? "(unrecorded)" : conversion.c_str(), count.c_str(),
                  quantized ? "up to ~3e-3 where integer kernels quantize the activations" : "~1e-6 or less");
    }
    if (!nmse_opt->count()) {
      a->max_nmse = quantized ? 1e-2 : 1e-4;
      // F16 -> BF16 rounds each weight to an 8-bit mantissa (relative error up to 2^-9, NMSE ~5e-6 per
      // product) and the BF16 kernels round activations likewise; the error grows with depth and
      // with flat logits. Measured: stories260K 7e-6, a 16-layer 1B-shaped random model 3.3e-4
      // (worst sample). 3e-3 (the f16 cache's allowance) leaves 10x for deeper models while a
      // wrong kernel (NMSE ~1) still fails.
      if (from_source) a->max_nmse = std::max(a->max_nmse, ptn::kF16AsBf16VerifyMaxNmse);
    }
    std::printf("pass threshold: nmse <= %g\n", a->max_nmse);
    struct Variant {
      std::string label, kind;
      ptn::DType dtype;
      double nmse;
    };
    std::vector<Variant> variants;
    if (meta.static_cache) {
      variants.push_back({"static", "static", ptn::DType::F32, a->max_nmse});
    } else {
      std::vector<Variant> all = {{"reference", "reference", ptn::DType::F32, a->max_nmse},
                                  {"paged-f32", "paged", ptn::DType::F32, a->max_nmse},
                                  {"paged-f16", "paged", ptn::DType::F16, std::max(a->max_nmse, 3e-3)},
                                  {"paged-bf16", "paged", ptn::DType::BF16, std::max(a->max_nmse, 1e-2)},
                                  {"paged-q8_0", "paged", ptn::DType::Q8_0, std::max(a->max_nmse, 1e-2)},
                                  {"paged-q4_0", "paged", ptn::DType::Q4_0, std::max(a->max_nmse, 1e-1)}};
      for (auto& v : all)
        if (a->cache == "all" || a->cache == v.label || (a->cache == "paged" && v.label == "paged-f32"))
          variants.push_back(v);
      if (variants.empty()) throw ptn::Error(ptn::ErrorKind::InvalidArgument, "--cache", "unknown cache '" + a->cache + "'");
    }
    bool ok = true;
    std::vector<ptn::SampleCheck> cost;  // the first f32-cache variant's checks: the conversion's cost
    std::string cost_label;
    for (const auto& v : variants) {
      ptn::VerifyOptions vo;
      vo.mode = a->mode == "reference" ? ptn::ExecMode::Reference : ptn::ExecMode::Optimized;
      vo.cache_kind = v.kind;
      vo.cache.dtype = v.dtype;
      vo.max_nmse = v.nmse;
      if ((v.dtype == ptn::DType::Q8_0 || v.dtype == ptn::DType::Q4_0) && meta.cache_spec.layers.front().head_dim_k % 32 != 0) {
        std::printf("  %-11s skipped: head dim %lld is not a multiple of 32\n", v.label.c_str(),
                    static_cast<long long>(meta.cache_spec.layers.front().head_dim_k));
        continue;
      }
      for (const auto& r : ptn::verify_samples(program, vo)) {
        std::printf("  %-11s sample %d (%lld prompt + %lld decode): max|err| %.3g  nmse %.3g  top1 %.0f%%  top5 %.0f%%  %s\n",
                    v.label.c_str(), r.sample, static_cast<long long>(r.prompt_tokens),
                    static_cast<long long>(r.decode_tokens), r.cmp.max_abs_err, r.cmp.nmse, 100 * r.cmp.top1,
                    100 * r.cmp.top5, r.pass ? "ok" : "FAIL");
        ok = ok && r.pass;
        if (from_source && v.dtype == ptn::DType::F32 && (cost_label.empty() || cost_label == v.label)) {
          cost_label = v.label;
          cost.push_back(r);
        }
      }
    }
    if (from_source && !cost.empty()) {
      double sum = 0, worst = 0, top1 = 0;
      for (const auto& r : cost) {
        sum += r.cmp.nmse;
        worst = std::max(worst, r.cmp.nmse);
        top1 += r.cmp.top1;
      }
      const double n = static_cast<double>(cost.size());
      std::printf("%s conversion cost (%s cache, %s executor, vs the source weights): nmse mean %.3g, worst %.3g; "
                  "top-1 agreement %.0f%%\n",
                  conversion.c_str(), cost_label.c_str(), a->mode.c_str(), sum / n, worst, 100 * top1 / n);
    }
    std::printf("%s\n", ok ? "verify: all samples pass" : "verify: FAILED");
    return ok ? 0 : 1;
  };
}

PTN_COMMAND("verify", setup);

}  // namespace
