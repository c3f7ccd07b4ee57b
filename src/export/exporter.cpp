#include "export/exporter.h"
#include "export/pooling_config.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>

#include "core/error.h"
#include "core/file.h"
#include "core/quant.h"
#include "core/threadpool.h"
#include "export/golden.h"
#include "formats/gguf_writer.h"
#include "formats/hf_config.h"
#include "formats/ptn_file.h"
#include "formats/random_weights.h"
#include "formats/weights.h"
#include "graph/checks.h"
#include "kernels/matmul.h"
#include "models/decoder.h"
#include "runtime/executor.h"
#include "runtime/program.h"
#include "tokenizer/hf_tokenizer_json.h"

#ifndef PTN_VERSION
#define PTN_VERSION "0.1.0"
#endif

namespace ptn {

namespace {

// Progress on stderr: a bar when stderr is a terminal, plain lines (every 10%) otherwise.
class Progress {
 public:
  Progress(std::string what, int64_t total, bool enabled = true)
      : what_(std::move(what)), total_(total), tty_(isatty(2)), enabled_(enabled) {}
  void update(int64_t done) {
    if (!enabled_) return;
    const int pct = total_ > 0 ? static_cast<int>(100 * done / total_) : 100;
    if (tty_) {
      const int w = 30, filled = pct * w / 100;
      std::fprintf(stderr, "\r%-28s [%.*s%*s] %3d%%", what_.c_str(), filled, "##############################",
                   w - filled, "", pct);
      if (done >= total_) std::fputc('\n', stderr);
    } else if (pct / 10 != last_ / 10 || done >= total_) {
      if (pct != last_) std::fprintf(stderr, "%s: %d%%\n", what_.c_str(), pct);
    }
    last_ = pct;
    std::fflush(stderr);
  }

