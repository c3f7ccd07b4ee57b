#include "runtime/inspect.h"

#include <cstdio>
#include <map>

#include "core/error.h"
#include "formats/ptn_file.h"
#include "runtime/program.h"

namespace ptn {

bool is_ptn_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[8] = {};
  const size_t n = std::fread(magic, 1, sizeof magic, f);
  std::fclose(f);
  return has_ptn_magic(magic, n);
}

namespace {

// Experts per layer and what one token uses: every weight counts once, except that of each
// layer's routed experts only top_k / E do (the embedding table counts whole although a token
// reads one row of it, as parameter counts are usually quoted). Bytes: the weights a decode
// step streams, the embedding table left out unless it is also the classifier.
void print_experts(const ModelSpec& s, const PtnFile& f) {
  if (s.n_experts <= 0) return;
  int64_t moe_layers = 0;
  for (const LayerAttention& l : s.layers) moe_layers += l.moe;
  std::printf("  experts: %lld per layer on %lld of %lld layers, %lld used per token (%s), expert ffn %lld",
              static_cast<long long>(s.n_experts), static_cast<long long>(moe_layers), static_cast<long long>(s.n_layers),
              static_cast<long long>(s.n_experts_used), s.norm_topk_prob ? "renormalised" : "not renormalised",
              static_cast<long long>(s.expert_ffn_size));
  if (s.expert_sigmoid) std::printf(", sigmoid scores");
  if (s.expert_weight_input) std::printf(" applied to the expert's input");
  if (s.expert_selection_bias) std::printf(", chosen with a selection bias");
  if (s.expert_groups > 0)
    std::printf(", within the best %lld of %lld groups (%s)", static_cast<long long>(s.expert_groups_used),
                static_cast<long long>(s.expert_groups), s.expert_group_top2 ? "by their two best" : "by their best");
  if (s.expert_routed_scale != 1.0f) std::printf(", weights x %g", s.expert_routed_scale);
  if (s.shared_expert_ffn_size > 0)
    std::printf(", %sshared expert ffn %lld", s.shared_expert_gate ? "" : "ungated ", static_cast<long long>(s.shared_expert_ffn_size));
  std::printf("\n");
  double total = 0, active = 0, stream = 0;
  const double used = static_cast<double>(s.n_experts_used) / static_cast<double>(s.n_experts);
  for (const auto& t : f.tensor_infos()) {
    if (t.name.rfind("golden.", 0) == 0 || t.name.rfind("tokenizer.", 0) == 0) continue;
    double n = 1;
    for (int64_t d : t.shape) n *= static_cast<double>(d);
    const size_t dot = t.name.find('.', 4);
    std::string what;
    int64_t e = 0;
    const bool expert = t.name.rfind("blk.", 0) == 0 && dot != std::string::npos && parse_expert_tensor(t.name.substr(dot + 1), &what, &e);
    const double share = expert ? used : 1.0;
    total += n;
    active += n * share;
    if (t.name != "token_embd.weight" || s.tie_word_embeddings) stream += static_cast<double>(t.nbytes) * share;
  }
  std::printf("  parameters: %.0f in all, %.0f active per token; a decode step streams about %.4g MB of weights\n", total,
              active, stream / 1e6);
}

}  // namespace

