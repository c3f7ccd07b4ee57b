// The graph builder follows the family table: every runnable row has a builder, other
// families are refused with their name (and the row's reason), and one small config per
// family builds the layers its spec asks for.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/families.h"
#include "formats/hf_config.h"
#include "models/decoder.h"

namespace ptn {
namespace {

int count_ops(const Graph& g, OpType op) {
  int n = 0;
  for (const auto& node : g.nodes) n += node.op == op;
  return n;
}

TEST(Decoder, EveryRunnableFamilyHasABuilder) {
  for (const FamilyInfo& f : all_families())
    EXPECT_EQ(family_supported(f.name), f.block != Block::Unsupported) << f.name;
  EXPECT_FALSE(family_supported("no-such-family"));
}

TEST(Decoder, OtherFamiliesAreRefusedByName) {
  ModelSpec s;
  for (const char* family : {"no-such-family", "mamba2"}) {
    s.family = family;
    try {
      build_decoder_graph(s, {});
      FAIL() << family << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
      EXPECT_NE(std::string(e.what()).find(std::string("model family '") + family + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(Decoder, GemmaLayersHaveSandwichNormsAndQkNorms) {
  nlohmann::json c = {{"architectures", {"Gemma3ForCausalLM"}}, {"vocab_size", 300}, {"hidden_size", 64},
                      {"intermediate_size", 96}, {"num_hidden_layers", 6}, {"num_attention_heads", 4},
                      {"num_key_value_heads", 2}, {"head_dim", 16}, {"sliding_window", 32}};
  Graph g = build_decoder_graph(model_spec_from_hf_config(c, "cfg"), {});
  // Per layer: attn, q, k norms + post-attention, pre-FFN, post-FFN norms; then the final norm.
  EXPECT_EQ(count_ops(g, OpType::RMSNorm), 6 * 6 + 1);
  EXPECT_EQ(count_ops(g, OpType::UpdateAndAttend), 6);
  EXPECT_EQ(count_ops(g, OpType::GeGLU), 6);
  EXPECT_EQ(count_ops(g, OpType::Rope), 2 * 6);
}

TEST(Decoder, LlamaLayersAreAttentionAndSwiGlu) {
  nlohmann::json c = {{"architectures", {"LlamaForCausalLM"}}, {"vocab_size", 300}, {"hidden_size", 64},
                      {"intermediate_size", 96}, {"num_hidden_layers", 3}, {"num_attention_heads", 4}};
  Graph g = build_decoder_graph(model_spec_from_hf_config(c, "cfg"), {});
  EXPECT_EQ(count_ops(g, OpType::RMSNorm), 2 * 3 + 1);
  EXPECT_EQ(count_ops(g, OpType::SwiGLU), 3);
  EXPECT_EQ(count_ops(g, OpType::Add), 2 * 3);
  EXPECT_EQ(count_ops(g, OpType::Linear), 7 * 3 + 1);
}

// Phi-2: one LayerNorm (weight and bias) per layer feeding both attention and the MLP, the MLP
// up -> gelu -> down without a gate, the classifier with a bias; Cohere: RoPE on interleaved pairs.
TEST(Decoder, LayerNormParallelLayers) {
  nlohmann::json c = {{"architectures", {"PhiForCausalLM"}}, {"vocab_size", 300}, {"hidden_size", 64},
                      {"intermediate_size", 96}, {"num_hidden_layers", 3}, {"num_attention_heads", 4}};
  Graph g = build_decoder_graph(model_spec_from_hf_config(c, "cfg"), {});
  EXPECT_EQ(count_ops(g, OpType::LayerNorm), 3 + 1);
  EXPECT_EQ(count_ops(g, OpType::RMSNorm), 0);
  EXPECT_EQ(count_ops(g, OpType::Gelu), 3);
  EXPECT_EQ(count_ops(g, OpType::SwiGLU) + count_ops(g, OpType::GeGLU), 0);
  EXPECT_EQ(count_ops(g, OpType::Linear), 6 * 3 + 1);  // q, k, v, o, up, down; the classifier
  for (const Node& n : g.nodes) {
    if (n.op == OpType::LayerNorm) EXPECT_EQ(n.weights.size(), 2u);
    if (n.op == OpType::Rope) EXPECT_EQ(n.attrs["rope_dim"], 8);  // half of 16
    if (n.op == OpType::Linear && n.output == g.logits) EXPECT_EQ(n.weights.back(), "output.bias");
  }
  // The layer's MLP reads the attention's input norm, not the residual after attention.
  int32_t norm_out = -1;
  for (const Node& n : g.nodes)
    if (n.op == OpType::LayerNorm && norm_out < 0) norm_out = n.output;
  int readers = 0;
  for (const Node& n : g.nodes)
    if (n.op == OpType::Linear && !n.inputs.empty() && n.inputs[0] == norm_out) ++readers;
  EXPECT_EQ(readers, 4);  // q, k, v and fc1
  c["architectures"] = {"CohereForCausalLM"};
  g = build_decoder_graph(model_spec_from_hf_config(c, "cfg"), {});
  for (const Node& n : g.nodes) {
    if (n.op == OpType::Rope) EXPECT_EQ(n.attrs["pairing"], "interleaved");
    if (n.op == OpType::LayerNorm) EXPECT_EQ(n.weights.size(), 1u);
  }
}

// Block::Moe: a layer of experts is attention + one moe_ffn node (no gate/up/down linears, no
// swiglu); Qwen3-MoE's mlp_only_layers keep the gated MLP.
TEST(Decoder, MoeLayersAreOneMoeFfnNode) {
  nlohmann::json c = {{"architectures", {"Qwen3MoeForCausalLM"}}, {"vocab_size", 300}, {"hidden_size", 64},
                      {"intermediate_size", 96}, {"moe_intermediate_size", 32}, {"num_hidden_layers", 3},
                      {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
                      {"num_experts", 6}, {"num_experts_per_tok", 2}, {"norm_topk_prob", true}, {"mlp_only_layers", {2}}};
  Graph g = build_decoder_graph(model_spec_from_hf_config(c, "cfg"), {});
  EXPECT_EQ(count_ops(g, OpType::MoeFfn), 2);
  EXPECT_EQ(count_ops(g, OpType::SwiGLU), 1);
  EXPECT_EQ(count_ops(g, OpType::Linear), 4 * 3 + 3 + 1);  // q/k/v/o per layer, the dense MLP, the classifier
  for (const Node& n : g.nodes) {
    if (n.op != OpType::MoeFfn) continue;
    EXPECT_EQ(n.weights.size(), 1u + 3 * 6);
    EXPECT_EQ(n.attrs.at("experts"), 6);
    EXPECT_EQ(n.attrs.at("top_k"), 2);
    EXPECT_EQ(n.attrs.at("norm_topk_prob"), true);
    EXPECT_EQ(n.attrs.at("shared"), false);
    EXPECT_NE(n.weights[0].find("ffn_gate_inp.weight"), std::string::npos);
    EXPECT_NE(n.weights[3 * 5 + 3].find("ffn_down.5.weight"), std::string::npos);
  }
}

}  // namespace
}  // namespace ptn