 private:
  std::string what_;
  int64_t total_;
  bool tty_;
  bool enabled_;
  int last_ = -1;
};

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

std::string dir_of(const std::string& path) {
  auto p = path.find_last_of('/');
  return p == std::string::npos ? "." : path.substr(0, p);
}

// A source tensor as the reference executor can run it for golden samples: itself (a view of
// the mapped file) when the matmul takes its type and row length, else an f32 copy.
Tensor golden_source_weight(const Tensor& t) {
  if (matmul_supports(t.dtype()) && t.row_size() % traits(t.dtype()).block_size == 0) return t;
  Tensor out = Tensor::zeros(DType::F32, t.shape());
  const int64_t cols = t.row_size();
  default_pool().parallel_for(t.rows(), 16, [&](int64_t b, int64_t e, int) {
    for (int64_t r = b; r < e; ++r) convert_row(t.dtype(), t.row_ptr(r), DType::F32, out.row_ptr(r), cols);
  });
  return out;
}

}  // namespace

namespace {

[[noreturn]] void unknown_policy(const std::string& policy) {
  const std::string known = "(f32, f16, bf16, q8_0, q4_0, q4_k_m, q3_k_m, q2_k, tq1_0, tq2_0, iq4_nl, iq4_xs)";
  if (const auto t = dtype_from_name(policy); t && traits(*t).quantized)
    fail(ErrorKind::InvalidArgument, "--quantize",
         "'" + policy + "' is a tensor type ptn reads (a GGUF's " + dtype_name(*t) + " tensors are kept as they are), not an export mix" +
             (can_quantize(*t) ? "" : std::string("; ptn has no ") + dtype_name(*t) + " quantizer") + ": use one of " + known);
  fail(ErrorKind::InvalidArgument, "--quantize", "unknown type '" + policy + "' " + known);
}

}  // namespace

DType export_weight_type(const std::string& policy, const std::string& name, DType source,
                         const std::vector<int64_t>& shape, const ModelSpec& spec) {
  const bool matrix = shape.size() == 2;
  if (policy.empty()) {
    if (matrix && matmul_supports(source) && shape[1] % traits(source).block_size == 0) return source;
    return DType::F32;
  }
  if (policy == "f32") return DType::F32;
  if (policy == "f16") return matrix ? DType::F16 : DType::F32;
  if (policy == "bf16") return matrix ? DType::BF16 : DType::F32;
  // The quantized mixes are the GGUF file types ptn writes, llama-quantize's rules per tensor
  // (formats/gguf_writer.h), the same for `ptn export --quantize` and `ptn synth --type`: norms
  // and biases f32, MoE routers f32 (an expert choice flipped by 8-bit activations would change
  // a token's whole FFN), the classifier Q6_K, ...
  for (const char* mix : {"q8_0", "q4_0", "q4_k_m", "q3_k_m", "q2_k", "tq1_0", "tq2_0", "iq4_nl", "iq4_xs"})
    if (policy == mix) return matrix ? gguf_tensor_type(gguf_file_type_from_name(policy), spec, name, shape) : DType::F32;
  unknown_policy(policy);
}

DType export_weight_type(const std::string& policy, bool f16_as_bf16, const std::string& name, DType source,
                         const std::vector<int64_t>& shape, const ModelSpec& spec) {
  const DType t = export_weight_type(policy, name, source, shape, spec);
  return f16_as_bf16 && t == DType::F16 && shape.size() == 2 ? DType::BF16 : t;
}

void validate_export_options(const ExportOptions& o) {
  if (o.model.empty()) fail(ErrorKind::InvalidArgument, "--model", "is required");
  if (o.output.empty()) fail(ErrorKind::InvalidArgument, "--output", "is required");
  if (o.static_cache && o.offgraph_cache)
    fail(ErrorKind::InvalidArgument, "--static-cache", "and --offgraph-cache exclude each other");
  if (!o.static_cache && (o.max_context_length > 0 || !o.kv_cache_dtype.empty()))
    fail(ErrorKind::InvalidArgument, o.max_context_length > 0 ? "--max-context-length" : "--kv-cache-dtype",
         "--max_context_length and --kv_cache_dtype describe an in-graph cache and cannot be combined with the "
         "off-graph cache (the default): its capacity and dtype are chosen when the program runs, with "
         "`ptn run --ctx N --cache-type T` or `ptn serve --kv-memory BYTES|--ctx N --cache-type T` "
         "(T: f32, f16, bf16, q8_0). Use --static_cache to export the in-graph baseline instead.");
  if (o.static_cache && o.max_context_length <= 0)
    fail(ErrorKind::InvalidArgument, "--static-cache", "needs --max-context-length N (N > 0)");
  if (o.static_cache && !o.kv_cache_dtype.empty()) {
    auto t = dtype_from_name(o.kv_cache_dtype);
    if (!t || (*t != DType::F32 && *t != DType::F16 && *t != DType::BF16))
      fail(ErrorKind::InvalidArgument, "--kv_cache_dtype", "must be f32, f16 or bf16 for the static cache");
  }
  if (o.max_seq_length < 1 || o.max_seq_length > 65536)
    fail(ErrorKind::InvalidArgument, "--max_seq_length", "must be 1..65536");
  if (o.samples < 0 || o.samples > 64) fail(ErrorKind::InvalidArgument, "--samples", "must be 0..64");
  if (o.sample_decode_tokens < 4 || o.sample_decode_tokens > 256)
    fail(ErrorKind::InvalidArgument, "golden sample decode steps", "must be 4..256");
  if (!o.quantize.empty()) export_weight_type(o.quantize, "x.weight", DType::F32, {1, 256}, ModelSpec{});
  if (o.f16_as_bf16 && o.quantize == "bf16")
    fail(ErrorKind::InvalidArgument, "--f16-as-bf16",
         "--f16-as-bf16 and --quantize bf16 do not combine: --quantize bf16 already stores every matrix as BF16, "
         "so no F16 weight is left to convert. Use --quantize bf16 alone (golden samples on the BF16 weights), "
         "or --quantize f16 --f16-as-bf16 (the same BF16 weights, with golden samples on the source weights so "
         "`ptn verify` shows what the conversion costs)");
  if (o.golden_from_source && o.samples == 0)
    fail(ErrorKind::InvalidArgument, "--golden-from-source", "needs golden samples: drop --samples 0");
  if (o.f16_as_bf16 && o.quantize == "f32")
    fail(ErrorKind::InvalidArgument, "--f16-as-bf16",
         "--f16-as-bf16 and --quantize f32 contradict each other: --quantize f32 stores every matrix exactly as "
         "f32, --f16-as-bf16 rounds F16 matrices to BF16; drop one of them");
}

namespace {

struct Built {
  ProgramMeta meta;
  std::map<std::string, Tensor> tensors;  // weights
  std::map<std::string, Tensor> extra;    // golden logits, tokenizer strings
  std::string op_report;
};

// The weight source --model (and --gguf, --random_weights) name; *hf_dir: the HF directory, if any.
std::unique_ptr<WeightSource> open_source(const ExportOptions& o, std::string* hf_dir_out) {
  std::unique_ptr<WeightSource> src;
  std::string& hf_dir = *hf_dir_out;
  if (o.random_weights) {
    std::string cfg = o.model;
    if (is_directory(cfg)) cfg += "/config.json";
    if (!ends_with(cfg, ".json"))
      fail(ErrorKind::InvalidArgument, "--random_weights", "needs --model to be a config.json or a directory with one");
    src = random_weights(model_spec_from_hf_config_file(cfg), o.seed);
    hf_dir = dir_of(cfg);
  } else {
    std::string model = o.model;
    if (ends_with(model, ".json") && !is_directory(model)) {
      // A config.json with --gguf is its directory with the GGUF's weights.
      if (o.gguf.empty())
        fail(ErrorKind::InvalidArgument, "--model",
             "only a config.json was given: add --random-weights, or --gguf FILE for the weights");
      model = dir_of(model);
    }
    src = open_weights(model, o.gguf);
    if (is_directory(model)) hf_dir = model;
  }
  return src;
}

// Every source tensor is used or reported: known optional parts (a vision tower, a tied
// classifier's alias) are left out with a note in the log and the provenance; anything else is
// refused by name, since the model would otherwise run without a weight its source has.
std::vector<std::string> check_unused_tensors(const WeightSource& src, const ModelSpec& spec, std::ostream& log) {
  const UnusedTensors u = classify_unused_tensors(spec, src.unused_source_tensors());
  if (!u.refused.empty()) {
    std::string list;
    for (size_t i = 0; i < u.refused.size() && i < 8; ++i) list += (i ? ", " : "") + u.refused[i];
    if (u.refused.size() > 8) list += ", ... (" + std::to_string(u.refused.size()) + " in all)";
    // Biases are the common case: say which config key (or family fact) would have read them.
    bool attn_bias = false, mlp_bias = false;
    for (const std::string& n : u.refused) {
      const bool bias = n.size() > 5 && n.compare(n.size() - 5, 5, ".bias") == 0;
      attn_bias = attn_bias || (bias && n.find("self_attn.") != std::string::npos);
      mlp_bias = mlp_bias || (bias && n.find("mlp.") != std::string::npos);
    }
    const bool gguf = src.describe().rfind("GGUF file", 0) == 0;
    std::string hint = gguf ? "ptn reads the '" + spec.architecture + "' GGUF architecture with no part that uses them"
                            : "the config describes no part that reads them";
    if (attn_bias) hint += "; attention biases are read only with attention_bias: true, and only where " + spec.family + "'s transformers modeling has them";
    if (mlp_bias) hint += "; MLP biases are read only with mlp_bias: true";
    fail(ErrorKind::Unsupported, src.describe(),
         "tensors the model does not use: " + list + " (" + hint + "); ptn refuses to drop weights silently");
  }
  for (const std::string& n : u.notes) log << n << "\n";
  return u.notes;
}

// Refuses windowed / chunked layers unless the cache op may honour them (off-graph cache).
void check_attention_policies(const ModelSpec& spec, const ExportOptions& o) {
  std::vector<std::string> windowed;
  for (size_t l = 0; l < spec.layers.size(); ++l)
    if (spec.layers[l].kind != AttnKind::Full)
      windowed.push_back(std::to_string(l) + " (" + attn_kind_name(spec.layers[l].kind) + " " +
                         std::to_string(spec.layers[l].span) + ")");
  if (!windowed.empty() && !o.allow_windows) {
    std::string list;
    for (size_t i = 0; i < windowed.size() && i < 8; ++i) list += (i ? ", " : "") + windowed[i];
    if (windowed.size() > 8) list += ", ...";
    fail(ErrorKind::Unsupported, o.model,
         "layers " + list + " use sliding-window or chunked attention (config fields sliding_window / layer_types / "
         "use_sliding_window / attention_chunk_size), which this cache cannot express");
  }

}

// The decoder graph, its checks and op-support report (in *rep), and the program's meta.
ProgramMeta build_meta(const ModelSpec& spec, const ExportOptions& o, std::ostream& log, OpSupportReport* rep_out) {
  BuildOptions bo;
  bo.static_cache = o.static_cache;
  bo.max_context_length = o.max_context_length;
  if (!o.kv_cache_dtype.empty()) bo.static_cache_dtype = *dtype_from_name(o.kv_cache_dtype);
  ProgramMeta meta;
  meta.spec = spec;
  meta.graph = build_decoder_graph(spec, bo);
  if (o.static_cache) check_static_cache(meta.graph, spec.n_layers);
  else check_offgraph(meta.graph, spec.n_layers);
  OpSupportReport& rep = *rep_out;
  rep = op_support(meta.graph, engine_ops());
  log << rep.to_string() << "\n";
  if (!rep.ok()) fail(ErrorKind::Unsupported, o.model, "the engine cannot run this graph:\n" + rep.to_string());
  meta.cache_spec = cache_spec_from_model(spec);
  meta.max_seq_length = o.max_seq_length;
  meta.static_cache = o.static_cache;
  meta.static_context = o.max_context_length;
  meta.static_cache_dtype = bo.static_cache_dtype;
  if (o.static_cache && meta.cache_spec.max_positions > 0)
    meta.cache_spec.max_positions = std::min(meta.cache_spec.max_positions, o.max_context_length);

  return meta;
}

// The graph's weights in the types the options ask for, with what the golden samples and the
// provenance need to know about the conversion.
struct ConvertedWeights {
  std::map<std::string, Tensor> tensors;
  // The source tensors of the matrices converted by --f16-as-bf16 (and of every lossily converted
  // weight with --golden-from-source), for the golden samples: views of the mapped source files
  // where the source allows; only these differ from `tensors`. Kept only when samples are due.
  std::map<std::string, Tensor> golden_overrides;
  int64_t f16_converted = 0, lossy_converted = 0, measured = 0;
};

ConvertedWeights convert_weights(WeightSource& src, const ModelSpec& spec, const ProgramMeta& meta,
                                 const ExportOptions& o, std::ostream& log) {
  std::set<std::string> needed;
  for (const Node& n : meta.graph.nodes)
    for (const auto& w : n.weights) needed.insert(w);
  ConvertedWeights cw;
  std::map<std::string, Tensor>& tensors = cw.tensors;
  Progress prog("converting weights", static_cast<int64_t>(needed.size()), o.progress);
  int64_t done = 0;
  std::map<std::string, int> type_counts;
  std::map<std::string, Tensor>& golden_overrides = cw.golden_overrides;
  std::map<std::string, int> source_matrix_types;
  int64_t &f16_converted = cw.f16_converted, &lossy_converted = cw.lossy_converted, &measured = cw.measured;
  for (const auto& name : needed) {
    if (!src.has(name))
      fail(ErrorKind::Corrupt, src.describe(), "tensor '" + name + "' needed by the graph is missing");
    Tensor t = src.get(name);
    const DType to = export_weight_type(o.quantize, o.f16_as_bf16, name, t.dtype(), t.shape(), spec);
    if (t.ndim() == 2) ++source_matrix_types[dtype_name(t.dtype())];
    const bool f16_rule = o.f16_as_bf16 && to == DType::BF16 &&
                          export_weight_type(o.quantize, false, name, t.dtype(), t.shape(), spec) == DType::F16;
    // Widening to f32 (from f16, bf16 or a block type) is exact; every other change of type rounds.
    const bool lossy = to != t.dtype() && to != DType::F32;
    f16_converted += f16_rule;
    lossy_converted += lossy;
    if (f16_rule || (o.golden_from_source && lossy)) {
      ++measured;
      if (o.samples > 0) golden_overrides[name] = golden_source_weight(t);
    }
    if (t.dtype() == to) {
      tensors[name] = t;
    } else {
      Tensor out = Tensor::zeros(to, t.shape());
      const int64_t rows = t.rows(), cols = t.row_size();
      const Tensor& in = t;
      default_pool().parallel_for(rows, 16, [&](int64_t b, int64_t e, int) {
        for (int64_t r = b; r < e; ++r) convert_row(in.dtype(), in.row_ptr(r), to, out.row_ptr(r), cols);
      });
      tensors[name] = out;
    }
    ++type_counts[dtype_name(to)];
    prog.update(++done);
  }
  log << "weights:";
  for (const auto& [t, n] : type_counts) log << " " << t << " x" << n;
  log << "\n";
  if (o.golden_from_source && lossy_converted == 0)
    fail(ErrorKind::InvalidArgument, "--golden-from-source",
         "no weight of " + src.describe() + " changes type lossily" +
             (o.quantize.empty() ? std::string(" (no --quantize)") : " under --quantize " + o.quantize) +
             ", so the golden samples would be the same; drop the flag");
  if (o.f16_as_bf16) {
    if (f16_converted == 0) {
      std::string types;
      for (const auto& [t, n] : source_matrix_types) types += (types.empty() ? "" : ", ") + t + " x" + std::to_string(n);
      fail(ErrorKind::InvalidArgument, "--f16-as-bf16",
           "no matrix of " + src.describe() + " would be stored as F16 (source matrices: " + types +
               (o.quantize.empty() ? "" : ", --quantize " + o.quantize) +
               "), so there is nothing to convert; add --quantize f16 to run the weights as BF16, or drop the flag");
    }
    log << "f16 as bf16: " << f16_converted << " matrices stored as bf16"
        << (o.samples > 0 ? "; golden samples from the source weights" : "") << "\n";
  }
  if (o.golden_from_source)
    log << "golden samples from the source weights of " << measured << " converted tensors\n";

  return cw;
}

// The tokenizer: the HF directory's tokenizer.json, else the source's (GGUF), else --gguf's.
std::optional<TokenizerSpec> load_tokenizer(WeightSource& src, const std::string& hf_dir, const ModelSpec& spec,
                                            const ExportOptions& o, std::ostream& log) {
  std::optional<TokenizerSpec> tok;
  if (!hf_dir.empty() && file_exists(hf_dir + "/tokenizer.json")) tok = load_hf_tokenizer(hf_dir + "/tokenizer.json");
  else tok = src.tokenizer();
  if (!tok && !o.gguf.empty()) tok = open_weights(o.gguf)->tokenizer();
  if (tok) {
    if (static_cast<int64_t>(tok->tokens.size()) > spec.vocab_size)
      fail(ErrorKind::Corrupt, "tokenizer", "has " + std::to_string(tok->tokens.size()) +
                                                " tokens, more than the model's vocabulary of " +
                                                std::to_string(spec.vocab_size));
    log << "tokenizer: " << tok->tokens.size() << " tokens ("
        << (tok->kind == TokenizerKind::SentencePiece ? "sentencepiece" : "byte-level BPE") << ")"
        << (tok->chat_template.empty() ? "" : ", with chat template") << "\n";
  } else {
    log << "tokenizer: none (the program runs on token ids only)\n";
  }

  return tok;
}

nlohmann::json provenance(const WeightSource& src, const ExportOptions& o, const ConvertedWeights& cw,
                          const std::vector<std::string>& left_out) {
  const int64_t f16_converted = cw.f16_converted, lossy_converted = cw.lossy_converted, measured = cw.measured;
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : src.source_files()) files.push_back({{"path", f.path}, {"bytes", f.size}, {"sha256", f.sha256}});
  nlohmann::json prov = {{"exporter", std::string("ptn ") + PTN_VERSION},
                     {"source", src.describe()},
                     {"files", files},
                     {"random_weights", o.random_weights},
                     {"seed", o.seed},
                     {"quantize", o.quantize.empty() ? "source types" : o.quantize},
                     {"command_line", o.command_line}};
  if (!left_out.empty()) prov["left_out"] = left_out;
  if (o.f16_as_bf16 || o.golden_from_source) {
    // "f16->bf16" alone when that rule is the only lossy change the goldens see (verify has a
    // default threshold for it); otherwise the --quantize policy too.
    std::string conversion = kF16AsBf16Conversion;
    if (lossy_converted > f16_converted && o.golden_from_source)
      conversion = "quantize " + o.quantize + (f16_converted > 0 ? std::string(" + ") + kF16AsBf16Conversion : "");
    prov["weight_conversion"] = conversion;
    prov["converted_tensors"] = static_cast<uint64_t>(measured);
    if (o.samples > 0) prov["golden_weights"] = kGoldenFromSource;
  }