int inspect_ptn_file(const std::string& path) {
  auto program = Program::load(path, VerifyLevel::Cheap);
  const ProgramMeta& m = program->meta();
  const ModelSpec& s = m.spec;
  const PtnFile* f = program->file();
  std::printf("file: %s\n", path.c_str());
  std::printf("format: .ptn version %u, %llu bytes, %zu tensors\n", f->format_version(),
              static_cast<unsigned long long>(f->file_size()), f->tensor_infos().size());
  std::printf("cache: %s\n", m.static_cache ? "static (in-graph buffers)" : "off-graph (supplied by the runtime)");
  if (m.static_cache)
    std::printf("  static context %lld positions, dtype %s\n", static_cast<long long>(m.static_context),
                dtype_name(m.static_cache_dtype));
  std::printf("max_seq_length: %lld\n", static_cast<long long>(m.max_seq_length));
  std::printf("\nprovenance:\n%s\n", m.provenance.dump(2).c_str());
  std::printf("\nmodel: %s (%s)\n", s.family.c_str(), s.architecture.c_str());
  std::printf("  vocab %lld, hidden %lld, ffn %lld, layers %lld, heads %lld, kv heads %lld, head dim %lld\n",
              static_cast<long long>(s.vocab_size), static_cast<long long>(s.hidden_size),
              static_cast<long long>(s.intermediate_size), static_cast<long long>(s.n_layers),
              static_cast<long long>(s.n_heads), static_cast<long long>(s.n_kv_heads),
              static_cast<long long>(s.head_dim));
  std::printf("  context %lld, norm eps %g%s, activation %s, rope theta %g (%s scaling, factor %g)\n",
              static_cast<long long>(s.max_position_embeddings), s.norm_eps, s.norm_weight_plus_one ? " (1+w)" : "",
              activation_name(s.activation), s.rope_theta, rope_scaling_name(s.rope_scaling.type),
              s.rope_scaling.factor);
  std::printf("  tied embeddings %s, attention bias %s, q/k norm %s, sandwich norms %s, softcap attn %g final %g\n",
              s.tie_word_embeddings ? "yes" : "no",
              s.attn_bias ? (s.attn_output_bias ? "q/k/v/o" : "q/k/v") : (s.attn_output_bias ? "o" : "no"),
              s.qk_norm ? (s.qk_norm_full ? "over all heads" : "yes") : "no",
              s.sandwich_norms ? (s.pre_norms ? "yes" : "post-norms only") : "no", s.attn_logit_softcap, s.final_logit_softcap);
  if (s.mlp_bias) std::printf("  MLP bias yes\n");
  if (s.attn_sinks) std::printf("  attention sinks yes (one logit per query head, every layer)\n");
  if (s.kv_lora_rank > 0)
    std::printf("  latent attention: kv rank %lld%s, per head nope %lld + rope %lld, value %lld; the cache holds the latent and the RoPE key\n",
                static_cast<long long>(s.kv_lora_rank),
                s.q_lora_rank > 0 ? (", q rank " + std::to_string(s.q_lora_rank)).c_str() : "",
                static_cast<long long>(s.qk_nope_dim), static_cast<long long>(s.rope_dim), static_cast<long long>(s.v_head_dim));
  print_experts(s, *f);
  std::printf("\ncache spec (per layer: kv heads x head dim k/v, policy):\n");
  for (size_t l = 0; l < m.cache_spec.layers.size(); ++l) {
    const auto& c = m.cache_spec.layers[l];
    std::printf("  layer %3zu: %lld x %lld/%lld, %s", l, static_cast<long long>(c.n_kv_heads),
                static_cast<long long>(c.head_dim_k), static_cast<long long>(c.head_dim_v), attn_kind_name(c.kind));
    if (c.kind != AttnKind::Full) std::printf(" %lld", static_cast<long long>(c.span));
    if (c.sinks) std::printf(", sinks");
    if (c.v_in_k) std::printf(", V is the start of K");
    std::printf("\n");
  }
  // Embeddings: the graph's hidden output and what the model says about pooling.
  if (m.graph.hidden < 0) {
    std::printf("\nembeddings: no (no 'hidden' output: exported before ptn computed embeddings)\n");
  } else {
    std::printf("\nembeddings: hidden output [R, %lld], pooling %s", static_cast<long long>(m.graph.values[m.graph.hidden].shape[1]),
                m.embedding.pooling.empty() ? "not declared (serve pools the last token)" : m.embedding.pooling.c_str());
    if (m.embedding.matryoshka) {
      std::printf(", Matryoshka");
      for (size_t i = 0; i < m.embedding.matryoshka_dimensions.size(); ++i)
        std::printf("%s%lld", i ? ", " : " sizes ", static_cast<long long>(m.embedding.matryoshka_dimensions[i]));
    }
    std::printf("\n");
  }
  std::printf("\nops:");
  for (const auto& [op, n] : m.graph.op_histogram()) std::printf(" %s x%d", op.c_str(), n);
  std::printf("\n\nweights by dtype:\n");
  std::map<std::string, std::pair<int, uint64_t>> by_type;
  for (const auto& t : f->tensor_infos()) {
    if (t.name.rfind("golden.", 0) == 0 || t.name.rfind("tokenizer.", 0) == 0) continue;
    auto& e = by_type[dtype_name(t.dtype)];
    ++e.first;
    e.second += t.nbytes;
  }
  for (const auto& [t, e] : by_type)
    std::printf("  %-6s %4d tensors %12llu bytes\n", t.c_str(), e.first, static_cast<unsigned long long>(e.second));
  // Written by `ptn export --f16-as-bf16` (provenance "weight_conversion", "converted_tensors",
  // "golden_weights").
  const nlohmann::json& pv = m.provenance;
  if (pv.is_object() && pv.contains("weight_conversion") && pv["weight_conversion"].is_string()) {
    std::printf("  converted at export: %s", pv["weight_conversion"].get<std::string>().c_str());
    if (pv.contains("converted_tensors") && pv["converted_tensors"].is_number_unsigned())
      std::printf(", %llu matrices", static_cast<unsigned long long>(pv["converted_tensors"].get<uint64_t>()));
    const bool from_source = pv.contains("golden_weights") && pv["golden_weights"] == "source";
    std::printf("; golden samples computed on the %s weights\n", from_source ? "source (unconverted)" : "converted");
  }
  if (m.tokenizer) {
    const auto& t = *m.tokenizer;
    std::printf("\ntokenizer: %s, %zu tokens, bos %d, eos %d, chat template %s\n",
                t.kind == TokenizerKind::SentencePiece ? "sentencepiece" : "byte-level BPE", t.tokens.size(),
                t.bos_id ? *t.bos_id : -1, t.eos_id ? *t.eos_id : -1, t.chat_template.empty() ? "no" : "yes");
  } else {
    std::printf("\ntokenizer: none\n");
  }
  std::printf("\ngolden samples: %zu\n", m.samples.size());
  for (size_t i = 0; i < m.samples.size(); ++i)
    std::printf("  sample %zu: %zu prompt tokens + %zu decode steps\n", i, m.samples[i].prompt.size(),
                m.samples[i].decode.size());
  return 0;
}

}  // namespace ptn