  return prov;
}

// Golden samples from the reference ops and the reference cache (into *extra, meta->samples).
void add_golden_samples(const ExportOptions& o, ProgramMeta* meta_out, ConvertedWeights& cw,
                        std::map<std::string, Tensor>* extra_out) {
  ProgramMeta& meta = *meta_out;
  std::map<std::string, Tensor>& extra = *extra_out;
  const std::map<std::string, Tensor>& tensors = cw.tensors;
  std::map<std::string, Tensor>& golden_overrides = cw.golden_overrides;
  // With --f16-as-bf16 / --golden-from-source the reference runs on the source weights of the
  // converted tensors, so the samples measure the conversion. The map copies share storage.
  std::map<std::string, Tensor> golden_tensors = tensors;
  for (auto& [name, t] : golden_overrides) golden_tensors[name] = t;
  golden_overrides.clear();
  auto program = Program::from_memory(meta, std::move(golden_tensors), o.output);
  GoldenOptions go;
  go.samples = o.samples;
  go.prompt_tokens = o.sample_prompt_tokens > 0 ? std::min(o.sample_prompt_tokens, o.max_seq_length)
                                                 : std::min<int64_t>(o.max_seq_length, 24);
  go.decode_tokens = o.sample_decode_tokens;
  // A sample's prompt and decode steps must fit the positions the program can hold: the
  // static context, or the model's context length.
  const int64_t positions = o.static_cache ? o.max_context_length : meta.cache_spec.max_positions;
  if (positions > 0) {
    const int64_t room = positions - o.sample_decode_tokens;
    if (room < 1)
      fail(ErrorKind::InvalidArgument, o.static_cache ? "--max_context_length" : "model context length",
           std::to_string(positions) + " positions leave no room for a golden sample (" +
               std::to_string(o.sample_decode_tokens) + " decode steps after a prompt): use at least " +
               std::to_string(o.sample_decode_tokens + 1) + ", or --samples 0");
    go.prompt_tokens = std::min(go.prompt_tokens, room);
  }
  go.seed = o.seed ^ 0x9e3779b97f4a7c15ull;
  Progress gp("computing golden samples", o.samples, o.progress);
  meta.samples = compute_golden_samples(program, go, extra, [&](int i) { gp.update(i); });
}

Built build_program(const ExportOptions& o, std::ostream& log) {
  std::string hf_dir;
  std::unique_ptr<WeightSource> src = open_source(o, &hf_dir);
  ModelSpec spec = src->spec();
  log << "source: " << src->describe() << "\n";
  log << "model: " << spec.family << " (" << spec.architecture << "), " << spec.n_layers << " layers, hidden "
      << spec.hidden_size << ", heads " << spec.n_heads << "/" << spec.n_kv_heads << ", vocab " << spec.vocab_size
      << "\n";

  for (const std::string& n : spec.source_notes) log << "note: " << n << "\n";
  const std::vector<std::string> left_out = check_unused_tensors(*src, spec, log);
  check_attention_policies(spec, o);
  OpSupportReport rep;
  ProgramMeta meta = build_meta(spec, o, log, &rep);
  ConvertedWeights cw = convert_weights(*src, spec, meta, o, log);
  meta.tokenizer = load_tokenizer(*src, hf_dir, spec, o, log);
  meta.embedding = read_embedding_info(hf_dir, spec.hidden_size);
  if (!meta.embedding.pooling.empty())
    log << "embedding pooling: " << meta.embedding.pooling << " (sentence-transformers modules.json)\n";
  meta.provenance = provenance(*src, o, cw, left_out);
  std::map<std::string, Tensor> extra;
  if (o.samples > 0) add_golden_samples(o, &meta, cw, &extra);

  Built b;
  b.meta = std::move(meta);
  b.tensors = std::move(cw.tensors);
  b.extra = std::move(extra);
  b.op_report = rep.to_string();
  return b;
}

}  // namespace

std::shared_ptr<const Program> export_in_memory(const ExportOptions& o, std::ostream& log) {
  ExportOptions opts = o;
  if (opts.output.empty()) opts.output = "(in memory)";
  validate_export_options(opts);
  Built b = build_program(opts, log);
  // Golden logits join the weights; the tokenizer stays in the meta (a file stores it as tensors).
  for (auto& [name, t] : b.extra) b.tensors[name] = t;
  return Program::from_memory(std::move(b.meta), std::move(b.tensors), opts.output);
}

ExportResult export_program(const ExportOptions& o, std::ostream& log) {
  validate_export_options(o);
  const auto t0 = std::chrono::steady_clock::now();
  Built b = build_program(o, log);
  auto& meta = b.meta;
  auto& tensors = b.tensors;
  auto& extra = b.extra;
  int64_t done = 0;
  // --- write --------------------------------------------------------------------------------
  nlohmann::json manifest = meta_to_json(meta, extra);
  PtnWriter w(o.output);
  Progress wp("writing", static_cast<int64_t>(tensors.size() + extra.size()));
  done = 0;
  for (const auto& [name, t] : tensors) {
    w.add_tensor(name, t);
    wp.update(++done);
  }
  for (const auto& [name, t] : extra) {
    w.add_tensor(name, t);
    wp.update(++done);
  }
  w.finish(manifest);
  ExportResult r;
  r.bytes = w.bytes_written();
  r.meta = std::move(meta);
  r.op_report = b.op_report;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log << "wrote " << o.output << " (" << r.bytes << " bytes, " << r.meta.samples.size() << " golden samples) in "
      << secs << " s\n";
  return r;
}

}  // namespace ptn
